// The page's first paint (issue 27, item 4): the time from a navigation to
// the first prompt painted in Chromium, serve's page beside ttyd's page, in
// one run, alternating round by round.
//
//   cargo build --release
//   node --experimental-websocket scripts/bench-page.mjs [ROUNDS]
//
// Needs: ttyd (TTYD, default /tmp/peers/ttyd-src/build/ttyd: built from
// tsl0922/ttyd 1.7.7, nothing of it is in this repository) and Debian's
// chromium (CHROMIUM; CHROMIUM_FLAGS adds flags, e.g. --disable-webgl for
// the DOM renderer). One headless Chromium loads both pages, each from
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
// notes, at every animation frame, from the WebSocket's open: the first
// text frame (hello), the repaint's binary frame, the frame the marker is
// painted (the paint's figure: the frame whose callbacks first find it
// in the terminal's buffer; beside it, when that frame's drawing is
// done), and when the page's past view knows where the history starts
// (its scrollbar spans the whole history). At that frame it opens the view
// and drags it to the top, as a person dragging the scrollbar up does, and
// notes when the oldest line there is is drawn (line 1, or the oldest the
// kept history still holds). Beside it, in the same run, tmux's own
// `capture-pane` of the same pane's whole history (`-S -`, plain and with
// `-e` attributes as a repaint needs), timed from a process started for it
// (what a peer's reattach runs). BENCH_PROFILE=1 prints the page's time by
// function over the first round (Chromium's sampling profiler),
// BENCH_LONG=1 its long tasks before the paint, BENCH_TRACE=1 the main
// thread's tasks from the open to the paint over the first round
// (Chromium's trace; it slows the page measured).

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
  window.addEventListener("error", (e) => { window.__error = String(e.message); });
  // Tasks over 50 ms (what held the main thread), for the breakdown.
  const long = window.__long = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) long.push([Math.round(e.startTime), Math.round(e.duration)]);
    }).observe({ type: "longtask", buffered: true });
  } catch {}
  const mark = (k) => { if (!(k in marks)) marks[k] = performance.now(); };
  document.addEventListener("DOMContentLoaded", () => mark("scripts"));
  const fetch0 = window.fetch;
  window.fetch = function (...args) { mark("fetch"); return fetch0.apply(this, args); };
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      mark("ws");
      this.addEventListener("open", () => { mark("open"); performance.mark("ws-open"); });
      this.addEventListener("message", (e) => {
        mark("message");
        if (typeof e.data !== "string") mark("binary");
        else if (e.data.includes('"type":"history"')) mark("historyFrame");
      });
    }
    send(data) {
      if (typeof data === "string" && data.startsWith('{"type":"history"')) mark("asked");
      return super.send(data);
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
  const painted = await until(`the prompt painted at ${url}`, async () => {
    const error = await evaluate("window.__error");
    if (error) throw new Error(`the page failed: ${error}`);
    return evaluate("window.__painted");
  });
  return { painted, ...(await evaluate("window.__marks")) };
}


