//! serve's warm pool: the servers waiting in it die with serve (SIGKILL
//! included, and while they start), while the terminals taken from it
//! outlive serve like any.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::{Served, WAIT};
use crate::cli::{Cli, display, server_pid, sockets};
use crate::support::poll;

/// The pids of the live tmux servers under `runtime`.
fn live_servers(runtime: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = sockets(runtime)
        .iter()
        .filter_map(|socket| server_pid(socket))
        .collect();
    pids.sort_unstable();
    pids
}

#[tokio::test]
async fn a_sigkilled_serve_takes_its_waiting_servers_along_and_leaves_its_terminals() {
    let served = Served::start_with(Cli::new(), &[], &[("TMUX_ENGINE_POOL", "2")]).await;
    let runtime = served.cli.runtime();
    // The first spawn starts fresh and fills the pool behind it; the
    // second runs in a pooled server, which is then replaced.
    served.spawn(r#"{"name":"first","shell":"exec cat"}"#).await;
    poll("the pool to fill", WAIT, || async {
        (live_servers(&runtime).len() == 3).then_some(())
    })
    .await;
    served
        .spawn(r#"{"name":"second","shell":"exec cat"}"#)
        .await;
    poll("the pool to refill", WAIT, || async {
        (live_servers(&runtime).len() == 4).then_some(())
    })
    .await;
    tmux_engine::tmux::process::signal(served.pid(), rustix::process::Signal::KILL).unwrap();
    // Only the two terminals' servers stay.
    poll("the waiting servers to exit with serve", WAIT, || async {
        (live_servers(&runtime).len() == 2).then_some(())
    })
    .await;
    let list = served.cli.ok(&["list", "--json"]);
    for name in ["first", "second"] {
        assert!(list.contains(&format!("\"name\":\"{name}\"")), "{list}");
    }
    assert!(
        !list.contains("\"exited\""),
        "a terminal died with serve: {list}"
    );
}

/// The live servers under `runtime` that still wait in a pool: the
/// pool's placeholder id (no terminal's), as `@tmux-engine-id` says.
fn pooled_servers(runtime: &Path) -> Vec<std::path::PathBuf> {
    sockets(runtime)
        .into_iter()
        .filter(|socket| {
            display(socket, "#{@tmux-engine-id}").as_deref() == Some("t-0-0000000000000000")
        })
        .collect()
}

/// Killed while its pool's servers start, serve leaves none of them: a
/// start has a `tmux -C` process that tmux 3.3a keeps, with its server,
/// once its reader is gone with replies still to write (the kernel now
/// kills it with serve), and a hand-over where that process and serve's
/// own link were attached together (now one after the other). Each round
/// kills at another point: once the first server (the spawn's or a pooled
/// one) answers, once two do, once four do. The spawn's own server may
/// stay (a spawn cut short is the next start's to reap).
#[tokio::test]
async fn a_serve_sigkilled_while_its_pool_starts_leaves_none_of_them() {
    for answering in [1, 2, 4] {
        let served = Served::start_with(Cli::new(), &[], &[("TMUX_ENGINE_POOL", "4")]).await;
        let runtime = served.cli.runtime();
        // The spawn finds the pool empty and starts four servers for it
        // beside its own fresh one.
        let spawn = served
            .request(reqwest::Method::POST, "/api/terminals")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(r#"{"name":"only","shell":"exec cat"}"#)
            .send();
        let spawning = tokio::spawn(spawn);
        poll("servers to start", WAIT, || async {
            (live_servers(&runtime).len() >= answering).then_some(())
        })
        .await;
        tmux_engine::tmux::process::signal(served.pid(), rustix::process::Signal::KILL).unwrap();
        let _ = spawning.await;
        let mut left = Vec::new();
        let gone = tokio::time::timeout(WAIT, async {
            loop {
                left = pooled_servers(&runtime);
                if left.is_empty() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            gone.is_ok(),
            "killed once {answering} servers answered: pooled servers still up: {left:?}"
        );
    }
}
