//! Appending to a kept history: each write at its own history offset,
//! a new segment past a hole or once the newest is full, a refused write
//! turned into a hole, and the oldest segments trimmed by the byte limit.
//! Apart from opening and mapping (`mod.rs`) because it is the one part
//! that changes the files' bytes, and the one that keeps offsets true
//! across a loss (see the module's notes on holes).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;

use super::{Kept, segment_name, segments};
use crate::{Error, Result};

impl Kept {
    /// Appends `bytes` at the history's end (see
    /// [`append_at`](Kept::append_at)): the tests' writer, whose bytes
    /// follow one another; the real ones name each byte's offset.
    #[cfg(test)]
    pub(crate) fn append(&self, bytes: &[u8]) -> Result<()> {
        let end = self.end();
        self.append_at(end, bytes)
    }

    /// Writes `bytes` at history offset `at` (a writer's `base + stream
    /// offset`), rotating first when the newest segment is full. Past the
    /// end, the offsets between are a hole: the bytes start a segment of
    /// their own, named by `at`. Before the end, what the files hold
    /// already stays and only the rest is written (offsets are never
    /// written twice). A write that fails is cut back, so a segment holds
    /// whole appends only, and its bytes are a hole too: the end moves
    /// past them, so the next append lands where it belongs.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the segment (`ENOSPC` on a full disk); also
    /// kept for [`error`](Kept::error).
    pub fn append_at(&self, at: u64, bytes: &[u8]) -> Result<()> {
        let end = self.end();
        let skip = usize::try_from(end.saturating_sub(at)).unwrap_or(usize::MAX);
        let Some(bytes) = bytes.get(skip..).filter(|rest| !rest.is_empty()) else {
            return Ok(());
        };
        let at = at.max(end);
        let result = self.append_inner(at, bytes);
        let mut inner = self.lock();
        inner.here = true;
        if at > end {
            inner.meta.gaps += 1;
        }
        match &result {
            Ok(()) => inner.error = None,
            Err(error) => {
                inner.error = Some(error.to_string());
                inner.meta.gaps += 1;
            }
        }
        result
    }

