//! The state directory: one JSON record per terminal, so terminals survive
//! the engine and processes sharing the directory see the same terminals.
//!
//! Layout: `<state dir>/terminals/<terminal id>.json`. A record is written
//! atomically (temp file in the same directory, then rename) before its
//! terminal is published, rewritten when the terminal is rebuilt, and
//! removed after it is killed. Loading tolerates corrupt files, never
//! fatal: a record that does not parse, names another id, or has a version
//! this engine does not know is moved aside to `<id>.json.corrupt` (kept for
//! a person to look at, and still claiming its terminal: the reaper leaves
//! the server of any id with a file here alone) and reported on every load.
//! A record that cannot be read at all (an I/O error such as fd
//! exhaustion) is left in place and reported as unreadable: the load is
//! then incomplete, and the registry refuses to reap on it.
//!
//! Paths are canonical: the state directory is canonicalised once it
//! exists, so every process names it (and hashes it, see the tmux
//! backend's runtime directory) the same way, however it was given.
//!
//! No fsync: a record must outlive the engine process, and the page cache
//! does that; what fsync adds is surviving a crash of the machine, which no
//! terminal survives (its tmux server dies with it). It cost two disk
//! flushes per spawn.
//!
//! This module does blocking file I/O and knows nothing of backends; the
//! registry calls it from `spawn_blocking`.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::cache::{FileKey, RecordCache};
use crate::vocab::{OwnerId, SpawnSpec, TerminalId};
use crate::{Error, Result};

/// The directory of lock files inside the state directory.
pub(crate) const LOCKS_DIR: &str = "locks";

/// The record format version written by this engine.
pub const RECORD_VERSION: u32 = 1;

/// What the state directory keeps about one terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalRecord {
    /// Format version (1 for the records this engine writes).
    pub version: u32,
    /// The terminal's id (also the file name).
    pub id: TerminalId,
    /// Its owner.
    pub owner: OwnerId,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The same instant in nanoseconds, which orders terminals created
    /// within one millisecond (a loaded directory lists in creation order);
    /// 0 in records written before it existed.
    #[serde(default)]
    pub created_ns: u64,
    /// The backend's name for what runs it (`tmux`), reported in
    /// snapshots; records of every engine so far say `tmux`.
    #[serde(default = "tmux_kind")]
    pub kind: String,
    /// How it was spawned: name, role, restart policy, command, cwd, env,
    /// size (flattened into the record).
    #[serde(flatten)]
    pub spec: SpawnSpec,
    /// Backend-specific data to find the terminal again (e.g. the socket
    /// path); opaque to the registry.
    #[serde(default)]
    pub locator: serde_json::Value,
    /// The boot id (`/proc/sys/kernel/random/boot_id`) of the machine its
    /// server was started on: a later engine that reads another one knows
    /// the server is gone because the machine restarted
    /// (`host_restarted`), not because it crashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

fn tmux_kind() -> String {
    "tmux".to_owned()
}

impl TerminalRecord {
    /// A record for a terminal of backend `kind` created now.
    pub fn new(
        id: TerminalId,
        owner: OwnerId,
        kind: &str,
        spec: SpawnSpec,
        locator: serde_json::Value,
    ) -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        TerminalRecord {
            version: RECORD_VERSION,
            id,
            owner,
            created_ms: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
            created_ns: u64::try_from(now.as_nanos()).unwrap_or(u64::MAX),
            kind: kind.to_owned(),
            spec,
            locator,
            boot_id: None,
        }
    }
}

/// The suffix a corrupt record's file gets when it is moved aside.
pub const CORRUPT_SUFFIX: &str = ".corrupt";

/// A record file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorruptRecord {
    /// The file (after a move aside, the `.corrupt` one).
    pub path: PathBuf,
    /// The terminal id its file name carries, when it carries one: that
    /// terminal's server counts as claimed.
    pub id: Option<TerminalId>,
    /// What was wrong with it.
    pub error: String,
}

/// Everything [`StateDir::load_all`] found.
#[derive(Debug, Default, Clone)]
pub struct LoadedRecords {
    /// The readable records, oldest first; each shared with the state
    /// directory's cache of parsed records, so a scan of a directory where
    /// one record changed copies no other (a named spawn rescans it: at 500
    /// live terminals the copies and their drops were ~7 % of serve's CPU
    /// under a spawn churn).
    pub records: Vec<Arc<TerminalRecord>>,
    /// Records that do not parse or have an unknown version: moved aside
    /// (now or by an earlier load), their terminals left alone.
    pub corrupt: Vec<CorruptRecord>,
    /// Files that could not be read (an I/O error): left in place. While
    /// any is listed, the load is incomplete and nothing may be reaped.
    pub unreadable: Vec<CorruptRecord>,
}

impl LoadedRecords {
    /// Every terminal id with a file in the directory, readable or not:
    /// what a reaper must treat as claimed.
    pub fn claimed_ids(&self) -> Vec<TerminalId> {
        self.claimed().cloned().collect()
    }

