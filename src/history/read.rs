//! Reading a kept history back: a cursor turned into a history offset
//! through the streams' map, the bytes since a cursor, a bounded range
//! (a viewer's page), and the wait for the writer to reach the bytes a
//! reader of a live stream needs. Apart from the writer (`mod.rs`)
//! because it only lists and reads segments, never creates or rotates
//! one.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Kept, Segment, segments};
use crate::stream::{CursorGap, OutputCursor, OutputSince};
use crate::{Error, Result};

/// How long a reader of a live stream waits for the kept history's
/// writer to reach the stream's ring ([`Kept::wait_written`]). The writer
/// runs behind the ring on purpose: the relay writes each read after it
/// served its links (off the echo's path), the in-process writer batches
/// up to [`FLUSH_INTERVAL`](super::FLUSH_INTERVAL). Either is normally
/// there in microseconds to one interval; a loaded machine can starve the
/// relay for a while, so three intervals, after which the writer is
/// taken as stuck (a dead disk) or gone.
pub(crate) const WRITER_WAIT: Duration = Duration::from_secs(3);

/// How often the files' end is looked at while waiting: the writer is
/// another process (the relay), so there is nothing to wait on but the
/// files. A listing of the history's directory each time.
const WRITER_POLL: Duration = Duration::from_millis(5);

impl Kept {
    /// Waits until the files hold every history offset before `end`: the
    /// bytes a reader of the live stream needs from the history, which
    /// its writer may not have reached yet (it writes behind the stream's
    /// ring, see [`WRITER_WAIT`]). Returns at once when they are there.
    /// Blocking: run it from `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] (`TimedOut`) saying how far the writer got when
    /// `within` passed; [`Error::Io`] when the directory cannot be listed.
    pub fn wait_written(&self, end: u64, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let (_, written) = self.span()?;
            if written >= end {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::io(
                    format!("waiting for kept history {}", self.dir.display()),
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "its writer reached offset {written}, not {end}, within {within:?} \
                             (stuck on its disk, or gone)"
                        ),
                    ),
                ));
            }
            std::thread::sleep(WRITER_POLL);
        }
    }

    /// The history offset a cursor names: its own epoch's offset, or a
    /// mapped stream's offset moved by that stream's base; `None` for an
    /// unknown epoch.
    pub fn offset_of(&self, cursor: OutputCursor) -> Option<u64> {
        let inner = self.fresh();
        if cursor.epoch == inner.meta.epoch {
            return Some(cursor.offset);
        }
        inner
            .meta
            .streams
            .iter()
            .rev()
            .find(|(epoch, _)| *epoch == cursor.epoch)
            .map(|(_, base)| base + cursor.offset)
    }

    /// The kept bytes from `since` (`None`: the oldest kept) to the end,
    /// in the history's own epoch: a cursor of an unknown epoch, or past
    /// the end, is stale; one older than the oldest kept byte resumes
    /// there.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a segment cannot be read.
    pub fn read(&self, since: Option<OutputCursor>) -> Result<OutputSince> {
        let (found, oldest, end) = self.listed("reading")?;
        let epoch = self.lock().meta.epoch;
        let (start, gap) = match since.map(|cursor| self.offset_of(cursor)) {
            None => (oldest, None),
            Some(None) => (oldest, Some(CursorGap::Stale)),
            Some(Some(at)) if at > end => (oldest, Some(CursorGap::Stale)),
            Some(Some(at)) if at < oldest => (oldest, Some(CursorGap::Evicted)),
            Some(Some(at)) => (at, None),
        };
        let bytes = self.read_between(&found, start, end)?;
        Ok(OutputSince {
            bytes,
            from: OutputCursor {
                epoch,
                offset: start,
            },
            gap,
        })
    }

    /// The history offsets the files hold now: the oldest byte kept and
    /// the end (a listing, nothing read).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be listed.
    pub fn span(&self) -> Result<(u64, u64)> {
        let (_, oldest, end) = self.listed("listing")?;
        Ok((oldest, end))
    }

    /// The kept bytes `from..to` (history offsets), as far as the files
    /// hold them: the start moves up to the oldest byte kept, the end down
    /// to the newest, so the answer is never larger than `to - from` (a
    /// viewer's page of history is read whole into memory, and only that).
    /// Returns where the bytes start and the bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a segment cannot be read.
    pub fn read_range(&self, from: u64, to: u64) -> Result<(u64, Bytes)> {
        let (found, oldest, end) = self.listed("reading")?;
        let (start, stop) = (from.max(oldest), to.min(end));
        if start >= stop {
            return Ok((start.min(stop), Bytes::new()));
        }
        Ok((start, self.read_between(&found, start, stop)?))
    }

    /// The segments (oldest first), the oldest byte they hold and their
    /// end, from one listing; `doing` names the work in an error.
    fn listed(&self, doing: &str) -> Result<(Vec<Segment>, u64, u64)> {
        let found = segments(&self.dir).map_err(|error| self.io_error_in(doing, error))?;
        let oldest = found.first().map_or(0, |(start, ..)| *start);
        let end = found.last().map_or(0, |(start, _, len)| start + len);
        Ok((found, oldest, end))
    }

    /// The bytes `start..stop` (history offsets) of the listed segments
    /// `found`, which hold them.
    fn read_between(&self, found: &[Segment], start: u64, stop: u64) -> Result<Bytes> {
        let context = |error| self.io_error_in("reading", error);
        let mut bytes = Vec::with_capacity(usize::try_from(stop - start).unwrap_or(0));
        for (first, path, len) in found {
            let (seg_start, seg_end) = (*first, first + len);
            if seg_end <= start || seg_start >= stop {
                continue;
            }
            let mut file = fs::File::open(path).map_err(context)?;
            let skip = start.saturating_sub(seg_start);
            file.seek(SeekFrom::Start(skip)).map_err(context)?;
            let want = stop.min(seg_end) - seg_start - skip;
            file.take(want).read_to_end(&mut bytes).map_err(context)?;
        }
        Ok(Bytes::from(bytes))
    }

    /// An I/O error of `doing` (reading, listing) this history.
    fn io_error_in(&self, doing: &str, error: io::Error) -> Error {
        Error::io(
            format!("{doing} kept history {}", self.dir.display()),
            error,
        )
    }
}
