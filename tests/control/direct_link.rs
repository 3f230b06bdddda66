//! The control client linked to a real tmux server's socket with no
//! `tmux -C` process (`tmux::client_protocol`): it attaches, pipelines,
//! types, takes output, keeps flow control, leaves the server on detach
//! and on drop, meets a dead server with the same errors as the process
//! did, never starts a server, and falls back to `tmux -C` when a server
//! refuses the link.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use tmux_engine::ErrorCode;
use tmux_engine::control::client::{ClientOptions, ControlClient, PaneStream, SubscribeOptions};
use tmux_engine::tmux::{Server, ServerHandle, TmuxCommand, process};
use tmux_engine::vocab::PaneId;

use crate::support::{live, opts, poll, start_server, tmux};

fn cmd(name: &'static str) -> TmuxCommand {
    TmuxCommand::new(name)
}

async fn cat_server(dir: &Path) -> Server {
    let mut o = opts(dir);
    o.command = vec!["cat".into()];
    start_server(o).await
}

/// `#{client_pid} #{client_flags}` of every client of the server on `socket`.
fn clients(socket: &Path) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["list-clients", "-F", "#{client_pid} #{client_flags}"])
        .output()
        .expect("running tmux list-clients");
    assert!(out.status.success(), "the server is gone: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until the server on `socket` lists no client.
async fn no_clients(socket: &Path) {
    poll(
        "the server to drop the client",
        Duration::from_secs(10),
        || async { clients(socket).is_empty().then_some(()) },
    )
    .await;
}

/// This process's children named `tmux` (a `tmux -C` would be one).
fn tmux_children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) && comm.ends_with("(tmux") {
            found.push(pid);
        }
    }
    found
}

async fn read_until(stream: &mut PaneStream, want: &[u8]) {
    let mut seen = Vec::new();
    while !seen.windows(want.len()).any(|w| w == want) {
        match stream.recv().await {
            Some(tmux_engine::control::client::PaneEvent::Output(bytes)) => {
                seen.extend_from_slice(&bytes);
            }
            Some(_) => {}
            None => panic!("the stream ended before {want:?}; saw {seen:?}"),
        }
    }
}

