// The terminal page: lists the owner's terminals, opens one in xterm.js over
// the attach WebSocket, and resumes after a dropped connection with `since`,
// so nothing is lost or shown twice. The protocol is in the README.
"use strict";

const $ = (id) => document.getElementById(id);

// The token came in the URL once; the server has set the cookie that carries
// it from now on, so drop it from the address bar and history. If the cookie
// already signs in another owner, the server kept it and said so in a meta
// tag: the link's token stays in memory only, for the switch offered below.
const linkToken = new URLSearchParams(location.search).get("token");
if (linkToken !== null) {
  history.replaceState(null, "", location.pathname);
}

const term = new Terminal({ cursorBlink: true, scrollback: 5000, convertEol: false });
const fit = new FitAddon.FitAddon();
term.loadAddon(fit);
term.open($("screen"));

// Everything about the open terminal's connection. Exposed for tests.
const view = {
  term,
  id: null,
  socket: null,
  stream: null, // the hub's stream id, from hello
  offset: null, // stream offset of the next byte we expect
  readOnly: false,
  repaintNext: false, // the next binary frame is a snapshot's repaint
  ended: false, // exit or 4404: never reconnect
  retry: 250, // reconnect backoff, ms
  connects: 0,
  snapshots: 0,
  drop() { if (this.socket) this.socket.close(); },
};
window.tmuxEngine = view;

function setStatus(text) { $("status").textContent = text; }

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

// Every URL is relative to the page, so the page works mounted under a
// proxy's path prefix (`serve --base-path`): "/api/x" is fetched as "api/x".
const base = new URL(".", location.href);
const url = (path) => new URL(path.replace(/^\//, ""), base);

async function api(method, path, body) {
  const response = await fetch(url(path), {
    method,
    headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const value = await response.json();
  if (!response.ok) throw new Error(`${value.error.code}: ${value.error.message}`);
  return value;
}

function describe(status) {
  if (status.kind === "running") return "running";
  if (status.kind === "exited") {
    const exit = status.exit;
    return exit.signal ? `exited (signal ${exit.signal})` : `exited (code ${exit.code})`;
  }
  return `gone (${status.reason})`;
}

async function refresh() {
  try {
    const terminals = await api("GET", "/api/terminals");
    const list = $("terminals");
    list.replaceChildren(...terminals.map((t) => {
      const item = document.createElement("li");
      item.textContent = t.name || t.id;
      item.dataset.id = t.id;
      item.classList.toggle("open", t.id === view.id);
      const status = document.createElement("span");
      status.className = "status " + t.status.kind;
      status.textContent = describe(t.status);
      item.append(status);
      item.onclick = () => open(t.id, t.name || t.id);
      return item;
    }));
    showError("");
  } catch (error) {
    showError(String(error.message || error));
  }
}

$("new").onclick = async () => {
  try {
    const { cols, rows } = fit.proposeDimensions() || { cols: 80, rows: 24 };
    const t = await api("POST", "/api/terminals", { cols, rows });
    await refresh();
    open(t.id, t.name || t.id);
  } catch (error) {
    showError(String(error.message || error));
  }
};

// Opens terminal `id`, leaving whatever was open.
function open(id, title) {
  if (view.socket) {
    view.socket.onclose = null;
    view.socket.close();
  }
  Object.assign(view, { id, stream: null, offset: null, ended: false, retry: 250 });
  $("title").textContent = title;
  term.reset();
  connect();
  refresh();
  term.focus();
}

function connect() {
  const query = view.stream !== null ? `?since=${view.stream}:${view.offset}` : "";
  const address = url(`api/terminals/${encodeURIComponent(view.id)}/attach${query}`);
  address.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(address);
  socket.binaryType = "arraybuffer";
  view.socket = socket;
  view.repaintNext = false;
  view.connects += 1;
  setStatus(view.connects > 1 ? "reconnecting…" : "connecting…");
  socket.onmessage = (event) => {
    if (typeof event.data === "string") onText(JSON.parse(event.data));
    else onBinary(new Uint8Array(event.data));
  };
  socket.onclose = (event) => onClose(event.code);
}

function onText(frame) {
  switch (frame.type) {
    case "hello":
      // A hello whose offset is not where we left off means a snapshot
      // follows; either way the stream (and its offsets) are the hub's now.
      view.stream = frame.stream;
      view.offset = frame.offset;
      view.readOnly = frame.read_only;
      view.retry = 250;
      $("badge").hidden = !frame.read_only;
      if (term.cols !== frame.cols || term.rows !== frame.rows) sendSize();
      setStatus("connected");
      break;
    case "snapshot":
      view.offset = frame.offset;
      view.repaintNext = true;
      view.snapshots += 1;
      break;
    case "resize":
      if (term.cols !== frame.cols || term.rows !== frame.rows) term.resize(frame.cols, frame.rows);
      break;
    case "exit":
      setStatus(describe(frame.status));
      refresh();
      break;
  }
}

function onBinary(bytes) {
  if (view.repaintNext) {
    view.repaintNext = false;
    term.reset();
    term.write(bytes);
    return;
  }
  term.write(bytes);
  if (view.offset !== null) view.offset += bytes.length;
}

function onClose(code) {
  view.socket = null;
  if (code === 4404) {
    view.ended = true;
    // An exit frame already said how it ended; keep that, else say gone.
    if (!$("status").textContent.startsWith("exited")) setStatus("terminal gone");
    refresh();
    return;
  }
  if (code === 4401 || code === 4403) {
    view.ended = true;
    setStatus(code === 4401 ? "not authorized: open the URL with its token" : "origin not allowed");
    return;
  }
  setStatus(`disconnected (${code}); retrying`);
  setTimeout(() => { if (!view.socket && !view.ended) connect(); }, view.retry);
  view.retry = Math.min(view.retry * 2, 5000);
}

function sendSize() {
  const socket = view.socket;
  if (!socket || socket.readyState !== WebSocket.OPEN || view.readOnly) return;
  socket.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
}

const encoder = new TextEncoder();
term.onData((data) => send(encoder.encode(data)));
term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
term.onResize(sendSize);

function send(bytes) {
  const socket = view.socket;
  if (socket && socket.readyState === WebSocket.OPEN && !view.readOnly) socket.send(bytes);
}

// "Signed in as A; this link is for B": switching is a JSON POST from this
// page, which no link, form or other site can send for the user.
function offerSwitch() {
  const meta = document.querySelector('meta[name="tmux-engine-switch"]');
  if (!meta || linkToken === null) return;
  const notice = document.createElement("p");
  notice.id = "switch";
  notice.setAttribute("role", "alert");
  notice.textContent = `Signed in as ${meta.content}; this link is for ${meta.dataset.link}. `;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = `Switch to ${meta.dataset.link}`;
  button.onclick = async () => {
    try {
      await api("POST", "/", { token: linkToken });
      location.reload();
    } catch (error) {
      showError(String(error.message || error));
    }
  };
  notice.append(button);
  $("side").insertBefore(notice, $("terminals"));
}
offerSwitch();

window.addEventListener("resize", () => fit.fit());
fit.fit();
refresh();
setInterval(refresh, 5000);