    /// [`claimed_ids`](Self::claimed_ids) borrowed: a scan that only looks
    /// them up copies none.
    pub fn claimed(&self) -> impl Iterator<Item = &TerminalId> {
        self.records.iter().map(|record| &record.id).chain(
            self.corrupt
                .iter()
                .chain(&self.unreadable)
                .filter_map(|corrupt| corrupt.id.as_ref()),
        )
    }
}

/// A state directory holding terminal records.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    terminals: PathBuf,
    /// What the last scan parsed (`cache.rs`).
    /// The last whole scan is shared, never copied: `list` at 1,000
    /// terminals spent a tenth of its time cloning its records.
    cache: RecordCache<Arc<TerminalRecord>, Arc<LoadedRecords>>,
}

impl StateDir {
    /// Opens (creating with mode 0700 if needed) the state directory `root`,
    /// and names it by its canonical path from then on.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory when it cannot be created;
    /// [`Error::UnsafeDirectory`] when it is not owned by the user or gives
    /// group or other access.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        for dir in [root.join("terminals"), root.join(LOCKS_DIR)] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|error| {
                    Error::io(format!("creating state directory {}", dir.display()), error)
                })?;
        }
        let root = fs::canonicalize(&root).map_err(|error| {
            Error::io(
                format!("resolving state directory {}", root.display()),
                error,
            )
        })?;
        let terminals = root.join("terminals");
        // Records name sockets the engine attaches to and commands it
        // reruns: a state directory others can write is refused (checked
        // where symlinks lead: a user may link ~/.local/state elsewhere).
        crate::tmux::dirs::check_private(&root)?;
        Ok(StateDir {
            root,
            terminals,
            cache: RecordCache::default(),
        })
    }

    /// The state directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the record of `id` lives.
    pub fn record_path(&self, id: &TerminalId) -> PathBuf {
        self.terminals.join(format!("{id}.json"))
    }

    /// Writes `record` atomically: a reader sees the old file or the new
    /// one, never a torn one, and the new one survives a crash once this
    /// returns.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the record's path.
    pub fn write(&self, record: &TerminalRecord) -> Result<()> {
        let path = self.record_path(&record.id);
        let context = || format!("writing terminal record {}", path.display());
        let json = serde_json::to_vec_pretty(record)
            .map_err(|error| Error::io(context(), io::Error::other(error)))?;
        write_atomically(&path, ".tmp-", &json).map_err(|error| Error::io(context(), error))
    }

    /// Removes the temp files of record writes cut short (a process killed
    /// between creating one and renaming it over its record) that are at
    /// least `grace` old: younger ones may be a write in flight. The paths
    /// removed; a file that cannot be looked at or removed is left.
    pub(crate) fn remove_stale_temps(&self, grace: std::time::Duration) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.terminals) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let is_temp = entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with(".tmp-"));
            let old = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age >= grace);
            if is_temp && old && fs::remove_file(entry.path()).is_ok() {
                removed.push(format!(
                    "record write cut short at {}",
                    entry.path().display()
                ));
            }
        }
        removed
    }

    /// Reads the record of `id`: `None` when there is none (killed by
    /// another process).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it cannot be read or does not parse.
    pub fn read(&self, id: &TerminalId) -> Result<Option<TerminalRecord>> {
        let path = self.record_path(id);
        if !path.exists() {
            return Ok(None);
        }
        read_record(&path, id.as_str()).map(Some).map_err(|error| {
            let text = match error {
                Unusable::Unreadable(text) | Unusable::Corrupt(text) => text,
            };
            Error::io(
                format!("reading terminal record {}", path.display()),
                io::Error::other(text),
            )
        })
    }

    /// Removes the record of `id`; a missing record is not an error.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the record's path.
    pub fn remove(&self, id: &TerminalId) -> Result<()> {
        let path = self.record_path(id);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
        .map_err(|error| {
            Error::io(
                format!("removing terminal record {}", path.display()),
                error,
            )
        })
    }

    /// Reads every record, oldest first. A record that does not parse (or
    /// has an unknown version, or names another id) is moved aside to
    /// `*.corrupt` and reported in [`LoadedRecords::corrupt`], as are those
    /// moved aside earlier; one that cannot be read is reported in
    /// [`LoadedRecords::unreadable`] and left in place.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] only when the directory itself cannot be listed.
    pub fn load_all(&self) -> Result<LoadedRecords> {
        self.load_shared().map(Arc::unwrap_or_clone)
    }

    /// [`load_all`](Self::load_all) shared with the scan the cache keeps:
    /// an unchanged directory answers without copying a record.
    ///
    /// # Errors
    ///
    /// As for [`load_all`](Self::load_all).
    pub(crate) fn load_shared(&self) -> Result<Arc<LoadedRecords>> {
        self.load_all_at(SystemTime::now())
    }

    /// [`load_shared`](Self::load_shared) as a scan begun at `began` (the
    /// tests' seam: a scan long after the directory's last change).
    fn load_all_at(&self, began: SystemTime) -> Result<Arc<LoadedRecords>> {
        let dir = FileKey::at(&self.terminals);
        if let Some(loaded) = self.cache.unchanged(dir) {
            return Ok(loaded);
        }
        let entries = fs::read_dir(&self.terminals).map_err(|error| {
            Error::io(
                format!("listing state directory {}", self.terminals.display()),
                error,
            )
        })?;
        let mut loaded = LoadedRecords::default();
        let mut seen = HashSet::new();
        for entry in entries {
            let path = match entry {
                Ok(entry) => entry.path(),
                Err(error) => {
                    loaded.unreadable.push(CorruptRecord {
                        path: self.terminals.clone(),
                        id: None,
                        error: error.to_string(),
                    });
                    continue;
                }
            };
            match classify(&path) {
                FileKind::Record(stem) => {
                    match self
                        .cache
                        .get(&path, || read_record(&path, stem).map(Arc::new))
                    {
                        Ok(record) => {
                            seen.insert(path);
                            loaded.records.push(record);
                        }
                        Err(Unusable::Unreadable(error)) => loaded.unreadable.push(CorruptRecord {
                            id: TerminalId::parse(stem).ok(),
                            path,
                            error,
                        }),
                        Err(Unusable::Corrupt(error)) => {
                            let id = TerminalId::parse(stem).ok();
                            loaded.corrupt.push(set_aside(path, id, error));
                        }
                    }
                }
                FileKind::SetAside(stem) => {
                    let error = match read_record(&path, stem) {
                        Ok(_) => "moved aside earlier".to_owned(),
                        Err(Unusable::Corrupt(error) | Unusable::Unreadable(error)) => error,
                    };
                    loaded.corrupt.push(CorruptRecord {
                        id: TerminalId::parse(stem).ok(),
                        path,
                        error,
                    });
                }
                FileKind::Other => {}
            }
        }
        self.cache.keep_only(&seen);
        loaded.records.sort_by(|a, b| {
            (a.created_ms, a.created_ns, &a.id).cmp(&(b.created_ms, b.created_ns, &b.id))
        });
        loaded.corrupt.sort_by(|a, b| a.path.cmp(&b.path));
        let last = loaded.unreadable.is_empty();
        let loaded = Arc::new(loaded);
        self.cache.scanned(dir, began, &loaded, last);
        Ok(loaded)
    }
}

