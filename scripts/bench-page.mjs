// The page's first paint (issue 27, item 4): the time from a navigation to
// the first prompt painted in Chromium, serve's page beside ttyd's page, in
// one run, alternating round by round.
//
//   cargo build --release
//   node --experimental-websocket scripts/bench-page.mjs [ROUNDS]
//
// Needs: ttyd (TTYD, default /tmp/peers/ttyd-src/build/ttyd: built from
// tsl0922/ttyd 1.7.7, nothing of it is in this repository) and Debian's
// chromium (CHROMIUM). One headless Chromium loads both pages, each from
// its own origin. serve's page opens an idle terminal that already runs
// (`#t=NAME`, the session signed in once before the rounds: a person's
// next visit); ttyd's page starts its program on connect (how ttyd
// serves a page). A script injected before each document's own watches
// the terminal's buffer at every animation frame and notes the time
// (since the navigation began) the prompt is first in it: the frame that
// paints it. Two passes: warm (the browser's cache as a visit leaves it)
// and cold (cache disabled: every byte fetched). Medians and ratios are
// printed; every process started is stopped by its process group.
//
//   node --experimental-websocket scripts/bench-page.mjs --history 10000,100000,1000000 [ROUNDS]
//
// A long history in one frame (issue 49, item 3): for each N, a terminal
// whose program printed N lines (`history_limit` N, `keep_history`: what
// the stream's 4 MiB ring no longer holds is read from the kept history)
// and then a marker; the page is opened on it and the injected script
// notes, at every animation frame, when the marker is painted, how many
// lines the page can scroll through (xterm.js's buffer: its scrollback and
// the screen) and when line 1 of the history is in it, from the
// WebSocket's open. After 1 s it scrolls to the top at every frame, as a
// person dragging the scrollbar up does (older pages load as the top is
// reached), and notes when line 1 is in the buffer (or, after 20 s, how
// many lines were). Beside it, in the same run, tmux's own `capture-pane`
// of the same pane's whole history (`-S -`, plain and with `-e`
// attributes as a repaint needs), timed from a process started for it
// (what a peer's reattach runs).

import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";

import { devtools, fetchJson, median, sleep, start, stop, until } from "./lib/bench.mjs";

const HISTORY = process.argv[2] === "--history"
  ? process.argv[3].split(",").map(Number) : null;
const ROUNDS = Number(process.argv[HISTORY ? 4 : 2] ?? (HISTORY ? 5 : 10));
const ENGINE = resolve(process.env.ENGINE ?? "target/release/tmux-engine");
const TTYD = process.env.TTYD ?? process.env.TTYD_BIN ?? "/tmp/peers/ttyd-src/build/ttyd";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const PS1 = "READY$ ";
const SHELL = ["env", `PS1=${PS1}`, "bash", "--norc", "--noprofile"];

// Injected before each page's own scripts: at every frame, is the prompt in
// the terminal's buffer yet (serve's page exposes it as tmuxEngine.term,
// ttyd's as term)? The first frame it is, is the one that paints it. On the
// way it notes when each phase began (ms since the navigation), for the
// breakdown: the document's last byte, its scripts' and styles' last byte
// (ttyd inlines them: none), the page's scripts run
// (DOMContentLoaded), its first fetch, the WebSocket made, opened, and its
// first message. Wrapping the constructor costs microseconds, both pages alike.
const WATCH = `(() => {
  const prompt = ${JSON.stringify(PS1.trim())};
  const marks = window.__marks = {};
  const mark = (k) => { if (!(k in marks)) marks[k] = performance.now(); };
  document.addEventListener("DOMContentLoaded", () => mark("scripts"));
  const fetch0 = window.fetch;
  window.fetch = function (...args) { mark("fetch"); return fetch0.apply(this, args); };
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      mark("ws");
      this.addEventListener("open", () => mark("open"));
      this.addEventListener("message", () => mark("message"));
    }
  };
  const look = () => {
    const t = (window.tmuxEngine && window.tmuxEngine.term) || window.term;
    if (t && t.buffer) {
      const b = t.buffer.active;
      for (let i = 0; i < t.rows; i++) {
        const l = b.getLine(b.viewportY + i);
        if (l && l.translateToString(true).includes(prompt)) {
          marks.html = performance.getEntriesByType("navigation")[0].responseEnd;
          const loaded = performance.getEntriesByType("resource")
            .filter((r) => r.initiatorType === "script" || r.initiatorType === "link")
            .map((r) => r.responseEnd);
          if (loaded.length) marks.assets = Math.max(...loaded);
          window.__painted = performance.now();
          return;
        }
      }
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})()`;

