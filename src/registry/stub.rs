//! A scriptable in-memory backend for tests (feature `stub`).
//!
//! [`StubBackend`] and [`StubTerminal`] are the registry-logic tests' double:
//! every behaviour the registry must cope with can be switched on (reject a
//! send, reject a close, hold a close or a spawn at a [`Gate`], let the
//! program exit, make the server vanish, answer probes with anything), and
//! every call is recorded for assertions. No processes, no tmux.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::TerminalId;
use super::persist::TerminalRecord;
use super::seam::{
    Backend, BackendTerminal, CloseReason, ExitStatus, Liveness, OutputEvent, OutputStream,
    ReadPage, ReadRequest, ReapReport, Screen, SendOperation, SendOutput, SendRequest, SendResult,
    SpawnRequest, StartedSend, TerminalStatus, WaitReason,
};
use super::signal::{Signal, SignalDelivery};
use crate::vocab::Size;
use crate::{Error, Result};

/// What snapshots call stub terminals.
pub const STUB_KIND: &str = "stub";

/// The pid stub terminals report unless made without one.
pub const STUB_PID: u32 = 123;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn stub_error(what: &str, message: &str) -> Error {
    Error::io(
        format!("stub {what}"),
        std::io::Error::other(message.to_owned()),
    )
}

/// A latch: closed until [`open`](Gate::open), then open for good.
#[derive(Debug, Clone, Default)]
pub struct Gate(CancellationToken);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Gate::default()
    }

    /// Opens the gate, releasing every waiter.
    pub fn open(&self) {
        self.0.cancel();
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Waits until the gate is open.
    pub async fn wait(&self) {
        self.0.cancelled().await;
    }
}

/// A custom spawn: what [`StubBackend::with_spawn`] runs instead of the
/// default.
pub type SpawnHook =
    Arc<dyn Fn(SpawnRequest) -> BoxFuture<'static, Result<Arc<StubTerminal>>> + Send + Sync>;

/// A backend of [`StubTerminal`]s.
pub struct StubBackend {
    hook: Option<SpawnHook>,
    spawn_gate: Mutex<Option<Gate>>,
    terminals: Mutex<Vec<(TerminalId, Arc<StubTerminal>)>>,
    spawned: watch::Sender<usize>,
    reaped: Mutex<Vec<TerminalId>>,
}

impl std::fmt::Debug for StubBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubBackend").finish_non_exhaustive()
    }
}

impl StubBackend {
    /// A backend whose spawns succeed at once (or when the spawn gate
    /// opens); its terminals' kind is [`STUB_KIND`].
    pub fn new() -> Arc<Self> {
        Arc::new(StubBackend {
            hook: None,
            spawn_gate: Mutex::new(None),
            terminals: Mutex::new(Vec::new()),
            spawned: watch::Sender::new(0),
            reaped: Mutex::new(Vec::new()),
        })
    }

    /// A backend whose spawns run `hook`; the terminals it returns are
    /// recorded like the default ones.
    pub fn with_spawn<F>(hook: F) -> Arc<Self>
    where
        F: Fn(SpawnRequest) -> BoxFuture<'static, Result<Arc<StubTerminal>>>
            + Send
            + Sync
            + 'static,
    {
        let mut backend = StubBackend::new();
        if let Some(backend) = Arc::get_mut(&mut backend) {
            backend.hook = Some(Arc::new(hook));
        }
        backend
    }

    /// Makes default spawns wait for `gate`, ignoring their cancellation
    /// token (like a backend that is slow to notice); `None` removes it.
    pub fn set_spawn_gate(&self, gate: Option<Gate>) {
        *lock(&self.spawn_gate) = gate;
    }

    /// Every terminal spawned so far, oldest first.
    pub fn terminals(&self) -> Vec<Arc<StubTerminal>> {
        lock(&self.terminals)
            .iter()
            .map(|(_, terminal)| Arc::clone(terminal))
            .collect()
    }

    /// The terminal spawned `index`-th (zero-based), if any.
    pub fn terminal(&self, index: usize) -> Option<Arc<StubTerminal>> {
        lock(&self.terminals)
            .get(index)
            .map(|(_, terminal)| Arc::clone(terminal))
    }

    /// Waits until at least `count` spawns have started.
    pub async fn wait_spawns_started(&self, count: usize) {
        let mut started = self.spawned.subscribe();
        // The sender lives in `self`, so this cannot fail while we wait.
        let _ = started.wait_for(|started| *started >= count).await;
    }

