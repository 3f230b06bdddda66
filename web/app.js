// The terminal page: lists the owner's terminals, opens one in xterm.js over
// the attach WebSocket, and resumes after a dropped connection with `since`,
// so nothing is lost or shown twice. The protocol is in docs/serve.md; the
// list's actions use the HTTP API (src/bridge/openapi/). The list itself is
// in list.js, the sign-in in signin.js (both loaded before this file, only
// declarations), options in options.js, copy/paste and the on-screen keys in
// keys.js.
"use strict";

const $ = (id) => document.getElementById(id);

// Sign-in (src/bridge/signin.rs): the link serve prints or `tmux-engine link`
// mints carries a one-time code in its fragment (`#code=`, never sent to a
// server or a proxy's log). The page drops it from the address bar at once and
// exchanges it for a session, kept in this origin's localStorage (no other
// port or site can read it, unlike a cookie, which every port of the host
// gets) and sent as `Authorization: Bearer` and in the WebSocket's
// `bearer.` subprotocol. A used or expired code, or no session at all,
// shows the sign-in panel: never access.
const SESSION = `tmux-engine.session:${new URL(".", location.href).pathname}`;
function hashParams() { return new URLSearchParams(location.hash.slice(1)); }
// A link minted by a node behind a shared front door names it (`&node=`):
// its code is that node's to exchange.
let codeNode = null;
function takeCode() {
  const params = hashParams();
  const code = params.get("code");
  if (code === null) return null;
  codeNode = params.get("node");
  params.delete("code");
  params.delete("node");
  const rest = params.toString().replace(/%2F/g, "/");
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return code;
}
let session = localStorage.getItem(SESSION);
// A read-only principal (the session says): the page offers nothing that
// writes (the API would refuse it), and every entry says so.
let readOnlyAccess = false;

const options = pageOptions.current();
const term = new Terminal({ allowProposedApi: true, convertEol: false, ...pageOptions.terminal(options) });
const fit = new FitAddon.FitAddon();
term.loadAddon(fit);

// Everything about the open terminal's connection. Exposed for tests.
const view = {
  term,
  options,
  id: null,
  name: null,
  early: false, // opened by `#t` before the sign-in settled, no hello yet
  socket: null,
  stream: null, // the hub's stream id, from hello
  offset: null, // stream offset of the next byte we expect
  readOnly: readOnlyAccess,
  repaintNext: false, // the next binary frame is a snapshot's repaint
  ended: false, // exit or 4404: never reconnect
  restarting: null, // the reason of a 1012 close, until the next hello
  retry: 250, // reconnect backoff, ms
  connects: 0,
  snapshots: 0,
  addons: [], // the addons that loaded
  renderer: "dom", // "webgl" when its addon loaded
  rendererError: null, // why WebGL did not
  title: "", // the program's title (OSC 0/2)
  titles: {}, // id -> the last title seen
  viewers: {}, // id -> viewers in this serve (GET /api/viewers)
  lastLink: null, // the last link activated
  lastCopy: null, // the last text put on the clipboard (OSC 52 or copy)
  lastOffer: null, // the last text a program asked to copy (OSC 52)
  terminals: [], // the last list
  typing: [], // the others typing into the open terminal now (the typing frame)
  historyNext: null, // the next binary frame is this history frame's page
  snapshotAt: null, // the offset of the last snapshot (the past view ends there)
  past: null, // the view of the past output (past.js)
  drop() { if (this.socket) this.socket.close(); },
};
window.tmuxEngine = view;

// Unicode 11 widths: wide CJK and emoji take two cells, as in tmux.
const unicode = new Unicode11Addon.Unicode11Addon();
term.loadAddon(unicode);
term.unicode.activeVersion = "11";
view.addons.push("fit", "unicode11");

// Links open in a new tab that cannot reach back to this page.
term.loadAddon(new WebLinksAddon.WebLinksAddon((event, uri) => {
  view.lastLink = uri;
  const opened = window.open();
  if (opened) {
    opened.opener = null;
    opened.location.href = uri;
  }
}));
view.addons.push("web-links");

// The user's own copy (a selection, keys.js).
function copy(text) {
  view.lastCopy = text;
  if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => setStatus("copy blocked by the browser"));
}