// The phases of the breakdown, in the order a page passes them.
const PHASES = ["html", "assets", "scripts", "fetch", "ws", "open", "message"];

async function firstPaint(cdp, url) {
  await cdp.send("Page.navigate", { url });
  const evaluate = async (expression) =>
    (await cdp.send("Runtime.evaluate", { expression, returnByValue: true })).result.value;
  const painted = await until(`the prompt painted at ${url}`, () => evaluate("window.__painted"));
  return { painted, ...(await evaluate("window.__marks")) };
}


// The history pass's watcher: the terminal's name is histN, its marker
// END-N. At every frame until the marker is painted and for 1 s after:
// when it was first in the viewport, and the buffer's length (lines one can
// scroll through) at that frame, at 300 ms after the WebSocket opened and
// at the end.
const WATCH_HISTORY = `(() => {
  const m = /#t=hist(\\d+)/.exec(location.hash);
  if (!m) return;
  const marker = "END-" + m[1];
  const h = window.__hist = {};
  const look = () => {
    const t = window.tmuxEngine && window.tmuxEngine.term;
    const open = window.__marks && window.__marks.open;
    if (t && t.buffer && open !== undefined) {
      const b = t.buffer.active;
      const now = performance.now();
      if (h.painted === undefined) {
        for (let i = 0; i < t.rows; i++) {
          const l = b.getLine(b.viewportY + i);
          if (l && l.translateToString(true).includes(marker)) {
            h.open = open;
            h.painted = now - open;
            h.linesAtPaint = b.length;
            break;
          }
        }
      }
      if (h.at300 === undefined && now - open >= 300) h.at300 = b.length;
      const top = b.getLine(0);
      if (h.whole === undefined && top && top.translateToString(true) === "line 1 of the history") {
        h.whole = now - open;
      }
      if (h.painted !== undefined && now - open >= 1000) {
        if (h.final === undefined) h.final = b.length;
        if (h.whole !== undefined || now - open >= 21000) {
          h.lines = b.length;
          h.done = true;
          return;
        }
        // A person at the scrollbar's top: older pages load.
        t.scrollToTop();
      }
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})()`;

/** The tmux socket of the server whose pane shows `marker`. */
function socketWith(dir, marker) {
  const found = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (statSync(p).isSocket() && e.name !== "stream.sock" && e.name !== "raw.sock") found.push(p);
    }
  };
  walk(dir);
  for (const sock of found) {
    const r = spawnSync("tmux", ["-S", sock, "capture-pane", "-p"], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.includes(marker)) return sock;
  }
  return null;
}

/** One `capture-pane` of the whole history, in ms, and the lines it gave. */
function capture(sock, escapes) {
  const t0 = performance.now();
  const r = spawnSync("tmux", ["-S", sock, "capture-pane", "-p", ...(escapes ? ["-e"] : []), "-S", "-"],
    { maxBuffer: 1 << 30 });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`capture-pane: ${r.stderr}`);
  let lines = 0;
  for (const byte of r.stdout) if (byte === 10) lines++;
  return { ms, lines };
}

