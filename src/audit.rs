//! The audit log: one JSON line per act that changes a terminal or moves
//! data (who, what, which terminal, how many bytes, never the bytes),
//! appended to a file of the user's own (0600), each line chained to the
//! one before by a SHA-256 hash, so [`verify`] finds any line edited,
//! deleted, inserted or moved. Files and hashes only: what counts as an
//! act is the caller's (`serve`'s bridge).
//!
//! A line is `{"seq":N,"at":MS,"who":OWNER,"act":ACT,...,"prev":HEX}` with
//! `,"hash":HEX}` appended, where `hash` is SHA-256 of the line's text up
//! to that suffix (`prev` included, which is the previous line's `hash`,
//! 64 zeros on the first). The line is its own canonical form: any byte
//! changed changes its hash. Cutting lines off the end leaves a shorter
//! valid chain: compare the head [`verify`] reports with one kept
//! elsewhere (a log shipper, a daily note) to see that.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::{Error, Result};

/// The `prev` of the first line.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The bytes read from the end of an existing log to find its last line.
const TAIL: u64 = 64 << 10;

/// One act, as the caller describes it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Act {
    /// What was done: `sign_in`, `link`, `spawn`, `kill`, `input`, ...
    pub act: String,
    /// Who did it (the owner it acted as).
    pub who: String,
    /// How they were known: `token`, `session`, `proxy`.
    pub via: Option<String>,
    /// The terminal it was done to (id, else the name given).
    pub terminal: Option<String>,
    /// Bytes moved (input typed, a file's size), never the bytes.
    pub bytes: Option<u64>,
    /// One more word: a signal's name, a link's id, a file's name.
    pub detail: Option<String>,
}

impl Act {
    /// `act` by `who`.
    pub fn new(act: impl Into<String>, who: impl Into<String>) -> Act {
        Act {
            act: act.into(),
            who: who.into(),
            ..Act::default()
        }
    }

    /// How `who` was known.
    #[must_use]
    pub fn via(mut self, via: impl Into<String>) -> Act {
        self.via = Some(via.into());
        self
    }

    /// The terminal it was done to.
    #[must_use]
    pub fn terminal(mut self, terminal: impl Into<String>) -> Act {
        self.terminal = Some(terminal.into());
        self
    }

    /// Bytes moved.
    #[must_use]
    pub fn bytes(mut self, bytes: u64) -> Act {
        self.bytes = Some(bytes);
        self
    }

    /// One more word.
    #[must_use]
    pub fn detail(mut self, detail: impl Into<String>) -> Act {
        self.detail = Some(detail.into());
        self
    }
}

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    inner: Mutex<Chain>,
}