// OSC 52: a program may put text on the clipboard only as the
// `clipboardWrite` option says: `ask` (the default) shows a notice with the
// text's start and Allow / Deny, `allow` writes at once, `deny` never
// (a program once put `rm -rf ~ # INJECTED` there to be pasted later).
// Reading the clipboard back is always refused (a program, maybe another
// owner's, must not see what the user copied elsewhere).
function programCopy(text) {
  view.lastOffer = text;
  if (options.clipboardWrite === "deny") return;
  if (options.clipboardWrite === "allow") return copy(text);
  $("clipboard-ask")?.remove();
  const notice = document.createElement("p");
  notice.id = "clipboard-ask";
  notice.setAttribute("role", "alert");
  const shown = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  notice.textContent = `The program wants to copy ${text.length} characters: “${shown}” `;
  const allow = action("Allow", "allow this copy", () => { copy(text); notice.remove(); });
  const deny = action("Deny", "deny this copy", () => notice.remove());
  notice.append(allow, deny);
  $("side").insertBefore(notice, $("terminals"));
}
term.loadAddon(new ClipboardAddon.ClipboardAddon(undefined, {
  readText: async () => "",
  writeText: async (selection, text) => { if (selection === "c" || selection === "") programCopy(text); },
}));
view.addons.push("clipboard");

term.open($("screen"));

