//! The parsed records of a state directory, kept between scans: a scan
//! (`StateDir::load_all`, which `list` runs for terminals other processes
//! made) reads and parses only the files that changed since the last one.
//!
//! A record file is known by its identity (device, inode) and its size,
//! modification and change times, all from one `stat`. Every write of a
//! record is a new file renamed over the old one (`StateDir::write`), so
//! another process's rewrite is a new inode, and a removal a file gone
//! from the listing: whatever another process sharing the directory did
//! shows at the next scan. A file seen with the same key is the same
//! bytes; two distinct files would need the same inode and the same
//! nanosecond times to be mistaken for each other.
//!
//! Issue 27: `GET /api/terminals` at 1,000 terminals spent most of its
//! 41 ms reading and parsing 1,000 unchanged records.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::records::TerminalRecord;

/// What identifies one version of a record file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    fn of(meta: &Metadata) -> FileKey {
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Parsed records by path, each with the key of the file it came from.
/// Shared by the clones of a `StateDir` (one process's handles on it).
#[derive(Debug, Default, Clone)]
pub(super) struct RecordCache {
    known: Arc<Mutex<HashMap<PathBuf, (FileKey, TerminalRecord)>>>,
}

impl RecordCache {
    /// The record at `path`: the one parsed before when the file is the
    /// same, else `read`'s, kept when it parsed. A file that cannot be
    /// looked at is read all the same (`read` reports why it fails).
    pub(super) fn get<E>(
        &self,
        path: &Path,
        read: impl FnOnce() -> Result<TerminalRecord, E>,
    ) -> Result<TerminalRecord, E> {
        let Ok(key) = std::fs::metadata(path).map(|meta| FileKey::of(&meta)) else {
            self.forget(path);
            return read();
        };
        if let Some((known, record)) = self.lock().get(path)
            && *known == key
        {
            return Ok(record.clone());
        }
        match read() {
            Ok(record) => {
                self.lock().insert(path.to_owned(), (key, record.clone()));
                Ok(record)
            }
            Err(error) => {
                self.forget(path);
                Err(error)
            }
        }
    }

    /// Drops every record whose path `seen` does not hold (removed files).
    pub(super) fn keep_only(&self, seen: &std::collections::HashSet<PathBuf>) {
        self.lock().retain(|path, _| seen.contains(path));
    }

    /// Drops what is kept for `path`.
    pub(super) fn forget(&self, path: &Path) {
        self.lock().remove(path);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (FileKey, TerminalRecord)>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
