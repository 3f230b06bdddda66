//! A terminal's flight recorder: everything the program printed and
//! everything typed, as an asciicast v2 recording kept in memory (bounded,
//! see [`asciicast::Writer`]), and the failure artifacts written from it
//! when a wait times out or a test panics: the recording, and the final
//! screen as text and with attributes.
//!
//! The recorder lives in the screen model, under the model's lock, so an
//! output event is recorded exactly when it is applied: the recording
//! replays to the model's screen. Resyncs (a lag, the final capture of an
//! exited program) are recorded as the repaint they are.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Screen;
use super::asciicast::{Header, Writer};
use crate::vocab::Size;

/// Where a terminal's artifacts go: `dir/label.cast`, `dir/label.txt`,
/// `dir/label.styled.txt`.
#[derive(Clone, Debug)]
pub(crate) struct Artifacts {
    /// The directory, created when the artifacts are first written.
    pub(crate) dir: PathBuf,
    /// The file name stem, one per terminal of a test.
    pub(crate) label: String,
}

/// The recording in progress.
pub(crate) struct Recorder {
    writer: Writer<Vec<u8>>,
    started: Instant,
    artifacts: Artifacts,
}

impl Recorder {
    /// A recording of a terminal of `size` whose screen is now drawn by
    /// `screen_now` (written first, at time 0), at most `limit` bytes.
    pub(crate) fn new(size: Size, screen_now: &[u8], artifacts: Artifacts, limit: u64) -> Recorder {
        let mut header = Header::now(size);
        header.title = Some(artifacts.label.clone());
        // Writing to a Vec cannot fail.
        let mut writer =
            Writer::new(Vec::new(), &header, limit).unwrap_or_else(|_| unreachable!("a Vec"));
        let _ = writer.output(Duration::ZERO, screen_now);
        Recorder {
            writer,
            started: Instant::now(),
            artifacts,
        }
    }

    fn at(&self) -> Duration {
        self.started.elapsed()
    }

    /// Bytes the program printed.
    pub(crate) fn output(&mut self, bytes: &[u8]) {
        let at = self.at();
        let _ = self.writer.output(at, bytes);
    }

    /// Bytes typed.
    pub(crate) fn input(&mut self, bytes: &[u8]) {
        let at = self.at();
        let _ = self.writer.input(at, bytes);
    }

    /// A marker, e.g. keys sent by name.
    pub(crate) fn marker(&mut self, label: &str) {
        let at = self.at();
        let _ = self.writer.marker(at, label);
    }

    /// A resize.
    pub(crate) fn resize(&mut self, size: Size) {
        let at = self.at();
        let _ = self.writer.resize(at, size);
    }

    /// The recording so far.
    pub(crate) fn cast(&self) -> &[u8] {
        self.writer.get_ref()
    }

    /// What to write, taken under the model's lock so it is one moment's.
    pub(crate) fn take_artifacts(&self, screen: Screen) -> Pending {
        Pending {
            artifacts: self.artifacts.clone(),
            cast: self.writer.get_ref().clone(),
            screen,
        }
    }
}

/// Artifacts copied out of the model, to be written without its lock.
pub(crate) struct Pending {
    artifacts: Artifacts,
    cast: Vec<u8>,
    screen: Screen,
}

impl Pending {
    /// Writes the recording, the screen's [`snapshot`](Screen::snapshot)
    /// and its [`attributed_rows`](Screen::attributed_rows); returns the
    /// files, or what went wrong as text for an error message.
    pub(crate) fn write(self) -> Result<Vec<PathBuf>, String> {
        let Artifacts { dir, label } = &self.artifacts;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut styled = self.screen.attributed_rows().join("\n");
        styled.push('\n');
        let files = [
            (format!("{label}.cast"), self.cast),
            (format!("{label}.txt"), self.screen.snapshot().into_bytes()),
            (format!("{label}.styled.txt"), styled.into_bytes()),
        ];
        files
            .into_iter()
            .map(|(name, bytes)| {
                let path = dir.join(name);
                write(&path, &bytes)?;
                Ok(path)
            })
            .collect()
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The lines an error message gets for written (or failed) artifacts.
pub(crate) fn describe(written: &Result<Vec<PathBuf>, String>) -> String {
    match written {
        Ok(files) => {
            let mut text = "--- recorded to ---".to_owned();
            for file in files {
                text.push('\n');
                text.push_str(&file.display().to_string());
            }
            text
        }
        Err(e) => format!("--- recording not written: {e} ---"),
    }
}