    /// The ids [`Backend::reap`] removed.
    pub fn reaped(&self) -> Vec<TerminalId> {
        lock(&self.reaped).clone()
    }

    fn record(&self, id: TerminalId, terminal: &Arc<StubTerminal>) {
        lock(&self.terminals).push((id, Arc::clone(terminal)));
    }
}

impl Backend for StubBackend {
    fn kind(&self) -> &str {
        STUB_KIND
    }

    fn spawn(&self, request: SpawnRequest) -> BoxFuture<'_, Result<Arc<dyn BackendTerminal>>> {
        self.spawned.send_modify(|started| *started += 1);
        Box::pin(async move {
            let id = request.id.clone();
            let terminal = match &self.hook {
                Some(hook) => hook(request).await?,
                None => {
                    let gate = lock(&self.spawn_gate).clone();
                    if let Some(gate) = gate {
                        gate.wait().await;
                    }
                    StubTerminal::new()
                }
            };
            self.record(id, &terminal);
            Ok(terminal as Arc<dyn BackendTerminal>)
        })
    }

    fn adopt<'a>(
        &'a self,
        record: &'a TerminalRecord,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn BackendTerminal>>>> {
        Box::pin(async move {
            let terminals = lock(&self.terminals);
            let found = terminals.iter().rev().find(|(id, terminal)| {
                *id == record.id && terminal.locator() == record.locator && !terminal.is_closed()
            });
            Ok(found.and_then(|(_, terminal)| {
                let alive = !matches!(terminal.status(), TerminalStatus::Gone { .. });
                alive.then(|| Arc::clone(terminal) as Arc<dyn BackendTerminal>)
            }))
        })
    }

    fn reap<'a>(
        &'a self,
        records: &'a [TerminalRecord],
        claimed: &'a [TerminalId],
    ) -> BoxFuture<'a, Result<ReapReport>> {
        Box::pin(async move {
            let mut report = ReapReport::default();
            for (id, terminal) in lock(&self.terminals).iter() {
                if terminal.is_closed()
                    || records.iter().any(|record| record.id == *id)
                    || claimed.contains(id)
                {
                    continue;
                }
                terminal.vanish("reaped");
                terminal.closed_ok.store(true, Ordering::SeqCst);
                lock(&self.reaped).push(id.clone());
                report.removed.push(id.to_string());
            }
            Ok(report)
        })
    }
}

/// One stub terminal; see the module docs.
pub struct StubTerminal {
    serial: u64,
    pid: Option<u32>,
    status: watch::Sender<TerminalStatus>,
    closed: Mutex<Vec<CloseReason>>,
    closed_ok: AtomicBool,
    shut_down: AtomicBool,
    reject_send: AtomicBool,
    reject_close: AtomicBool,
    close_gate: Mutex<Option<Gate>>,
    operation: Mutex<Option<Arc<StubSend>>>,
    sent: Mutex<Vec<SendRequest>>,
    signals: Mutex<Vec<Signal>>,
    probe_answer: Mutex<Option<Liveness>>,
    probes: AtomicU32,
    respawns: Mutex<Vec<Instant>>,
    written: Mutex<Vec<u8>>,
    sizes: Mutex<Vec<Size>>,
    output: broadcast::Sender<OutputEvent>,
}

impl std::fmt::Debug for StubTerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubTerminal")
            .field("serial", &self.serial)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

impl StubTerminal {
    /// A running terminal with pid [`STUB_PID`].
    pub fn new() -> Arc<Self> {
        StubTerminal::with_pid(Some(STUB_PID))
    }

    /// A running terminal with no process id.
    pub fn without_pid() -> Arc<Self> {
        StubTerminal::with_pid(None)
    }

    fn with_pid(pid: Option<u32>) -> Arc<Self> {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        Arc::new(StubTerminal {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            pid,
            status: watch::Sender::new(TerminalStatus::Running),
            closed: Mutex::new(Vec::new()),
            closed_ok: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            reject_send: AtomicBool::new(false),
            reject_close: AtomicBool::new(false),
            close_gate: Mutex::new(None),
            operation: Mutex::new(None),
            sent: Mutex::new(Vec::new()),
            signals: Mutex::new(Vec::new()),
            probe_answer: Mutex::new(None),
            probes: AtomicU32::new(0),
            respawns: Mutex::new(Vec::new()),
            written: Mutex::new(Vec::new()),
            sizes: Mutex::new(Vec::new()),
            output: broadcast::channel(64).0,
        })
    }

