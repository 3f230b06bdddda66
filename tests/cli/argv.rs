//! Issue 10, item 8: argv is argv. A one-word command is executed as a
//! program of that name, never handed to a shell; shell parsing only with
//! `--shell` (`SpawnSpec::shell`).
#![allow(clippy::unwrap_used)]

use crate::cli::{Cli, servers_left};

#[test]
fn one_word_is_a_program_name_and_shell_parses_only_when_asked() {
    let cli = Cli::new();
    let dir = crate::support::test_dir();
    let canary = dir.path().join("p");
    let line = format!("id>{}", canary.display());

    // Before the fix tmux ran the word through `sh -c`, creating the file.
    cli.ok(&["spawn", "--name", "word", "--", &line]);
    let waited = cli.ok(&["wait", "word", "--exit", "--timeout", "10"]);
    assert_eq!(waited.trim(), "exited with code 127", "no such program");
    assert!(!canary.exists(), "a one-word command went through a shell");

    cli.ok(&["spawn", "--name", "line", "--shell", &line]);
    let waited = cli.ok(&["wait", "line", "--exit", "--timeout", "10"]);
    assert_eq!(waited.trim(), "exited with code 0");
    assert!(canary.exists(), "--shell runs SHELL -c LINE");

    // One word that is a real program runs as itself.
    cli.ok(&["spawn", "--name", "true", "--", "true"]);
    let waited = cli.ok(&["wait", "true", "--exit", "--timeout", "10"]);
    assert_eq!(waited.trim(), "exited with code 0");

    let both = cli.run(&["spawn", "--shell", "x", "--", "y"]);
    assert_eq!(both.status.code(), Some(2), "clap refuses both");
    for name in ["word", "line", "true"] {
        cli.ok(&["kill", name]);
    }
    assert_eq!(servers_left(&cli.runtime()), 0);
}