#[derive(Debug)]
struct Chain {
    file: File,
    /// The last line's hash.
    head: String,
    /// The last line's `seq`.
    seq: u64,
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The hash suffix's length: `,"hash":"` + 64 hex + `"}`.
const SUFFIX: usize = 9 + 64 + 2;

/// A line's body (up to the hash suffix) and its claimed hash.
fn split(line: &str) -> Option<(&str, &str)> {
    let cut = line.len().checked_sub(SUFFIX)?;
    let (body, suffix) = (line.get(..cut)?, line.get(cut..)?);
    let hash = suffix.strip_prefix(",\"hash\":\"")?.strip_suffix("\"}")?;
    Some((body, hash))
}

impl AuditLog {
    /// Opens (or creates, 0600) the log at `path` for appending, going on
    /// from its last line.
    ///
    /// # Errors
    /// `UNSAFE_FILE` when the file is not the user's own or others may
    /// read or write it; `AUDIT_BROKEN` when its last line is not one of
    /// ours; `IO` otherwise.
    pub fn open(path: impl Into<PathBuf>) -> Result<AuditLog> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let path = path.into();
        let context = || format!("opening the audit log {}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| Error::io(context(), e))?;
        let meta = file.metadata().map_err(|e| Error::io(context(), e))?;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me || meta.mode() & 0o077 != 0 || !meta.is_file() {
            return Err(Error::UnsafeFile {
                path,
                reason: format!(
                    "an audit log must be a regular file of uid {me} with mode 600 (it is uid {}, mode {:o})",
                    meta.uid(),
                    meta.mode() & 0o777
                ),
            });
        }
        let (head, seq) = last_line(&mut file, meta.len())
            .map_err(|e| Error::io(context(), e))?
            .map_or(Ok::<_, Error>((GENESIS.to_owned(), 0)), |line| {
                let broken = |reason: &str| Error::AuditBroken {
                    line: 0,
                    reason: format!("its last line {reason}: not appending to it"),
                };
                let (body, hash) = split(&line).ok_or_else(|| broken("has no hash"))?;
                let fields: Map<String, Value> = serde_json::from_str(&format!("{body}}}"))
                    .map_err(|_| broken("is not JSON"))?;
                let seq = fields["seq"].as_u64().ok_or_else(|| broken("has no seq"))?;
                Ok((hash.to_owned(), seq))
            })?;
        Ok(AuditLog {
            path,
            inner: Mutex::new(Chain { file, head, seq }),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `act` as one line, written whole in one `write(2)`.
    ///
    /// # Errors
    /// `IO` when the line cannot be written (the chain then stays at the
    /// last line written).
    pub fn record(&self, act: &Act) -> Result<()> {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        let mut chain = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let seq = chain.seq + 1;
        // Fields in a fixed order, written by hand around serde_json's
        // string escaping: the text is the canonical form that is hashed.
        let text = |value: &str| Value::String(value.to_owned()).to_string();
        let mut body = format!(
            "{{\"seq\":{seq},\"at\":{at},\"who\":{},\"act\":{}",
            text(&act.who),
            text(&act.act)
        );
        if let Some(via) = &act.via {
            body.push_str(&format!(",\"via\":{}", text(via)));
        }
        if let Some(terminal) = &act.terminal {
            body.push_str(&format!(",\"terminal\":{}", text(terminal)));
        }
        if let Some(bytes) = act.bytes {
            body.push_str(&format!(",\"bytes\":{bytes}"));
        }
        if let Some(detail) = &act.detail {
            body.push_str(&format!(",\"detail\":{}", text(detail)));
        }
        body.push_str(&format!(",\"prev\":\"{}\"", chain.head));
        let hash = sha256_hex(body.as_bytes());
        let line = format!("{body},\"hash\":\"{hash}\"}}\n");
        chain
            .file
            .write_all(line.as_bytes())
            .map_err(|e| Error::io(format!("writing the audit log {}", self.path.display()), e))?;
        chain.head = hash;
        chain.seq = seq;
        Ok(())
    }
}

/// The last complete line of `file` (`len` bytes), if any.
fn last_line(file: &mut File, len: u64) -> std::io::Result<Option<String>> {
    let start = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(TAIL).read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text
        .trim_end_matches('\n')
        .rsplit('\n')
        .next()
        .filter(|line| !line.is_empty())
        .map(str::to_owned))
}

/// What [`verify`] found in a sound log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// Lines in the log.
    pub lines: u64,
    /// The last line's hash (64 zeros for an empty log): keep it elsewhere
    /// to notice lines cut off the end later.
    pub head: String,
}

/// Checks every line of the log at `path`: its hash, its link to the line
/// before and its `seq`.
///
/// # Errors
/// `AUDIT_BROKEN` naming the first bad line (1-based) and what is wrong
/// with it; `IO` when the file cannot be read.
pub fn verify(path: &Path) -> Result<Verified> {
    use std::io::BufRead;
    let file = File::open(path)
        .map_err(|e| Error::io(format!("reading the audit log {}", path.display()), e))?;
    let mut head = GENESIS.to_owned();
    let mut lines = 0u64;
    for line in std::io::BufReader::new(file).lines() {
        let line =
            line.map_err(|e| Error::io(format!("reading the audit log {}", path.display()), e))?;
        lines += 1;
        let broken = |reason: String| Error::AuditBroken {
            line: usize::try_from(lines).unwrap_or(usize::MAX),
            reason,
        };
        let (body, hash) = split(&line).ok_or_else(|| broken("no hash at its end".to_owned()))?;
        if sha256_hex(body.as_bytes()) != hash {
            return Err(broken(
                "its text does not match its hash (edited)".to_owned(),
            ));
        }
        let fields: Map<String, Value> = serde_json::from_str(&format!("{body}}}"))
            .map_err(|e| broken(format!("not JSON: {e}")))?;
        if fields.get("prev").and_then(Value::as_str) != Some(head.as_str()) {
            return Err(broken(
                "its prev is not the hash of the line before (a line before it was deleted, \
                 inserted or moved)"
                    .to_owned(),
            ));
        }
        if fields.get("seq").and_then(Value::as_u64) != Some(lines) {
            return Err(broken(format!(
                "its seq is {}, not {lines} (lines before it were cut)",
                fields.get("seq").unwrap_or(&Value::Null)
            )));
        }
        hash.clone_into(&mut head);
    }
    Ok(Verified { lines, head })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn log_of(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for i in 0..n {
            log.record(
                &Act::new("input", "alice")
                    .via("session")
                    .terminal(format!("t-{i}"))
                    .bytes(i as u64),
            )
            .unwrap();
        }
        (dir, path)
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn write(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn bad_line(path: &Path) -> usize {
        match verify(path) {
            Err(Error::AuditBroken { line, .. }) => line,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sound_log_verifies_and_reopening_continues_the_chain() {
        let (_dir, path) = log_of(3);
        assert_eq!(verify(&path).unwrap().lines, 3);
        let log = AuditLog::open(&path).unwrap();
        log.record(&Act::new("kill", "bob").terminal("t-9"))
            .unwrap();
        let verified = verify(&path).unwrap();
        assert_eq!(verified.lines, 4);
        assert_eq!(
            verified.head,
            lines(&path)[3][lines(&path)[3].len() - 66..][..64]
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn an_edit_a_deletion_and_a_reorder_name_the_first_bad_line() {
        let (_dir, path) = log_of(5);
        let sound = lines(&path);
        // Edit: a byte count changed on line 3.
        let mut edited = sound.clone();
        edited[2] = edited[2].replace("\"bytes\":2", "\"bytes\":9");
        write(&path, &edited);
        assert_eq!(bad_line(&path), 3);
        // Deletion: line 2 removed; old line 3 is now line 2.
        let mut deleted = sound.clone();
        deleted.remove(1);
        write(&path, &deleted);
        assert_eq!(bad_line(&path), 2);
        // The first line deleted.
        write(&path, &sound[1..]);
        assert_eq!(bad_line(&path), 1);
        // Reorder: lines 4 and 5 swapped.
        let mut moved = sound.clone();
        moved.swap(3, 4);
        write(&path, &moved);
        assert_eq!(bad_line(&path), 4);
        write(&path, &sound);
        assert_eq!(verify(&path).unwrap().lines, 5);
    }

    #[test]
    fn names_are_escaped_and_never_break_the_line() {
        let (_dir, path) = log_of(0);
        let log = AuditLog::open(&path).unwrap();
        log.record(&Act::new("rename", "eve\"},\"hash\":\"x").detail("a\nb"))
            .unwrap();
        assert_eq!(verify(&path).unwrap().lines, 1);
        assert_eq!(lines(&path).len(), 1);
    }

    #[test]
    fn a_log_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, path) = log_of(1);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = AuditLog::open(&path).unwrap_err();
        assert_eq!(error.code().as_str(), "UNSAFE_FILE");
    }
}
