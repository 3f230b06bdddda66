//! A terminal's kept history: its output stream written to files under
//! the state directory, so it outlives the machine's restart.
//!
//! Layout: `<state dir>/history/<terminal id>/` (`0700`), holding
//! segments named by the history offset of their first byte
//! (`00000000000000000000.log`, `0600`) and `meta.json` (the last working
//! directory, title, size, boot id, and which stream epochs map where).
//! A segment's name says where it starts and its length where it ends,
//! so no index can disagree with the bytes: a rotation (a new segment
//! once the newest passed a quarter of the limit, the oldest removed
//! while the rest pass the limit) and a crash between its steps leave a
//! readable history. `meta.json` is written atomically (temp file, then
//! rename); with `record: true`, `<stream epoch>.cast` (asciicast v2, one
//! per stream, bounded by the same limit) beside them; a segment write that fails half-way (a full disk) is cut back
//! to its length before, so neither is ever torn.
//!
//! Offsets: every byte kept has one history offset, counted from the
//! history's creation in its own epoch ([`Meta::epoch`]). Each stream that
//! fed it (a spawn, an adoption, a rebuild) is mapped by its epoch to the
//! history offset of its byte 0 ([`Meta::streams`]), so a cursor a live
//! terminal handed out reads the same bytes from the files after a
//! reboot: a mapped stream's byte at offset `o` is always at `base + o`.
//!
//! Holes: bytes lost on their way to the files (a write the disk refused,
//! an in-process writer that fell behind by more than the history keeps,
//! a writer that resumes past bytes nobody wrote) keep their offsets, and
//! nobody's bytes fill them: the next bytes go into a new segment named by
//! their own offset, so the segments' names and lengths say where each
//! hole is and nothing else remembers it (the map is never rewritten to
//! cover a loss). A refused write leaves an empty segment at the offset
//! after it at once, where it can, so readers see the hole before more
//! bytes come. `meta.gaps` counts the holes. Readers never join the bytes
//! on both sides of one (`read.rs`). The limit counts bytes kept, not
//! offsets: a hole costs nothing, and the oldest segments go while the
//! rest hold three quarters of it.
//!
//! No fsync: what is written reaches the page cache within the loss
//! window (`follow.rs`), which survives the engine's death; a clean reboot
//! writes the page cache out. Blocking file I/O: callers run it from
//! `spawn_blocking`.
//!
//! This file opens histories and maps streams; appending (holes,
//! rotation, trimming) is `write.rs`, reading the bytes back `read.rs`,
//! and `meta.json`'s fields are `meta.rs`.

mod follow;
pub(crate) mod keeper;
mod meta;
mod read;
mod title;
mod write;

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use follow::FLUSH_INTERVAL;
pub(crate) use follow::follow;
pub use keeper::RelayKeeper;
pub use meta::Meta;
pub(crate) use meta::now_ms;
pub(crate) use read::WRITER_WAIT;

use crate::stream::OutputCursor;
use crate::{Error, Result};

/// The directory of kept histories inside the state directory.
pub(crate) const HISTORY_DIR: &str = "history";

/// The byte limit of one terminal's kept history unless configured.
pub(crate) const DEFAULT_HISTORY_BYTES: u64 = 16 << 20;

/// The most stream epochs a history maps (the newest kept): older
/// cursors read as stale.
const MAX_STREAMS: usize = 16;

/// One terminal's kept history on disk.
#[derive(Debug)]
pub struct Kept {
    dir: PathBuf,
    /// The byte limit (also a recording's beside it).
    pub(crate) limit: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    meta: Meta,
    /// The history offset past the last byte written.
    end: u64,
    /// The newest segment's first offset.
    newest: u64,
    /// The last write error, until a write succeeds again.
    error: Option<String>,
    /// Whether this process writes the history (its meta is the truth);
    /// else another does (the terminal's relay, or another engine
    /// process), and the meta is read again from disk before it is used.
    here: bool,
}

