//! Terminal tests as tape files (`tmux-engine test FILE.tape...`): VHS's
//! commands (`Type`, `Enter`, `Sleep`, `Wait`, `Screenshot`, `Output`,
//! ...) and the assertions VHS lacks (`Expect`, `Snapshot`, `Wait Stable`),
//! each tape in its own [`Fixture`](crate::fixture::Fixture), run in
//! parallel. A failure names the tape's file and line and shows the screen
//! then; its recording, final screen and a PNG are kept as artifacts.
//!
//! Layout: `lex` (the words of a line), `parse` (lines to commands with
//! their file:line; `args`: settings, keys, colours), `run` (one try of one tape; `shells`: VHS's shells and prompts;
//! `frames`: text outputs as VHS writes them), `check` (expectations and
//! snapshots), `report` (JUnit XML and the summary line); this module runs
//! many tapes and retries flaky ones. The guide is `docs/tapes.md`.

mod args;
mod check;
mod frames;
mod lex;
mod parse;
mod report;
mod run;
mod shells;

pub use parse::{Location, Tape};
pub use report::{junit, summary};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// How tapes are run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How many tapes run at once (at least 1).
    pub jobs: usize,
    /// Rewrite `Snapshot` golden files instead of comparing.
    pub update: bool,
    /// Where each failed tape's artifacts go: `<artifacts>/<tape>/`.
    pub artifacts: PathBuf,
    /// Further tries for a tape that says `Set Flaky true`.
    pub retries: u32,
    /// Where the tapes' tmux servers put their directories (default as
    /// every fixture's: `$TMUX_ENGINE_RUNTIME_DIR`, `$XDG_RUNTIME_DIR`,
    /// `/tmp`).
    pub runtime_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            jobs: std::thread::available_parallelism().map_or(2, usize::from),
            update: false,
            artifacts: default_artifacts(),
            retries: 0,
            runtime_dir: None,
        }
    }
}

impl Options {
    /// The artifacts directory of one tape.
    pub fn artifacts_for(&self, tape: &Tape) -> PathBuf {
        self.artifacts.join(tape.name())
    }
}

/// `$CARGO_TARGET_DIR/tmux-engine-tapes`, else `target/tmux-engine-tapes`.
pub(crate) fn default_artifacts() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("tmux-engine-tapes")
}

/// Why a tape failed.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The command that failed (`None`: the tape could not be read, or its
    /// `Output` not written).
    pub at: Option<Location>,
    /// What went wrong, starting with the command as written.
    pub message: String,
    /// The screen then, in [`Screen::snapshot`](crate::screen::Screen::snapshot)
    /// form, when the message does not already hold it.
    pub screen: Option<String>,
    /// The files written: the recording, the screen as text and as a PNG.
    pub artifacts: Vec<PathBuf>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(at) = &self.at {
            write!(f, "{at}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(screen) = &self.screen {
            write!(f, "\n--- screen {screen}---")?;
        }
        for file in &self.artifacts {
            write!(f, "\nartifact: {}", file.display())?;
        }
        Ok(())
    }
}

/// How one tape went.
#[derive(Clone, Debug)]
pub struct TapeResult {
    /// The tape file.
    pub path: PathBuf,
    /// Its name (file stem).
    pub name: String,
    /// `None`: passed.
    pub failure: Option<Failure>,
    /// Tries made (more than 1 only for a flaky tape with `--retries`).
    pub tries: u32,
    /// Wall time of all tries, in seconds.
    pub seconds: f64,
    /// What else happened (snapshots written, earlier tries' failures).
    pub notes: Vec<String>,
}

impl TapeResult {
    /// True when the tape passed (on some try).
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Runs one tape file: parsed, then tried (again, up to `retries` times,
/// when it says `Set Flaky true`).
pub(crate) async fn run_file(path: &Path, options: &Options) -> TapeResult {
    let started = Instant::now();
    let name = path
        .file_stem()
        .map_or_else(|| "tape".to_owned(), |s| s.to_string_lossy().into_owned());
    let tape = match Tape::read(path) {
        Ok(tape) => tape,
        Err(e) => {
            return TapeResult {
                path: path.to_owned(),
                name,
                failure: Some(Failure {
                    at: None,
                    message: format!("{}: {e}", e.code().as_str()),
                    screen: None,
                    artifacts: Vec::new(),
                }),
                tries: 0,
                seconds: started.elapsed().as_secs_f64(),
                notes: Vec::new(),
            };
        }
    };
    run_tape(&tape, options, started).await
}

async fn run_tape(tape: &Tape, options: &Options, started: Instant) -> TapeResult {
    let tries = if tape.flaky() { options.retries + 1 } else { 1 };
    let dir = options.artifacts_for(tape);
    let mut notes = Vec::new();
    let mut failure = None;
    let mut tried = 0;
    for attempt in 1..=tries {
        tried = attempt;
        // A previous run's artifacts would pass for this one's (only the
        // files a try writes: the directory may be the user's).
        for ext in ["cast", "txt", "styled.txt", "png"] {
            let _ = std::fs::remove_file(dir.join(format!("{}.{ext}", tape.name())));
        }
        let outcome = run::run_once(tape, options, &dir).await;
        notes.extend(outcome.notes);
        match outcome.failure {
            None => {
                failure = None;
                break;
            }
            Some(f) => {
                if attempt < tries {
                    notes.push(format!("try {attempt} of {tries} failed: {f}"));
                }
                failure = Some(f);
            }
        }
    }
    TapeResult {
        path: tape.path.clone(),
        name: tape.name(),
        failure,
        tries: tried,
        seconds: started.elapsed().as_secs_f64(),
        notes,
    }
}

/// Runs every tape, `options.jobs` at a time, each in its own fixture;
/// results in the order given.
pub async fn run_files(paths: &[PathBuf], options: &Options) -> Vec<TapeResult> {
    let gate = Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, path) in paths.iter().enumerate() {
        let (gate, path, options) = (gate.clone(), path.clone(), options.clone());
        tasks.spawn(async move {
            // The semaphore is never closed.
            let _permit = gate.acquire_owned().await;
            (i, run_file(&path, &options).await)
        });
    }
    let mut results: Vec<Option<TapeResult>> = vec![None; paths.len()];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, result)) => results[i] = Some(result),
            Err(e) => tracing::warn!(error = %e, "a tape's task failed"),
        }
    }
    results
        .into_iter()
        .zip(paths)
        .map(|(result, path)| {
            result.unwrap_or_else(|| TapeResult {
                path: path.clone(),
                name: path.display().to_string(),
                failure: Some(Failure {
                    at: None,
                    message: "the tape's task panicked".to_owned(),
                    screen: None,
                    artifacts: Vec::new(),
                }),
                tries: 1,
                seconds: 0.0,
                notes: Vec::new(),
            })
        })
        .collect()
}
