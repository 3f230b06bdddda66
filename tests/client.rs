//! Live tests of the control client against a real tmux: pipelining, reply
//! matching, server loss, deadlines, flow control and exact bytes.

use std::time::Duration;

use futures_util::future::join_all;
use tmux_engine::Error;
use tmux_engine::control::Notification;
use tmux_engine::control::client::{ClientOptions, PaneEvent, PaneStream};
use tmux_engine::control::exit::wait_pane_exit;
use tmux_engine::control::subscribe::SubscribeOptions;
use tmux_engine::terminal::Terminal;
use tmux_engine::tmux::TmuxCommand;
use tmux_engine::tmux::process;

use crate::support::{opts, test_dir, tmux, within};

fn cmd(name: &'static str) -> TmuxCommand {
    TmuxCommand::new(name)
}

async fn start(
    dir: &std::path::Path,
    command: &[&str],
    client: ClientOptions,
) -> (Terminal, PaneStream) {
    let mut server = opts(dir);
    server.command = command.iter().map(Into::into).collect();
    Terminal::start(tmux(), server, client, SubscribeOptions::default())
        .await
        .expect("terminal starts")
}

/// Reads the stream until `want` has been seen in the output bytes.
async fn read_until(stream: &mut PaneStream, want: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    while !seen.windows(want.len()).any(|w| w == want) {
        match stream.recv().await.expect("stream open") {
            PaneEvent::Output(bytes) => seen.extend_from_slice(&bytes),
            PaneEvent::Resync(snap) => seen.extend_from_slice(&snap.to_ansi()),
        }
    }
    seen
}

