//! serve's warm pool: the servers waiting in it die with serve (SIGKILL
//! included), while the terminals taken from it outlive serve like any.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::{Served, WAIT};
use crate::cli::{Cli, server_pid, sockets};
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
