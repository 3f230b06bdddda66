//! The task that writes one stream to its kept history where no relay
//! keeps it (`keeper.rs`: a library without a relay, a relay of an older
//! engine), batching what arrives into few large appends.
//!
//! It takes the stream's bytes as they are pushed (a [`Tap`], run in the
//! stream's writer's context: the stream's `push` stays its one write
//! point) into a queue of its own, bounded by the history's limit, not by
//! the stream's ring. It read the ring before, and lost what the ring
//! evicted while an append was slow: a ring smaller than a batch lost
//! most of every flood by design (`serve --replay-bytes 16384`), the 4 MiB
//! one whatever a flood printed while a write stalled (a disk the kernel
//! throttles writes to), counted in `Meta::gaps`. Now it loses bytes only
//! when it falls behind by more than the history keeps, bytes the files
//! would have rotated out by the time the newer ones were written (still
//! counted as a gap). Each byte is written at its own offset (the
//! stream's base plus its stream offset), so what the queue dropped, and
//! what the stream evicted or skipped before the tap took it, is a hole
//! in the history's offsets, never closed up by the bytes after it.
//! Nothing waits for it: output is never slowed for the disk.
//!
//! Loss window: bytes reach the files (the page cache) at most
//! [`FLUSH_INTERVAL`] after they arrived, or as soon as [`FLUSH_BYTES`]
//! are waiting, whichever comes first; an engine killed outright loses at
//! most that.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Kept;
use super::title::Titles;
use crate::screen::asciicast::{Header, Writer};
use crate::stream::{OutputCursor, Stream, Tap};

/// The longest a byte waits before it is written.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Waiting bytes that are written at once.
pub(crate) const FLUSH_BYTES: u64 = 64 * 1024;

/// The bytes pushed to the stream that the writer has not taken yet.
struct Queue {
    queued: Mutex<Queued>,
    /// Wakes the writer after each push.
    wake: Notify,
    /// The most bytes queued: the history's limit.
    bound: u64,
}

