//! An idle terminal lets go of its control connection and links again on
//! its next use: every verb works across it, racing callers share one
//! relink, a server killed meanwhile is reported gone, and one stopped
//! meanwhile unresponsive, never gone.

use tmux_engine::ErrorCode;
use tmux_engine::registry::{Liveness, ReadRequest};
use tmux_engine::vocab::Size;

use super::*;

/// How long these terminals stay linked once idle: short, so the tests
/// see them let go.
const LINGER: Duration = Duration::from_millis(150);

/// Lets a terminal read through its relay (the only one that can) go of
/// its control connection after [`LINGER`].
fn lingering(config: TmuxConfig) -> TmuxConfig {
    config.idle_unlink(Some(LINGER))
}

/// The clients attached to the one server under `runtime`, as tmux lists
/// them (this query's own client is not attached).
fn clients(runtime: &Path) -> usize {
    tmux_at(runtime, &["list-clients", "-F", "#{client_name}"])
        .lines()
        .count()
}

/// Waits until the terminal's server has no client left: let go.
async fn let_go(runtime: &Path) {
    poll("the idle terminal to let go of its link", WAIT, || async {
        (clients(runtime) == 0).then_some(())
    })
    .await;
}

/// The pid of the one server under `runtime`.
pub(super) fn server_pid(runtime: &Path) -> u32 {
    tmux_at(runtime, &["display-message", "-p", "#{pid}"])
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `cat`'s screen shows `word` twice: the tty's echo of the
/// typed line and `cat`'s copy of it.
async fn echoed(registry: &Registry, owner: &OwnerId, word: &str) {
    poll(&format!("{word}'s echo"), WAIT, || async {
        let screen = registry.owner(owner).screen("cat").await.ok()?;
        (screen.text().matches(word).count() == 2).then_some(())
    })
    .await;
}

/// Runs `body` on a [`lingering`] registry with one terminal, `cat`
/// (see [`super::with_cat`]).
async fn with_cat(body: impl AsyncFnOnce(&Registry, &OwnerId, &Path)) {
    super::with_cat(lingering, body).await;
}

#[tokio::test]
async fn an_idle_terminal_lets_go_and_every_verb_links_again() {
    with_cat(async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        let_go(rt).await;

        // A send: typed, echoed back through the relay.
        let request = SendRequest {
            text: bytes::Bytes::from_static(b"first"),
            submit: true,
            wait: WaitFor::None,
            timeout: Some(WAIT),
            history: true,
            keys: Vec::new(),
        };
        owned()
            .send("cat", request)
            .await
            .unwrap()
            .result()
            .await
            .unwrap();
        echoed(registry, owner, "first").await;
        let_go(rt).await;

        // A write, then a read of tmux's scrollback.
        owned()
            .write("cat", bytes::Bytes::from_static(b"second\r"))
            .await
            .unwrap();
        let_go(rt).await;
        let request = ReadRequest {
            offset: 0,
            count: None,
        };
        let page = owned().read("cat", request).await.unwrap();
        assert!(page.lines.iter().any(|line| line == "second"), "{page:?}");
        let_go(rt).await;

        // A resize, seen by the next look.
        owned()
            .resize("cat", Size::new(91, 27).unwrap())
            .await
            .unwrap();
        let_go(rt).await;
        let screen = owned().screen("cat").await.unwrap();
        assert_eq!((screen.size().cols, screen.size().rows), (91, 27));
        let_go(rt).await;

        // Still running, and a kill ends it (nothing is left: `with_cat`).
        let shown = owned().show("cat").await.unwrap();
        assert_eq!(shown.status, TerminalStatus::Running);
        let_go(rt).await;
        assert!(owned().kill("cat").await.unwrap());
    })
    .await;
}

/// A viewer's keystroke is queued with its answer to come
/// (`write_queued`, the bridge's way): queued while the link is let go,
/// it goes out once linked again, and its answer comes.
#[tokio::test]
async fn a_viewers_queued_keystroke_links_again() {
    with_cat(async |registry, owner, rt| {
        let attached = registry.owner(owner).attach("cat").await.unwrap();
        let_go(rt).await;
        let answer = attached
            .terminal
            .write_queued(bytes::Bytes::from_static(b"queued\r"))
            .await
            .unwrap();
        answer.await.unwrap();
        echoed(registry, owner, "queued").await;
        // Let go again once the keystroke is answered: it holds nothing.
        let_go(rt).await;
    })
    .await;
}

