//! A tmux terminal's `listing_stamp`: what `list` takes on trust instead
//! of reading a running terminal's status, pid and output path per list.
//! It must move on with every change of them, or a list would show a
//! terminal as it was.

use tmux_engine::registry::{BackendTerminal, SpawnRequest, TerminalId};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::support::tmux_registry::Cleanup;
use crate::support::within;

/// The stamp, then what it vouches for.
type Shown = (
    Option<u64>,
    TerminalStatus,
    Option<u32>,
    Option<&'static str>,
);

/// What `list` shows of the terminal from the backend, read after its
/// stamp, as the registry reads them.
fn shown(terminal: &dyn BackendTerminal) -> Shown {
    let stamp = terminal.listing_stamp();
    (
        stamp,
        terminal.status(),
        terminal.pid(),
        terminal.output_path(),
    )
}

/// Once the program behind the exit handshake's wrapper is found, the
/// stamp holds while nothing changes; it is withdrawn when the program
/// exits, and moves on when the pane is respawned, whose new program it
/// vouches for only once that one is found.
#[tokio::test]
async fn the_listing_stamp_moves_on_with_an_exit_and_a_respawn() {
    within(async {
        let dir = TempDir::new().unwrap();
        let _cleanup = Cleanup(runtime(dir.path()));
        let backend = backend(dir.path());
        let terminal = backend
            .spawn(SpawnRequest {
                id: TerminalId::parse("t-1-0000000000000001").unwrap(),
                owner: OwnerId::new("me").unwrap(),
                spec: sh("read line; exit 4"),
                cancel: CancellationToken::new(),
                restore: None,
            })
            .await
            .unwrap();
        // Polled: the wrapper forks its program after the pane starts.
        let (stamp, status, pid, path) = poll("the program found", WAIT, || async {
            let shown = shown(&*terminal);
            shown.0.is_some().then_some(shown)
        })
        .await;
        assert!(status.is_running());
        // Unchanged: the same word, for the same answers.
        assert_eq!(shown(&*terminal), (stamp, status.clone(), pid, path));

        let mut watch = terminal.watch_status();
        terminal
            .write(bytes::Bytes::from_static(b"\n"))
            .await
            .unwrap();
        let exited = watch.wait_for(|s| !s.is_running()).await.unwrap().clone();
        assert_eq!(
            exited,
            TerminalStatus::Exited {
                exit: ExitStatus::Code(4)
            }
        );
        assert_ne!(
            terminal.listing_stamp(),
            stamp,
            "the exit did not move the stamp"
        );
        // An ended pane's pid is looked for each time: never vouched for,
        // even once a look found something.
        let _ = terminal.pid();
        assert_eq!(terminal.listing_stamp(), None, "an ended pane vouched for");

        terminal.respawn().await.unwrap();
        watch.wait_for(TerminalStatus::is_running).await.unwrap();
        let (again, status, new_pid, _) = poll("the new program found", WAIT, || async {
            let shown = shown(&*terminal);
            shown.0.is_some().then_some(shown)
        })
        .await;
        assert!(status.is_running());
        assert_ne!(new_pid, pid, "a respawned program has a new pid");
        assert_ne!(again, stamp, "the respawn did not move the stamp");
        terminal
            .close(tmux_engine::registry::CloseReason::Kill)
            .await
            .unwrap();
    })
    .await;
}
