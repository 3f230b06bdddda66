//! The send under way: its [`SendOperation`] (the output since it began,
//! read from the terminal's stream; a wait for more; a cancel; the reason
//! it ended, set once) and the [`SendHandle`] its caller holds. Apart from
//! the request and answer (`mod.rs`) because these are live, shared
//! between a backend and a face, and carry the only state of a send.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{SendAnswer, WaitReason};
use crate::Result;
use crate::registry::values::TerminalStatus;
use crate::screen::render::render;
use crate::stream::{OutputCursor, Stream};

/// The output produced since a send began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOutput {
    /// The output as text, escape sequences stripped.
    pub text: String,
    /// The output as raw bytes.
    pub bytes: Bytes,
    /// Whether older output was dropped to stay within the stream's bound
    /// (or lost on its way).
    pub truncated: bool,
    /// Where the send's output began: `read since` it gets all of it, as
    /// far as the ring still holds it.
    pub start: OutputCursor,
    /// Where the send's output ends now.
    pub end: OutputCursor,
}

/// A send under way, shared by its backend (which ends it) and whoever
/// holds its handle: the output since it began, read from the terminal's
/// [`Stream`]; a wait for more of it; a cancel; and the reason it ended,
/// set once by whoever ends it first.
#[derive(Debug)]
pub struct SendOperation {
    stream: Arc<Stream>,
    /// The stream's byte count when the send began: where its output
    /// starts.
    start: u64,
    /// The stream's gap count then: a gap since cuts the output.
    gaps: u64,
    /// The terminal's status: once it leaves `running`, no more output
    /// comes.
    status: watch::Receiver<TerminalStatus>,
    cancel: CancellationToken,
    ended: Mutex<Option<WaitReason>>,
}

impl SendOperation {
    /// A send that begins now, at the end of `stream`, on a terminal whose
    /// status `status` pushes.
    pub fn new(stream: Arc<Stream>, status: watch::Receiver<TerminalStatus>) -> SendOperation {
        let (start, gaps) = {
            let held = stream.held();
            (held.total, held.gaps)
        };
        SendOperation {
            stream,
            start,
            gaps,
            status,
            cancel: CancellationToken::new(),
            ended: Mutex::new(None),
        }
    }

    /// The output produced since the send began.
    pub fn read_output(&self) -> SendOutput {
        let (bytes, truncated, end) = {
            let held = self.stream.held();
            let (bytes, dropped) = held.since(self.start);
            (bytes, dropped || held.gaps != self.gaps, held.total)
        };
        let cursor = |offset| OutputCursor {
            epoch: self.stream.epoch(),
            offset,
        };
        SendOutput {
            text: render(&bytes),
            bytes,
            truncated,
            start: cursor(self.start),
            end: cursor(end),
        }
    }

    /// Resolves once the send's output is longer than `len` bytes (the
    /// `bytes.len()` of the last [`read_output`](Self::read_output)), or
    /// when the terminal can produce no more: follow the output without
    /// polling.
    pub async fn output_beyond(&self, len: usize) {
        let mut output = self.stream.changes();
        let mut status = self.status.clone();
        let start = self.start;
        // The byte count is pushed on every chunk; the status ends the
        // wait when no more output can come.
        tokio::select! {
            _ = output.wait_for(|&total| total.saturating_sub(start) > len as u64) => {}
            _ = status.wait_for(|status| !status.is_running()) => {}
        }
    }

    /// Asks the send to stop waiting; `true` when this call stopped it,
    /// `false` when it had already ended.
    pub fn cancel(&self) -> bool {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if ended.is_some() {
            return false;
        }
        *ended = Some(WaitReason::Cancelled);
        self.cancel.cancel();
        true
    }

    /// The stream offset where the send's output begins.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Resolves once the send is cancelled: what the backend's waits
    /// select on.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Whether the send was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// A token that cancels the send's waits without recording a reason:
    /// a kill's, after which the send ends `cancelled` by its own wait.
    pub(crate) fn stopper(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Ends the send for `reason` unless it already ended; the reason that
    /// stands.
    pub fn settle(&self, reason: WaitReason) -> WaitReason {
        *self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason)
    }

    /// Ends the send for `reason` over any other end but a cancel (one
    /// that only said the text was not typed); the reason that stands.
    pub fn settle_over(&self, reason: WaitReason) -> WaitReason {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        match *ended {
            Some(WaitReason::Cancelled) => WaitReason::Cancelled,
            _ => *ended.insert(reason),
        }
    }
}

/// A send under way: its live operation (the output so far, the cancel)
/// and the future of its end. A backend's `start_send` gives one ending in
/// its [`SendAnswer`]; [`Owned::send`](crate::registry::Owned::send) one the registry
/// drives to its end even if the handle is dropped (the terminal accepts
/// the next send only then); the verb layer one ending in the answer cut
/// to the request's bound, the faces one ending in its JSON.
pub struct SendHandle<T = SendAnswer> {
    /// Reads output and cancels while the send runs.
    pub operation: Arc<SendOperation>,
    /// Resolves when the send ends.
    pub result: BoxFuture<'static, Result<T>>,
}