#[tokio::test]
async fn a_server_killed_while_unlinked_is_reported_gone() {
    with_cat(async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        let_go(rt).await;
        tmux_engine::tmux::process::signal(server_pid(rt), rustix::process::Signal::KILL).unwrap();
        // Nobody asks anything: the pane's end and the relay's are what
        // tell it.
        let gone = poll("the terminal to be reported gone", WAIT, || async {
            let shown = owned().show("cat").await.unwrap();
            matches!(shown.status, TerminalStatus::Gone { .. }).then_some(shown)
        })
        .await;
        assert!(
            gone.status.to_string().contains("server gone"),
            "{}",
            gone.status
        );
    })
    .await;
}

/// A server stopped while its terminal is unlinked: the relink gets no
/// answer (the client's ready timeout), the write that wanted it fails
/// `UNRESPONSIVE` unwritten, and the terminal is unresponsive, never gone
/// (a restart policy would start a second server for it); continued, it
/// links again at the next use, and a line typed then arrives once.
#[tokio::test]
async fn a_server_stopped_while_unlinked_is_unresponsive_not_gone() {
    // A short control timeout: the relink and the probe fail within it.
    let stalling = |config| lingering(config).control_timeout(super::relink::STALL);
    super::with_cat(stalling, async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        let_go(rt).await;
        {
            let _stopped = crate::support::Stopped::new(server_pid(rt));
            let error = owned()
                .write("cat", bytes::Bytes::from_static(b"unwritten\r"))
                .await
                .expect_err("a stopped server does not answer");
            assert_eq!(error.code(), ErrorCode::Unresponsive, "{error}");
            let report = owned().probe("cat").await.unwrap();
            assert!(
                matches!(report.observed, Liveness::Unresponsive { .. }),
                "{:?}",
                report.observed
            );
            let shown = owned().show("cat").await.unwrap();
            assert_eq!(shown.status, TerminalStatus::Running);
        }
        // Continued, the next use links again, over the connection the
        // stall left open: tmux identifies it, then answers the attach and
        // the command, all within `STALL`, which a loaded machine can miss
        // (a write failed so once at load 14). A look types nothing, so it
        // is asked again until one is answered; the line is typed after.
        poll("a look after the server is continued", WAIT, || async {
            owned().screen("cat").await.ok()
        })
        .await;
        owned()
            .write("cat", bytes::Bytes::from_static(b"typed\r"))
            .await
            .unwrap();
        echoed(registry, owner, "typed").await;
        let screen = owned().screen("cat").await.unwrap();
        assert!(!screen.text().contains("unwritten"), "{}", screen.text());
        let shown = owned().show("cat").await.unwrap();
        assert_eq!(shown.status, TerminalStatus::Running);
    })
    .await;
}

#[tokio::test]
async fn racing_callers_share_one_relink() {
    with_cat(async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        for round in 0..3 {
            let_go(rt).await;
            // Looks and writes at once: every one answered, in order, over
            // the one connection the first of them brought back.
            let looks = (0..6).map(|_| owned().screen("cat"));
            let writes =
                (0..6).map(|i| owned().write("cat", bytes::Bytes::from(format!("r{round}w{i}\r"))));
            let (looks, writes) = tokio::join!(
                futures_util::future::join_all(looks),
                futures_util::future::join_all(writes)
            );
            for look in looks {
                look.unwrap();
            }
            for write in writes {
                write.unwrap();
            }
            assert!(clients(rt) <= 1, "more than one relink");
            poll("the writes' echoes", WAIT, || async {
                let screen = owned().screen("cat").await.ok()?;
                let text = screen.text();
                (0..6)
                    .all(|i| text.contains(&format!("r{round}w{i}")))
                    .then_some(())
            })
            .await;
        }
    })
    .await;
}
