//! Sends: writing text to the pane exactly (the control client's streamed
//! write, [`ControlClient::send_bytes`], queued in order behind any other
//! write to the terminal) and waiting for the requested condition.
//!
//! [`ControlClient::send_bytes`]: crate::control::client::ControlClient::send_bytes
//!
//! Wait conditions, all pushed or bounded, none polling tmux:
//! - `idle`: no output for the configured quiet period after the write;
//!   reported as `stdin_read` instead when the foreground group is then
//!   blocked reading the terminal (see [`procfs::blocked_on_input`]);
//! - `stdin_read`: the foreground group is blocked reading the terminal,
//!   seen twice in a row with no output between. This reads `/proc` (not
//!   tmux) on a short backoff, only while such a send waits;
//! - `exited`: the status watch leaves `running` (pushed by the watcher);
//! - `timeout` and `cancelled` end any of them.
//!
//! A server that dies during a send fails it with `SERVER_GONE`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::command;
use super::link::{ServerLink, output_since};
use super::pages::viewport;
use crate::registry::CommandResult;
use crate::registry::cursor::{OutputCursor, strip_escapes};
use crate::registry::seam::{
    SendOperation, SendOutput, SendRequest, SendResult, StartedSend, TerminalStatus, WaitFor,
    WaitReason,
};
use crate::shell::ShellKind;
use crate::tmux::procfs;
use crate::{Error, Result};

/// First and longest pause between `/proc` checks of a `stdin_read` wait.
const INPUT_CHECK: (Duration, Duration) = (Duration::from_millis(10), Duration::from_millis(100));

/// A send in flight.
struct TmuxSend {
    shared: Arc<ServerLink>,
    start: u64,
    gaps: u64,
    cancel: CancellationToken,
    /// The reason it ended, set once by whoever ends it first.
    ended: Mutex<Option<WaitReason>>,
    /// Whether the command may go into the shell's history.
    history: bool,
}

impl TmuxSend {
    /// Records `reason` unless the send already ended; returns the reason
    /// that stands.
    fn settle(&self, reason: WaitReason) -> WaitReason {
        *self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason)
    }
}

impl SendOperation for TmuxSend {
    fn read_output(&self) -> SendOutput {
        let (bytes, truncated, end) = {
            let mutable = self.shared.lock();
            let (bytes, dropped) = mutable.ring.since(self.start);
            (
                bytes,
                dropped || mutable.gaps != self.gaps,
                mutable.ring.total,
            )
        };
        let cursor = |offset| OutputCursor {
            epoch: self.shared.epoch,
            offset,
        };
        SendOutput {
            text: strip_escapes(&bytes),
            bytes,
            truncated,
            cursors: Some((cursor(self.start), cursor(end))),
        }
    }

    fn cancel(&self) -> bool {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.is_some() {
            return false;
        }
        *ended = Some(WaitReason::Cancelled);
        self.cancel.cancel();
        true
    }

    fn output_beyond(&self, len: usize) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let mut output = self.shared.output.subscribe();
            let mut status = self.shared.status.subscribe();
            let start = self.start;
            // The byte count is pushed by the watcher on every chunk; the
            // status ends the wait when no more output can come.
            tokio::select! {
                _ = output.wait_for(|&total| total.saturating_sub(start) > len as u64) => {}
                _ = status.wait_for(|status| !status.is_running()) => {}
            }
        })
    }
}

/// Starts a send on `shared`'s pane.
pub(super) fn start(
    shared: &Arc<ServerLink>,
    request: SendRequest,
    history: bool,
) -> Result<StartedSend> {
    if !shared.status.borrow().is_running() {
        return Err(Error::TerminalDead {
            terminal: shared.id.to_string(),
            status: shared.status.borrow().to_string(),
        });
    }
    let cancel = CancellationToken::new();
    let operation = {
        let mut mutable = shared.lock();
        mutable.active_send = Some(cancel.clone());
        Arc::new(TmuxSend {
            shared: Arc::clone(shared),
            start: mutable.ring.total,
            gaps: mutable.gaps,
            cancel,
            ended: Mutex::new(None),
            history,
        })
    };
    let driven = Arc::clone(&operation);
    let result = Box::pin(async move {
        let result = run(&driven, request).await;
        driven.shared.lock().active_send = None;
        result
    });
    Ok(StartedSend { operation, result })
}

