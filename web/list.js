// The page's list of terminals (web/app.js opens one): each entry with its
// status, badges and actions (restart, rename, kill), the peer nodes behind
// a shared front door, and a new terminal's spawn. Only declarations: it is
// loaded before app.js, whose state (`view`, `api`, `$`) these use when
// called, and app.js wires the buttons.
"use strict";
const label = (t) => t.name || t.id;
const dead = (t) => t.status.kind !== "running";

// "2 h ago" for a time in milliseconds since the epoch.
function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 90) return "just now";
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

function badge(text, kind) {
  const span = document.createElement("span");
  span.className = `badge ${kind}`;
  span.textContent = text;
  return span;
}

function action(text, title, onclick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "act";
  button.textContent = text;
  button.title = title;
  button.setAttribute("aria-label", title);
  button.onclick = (event) => {
    event.stopPropagation();
    onclick(button);
  };
  return button;
}

// One entry: name, the program's title, badges, and its actions. Killing
// asks first, inline (a modal confirm() would stop the page's timers).
function entry(t) {
  const item = document.createElement("li");
  item.dataset.id = t.id;
  item.dataset.name = label(t);
  item.dataset.status = t.status.kind;
  if (homeNode) item.dataset.node = nodeOf(t.id);
  item.classList.toggle("open", t.id === view.id);
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = label(t);
  item.append(name);
  const title = view.titles[t.id];
  if (title) {
    const line = document.createElement("span");
    line.className = "title";
    line.textContent = title;
    item.append(line);
  }
  const badges = document.createElement("span");
  badges.className = "badges";
  if (homeNode) badges.append(badge(nodeOf(t.id), "node"));
  badges.append(badge(describe(t.status), `status ${t.status.kind}`));
  if (t.restart !== "never") badges.append(badge(t.restart, "policy"));
  // Issue 26: brought back after the machine restarted, its old history
  // above a marked line in its scrollback.
  if (t.restored_ms) badges.append(badge(`restored after reboot, ${ago(t.restored_ms)}`, "restored"));
  if (view.readOnly) badges.append(badge("read-only", "ro"));
  const watching = view.viewers[t.id] || 0;
  if (watching > 0) badges.append(badge(watching === 1 ? "1 viewer" : `${watching} viewers`, "viewers"));
  item.append(badges);
  const actions = document.createElement("span");
  actions.className = "actions";
  if (dead(t) && t.restart === "on-attach") {
    // Attaching recreates a dead on-attach terminal (the registry's policy).
    actions.append(action("↻", `restart ${label(t)}`, () => openTerminal(t.id, label(t))));
  }
  actions.append(action("✎", `rename ${label(t)}`, () => rename(item, t)));
  actions.append(action("✕", `kill ${label(t)}`, () => {
    const ask = document.createElement("span");
    ask.className = "confirm";
    ask.textContent = `Kill ${label(t)}? `;
    ask.append(
      action("Kill", `really kill ${label(t)}`, () => kill(t.id)),
      action("Keep", "keep it", () => ask.remove()),
    );
    item.append(ask);
  }));
  item.append(actions);
  item.onclick = () => openTerminal(t.id, label(t));
  return item;
}

// An inline name field: Enter renames (POST .../rename), Escape keeps it.
function rename(item, t) {
  const field = document.createElement("input");
  field.className = "rename";
  field.value = t.name || "";
  field.maxLength = 64;
  field.setAttribute("aria-label", `new name for ${label(t)}`);
  field.onclick = (event) => event.stopPropagation();
  field.onkeydown = async (event) => {
    if (event.key === "Escape") {
      field.remove();
      refresh();
    }
    if (event.key !== "Enter") return;
    event.preventDefault();
    try {
      const renamed = await apiFor(t.id, "POST", `/api/terminals/${encodeURIComponent(t.id)}/rename`, { name: field.value.trim() });
      if (t.id === view.id) {
        view.name = label(renamed);
        showTitle();
        history.replaceState(null, "", `${location.pathname}${location.search}#t=${encodeURIComponent(reference(view.id, view.name))}`);
      }
      field.remove();
      refresh();
    } catch (error) {
      failed(error);
    }
  };
  item.querySelector(".name").after(field);
  field.focus();
  field.select();
}

