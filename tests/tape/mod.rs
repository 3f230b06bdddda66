//! `tmux-engine test` tapes against a real tmux: a shell, `python3 -q`,
//! vim, a colour check, a failing expectation that points at its line, a
//! golden snapshot that changes, a VHS tape unchanged; the JUnit report,
//! artifacts and retries; the PNG and GIF decoded.

mod hermetic;
mod pictures;
mod reports;
mod runs;
mod vhs_grammar;
mod vttest;

use std::path::{Path, PathBuf};

use tmux_engine::tape::{self, Options, TapeResult};

/// Writes `text` as `dir/name`, returning its path.
pub fn write_tape(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a tape");
    path
}

/// Options for tapes under `dir`: its own runtime and artifacts directories.
pub fn options(dir: &Path) -> Options {
    Options {
        artifacts: dir.join("artifacts"),
        runtime_dir: Some(dir.join("rt")),
        jobs: 4,
        ..Options::default()
    }
}

/// Runs one tape and returns its result.
pub async fn run(dir: &Path, name: &str, text: &str) -> TapeResult {
    let path = write_tape(dir, name, text);
    let mut results = tape::run_files(&[path], &options(dir)).await;
    results.pop().expect("one result")
}

/// The tape passed; its failure is the message otherwise.
pub fn assert_passed(result: &TapeResult) {
    if let Some(f) = &result.failure {
        panic!("{} failed:\n{f}", result.path.display());
    }
}
