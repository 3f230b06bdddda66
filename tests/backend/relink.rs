//! A pane's output lost to this process (its relay killed) while tmux
//! does not answer (its server stopped) is not given up on: the watcher's
//! relink asks again whether the pane lives until tmux answers, then links
//! a new relay, and output typed after reaches the stream.

use tmux_engine::ErrorCode;
use tmux_engine::registry::WaitCondition;

use super::idle_link::server_pid;
use super::*;
use crate::support::relays;

/// How long tmux may take to answer in the tests of a stalled server:
/// short, so a stopped server is told quickly (the default is 10 s), yet
/// long enough for a loaded machine's tmux to answer every other command.
pub(crate) const STALL: Duration = Duration::from_secs(1);

/// Keeps a terminal's control link (a stall is then met by the reply
/// watchdog, not a relink's) and calls tmux unresponsive past [`STALL`].
pub(super) fn stalling(config: TmuxConfig) -> TmuxConfig {
    config.idle_unlink(None).control_timeout(STALL)
}

/// Waits, while the terminal's server is stopped, until a command of its
/// control client has failed `UNRESPONSIVE` twice in a row. The client
/// answers in order, and the second is queued a whole [`STALL`] after
/// what the watcher learnt just before (the relay's end, or the pane's),
/// behind the question the watcher asks tmux the moment it learns it: by
/// then that question has failed too.
pub(super) async fn unanswered_twice(registry: &Registry, owner: &OwnerId, name: &str) {
    for _ in 0..2 {
        let error = registry
            .owner(owner)
            .screen(name)
            .await
            .expect_err("a stopped server does not answer");
        assert_eq!(error.code(), ErrorCode::Unresponsive, "{error}");
    }
}

/// SIGKILLs `pid`.
fn kill(pid: u32) {
    tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL).expect("SIGKILL");
}

#[tokio::test]
async fn a_stream_lost_while_tmux_stalls_is_linked_again_once_it_answers() {
    super::with_cat(stalling, async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        let relay = poll("the pane's relay", WAIT, || async {
            let found = relays(rt);
            (found.len() == 1).then(|| found[0])
        })
        .await;
        {
            let _stopped = crate::support::Stopped::new(server_pid(rt));
            // The link ends: the stream is lost, and whether the pane
            // still lives is asked of a server that does not answer.
            kill(relay);
            unanswered_twice(registry, owner, "cat").await;
            let shown = owned().show("cat").await.unwrap();
            assert_eq!(shown.status, TerminalStatus::Running);
        }
        // Answered again: a new relay carries what is typed from now on
        // (bytes typed before it is linked reach no stream, so typed until
        // one is seen; a write a loaded machine's tmux answers past
        // `STALL` is one more try, not a failure).
        poll(
            "output typed after the stall to reach the stream",
            WAIT,
            || async {
                owned()
                    .write("cat", bytes::Bytes::from_static(b"relinked\r"))
                    .await
                    .ok()?;
                let seen = WaitCondition::Text("relinked".to_owned());
                owned()
                    .wait("cat", &seen, Duration::from_millis(200))
                    .await
                    .ok()
            },
        )
        .await;
        let new = relays(rt);
        assert!(new.len() == 1 && new[0] != relay, "{new:?}");
    })
    .await;
}
