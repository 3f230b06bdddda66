// Types of lib/index.js: the client of the engine's verbs and a PtyBackend.

export declare class EngineError extends Error {
  /** The stable code: NO_TERMINAL, TIMEOUT, FOREIGN_TERMINAL, ... */
  readonly code: string
  readonly detail: string
}

export declare function findBinary(): string

export interface EngineOptions {
  stateDir?: string
  owner?: string
  binary?: string
  env?: NodeJS.ProcessEnv
}

export interface Snapshot {
  id: string
  name?: string | null
  pid?: number | null
  status: { kind: 'running' } | { kind: 'exited'; exit?: { code?: number; signal?: string } } | { kind: string }
  [field: string]: unknown
}

export type WaitReason = 'idle' | 'stdin_read' | 'busy' | 'command' | 'exited' | 'timeout' | 'cancelled'

export interface SendAnswer {
  output: string
  wait_reason: WaitReason
  exit_code?: number
  status: Snapshot['status']
  typed: boolean
  truncated: boolean
  cursor?: string
  start_cursor?: string
  commands?: Array<{ command?: string; exit_code?: number; output?: string; [field: string]: unknown }>
  [field: string]: unknown
}

export interface ReadAnswer {
  lines?: string[]
  text?: string
  bytes?: string
  total_lines?: number
  range?: { start: number; end: number }
  truncated: boolean
  next_cursor?: string
  gap?: 'evicted' | 'stale'
  more?: boolean
}

export interface ScreenAnswer {
  lines: string[]
  cols: number
  rows: number
  cursor: [number, number]
}

export declare class Engine {
  constructor(options?: EngineOptions)
  readonly binary: string
  close(): Promise<void>
  spawn(request?: {
    command?: string[]; name?: string; cwd?: string; env?: Record<string, string>
    cols?: number; rows?: number; shell?: string; keepHistory?: boolean; agent?: boolean
  }): Promise<Snapshot>
  list(): Promise<Snapshot[]>
  show(terminal: string): Promise<Snapshot & { shell_integration?: string }>
  send(terminal: string, text: string, options?: {
    submit?: boolean; wait?: 'stdin' | 'idle' | 'exit' | 'none' | 'command'; timeoutSecs?: number; keys?: string[]; maxBytes?: number
  }, cancelled?: AbortSignal): Promise<SendAnswer>
  run(terminal: string, command: string, options?: { timeoutSecs?: number }): Promise<SendAnswer>
  read(terminal: string, options?: {
    offset?: number; count?: number; since?: string; format?: 'lines' | 'text' | 'bytes'; maxBytes?: number
  }): Promise<ReadAnswer>
  screen(terminal: string): Promise<ScreenAnswer>
  wait(terminal: string, options: {
    text?: string; regex?: string; exit?: boolean; command?: string; since?: string; timeoutSecs?: number
  }, cancelled?: AbortSignal): Promise<{ matched: unknown; exit_code?: number; output?: string; [field: string]: unknown }>
  signal(terminal: string, signal: string): Promise<{ signal: string; pgid: number }>
  kill(terminal: string): Promise<{ killed: unknown }>
  commands(terminal: string, options?: { limit?: number }): Promise<{ commands: SendAnswer['commands'] }>
  search(regex: string, options?: { terminal?: string; context?: number; maxMatches?: number }): Promise<unknown>
}

/** The shapes the PTY registry drives. */
export type PtySessionStatus =
  | { kind: 'running' }
  | { kind: 'exited'; exitCode: number | null; signal: string | null }

export interface PtySendRequest {
  text?: string
  submit?: boolean
  wait?: 'stdin' | 'idle' | 'exit' | 'none' | 'command'
  timeoutSecs?: number
}

export interface PtySendOperation {
  done: Promise<{
    viewport: string
    waitReason: WaitReason
    exitCode?: number
    output?: string
    sessionStatus: PtySessionStatus
    truncated: boolean
  }>
  readOutput(): { delta: string; truncated: boolean }
  cancel(): boolean
}

export interface PtyBackendSession {
  readonly motd: string
  readonly pid: number
  startSend(request: PtySendRequest): PtySendOperation
  read(request: { offset?: number; count?: number }): {
    text: string; totalLines: number; lineBegin: number; lineEnd: number; truncated: boolean
  }
  signal(signal: string): Promise<{ delivered: true; targetPgid: number }>
  status(): PtySessionStatus
  close(reason: string): Promise<void>
}

export interface PtyBackend {
  readonly type: string
  spawn(
    request?: { command?: string[]; name?: string; cwd?: string; env?: Record<string, string>; cols?: number; rows?: number },
    signal?: AbortSignal,
  ): Promise<PtyBackendSession>
}

export declare function ptyBackend(engine: Engine, options?: { type?: string; pollMs?: number }): PtyBackend
