//! Live tests of the one kill path (`tmux::kill`): a pane whose program
//! started a child in its session, both deaf to SIGHUP (so the server's
//! hangup alone would not end them), killed each way the engine kills. The
//! path resolves only once everything is gone, so the checks need no wait.

use std::path::PathBuf;
use std::time::Duration;

use tmux_engine::control::client::{ClientOptions, ControlClient};
use tmux_engine::tmux::{KillRequest, ProcessId, Server, TmuxCommand, process, procfs};

use crate::support::{opts, poll, test_dir, tmux, within};

const WAIT: Duration = Duration::from_secs(10);

/// A background sleep and a foreground one, in the pane's session.
const TREE: &str = "trap '' HUP; sleep 1000 & sleep 1000";

/// Which entry of the kill path a test goes through.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// `ServerHandle::kill_with(pane, None)`: a one-shot `tmux kill-server`.
    Cli,
    /// `ServerHandle::kill()`: the panes learnt from the server.
    Discovered,
    /// `ServerHandle::kill_with(pane, request)`: `kill-server` over a
    /// control client.
    Request,
    /// `ServerHandle::kill_blocking(pane)`.
    Blocking,
    /// `Server::kill`.
    ServerKill,
    /// Dropping the `Server`.
    ServerDrop,
}

/// What must be gone once the kill resolves.
struct Doomed {
    server: ProcessId,
    sleeps: Vec<ProcessId>,
    dir: PathBuf,
}

impl Doomed {
    fn assert_gone(&self, way: Way) {
        assert!(
            !process::is_alive(self.server),
            "{way:?}: tmux server {} survived",
            self.server
        );
        for sleep in &self.sleeps {
            assert!(
                !process::is_alive(*sleep),
                "{way:?}: sleep {sleep} survived"
            );
        }
        assert!(
            !self.dir.exists(),
            "{way:?}: {} is left",
            self.dir.display()
        );
    }
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

async fn kill_tree(way: Way) {
    let tmp = test_dir();
    let mut options = opts(tmp.path());
    options.command = ["sh", "-c", TREE].map(Into::into).to_vec();
    let server = Server::start(tmux(), options).await.expect("start");
    let pane = server.first_pane_process();
    assert!(
        pane.start_time.is_some(),
        "the pane's start time is recorded"
    );
    let server_pid = server.pid();
    let sleeps = poll("both sleeps to run", WAIT, || async {
        let sleeps: Vec<ProcessId> = procfs::session_members(pane, server_pid)
            .into_iter()
            .filter(|member| comm(member.pid) == "sleep")
            .collect();
        (sleeps.len() == 2).then_some(sleeps)
    })
    .await;
    let doomed = Doomed {
        server: ProcessId::now(server_pid),
        sleeps,
        dir: server.dir().to_owned(),
    };
    match way {
        Way::ServerKill => server.kill().await.expect("kill"),
        Way::ServerDrop => drop(server),
        Way::Cli | Way::Discovered | Way::Request | Way::Blocking => {
            let mut handle = server.into_detached();
            match way {
                Way::Cli => handle.kill_with(Some(pane), None).await.expect("kill"),
                Way::Discovered => handle.kill().await.expect("kill"),
                Way::Request => {
                    let (client, _) = ControlClient::attach(&handle, ClientOptions::default(), &[])
                        .await
                        .expect("attach");
                    let kill = TmuxCommand::new("kill-server");
                    let request: KillRequest<'_> = Box::pin(async {
                        let _ = client.command(&kill).await;
                    });
                    handle
                        .kill_with(Some(pane), Some(request))
                        .await
                        .expect("kill");
                }
                _ => handle.kill_blocking(Some(pane)).expect("kill"),
            }
            doomed.assert_gone(way);
            // Idempotent, in every form.
            handle.kill().await.expect("second kill");
            handle
                .kill_with(Some(pane), None)
                .await
                .expect("third kill");
            handle
                .kill_blocking(Some(pane))
                .expect("blocking kill again");
        }
    }
    doomed.assert_gone(way);
}

/// Every entry, one after the other, each on its own server and socket;
/// the `ServerHandle` entries then run twice more (idempotence).
#[tokio::test]
async fn every_entry_ends_tree_server_and_directory() {
    within(async {
        for way in [
            Way::Cli,
            Way::Discovered,
            Way::Request,
            Way::Blocking,
            Way::ServerKill,
            Way::ServerDrop,
        ] {
            kill_tree(way).await;
        }
    })
    .await;
}

/// A pane process whose parent ended is handed to a reaper above the
/// server (init, or a subreaper the tests run under), out of the pane's
/// tree: the kill still finds it among the reaper's children (its main
/// thread's, where the kernel puts an orphan) and ends it.
#[tokio::test]
async fn an_orphan_of_the_pane_adopted_by_a_reaper_is_killed() {
    within(async {
        let tmp = test_dir();
        let mut options = opts(tmp.path());
        // The inner shell starts the sleep and exits: the sleep is orphaned
        // in the pane's session, deaf to SIGHUP like its parent.
        let script = "trap '' HUP; sh -c 'sleep 1001 & exit'; sleep 1000";
        options.command = ["sh", "-c", script].map(Into::into).to_vec();
        let server = Server::start(tmux(), options).await.expect("start");
        let pane = server.first_pane_process();
        let server_pid = server.pid();
        let orphan = poll("the orphaned sleep to be adopted", WAIT, || async {
            procfs::session_members(pane, server_pid)
                .into_iter()
                .find(|member| {
                    comm(member.pid) == "sleep"
                        && procfs::stat(member.pid).is_some_and(|stat| {
                            // Its parent is out of the session: the reaper,
                            // not the inner shell that started it.
                            u32::try_from(stat.ppid).is_ok_and(|ppid| {
                                procfs::stat(ppid).is_some_and(|parent| {
                                    i64::from(parent.session) != i64::from(pane.pid)
                                })
                            })
                        })
                })
        })
        .await;
        let doomed = Doomed {
            server: ProcessId::now(server_pid),
            sleeps: vec![orphan],
            dir: server.dir().to_owned(),
        };
        let mut handle = server.into_detached();
        handle.kill_with(Some(pane), None).await.expect("kill");
        doomed.assert_gone(Way::Cli);
    })
    .await;
}
