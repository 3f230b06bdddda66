//! Reading a kept history back: a cursor turned into a history offset
//! through the streams' map, the bytes since a cursor, a bounded range
//! (a viewer's page), and the wait for the writer to reach the bytes a
//! reader of a live stream needs. Apart from the writer (`mod.rs`)
//! because it only lists and reads segments, never creates or rotates
//! one.
//!
//! A hole between segments (bytes lost on their way to the files, see
//! `mod.rs`) is treated as the stream treats a gap: no answer holds bytes
//! from both sides of one (they would read as adjacent, and every offset
//! counted from them would be off), and a read that starts inside one
//! resumes past it with [`CursorGap::Evicted`], as a cursor the stream's
//! ring no longer holds does. So a reader that goes on from each
//! answer's end reads every kept byte, each hole reported once.

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
    /// Waits until the files reach every history offset before `end`: the
    /// bytes a reader of the live stream needs from the history, which
    /// its writer may not have reached yet (it writes behind the stream's
    /// ring, see [`WRITER_WAIT`]). Returns at once when they are there,
    /// or lost: the files' end is past a hole they show (a segment after
    /// it, which a refused write makes at once), so offsets inside one,
    /// which will never be written, are not waited for. Blocking: run it
    /// from `spawn_blocking`.
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

    /// The kept bytes from `since` up to the next hole or the end, in the
    /// history's own epoch: a cursor of an unknown epoch, or past the end,
    /// is stale (the read gives what `None` does); one older than the
    /// oldest kept byte, or inside a hole, resumes at the next kept byte
    /// as evicted. `None`: the newest bytes that follow one another, from
    /// the last hole (or the oldest kept byte) to the end, the output a
    /// reader takes as one piece (a restore replays it, a gone terminal's
    /// page renders it), as a stream past a gap holds only what followed.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a segment cannot be read.
    pub fn read(&self, since: Option<OutputCursor>) -> Result<OutputSince> {
        let (found, _, end) = self.listed("reading")?;
        let runs = runs(&found);
        let newest = runs.last().map_or(end, |&(start, _)| start);
        let epoch = self.lock().meta.epoch;
        let (start, gap) = match since.map(|cursor| self.offset_of(cursor)) {
            None => (newest, None),
            Some(None) => (newest, Some(CursorGap::Stale)),
            Some(Some(at)) if at > end => (newest, Some(CursorGap::Stale)),
            Some(Some(at)) => match held_from(&runs, at) {
                Some(start) if start == at => (at, None),
                Some(start) => (start, Some(CursorGap::Evicted)),
                None if at == end => (end, None),
                None => (end, Some(CursorGap::Evicted)),
            },
        };
        let stop = runs
            .iter()
            .find(|&&(first, past)| first <= start && start < past)
            .map_or(start, |&(_, past)| past);
        let bytes = self.read_between(&found, start, stop)?;
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
    /// the end (a listing, nothing read). Holes may lie between.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be listed.
    pub fn span(&self) -> Result<(u64, u64)> {
        let (_, oldest, end) = self.listed("listing")?;
        Ok((oldest, end))
    }

    /// The kept bytes `from..to` (history offsets) of one stretch without
    /// a hole, as far as the files hold them: the newest stretch that
    /// starts before `to`, so the bytes end at `to`, or at the start of
    /// the hole `to` lies in or just past, and start at `from`, or at the
    /// end of the last hole before them, or at the oldest byte kept. The
    /// answer is never larger than `to - from` (a viewer's page of history
    /// is read whole into memory, and only that). Returns where the bytes
    /// start and the bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a segment cannot be read.
    pub fn read_range(&self, from: u64, to: u64) -> Result<(u64, Bytes)> {
        let (found, oldest, end) = self.listed("reading")?;
        let runs = runs(&found);
        let to = to.min(end);
        let Some(&(first, past)) = runs.iter().rev().find(|&&(first, _)| first < to) else {
            return Ok((from.max(oldest).min(to), Bytes::new()));
        };
        let (start, stop) = (from.max(first), to.min(past));
        if start >= stop {
            return Ok((start.min(stop), Bytes::new()));
        }
        Ok((start, self.read_between(&found, start, stop)?))
    }

    /// Where the kept bytes up to history offset `at` end: `at` itself
    /// when the files hold the byte before it, else the start of the hole
    /// it lies in or just past (or the oldest byte kept, when nothing
    /// older is).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be listed.
    pub fn kept_until(&self, at: u64) -> Result<u64> {
        let (found, oldest, _) = self.listed("listing")?;
        Ok(runs(&found)
            .iter()
            .rev()
            .find(|&&(first, _)| first < at)
            .map_or(oldest.min(at), |&(_, past)| past.min(at)))
    }

    /// The segments (oldest first), the oldest byte they hold and their
    /// end, from one listing; `doing` names the work in an error.
    fn listed(&self, doing: &str) -> Result<(Vec<Segment>, u64, u64)> {
        let found = segments(&self.dir).map_err(|error| self.io_error_in(doing, error))?;
        let end = found.last().map_or(0, |(start, _, len)| start + len);
        let oldest = found
            .iter()
            .find(|(_, _, len)| *len > 0)
            .map_or(end, |(start, ..)| *start);
        Ok((found, oldest, end))
    }

    /// The bytes `start..stop` (history offsets) of the listed segments
    /// `found`, which hold them with no hole between.
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

/// The stretches of history offsets `found` holds with no hole inside,
/// oldest first, as `(first, past)`: segments that meet are one stretch;
/// empty ones hold nothing and are left out.
fn runs(found: &[Segment]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &(start, _, len) in found {
        if len == 0 {
            continue;
        }
        match runs.last_mut() {
            Some((_, past)) if *past == start => *past = start + len,
            _ => runs.push((start, start + len)),
        }
    }
    runs
}

/// The first kept offset at or after `at` (`at` itself when a stretch
/// holds it); `None` past every stretch.
fn held_from(runs: &[(u64, u64)], at: u64) -> Option<u64> {
    runs.iter()
        .find(|&&(_, past)| at < past)
        .map(|&(first, _)| first.max(at))
}
