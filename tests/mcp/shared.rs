//! One terminal, several engine processes: two agents' `mcp` and a
//! person's CLI use it at once, and each hears every byte (the pane's
//! relay serves them all; no process can take the stream from another).

use serde_json::{Value, json};

use super::{Mcp, shell};
use crate::cli::Cli;
use crate::support::within;

/// The epoch (the stream) of a cursor (`EPOCH:OFFSET`).
fn epoch_of(cursor: &Value) -> String {
    cursor
        .as_str()
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned()
}

/// The send's output, its exit code and its cursors.
async fn echo(mcp: &Mcp, terminal: &str, word: &str) -> Value {
    let args = json!({"terminal": terminal, "text": format!("echo {word}"), "submit": true});
    let sent = mcp.ok("terminal_send", args).await;
    assert_eq!(sent["output"], format!("{word}\n"), "{word}: {sent}");
    assert_eq!(sent["exit_code"], 0, "{word}: {sent}");
    sent
}

#[tokio::test]
async fn two_agents_and_a_cli_read_each_hear_every_send() {
    let cli = Cli::new();
    within(async {
        let a = Mcp::start(&cli).await;
        shell(&a, "t").await;
        let b = Mcp::start(&cli).await;
        for round in 0..20 {
            let from_a = echo(&a, "t", &format!("a-{round}")).await;
            let from_b = echo(&b, "t", &format!("b-{round}")).await;
            // One stream, one epoch: both count in it.
            assert_eq!(
                epoch_of(&from_a["cursor"]),
                epoch_of(&from_b["cursor"]),
                "round {round}"
            );
            if round % 4 == 0 {
                // A one-shot CLI links too, and leaves both agents hearing.
                let page = cli.ok(&["read", "t", "--count", "5"]);
                assert!(
                    page.contains(&format!("b-{round}")),
                    "round {round}: {page}"
                );
            }
            // A cursor one process handed out reads the same bytes in the
            // other, and in the CLI (from the command's echo on: `sh` has
            // no mark between its echo and its output).
            let start = from_a["start_cursor"].as_str().unwrap();
            let read = b
                .ok(
                    "terminal_read",
                    json!({"terminal": "t", "since": start, "format": "text"}),
                )
                .await;
            assert_eq!(read["gap"], Value::Null, "round {round}: {read}");
            let text = read["text"].as_str().unwrap();
            assert!(
                text.contains(&format!("a-{round}\n")),
                "round {round}: {read}"
            );
            assert!(
                text.contains(&format!("b-{round}")),
                "round {round}: {read}"
            );
            let read = cli.ok(&["read", "t", "--since", start, "--format", "text"]);
            assert!(
                read.contains(&format!("a-{round}\n")),
                "round {round}: {read}"
            );
        }
        b.stop().await;
        a.ok("terminal_kill", json!({"terminal": "t"})).await;
        a.stop().await;
    })
    .await;
}

/// A kept history is written by one process at a time, and the next one
/// (each CLI call is one) goes on where the last stopped: the stream's
/// epoch is the relay's, so its bytes are kept once, at the offsets every
/// cursor names.
#[tokio::test]
async fn a_kept_history_is_written_once_across_processes() {
    let cli = Cli::new();
    within(async {
        cli.ok(&["spawn", "--name", "kept", "--keep-history"]);
        for word in ["first-call", "second-call", "third-call"] {
            let out = cli.ok(&["send", "kept", &format!("echo {word}"), "--submit"]);
            assert!(out.contains(word), "{out}");
        }
        let logs = cli.ok(&["logs", "kept", "--strip"]);
        for word in ["first-call", "second-call", "third-call"] {
            // The echoed command line and its output: twice, never more.
            assert_eq!(logs.matches(word).count(), 2, "{word} in {logs:?}");
        }
        cli.ok(&["kill", "kept"]);
    })
    .await;
}

/// A relay killed under a live terminal leaves no process deaf: the next
/// send finds the output gone from its link, a new relay is started (a new
/// stream: the epoch changes, an old cursor is stale), and the answer is
/// exact, not a timeout.
#[tokio::test]
async fn a_killed_relay_is_replaced_and_sends_stay_exact() {
    let cli = Cli::new();
    within(async {
        let a = Mcp::start(&cli).await;
        shell(&a, "r").await;
        let before = echo(&a, "r", "before").await;
        let runtime = cli.runtime();
        let runtime = runtime.to_str().unwrap().as_bytes().to_vec();
        // The relay itself (tmux's own command line names it too).
        let relays = crate::cli::processes_where(|cmdline| {
            cmdline
                .split(|&b| b == 0)
                .next()
                .is_some_and(|arg0| arg0.ends_with(b"tmux-engine-relay"))
                && cmdline
                    .windows(runtime.len())
                    .any(|w| w == runtime.as_slice())
        });
        assert_eq!(relays.len(), 1, "one relay per terminal: {relays:?}");
        let pid = rustix::process::Pid::from_raw(relays[0] as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
        // The agent's process links to a new relay on its own; a send that
        // raced that would span the stream's restart, so this waits (to a
        // deadline) until the process reads the new stream.
        let old = epoch_of(&before["cursor"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let read = a
                .ok(
                    "terminal_read",
                    json!({"terminal": "r", "since": before["cursor"]}),
                )
                .await;
            let now = epoch_of(&read["next_cursor"]);
            if now != old {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no new relay: {read}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // The new stream's first prompt, before the next send looks for it.
        a.ok(
            "terminal_send",
            json!({"terminal": "r", "text": "", "submit": true}),
        )
        .await;
        let after = echo(&a, "r", "after").await;
        assert_ne!(
            epoch_of(&before["cursor"]),
            epoch_of(&after["cursor"]),
            "a new relay, a new stream"
        );
        // A second process links to the new relay and hears the same.
        let b = Mcp::start(&cli).await;
        let from_b = echo(&b, "r", "second").await;
        assert_eq!(epoch_of(&after["cursor"]), epoch_of(&from_b["cursor"]));
        b.stop().await;
        a.ok("terminal_kill", json!({"terminal": "r"})).await;
        a.stop().await;
    })
    .await;
}
