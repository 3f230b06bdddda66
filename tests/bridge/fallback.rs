//! serve on the `tmux -C` process fallback (`TMUX_ENGINE_CONTROL_PROCESS=1`:
//! what a tmux that refuses the direct link gets too): a terminal's control
//! process, whether serve started the terminal or attached to one the
//! command line started, lets go once idle, and its next use starts
//! another that links again the same way, with the typed text arriving
//! once.

use std::path::{Path, PathBuf};

use super::{Served, WAIT};
use crate::cli::{Cli, display, sockets};
use crate::support::poll;

/// The control clients attached to the server on `socket`, as `pid` list
/// (this query's own client is not attached).
fn control_clients(socket: &Path) -> Vec<u32> {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["list-clients", "-F", "#{client_control_mode} #{client_pid}"])
        .output()
        .expect("running tmux");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("1 ")?.parse().ok())
        .collect()
}

/// The socket of the server whose pane is the one terminal `name` of
/// `served` runs (its `pid` in the API is the program's, under the pane).
async fn socket_of(served: &Served, name: &str) -> PathBuf {
    let (status, shown) = served.get(&format!("/api/terminals/{name}")).await;
    assert_eq!(status, 200, "{shown}");
    let id = shown["id"].as_str().expect("an id").to_owned();
    sockets(&served.cli.runtime())
        .into_iter()
        .find(|socket| display(socket, "#{@tmux-engine-id}").as_deref() == Some(id.as_str()))
        .unwrap_or_else(|| panic!("no server of {name} ({id})"))
}

/// `name`'s control clients while it is in use: a look at its screen
/// links it, then the clients are listed, again until one is seen (on a
/// loaded machine, a pause of `LINGER` between the two lets it go).
async fn linked_clients(served: &Served, name: &str, socket: &Path) -> Vec<u32> {
    let screen_path = format!("/api/terminals/{name}/screen");
    poll(&format!("{name}'s control client"), WAIT, || async {
        let (status, screen) = served.get(&screen_path).await;
        assert_eq!(status, 200, "{screen}");
        Some(control_clients(socket)).filter(|clients| !clients.is_empty())
    })
    .await
}

/// How long serve's idle terminals keep their link here (`--idle-unlink`):
/// a second, not the default 10, which is what the test would wait out.
const LINGER: &str = "1";

/// `name`'s control client is a `tmux -C` process that lets go once idle,
/// and a send starts another, its line typed once.
async fn lets_go_and_links_again(served: &Served, name: &str) {
    let socket = socket_of(served, name).await;
    let first = linked_clients(served, name, &socket).await;
    assert_eq!(first.len(), 1, "{name}: one control client: {first:?}");
    // A linked client's pid would be serve's own.
    assert_ne!(first[0], served.pid(), "{name}: a tmux -C process");
    // Idle past the linger: let go, and the process with it.
    poll(&format!("{name}'s idle client to let go"), WAIT, || async {
        control_clients(&socket).is_empty().then_some(())
    })
    .await;
    poll(&format!("{name}'s process to exit"), WAIT, || async {
        (!tmux_engine::tmux::process::is_alive(first[0])).then_some(())
    })
    .await;
    let word = format!("again-{name}");
    let (status, answer) = served
        .post(
            &format!("/api/terminals/{name}/send"),
            &format!(r#"{{"text":"{word}","submit":true}}"#),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    // cat's copy and the tty's echo: twice, not more.
    let screen_path = format!("/api/terminals/{name}/screen");
    poll(&format!("{word}'s echo"), WAIT, || async {
        let (_, screen) = served.get(&screen_path).await;
        (screen.to_string().matches(&word).count() == 2).then_some(())
    })
    .await;
    let again = linked_clients(served, name, &socket).await;
    assert_eq!(again.len(), 1, "{name}: linked again: {again:?}");
    assert_ne!(again, first, "{name}: another process");
    assert_ne!(again[0], served.pid(), "{name}: a tmux -C process again");
    let (_, screen) = served.get(&screen_path).await;
    assert_eq!(screen.to_string().matches(&word).count(), 2, "{screen}");
}

#[tokio::test]
async fn an_idle_tmux_c_process_lets_go_and_another_links_again() {
    // Started by the command line, which exits: serve attaches to it.
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "attached", "--shell", "exec cat"]);
    let served = Served::start_with(
        cli,
        &["--idle-unlink", LINGER],
        &[
            ("TMUX_ENGINE_CONTROL_PROCESS", "1"),
            ("TMUX_ENGINE_POOL", "0"),
        ],
    )
    .await;
    let (status, screen) = served.get("/api/terminals/attached/screen").await;
    assert_eq!(status, 200, "{screen}");
    served
        .spawn(r#"{"name":"started","shell":"exec cat"}"#)
        .await;
    // One after the other would be two lingers: at once.
    tokio::join!(
        lets_go_and_links_again(&served, "attached"),
        lets_go_and_links_again(&served, "started"),
    );
    for name in ["attached", "started"] {
        served
            .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{name}")))
            .await;
    }
}