// The GPU's name when WebGL2 is drawn on the CPU (SwiftShader, llvmpipe:
// a machine or VM without a GPU driver, headless Chromium), else null.
// There the DOM renderer paints sooner: the page attached to a long
// history painted its screen 30-55 ms after the socket opened with it,
// 45-147 ms with WebGL on SwiftShader, and was busy for 100-250 ms more
// (issue 49, docs/benchmarks.md).
function softwareGl() {
  try {
    const gl = document.createElement("canvas").getContext("webgl2");
    if (!gl) return null;
    const info = gl.getExtension("WEBGL_debug_renderer_info");
    const name = String(gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
    gl.getExtension("WEBGL_lose_context")?.loseContext();
    return /swiftshader|llvmpipe|softpipe|software/i.test(name) ? name : null;
  } catch {
    return null;
  }
}

// After open: the renderer needs the element. No WebGL (headless, no GPU,
// a blocklisted driver), a software one (above) or a lost context: the
// DOM renderer stays.
try {
  const software = softwareGl();
  if (software) throw new Error(`WebGL is drawn on the CPU (${software}): the DOM renderer is faster`);
  const webgl = new WebglAddon.WebglAddon();
  webgl.onContextLoss(() => {
    webgl.dispose();
    view.renderer = "dom";
  });
  term.loadAddon(webgl);
  view.renderer = "webgl";
  view.addons.push("webgl");
} catch (error) {
  view.rendererError = String(error.message || error);
}

// Sixel and iTerm inline images (its sixel decoder is WebAssembly: the
// CSP's 'wasm-unsafe-eval').
try {
  view.image = new ImageAddon.ImageAddon({ sixelSupport: true, iipSupport: true });
  term.loadAddon(view.image);
  view.addons.push("image");
} catch (error) {
  view.imageError = String(error.message || error);
}

function setStatus(text) { $("status").textContent = text; }

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function failed(error) { showError(String(error.message || error)); }

// Every URL is relative to the page, so the page works mounted under a
// proxy's path prefix (`serve --base-path`): "/api/x" is fetched as "api/x".
const base = new URL(".", location.href);
const url = (path, at = base) => new URL(path.replace(/^\//, ""), at);

// Many hosts behind one front door (`serve --node`, src/bridge/node.rs):
// this serve's node and its peers, each mounted at its own path of this
// origin. A terminal's id names its node (`b.t-…`), so every call about a
// terminal goes to its node's path, with the session kept for that path
// (a link of that node signed it in), or none behind an SSO proxy.
const nodesMeta = document.querySelector('meta[name="tmux-engine-nodes"]');
const nodeConfig = nodesMeta ? JSON.parse(nodesMeta.content) : null;
const homeNode = nodeConfig ? nodeConfig.node : null;
const peers = nodeConfig ? nodeConfig.peers.map((p) => ({ name: p.name, base: new URL(p.path, location.origin) })) : [];
view.nodes = {}; // peer name -> "reachable" | "unreachable" | "signed out"
function nodeOf(id) {
  const dot = id ? id.indexOf(".") : -1;
  return dot > 0 ? id.slice(0, dot) : homeNode;
}
function baseOf(id) {
  const node = nodeOf(id);
  return peers.find((p) => p.name === node)?.base || base;
}
function credentialAt(at) {
  return at.href === base.href ? session : localStorage.getItem(`tmux-engine.session:${at.pathname}`);
}
// `api` about terminal `id`, at its node.
const apiFor = (id, method, path, body) => api(method, path, body, credentialAt(baseOf(id)), baseOf(id));

async function api(method, path, body, credential = session, at = base) {
  const headers = body ? { "content-type": "application/json" } : {};
  if (credential) headers.authorization = `Bearer ${credential}`;
  const response = await fetch(url(path, at), {
    method,
    headers,
    body: body ? JSON.stringify(body) : undefined,
  });
  const value = await response.json();
  if (response.status === 401 && credential === session && at === base && view.signedIn) signedOut();
  if (!response.ok) {
    const error = new Error(`${value.error.code}: ${value.error.message}`);
    error.code = value.error.code;
    throw error;
  }
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

// The list's buttons (its entries and spawn are web/list.js's).
$("clear").onclick = async () => {
  const gone = view.terminals.filter(dead);
  await Promise.all(gone.map((t) => apiFor(t.id, "DELETE", `/api/terminals/${encodeURIComponent(t.id)}`).catch(failed)));
  if (gone.some((t) => t.id === view.id)) closeTerminal();
  refresh();
};

$("new").onclick = () => spawn({}).catch(failed);
$("welcome-new").onclick = $("new").onclick;

function toggle(button, panel) {
  panel.hidden = !panel.hidden;
  button.setAttribute("aria-expanded", String(!panel.hidden));
}
$("more").onclick = () => {
  toggle($("more"), $("spawn"));
  if (!$("spawn").hidden) $("spawn-name").focus();
};
$("spawn").onsubmit = (event) => {
  event.preventDefault();
  spawn({
    name: $("spawn-name").value.trim(),
    line: $("spawn-command").value.trim(),
    restart: $("spawn-restart").value,
  }).then(() => {
    $("spawn-name").value = "";
    $("spawn-command").value = "";
    toggle($("more"), $("spawn"));
  }, failed);
};

// The Options panel: what it sets is saved and applied at once.
$("settings").onclick = () => toggle($("settings"), $("options"));
for (const key of pageOptions.keys) {
  const input = $(`opt-${key}`);
  input.value = String(options[key]);
  input.onchange = () => {
    if (!pageOptions.save(key, input.value)) {
      input.value = String(options[key]);
      return;
    }
    // The saved choice beats the URL's from now on, reloads included.
    const query = new URLSearchParams(location.search);
    if (query.has(key)) {
      query.delete(key);
      const rest = query.toString();
      history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
    }
    Object.assign(options, pageOptions.current());
    applyOptions();
  };
}

function applyOptions() {
  Object.assign(term.options, pageOptions.terminal(options));
  document.body.dataset.theme = options.theme;
  fit.fit();
}
document.body.dataset.theme = options.theme;

// Opens terminal `id` (or a name: the hello then says which id it is),
// leaving whatever was open; the fragment names it, so a reload (or a link)
// reopens it. `early`: opened before the sign-in settled (below), so the
// list is not fetched here, and a refusal waits for the list to judge it.
// What `#t=` names: the name on this page's own node, else the id (a
// peer's terminal: its name may be one of ours too).
function reference(id, name) {
  return homeNode && nodeOf(id) !== homeNode ? id : name;
}

function openTerminal(id, name, { early = false } = {}) {
  if (view.socket) {
    view.socket.onclose = null;
    view.socket.close();
  }
  Object.assign(view, { id, name, early, stream: null, offset: null, ended: false, retry: 250, historyNext: null, snapshotAt: null });
  view.past.reset(null);
  showTyping([]);
  view.title = view.titles[id] || "";
  showTitle();
  document.body.classList.add("opened");
  // The bar's buttons that show with a terminal open change the screen's
  // box: fitted to it now, the attach asks for the size the page keeps.
  // Fitted later (the box's observer, a frame on), the first snapshot was
  // taken at the old size and a resize followed at once: tmux reflowed
  // the whole history, and a second snapshot was sent and parsed before
  // the first paint (issue 49).
  fit.fit();
  history.replaceState(null, "", `${location.pathname}${location.search}#t=${encodeURIComponent(reference(id, name))}`);
  term.reset();
  connect();
  if (!early) refresh();
  term.focus();
}

// Whether `t` (a listed terminal) is the open one: by id, or by the name
// an early socket was opened with before its hello named the id.
function showing(t) {
  return view.id !== null && (view.id === t.id || (view.id === t.name && view.name === t.name));
}

// Back to the welcome: nothing open. `keepHash`: the fragment still says
// what was asked for (a `#t` that named no terminal of ours).
function closeTerminal({ keepHash = false } = {}) {
  if (view.socket) {
    view.socket.onclose = null;
    view.socket.close();
  }
  Object.assign(view, { id: null, name: null, socket: null, stream: null, offset: null, ended: true, title: "", historyNext: null, snapshotAt: null });
  view.past.reset(null);
  showTyping([]);
  document.body.classList.remove("opened");
  if (!keepHash) history.replaceState(null, "", location.pathname + location.search);
  term.reset();
  setStatus("");
  showTitle();
}

function showTitle() {
  $("title").textContent = view.name ? (view.title ? `${view.name}: ${view.title}` : view.name) : "tmux-engine";
  document.title = view.title || view.name || "tmux-engine";
}

term.onTitleChange((title) => {
  view.title = title;
  if (view.id) view.titles[view.id] = title;
  showTitle();
  const line = document.querySelector(`#terminals li[data-id="${CSS.escape(view.id || "")}"] .title`);
  if (line) line.textContent = title;
  else refresh();
});

function connect() {
  // The page's size goes with the attach: the first snapshot is taken at
  // it (a writable viewer's; serve ignores it for a read-only one).
  const size = `cols=${term.cols}&rows=${term.rows}`;
  const query = view.stream !== null ? `?since=${view.stream}:${view.offset}&${size}` : `?${size}`;
  const at = baseOf(view.id);
  const address = url(`api/terminals/${encodeURIComponent(view.id)}/attach${query}`, at);
  address.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const credential = credentialAt(at);
  const socket = new WebSocket(address, credential ? ["tmux-engine", `bearer.${credential}`] : ["tmux-engine"]);
  socket.binaryType = "arraybuffer";
  view.socket = socket;
  view.repaintNext = false;
  // A page asked for on the last socket is asked again once this one
  // says hello (a resume keeps what is loaded).
  view.historyNext = null;
  view.connects += 1;
  // While the host restarts, its reason stays up until the next serve answers.
  if (!view.restarting) setStatus(view.connects > 1 ? "reconnecting…" : "connecting…");
  socket.onmessage = (event) => {
    if (typeof event.data === "string") onText(JSON.parse(event.data));
    else onBinary(new Uint8Array(event.data));
  };
  socket.onclose = (event) => onClose(event.code, event.reason);
}

function onText(frame) {
  switch (frame.type) {
    case "hello":
      // An early socket named its terminal by `#t`'s name: the hello says
      // which terminal it is, so the list marks it and a reconnect uses the id.
      view.early = false;
      if (frame.id && frame.id !== view.id) {
        view.id = frame.id;
        view.name = frame.name || frame.id;
        showTitle();
        for (const li of document.querySelectorAll("#terminals li")) li.classList.toggle("open", li.dataset.id === view.id);
      }
      // A hello whose offset is not where we left off means a snapshot
      // follows; either way the stream (and its offsets) are the hub's now.
      view.stream = frame.stream;
      view.offset = frame.offset;
      view.readOnly = frame.read_only || readOnlyAccess;
      view.retry = 250;
      view.restarting = null;
      $("badge").hidden = !view.readOnly;
      if (term.cols !== frame.cols || term.rows !== frame.rows) sendSize();
      setStatus("connected");
      // The attach is done: this viewer is counted and an `on-attach`
      // terminal runs again, so the list says so now, not at its next
      // 5 s refresh (the one at open ran before the attach).
      if (view.signedIn) refresh();
      // Another stream: its offsets are not the loaded past's.
      if (view.past.state.stream !== frame.stream) view.past.reset(frame.stream);
      else view.past.reconnected();
      break;
    case "snapshot":
      view.offset = frame.offset;
      view.repaintNext = true;
      view.snapshots += 1;
      break;
    case "history":
      view.historyNext = frame;
      break;
    case "resize":
      if (term.cols !== frame.cols || term.rows !== frame.rows) term.resize(frame.cols, frame.rows);
      break;
    case "exit":
      setStatus(describe(frame.status));
      refresh();
      break;
    case "typing":
      showTyping(frame.who);
      break;
  }
}

// Who else types into the open terminal right now (another tab, a share
// link's holder): serve tells every viewer when that changes.
function showTyping(who) {
  view.typing = who;
  const shown = $("typing");
  shown.hidden = who.length === 0;
  shown.textContent = who.length === 1 ? `${who[0]} is typing` : `${who.join(", ")} are typing`;
}

function onBinary(bytes) {
  if (view.historyNext) {
    const frame = view.historyNext;
    view.historyNext = null;
    view.past.onPage(frame, bytes);
    return;
  }
  if (view.repaintNext) {
    view.repaintNext = false;
    term.reset();
    view.snapshotAt = view.offset;
    term.write(bytes);
    // The past's newest page is asked for beside the repaint's parse: it
    // is not parsed by xterm.js (past.js keeps its bytes and finds its
    // lines, ~1 ms), so it does not hold up the first frame.
    view.past.prefetch(view.stream, view.offset);
    return;
  }
  term.write(bytes);
  if (view.offset !== null) view.offset += bytes.length;
}

// The past output above the screen (issue 49, past.js): xterm.js holds the
// snapshot (tmux's screen and its last lines of history) and the output
// since; the whole raw history before it is a view laid over the terminal,
// opened by scrolling up past the terminal's top (or the History button)
// and left by scrolling down past its bottom, Esc or typing.
view.past = pastView.create({
  element: $("past"),
  term,
  ask(before, max) {
    const socket = view.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify({ type: "history", before, max }));
  },
  closed() { term.focus(); },
});

// Opens the past view. It ends where the terminal's buffer begins: the
// snapshot, unless xterm.js has since dropped its oldest lines (its
// scrollback is full), then the output now (its bottom repeats some of
// the terminal's lines).
function openPast() {
  const buffer = term.buffer.active;
  const full = buffer.type !== "normal" || buffer.length >= term.rows + term.options.scrollback;
  return view.past.open(full || view.snapshotAt === null ? view.offset : view.snapshotAt);
}
view.openPast = openPast;

// A wheel up at the top of the terminal's own buffer goes on into the past.
$("screen").addEventListener("wheel", (event) => {
  const buffer = term.buffer.active;
  if (event.deltaY >= 0 || buffer.type !== "normal" || buffer.viewportY > 0 || !view.past.available()) return;
  if (!openPast()) return;
  event.preventDefault();
  event.stopPropagation();
}, { capture: true, passive: false });
$("past-open").onclick = () => openPast();

function onClose(code, reason) {
  view.socket = null;
  // A new connection is told afresh.
  showTyping([]);
  // 1012: serve drains to restart (SIGTERM); the terminal keeps running and
  // the next serve on this address takes the page back, signed in (it takes
  // over the sessions). Say why and retry at most every 2 s until it answers.
  if (code === 1012 || (view.restarting && code === 1006)) {
    view.restarting = view.restarting || reason || "this host is restarting; reconnecting…";
    setStatus(view.restarting);
    setTimeout(() => { if (!view.socket && !view.ended) connect(); }, view.retry);
    view.retry = Math.min(view.retry * 2, 2000);
    return;
  }
  if (code === 4404) {
    view.ended = true;
    // An exit frame already said how it ended; keep that, else say gone.
    if (!$("status").textContent.startsWith("exited")) setStatus("terminal gone");
    // An early socket refused: the sign-in's list says what to show.
    if (!view.early) refresh();
    return;
  }
  if (code === 4401 || code === 4403) {
    view.ended = true;
    setStatus(code === 4401 ? "signed out" : "origin not allowed");
    // A peer's session ending is that node's: this page stays signed in.
    if (code === 4401 && baseOf(view.id) === base) signedOut();
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
// Typed text, through the key bar's Ctrl (keys.js).
term.onData((data) => send(encoder.encode(keys.typed(data))));
term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
term.onResize(sendSize);

function send(bytes) {
  const socket = view.socket;
  if (socket && socket.readyState === WebSocket.OPEN && !view.readOnly) socket.send(bytes);
}

// "Share…": a one-hour link to the open terminal only (a share link,
// src/bridge/scope.rs), copied to the clipboard and shown.
$("share").onclick = () => {
  const choices = $("share-choices");
  choices.hidden = !choices.hidden;
  $("share").setAttribute("aria-expanded", String(!choices.hidden));
};
async function share(readOnly) {
  try {
    const minted = await apiFor(view.id, "POST", "/api/links", { terminal: view.id, read_only: readOnly, expires: 3600 });
    const link = new URL(minted.path.replace(/^\//, ""), baseOf(view.id)).href;
    view.lastShare = link;
    copy(link);
    $("share-choices").hidden = true;
    setStatus(`${readOnly ? "read-only" : "read-write"} link copied (1 hour, once)`);
  } catch (error) {
    failed(error);
  }
}
$("share-ro").onclick = () => share(true);
$("share-rw").onclick = () => share(false);

// The sign-in panel's form (the sign-in itself is web/signin.js).
$("signin-form").onsubmit = async (event) => {
  event.preventDefault();
  const text = $("signin-code").value.trim();
  const code = /[#&]code=([^&]+)/.exec(text)?.[1] || text;
  const next = await exchange(code);
  if (!next) {
    $("signin-why").textContent = "That code was already used, has expired, or is not a code.";
    return;
  }
  localStorage.setItem(SESSION, next.session);
  location.reload();
};

// `#t=NAME` (or an id): the terminal to open, if it is listed.
function wanted() {
  return hashParams().get("t");
}

// `listed`: a list just fetched, so opening costs no second one.
async function openWanted(listed) {
  const target = wanted();
  if (target === null) return;
  const terminals = listed || (await refresh());
  if (!terminals) return;
  const t = terminals.find((t) => t.name === target || t.id === target);
  if (t) {
    if (!showing(t)) openTerminal(t.id, label(t));
    return;
  }
  // An early socket's target that is not ours: the welcome again, as if
  // it had never opened (its socket is refused anyway: 4404).
  if (view.id === target) closeTerminal({ keepHash: true });
  showError(`no terminal ${target}`);
}
// A link opened in this page (`#code=`): sign in with it, or ask.
window.addEventListener("hashchange", () => {
  if (hashParams().has("code")) location.reload();
  else if (view.signedIn) openWanted();
});

window.addEventListener("resize", () => fit.fit());
fit.fit();

// `#t=NAME` with a kept session (a person's next visit): the terminal's
// socket opens at once, beside the session check and the list, rather than
// after them (issue 27: three round trips stood before it). The socket is
// authenticated on its own, so a session that ended still fails closed
// (4401: the sign-in panel, not a byte of the terminal); a `#t` the list
// does not have, or a share link's other terminal, is closed once the list
// says so. A link's `#code=` signs in first: no early socket then.
const early = session !== null && !hashParams().has("code") ? wanted() : null;
if (early !== null) openTerminal(early, early, { early: true });

signIn().then((who) => {
  if (!who) {
    // The session check failed: nothing of the early socket stays.
    if (early !== null && view.id !== null) closeTerminal({ keepHash: true });
    return;
  }
  view.signedIn = true;
  view.owner = who.owner;
  // A share link's holder: that one terminal, nothing to spawn or kill.
  view.shared = who.terminal || null;
  if (view.shared) document.body.classList.add("shared");
  readOnlyAccess = who.read_only;
  // An early socket's hello may have said read-only already: keep it.
  view.readOnly = (view.socket !== null && view.readOnly) || readOnlyAccess;
  if (readOnlyAccess) document.body.classList.add("read-only");
  refresh().then((terminals) => {
    const shared = view.shared && terminals && terminals.find((t) => t.id === view.shared);
    if (shared) {
      if (!showing(shared)) openTerminal(shared.id, label(shared));
    } else openWanted(terminals);
  });
  setInterval(refresh, 5000);
  if (peers.length) setInterval(probeNodes, 500);
});
