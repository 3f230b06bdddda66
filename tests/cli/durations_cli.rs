//! A command's duration is one fact for every process on the host: a CLI
//! call that links to a running terminal after its commands ended lists
//! them with the time they ran, as the process that sent them did (the
//! integrated shell stamps its marks). It listed every one as 0 before:
//! it timed marks by their arrival, and a late reader gets them all at
//! once from the relay.

use super::Cli;

/// In a terminal of `shell` with the engine's integration, a command
/// sent by one process and listed by another has the same duration, at
/// least what it slept.
fn listed_by_another_process_with_its_duration(shell: &str) {
    let cli = Cli::new();
    let with_shell = |args: &[&str]| {
        let out = cli.ok_with(args, |command| {
            command.env("TMUX_ENGINE_SHELL", shell);
        });
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    with_shell(&["--json", "spawn", "--name", "timed"]);
    let sent = with_shell(&["--json", "send", "timed", "sleep 0.4", "--submit"]);
    assert_eq!(sent["exit_code"], 0, "{shell}: {sent}");
    let took = |command: &serde_json::Value| command["duration_secs"].as_f64().unwrap();
    let sent_took = took(&sent["commands"][0]);
    assert!(sent_took >= 0.4, "{shell}, the sender's: {sent}");
    // A new process, linking now: the command ended before it read a byte.
    let listed = with_shell(&["--json", "commands", "timed"]);
    let commands = listed["commands"].as_array().unwrap();
    let sleep = commands
        .iter()
        .find(|command| command["text"] == "sleep 0.4")
        .unwrap_or_else(|| panic!("{shell}: {listed}"));
    assert!(took(sleep) >= 0.4, "{shell}, another process's: {listed}");
    // Both read the same marks' times (each rounds to the millisecond).
    assert!(
        (took(sleep) - sent_took).abs() < 0.0015,
        "{shell}: {sent} / {listed}"
    );
    cli.ok(&["kill", "timed"]);
}

#[test]
fn bash_commands_keep_their_duration_for_a_late_reader() {
    listed_by_another_process_with_its_duration("/bin/bash");
}

#[test]
fn zsh_commands_keep_their_duration_for_a_late_reader() {
    listed_by_another_process_with_its_duration("/usr/bin/zsh");
}

#[test]
fn fish_commands_keep_their_duration_for_a_late_reader() {
    listed_by_another_process_with_its_duration("/usr/bin/fish");
}
