//! The input side of one control client: its paste buffer's name and the
//! files a long write's pieces go through. Kept under the client's input
//! lock (`ClientShared::input`), so one write at a time uses it; the write
//! itself, piece by piece as tmux answers, is `write.rs`'s.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// Numbers this process's clients, so that two engine clients of one
/// server (serve and a CLI, say) never share a buffer name.
static NEXT_CLIENT: AtomicU64 = AtomicU64::new(0);

/// The input side of one client, kept under its input lock.
pub(super) struct Typist {
    /// This client's buffer: one name suffices because a piece's
    /// `load-buffer` and paste are queued back to back and tmux runs the
    /// client's commands in order; the paste (or, for a dead pane, the
    /// `delete-buffer`) removes it again.
    pub(super) buffer: String,
    /// `ClientOptions::input_dir`.
    dir: Option<PathBuf>,
    /// The client's own directory when `dir` is `None`, made on demand
    /// and removed with the client.
    own: Option<tempfile::TempDir>,
    next_file: u64,
}

impl Typist {
    pub(super) fn new(dir: Option<PathBuf>) -> Typist {
        let client = NEXT_CLIENT.fetch_add(1, Ordering::Relaxed);
        Typist {
            buffer: format!("tmux-engine-input-{}-{client}", std::process::id()),
            dir,
            own: None,
            next_file: 0,
        }
    }

    fn dir(&mut self) -> Result<&Path> {
        if let Some(dir) = &self.dir {
            return Ok(dir);
        }
        let own = match &mut self.own {
            Some(own) => own,
            none @ None => none.insert(
                // 0700 with a random name, created exclusively.
                tempfile::Builder::new()
                    .prefix("tmux-engine-input-")
                    .tempdir()
                    .map_err(|e| Error::io("creating a directory for pasted input", e))?,
            ),
        };
        Ok(own.path())
    }

    /// Writes one piece to a new file only this user can read.
    pub(super) fn write_file(&mut self, bytes: &[u8]) -> Result<PieceFile> {
        self.next_file += 1;
        let name = format!("{}-{}.paste", self.buffer, self.next_file);
        let path = self.dir()?.join(name);
        // A 64 KiB write into the page cache: cheaper than a hop to the
        // blocking pool, and the file is gone again within milliseconds.
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut file| file.write_all(bytes));
        let file = PieceFile(path);
        match written {
            Ok(()) => Ok(file),
            Err(e) => Err(Error::io(
                format!("writing pasted input to {}", file.0.display()),
                e,
            )),
        }
    }
}

/// A piece's file, removed when dropped (answered, failed or abandoned).
pub(super) struct PieceFile(pub(super) PathBuf);

impl Drop for PieceFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
