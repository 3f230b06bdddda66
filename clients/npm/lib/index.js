// tmux-engine for Node: an Engine keeps one `tmux-engine mcp` process (the
// registry's verbs as JSON-RPC on stdio), so cursors, a shell's command
// marks and waits span calls as in any long-lived face; terminals live in
// the state directory's registry and outlive the process. `ptyBackend()`
// is a backend of the shape the PTY registry drives (type, spawn(), a
// session with motd, pid, startSend, read, signal, status, close).
// Types: index.d.ts.

import { spawn as spawnProcess, execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const PROTOCOL_VERSION = '2025-06-18'

/** An engine error: its stable code (NO_TERMINAL, TIMEOUT, ...) and message. */
export class EngineError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`)
    this.name = 'EngineError'
    this.code = code
    this.detail = message
  }
}

/** The binary: $TMUX_ENGINE_BIN, else this package's own, else PATH's. */
export function findBinary() {
  if (process.env.TMUX_ENGINE_BIN) return process.env.TMUX_ENGINE_BIN
  const own = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'tmux-engine')
  return existsSync(own) ? own : 'tmux-engine'
}

function dropUndefined(object) {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined && v !== null))
}

function toolAnswer(message) {
  if (message.error) throw new EngineError('INVALID_INPUT', String(message.error.message ?? message.error))
  const result = message.result
  const texts = (result.content ?? []).filter((b) => b.type === 'text').map((b) => b.text)
  if (result.isError) {
    const text = texts.join('\n')
    const at = text.indexOf(': ')
    const code = at > 0 ? text.slice(0, at) : ''
    if (/^[A-Z][A-Z_]*$/.test(code)) throw new EngineError(code, text.slice(at + 2))
    throw new EngineError('ENGINE_FAILED', text)
  }
  if (result.structuredContent !== undefined) return result.structuredContent
  return texts.length ? JSON.parse(texts[0]) : undefined
}

/** The registry of one state directory, as one owner. */
export class Engine {
  constructor({ stateDir, owner, binary, env } = {}) {
    this.binary = binary ?? findBinary()
    this.stateDir = stateDir
    this.owner = owner
    this.env = env ?? process.env
    const argv = []
    if (stateDir !== undefined) argv.push('--state-dir', stateDir)
    if (owner !== undefined) argv.push('--owner', owner)
    this.globalArgs = argv
    this.child = spawnProcess(this.binary, [...argv, 'mcp'], { env: this.env, stdio: ['pipe', 'pipe', 'pipe'] })
    this.nextId = 1
    this.pending = new Map()
    this.stderr = ''
    this.child.stderr.on('data', (chunk) => { this.stderr = (this.stderr + chunk).slice(-4000) })
    this.child.on('exit', () => {
      const gone = new EngineError('ENGINE_GONE', `tmux-engine mcp ended: ${this.stderr}`)
      for (const { reject } of this.pending.values()) reject(gone)
      this.pending.clear()
    })
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      let message
      try { message = JSON.parse(line) } catch { return }
      if (message.method !== undefined) {
        if (message.id !== undefined) this.write({ jsonrpc: '2.0', id: message.id, result: {} })
        return
      }
      const waiter = this.pending.get(message.id)
      if (waiter) {
        this.pending.delete(message.id)
        waiter.resolve(message)
      }
    })
    this.ready = this.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'tmux-engine-node', version: '0.1.0' },
    }).then(() => this.write({ jsonrpc: '2.0', method: 'notifications/initialized' }))
  }

  write(message) {
    this.child.stdin.write(JSON.stringify(message) + '\n')
  }

  request(method, params) {
    const id = this.nextId++
    const promise = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }))
    this.write({ jsonrpc: '2.0', id, method, params })
    return Object.assign(promise, { id })
  }

  /** A tool's answer; `cancelled`: an AbortSignal that cancels the call. */
  async call(tool, args = {}, cancelled) {
    await this.ready
    const pending = this.request('tools/call', { name: tool, arguments: dropUndefined(args) })
    if (cancelled) {
      // A cancelled request gets no answer (MCP): it is settled here.
      const cancel = () => {
        const waiter = this.pending.get(pending.id)
        if (waiter === undefined) return
        this.pending.delete(pending.id)
        this.write({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: pending.id, reason: String(cancelled.reason ?? 'cancelled') } })
        waiter.reject(new EngineError('CANCELLED', `${tool} cancelled`))
      }
      if (cancelled.aborted) cancel()
      else cancelled.addEventListener('abort', cancel, { once: true })
    }
    return toolAnswer(await pending)
  }

  /** One synchronous CLI call (`--json`): for the few verbs a caller needs at once. */
  callSync(args) {
    try {
      const out = execFileSync(this.binary, [...this.globalArgs, '--json', ...args], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] })
      return JSON.parse(out.toString())
    } catch (error) {
      const text = String(error.stderr ?? '')
      for (const line of text.split('\n').reverse()) {
        try {
          const { code, message } = JSON.parse(line).error
          throw new EngineError(code, message)
        } catch (inner) {
          if (inner instanceof EngineError) throw inner
        }
      }
      throw new EngineError('ENGINE_FAILED', text || String(error))
    }
  }

  async close() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.stdin.end()
    await exited
  }

  spawn({ command, name, cwd, env, cols, rows, shell, keepHistory, agent = false } = {}) {
    return this.call('terminal_spawn', { command, name, cwd, env, cols, rows, shell, keep_history: keepHistory, agent })
  }
  async list() {
    const answer = await this.call('terminal_list')
    return Array.isArray(answer) ? answer : (answer.terminals ?? answer.items ?? [])
  }
  show(terminal) { return this.call('terminal_show', { terminal }) }
  send(terminal, text, { submit, wait, timeoutSecs, keys, maxBytes } = {}, cancelled) {
    return this.call('terminal_send', { terminal, text, submit, wait, timeout_secs: timeoutSecs, keys, max_bytes: maxBytes }, cancelled)
  }
  run(terminal, command, options = {}) { return this.send(terminal, command, { ...options, submit: true }) }
  read(terminal, { offset, count, since, format, maxBytes } = {}) {
    return this.call('terminal_read', { terminal, offset, count, since, format: since !== undefined ? (format ?? 'text') : undefined, max_bytes: maxBytes })
  }
  screen(terminal) { return this.call('terminal_screen', { terminal }) }
  wait(terminal, { text, regex, exit, command, since, timeoutSecs } = {}, cancelled) {
    return this.call('terminal_wait', { terminal, text, regex, exit, command, since, timeout_secs: timeoutSecs }, cancelled)
  }
  signal(terminal, signal) { return this.call('terminal_signal', { terminal, signal }) }
  kill(terminal) { return this.call('terminal_kill', { terminal }) }
  commands(terminal, { limit } = {}) { return this.call('terminal_commands', { terminal, limit }) }
  search(regex, { terminal, context, maxMatches } = {}) {
    return this.call('terminal_search', { regex, terminal, context, max_matches: maxMatches })
  }
}

function statusOf(snapshot) {
  const status = snapshot.status ?? {}
  if (status.kind === 'running' || status.kind === undefined) return { kind: 'running' }
  const exit = status.exit ?? {}
  return { kind: 'exited', exitCode: exit.code ?? null, signal: exit.signal ?? null }
}

/** A session of the PTY registry, backed by one engine terminal. */
class EngineSession {
  constructor(engine, snapshot, pollMs) {
    this.engine = engine
    this.id = snapshot.id
    this.pid = snapshot.pid
    this.motd = `tmux-engine terminal ${snapshot.id}`
    this.pollMs = pollMs
    this.statusValue = statusOf(snapshot)
    this.exitWatch = new AbortController()
    // The exit is pushed: a wait on it ends when the program does.
    this.exited = engine.wait(this.id, { exit: true, timeoutSecs: 86400 }, this.exitWatch.signal)
      .then(() => engine.show(this.id))
      .then((shown) => { this.statusValue = statusOf(shown) })
      .catch(() => {})
  }

  startSend(request) {
    const engine = this.engine
    const abort = new AbortController()
    let settled = false
    let delta = ''
    let truncated = false
    let cursor
    const follow = async () => {
      // The output after the send's start, read on from a cursor: exact,
      // however much scrolled out meanwhile.
      cursor ??= (await engine.read(this.id, { count: 1 })).next_cursor
      if (cursor === undefined) return
      const page = await engine.read(this.id, { since: cursor, format: 'text' })
      delta += page.text ?? ''
      truncated ||= Boolean(page.gap)
      cursor = page.next_cursor ?? cursor
    }
    const done = (async () => {
      await follow()
      const sending = engine.send(this.id, request.text ?? '', {
        submit: request.submit, wait: request.wait, timeoutSecs: request.timeoutSecs ?? request.timeout,
      }, abort.signal)
      let finished = false
      sending.then(() => { finished = true }, () => { finished = true })
      while (!finished) {
        await new Promise((resolve) => setTimeout(resolve, this.pollMs))
        await follow().catch(() => {})
      }
      const answer = await sending
      await follow().catch(() => {})
      settled = true
      this.statusValue = statusOf({ status: answer.status })
      return {
        viewport: answer.viewport ?? '',
        waitReason: answer.wait_reason,
        exitCode: answer.exit_code,
        output: answer.output,
        sessionStatus: this.statusValue,
        truncated: Boolean(answer.truncated),
      }
    })()
    done.finally(() => { settled = true }).catch(() => {})
    return {
      done,
      readOutput: () => {
        const out = { delta, truncated }
        delta = ''
        return out
      },
      cancel: () => {
        if (settled) return false
        settled = true
        abort.abort(new Error('cancelled'))
        return true
      },
    }
  }

  /** Scrollback lines (synchronous, as the registry reads it: one CLI call). */
  read(request = {}) {
    const args = ['read', this.id]
    if (request.offset !== undefined) args.push('--offset', String(request.offset))
    if (request.count !== undefined) args.push('--count', String(request.count))
    const page = this.engine.callSync(args)
    const [lineBegin, lineEnd] = page.range ? [page.range.start, page.range.end] : [0, page.lines.length]
    return { text: page.lines.join('\n'), totalLines: page.total_lines, lineBegin, lineEnd, truncated: page.truncated }
  }

  async signal(signal) {
    const answer = await this.engine.signal(this.id, signal.replace(/^SIG/, ''))
    return { delivered: true, targetPgid: answer.pgid }
  }

  status() {
    return this.statusValue
  }

  async close(_reason) {
    this.exitWatch.abort(new Error('closed'))
    try {
      await this.engine.kill(this.id)
    } catch (error) {
      if (!(error instanceof EngineError && error.code === 'NO_TERMINAL')) throw error
    }
    await this.exited
    if (this.statusValue.kind === 'running') this.statusValue = { kind: 'exited', exitCode: null, signal: 'SIGKILL' }
  }
}

/**
 * A PtyBackend for the PTY registry: `type` and `spawn(request, signal)`
 * giving sessions backed by engine terminals (one Engine, passed in).
 */
export function ptyBackend(engine, { type = 'tmux-engine', pollMs = 50 } = {}) {
  return {
    type,
    async spawn(request = {}, signal) {
      signal?.throwIfAborted()
      const snapshot = await engine.spawn({
        command: request.command, name: request.name, cwd: request.cwd, env: request.env,
        cols: request.cols, rows: request.rows,
      })
      if (signal?.aborted) {
        await engine.kill(snapshot.id).catch(() => {})
        signal.throwIfAborted()
      }
      return new EngineSession(engine, snapshot, pollMs)
    },
  }
}
