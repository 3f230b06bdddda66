//! `serve` and `mcp` restart themselves once with glibc's one-arena
//! setting (`src/cli/allocator.rs`); the tmux servers they start keep
//! their own settings and the terminals' programs get none; a caller's own
//! value, empty included, is kept as it is.

use tmux_engine::tmux::procfs;

use super::Cli;
use serde_json::json;

use crate::bridge::{Served, spawn_serve};
use crate::mcp::Mcp;
use crate::support::{environ_entry, within};

const VARIABLE: &str = "GLIBC_TUNABLES";

/// The name of process `pid` (`/proc/PID/comm`).
fn comm(pid: u32) -> String {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    name.trim_end().to_owned()
}

/// The nearest ancestor of `pid` named `tmux: server` (the pane's server).
fn tmux_server_of(pid: u32) -> u32 {
    let mut at = pid;
    for _ in 0..8 {
        let ppid = u32::try_from(procfs::stat(at).expect("a live process").ppid).unwrap();
        if comm(ppid) == "tmux: server" {
            return ppid;
        }
        at = ppid;
    }
    panic!("no tmux server above {pid}");
}

/// `serve` with `value` as its GLIBC_TUNABLES (`None`: unset), and the
/// pids of a terminal's program and of its tmux server.
async fn serve_with(value: Option<&str>) -> (Served, u32, u32) {
    let cli = Cli::new();
    let mut command =
        tokio::process::Command::from(cli.command(&["serve", "--listen", "127.0.0.1:0"]));
    if let Some(value) = value {
        command.env(VARIABLE, value);
    }
    let (child, line, token) = spawn_serve(command).await;
    let served = Served::from_url(child, cli, &line, &token);
    let made = served
        .spawn(r#"{"name":"t","command":["sh","-c","exec sleep 1000"]}"#)
        .await;
    let program = u32::try_from(made["pid"].as_u64().expect("the program's pid")).unwrap();
    let server = tmux_server_of(program);
    (served, program, server)
}

/// The tmux server's own settings (glibc 2.36 cuts the process's copy at
/// the first `:`, so it shows the first tunable only).
fn assert_server_tuned(server: u32) {
    let tunables = environ_entry(server, VARIABLE).expect("the tmux server's");
    assert!(
        tunables.starts_with("GLIBC_TUNABLES=glibc.malloc.tcache_count=0"),
        "{tunables}"
    );
}

#[tokio::test]
async fn serve_runs_with_one_arena_its_tmux_servers_with_theirs_and_programs_with_none() {
    within(async {
        let (served, program, server) = serve_with(None).await;
        // The same process (the restart is an execve), now with the setting,
        // under its own name (`ps`, `pgrep`).
        assert_eq!(
            environ_entry(served.pid(), VARIABLE).as_deref(),
            Some("GLIBC_TUNABLES=glibc.malloc.arena_max=1")
        );
        assert_eq!(comm(served.pid()), "tmux-engine");
        assert_server_tuned(server);
        assert_eq!(environ_entry(program, VARIABLE), None, "the program's");
    })
    .await;
}

#[tokio::test]
async fn a_serve_started_with_its_own_tunables_keeps_them() {
    within(async {
        // Empty: the way to opt out. Its terminals get serve's clean
        // environment (bridge::clean_environment), so the servers' own
        // settings as ever.
        let (served, program, server) = serve_with(Some("")).await;
        assert_eq!(
            environ_entry(served.pid(), VARIABLE).as_deref(),
            Some("GLIBC_TUNABLES=")
        );
        assert_server_tuned(server);
        assert_eq!(environ_entry(program, VARIABLE), None, "the program's");
    })
    .await;
}

#[tokio::test]
async fn mcp_runs_with_one_arena_and_its_servers_do_not_take_it_for_a_callers() {
    within(async {
        // `mcp`'s terminals inherit its whole environment, the setting
        // included: the tmux server must not take it for a caller's own.
        let cli = Cli::new();
        let mcp = Mcp::start(&cli).await;
        assert_eq!(
            environ_entry(mcp.pid(), VARIABLE).as_deref(),
            Some("GLIBC_TUNABLES=glibc.malloc.arena_max=1")
        );
        assert_eq!(comm(mcp.pid()), "tmux-engine");
        let made = mcp
            .ok(
                "terminal_spawn",
                json!({"name": "t", "command": ["sh", "-c", "exec sleep 1000"]}),
            )
            .await;
        let program = u32::try_from(made["pid"].as_u64().expect("the program's pid")).unwrap();
        assert_server_tuned(tmux_server_of(program));
        assert_eq!(environ_entry(program, VARIABLE), None, "the program's");
        mcp.stop().await;
    })
    .await;
}