async function historyBench(cdp, api, base, dir) {
  // With the Network domain on, Chromium copies every WebSocket frame to
  // this client (base64): megabytes per page of history, which slowed the
  // page measured and once stalled this script.
  await cdp.send("Network.disable");
  await cdp.send("Page.addScriptToEvaluateOnNewDocument", { source: WATCH_HISTORY });
  const evaluate = async (expression) =>
    (await cdp.send("Runtime.evaluate", { expression, returnByValue: true })).result.value;
  const rows = [];
  for (const n of HISTORY) {
    const name = `hist${n}`;
    const command = ["sh", "-c", `seq -f 'line %g of the history' 1 ${n}; echo END-${n}; exec cat`];
    if (!(await api("POST", "/api/terminals", { name, command, history_limit: Math.min(n, 1000000), keep_history: true }))) {
      throw new Error(`spawn ${name} failed`);
    }
    const screen = await until(`${name}'s marker on tmux's screen`, async () => {
      const s = await api("GET", `/api/terminals/${name}/screen`);
      return s && JSON.stringify(s).includes(`END-${n}`) ? s : null;
    }, 600000, 100);
    const sock = await until(`${name}'s socket`, () => socketWith(join(dir, "run"), `END-${n}`));
    const res = { page: [], linesAtPaint: [], at300: [], final: [], whole: [], lines: [], plain: [], escaped: [], captured: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      await cdp.send("Page.navigate", { url: "about:blank" });
      await sleep(100);
      await cdp.send("Page.navigate", { url: `${base}/#t=${name}` });
      const h = await until(`${name} painted`, () => evaluate("window.__hist && window.__hist.done && window.__hist"), 120000);
      res.page.push(h.painted);
      res.linesAtPaint.push(h.linesAtPaint);
      res.at300.push(h.at300);
      res.final.push(h.final);
      res.whole.push(h.whole === undefined ? Infinity : h.whole);
      res.lines.push(h.lines);
      const plain = capture(sock, false);
      const escaped = capture(sock, true);
      res.plain.push(plain.ms);
      res.escaped.push(escaped.ms);
      res.captured = plain.lines;
    }
    await cdp.send("Page.navigate", { url: "about:blank" });
    await api("DELETE", `/api/terminals/${name}`);
    rows.push({ n, ...res, rowsOnScreen: screen.rows });
    console.error(`history ${n}: painted ${res.page.map((x) => x.toFixed(0)).join(" ")} ms after open; ` +
      `lines ${res.final.join(" ")}; line 1 at ${res.whole.map((x) => x.toFixed(0)).join(" ")} ms ` +
      `(lines then ${res.lines.join(" ")}); capture-pane -S - ${res.plain.map((x) => x.toFixed(0)).join(" ")} ms`);
  }
  console.log(`a long history in one frame (Chromium headless), median of ${ROUNDS}, from the WebSocket's open:`);
  for (const r of rows) {
    console.log(`  ${String(r.n).padStart(8)} lines: screen painted ${median(r.page).toFixed(1)} ms; ` +
      `lines scrollable at paint ${median(r.linesAtPaint)}, at 300 ms ${median(r.at300)}, at 1 s ${median(r.final)} ` +
      `(of ${r.captured} tmux holds); line 1 in the buffer at ${median(r.whole).toFixed(1)} ms ` +
      `(scrolling to the top from 1 s on; lines then ${median(r.lines)}); ` +
      `capture-pane -S - ${median(r.plain).toFixed(1)} ms, with -e ${median(r.escaped).toFixed(1)} ms`);
  }
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "bench-page-"));
  const port = 18000 + Math.floor(Math.random() * 1000) * 3;
  const token = `bench-${randomBytes(16).toString("hex")}`;
  const base = `http://127.0.0.1:${port}`;
  const env = { ...process.env, TMUX_ENGINE_RUNTIME_DIR: join(dir, "run"), XDG_RUNTIME_DIR: join(dir, "run") };
  execFileSync("mkdir", ["-m", "700", "-p", join(dir, "run"), join(dir, "state")]);
  const serve = start(ENGINE, ["--state-dir", join(dir, "state"), "serve", "--listen",
    `127.0.0.1:${port}`, "--token", token], env);
  // The history pass needs no ttyd.
  const ttyd = HISTORY ? null : start(TTYD, ["-p", String(port + 1), "-i", "127.0.0.1", "-W", ...SHELL]);
  const chrome = start(CHROMIUM, ["--headless", "--no-sandbox", "--disable-gpu",
    `--remote-debugging-port=${port + 2}`, `--user-data-dir=${join(dir, "chrome")}`,
    "--window-size=1200,700", "about:blank"]);
  const api = (method, path, body) => fetchJson(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  try {
    await until("serve", () => fetchJson(`${base}/api/terminals`, { headers: { Authorization: `Bearer ${token}` } }));
    if (ttyd) await until("ttyd", () => fetchJson(`http://127.0.0.1:${port + 1}/token`));
    if (!(await api("POST", "/api/terminals", { name: "page", command: SHELL }))) throw new Error("spawn failed");
    const targets = await until("chromium's DevTools", () => fetchJson(`http://127.0.0.1:${port + 2}/json`));
    const cdp = devtools(targets.find((t) => t.type === "page").webSocketDebuggerUrl);
    await cdp.open;
    await cdp.send("Page.enable");
    await cdp.send("Network.enable");
    await cdp.send("Page.addScriptToEvaluateOnNewDocument", { source: WATCH });
    // Sign in once (the link's code), as a person's first visit does.
    const link = await api("POST", "/api/links", {});
    const pages = {
      "serve": `${base}/#t=page`,
      "ttyd": `http://127.0.0.1:${port + 1}/`,
    };
    await firstPaint(cdp, `${base}${link.path}&t=page`);
    if (HISTORY) {
      await historyBench(cdp, api, base, dir);
      cdp.close();
      return;
    }
    for (const url of Object.values(pages)) await firstPaint(cdp, url);
    const out = {};
    const phases = {};
    for (const pass of ["warm", "cold"]) {
      await cdp.send("Network.setCacheDisabled", { cacheDisabled: pass === "cold" });
      const res = { serve: [], ttyd: [] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const which of r % 2 ? ["ttyd", "serve"] : ["serve", "ttyd"]) {
          await cdp.send("Page.navigate", { url: "about:blank" });
          await sleep(100);
          res[which].push(await firstPaint(cdp, pages[which]));
        }
      }
      const paint = (which) => median(res[which].map((m) => m.painted));
      out[pass] = { serve: paint("serve"), ttyd: paint("ttyd") };
      // Each phase's median start ("-": a phase the page never passes).
      phases[pass] = Object.fromEntries(["serve", "ttyd"].map((which) => [which,
        PHASES.map((k) => {
          const xs = res[which].map((m) => m[k]).filter((x) => x !== undefined);
          return xs.length ? median(xs) : undefined;
        })]));
      const list = (which) => res[which].map((m) => m.painted.toFixed(0)).join(" ");
      console.error(`${pass}: serve ${list("serve")}; ttyd ${list("ttyd")}`);
    }
    cdp.close();
    console.log(`navigation -> first prompt painted (Chromium headless), median of ${ROUNDS}:`);
    for (const [pass, m] of Object.entries(out)) {
      console.log(`  ${pass.padEnd(5)} serve ${m.serve.toFixed(1)} ms, ttyd ${m.ttyd.toFixed(1)} ms: ${(m.serve / m.ttyd).toFixed(2)}x`);
    }
    console.log(`when each phase began, ms since the navigation (medians): ${PHASES.join(", ")}, painted`);
    for (const [pass, m] of Object.entries(phases)) {
      for (const which of ["serve", "ttyd"]) {
        const cells = [...m[which], out[pass][which]].map((x) => (x === undefined ? "-" : x.toFixed(0)).padStart(5));
        console.log(`  ${pass.padEnd(5)} ${which.padEnd(5)} ${cells.join(" ")}`);
      }
    }
  } finally {
    await stop(chrome);
    if (ttyd) await stop(ttyd);
    await api("DELETE", "/api/terminals/page");
    await stop(serve);
    rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}

await main();