struct Queued {
    /// The next stream byte to take.
    at: OutputCursor,
    /// Each chunk with the cursor of its first byte: a chunk after a
    /// hole (dropped here, or skipped by the stream) does not start where
    /// the one before ended.
    chunks: VecDeque<(OutputCursor, Bytes)>,
    len: u64,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes what `stream` holds past the last byte taken (a push's chunk,
    /// shared, no copy); beyond the bound, drops the oldest queued.
    fn take(&self, stream: &Stream) {
        let mut queued = self.lock();
        let read = stream.read(Some(queued.at));
        queued.at = read.end();
        if !read.bytes.is_empty() {
            queued.len += read.bytes.len() as u64;
            queued.chunks.push_back((read.from, read.bytes));
        }
        while queued.len > self.bound
            && let Some((_, front)) = queued.chunks.pop_front()
        {
            queued.len -= front.len() as u64;
        }
    }

    /// Everything queued, as runs of bytes that follow one another, each
    /// in one buffer (a lone chunk as it is) with the cursor of its first
    /// byte.
    fn drain(&self) -> Vec<(OutputCursor, Bytes)> {
        let mut queued = self.lock();
        queued.len = 0;
        let chunks = std::mem::take(&mut queued.chunks);
        drop(queued);
        let mut runs: Vec<(OutputCursor, u64, Vec<Bytes>)> = Vec::new();
        for (from, chunk) in chunks {
            match runs.last_mut() {
                Some((start, len, parts))
                    if start.epoch == from.epoch && start.offset + *len == from.offset =>
                {
                    *len += chunk.len() as u64;
                    parts.push(chunk);
                }
                _ => runs.push((from, chunk.len() as u64, vec![chunk])),
            }
        }
        runs.into_iter()
            .map(|(start, len, parts)| {
                if parts.len() == 1 {
                    return (start, parts.into_iter().next().unwrap_or_default());
                }
                let mut joined = BytesMut::with_capacity(usize::try_from(len).unwrap_or(0));
                for part in &parts {
                    joined.extend_from_slice(part);
                }
                (start, joined.freeze())
            })
            .collect()
    }

    fn waiting(&self) -> u64 {
        self.lock().len
    }
}

/// Run by the stream on each push, in its writer's context, under its
/// locks: takes this queue's lock only (which the writer holds only to
/// empty it), and never waits.
impl Tap for Queue {
    fn changed(&self, stream: &Stream) {
        self.take(stream);
        self.wake.notify_one();
    }
}

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
    let queue = Arc::new(Queue {
        queued: Mutex::new(Queued {
            at: OutputCursor {
                epoch: stream.epoch(),
                offset: from,
            },
            chunks: VecDeque::new(),
            len: 0,
        }),
        wake: Notify::new(),
        bound: kept.limit,
    });
    let tap: Arc<dyn Tap> = queue.clone();
    stream.tap(Arc::downgrade(&tap));
    // What arrived before the tap is waiting already.
    queue.take(&stream);
    queue.wake.notify_one();
    let mut titles = Titles::default();
    let mut meta_due = Instant::now();
    loop {
        let stopping = tokio::select! {
            () = cancel.cancelled() => true,
            () = queue.wake.notified() => false,
        };
        if !stopping {
            // Batch: until enough waits or the oldest waiting byte is due.
            let due = Instant::now() + FLUSH_INTERVAL;
            while queue.waiting() < FLUSH_BYTES {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep_until(due) => break,
                    () = queue.wake.notified() => {}
                }
            }
        }
        for (from, bytes) in queue.drain() {
            write_run(&kept, recording.as_ref(), &mut titles, started, from, bytes).await;
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

/// Writes one run of stream bytes (from `from` on) at its history
/// offset, the stream's base plus its offset: a stream new to the history
/// (the stream restarted under a new relay's epoch) is mapped first, its
/// bytes before `from` a hole.
async fn write_run(
    kept: &Arc<Kept>,
    recording: Option<&Recorder>,
    titles: &mut Titles,
    started: Instant,
    from: OutputCursor,
    bytes: Bytes,
) {
    if let Some(title) = titles.scan(&bytes) {
        kept.update(|meta| meta.title = Some(title));
    }
    let writer = Arc::clone(kept);
    let recording = recording.cloned();
    let at = started.elapsed();
    let written = tokio::task::spawn_blocking(move || {
        if let Some(recording) = recording {
            let mut recording = recording.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(error) = recording.output(at, &bytes) {
                warn!(%error, "recording beside the kept history");
            }
        }
        let base = match writer.stream_base(from.epoch) {
            Some(base) => base,
            None => {
                writer.resume(from.epoch, 0, from.offset, u64::MAX);
                writer
                    .stream_base(from.epoch)
                    .unwrap_or_else(|| writer.end())
            }
        };
        writer.append_at(base + from.offset, &bytes)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A history of `limit` in a temp dir and a new stream of `ring` bytes
    /// mapped in it at 0.
    fn fresh(ring: usize, limit: u64) -> (tempfile::TempDir, Arc<Kept>, Arc<Stream>) {
        let dir = tempfile::tempdir().unwrap();
        let kept = Arc::new(Kept::open(dir.path().join("t"), limit).unwrap());
        let stream = Arc::new(Stream::new(ring));
        kept.map_stream(stream.epoch(), 0);
        (dir, kept, stream)
    }

    /// Starts the writer of `stream` into `kept` from its byte 0, its tap
    /// in place (once it ran up to its first wait); what stops it, and
    /// its end.
    async fn writing(
        kept: &Arc<Kept>,
        stream: &Arc<Stream>,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let cancel = CancellationToken::new();
        let writer = tokio::spawn(follow(
            Arc::clone(kept),
            Arc::clone(stream),
            0,
            false,
            Arc::new(|| None),
            cancel.clone(),
        ));
        tokio::task::yield_now().await;
        (cancel, writer)
    }

    /// Starts the writer of a new stream of `ring` bytes into a history of
    /// `limit`, pushes `lines` before it runs (on this one thread it runs
    /// only once this task waits), stops it; the history, the bytes
    /// pushed.
    async fn flooded(
        ring: usize,
        limit: u64,
        lines: usize,
    ) -> (tempfile::TempDir, Arc<Kept>, Vec<u8>) {
        let (dir, kept, stream) = fresh(ring, limit);
        let (cancel, writer) = writing(&kept, &stream).await;
        let mut all = Vec::new();
        for n in 0..lines {
            let line = format!("line {n:05}\n");
            stream.push(Bytes::from(line.clone()));
            all.extend_from_slice(line.as_bytes());
        }
        cancel.cancel();
        writer.await.unwrap();
        (dir, kept, all)
    }

    /// The stream took ten times its ring before the writer ran (a slow
    /// append, a starved runtime): every byte is kept all the same. The
    /// writer read the ring, and lost all but its last KiB here.
    #[tokio::test(flavor = "current_thread")]
    async fn a_writer_slower_than_the_ring_loses_nothing() {
        let (_dir, kept, all) = flooded(1024, 1 << 20, 1000).await;
        assert_eq!(all.len(), 11_000);
        assert_eq!(kept.meta().gaps, 0);
        assert_eq!(&kept.read(None).unwrap().bytes[..], &all[..]);
    }

    /// Behind by more than the history keeps, the writer drops the
    /// oldest it holds (what the files would rotate out anyway) and
    /// counts the hole; what it kept lies at its own offsets (it was
    /// written from the history's start, and every cursor named bytes
    /// ~7 KB later than it read).
    #[tokio::test(flavor = "current_thread")]
    async fn a_writer_behind_by_more_than_the_history_keeps_drops_the_oldest() {
        let (_dir, kept, all) = flooded(1024, 4096, 1000).await;
        assert_eq!(kept.meta().gaps, 1);
        let read = kept.read(None).unwrap();
        assert!(read.bytes.len() <= 4096, "{}", read.bytes.len());
        let from = usize::try_from(read.from.offset).unwrap();
        assert!(from > 0, "the oldest were dropped");
        assert_eq!(&read.bytes[..], &all[from..], "at their own offsets");
        let cursor = OutputCursor {
            epoch: kept.meta().streams[0].0,
            offset: all.len() as u64 - 11,
        };
        assert_eq!(&kept.read(Some(cursor)).unwrap().bytes[..], b"line 00999\n");
    }

    /// The stream went on past bytes this process never got (it fell
    /// behind the relay: `skip_to`): the history keeps a hole there, and
    /// a cursor past it reads exactly its bytes.
    #[tokio::test(flavor = "current_thread")]
    async fn bytes_the_stream_skipped_are_a_hole() {
        let (_dir, kept, stream) = fresh(1 << 20, 1 << 20);
        let (cancel, writer) = writing(&kept, &stream).await;
        stream.push(Bytes::from_static(b"before\n"));
        stream.skip_to(100);
        stream.push(Bytes::from_static(b"after\n"));
        cancel.cancel();
        writer.await.unwrap();
        let at = |offset| {
            kept.read(Some(OutputCursor {
                epoch: stream.epoch(),
                offset,
            }))
            .unwrap()
        };
        let read = at(100);
        assert_eq!((&read.bytes[..], read.gap), (&b"after\n"[..], None));
        let read = at(0);
        assert_eq!((&read.bytes[..], read.gap), (&b"before\n"[..], None));
        let read = at(7);
        assert_eq!(read.gap, Some(crate::stream::CursorGap::Evicted));
        assert_eq!((read.from.offset, &read.bytes[..]), (100, &b"after\n"[..]));
        assert_eq!(kept.meta().gaps, 1);
    }

    /// The stream restarted under a new relay's epoch, unknown to the
    /// history: the writer maps it at the history's end before writing
    /// it, so its cursors read its bytes (they read as stale before).
    #[tokio::test(flavor = "current_thread")]
    async fn a_restarted_stream_is_mapped_before_it_is_written() {
        let (_dir, kept, stream) = fresh(1 << 20, 1 << 20);
        let (cancel, writer) = writing(&kept, &stream).await;
        stream.push(Bytes::from_static(b"old\n"));
        let epoch = OutputCursor::new_epoch();
        stream.restart(epoch, 0);
        stream.push(Bytes::from_static(b"new\n"));
        cancel.cancel();
        writer.await.unwrap();
        assert_eq!(kept.stream_base(epoch), Some(4));
        let read = kept.read(Some(OutputCursor { epoch, offset: 1 })).unwrap();
        assert_eq!((&read.bytes[..], read.gap), (&b"ew\n"[..], None));
    }
}
