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
//! reboot.
//!
//! No fsync: what is written reaches the page cache within the loss
//! window (`follow.rs`), which survives the engine's death; a clean reboot
//! writes the page cache out. Blocking file I/O: callers run it from
//! `spawn_blocking`.
//!
//! This file opens, appends, rotates and maps streams; reading the bytes
//! back is `read.rs`, and `meta.json`'s fields are `meta.rs`.

mod follow;
pub(crate) mod keeper;
mod meta;
mod read;
mod title;

use std::fs;
use std::io::{self, Write};
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
    /// naming the same kept bytes; bytes nobody wrote that the new writer
    /// no longer holds are a gap.
    pub fn resume(&self, epoch: u64, from: u64, oldest: u64, newest: u64) -> u64 {
        let end = self.end();
        let Some(base) = self.stream_base(epoch).filter(|&base| base <= end) else {
            self.map_stream(epoch, end.saturating_sub(from));
            return from;
        };
        let written = end - base;
        if written >= oldest {
            return written.min(newest);
        }
        self.update(|meta| meta.gaps += 1);
        let from = oldest.max(from);
        self.map_stream(epoch, end.saturating_sub(from));
        from
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

    /// Appends `bytes`, rotating first when the newest segment is full. A
    /// write that fails is cut back, so the segment holds whole appends
    /// only.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the segment (`ENOSPC` on a full disk); also
    /// kept for [`error`](Kept::error).
    pub fn append(&self, bytes: &[u8]) -> Result<()> {
        let result = self.append_inner(bytes);
        let mut inner = self.lock();
        inner.here = true;
        match &result {
            Ok(()) => inner.error = None,
            Err(error) => {
                inner.error = Some(error.to_string());
                inner.meta.gaps += 1;
            }
        }
        result
    }

    fn append_inner(&self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let (mut newest, end) = {
            let inner = self.lock();
            (inner.newest, inner.end)
        };
        let segment_limit = (self.limit / 4).max(1024);
        if end - newest >= segment_limit {
            self.create_segment(end)
                .map_err(|error| self.io_error(end, error))?;
            newest = end;
            self.lock().newest = end;
            self.trim();
        }
        let path = self.dir.join(segment_name(newest));
        // Created here if missing: a history opened to read has none made.
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|error| self.io_error(newest, error))?;
        let before = file
            .metadata()
            .map_err(|error| self.io_error(newest, error))?
            .len();
        if let Err(error) = file.write_all(bytes) {
            // Whole appends only: what a failed write left goes.
            let _ = file.set_len(before);
            return Err(self.io_error(newest, error));
        }
        self.lock().end = newest + before + bytes.len() as u64;
        Ok(())
    }

    fn io_error(&self, start: u64, error: io::Error) -> Error {
        Error::io(
            format!(
                "writing kept history {}",
                self.dir.join(segment_name(start)).display()
            ),
            error,
        )
    }

    /// Removes the oldest segments while the rest hold more than the limit.
    fn trim(&self) {
        let Ok(found) = segments(&self.dir) else {
            return;
        };
        let end = self.end();
        for (start, path, _) in &found[..found.len().saturating_sub(1)] {
            let next = found
                .iter()
                .find(|(other, ..)| other > start)
                .map_or(end, |(other, ..)| *other);
            if end - next >= self.limit / 4 * 3 {
                let _ = fs::remove_file(path);
            } else {
                break;
            }
        }
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

    /// A write the disk refuses (`/dev/full` behind the segment: ENOSPC
    /// on every write) is a clear error, and the segment keeps only whole
    /// appends.
    #[test]
    fn a_refused_write_is_an_error_and_leaves_nothing_torn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let kept = Kept::open(path.clone(), 1 << 20).unwrap();
        kept.append(b"kept\r\n").unwrap();
        let segment = path.join(segment_name(0));
        fs::remove_file(&segment).unwrap();
        std::os::unix::fs::symlink("/dev/full", &segment).unwrap();
        let error = kept.append(b"lost").unwrap_err();
        assert_eq!(error.code(), "IO");
        assert!(error.to_string().contains("No space left"), "{error}");
        assert!(kept.error().is_some());
        assert_eq!(kept.meta().gaps, 1);
    }
}
