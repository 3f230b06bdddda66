//! serve on the `tmux -C` process fallback (`TMUX_ENGINE_CONTROL_PROCESS=1`:
//! what a tmux that refuses the direct link gets too): the control process
//! of a terminal serve attached to (one it did not start: a terminal it
//! starts keeps the process that started it) lets go once idle, and its
//! next use starts another that links again the same way, with the typed
//! text arriving once.

use super::{Served, WAIT};
use crate::cli::{Cli, sockets};
use crate::support::poll;

/// The control clients attached to the server on `socket`, as `pid` list
/// (this query's own client is not attached).
fn control_clients(socket: &std::path::Path) -> Vec<u32> {
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

#[tokio::test]
async fn an_idle_tmux_c_process_lets_go_and_another_links_again() {
    // Started by the command line, which exits: serve attaches to it.
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "t", "--shell", "exec cat"]);
    let served = Served::start_with(
        cli,
        &[],
        &[
            ("TMUX_ENGINE_CONTROL_PROCESS", "1"),
            ("TMUX_ENGINE_POOL", "0"),
        ],
    )
    .await;
    let (status, screen) = served.get("/api/terminals/t/screen").await;
    assert_eq!(status, 200, "{screen}");
    let socket = sockets(&served.cli.runtime())
        .pop()
        .expect("the terminal's socket");
    let first = control_clients(&socket);
    assert_eq!(first.len(), 1, "one control client: {first:?}");
    // A linked client's pid would be serve's own.
    assert_ne!(first[0], served.pid(), "a tmux -C process");
    // Idle past the linger (`TmuxConfig::IDLE_UNLINK`): let go, and the
    // process with it.
    poll("the idle client to let go", WAIT, || async {
        control_clients(&socket).is_empty().then_some(())
    })
    .await;
    poll("its process to exit", WAIT, || async {
        (!tmux_engine::tmux::process::is_alive(first[0])).then_some(())
    })
    .await;
    let (status, answer) = served
        .post(
            "/api/terminals/t/send",
            r#"{"text":"again-once","submit":true}"#,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    // cat's copy and the tty's echo: twice, not more.
    poll("the line's echo", WAIT, || async {
        let (_, screen) = served.get("/api/terminals/t/screen").await;
        (screen.to_string().matches("again-once").count() == 2).then_some(())
    })
    .await;
    let again = control_clients(&socket);
    assert_eq!(again.len(), 1, "linked again: {again:?}");
    assert_ne!(again, first, "another process");
    assert_ne!(again[0], served.pid(), "a tmux -C process again");
    let (_, screen) = served.get("/api/terminals/t/screen").await;
    assert_eq!(
        screen.to_string().matches("again-once").count(),
        2,
        "{screen}"
    );
    served
        .call(served.request(reqwest::Method::DELETE, "/api/terminals/t"))
        .await;
}
