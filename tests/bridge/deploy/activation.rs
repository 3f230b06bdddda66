//! serve under systemd's protocol, with systemd's own
//! `systemd-socket-activate` passing the socket (`LISTEN_FDS`, TCP and
//! Unix) and a `NOTIFY_SOCKET` listener written here: `READY=1` once it
//! serves, `WATCHDOG=1` every half `WATCHDOG_USEC`, `STOPPING=1` when it
//! drains. And the units `service install` writes, verified by
//! `systemd-analyze verify`.

use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};

use super::exchange;
use crate::bridge::WAIT;
use crate::cli::Cli;
use crate::support::within;

/// `systemd-socket-activate`, or a failure naming the package (it is
/// systemd's, on every Debian with systemd; `.ci/run` needs nothing more).
fn activator() -> std::path::PathBuf {
    which("systemd-socket-activate").expect("systemd-socket-activate (package systemd) is missing")
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(name))
        .find(|path| path.is_file())
}

/// `systemd-socket-activate -l LISTEN` running `serve` on `cli`'s
/// directories, the variables it needs passed through (`-E`: the
/// activator gives its program no other environment).
fn activated(cli: &Cli, listen: &str, extra: &[(&str, String)]) -> tokio::process::Child {
    let serve = cli.command(&["serve", "--allow-host", "localhost"]);
    let mut command = std::process::Command::new(activator());
    command.arg("-l").arg(listen);
    let mut pass = |key: &str, value: &std::ffi::OsStr| {
        let mut word = std::ffi::OsString::from(format!("{key}="));
        word.push(value);
        command.arg("-E").arg(word);
    };
    for (key, value) in serve.get_envs() {
        if let Some(value) = value {
            pass(key.to_str().unwrap(), value);
        }
    }
    for key in ["PATH", "HOME", "USER"] {
        if let Some(value) = std::env::var_os(key) {
            pass(key, &value);
        }
    }
    for (key, value) in extra {
        pass(key, std::ffi::OsStr::new(value));
    }
    command
        .arg(serve.get_program())
        .args(serve.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The notifications `socket` receives until one contains `needle`.
async fn until(socket: &tokio::net::UnixDatagram, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut buffer = vec![0u8; 4096];
    tokio::time::timeout(WAIT, async {
        loop {
            let n = socket.recv(&mut buffer).await.unwrap();
            let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
            let done = text.contains(needle);
            seen.push(text);
            if done {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} among {seen:?}"));
    seen
}

/// Connects until the activator listens (it binds before it runs serve).
async fn tcp(addr: &str) -> TcpStream {
    tokio::time::timeout(WAIT, async {
        loop {
            match TcpStream::connect(addr).await {
                Ok(stream) => return stream,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("the activator never listened")
}

#[tokio::test]
async fn serve_takes_a_passed_tcp_socket_says_ready_and_pings_the_watchdog() {
    let _ = activator();
    within(async {
        let cli = Cli::new();
        let notify_path = cli.state().with_file_name("notify.sock");
        let notify = tokio::net::UnixDatagram::from_std({
            let socket = UnixDatagram::bind(&notify_path).unwrap();
            socket.set_nonblocking(true).unwrap();
            socket
        })
        .unwrap();
        // A free port, released for the activator to bind.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut child = activated(
            &cli,
            &addr,
            &[
                ("NOTIFY_SOCKET", notify_path.display().to_string()),
                ("WATCHDOG_USEC", "200000".to_owned()),
                (
                    "TMUX_ENGINE_TOKEN",
                    "activated-token-0123456789abcdef".to_owned(),
                ),
            ],
        );
        // The first connection waits in the backlog while serve starts.
        let reply = exchange(tcp(&addr).await, "GET", &addr, "/readyz", "", None).await;
        assert_eq!((reply.status, reply.body.as_str()), (200, "ready\n"));
        let ready = until(&notify, "READY=1").await;
        let last = ready.last().unwrap();
        assert!(
            last.contains(&format!("MAINPID={}", child.id().unwrap())),
            "{last}"
        );
        assert!(
            last.contains(&format!("STATUS=serving http://{addr}")),
            "{last}"
        );
        // WATCHDOG_USEC=200 ms: a ping every 100 ms; two of them.
        until(&notify, "WATCHDOG=1").await;
        until(&notify, "WATCHDOG=1").await;
        // The API on the passed socket, with the Host it was bound to.
        let stream = tcp(&addr).await;
        let reply = exchange(
            stream,
            "GET",
            &addr,
            "/api/terminals",
            "activated-token-0123456789abcdef",
            None,
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let pid = rustix::process::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
        rustix::process::kill_process(pid.unwrap(), rustix::process::Signal::TERM).unwrap();
        until(&notify, "STOPPING=1").await;
        let status = tokio::time::timeout(WAIT, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}");
    })
    .await;
}

#[tokio::test]
async fn serve_takes_a_passed_unix_socket() {
    let _ = activator();
    within(async {
        let cli = Cli::new();
        let path = cli.state().with_file_name("activated.sock");
        let mut child = activated(
            &cli,
            path.to_str().unwrap(),
            &[(
                "TMUX_ENGINE_TOKEN",
                "activated-token-0123456789abcdef".to_owned(),
            )],
        );
        let stream = tokio::time::timeout(WAIT, async {
            loop {
                match UnixStream::connect(&path).await {
                    Ok(stream) => return stream,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        })
        .await
        .expect("the activator never listened");
        let reply = exchange(
            stream,
            "POST",
            "localhost",
            "/api/terminals",
            "activated-token-0123456789abcdef",
            Some(r#"{"name":"via-socket","command":["sh"]}"#),
        )
        .await;
        assert_eq!(reply.status, 201, "{reply:?}");
        let pid = rustix::process::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
        rustix::process::kill_process(pid.unwrap(), rustix::process::Signal::TERM).unwrap();
        let status = tokio::time::timeout(WAIT, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}");
        // The manager's socket stays: serve did not make it.
        assert!(path.exists());
        cli.ok(&["kill", "via-socket"]);
    })
    .await;
}

/// `service install --unit-dir` writes the service and its socket, and
/// `systemd-analyze verify` (systemd's own parser) finds nothing in either.
#[test]
fn service_install_writes_a_socket_unit_that_systemd_analyze_accepts() {
    let cli = Cli::new();
    let dir = cli.state().with_file_name("units");
    let listen = cli.state().with_file_name("units.sock");
    let listen = format!("unix:{}", listen.display());
    let out = cli.ok(&[
        "service",
        "install",
        "--unit-dir",
        dir.to_str().unwrap(),
        "--",
        "--listen",
        &listen,
        "--allow-host",
        "example.com",
    ]);
    assert!(out.contains("tmux-engine.socket"), "{out}");
    let service = std::fs::read_to_string(dir.join("tmux-engine.service")).unwrap();
    let socket = std::fs::read_to_string(dir.join("tmux-engine.socket")).unwrap();
    assert!(!service.contains("--listen"), "{service}");
    assert!(service.contains("Type=notify"), "{service}");
    assert!(
        socket.contains(&format!("ListenStream={}\n", &listen["unix:".len()..])),
        "{socket}"
    );
    let analyze = which("systemd-analyze").expect("systemd-analyze (package systemd) is missing");
    let output = std::process::Command::new(analyze)
        .arg("verify")
        .arg("--man=no")
        .arg(dir.join("tmux-engine.socket"))
        .arg(dir.join("tmux-engine.service"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success() && said.trim().is_empty(), "{said}");
}
