//! The state directory: one JSON record per terminal, so terminals survive
//! the engine and processes sharing the directory see the same terminals.
//!
//! Layout: `<state dir>/terminals/<terminal id>.json`. A record is written
//! atomically (temp file in the same directory, then rename) before its
//! terminal is published, rewritten when the terminal is rebuilt, and
//! removed after it is killed. Loading tolerates corrupt files: each is
//! reported and skipped, never fatal.
//!
//! No fsync: a record must outlive the engine process, and the page cache
//! does that; what fsync adds is surviving a crash of the machine, which no
//! terminal survives (its tmux server dies with it). It cost two disk
//! flushes per spawn.
//!
//! This module does blocking file I/O and knows nothing of backends; the
//! registry calls it from `spawn_blocking`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{OwnerId, SpawnSpec, TerminalId};
use crate::{Error, Result};

/// The record format version written by this engine.
pub const RECORD_VERSION: u32 = 1;

/// What the state directory keeps about one terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalRecord {
    /// Format version ([`RECORD_VERSION`]).
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
    /// How it was spawned: kind, name, role, restart policy, command, cwd,
    /// env, size (flattened into the record).
    #[serde(flatten)]
    pub spec: SpawnSpec,
    /// Backend-specific data to find the terminal again (e.g. the socket
    /// path); opaque to the registry.
    #[serde(default)]
    pub locator: serde_json::Value,
}

impl TerminalRecord {
    /// A record for a terminal created now.
    pub fn new(
        id: TerminalId,
        owner: OwnerId,
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
            spec,
            locator,
        }
    }
}

/// A record file that could not be read.
#[derive(Debug)]
pub struct CorruptRecord {
    /// The file.
    pub path: PathBuf,
    /// What was wrong with it.
    pub error: String,
}

/// Everything [`StateDir::load_all`] found.
#[derive(Debug, Default)]
pub struct LoadedRecords {
    /// The readable records, oldest first.
    pub records: Vec<TerminalRecord>,
    /// The files that were skipped.
    pub corrupt: Vec<CorruptRecord>,
}

/// A state directory holding terminal records.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    terminals: PathBuf,
}

impl StateDir {
    /// Opens (creating with mode 0700 if needed) the state directory `root`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory when it cannot be created;
    /// [`Error::UnsafeDirectory`] when it is not owned by the user or gives
    /// group or other access.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let terminals = root.join("terminals");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&terminals)
            .map_err(|error| {
                Error::io(
                    format!("creating state directory {}", terminals.display()),
                    error,
                )
            })?;
        // Records name sockets the engine attaches to and commands it
        // reruns: a state directory others can write is refused. Followed
        // if a symlink (a user may link ~/.local/state elsewhere).
        let real = fs::canonicalize(&root)
            .map_err(|e| Error::io(format!("resolving state directory {}", root.display()), e))?;
        crate::tmux::dirs::check_private(&real)?;
        Ok(StateDir { root, terminals })
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
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.terminals)
            .map_err(|error| Error::io(context(), error))?;
        temp.write_all(&json)
            .map_err(|error| Error::io(context(), error))?;
        temp.persist(&path)
            .map_err(|error| Error::io(context(), error.error))?;
        Ok(())
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

    /// Reads every record, oldest first; unreadable or inconsistent files
    /// are reported in [`LoadedRecords::corrupt`] and skipped.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] only when the directory itself cannot be listed.
    pub fn load_all(&self) -> Result<LoadedRecords> {
        let entries = fs::read_dir(&self.terminals).map_err(|error| {
            Error::io(
                format!("listing state directory {}", self.terminals.display()),
                error,
            )
        })?;
        let mut loaded = LoadedRecords::default();
        for entry in entries {
            let path = match entry {
                Ok(entry) => entry.path(),
                Err(error) => {
                    loaded.corrupt.push(CorruptRecord {
                        path: self.terminals.clone(),
                        error: error.to_string(),
                    });
                    continue;
                }
            };
            let Some(stem) = record_stem(&path) else {
                continue;
            };
            match read_record(&path, stem) {
                Ok(record) => loaded.records.push(record),
                Err(error) => loaded.corrupt.push(CorruptRecord { path, error }),
            }
        }
        loaded.records.sort_by(|a, b| {
            (a.created_ms, a.created_ns, &a.id).cmp(&(b.created_ms, b.created_ns, &b.id))
        });
        Ok(loaded)
    }
}

/// The file stem of a record file, or `None` for anything else (temp files
/// start with a dot).
fn record_stem(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') {
        return None;
    }
    name.strip_suffix(".json")
}

