//! [`StubTerminal`] and its sends, for [`super`]'s backend.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Gate, STUB_PID, lock, stub_error};
use tmux_engine::control::client::PaneEvent as OutputEvent;
use tmux_engine::registry::{
    BackendTerminal, CloseReason, Liveness, OutputStream, ReadPage, ReadRequest, SendAnswer,
    SendHandle, SendOperation, SendRequest, Signal, SignalDelivery, Stream, TerminalStatus,
    WaitReason,
};
use tmux_engine::screen::Screen;
use tmux_engine::vocab::ExitStatus;
use tmux_engine::vocab::Size;
use tmux_engine::{Error, Result};

/// One stub terminal; see the module docs.
pub struct StubTerminal {
    serial: u64,
    pid: Option<u32>,
    status: watch::Sender<TerminalStatus>,
    closed: Mutex<Vec<CloseReason>>,
    pub(super) closed_ok: AtomicBool,
    shut_down: AtomicBool,
    reject_send: AtomicBool,
    reject_close: AtomicBool,
    close_gate: Mutex<Option<Gate>>,
    operation: Mutex<Option<StubSend>>,
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
            .is_some_and(|send| send.settle(WaitReason::Idle))
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

    fn start_send(&self, request: SendRequest) -> Result<SendHandle> {
        lock(&self.sent).push(request);
        // The send's own stream, whose output is always `delta`.
        let stream = Arc::new(Stream::new(1024));
        let operation = Arc::new(SendOperation::new(
            Arc::clone(&stream),
            self.status.subscribe(),
        ));
        stream.push(Bytes::from_static(b"delta"));
        let send = StubSend {
            operation: Arc::clone(&operation),
            done: CancellationToken::new(),
        };
        if self.reject_send.load(Ordering::SeqCst) {
            send.settle(WaitReason::Cancelled);
            return Ok(SendHandle {
                operation,
                result: Box::pin(async { Err(stub_error("send", "send failed")) }),
            });
        }
        *lock(&self.operation) = Some(send.clone());
        let status = self.status.subscribe();
        Ok(SendHandle {
            operation,
            result: Box::pin(async move {
                tokio::select! {
                    () = send.done.cancelled() => {}
                    () = send.operation.cancelled() => {}
                }
                let wait_reason = send.operation.settle(WaitReason::Cancelled);
                let status = status.borrow().clone();
                let output = send.operation.read_output();
                Ok(SendAnswer::new(
                    wait_reason,
                    status,
                    "done".to_owned(),
                    output,
                ))
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
#[derive(Clone)]
struct StubSend {
    operation: Arc<SendOperation>,
    /// Wakes the send's end once it is settled other than by a cancel.
    done: CancellationToken,
}

impl StubSend {
    /// Ends the send with `reason`; `false` when it had already ended.
    fn settle(&self, reason: WaitReason) -> bool {
        if self.operation.is_cancelled() || self.done.is_cancelled() {
            return false;
        }
        self.operation.settle(reason);
        self.done.cancel();
        true
    }
}
