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
//! bytes only once its times have settled: the kernel stamps them from a
//! coarse clock (one tick, 1-10 ms), and a freed inode is handed out
//! again, so two writes of the same size within one tick can leave the
//! same key. A record is kept only when its file had settled ([`SETTLED`])
//! at the `stat`; any later write then stamps a newer time.
//!
//! The directory itself is one more such key: every change of a record
//! by the engine (a write's temporary file and rename, a removal, a
//! record set aside) changes the directory, so a scan that finds its key
//! as the last scan left it returns that scan's records without looking
//! at a file. Only a scan that began a second or more after the
//! directory's last change counts ([`SETTLED`]): a change within the
//! timestamp's granularity of the one before could leave the key as it
//! was. A record edited in place by hand (no rename) shows at the next
//! change of the directory.
//!
//! Why: `GET /api/terminals` at 1,000 terminals spent most of its
//! 41 ms reading and parsing 1,000 unchanged records.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use std::time::{Duration, SystemTime};

/// How long before a scan the directory must have last changed for the
/// scan to stand for its key: far more than any file system's timestamp
/// granularity.
const SETTLED: Duration = Duration::from_secs(1);

/// What identifies one version of a record file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    /// The key of `path`, when it can be looked at.
    pub(super) fn at(path: &Path) -> Option<FileKey> {
        std::fs::metadata(path).ok().map(|meta| FileKey::of(&meta))
    }

    /// Whether the file last changed at least [`SETTLED`] before `scan`.
    fn settled_before(&self, scan: SystemTime) -> bool {
        let changed = |(secs, nanos): (i64, i64)| {
            let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
                return None;
            };
            SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
        };
        [self.mtime, self.ctime].into_iter().all(|at| {
            changed(at)
                .and_then(|at| at.checked_add(SETTLED))
                .is_some_and(|settled| settled <= scan)
        })
    }

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

/// Parsed records (`R`) by path, each with the key of the file it came
/// from, and the last whole scan (`S`). Shared by the clones of a
/// `StateDir` (one process's handles on it). Generic so that it needs
/// nothing of `records.rs`, which uses it.
#[derive(Debug)]
pub(super) struct RecordCache<R, S> {
    known: Arc<Mutex<HashMap<PathBuf, (FileKey, R)>>>,
    /// The last whole scan that stands for the directory's key.
    scan: Arc<Mutex<Option<(FileKey, S)>>>,
}

impl<R, S> Default for RecordCache<R, S> {
    fn default() -> Self {
        RecordCache {
            known: Arc::default(),
            scan: Arc::default(),
        }
    }
}

impl<R, S> Clone for RecordCache<R, S> {
    fn clone(&self) -> Self {
        RecordCache {
            known: Arc::clone(&self.known),
            scan: Arc::clone(&self.scan),
        }
    }
}

impl<R: Clone, S: Clone> RecordCache<R, S> {
    /// The last scan's records when the directory (its key `dir`) has not
    /// changed since.
    pub(super) fn unchanged(&self, dir: Option<FileKey>) -> Option<S> {
        let scan = self.scan.lock().unwrap_or_else(PoisonError::into_inner);
        match (&*scan, dir) {
            (Some((key, loaded)), Some(dir)) if *key == dir => Some(loaded.clone()),
            _ => None,
        }
    }

    /// Keeps `loaded`, a scan begun at `began` with the directory at
    /// `dir`, for the scans that find the directory as it was; only when
    /// the directory had settled by then and the scan is `last` (nothing
    /// in it was unreadable, worth another try).
    pub(super) fn scanned(&self, dir: Option<FileKey>, began: SystemTime, loaded: &S, last: bool) {
        let keep = dir
            .filter(|dir| last && dir.settled_before(began))
            .map(|dir| (dir, loaded.clone()));
        *self.scan.lock().unwrap_or_else(PoisonError::into_inner) = keep;
    }

    /// The record at `path`: the one parsed before when the file is the
    /// same, else `read`'s, kept when it parsed. A file that cannot be
    /// looked at is read all the same (`read` reports why it fails). A
    /// file changed within the last [`SETTLED`] is read every time.
    pub(super) fn get<E>(&self, path: &Path, read: impl FnOnce() -> Result<R, E>) -> Result<R, E> {
        let looked = SystemTime::now();
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
            Ok(record) if key.settled_before(looked) => {
                self.lock().insert(path.to_owned(), (key, record.clone()));
                Ok(record)
            }
            Ok(record) => {
                self.forget(path);
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (FileKey, R)>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    /// Two same-size writes within one clock tick can keep inode, size
    /// and times (kernels before multigrain timestamps, 6.13): a file
    /// changed just now is read, never kept, so its next write is read too.
    #[test]
    fn a_file_changed_within_a_second_is_read_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let cache: RecordCache<String, ()> = RecordCache::default();
        for text in ["aaaa", "bbbb"] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(cache.get(&path, || read(&path)).unwrap(), text);
            assert!(
                cache.lock().get(&path).is_none(),
                "kept a record changed just now"
            );
        }
    }

    #[test]
    fn a_key_settles_a_second_after_its_last_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "x").unwrap();
        let key = FileKey::at(&path).unwrap();
        let now = SystemTime::now();
        assert!(!key.settled_before(now));
        assert!(key.settled_before(now + SETTLED));
    }
}
