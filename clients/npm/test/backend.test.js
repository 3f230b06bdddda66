// The npm package as installed from its tarball: the client and the
// PtyBackend against the real engine (its own binary) and real tmux, on a
// private registry per test. The registry's own rules (owner fencing, one
// send at a time) stay in the registry; these are the backend's parts:
// spawn, send (output while it runs, exit code), read, signal, status and
// close, for real.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, chmodSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { Engine, EngineError, findBinary, ptyBackend } from 'tmux-engine'

async function withEngine(body) {
  const runtime = mkdtempSync(join(tmpdir(), 'te-'))
  chmodSync(runtime, 0o700)
  const state = mkdtempSync(join(tmpdir(), 'tmux-engine-npm-'))
  const env = { ...process.env, TMUX_ENGINE_RUNTIME_DIR: runtime }
  delete env.TMUX
  const engine = new Engine({ stateDir: state, owner: 'node', env })
  try {
    await body(engine, runtime)
  } finally {
    for (const t of await engine.list()) await engine.kill(t.id).catch(() => {})
    await engine.close()
    rmSync(runtime, { recursive: true, force: true })
    rmSync(state, { recursive: true, force: true })
    const left = (() => { try { return execFileSync('pgrep', ['-f', runtime]).toString() } catch { return '' } })()
    assert.equal(left, '', `processes of ${runtime} left`)
  }
}

test('the package carries the binary', () => {
  const binary = findBinary()
  assert.match(binary, /node_modules\/tmux-engine\/bin\/tmux-engine$/)
  assert.match(execFileSync(binary, ['--version']).toString(), /tmux-engine/)
})

test('the client runs a command: exact output, exit code, read since its cursor', async () => {
  await withEngine(async (engine, runtime) => {
    const t = await engine.spawn({ name: 'sh' })
    const first = await engine.run(t.id, "printf 'a  b\\n\\tc\\n'; (exit 3)")
    // The terminal's relay is the package's small one, found beside the
    // binary (not the whole engine again per terminal).
    const relay = join(dirname(findBinary()), 'tmux-engine-relay')
    const relays = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid)).flatMap((pid) => {
      try {
        const words = readFileSync(`/proc/${pid}/cmdline`).toString().split('\0')
        return words[1] === '__stream-relay' && words[2].startsWith(runtime) ? [words[0]] : []
      } catch { return [] }
    })
    assert.deepEqual(relays, [relay])
    assert.equal(first.wait_reason, 'command')
    assert.equal(first.exit_code, 3)
    assert.equal(first.output, 'a  b\n\tc\n')
    await engine.run(t.id, 'echo two')
    const after = await engine.read(t.id, { since: first.cursor })
    assert.ok(after.text.includes('two') && !after.text.includes('a  b'), after.text)
    const screen = await engine.screen(t.id)
    assert.ok(screen.lines.some((l) => l.includes('two')))
    await assert.rejects(engine.screen('nope'), (e) => e instanceof EngineError && e.code === 'NO_TERMINAL')
  })
})

test('a backend session: motd, pid, a send whose output streams, read, status', async () => {
  await withEngine(async (engine) => {
    const backend = ptyBackend(engine)
    assert.equal(backend.type, 'tmux-engine')
    const session = await backend.spawn({ name: 'main' })
    assert.match(session.motd, /tmux-engine terminal t-/)
    assert.ok(Number.isInteger(session.pid) && session.pid > 0, String(session.pid))
    assert.deepEqual(session.status(), { kind: 'running' })
    const operation = session.startSend({ text: 'for i in 1 2 3; do echo line-$i; sleep 0.2; done', submit: true })
    let streamed = ''
    const result = await operation.done
    streamed += operation.readOutput().delta
    assert.equal(result.waitReason, 'command')
    assert.equal(result.exitCode, 0)
    for (const i of [1, 2, 3]) assert.ok(streamed.includes(`line-${i}`), streamed)
    assert.equal(operation.readOutput().delta, '')
    assert.equal(operation.cancel(), false)
    const page = session.read({ count: 50 })
    assert.ok(page.text.includes('line-3'), page.text)
    assert.ok(page.totalLines >= 3)
    await session.close('test over')
    assert.equal(session.status().kind, 'exited')
    assert.deepEqual(await engine.list(), [])
  })
})

// Whether a `sleep 1000` of the session whose shell is `shellPid` leads
// its terminal's foreground process group (/proc/PID/stat: pgrp == tpgid).
function sleepInFront(shellPid) {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`).toString() !== 'sleep\u00001000\u0000') continue
      const fields = readFileSync(`/proc/${pid}/stat`).toString().split(') ')[1].split(' ')
      const [ppid, pgrp, tpgid] = [fields[1], fields[2], fields[5]].map(Number)
      if (ppid === shellPid && pgrp === tpgid) return true
    } catch { /* gone meanwhile */ }
  }
  return false
}

test('a backend session: signal the foreground group, cancel a send, see the exit status', async () => {
  await withEngine(async (engine) => {
    const backend = ptyBackend(engine)
    const session = await backend.spawn({})
    await session.startSend({ text: 'true', submit: true }).done
    const long = session.startSend({ text: 'sleep 1000', submit: true })
    // The send is in flight until the command ends: wait for it to run.
    await engine.wait(session.id, { regex: 'sleep 1000', since: 'screen', timeoutSecs: 20 })
    for (;;) {
      const listed = await engine.commands(session.id)
      if (listed.commands?.some((c) => c.text === 'sleep 1000' && c.running)) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    // The shell marks the command's start before it forks it: the signal
    // goes to the foreground group, so wait until that is sleep's own
    // (else bash itself gets the SIGINT, and sleep runs on).
    const deadline = Date.now() + 20000
    while (!sleepInFront(session.pid) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.ok(sleepInFront(session.pid), 'sleep 1000 never came to the foreground')
    const signalled = await session.signal('SIGINT')
    assert.equal(signalled.delivered, true)
    assert.ok(signalled.targetPgid > 0)
    const ended = await long.done
    assert.equal(ended.exitCode, 130)
    const cancelled = session.startSend({ text: 'sleep 1000', submit: true })
    assert.equal(cancelled.cancel(), true)
    await cancelled.done.catch(() => {})
    await session.signal('SIGINT')
    const exits = await backend.spawn({ command: ['sh', '-c', 'exit 7'] })
    await engine.wait(exits.id, { exit: true, timeoutSecs: 20 })
    for (let i = 0; exits.status().kind === 'running' && i < 2000; i++) await new Promise((r) => setTimeout(r, 10))
    assert.deepEqual(exits.status(), { kind: 'exited', exitCode: 7, signal: null })
    await exits.close('done')
    await session.close('done')
  })
})
