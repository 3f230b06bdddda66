//! The writer task of tmux's stdin: writes the lines queued behind a
//! busy pipe, in order and batched, and makes the writer's moves of
//! [`Stdin`](super::stdin::Stdin) (started, idle, hung up) under the
//! state lock; `stdin.rs` states the rule they keep.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::ClientShared;
use super::transport::Sink;
use crate::hops::{Hop, mark};

/// Starts writing to tmux's stdin: the writer task, and direct writes once
/// it has caught up with what was queued before.
///
pub(super) fn start(
    shared: &Arc<ClientShared>,
    stdin: Sink,
    lines: mpsc::UnboundedReceiver<Bytes>,
    hangup: CancellationToken,
) {
    let pipe = Arc::new(stdin);
    shared.lock().stdin.started(pipe.clone());
    shared
        .tasks
        .spawn(write_lines(shared.clone(), pipe, lines, hangup));
}

/// Writes queued lines in order, batching whatever is ready; goes idle
/// (direct writes allowed) only with its queue empty, under the state lock.
async fn write_lines(
    shared: Arc<ClientShared>,
    pipe: Arc<Sink>,
    mut lines: mpsc::UnboundedReceiver<Bytes>,
    hangup: CancellationToken,
) {
    // Made when two lines or more are ready at once (a paste, a burst of
    // commands) and let go when the queue is empty: most clients, idle,
    // hold none (a 64 KiB batch reserved for each was a large part of
    // serve's memory per idle terminal).
    let mut batch = Vec::new();
    let mut next = None;
    loop {
        let line = match next.take() {
            Some(line) => Some(line),
            None => tokio::select! {
                line = lines.recv() => line,
                () = hangup.cancelled() => None,
            },
        };
        let Some(line) = line else { break };
        let written = match lines.try_recv() {
            // One line alone is written as it is, with no copy.
            Err(_) => write_all(&pipe, &line).await,
            Ok(second) => {
                batch.clear();
                batch.extend_from_slice(&line);
                batch.extend_from_slice(&second);
                while batch.len() < 256 * 1024 {
                    match lines.try_recv() {
                        Ok(line) => batch.extend_from_slice(&line),
                        Err(_) => break,
                    }
                }
                write_all(&pipe, &batch).await
            }
        };
        if let Err(e) = written {
            debug!(error = %e, "writing to tmux -C failed");
            break;
        }
        mark(Hop::Written);
        next = shared.lock().stdin.next_or_idle(&mut lines);
        if next.is_none() {
            batch = Vec::new();
        }
    }
    // Dropping the last handle on the pipe (or shutting the link's
    // writing down) is EOF: tmux detaches the client, which ends with
    // `%exit`.
    shared.lock().stdin.hang_up(&pipe);
}

async fn write_all(pipe: &Sink, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        pipe.writable().await?;
        match pipe.try_write(bytes) {
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
