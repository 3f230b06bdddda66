// What the Chromium benches (bench-page.mjs, bench-tapes.mjs) share:
// polling to a deadline, fetching JSON, a DevTools connection, and
// processes started and stopped as a group.
import { spawn } from "node:child_process";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Polls `check` every `every` ms until it returns a truthy value. */
export async function until(what, check, timeout = 20000, every = 10) {
  const end = performance.now() + timeout;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(every);
  }
}

/** The JSON answer of a fetch that succeeded, else null. */
export async function fetchJson(url, init) {
  try {
    const r = await fetch(url, init);
    return r.ok ? await r.json() : null;
  } catch {
    return null;
  }
}

/** A DevTools connection: send(method, params) -> result; on(event, f). */
export function devtools(url) {
  const ws = new WebSocket(url);
  let id = 0;
  const waiting = new Map();
  const listeners = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.method && listeners.has(msg.method)) for (const f of listeners.get(msg.method)) f(msg.params);
    if (msg.id && waiting.has(msg.id)) {
      const { ok, fail } = waiting.get(msg.id);
      waiting.delete(msg.id);
      msg.error ? fail(new Error(JSON.stringify(msg.error))) : ok(msg.result);
    }
  };
  const open = new Promise((ok, fail) => {
    ws.onopen = ok;
    ws.onerror = fail;
  });
  return {
    open,
    send(method, params = {}) {
      const n = ++id;
      ws.send(JSON.stringify({ id: n, method, params }));
      return new Promise((ok, fail) => waiting.set(n, { ok, fail }));
    },
    /** Calls `f(params)` at each event `method`. */
    on(method, f) {
      if (!listeners.has(method)) listeners.set(method, []);
      listeners.get(method).push(f);
    },
    close: () => ws.close(),
  };
}

/** A process in its own group, so stopping it stops its children too. */
export function start(cmd, args, env) {
  const child = spawn(cmd, args, { stdio: "ignore", detached: true, env: env ?? process.env });
  child.exited = new Promise((ok) => child.on("exit", ok));
  return child;
}

/** Stops the group: SIGTERM, then SIGKILL after `grace` ms (0: SIGKILL at once). */
export async function stop(child, grace = 5000) {
  const kill = (signal) => {
    try {
      process.kill(-child.pid, signal);
    } catch {}
  };
  if (grace > 0) {
    kill("SIGTERM");
    if (await Promise.race([child.exited.then(() => true), sleep(grace)])) return;
  }
  kill("SIGKILL");
  await child.exited;
}