async fn run(op: &TmuxSend, request: SendRequest) -> Result<SendResult> {
    let shared = &op.shared;
    let timeout = request.timeout.unwrap_or(shared.config.send_timeout);
    let deadline = Instant::now() + timeout;
    // `command` on an integrated shell at its prompt follows its marks;
    // anywhere else (a program runs in it, no marks) it waits for stdin.
    let shell = match (request.wait, request.submit) {
        (WaitFor::Command, true) => command::integrated(shared),
        _ => None,
    };
    let marked = match shell {
        Some(kind) if command::at_prompt(shared, deadline).await => Some(kind),
        _ => None,
    };
    let what = match request.wait {
        WaitFor::Command => WaitFor::StdinRead,
        other => other,
    };
    // One write, Enter included: a second call would cost a round trip. A
    // leading space keeps it out of the history (the rc's ignorespace).
    let mut text = Vec::with_capacity(request.text.len() + 2);
    if marked.is_some() && !op.history {
        text.push(b' ');
    }
    text.extend_from_slice(&request.text);
    if request.submit {
        text.push(b'\r');
    }
    let text = bytes::Bytes::from(text);
    let typed_at = shared.lock().ring.total;
    let mut outcome = None;
    let write = shared.client.send_bytes(shared.pane, &text);
    let reason = tokio::select! {
        written = write => {
            written?;
            match marked {
                Some(kind) => follow(op, kind, typed_at, deadline, &mut outcome).await,
                None => wait(op, what, deadline).await,
            }
        }
        () = op.cancel.cancelled() => WaitReason::Cancelled,
        () = tokio::time::sleep_until(deadline) => WaitReason::Timeout,
    };
    let wait_reason = op.settle(reason);
    // A server that died under the send is a lost terminal, not a program
    // that exited: the caller gets a typed failure, not a result that
    // looks like a finished command. (A kill by the engine cancels the
    // send first, so it still ends `cancelled`.)
    if wait_reason == WaitReason::Exited
        && let TerminalStatus::Gone { reason } = shared.status.borrow().clone()
    {
        return Err(Error::ServerGone { reason });
    }
    let viewport = viewport(shared).await.unwrap_or_default();
    let (_, truncated) = output_since(shared, op.start, op.gaps);
    Ok(SendResult {
        viewport,
        wait_reason,
        status: shared.status.borrow().clone(),
        truncated,
        command: outcome.filter(|_| wait_reason == WaitReason::Command),
    })
}

/// Follows an integrated shell's marks from stream offset `from` until
/// the command's end (its result into `outcome`), or, once it started,
/// until a program in it waits for input (a REPL: `stdin_read`).
async fn follow(
    op: &TmuxSend,
    kind: ShellKind,
    from: u64,
    deadline: Instant,
    outcome: &mut Option<CommandResult>,
) -> WaitReason {
    let shared = &op.shared;
    let mut output = shared.output.subscribe();
    let mut status = shared.status.subscribe();
    let mut state = command::Follow::new(from);
    let mut check_in = INPUT_CHECK.0;
    let mut blocked_at: Option<u64> = None;
    loop {
        if let Some(ended) = command::follow(shared, kind, &mut state) {
            *outcome = Some(ended);
            return WaitReason::Command;
        }
        tokio::select! {
            () = op.cancel.cancelled() => return WaitReason::Cancelled,
            () = tokio::time::sleep_until(deadline) => return WaitReason::Timeout,
            _ = status.wait_for(|status| !status.is_running()) => return WaitReason::Exited,
            changed = output.changed() => {
                if changed.is_err() {
                    return WaitReason::Exited;
                }
                blocked_at = None;
                check_in = INPUT_CHECK.0;
            }
            () = tokio::time::sleep(check_in), if state.started() => {
                // The shell itself reads only once it marked the end, so a
                // reader now is the command's program.
                let pane = shared.lock().pane_process;
                let blocked = pane.is_some_and(|pane| procfs::blocked_on_input(pane.pid));
                let seen = *output.borrow();
                if blocked && blocked_at == Some(seen) {
                    return match command::follow(shared, kind, &mut state) {
                        Some(ended) => {
                            *outcome = Some(ended);
                            WaitReason::Command
                        }
                        None => WaitReason::StdinRead,
                    };
                }
                blocked_at = blocked.then_some(seen);
                check_in = (check_in * 2).min(INPUT_CHECK.1);
            }
        }
    }
}

/// Waits for `what` after the write; the send's end reason.
async fn wait(op: &TmuxSend, what: WaitFor, deadline: Instant) -> WaitReason {
    let shared = &op.shared;
    let mut output = shared.output.subscribe();
    let mut status = shared.status.subscribe();
    let quiet = shared.config.quiet;
    let mut check_in = INPUT_CHECK.0;
    // A `stdin_read` candidate: the output count when blocking was seen.
    let mut blocked_at: Option<u64> = None;
    if what == WaitFor::None {
        return WaitReason::Idle;
    }
    loop {
        let pause = match what {
            WaitFor::Idle => quiet,
            WaitFor::StdinRead => check_in,
            _ => Duration::from_secs(3600),
        };
        tokio::select! {
            () = op.cancel.cancelled() => return WaitReason::Cancelled,
            () = tokio::time::sleep_until(deadline) => return WaitReason::Timeout,
            _ = status.wait_for(|status| !status.is_running()) => return WaitReason::Exited,
            changed = output.changed() => {
                if changed.is_err() {
                    return WaitReason::Exited;
                }
                blocked_at = None;
                check_in = INPUT_CHECK.0;
            }
            () = tokio::time::sleep(pause) => {
                let pane = shared.lock().pane_process;
                let blocked = pane.is_some_and(|pane| procfs::blocked_on_input(pane.pid));
                match what {
                    WaitFor::Idle => {
                        return if blocked { WaitReason::StdinRead } else { WaitReason::Idle };
                    }
                    WaitFor::StdinRead => {
                        let seen = *output.borrow();
                        if blocked && blocked_at == Some(seen) {
                            return WaitReason::StdinRead;
                        }
                        blocked_at = blocked.then_some(seen);
                        check_in = (check_in * 2).min(INPUT_CHECK.1);
                    }
                    _ => {}
                }
            }
        }
    }
}