    fn append_inner(&self, at: u64, bytes: &[u8]) -> Result<()> {
        let (mut newest, end) = {
            let inner = self.lock();
            (inner.newest, inner.end)
        };
        let segment_limit = (self.limit / 4).max(1024);
        if at > end || end - newest >= segment_limit {
            let created = self.create_segment(at);
            {
                let mut inner = self.lock();
                (inner.newest, inner.end) = (at, at);
            }
            created.map_err(|error| self.lost(at, bytes.len(), error))?;
            if at > end && end == newest {
                // An empty segment before a hole (the first, or one a
                // refused write left) says nothing the one past it does
                // not; removed once that one is there.
                let _ = fs::remove_file(self.dir.join(segment_name(newest)));
            }
            newest = at;
            self.trim();
        }
        let path = self.dir.join(segment_name(newest));
        // Created here if missing: a history opened to read has none made.
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|error| self.lost(at, bytes.len(), error))?;
        let before = file
            .metadata()
            .map_err(|error| self.lost(at, bytes.len(), error))?
            .len();
        if let Err(error) = file.write_all(bytes) {
            // Whole appends only: what a failed write left goes.
            let _ = file.set_len(before);
            return Err(self.lost(at, bytes.len(), error));
        }
        self.lock().end = newest + before + bytes.len() as u64;
        Ok(())
    }

    /// `len` bytes at `at` were not written: they are a hole. The next
    /// segment starts past them, made now where the disk lets it (an
    /// empty file), so readers know the hole before more bytes come.
    fn lost(&self, at: u64, len: usize, error: io::Error) -> Error {
        let past = at + len as u64;
        let _ = self.create_segment(past);
        {
            let mut inner = self.lock();
            (inner.newest, inner.end) = (past, past);
        }
        self.io_error(at, error)
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

    /// Removes the oldest segments while the rest hold three quarters of
    /// the limit: bytes kept, counted by the segments' lengths, so a hole
    /// between them takes no room.
    fn trim(&self) {
        let Ok(found) = segments(&self.dir) else {
            return;
        };
        let mut rest: u64 = found.iter().map(|(_, _, len)| len).sum();
        for (_, path, len) in &found[..found.len().saturating_sub(1)] {
            rest -= len;
            if rest >= self.limit / 4 * 3 {
                let _ = fs::remove_file(path);
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::stream::{CursorGap, OutputCursor};

    /// A write the disk refuses (`/dev/full` behind the segment: ENOSPC
    /// on every write) is a clear error, the segment keeps only whole
    /// appends, and the refused bytes are a hole: the next append lands
    /// at its own offset (it went on right after the kept bytes, and a
    /// cursor past the loss read bytes 4 further on than it named).
    #[test]
    fn a_refused_write_is_an_error_and_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let kept = Kept::open(path.clone(), 1 << 20).unwrap();
        kept.map_stream(7, 0);
        kept.append_at(0, b"kept\r\n").unwrap();
        let segment = path.join(segment_name(0));
        fs::rename(&segment, path.join("aside")).unwrap();
        std::os::unix::fs::symlink("/dev/full", &segment).unwrap();
        let error = kept.append_at(6, b"lost").unwrap_err();
        assert_eq!(error.code(), "IO");
        assert!(error.to_string().contains("No space left"), "{error}");
        assert!(kept.error().is_some());
        assert_eq!(kept.meta().gaps, 1);
        // The disk has room again: the old segment back, the next bytes
        // (stream offset 10) written.
        fs::remove_file(&segment).unwrap();
        fs::rename(path.join("aside"), &segment).unwrap();
        kept.append_at(10, b"after\r\n").unwrap();
        assert!(kept.error().is_none());
        let at = |offset| kept.read(Some(OutputCursor { epoch: 7, offset })).unwrap();
        let read = at(10);
        assert_eq!((&read.bytes[..], read.gap), (&b"after\r\n"[..], None));
        // From before the hole: up to it, then past it with the gap.
        let read = at(0);
        assert_eq!((&read.bytes[..], read.gap), (&b"kept\r\n"[..], None));
        let read = at(read.end().offset);
        assert_eq!(read.gap, Some(CursorGap::Evicted));
        assert_eq!((read.from.offset, &read.bytes[..]), (10, &b"after\r\n"[..]));
        assert_eq!(kept.meta().gaps, 1, "one hole");
    }

    /// The limit counts bytes kept, not offsets: a hole far wider than
    /// the limit takes no room (counted as offsets, it emptied the
    /// history of everything before it), and rotation past the hole
    /// still keeps about the limit.
    #[test]
    fn trimming_counts_bytes_not_the_offsets_of_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let kept = Kept::open(path.clone(), 8192).unwrap();
        let line = |n: usize| format!("line {n:05}\r\n");
        let mut at = 0;
        for n in 0..300 {
            kept.append_at(at, line(n).as_bytes()).unwrap();
            at += 12;
        }
        let hole = 1 << 30;
        at += hole;
        kept.append_at(at, line(300).as_bytes()).unwrap();
        let (oldest, end) = kept.span().unwrap();
        assert_eq!(oldest, 0, "the bytes before the hole stay");
        assert_eq!(end, 3600 + hole + 12);
        for n in 301..1000 {
            at += 12;
            kept.append_at(at, line(n).as_bytes()).unwrap();
        }
        let found = segments(&path).unwrap();
        let total: u64 = found.iter().map(|(_, _, len)| len).sum();
        assert!((6144..=8192 + 2048).contains(&total), "bounded: {total}");
        let read = kept.read(None).unwrap();
        assert_eq!(read.from.offset + read.bytes.len() as u64, at + 12);
        let first = usize::try_from((read.from.offset - hole - 3600) / 12).unwrap();
        let want: String = (300 + first..1000).map(line).collect();
        assert_eq!(read.bytes, want.as_bytes());
    }
}
