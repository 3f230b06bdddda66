//! The task that writes one stream to its kept history where no relay
//! keeps it (`keeper.rs`: a library without a relay, a relay of an older
//! engine): a reader of the stream like any other (the stream's `push`
//! stays its one write point), batching what arrives into few large
//! appends.
//!
//! Loss window: bytes reach the files (the page cache) at most
//! [`FLUSH_INTERVAL`] after they arrived, or as soon as [`FLUSH_BYTES`]
//! are waiting, whichever comes first; an engine killed outright loses at
//! most that. A writer that falls behind the stream's ring by more than
//! the ring holds loses the evicted bytes, counted in `Meta::gaps`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Kept;
use super::title::Titles;
use crate::screen::asciicast::{Header, Writer};
use crate::stream::{OutputCursor, Stream};

/// The longest a byte waits before it is written.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Waiting bytes that are written at once.
pub(crate) const FLUSH_BYTES: u64 = 64 * 1024;

/// A recording beside the history (`record: true`).
type Recorder = Arc<Mutex<Writer<std::fs::File>>>;

/// Starts the asciicast v2 recording of the stream of `epoch` beside the
/// history: `<epoch>.cast` (`0600`), bounded by the history's limit, each
/// batch one output event (so timed to the batch, at most a second off).
fn recorder(kept: &Kept, epoch: u64) -> Option<Recorder> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = kept.dir().join(format!("{epoch:016x}.cast"));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path);
    let size = kept.meta().size.unwrap_or_default();
    match file.and_then(|file| Writer::new(file, &Header::now(size), kept.limit)) {
        Ok(writer) => Some(Arc::new(Mutex::new(writer))),
        Err(error) => {
            warn!(path = %path.display(), %error, "recording beside the kept history");
            None
        }
    }
}

/// Writes `stream` from its offset `from` to `kept` until `cancel`, then
/// writes what is left (and, with `record`, an asciicast recording beside
/// it). `cwd` tells the program's working directory, read at most once
/// per flush interval.
pub(crate) async fn follow(
    kept: Arc<Kept>,
    stream: Arc<Stream>,
    from: u64,
    record: bool,
    cwd: Arc<dyn Fn() -> Option<PathBuf> + Send + Sync>,
    cancel: CancellationToken,
) {
    let recording = if record {
        recorder(&kept, stream.epoch())
    } else {
        None
    };
    let started = Instant::now();
    let mut changes = stream.changes();
    // What arrived before this writer subscribed is waiting already.
    changes.mark_changed();
    let mut at = OutputCursor {
        epoch: stream.epoch(),
        offset: from,
    };
    let mut titles = Titles::default();
    let mut meta_due = Instant::now();
    loop {
        let stopping = tokio::select! {
            () = cancel.cancelled() => true,
            changed = changes.changed() => changed.is_err(),
        };
        if !stopping {
            // Batch: until enough waits or the oldest waiting byte is due.
            let due = Instant::now() + FLUSH_INTERVAL;
            while stream.end().offset.saturating_sub(at.offset) < FLUSH_BYTES {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep_until(due) => break,
                    changed = changes.changed() => if changed.is_err() { break },
                }
            }
        }
        let read = stream.read(Some(at));
        if read.gap.is_some() {
            kept.update(|meta| meta.gaps += 1);
        }
        at = read.end();
        if !read.bytes.is_empty() {
            if let Some(title) = titles.scan(&read.bytes) {
                kept.update(|meta| meta.title = Some(title));
            }
            let writer = Arc::clone(&kept);
            let bytes = read.bytes;
            let recording = recording.clone();
            let at = started.elapsed();
            let written = tokio::task::spawn_blocking(move || {
                if let Some(recording) = recording {
                    let mut recording = recording.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Err(error) = recording.output(at, &bytes) {
                        warn!(%error, "recording beside the kept history");
                    }
                }
                writer.append(&bytes)
            })
            .await;
            match written {
                Ok(Err(error)) => {
                    warn!(dir = %kept.dir().display(), %error, "kept history write failed")
                }
                Err(error) => warn!(%error, "kept history writer"),
                Ok(Ok(())) => {}
            }
        }
        if stopping || Instant::now() >= meta_due {
            meta_due = Instant::now() + FLUSH_INTERVAL;
            if let Some(dir) = cwd() {
                kept.update(|meta| meta.cwd = Some(dir));
            }
            let writer = Arc::clone(&kept);
            if let Ok(Err(error)) = tokio::task::spawn_blocking(move || writer.save_meta()).await {
                warn!(%error, "kept history meta");
            }
        }
        if stopping || cancel.is_cancelled() {
            return;
        }
    }
}
