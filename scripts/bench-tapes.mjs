// One tape, two pipelines, one run: `tmux-engine test` against a rebuilt
// VHS pipeline (ttyd serving bash, headless Chromium taking frames over the
// DevTools protocol, ffmpeg assembling the GIF). The tape: type a command,
// wait for its output, take a screenshot and a GIF.
//
//   cargo build --release
//   node --experimental-websocket scripts/bench-tapes.mjs [ROUNDS]
//
// Needs: ttyd (TTYD, default /tmp/peers/ttyd-src/build/ttyd; build it as
// ../shared/bench/peers-web/README.md says), chromium and ffmpeg (Debian).
// Rounds alternate the pipelines; medians and the ratio are printed.

import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync, statSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { devtools, fetchJson, median, sleep, start, stop, until } from "./lib/bench.mjs";

const ROUNDS = Number(process.argv[2] ?? 5);
const ENGINE = resolve(process.env.ENGINE ?? "target/release/tmux-engine");
const TTYD = process.env.TTYD ?? "/tmp/peers/ttyd-src/build/ttyd";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FPS = 20;

const TAPE = `Output bench.gif
Set Shell bash
Set Size 80x24
Type "echo hello-$((6*7))"
Enter
Wait+Screen /^hello-42$/
Screenshot bench.png
`;

async function engineOnce(dir) {
  writeFileSync(join(dir, "bench.tape"), TAPE);
  const t0 = performance.now();
  execFileSync(ENGINE, ["test", "bench.tape"], { cwd: dir, stdio: "pipe" });
  const ms = performance.now() - t0;
  for (const f of ["bench.gif", "bench.png"]) {
    if (!existsSync(join(dir, f))) throw new Error(`engine wrote no ${f}`);
  }
  return ms;
}

async function vhsOnce(dir, port) {
  const t0 = performance.now();
  const ttyd = start(TTYD, ["-p", String(port), "-i", "127.0.0.1", "-W", "env", "-i",
    `PATH=${process.env.PATH}`, "HOME=" + dir, "PS1=$ ", "TERM=xterm-256color",
    "bash", "--norc", "--noprofile", "-i"]);
  const cport = port + 1;
  const chrome = start(CHROMIUM, ["--headless", "--no-sandbox", "--disable-gpu",
    `--remote-debugging-port=${cport}`, `--user-data-dir=${join(dir, "chrome")}`,
    "--window-size=1200,700", "about:blank"]);
  try {
    const targets = await until("chromium's DevTools", () => fetchJson(`http://127.0.0.1:${cport}/json`));
    const page = targets.find((t) => t.type === "page");
    const cdp = devtools(page.webSocketDebuggerUrl);
    await cdp.open;
    await cdp.send("Page.enable");
    await until("ttyd", () => fetchJson(`http://127.0.0.1:${port}/token`));
    await cdp.send("Page.navigate", { url: `http://127.0.0.1:${port}/` });
    const evaluate = async (expression) =>
      (await cdp.send("Runtime.evaluate", { expression, returnByValue: true })).result.value;
    const screenText = `(() => { const t = window.term; if (!t) return ""; const b = t.buffer.active;
      let s = []; for (let i = 0; i < t.rows; i++) { const l = b.getLine(b.viewportY + i);
      s.push(l ? l.translateToString(true) : ""); } return s.join("\\n"); })()`;
    await until("the prompt", async () => /\$ $/m.test((await evaluate(screenText)) ?? ""));
    // Frames as VHS takes them: screenshots at the frame rate while the tape runs.
    const frames = [];
    let recording = true;
    const recorder = (async () => {
      while (recording) {
        const shot = await cdp.send("Page.captureScreenshot", { format: "png" });
        frames.push(Buffer.from(shot.data, "base64"));
        await sleep(1000 / FPS);
      }
    })();
    for (const ch of "echo hello-$((6*7))") {
      await cdp.send("Input.insertText", { text: ch });
    }
    await cdp.send("Input.dispatchKeyEvent", { type: "keyDown", key: "Enter", code: "Enter",
      windowsVirtualKeyCode: 13, text: "\r" });
    await cdp.send("Input.dispatchKeyEvent", { type: "keyUp", key: "Enter", code: "Enter",
      windowsVirtualKeyCode: 13 });
    await until("the output", async () => /^hello-42$/m.test((await evaluate(screenText)) ?? ""));
    const shot = await cdp.send("Page.captureScreenshot", { format: "png" });
    writeFileSync(join(dir, "bench.png"), Buffer.from(shot.data, "base64"));
    recording = false;
    await recorder;
    cdp.close();
    frames.forEach((f, i) => writeFileSync(join(dir, `frame${String(i).padStart(5, "0")}.png`), f));
    execFileSync("ffmpeg", ["-y", "-loglevel", "error", "-framerate", String(FPS), "-i",
      join(dir, "frame%05d.png"), "-filter_complex",
      "[0:v] split [a][b];[a] palettegen [p];[b][p] paletteuse", join(dir, "bench.gif")]);
    if (statSync(join(dir, "bench.gif")).size === 0) throw new Error("ffmpeg wrote no GIF");
    return performance.now() - t0;
  } finally {
    await stop(chrome, 0);
    await stop(ttyd, 0);
  }
}


const engine = [];
const vhs = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const which of round % 2 ? ["vhs", "engine"] : ["engine", "vhs"]) {
    const dir = mkdtempSync(join(tmpdir(), `bench-tape-${which}-`));
    try {
      if (which === "engine") engine.push(await engineOnce(dir));
      else vhs.push(await vhsOnce(dir, 17000 + round * 10));
    } finally {
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    }
  }
  console.error(`round ${round + 1}: engine ${engine.at(-1).toFixed(0)} ms, vhs-like ${vhs.at(-1).toFixed(0)} ms`);
}
const e = median(engine);
const v = median(vhs);
console.log(`per tape (type, wait for output, screenshot + GIF), median of ${ROUNDS}:`);
console.log(`  tmux-engine test          ${e.toFixed(0)} ms`);
console.log(`  ttyd + chromium + ffmpeg  ${v.toFixed(0)} ms`);
console.log(`  ratio                     ${(v / e).toFixed(1)}x`);