impl<T> fmt::Debug for SendHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendHandle").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> SendHandle<T> {
    /// The output produced since the send began.
    pub fn read_output(&self) -> SendOutput {
        self.operation.read_output()
    }

    /// Stops waiting; `true` when this call stopped the send, `false` when
    /// it had already finished.
    pub fn cancel(&self) -> bool {
        self.operation.cancel()
    }

    /// The live operation, to read output or cancel from elsewhere while
    /// [`result`](SendHandle::result) is awaited.
    pub fn operation(&self) -> Arc<SendOperation> {
        Arc::clone(&self.operation)
    }

    /// Resolves once the send's output is longer than `len` bytes (pass the
    /// `bytes.len()` of the last [`read_output`](SendHandle::read_output)),
    /// or when the terminal can produce no more: follow output without
    /// polling.
    pub async fn output_beyond(&self, len: usize) {
        self.operation.output_beyond(len).await;
    }

    /// Waits for the send to end.
    ///
    /// # Errors
    ///
    /// The backend's failure (for tmux, `SERVER_GONE` when the server died
    /// during the send), or `REGISTRY_DISPOSING` when the registry was
    /// disposed first.
    pub async fn result(self) -> Result<T> {
        self.result.await
    }

    /// The same send, its end made into another value by `then`.
    pub fn then<U, F>(self, then: impl FnOnce(T) -> F + Send + 'static) -> SendHandle<U>
    where
        F: std::future::Future<Output = Result<U>> + Send + 'static,
    {
        let result = self.result;
        SendHandle {
            operation: self.operation,
            result: Box::pin(async move { then(result.await?).await }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::stream::stream_of;

    /// A send begun after `before` on a stream of at most `limit` bytes,
    /// its terminal running.
    fn begun(before: &[&'static [u8]], limit: usize) -> (Arc<Stream>, SendOperation) {
        let stream = Arc::new(stream_of(before, limit));
        let (_, status) = watch::channel(TerminalStatus::Running);
        let send = SendOperation::new(Arc::clone(&stream), status);
        (stream, send)
    }

    #[test]
    fn its_output_is_the_streams_since_it_began_and_says_when_cut() {
        let (stream, send) = begun(&[b"$ "], 64);
        stream.push(Bytes::from_static(b"\x1b[1mhi\x1b[0m\r\n"));
        let output = send.read_output();
        assert_eq!(output.text, "hi\n");
        assert_eq!(&output.bytes[..], b"\x1b[1mhi\x1b[0m\r\n");
        assert!(!output.truncated);
        assert_eq!((output.start.offset, output.end.offset), (2, 14));
        assert_eq!(output.start.epoch, stream.epoch());
        // A skip inside the send's output cuts it, though nothing of it
        // left the ring.
        stream.skipped();
        assert!(send.read_output().truncated);
        // Lapped by the ring: the newest bytes, cut.
        let (stream, send) = begun(&[], 8);
        stream.push(Bytes::from_static(b"0123456789"));
        let output = send.read_output();
        assert!(output.truncated);
        assert_eq!(output.start.offset, 0);
        assert_eq!(output.end.offset, 10);
    }

    #[test]
    fn a_cancel_stops_it_once_and_stands_over_later_ends() {
        let (_, send) = begun(&[], 64);
        assert!(!send.is_cancelled());
        assert!(send.cancel());
        assert!(send.is_cancelled());
        assert!(!send.cancel(), "already ended");
        assert_eq!(send.settle(WaitReason::Idle), WaitReason::Cancelled);
        assert_eq!(
            send.settle_over(WaitReason::FullScreen),
            WaitReason::Cancelled
        );
        // The first end stands; `settle_over` replaces any but a cancel,
        // and a send that ended cannot be cancelled.
        let (_, send) = begun(&[], 64);
        assert_eq!(send.settle(WaitReason::Timeout), WaitReason::Timeout);
        assert_eq!(send.settle(WaitReason::Idle), WaitReason::Timeout);
        assert_eq!(
            send.settle_over(WaitReason::FullScreen),
            WaitReason::FullScreen
        );
        assert!(!send.cancel());
        assert!(!send.is_cancelled());
        // A kill's stopper ends the waits without a reason of its own.
        let (_, send) = begun(&[], 64);
        send.stopper().cancel();
        assert!(send.is_cancelled());
        assert_eq!(send.settle(WaitReason::Cancelled), WaitReason::Cancelled);
    }

    #[tokio::test]
    async fn more_output_wakes_a_follower_and_so_does_the_end() {
        let stream = Arc::new(stream_of(&[b"before"], 64));
        let (status, watched) = watch::channel(TerminalStatus::Running);
        let send = SendOperation::new(Arc::clone(&stream), watched);
        let more = send.output_beyond(2);
        tokio::pin!(more);
        assert!(futures_util::poll!(&mut more).is_pending());
        stream.push(Bytes::from_static(b"ab"));
        assert!(
            futures_util::poll!(&mut more).is_pending(),
            "2 bytes, not more"
        );
        stream.push(Bytes::from_static(b"c"));
        more.await;
        // No more can come once the terminal stopped running.
        let beyond = send.output_beyond(100);
        tokio::pin!(beyond);
        assert!(futures_util::poll!(&mut beyond).is_pending());
        status.send_replace(TerminalStatus::Gone {
            reason: "closed".to_owned(),
        });
        beyond.await;
        let cancelled = send.cancelled();
        tokio::pin!(cancelled);
        assert!(futures_util::poll!(&mut cancelled).is_pending());
        send.cancel();
        cancelled.await;
    }
}