/// The path of one terminal's history directory.
pub(crate) fn history_dir(state_root: &Path, id: &str) -> PathBuf {
    state_root.join(HISTORY_DIR).join(id)
}

fn segment_name(start: u64) -> String {
    format!("{start:020}.log")
}

/// A segment: its first offset, its path, its length.
type Segment = (u64, PathBuf, u64);

/// The segments of `dir`, oldest first.
fn segments(dir: &Path) -> io::Result<Vec<Segment>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(start) = name
            .to_str()
            .and_then(|name| name.strip_suffix(".log"))
            .and_then(|stem| stem.parse::<u64>().ok())
        else {
            continue;
        };
        let len = entry.metadata()?.len();
        found.push((start, entry.path(), len));
    }
    found.sort_by_key(|(start, ..)| *start);
    Ok(found)
}

impl Kept {
    /// Opens the history in `dir`, creating it (`0700`, with its first
    /// segment and `meta.json`) when it does not exist, keeping at most
    /// about `limit` bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory or file (a full disk included).
    pub fn open(dir: PathBuf, limit: u64) -> Result<Kept> {
        let context = |what: &str| format!("{what} kept history {}", dir.display());
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|error| Error::io(context("creating"), error))?;
        let meta = match fs::read(dir.join("meta.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(dir = %dir.display(), %error, "kept history's meta.json does not parse; starting a new one");
                Meta::default()
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Meta::default(),
            Err(error) => return Err(Error::io(context("reading"), error)),
        };
        let found = segments(&dir).map_err(|error| Error::io(context("listing"), error))?;
        let (newest, end) = found
            .last()
            .map_or((0, 0), |(start, _, len)| (*start, start + len));
        let empty = found.is_empty();
        let created = format!("creating kept history {}", dir.display());
        let kept = Kept {
            limit: limit.max(4096),
            inner: Mutex::new(Inner {
                meta,
                end,
                newest,
                error: None,
                here: false,
            }),
            dir,
        };
        if empty {
            kept.create_segment(0)
                .map_err(|error| Error::io(created, error))?;
        }
        {
            let mut inner = kept.lock();
            if inner.meta.epoch == 0 {
                inner.meta.epoch = OutputCursor::new_epoch();
            }
        }
        kept.save_meta()?;
        Ok(kept)
    }