fn read_record(path: &Path, stem: &str) -> Result<TerminalRecord, String> {
    let bytes = fs::read(path).map_err(|error| error.to_string())?;
    let record: TerminalRecord =
        serde_json::from_slice(&bytes).map_err(|error| error.to_string())?;
    if record.id.as_str() != stem {
        return Err(format!(
            "record id {} does not match its file name",
            record.id
        ));
    }
    if record.version > RECORD_VERSION {
        return Err(format!(
            "record version {} is newer than this engine's {RECORD_VERSION}",
            record.version
        ));
    }
    Ok(record)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// A temporary directory of mode 0700: a state directory must be
    /// private (`tempfile` makes 0755 ones).
    fn private_tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap()
    }

    use super::*;
    use crate::registry::RestartPolicy;

    fn record(name: &str) -> TerminalRecord {
        TerminalRecord::new(
            TerminalId::mint().unwrap(),
            OwnerId::new("owner").unwrap(),
            SpawnSpec::new("stub")
                .name(name)
                .role("repl")
                .restart(RestartPolicy::OnAttach)
                .command(["bash", "-l"])
                .env("A", "1"),
            serde_json::json!({ "socket": "/tmp/x.sock" }),
        )
    }

    #[test]
    fn write_then_load_round_trips_and_sorts_by_creation() {
        let dir = private_tempdir();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let mode = fs::metadata(dir.path().join("state/terminals"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let mut first = record("one");
        first.created_ms = 10;
        let mut second = record("two");
        second.created_ms = 5;
        // Two in one millisecond keep their order by the nanoseconds, not
        // by their (random) ids.
        let mut third = record("three");
        third.created_ms = 10;
        third.created_ns = first.created_ns + 1;
        if third.id < first.id {
            std::mem::swap(&mut third.id, &mut first.id);
        }
        std::mem::swap(&mut first.created_ns, &mut third.created_ns);
        for rec in [&first, &second, &third] {
            state.write(rec).unwrap();
        }
        let loaded = state.load_all().unwrap();
        assert!(loaded.corrupt.is_empty());
        assert_eq!(
            loaded.records,
            vec![second.clone(), third.clone(), first.clone()]
        );
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(state.record_path(&first.id)).unwrap()).unwrap();
        for key in [
            "id",
            "owner",
            "name",
            "role",
            "restart",
            "kind",
            "created_ms",
            "created_ns",
            "locator",
        ] {
            assert!(json.get(key).is_some(), "record lacks {key}: {json}");
        }
    }

    #[test]
    fn rewrite_is_atomic_and_leaves_no_temp_files() {
        let dir = private_tempdir();
        let state = StateDir::open(dir.path()).unwrap();
        let mut rec = record("main");
        state.write(&rec).unwrap();
        rec.locator = serde_json::json!({ "socket": "/tmp/y.sock" });
        state.write(&rec).unwrap();
        let names: Vec<String> = fs::read_dir(dir.path().join("terminals"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![format!("{}.json", rec.id)]);
        assert_eq!(state.load_all().unwrap().records, vec![rec.clone()]);
        state.remove(&rec.id).unwrap();
        state.remove(&rec.id).unwrap();
        assert!(state.load_all().unwrap().records.is_empty());
    }

    #[test]
    fn corrupt_files_are_reported_and_skipped() {
        let dir = private_tempdir();
        let state = StateDir::open(dir.path()).unwrap();
        let good = record("good");
        state.write(&good).unwrap();
        let terminals = dir.path().join("terminals");
        fs::write(terminals.join("t-1-0000000000000000.json"), b"{ not json").unwrap();
        let mut renamed = record("renamed");
        renamed.id = TerminalId::mint().unwrap();
        fs::write(
            terminals.join("t-2-0000000000000000.json"),
            serde_json::to_vec(&renamed).unwrap(),
        )
        .unwrap();
        let mut future = record("future");
        future.version = RECORD_VERSION + 1;
        state.write(&future).unwrap();
        fs::write(terminals.join(".tmp-half"), b"{").unwrap();
        fs::write(terminals.join("README"), b"ignored").unwrap();
        let loaded = state.load_all().unwrap();
        assert_eq!(loaded.records, vec![good]);
        let mut errors: Vec<String> = loaded.corrupt.iter().map(|c| c.error.clone()).collect();
        errors.sort();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("does not match its file name"))
        );
        assert!(errors.iter().any(|e| e.contains("newer than")));
        assert!(errors.iter().any(|e| e.contains("key must be a string")));
    }
}