// A peer node's terminals and viewers; none when it does not answer
// within 1.5 s (the proxy's 502 for a node that is down comes at once),
// and it is marked unreachable.
async function peerList(peer) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 1500);
  const credential = credentialAt(peer.base);
  const headers = credential ? { authorization: `Bearer ${credential}` } : {};
  const get = (path) => fetch(url(path, peer.base), { headers, signal: abort.signal });
  try {
    const [list, viewers] = await Promise.all([get("api/terminals"), get("api/viewers")]);
    if (list.status === 401) {
      view.nodes[peer.name] = "signed out";
      return { terminals: [], viewers: {} };
    }
    if (!list.ok) throw new Error(`HTTP ${list.status}`);
    const answer = { terminals: await list.json(), viewers: viewers.ok ? await viewers.json() : {} };
    view.nodes[peer.name] = "reachable";
    return answer;
  } catch (error) {
    view.nodes[peer.name] = "unreachable";
    return { terminals: [], viewers: {} };
  } finally {
    clearTimeout(timer);
    showNodes();
  }
}

// Which nodes answer: one line above the list, each peer's state.
function showNodes() {
  if (!homeNode) return;
  let line = $("nodes");
  if (!line) {
    line = document.createElement("p");
    line.id = "nodes";
    $("side").insertBefore(line, $("terminals"));
  }
  const parts = [`${homeNode} (here)`, ...peers.map((p) => `${p.name}${view.nodes[p.name] && view.nodes[p.name] !== "reachable" ? `: ${view.nodes[p.name]}` : ""}`)];
  line.textContent = `Nodes: ${parts.join(" · ")}`;
  line.classList.toggle("unreachable", Object.values(view.nodes).some((state) => state !== "reachable"));
}

// Twice a second, each peer's /healthz (public, cheap): a node that went
// down is said so within 2 s, one that came back is listed again.
async function probeNodes() {
  await Promise.all(peers.map(async (peer) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 900);
    let up = false;
    try {
      up = (await fetch(url("healthz", peer.base), { signal: abort.signal })).ok;
    } catch (error) {
      up = false;
    } finally {
      clearTimeout(timer);
    }
    const was = view.nodes[peer.name];
    if (!up && was !== "unreachable") {
      view.nodes[peer.name] = "unreachable";
      view.terminals = view.terminals.filter((t) => nodeOf(t.id) !== peer.name);
      for (const li of document.querySelectorAll(`#terminals li[data-node="${CSS.escape(peer.name)}"]`)) li.remove();
      showNodes();
    } else if (up && was === "unreachable") refresh();
  }));
}

async function refresh() {
  try {
    const [own, viewers, ...others] = await Promise.all([
      api("GET", "/api/terminals"),
      // A serve older than the badge has no such route: no badge then.
      api("GET", "/api/viewers").catch(() => ({})),
      ...peers.map(peerList),
    ]);
    const terminals = own.concat(...others.map((other) => other.terminals));
    view.terminals = terminals;
    view.viewers = Object.assign(viewers, ...others.map((other) => other.viewers));
    // Not while a name is being typed in the list.
    if (document.activeElement?.classList.contains("rename")) return terminals;
    // A confirm being answered survives the refresh.
    const asking = new Set([...document.querySelectorAll("#terminals li")]
      .filter((li) => li.querySelector(".confirm")).map((li) => li.dataset.id));
    $("terminals").replaceChildren(...terminals.map((t) => {
      const item = entry(t);
      if (asking.has(t.id)) item.querySelector(".actions .act:last-child").click();
      return item;
    }));
    $("clear").disabled = !terminals.some(dead);
    $("spawn-name").placeholder = freeName("shell");
    showError("");
    return terminals;
  } catch (error) {
    failed(error);
    return null;
  }
}

async function kill(id) {
  try {
    await apiFor(id, "DELETE", `/api/terminals/${encodeURIComponent(id)}`);
    if (id === view.id) closeTerminal();
  } catch (error) {
    failed(error);
  }
  refresh();
}


// `stem-N` for the smallest N no listed terminal is named.
function freeName(stem) {
  const taken = new Set(view.terminals.map((t) => t.name));
  for (let n = 1; ; n += 1) if (!taken.has(`${stem}-${n}`)) return `${stem}-${n}`;
}

// A command line's program, as a name's stem: `python3 -m http.server` -> python3.
function stem(line) {
  const program = line.trim().split(/\s+/)[0].split("/").pop().replace(/[^A-Za-z0-9._-]/g, "");
  return program || "shell";
}

async function spawn({ name, line, restart }) {
  const { cols, rows } = fit.proposeDimensions() || { cols: 80, rows: 24 };
  const body = { cols, rows };
  if (line) body.shell = line;
  if (restart && restart !== "never") body.restart = restart;
  // A picked name may be taken meanwhile (another tab): pick again, twice.
  for (let attempt = 0; ; attempt += 1) {
    body.name = name || freeName(stem(line || ""));
    try {
      const t = await api("POST", "/api/terminals", body);
      await refresh();
      openTerminal(t.id, label(t));
      return;
    } catch (error) {
      if (name || error.code !== "DUPLICATE_NAME" || attempt === 2) throw error;
      await refresh();
    }
  }
}