    /// Opens the history in `dir` only if one is there, to read it:
    /// nothing is created or written (`logs` must read a history on a
    /// full disk, and reading once rewrote `meta.json`). A
    /// writer that later appends creates what it needs then.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory when `meta.json` or the
    /// segments cannot be read (never turned into "no history").
    pub fn existing(dir: PathBuf, limit: u64) -> Result<Option<Kept>> {
        let context = |what: &str| format!("{what} kept history {}", dir.display());
        let meta = match fs::read(dir.join("meta.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(dir = %dir.display(), %error, "kept history's meta.json does not parse; reading it without");
                Meta::default()
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(context("reading"), error)),
        };
        let found = segments(&dir).map_err(|error| Error::io(context("listing"), error))?;
        let (newest, end) = found
            .last()
            .map_or((0, 0), |(start, _, len)| (*start, start + len));
        Ok(Some(Kept {
            limit: limit.max(4096),
            inner: Mutex::new(Inner {
                meta,
                end,
                newest,
                error: None,
                here: false,
            }),
            dir,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, its meta read again from disk first when another
    /// process writes the history (a stream it mapped since is known).
    fn fresh(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        if !inner.here
            && let Ok(bytes) = fs::read(self.dir.join("meta.json"))
            && let Ok(meta) = serde_json::from_slice(&bytes)
        {
            inner.meta = meta;
        }
        inner
    }

    /// Marks this process as the history's writer (it holds the writer
    /// lock): its own meta is the truth from now on (also once it
    /// appended or mapped a stream).
    pub fn write_here(&self) {
        self.lock().here = true;
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A copy of what `meta.json` says now.
    pub fn meta(&self) -> Meta {
        self.fresh().meta.clone()
    }

    /// The history offset past its last byte.
    pub fn end(&self) -> u64 {
        self.lock().end
    }

    /// The last write's error, while writes fail.
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    /// Changes the meta (saved by the next [`save_meta`](Kept::save_meta)).
    pub fn update(&self, change: impl FnOnce(&mut Meta)) {
        change(&mut self.fresh().meta);
    }

    /// The history offset of stream `epoch`'s byte 0, when that stream
    /// fed this history (this process's, or another's sharing it).
    pub fn stream_base(&self, epoch: u64) -> Option<u64> {
        let inner = self.fresh();
        inner
            .meta
            .streams
            .iter()
            .rev()
            .find(|(known, _)| *known == epoch)
            .map(|&(_, base)| base)
    }

    /// Maps a new stream (its epoch) to history offset `base` (its byte
    /// 0's).
    pub fn map_stream(&self, epoch: u64, base: u64) {
        let mut inner = self.lock();
        inner.here = true;
        let streams = &mut inner.meta.streams;
        streams.retain(|&(known, _)| known != epoch);
        streams.push((epoch, base));
        let excess = streams.len().saturating_sub(MAX_STREAMS);
        streams.drain(..excess);
    }

    /// Where a writer of stream `epoch` goes on, given that it would
    /// start at `from` and holds the stream's bytes from `oldest` to
    /// `newest`; maps the stream when it is new to this history. A
    /// stream's epoch is its relay's, shared by every process on the
    /// host: when an earlier writer (another process, the relay, this
    /// one before a restart) wrote this stream already, the new one goes
    /// on where it stopped, so no byte is kept twice and a cursor keeps
    /// naming the same kept bytes. A new stream's bytes before `from` are
    /// the history's newest (a restore replays them first), so its byte
    /// `from` maps to the history's end.
    ///
    /// Bytes nobody wrote that the new writer no longer holds (before
    /// `oldest`) are a hole: the stream's base stays, and the writer's
    /// first append lands past them ([`append_at`](Kept::append_at)).
    /// Returns the stream offset it goes on from; the history offset is
    /// that plus [`stream_base`](Kept::stream_base).
    pub fn resume(&self, epoch: u64, from: u64, oldest: u64, newest: u64) -> u64 {
        let end = self.end();
        let Some(base) = self.stream_base(epoch).filter(|&base| base <= end) else {
            // More bytes claimed kept than the history has: none of them
            // are, byte 0 goes at the end and the rest is a hole.
            let base = end.checked_sub(from).unwrap_or(end);
            self.map_stream(epoch, base);
            return from.max(oldest);
        };
        let written = end - base;
        if written >= oldest {
            return written.min(newest);
        }
        oldest.max(from)
    }

    fn create_segment(&self, start: u64) -> io::Result<()> {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.dir.join(segment_name(start)))
            .map(drop)
    }

    /// Writes `meta.json` atomically.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file; the one before stays whole.
    pub fn save_meta(&self) -> Result<()> {
        let path = self.dir.join("meta.json");
        let context = || format!("writing kept history {}", path.display());
        let json = {
            let mut inner = self.lock();
            inner.meta.updated_ms = now_ms();
            serde_json::to_vec_pretty(&inner.meta)
                .map_err(|error| Error::io(context(), io::Error::other(error)))?
        };
        crate::statedir::write_atomically(&path, ".tmp-meta-", &json)
            .map_err(|error| Error::io(context(), error))
    }

    /// Removes the whole history.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory; a missing one is not an error.
    pub fn remove(dir: &Path) -> Result<()> {
        match fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(Error::io(
                format!("removing kept history {}", dir.display()),
                error,
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use std::time::Duration;

    use super::*;
    use crate::stream::CursorGap;

    #[test]
    fn appends_read_back_through_rotation_and_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let kept = Kept::open(path.clone(), 8192).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o700);
        let mut all = Vec::new();
        for n in 0..400 {
            let line = format!("line {n:05}\r\n");
            kept.append(line.as_bytes()).unwrap();
            all.extend_from_slice(line.as_bytes());
        }
        let found = segments(&path).unwrap();
        assert!(found.len() > 1, "rotated: {found:?}");
        for (_, segment, _) in &found {
            assert_eq!(mode(segment), 0o600);
        }
        let total: u64 = found.iter().map(|(_, _, len)| len).sum();
        assert!(total <= 8192 + 2048, "bounded: {total}");
        let read = kept.read(None).unwrap();
        assert!(all.ends_with(&read.bytes), "the newest bytes are kept");
        assert_eq!(read.end().offset, all.len() as u64);
        // A stream mapped at 100: its cursor 10 is history offset 110.
        kept.map_stream(7, all.len() as u64 - 100);
        let cursor = OutputCursor {
            epoch: 7,
            offset: 90,
        };
        let read = kept.read(Some(cursor)).unwrap();
        assert_eq!(&read.bytes[..], &all[all.len() - 10..]);
        assert_eq!(read.gap, None);
        kept.save_meta().unwrap();
        drop(kept);
        let again = Kept::open(path.clone(), 8192).unwrap();
        assert_eq!(again.end(), all.len() as u64);
        assert_eq!(
            &again.read(Some(cursor)).unwrap().bytes[..],
            &all[all.len() - 10..]
        );
        let stale = OutputCursor {
            epoch: 8,
            offset: 0,
        };
        assert_eq!(again.read(Some(stale)).unwrap().gap, Some(CursorGap::Stale));
        Kept::remove(&path).unwrap();
        assert!(!path.exists());
    }

    /// Opening a history to read it once wrote `meta.json`
    /// (and failed on a full disk, which read as "no history"). Reading
    /// writes nothing now, and an unreadable history is an error.
    #[test]
    fn reading_a_history_writes_nothing_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h");
        {
            let kept = Kept::open(path.clone(), 1 << 20).unwrap();
            kept.append(b"kept bytes").unwrap();
            kept.save_meta().unwrap();
        }
        let listing = || {
            let mut names: Vec<(String, Vec<u8>)> = fs::read_dir(&path)
                .unwrap()
                .map(|entry| {
                    let entry = entry.unwrap();
                    (
                        entry.file_name().to_string_lossy().into_owned(),
                        fs::read(entry.path()).unwrap(),
                    )
                })
                .collect();
            names.sort();
            names
        };
        let before = listing();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let kept = Kept::existing(path.clone(), 1 << 20).unwrap().unwrap();
        assert_eq!(&kept.read(None).unwrap().bytes[..], b"kept bytes");
        assert_eq!(listing(), before, "reading wrote to the history");
        assert!(
            Kept::existing(dir.path().join("none"), 1 << 20)
                .unwrap()
                .is_none()
        );
        // meta.json that cannot be read (here: a directory) is an error.
        let broken = dir.path().join("broken");
        fs::create_dir_all(broken.join("meta.json")).unwrap();
        assert!(Kept::existing(broken, 1 << 20).is_err());
    }

    /// Bytes written past the end (a writer that lost some) start a
    /// segment named by their offset: reads never join both sides, a
    /// page (`read_range`) ends at a hole's start when asked for more,
    /// a wait for offsets in the hole does not wait, and it all reads
    /// the same once reopened.
    #[test]
    fn a_hole_keeps_its_offsets_through_reading_and_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let kept = Kept::open(path.clone(), 1 << 20).unwrap();
        kept.append_at(0, b"0123456789").unwrap();
        kept.append_at(20, b"abcdefghij").unwrap();
        assert_eq!(kept.end(), 30);
        assert_eq!(kept.meta().gaps, 1);
        kept.save_meta().unwrap();
        let epoch = kept.meta().epoch;
        let check = |kept: &Kept| {
            let at = |offset| kept.read(Some(OutputCursor { epoch, offset })).unwrap();
            let read = at(3);
            assert_eq!((&read.bytes[..], read.gap), (&b"3456789"[..], None));
            for inside in [10, 15, 19] {
                let read = at(inside);
                assert_eq!(read.gap, Some(CursorGap::Evicted), "{inside}");
                assert_eq!(
                    (read.from.offset, &read.bytes[..]),
                    (20, &b"abcdefghij"[..])
                );
            }
            let read = at(25);
            assert_eq!((&read.bytes[..], read.gap), (&b"fghij"[..], None));
            assert_eq!(at(31).gap, Some(CursorGap::Stale));
            // `None`: what follows the last hole.
            let read = kept.read(None).unwrap();
            assert_eq!(
                (read.from.offset, &read.bytes[..]),
                (20, &b"abcdefghij"[..])
            );
            assert_eq!(kept.span().unwrap(), (0, 30));
            let range = |from, to| {
                let (start, bytes) = kept.read_range(from, to).unwrap();
                (start, String::from_utf8(bytes.to_vec()).unwrap())
            };
            assert_eq!(range(5, 25), (20, "abcde".into()));
            assert_eq!(range(5, 20), (5, "56789".into()));
            assert_eq!(range(5, 15), (5, "56789".into()));
            assert_eq!(range(0, 4), (0, "0123".into()));
            kept.wait_written(15, Duration::ZERO).unwrap();
            kept.wait_written(30, Duration::ZERO).unwrap();
            assert!(kept.wait_written(31, Duration::ZERO).is_err());
        };
        check(&kept);
        drop(kept);
        check(&Kept::existing(path.clone(), 1 << 20).unwrap().unwrap());
        let again = Kept::open(path.clone(), 1 << 20).unwrap();
        check(&again);
        // Writing on after reopening goes on at the end.
        again.append(b"klm").unwrap();
        let read = again.read(None).unwrap();
        assert_eq!(
            (read.from.offset, &read.bytes[..]),
            (20, &b"abcdefghijklm"[..])
        );
        assert_eq!(again.meta().gaps, 1);
    }

    /// A writer that resumes a stream past bytes nobody wrote (it no
    /// longer holds them) keeps the stream's base: the bytes it does
    /// hold land at their own offsets, past a hole. The stream was
    /// mapped again at the history's end (clamped to 0 when that would
    /// be negative), and every cursor of it was shifted.
    #[test]
    fn resuming_past_bytes_nobody_wrote_keeps_the_streams_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::open(dir.path().join("t"), 1 << 20).unwrap();
        kept.append(b"earlier stream\r\n").unwrap();
        assert_eq!(kept.resume(7, 0, 0, 0), 0);
        let base = kept.stream_base(7).unwrap();
        assert_eq!(base, 16);
        kept.append_at(base, b"0123").unwrap();
        // A later writer holds the stream from offset 10 on only.
        assert_eq!(kept.resume(7, 0, 10, 14), 10);
        assert_eq!(kept.stream_base(7), Some(base), "the map stays");
        kept.append_at(base + 10, b"abcd").unwrap();
        let at = |offset| kept.read(Some(OutputCursor { epoch: 7, offset })).unwrap();
        let read = at(1);
        assert_eq!((&read.bytes[..], read.gap), (&b"123"[..], None));
        let read = at(11);
        assert_eq!((&read.bytes[..], read.gap), (&b"bcd"[..], None));
        let read = at(6);
        // (A read answers in the history's own offsets.)
        assert_eq!(
            (read.from.offset, read.gap),
            (base + 10, Some(CursorGap::Evicted))
        );
        // Where the earlier writer stopped, when it is still held.
        assert_eq!(kept.resume(7, 0, 12, 20), 14);
        // A new stream's bytes the history cannot have (more than it
        // holds): byte 0 at the end, and a hole up to what is held.
        assert_eq!(kept.resume(8, 100, 100, 120), 100);
        assert_eq!(kept.stream_base(8), Some(kept.end()));
        assert_eq!(kept.meta().gaps, 1);
    }
}