    /// Makes the program print `bytes`: every output stream receives them.
    pub fn emit(&self, bytes: &[u8]) {
        let _ = self
            .output
            .send(OutputEvent::Output(Bytes::copy_from_slice(bytes)));
    }

    /// Every byte written through [`BackendTerminal::write`], in order.
    pub fn written(&self) -> Vec<u8> {
        lock(&self.written).clone()
    }

    /// Every size asked for through [`BackendTerminal::resize`].
    pub fn sizes(&self) -> Vec<Size> {
        lock(&self.sizes).clone()
    }

    /// A number unique to this terminal (also its locator).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The reasons of every close attempt, failed ones included.
    pub fn closed(&self) -> Vec<CloseReason> {
        lock(&self.closed).clone()
    }

    /// Whether a close succeeded.
    pub fn is_closed(&self) -> bool {
        self.closed_ok.load(Ordering::SeqCst)
    }

    /// Whether [`BackendTerminal::shutdown`] was called (the terminal keeps
    /// running; only this process let go of it).
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::SeqCst)
    }

    /// Makes sends fail (in their result) with "send failed".
    pub fn set_reject_send(&self, reject: bool) {
        self.reject_send.store(reject, Ordering::SeqCst);
    }

    /// Makes closes fail with "close failed".
    pub fn set_reject_close(&self, reject: bool) {
        self.reject_close.store(reject, Ordering::SeqCst);
    }

    /// Makes closes wait for `gate`; `None` removes it.
    pub fn set_close_gate(&self, gate: Option<Gate>) {
        *lock(&self.close_gate) = gate;
    }

    /// The program exits: the status becomes `exited` and is pushed.
    pub fn exit(&self, exit: ExitStatus) {
        self.status.send_replace(TerminalStatus::Exited { exit });
    }

    /// The server vanishes: the status becomes `gone` and is pushed;
    /// respawning in place fails with `SERVER_GONE`.
    pub fn vanish(&self, reason: &str) {
        self.status.send_replace(TerminalStatus::Gone {
            reason: reason.to_owned(),
        });
    }

    /// Makes probes answer `answer` whatever the status says (a stale
    /// "running" the backend has not noticed yet, or an unresponsive
    /// server); `None` derives the answer from the status again. Respawning
    /// clears it.
    pub fn set_probe_answer(&self, answer: Option<Liveness>) {
        *lock(&self.probe_answer) = answer;
    }

    /// How many probes ran.
    pub fn probes(&self) -> u32 {
        self.probes.load(Ordering::SeqCst)
    }

    /// How many respawns succeeded.
    pub fn respawns(&self) -> usize {
        lock(&self.respawns).len()
    }

    /// When each successful respawn happened (tokio clock).
    pub fn respawn_times(&self) -> Vec<Instant> {
        lock(&self.respawns).clone()
    }

    /// Every send request received.
    pub fn sent(&self) -> Vec<SendRequest> {
        lock(&self.sent).clone()
    }

    /// Every signal delivered.
    pub fn signals(&self) -> Vec<Signal> {
        lock(&self.signals).clone()
    }

    /// Ends the current send as idle; `false` when none was running.
    pub fn finish_send(&self) -> bool {
        lock(&self.operation)
            .as_ref()
            .is_some_and(|operation| operation.settle(WaitReason::Idle))
    }
}

impl BackendTerminal for StubTerminal {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn locator(&self) -> serde_json::Value {
        serde_json::json!({ "stub": self.serial })
    }

    fn status(&self) -> TerminalStatus {
        self.status.borrow().clone()
    }

    fn watch_status(&self) -> watch::Receiver<TerminalStatus> {
        self.status.subscribe()
    }

    fn start_send(&self, request: SendRequest) -> Result<StartedSend> {
        lock(&self.sent).push(request);
        let operation = Arc::new(StubSend {
            reason: Mutex::new(None),
            done: CancellationToken::new(),
        });
        if self.reject_send.load(Ordering::SeqCst) {
            operation.settle(WaitReason::Cancelled);
            return Ok(StartedSend {
                operation,
                result: Box::pin(async { Err(stub_error("send", "send failed")) }),
            });
        }
        *lock(&self.operation) = Some(Arc::clone(&operation));
        let status = self.status.subscribe();
        let settled = Arc::clone(&operation);
        Ok(StartedSend {
            operation,
            result: Box::pin(async move {
                settled.done.cancelled().await;
                let wait_reason = lock(&settled.reason).unwrap_or(WaitReason::Cancelled);
                let status = status.borrow().clone();
                Ok(SendResult {
                    viewport: "done".to_owned(),
                    wait_reason,
                    status,
                    truncated: false,
                })
            }),
        })
    }

