//! Issue 14, items 4, 9 (pings) and 11 (WebSocket hygiene): a session
//! leader `serve` survives PTY viewers leaving; protocol violations close
//! with 1007/1002 and a close frame; a peer that stops answering pings is
//! dropped; a resize flood is coalesced.

use std::time::Duration;

use reqwest::Method;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{Received, Served, WAIT};
use crate::cli::Cli;
use crate::support::{poll, within};

/// `serve ARGS` started through util-linux `setsid`, so it leads its own
/// session as under systemd or a container init: a terminal it opens
/// without `O_NOCTTY` would become its controlling terminal.
async fn start_session_leader(cli: Cli, args: &[&str]) -> Served {
    let mut argv = vec!["serve", "--listen", "127.0.0.1:0"];
    argv.extend_from_slice(args);
    let inner = cli.command(&argv);
    let mut command = tokio::process::Command::new("setsid");
    if rustix::process::geteuid().is_root() {
        // Root could steal the pty back for its client (`TIOCSCTTY` with
        // CAP_SYS_ADMIN), hiding the hang-up; a service or a container
        // without that capability cannot, so neither may this serve.
        command.args(["setpriv", "--bounding-set=-sys_admin", "--"]);
    }
    command.arg(inner.get_program()).args(inner.get_args());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    // Not a group leader when spawned, so `setsid` execs in place (no
    // fork): the child is serve itself.
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::time::timeout(WAIT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("serve printed no URL")
        .unwrap();
    let url = line.trim();
    let (base, token) = url
        .split_once("/?token=")
        .unwrap_or((url.trim_end_matches('/'), ""));
    Served {
        child,
        cli,
        base: base.to_owned(),
        token: token.to_owned(),
        http: reqwest::Client::new(),
    }
}

/// The session id of `pid` (field 6 of `/proc/PID/stat`).
fn session_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; fields count from its `)`.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(3).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_session_leader_serve_outlives_its_pty_viewers() {
    within(async {
        let cli = Cli::new();
        let file = cli.runtime().with_file_name("tokens");
        std::fs::write(
            &file,
            "ownerownerownerow tester\nlooklooklooklookl tester read-only\n",
        )
        .unwrap();
        let mut served =
            start_session_leader(cli, &["--token-file", file.to_str().unwrap()]).await;
        let pid = served.pid();
        assert_eq!(session_of(pid), pid, "serve must lead its session");
        served.token = "ownerownerownerow".to_owned();
        served.spawn(r#"{"name":"p","command":["sh"]}"#).await;
        for (round, token) in ["ownerownerownerow", "looklooklooklookl"]
            .iter()
            .cycle()
            .take(6)
            .enumerate()
        {
            served.token = (*token).to_owned();
            let mut ws = served.ws("p", "transport=pty", None).await;
            let hello = ws.text().await;
            assert_eq!(hello["transport"], "pty", "round {round}");
            // Drawn: the client is attached on the pty before it leaves.
            let mut seen = Received::default();
            if hello["read_only"] == false {
                ws.input(format!("echo round-$((40+{round}))\r").as_bytes())
                    .await;
                seen.until(&mut ws, &format!("round-{}", 40 + round)).await;
            } else {
                let first = ws.next().await;
                assert!(
                    matches!(first, super::Frame::Binary(_)),
                    "round {round}: the read-only client drew nothing: {first:?}"
                );
            }
            ws.close().await;
            // The viewer's client is gone (its pty hung up) and serve still
            // answers: the hang-up reached no controlling terminal of its.
            served.token = "ownerownerownerow".to_owned();
            let (status, _) = served.get("/api/terminals/p").await;
            assert_eq!(status, 200, "round {round}: serve stopped answering");
        }
        served.token = "ownerownerownerow".to_owned();
        // A last viewer's hang-up has had every chance to arrive: the
        // terminal has gone through one more attach and detach.
        let mut ws = served.ws("p", "transport=pty", None).await;
        ws.text().await;
        ws.close().await;
        poll("the last pty client to leave", WAIT, || async {
            let (status, _) = served.get("/api/terminals/p").await;
            (status == 200).then_some(())
        })
        .await;
        assert!(
            served.child.try_wait().unwrap().is_none(),
            "serve exited after a pty viewer left"
        );
        served
            .call(served.request(Method::DELETE, "/api/terminals/p"))
            .await;
    })
    .await;
}