// The history pass's watcher: the terminal's name is histN, its marker
// END-N. At every frame, from the WebSocket's open: when the marker is
// first in the viewport (the screen painted; beside it when the repaint's
// binary frame arrived), when the past view knows where the history starts
// (its scrollbar spans the whole history: `past.state.firstAt`); at that
// frame the view is opened and dragged to its top, as a person dragging
// the scrollbar up does, and the time the first row drawn is the oldest
// line there is (its text noted) is when the whole history was reachable.
const WATCH_HISTORY = `(() => {
  const m = /#t=hist(\\d+)/.exec(location.hash);
  if (!m) return;
  const marker = "END-" + m[1];
  const h = window.__hist = {};
  const look = () => {
    const v = window.tmuxEngine;
    const t = v && v.term;
    const marks = window.__marks || {};
    const open = marks.open;
    if (t && !t.__wrapped) {
      // The first write (the repaint): when it was called and parsed.
      t.__wrapped = true;
      const write = t.write.bind(t);
      t.write = (data, done) => {
        if (window.__firstWrite || typeof data === "string") return write(data, done);
        const w = window.__firstWrite = { called: performance.now() };
        return write(data, () => { w.parsed = performance.now(); if (done) done(); });
      };
    }
    if (t && t.buffer && open !== undefined) {
      const b = t.buffer.active;
      const now = performance.now();
      if (h.painted === undefined) {
        for (let i = 0; i < t.rows; i++) {
          const l = b.getLine(b.viewportY + i);
          if (l && l.translateToString(true).includes(marker)) {
            h.painted = now - open;
            performance.mark("painted");
            // The frame's own work (xterm.js's renderer draws the rows
            // after this callback) is done when a task queued now runs.
            setTimeout(() => { h.frame = performance.now() - open; }, 0);
            h.long = JSON.stringify((window.__long || []).map(([at, d]) => [Math.round(at - open), d]));
            const t0 = window.__firstWrite;
            if (t0) { h.wrote = t0.called - open; h.parsed = t0.parsed - open; }
            h.repaint = marks.binary - open;
            h.hello = marks.message - open;
            break;
          }
        }
      }
      const s = v.past && v.past.state;
      if (h.painted !== undefined && h.ready === undefined && s && s.firstAt !== null) {
        h.ready = s.firstAt - open;
        h.asked = marks.asked - open;
        h.answered = marks.historyFrame - open;
        h.span = s.end - s.first;
        h.first = s.first;
        v.openPast();
        v.past.drag(0);
        h.dragged = performance.now() - open;
      }
      if (h.ready !== undefined && h.whole === undefined) {
        const row = v.past.shown[0] || "";
        if (s.top && s.top.line === s.first && s.top.exact !== false && v.past.shown.length) {
          h.whole = now - open;
          h.top = row.trim() + (row.startsWith("line ") ? "" : " / " + (v.past.shown[1] || "").trim());
          h.pages = s.pages;
          h.done = true;
          return;
        }
        if (now - open > 20000) { h.whole = Infinity; h.top = row; h.done = true; return; }
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

/** The 25 functions the page spent most time in (self time, ms). */
function printProfile(profile) {
  const self = new Map();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  profile.samples.forEach((id, i) => {
    const f = byId.get(id).callFrame;
    const key = `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}:${f.lineNumber}`;
    self.set(key, (self.get(key) || 0) + (profile.timeDeltas[i] || 0) / 1000);
  });
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25);
  console.error(`profile (${((profile.endTime - profile.startTime) / 1000).toFixed(0)} ms):`);
  for (const [k, ms] of top) console.error(`  ${ms.toFixed(1).padStart(7)} ms  ${k}`);
}

/**
 * The renderer's main thread from the WebSocket's open to the paint, task
 * by task (Chromium's trace): when each began (ms from the open), how long
 * it ran, and what ran in it, for the breakdown.
 */
function printTrace(events) {
  const main = events.find((e) => e.ph === "M" && e.name === "thread_name" && e.args.name === "CrRendererMain" &&
    events.some((m) => m.name === "ws-open" && m.pid === e.pid));
  if (!main) return console.error("trace: no renderer main thread with the marks");
  const at = (name) => events.find((e) => e.name === name && e.pid === main.pid)?.ts;
  const open = at("ws-open");
  const painted = at("painted");
  const mine = events.filter((e) => e.pid === main.pid && e.tid === main.tid && e.ph === "X" && e.dur !== undefined)
    .sort((a, b) => a.ts - b.ts);
  const what = (e) => {
    const d = e.args?.data ?? {};
    const where = d.url ? ` ${d.url.split("/").pop()}:${d.lineNumber ?? ""}` : "";
    return `${e.name}${d.type ? `(${d.type})` : ""}${d.functionName ? ` ${d.functionName}` : ""}${where}`;
  };
  console.error(`trace: the main thread from the open to the paint (${((painted - open) / 1000).toFixed(1)} ms):`);
  for (const task of mine.filter((e) => e.name === "RunTask" && e.ts + e.dur >= open && e.ts <= painted)) {
    if (task.dur < 200) continue;
    const inside = mine.filter((e) => e !== task && e.ts >= task.ts && e.ts + e.dur <= task.ts + task.dur && e.dur >= 100);
    const parts = inside.slice(0, 12).map((e) => `${what(e)} ${(e.dur / 1000).toFixed(1)}`).join("; ");
    console.error(`  ${((task.ts - open) / 1000).toFixed(1).padStart(7)} +${(task.dur / 1000).toFixed(1).padStart(5)} ms  ${parts}`);
  }
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
    const res = { page: [], frame: [], hello: [], repaint: [], wrote: [], parsed: [], asked: [], answered: [], ready: [], whole: [], top: [], pages: [], span: 0, plain: [], escaped: [], captured: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      await cdp.send("Page.navigate", { url: "about:blank" });
      await sleep(100);
      // BENCH_PROFILE=1: the page's own time by function over the first
      // round (Chromium's sampling profiler), for the breakdown.
      const profile = process.env.BENCH_PROFILE && r === 0;
      if (profile) {
        await cdp.send("Profiler.enable");
        await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
        await cdp.send("Profiler.start");
      }
      // BENCH_TRACE=1: the main thread's tasks over the first round.
      const trace = process.env.BENCH_TRACE && r === 0 ? [] : null;
      let traced;
      if (trace) {
        traced = new Promise((ok) => cdp.on("Tracing.tracingComplete", ok));
        cdp.on("Tracing.dataCollected", (p) => trace.push(...p.value));
        await cdp.send("Tracing.start", {
          categories: "toplevel,devtools.timeline,blink.user_timing,v8.execute,disabled-by-default-devtools.timeline",
          transferMode: "ReportEvents",
        });
      }
      await cdp.send("Page.navigate", { url: `${base}/#t=${name}` });
      const h = await until(`${name} painted`, () => evaluate("window.__hist && window.__hist.done && window.__hist"), 120000);
      if (profile) printProfile((await cdp.send("Profiler.stop")).profile);
      if (trace) {
        await cdp.send("Tracing.end");
        await traced;
        printTrace(trace);
      }
      res.page.push(h.painted);
      res.frame.push(h.frame ?? NaN);
      res.hello.push(h.hello);
      res.repaint.push(h.repaint);
      if (process.env.BENCH_LONG) console.error(`long tasks (start from open, ms): ${h.long}`);
      for (const k of ["wrote", "parsed", "asked", "answered"]) res[k].push(h[k] ?? NaN);
      res.ready.push(h.ready);
      res.whole.push(h.whole ?? Infinity);
      res.top.push(h.top);
      res.pages.push(h.pages);
      res.span = h.span;
      const plain = capture(sock, false);
      const escaped = capture(sock, true);
      res.plain.push(plain.ms);
      res.escaped.push(escaped.ms);
      res.captured = plain.lines;
    }
    await cdp.send("Page.navigate", { url: "about:blank" });
    await api("DELETE", `/api/terminals/${name}`);
    rows.push({ n, ...res });
    const ms = (xs) => xs.map((x) => x.toFixed(0)).join(" ");
    console.error(`history ${n}: hello ${ms(res.hello)}, repaint ${ms(res.repaint)}, written ${ms(res.wrote)}, ` +
      `parsed ${ms(res.parsed)}, painted ${ms(res.page)} (frame done ${ms(res.frame)}) ms after open; first page asked ${ms(res.asked)}, answered ${ms(res.answered)}; ` +
      `scrollable ${ms(res.ready)}; oldest line drawn ${ms(res.whole)} ms (${res.top[0]}, ${res.pages.join(" ")} pages); ` +
      `capture-pane -S - ${ms(res.plain)} ms`);
  }
  console.log(`a long history in one frame (Chromium headless), median of ${ROUNDS}, ms from the WebSocket's open:`);
  for (const r of rows) {
    console.log(`  ${String(r.n).padStart(8)} lines: hello ${median(r.hello).toFixed(1)}, repaint frame ${median(r.repaint).toFixed(1)}, ` +
      `written ${median(r.wrote).toFixed(1)}, parsed ${median(r.parsed).toFixed(1)}, ` +
      `screen painted ${median(r.page).toFixed(1)} (its frame done ${median(r.frame).toFixed(1)}); first page asked ${median(r.asked).toFixed(1)}, ` +
      `answered ${median(r.answered).toFixed(1)}; the whole history (${(r.span / 1048576).toFixed(1)} MiB) scrollable ` +
      `${median(r.ready).toFixed(1)}; dragged to the top, its oldest line drawn ${median(r.whole).toFixed(1)} ("${r.top[0]}"); ` +
      `capture-pane -S - ${median(r.plain).toFixed(1)} (${r.captured} lines), with -e ${median(r.escaped).toFixed(1)}`);
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
    "--window-size=1200,700", ...(process.env.CHROMIUM_FLAGS ?? "").split(" ").filter(Boolean), "about:blank"]);
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