    fn read(&self, request: ReadRequest) -> BoxFuture<'_, Result<ReadPage>> {
        Box::pin(async move {
            Ok(ReadPage {
                lines: vec![format!("{}:{}", request.offset, request.count.unwrap_or(0))],
                total_lines: 1,
                range: 0..1,
                truncated: false,
            })
        })
    }

    fn screen(&self) -> BoxFuture<'_, Result<Screen>> {
        Box::pin(async { Ok(Screen::from_ansi(Size::default(), b"stub ready\r\n")) })
    }

    fn output(&self) -> Result<OutputStream> {
        // A stub's output is whatever `emit` sends; a lagging reader just
        // skips (no snapshot to offer), and the stream ends with the stub.
        let rx = self.output.subscribe();
        Ok(Box::pin(futures_util::stream::unfold(
            rx,
            |mut rx| async move {
                loop {
                    match rx.recv().await {
                        Ok(event) => return Some((event, rx)),
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        )))
    }

    fn write(&self, bytes: Bytes) -> BoxFuture<'_, Result<()>> {
        lock(&self.written).extend_from_slice(&bytes);
        Box::pin(async { Ok(()) })
    }

    fn resize(&self, size: Size) -> BoxFuture<'_, Result<()>> {
        lock(&self.sizes).push(size);
        Box::pin(async move { size.check() })
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<SignalDelivery>> {
        lock(&self.signals).push(signal);
        let pgid = if signal == Signal::Int { 12 } else { 13 };
        Box::pin(async move { Ok(SignalDelivery { signal, pgid }) })
    }

    fn close(&self, reason: CloseReason) -> BoxFuture<'_, Result<()>> {
        lock(&self.closed).push(reason);
        Box::pin(async move {
            if self.reject_close.load(Ordering::SeqCst) {
                return Err(stub_error("close", "close failed"));
            }
            let gate = lock(&self.close_gate).clone();
            if let Some(gate) = gate {
                gate.wait().await;
            }
            self.closed_ok.store(true, Ordering::SeqCst);
            self.status.send_replace(TerminalStatus::Gone {
                reason: "closed".to_owned(),
            });
            if let Some(operation) = lock(&self.operation).take() {
                operation.settle(WaitReason::Exited);
            }
            Ok(())
        })
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        self.shut_down.store(true, Ordering::SeqCst);
        Box::pin(async {})
    }

    fn probe(&self) -> BoxFuture<'_, Result<Liveness>> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        let answer = lock(&self.probe_answer).clone();
        let liveness = answer.unwrap_or_else(|| match self.status() {
            TerminalStatus::Running => Liveness::Alive,
            TerminalStatus::Exited { exit } => Liveness::Exited { exit },
            TerminalStatus::Gone { reason } => Liveness::ServerGone { reason },
        });
        Box::pin(async move { Ok(liveness) })
    }

    fn respawn(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if let TerminalStatus::Gone { reason } = self.status() {
                return Err(Error::ServerGone { reason });
            }
            *lock(&self.probe_answer) = None;
            lock(&self.respawns).push(Instant::now());
            self.status.send_replace(TerminalStatus::Running);
            Ok(())
        })
    }
}

/// A stub send: output is always `delta`; it ends when cancelled, finished
/// or its terminal closes.
struct StubSend {
    reason: Mutex<Option<WaitReason>>,
    done: CancellationToken,
}

impl StubSend {
    /// Ends the send with `reason`; `false` when it had already ended.
    fn settle(&self, reason: WaitReason) -> bool {
        let mut current = lock(&self.reason);
        if current.is_some() {
            return false;
        }
        *current = Some(reason);
        self.done.cancel();
        true
    }
}

impl SendOperation for StubSend {
    fn read_output(&self) -> SendOutput {
        SendOutput {
            text: "delta".to_owned(),
            bytes: Bytes::from_static(b"delta"),
            truncated: false,
        }
    }

    fn cancel(&self) -> bool {
        self.settle(WaitReason::Cancelled)
    }
}
