//! The PTY transport's `-r` at tmux level, against real tmux: bytes
//! written straight to a read-only client's pty (past the [`Viewer`]'s own
//! `READ_ONLY` refusal, which integration tests cannot get by) never reach
//! the program, while the same bytes through a writable client do.
//!
//! [`Viewer`]: super::super::Viewer

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{PtyLink, open, pair, write_all};
use crate::attach::{AttachOptions, Transport, ViewerEvent};
use crate::backend::{TmuxBackend, TmuxConfig};
use crate::registry::{Backend, OwnerId, Registry, RegistryConfig, SpawnSpec, WaitCondition};

const WAIT: Duration = Duration::from_secs(15);

/// Kills every server under the runtime directory when dropped, so a
/// failing test leaves nothing running.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for dir in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let _ = std::process::Command::new("tmux")
                .arg("-S")
                .arg(dir.path().join("tmux.sock"))
                .arg("kill-server")
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// Opens a PTY client of `target`; returns once it drew something (it is
/// attached: keys written now go through tmux's handling of the client).
async fn attached(
    registry: &Registry,
    owner: &OwnerId,
    read_only: bool,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
) -> (PtyLink, mpsc::Receiver<ViewerEvent>) {
    let found = registry.owner(owner).attach("ro").await.unwrap();
    let opts = AttachOptions::default()
        .transport(Transport::Pty)
        .read_only(read_only);
    let (tx, rx) = mpsc::channel(1024);
    let (_, mut link) = open(&found, &opts, tx, cancel, tasks).await.unwrap();
    let first = tokio::time::timeout(WAIT, link.read()).await.unwrap();
    assert!(
        first.as_ref().is_some_and(|bytes| !bytes.is_empty()),
        "{first:?}"
    );
    (link, rx)
}

#[tokio::test]
async fn a_read_only_client_drops_keys_at_tmux_level() {
    let dir = tempfile::Builder::new()
        .prefix("teptyro")
        .tempdir_in("/tmp")
        .unwrap();
    let runtime = dir.path().join("rt");
    let _cleanup = Cleanup(runtime.clone());
    let config = TmuxConfig::new(runtime)
        .shell("/bin/sh")
        .with_state_dir(dir.path().join("state"));
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::new(config).unwrap());
    let registry_config = RegistryConfig::default().state_dir(dir.path().join("state"));
    let (registry, _) = Registry::open_with(registry_config, backend).await.unwrap();
    let owner = OwnerId::new("alice").unwrap();
    let program = SpawnSpec::new().name("ro").command([
        "/bin/sh",
        "-c",
        "while read line; do echo got-$line; done",
    ]);
    registry.owner(&owner).spawn(program).await.unwrap();
    let (cancel, tasks) = (CancellationToken::new(), TaskTracker::new());
    let (ro, _ro_events) = attached(&registry, &owner, true, &cancel, &tasks).await;
    let (rw, _rw_events) = attached(&registry, &owner, false, &cancel, &tasks).await;
    ro.write(b"sneaky\r").await.unwrap();
    // Two round trips through the writable client after the read-only
    // client's keys: tmux has long handled those by the time both show.
    for word in ["rw1", "rw2"] {
        rw.write(format!("{word}\r").as_bytes()).await.unwrap();
        let line = format!("got-{word}");
        registry
            .owner(&owner)
            .wait("ro", &WaitCondition::Text(line), WAIT)
            .await
            .unwrap();
    }
    let found = registry.owner(&owner).attach("ro").await.unwrap();
    let screen = found.terminal.screen().await.unwrap().text();
    assert!(
        !screen.contains("sneaky"),
        "a read-only client typed: {screen:?}"
    );
    drop((ro, rw));
    cancel.cancel();
    tasks.close();
    tasks.wait().await;
    registry.dispose().await.unwrap();
}

/// A write larger than the pty holds waits for room (the master is
/// registered for reads only, room has a registration of its own) and
/// loses nothing: the other side gets every byte, in order, as it reads.
/// No tmux: a bare pty pair, so nothing else drains it.
#[tokio::test]
async fn a_write_to_a_full_pty_waits_for_room_and_loses_nothing() {
    use futures_util::FutureExt;
    use std::io::Read;

    let (master, slave) = pair().unwrap();
    // Raw: every byte value passes as itself, none is echoed back.
    let mut termios = rustix::termios::tcgetattr(&slave).unwrap();
    termios.make_raw();
    rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &termios).unwrap();
    #[allow(deprecated)]
    let master =
        tokio::io::unix::AsyncFd::with_interest(master, tokio::io::Interest::READABLE).unwrap();

    let payload: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8).collect();
    let write = write_all(&master, &payload);
    tokio::pin!(write);
    // Nobody reads yet: the pty fills and the write waits for room.
    assert!(
        (&mut write).now_or_never().is_none(),
        "a MiB fit in the pty"
    );
    let expected = payload.len();
    let reader = std::thread::spawn(move || {
        let mut got = vec![0; expected];
        (&slave).read_exact(&mut got).map(|()| got)
    });
    tokio::time::timeout(WAIT, write)
        .await
        .expect("the write never found room")
        .unwrap();
    let got = reader.join().unwrap().unwrap();
    assert!(
        got == payload,
        "the bytes read differ from the bytes written"
    );
}