/// Moves a corrupt record aside; when the rename fails it stays where it
/// is, reported all the same (and loaded again next time).
fn set_aside(path: PathBuf, id: Option<TerminalId>, error: String) -> CorruptRecord {
    let mut aside = path.clone().into_os_string();
    aside.push(CORRUPT_SUFFIX);
    let aside = PathBuf::from(aside);
    match fs::rename(&path, &aside) {
        Ok(()) => {
            tracing::warn!(path = %aside.display(), %error, "moved a corrupt terminal record aside");
            CorruptRecord {
                path: aside,
                id,
                error,
            }
        }
        Err(rename) => CorruptRecord {
            path,
            id,
            error: format!("{error} (could not move it aside: {rename})"),
        },
    }
}

/// What a file in the records directory is.
enum FileKind<'a> {
    /// `<stem>.json`: a record.
    Record(&'a str),
    /// `<stem>.json.corrupt`: a record moved aside.
    SetAside(&'a str),
    /// Anything else (temp files start with a dot).
    Other,
}

fn classify(path: &Path) -> FileKind<'_> {
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return FileKind::Other;
    };
    if name.starts_with('.') {
        return FileKind::Other;
    }
    if let Some(stem) = name
        .strip_suffix(CORRUPT_SUFFIX)
        .and_then(|name| name.strip_suffix(".json"))
    {
        return FileKind::SetAside(stem);
    }
    name.strip_suffix(".json")
        .map_or(FileKind::Other, FileKind::Record)
}

/// Why a record cannot be used.
enum Unusable {
    /// An I/O error: the file may be fine; try again later.
    Unreadable(String),
    /// Its content: no later read will do better.
    Corrupt(String),
}

fn read_record(path: &Path, stem: &str) -> Result<TerminalRecord, Unusable> {
    let bytes = fs::read(path).map_err(|error| Unusable::Unreadable(error.to_string()))?;
    let record: TerminalRecord =
        serde_json::from_slice(&bytes).map_err(|error| Unusable::Corrupt(error.to_string()))?;
    if record.id.as_str() != stem {
        return Err(Unusable::Corrupt(format!(
            "record id {} does not match its file name",
            record.id
        )));
    }
    if record.version != RECORD_VERSION {
        return Err(Unusable::Corrupt(format!(
            "record version {} is not this engine's {RECORD_VERSION}",
            record.version
        )));
    }
    Ok(record)
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new
/// one, never a torn one: a temp file (named `prefix`...) in the same
/// directory, renamed over `path`. The state directory's records and a kept
/// history's `meta.json` are written this way.
pub(crate) fn write_atomically(path: &Path, prefix: &str, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new().prefix(prefix).tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "records_tests.rs"]
mod tests;