#[tokio::test]
async fn a_linked_client_attaches_works_and_leaves_with_no_process() {
    live(async |dir| {
        let server = cat_server(dir.path()).await;
        let pane = PaneId(0);
        let (client, mut streams) = ControlClient::attach(
            server.handle(),
            ClientOptions::default(),
            &[(pane, SubscribeOptions::default())],
        )
        .await
        .expect("attached");
        assert_eq!(client.pid(), None, "no tmux -C process");
        assert!(tmux_children().is_empty(), "{:?}", tmux_children());
        // tmux sees a UTF-8 control client with pause-after (flow control).
        let listed = clients(server.socket());
        assert!(
            listed.starts_with(&format!("{} ", std::process::id())),
            "{listed}"
        );
        for flag in ["control-mode", "pause-after=5", "UTF-8"] {
            assert!(listed.contains(flag), "{flag} in {listed}");
        }
        // Pipelined replies, each its own, and a failing one in between.
        let calls = (0..50).map(|i| {
            let client = client.clone();
            async move {
                let line = cmd("display-message").flag("-p").arg(format!("r{i}"));
                client.command(&line).await.expect("reply").text()
            }
        });
        let replies = futures_util::future::join_all(calls).await;
        assert_eq!(
            replies,
            (0..50).map(|i| format!("r{i}")).collect::<Vec<_>>()
        );
        let bad = client
            .command(&cmd("has-session").target("=nosuch"))
            .await
            .expect_err("no such session");
        assert_eq!(bad.code(), ErrorCode::CommandFailed);
        // Typing reaches the pane; its echo comes back as output.
        let mut stream = streams.pop().expect("one stream");
        client.send_bytes(pane, b"linked\r").await.expect("typed");
        read_until(&mut stream, b"linked").await;

        let reason = client.detach().await;
        assert_eq!(
            reason, "tmux -C exited (%exit)",
            "the reason a plain %exit gives"
        );
        while stream.recv().await.is_some() {}
        let lock = std::fs::File::open(server.control_lock()).expect("the handshake lock file");
        lock.try_lock().expect("the handshake lock is released");
        assert!(server.is_alive());
        no_clients(server.socket()).await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_dropped_linked_client_leaves_the_server() {
    live(async |dir| {
        let server = cat_server(dir.path()).await;
        let (client, _) = ControlClient::attach(server.handle(), ClientOptions::default(), &[])
            .await
            .expect("attached");
        assert!(!clients(server.socket()).is_empty());
        drop(client);
        no_clients(server.socket()).await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_stopped_then_killed_server_is_unresponsive_then_gone() {
    live(async |dir| {
        let server = cat_server(dir.path()).await;
        let opts = ClientOptions::default().command_timeout(Duration::from_millis(500));
        let (client, mut streams) = ControlClient::attach(
            server.handle(),
            opts,
            &[(PaneId(0), SubscribeOptions::default())],
        )
        .await
        .expect("attached");
        let pid = server.pid();
        process::signal(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let slow = client
            .command(&cmd("display-message").flag("-p").arg("x"))
            .await
            .expect_err("a stopped server does not answer");
        assert_eq!(slow.code(), ErrorCode::Unresponsive, "{slow}");
        let pending = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .command(&cmd("display-message").flag("-p").arg("y"))
                    .await
            }
        });
        process::signal(pid, rustix::process::Signal::KILL).expect("SIGKILL");
        let gone = pending.await.expect("task").expect_err("the server died");
        assert_eq!(gone.code(), ErrorCode::ServerGone, "{gone}");
        let mut stream = streams.pop().expect("one stream");
        while stream.recv().await.is_some() {}
        let reason = client.closed().await;
        assert!(reason.contains("server exited unexpectedly"), "{reason}");
        server.kill().await.expect("kill cleans up");
    })
    .await;
}

#[tokio::test]
async fn a_stale_socket_fails_the_link_and_starts_no_server() {
    live(async |dir| {
        let server = cat_server(dir.path()).await;
        let handle = server.handle().clone();
        server.kill().await.expect("kill");
        // A stale socket: bound where the server was, nobody listening.
        std::fs::create_dir_all(handle.dir()).expect("dir");
        drop(UnixListener::bind(handle.socket()).expect("bind"));
        let err = ControlClient::attach(&handle, ClientOptions::default(), &[])
            .await
            .expect_err("no server");
        assert_eq!(err.code(), ErrorCode::CommandFailed, "{err}");
        assert!(err.to_string().contains("no server running on"), "{err}");
        // Still nobody there: the attempt started no server (`-N`).
        let again = UnixStream::connect(handle.socket()).expect_err("still refused");
        assert_eq!(again.kind(), std::io::ErrorKind::ConnectionRefused);
        std::fs::remove_dir_all(handle.dir()).expect("cleanup");
    })
    .await;
}

/// A server that answers its first client with `MSG_VERSION` (another
/// protocol), then passes every later client through to `real`,
/// descriptors included: what the engine's fallback meets.
fn refusing_proxy(listener: UnixListener, real: std::path::PathBuf) {
    std::thread::spawn(move || {
        let Ok((mut first, _)) = listener.accept() else {
            return;
        };
        let mut header = [0u8; 16];
        let _ = std::io::Read::read_exact(&mut first, &mut header);
        let mut version = Vec::new();
        version.extend_from_slice(&12u32.to_ne_bytes());
        version.extend_from_slice(&16u16.to_ne_bytes());
        version.extend_from_slice(&0u16.to_ne_bytes());
        version.extend_from_slice(&9u32.to_ne_bytes());
        version.extend_from_slice(&0u32.to_ne_bytes());
        let _ = std::io::Write::write_all(&mut first, &version);
        drop(first);
        for client in listener.incoming().flatten() {
            let Ok(server) = UnixStream::connect(&real) else {
                return;
            };
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            std::thread::spawn(move || pass_with_fds(&client, &server));
            std::thread::spawn(move || pass_with_fds(&s2, &c2));
        }
    });
}

fn pass_with_fds(from: &UnixStream, to: &UnixStream) {
    let mut buf = vec![0u8; 65536];
    loop {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
        let Ok(got) = rustix::net::recvmsg(
            from,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            rustix::net::RecvFlags::empty(),
        ) else {
            break;
        };
        if got.bytes == 0 {
            break;
        }
        let mut fds: Vec<OwnedFd> = Vec::new();
        for m in control.drain() {
            if let rustix::net::RecvAncillaryMessage::ScmRights(f) = m {
                fds.extend(f);
            }
        }
        let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
        let mut out = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut send = rustix::net::SendAncillaryBuffer::new(&mut out);
        if !borrowed.is_empty() {
            send.push(rustix::net::SendAncillaryMessage::ScmRights(&borrowed));
        }
        let mut rest = &buf[..got.bytes];
        while !rest.is_empty() {
            match rustix::net::sendmsg(
                to,
                &[std::io::IoSlice::new(rest)],
                &mut send,
                rustix::net::SendFlags::NOSIGNAL,
            ) {
                Ok(n) => rest = &rest[n..],
                Err(_) => return,
            }
            send = rustix::net::SendAncillaryBuffer::default();
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

#[tokio::test]
async fn a_server_that_refuses_the_link_gets_a_tmux_c_process() {
    live(async |dir| {
        let server = cat_server(dir.path()).await;
        // The refusing server's directory: its socket, the lock, the config.
        let fake = tempfile::Builder::new()
            .prefix("fake")
            .tempdir_in(dir.path())
            .expect("dir");
        let listener = UnixListener::bind(fake.path().join("tmux.sock")).expect("bind");
        refusing_proxy(listener, server.socket().to_owned());
        let handle = ServerHandle::open(tmux(), fake.path(), server.session_name());
        let (client, _) = ControlClient::attach(&handle, ClientOptions::default(), &[])
            .await
            .expect("attached through tmux -C");
        let pid = client.pid().expect("the fallback is a tmux -C process");
        assert!(process::is_alive(process::ProcessId::now(pid)));
        let reply = client
            .command(&cmd("display-message").flag("-p").arg("through"))
            .await
            .expect("reply");
        assert_eq!(reply.text(), "through");
        client.detach().await;
        server.kill().await.expect("kill");
    })
    .await;
}
