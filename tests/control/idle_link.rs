//! A control client that lets go of its idle link and links again on its
//! next use (`control/client/linger.rs`), against a real tmux: a relink
//! the server does not answer (stopped) fails the lines queued for it
//! `UNRESPONSIVE`, unwritten, and leaves the client unlinked and usable;
//! a relink that finds the server gone closes the client, as does a
//! server dying while its relink waits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tmux_engine::ErrorCode;
use tmux_engine::control::client::{
    ClientOptions, ControlClient, PaneEvent, PaneStream, SubscribeOptions,
};
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::{TmuxCommand, process};
use tmux_engine::vocab::PaneId;

use crate::support::{Stopped, live, opts, poll, sh_c, tmux};

/// How long a client stays linked once idle: short, so the tests see it
/// let go.
const LINGER: Duration = Duration::from_millis(100);

/// A relink's wait for tmux's answer: short, so a stopped server fails
/// it quickly, yet long enough for a loaded machine's tmux to answer the
/// start's attach (300 ms failed one under the suite's load); the command
/// timeout is longer, so the relink's failure, not the reply watchdog, is
/// what a caller meets.
const READY: Duration = Duration::from_secs(1);

/// How long anything here may take.
const WAIT: Duration = Duration::from_secs(10);

/// The small relay binary: the raw path, the only one that lets go.
fn relay() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tmux-engine-relay"))
}

/// A terminal running `cat` on the raw path, its client letting go of
/// its link after [`LINGER`] idle.
async fn cat(dir: &Path) -> Parts {
    let server = opts(dir)
        .raw_relay(Some(relay()))
        .command(sh_c("exec cat", &[]));
    let client = ClientOptions::default()
        .ready_timeout(READY)
        .command_timeout(WAIT);
    let parts = launch(tmux(), server, client, SubscribeOptions::default())
        .await
        .expect("terminal starts");
    assert!(
        parts.client.unlink_when_idle(LINGER),
        "a raw client lets go"
    );
    parts
}

/// Waits until `client` has let go of its link.
async fn let_go(client: &ControlClient) {
    poll("the idle client to let go of its link", WAIT, || async {
        (!client.linked()).then_some(())
    })
    .await;
}

/// Reads the pane's output until it holds `want` `times`; all of it.
async fn read_until(stream: &mut PaneStream, want: &str, times: usize) -> String {
    let mut seen = Vec::new();
    let read = async {
        while String::from_utf8_lossy(&seen).matches(want).count() < times {
            match stream.recv().await.expect("the stream stays open") {
                PaneEvent::Output(bytes) => seen.extend_from_slice(&bytes),
                PaneEvent::Resync(_) => panic!("a resync"),
            }
        }
    };
    tokio::time::timeout(WAIT, read).await.unwrap_or_else(|_| {
        panic!(
            "{want:?} x{times} never came: {:?}",
            String::from_utf8_lossy(&seen)
        )
    });
    String::from_utf8_lossy(&seen).into_owned()
}

/// Types `line` while `client`'s server is stopped: the relink gets no
/// answer and the line fails `UNRESPONSIVE`, and the client is not
/// closed (its server and program live) but unlinked, so the next line
/// tries again.
async fn unanswered(client: &ControlClient, pane: PaneId, line: &[u8]) {
    let error = client
        .send_bytes(pane, line)
        .await
        .expect_err("a stopped server does not answer the relink");
    assert_eq!(error.code(), ErrorCode::Unresponsive, "{error}");
    assert_eq!(client.closed_reason(), None);
    assert!(!client.linked(), "the client stays unlinked");
}

/// Checks that `client`'s server is gone for it: a line fails
/// `SERVER_GONE`, and the client closes with its reason.
async fn closed_gone(client: &ControlClient, pane: PaneId) {
    let error = client
        .send_bytes(pane, b"never\r")
        .await
        .expect_err("no server");
    assert_eq!(error.code(), ErrorCode::ServerGone, "{error}");
    let reason = tokio::time::timeout(WAIT, client.closed())
        .await
        .expect("the client closes once its server is gone");
    assert!(!reason.is_empty(), "closed with its reason");
}