#[tokio::test]
async fn pipelined_commands_get_their_own_replies_in_order() {
    within(async {
        let dir = test_dir();
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client().clone();
        // 300 commands in flight at once, every third one failing: each
        // caller must get exactly its own answer.
        let calls = (0..300).map(|i| {
            let client = client.clone();
            async move {
                if i % 3 == 0 {
                    let bad = cmd("has-session")
                        .target(format!("=nosuch{i}"))
                        .expect("valid");
                    match client.command(&bad).await {
                        Err(Error::Command { message, .. }) => {
                            assert!(message.contains(&format!("nosuch{i}")), "{message}");
                        }
                        other => panic!("command {i}: expected a tmux error, got {other:?}"),
                    }
                } else {
                    let ok = cmd("display-message")
                        .flag("-p")
                        .format_time_arg(format!("reply {i}"))
                        .expect("valid");
                    let reply = client.command(&ok).await.expect("reply");
                    assert_eq!(reply.text(), format!("reply {i}"));
                }
            }
        });
        join_all(calls).await;
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn hook_blocks_with_flags_0_do_not_take_a_reply() {
    within(async {
        let dir = test_dir();
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client();
        // A hook's commands run with this client and print flags-0 blocks.
        let hook = cmd("set-hook")
            .flag("-g")
            .arg("after-new-window")
            .and_then(|c| c.arg("display-message -p from-hook"))
            .expect("valid");
        client.command(&hook).await.expect("set-hook");
        let new_window = cmd("new-window").flag("-d").arg("cat").expect("valid");
        let after = cmd("display-message")
            .flag("-p")
            .arg("mine")
            .expect("valid");
        let (a, b) = tokio::join!(client.command(&new_window), client.command(&after));
        a.expect("new-window");
        assert_eq!(b.expect("display").text(), "mine");
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn replies_keep_utf8_because_the_client_runs_with_u() {
    within(async {
        let dir = test_dir();
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let reply = term
            .client()
            .command(
                &cmd("display-message")
                    .flag("-p")
                    .arg("é € 😀")
                    .expect("valid"),
            )
            .await
            .expect("reply");
        assert_eq!(reply.text(), "é € 😀");
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_stopped_server_is_unresponsive_and_replies_stay_matched_after() {
    within(async {
        let dir = test_dir();
        let client_opts = ClientOptions {
            command_timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        };
        let (term, _stream) = start(dir.path(), &["cat"], client_opts).await;
        let server_pid = term.server().pid();
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let late = cmd("display-message")
            .flag("-p")
            .arg("late")
            .expect("valid");
        let err = term
            .client()
            .command(&late)
            .await
            .expect_err("no answer while stopped");
        assert_eq!(err.code(), "UNRESPONSIVE", "{err}");
        process::signal(server_pid, rustix::process::Signal::CONT).expect("SIGCONT");
        // The late reply arrives now and is dropped; the next one is ours.
        let next = cmd("display-message")
            .flag("-p")
            .arg("next")
            .expect("valid");
        assert_eq!(
            term.client().command(&next).await.expect("reply").text(),
            "next"
        );
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_fails_pending_commands_and_ends_streams_with_the_reason() {
    within(async {
        let dir = test_dir();
        let (term, mut stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client().clone();
        let server_pid = term.server().pid();
        // Stopped, the server cannot answer: the command stays pending.
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let pending = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .command(&cmd("display-message").flag("-p").arg("x").expect("valid"))
                    .await
            }
        });
        process::signal(server_pid, rustix::process::Signal::KILL).expect("SIGKILL");
        let err = pending.await.expect("task").expect_err("server died");
        assert_eq!(err.code(), "SERVER_GONE", "{err}");
        assert!(stream.recv().await.is_none(), "the pane stream ends");
        let reason = stream.close_reason().expect("a reason");
        assert!(reason.contains("server exited unexpectedly"), "{reason}");
        assert_eq!(client.closed().await, reason);
        let after = client
            .command(&cmd("display-message").flag("-p").arg("y").expect("valid"))
            .await
            .expect_err("closed");
        assert_eq!(after.code(), "SERVER_GONE");
        term.kill().await.expect("kill cleans up the directory");
    })
    .await;
}

#[tokio::test]
async fn send_bytes_delivers_every_byte_exactly() {
    within(async {
        let dir = test_dir();
        let out = dir.path().join("received");
        let script = format!(
            "stty raw -echo; echo ready; head -c 20480 > {}; echo done; exec sleep 60",
            out.display()
        );
        let (term, mut stream) =
            start(dir.path(), &["sh", "-c", &script], ClientOptions::default()).await;
        let mut payload: Vec<u8> = (0..=255u8).cycle().take(256 * 16).collect();
        payload.extend((0..16384u32).map(|i| (i * 7 % 251) as u8));
        assert_eq!(payload.len(), 20480);
        // The program switches the tty to raw mode first; wait for that.
        read_until(&mut stream, b"ready").await;
        term.client()
            .send_bytes(term.pane(), &payload)
            .await
            .expect("send");
        read_until(&mut stream, b"done").await;
        assert_eq!(std::fs::read(&out).expect("written"), payload);
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_gets_the_pane_paused_then_a_resync() {
    within(async {
        let dir = test_dir();
        let client_opts = ClientOptions {
            subscriber_capacity: 8,
            // The observer below must not skip the %pause it waits for.
            event_capacity: 1 << 16,
            ..ClientOptions::default()
        };
        let (term, mut stream) = start(
            dir.path(),
            &["sh", "-c", "read go; exec yes tick"],
            client_opts,
        )
        .await;
        // Observe from before the flood starts, so the %pause is not missed.
        let mut events = term.client().subscribe_events();
        term.client()
            .send_bytes(term.pane(), b"\r")
            .await
            .expect("start the flood");
        // Not reading `stream`: its queue fills, the client pauses the pane.
        loop {
            match events.recv().await {
                Ok(Notification::Pause { pane }) if pane == term.pane() => break,
                Ok(_) => {}
                Err(e) => panic!("events ended or lagged: {e}"),
            }
        }
        // The program keeps running while paused (no backpressure from us).
        let pid = term.server().first_pane().pid;
        assert!(process::is_alive(pid));
        // Catching up: the queued output, then one resync, then live output.
        let mut resync = None;
        let mut live_after = 0;
        while live_after < 3 {
            match stream.recv().await.expect("stream open") {
                PaneEvent::Resync(snap) => resync = Some(snap),
                PaneEvent::Output(bytes) if resync.is_some() => {
                    assert!(!bytes.is_empty(), "no empty output events");
                    live_after += 1;
                }
                PaneEvent::Output(_) => {}
            }
        }
        let snap = resync.expect("a resync before live output");
        assert_eq!((snap.width, snap.height), (80, 24));
        assert_eq!(snap.screen.len(), 24);
        assert!(snap.screen.iter().any(|line| line.starts_with(b"tick")));
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn pane_exit_is_pushed_with_code_or_signal() {
    within(async {
        let dir = test_dir();
        let (term, _stream) = start(
            dir.path(),
            &["sh", "-c", "exit 7"],
            ClientOptions::default(),
        )
        .await;
        let exit = wait_pane_exit(term.client(), term.pane())
            .await
            .expect("exit");
        assert_eq!(exit.shell_status(), 7);
        term.kill().await.expect("kill");

        let dir = test_dir();
        let (term, _stream) = start(dir.path(), &["sleep", "30"], ClientOptions::default()).await;
        let pid = term.server().first_pane().pid;
        let waiter = tokio::spawn({
            let client = term.client().clone();
            let pane = term.pane();
            async move { wait_pane_exit(&client, pane).await }
        });
        process::signal(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let exit = waiter.await.expect("task").expect("exit");
        assert_eq!(exit.shell_status(), 128 + 15);
        term.kill().await.expect("kill");
    })
    .await;
}