#[tokio::test]
async fn a_relink_a_stopped_server_does_not_answer_fails_unresponsive_and_the_client_lives() {
    live(async |dir| {
        let Parts {
            server,
            client,
            pane,
            mut output,
            ..
        } = cat(dir.path()).await;
        let_go(&client).await;
        {
            let _stopped = Stopped::new(server.pid());
            unanswered(&client, pane, b"typed-once\r").await;
            let again = client
                .command(&TmuxCommand::new("display-message").flag("-p").arg("x"))
                .await
                .expect_err("still stopped");
            assert_eq!(again.code(), ErrorCode::Unresponsive, "{again}");
            assert_eq!(client.closed_reason(), None);
        }
        // Continued: the next line links again and is typed, once (the
        // line that failed never was: the tty's echo and cat's copy).
        client
            .send_bytes(pane, b"typed-once\r")
            .await
            .expect("typed once the server runs again");
        client.send_bytes(pane, b"the-end\r").await.expect("typed");
        let seen = read_until(&mut output, "the-end", 2).await;
        assert_eq!(seen.matches("typed-once").count(), 2, "{seen:?}");
        assert_eq!(client.closed_reason(), None);
        // And it lets go again, as any idle client.
        let_go(&client).await;
        server.kill().await.expect("kill");
    })
    .await;
}

/// A server killed while its client is unlinked: the relink finds it
/// gone and closes the client. Killed once a relink went unanswered (it
/// was stopped), it ends the connection left for the next relink to wait
/// on, which closes the client too.
#[tokio::test]
async fn a_server_gone_before_or_during_a_relink_closes_the_client() {
    live(async |dir| {
        for stopped_first in [false, true] {
            let _row = crate::support::Row::new(format!("stopped first: {stopped_first}"));
            let Parts {
                server,
                client,
                pane,
                ..
            } = cat(dir.path()).await;
            let_go(&client).await;
            let stopped = stopped_first.then(|| Stopped::new(server.pid()));
            if stopped.is_some() {
                unanswered(&client, pane, b"never\r").await;
            }
            process::signal(server.pid(), rustix::process::Signal::KILL).expect("SIGKILL");
            drop(stopped);
            poll("the server to be gone", WAIT, || async {
                (!process::is_alive(server.pid())).then_some(())
            })
            .await;
            closed_gone(&client, pane).await;
            server.kill().await.expect("kill cleans up");
        }
    })
    .await;
}

/// An event subscriber made while a relink waits on a stopped server
/// wants the link as much as a line does: once the server continues, its
/// notifications come without waiting for anyone's next command (an
/// `events` follower of an idle terminal would hear nothing).
#[tokio::test]
async fn an_event_subscriber_made_during_an_unanswered_relink_hears_the_server_once_continued() {
    live(async |dir| {
        let terminal = cat(dir.path()).await;
        let (server, client, pane) = (&terminal.server, &terminal.client, terminal.pane);
        let_go(client).await;
        let mut events = {
            let _stopped = Stopped::new(server.pid());
            let typed = client.send_bytes(pane, b"never\r");
            tokio::pin!(typed);
            // Subscribed once the line's relink is under way: its wish for
            // a link falls while one is being made.
            let deadline = tokio::time::Instant::now() + WAIT;
            let events = loop {
                if client.linked() {
                    break client.subscribe_events();
                }
                assert!(tokio::time::Instant::now() < deadline, "no relink started");
                // Polls the line, which queues it and wants the link.
                tokio::select! {
                    result = &mut typed => panic!("answered while stopped: {result:?}"),
                    () = tokio::time::sleep(Duration::from_millis(5)) => {}
                }
            };
            let error = typed.await.expect_err("a stopped server does not answer");
            assert_eq!(error.code(), ErrorCode::Unresponsive, "{error}");
            assert_eq!(client.closed_reason(), None);
            events
        };
        // Continued: a change every attached control client is told of.
        server
            .run(&TmuxCommand::new("rename-window").arg("renamed"))
            .await
            .expect("rename-window");
        let renamed = async {
            loop {
                match events.recv().await {
                    Ok(tmux_engine::control::Notification::WindowRenamed { name, .. }) => {
                        break name;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(closed) => panic!("the events ended: {closed}"),
                }
            }
        };
        let name = tokio::time::timeout(WAIT, renamed)
            .await
            .expect("the subscriber hears the server once it runs again");
        assert_eq!(name, "renamed");
        drop(events);
        terminal.server.kill().await.expect("kill");
    })
    .await;
}
