//! Issue 10, item 5: runtime, socket and state directories are the user's
//! alone (owned, no group/other access) or refused with `UNSAFE_DIRECTORY`;
//! the fixture's reaper touches only its own uid's directories.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::cli::Cli;
use crate::support::{test_dir, tmux, within};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The registry's runtime directory under a [`Cli`]'s `XDG_RUNTIME_DIR`.
fn registry_dir(cli: &Cli) -> PathBuf {
    std::fs::read_dir(cli.runtime())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tmux-engine-registry-")
        })
        .expect("a registry runtime directory")
}

fn assert_refused(cli: &Cli, args: &[&str], path: &Path) {
    let out = cli.run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: UNSAFE_DIRECTORY: ")
            && stderr.contains(&*path.to_string_lossy()),
        "{args:?}: {stderr}"
    );
}

#[test]
fn a_runtime_directory_others_can_enter_is_refused() {
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "a", "--", "sleep", "60"]);
    cli.ok(&["kill", "a"]);
    let dir = registry_dir(&cli);
    // Before: a predictable /tmp path made by anyone, mode 777, was used.
    chmod(&dir, 0o777);
    assert_refused(&cli, &["list"], &dir);
    assert_refused(&cli, &["spawn", "--", "true"], &dir);
    if running_as_root() {
        // Another user's directory, however private, is refused too.
        chmod(&dir, 0o700);
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        assert_refused(&cli, &["list"], &dir);
        std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
    }
    chmod(&dir, 0o700);
    assert_eq!(cli.ok(&["list"]), "");
}

#[test]
fn a_shared_state_directory_is_refused() {
    let cli = Cli::new();
    cli.ok(&["list"]);
    let state = cli.runtime().with_file_name("state");
    chmod(&state, 0o755);
    assert_refused(&cli, &["list"], &state);
    chmod(&state, 0o700);
    cli.ok(&["list"]);
}

#[test]
fn run_refuses_a_runtime_base_anyone_may_write() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    std::fs::create_dir(&rt).unwrap();
    chmod(&rt, 0o777);
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
            .env("TMUX_ENGINE_RUNTIME_DIR", &rt)
            .args(["run", "--", "true"])
            .output()
            .unwrap()
    };
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("UNSAFE_DIRECTORY"), "{stderr}");
    assert_ne!(out.status.code(), Some(0));
    // With the sticky bit (like /tmp) no one else can replace its entries.
    chmod(&rt, 0o1777);
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[tokio::test]
async fn the_fixture_reaper_leaves_other_users_directories_alone() {
    if !running_as_root() {
        // Only root can make a directory of another uid; the rule itself is
        // unit-tested in tmux::dirs.
        return;
    }
    within(async {
        let tmp = test_dir();
        let base = tmp.path().join("rt");
        std::fs::create_dir(&base).unwrap();
        // An orphan by every other sign: its owner file names a dead process.
        let foreign = base.join("tmux-engine-foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(
            foreign.join(tmux_engine::fixture::cleanup::OWNER_FILE),
            "999999999 1\n",
        )
        .unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        let reaped = tmux_engine::fixture::cleanup::reap_orphans(&tmux(), &base).await;
        assert!(reaped.is_empty(), "{reaped:?}");
        assert!(foreign.exists(), "another user's directory was removed");
        // The same directory, ours: reaped (so the test above is not vacuous).
        std::os::unix::fs::chown(&foreign, Some(0), Some(0)).unwrap();
        let reaped = tmux_engine::fixture::cleanup::reap_orphans(&tmux(), &base).await;
        assert_eq!(reaped, [foreign]);
    })
    .await;
}

/// Issue 14, item 12: the registry's server directories go under
/// `TMUX_ENGINE_RUNTIME_DIR` (created 0700 when missing), as every other
/// server's do, not under `XDG_RUNTIME_DIR`.
#[test]
fn the_registry_honours_tmux_engine_runtime_dir() {
    let cli = Cli::new();
    let base = cli.runtime().with_file_name("named-rt");
    let run = |args: &[&str]| {
        let out = cli
            .command(args)
            .env("TMUX_ENGINE_RUNTIME_DIR", &base)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let id = run(&["spawn", "--name", "a", "--", "sleep", "60"]);
    let registry = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tmux-engine-registry-")
        });
    let killed = || {
        // Killed through the same base, so nothing is left either way.
        let _ = cli
            .command(&["kill", id.trim()])
            .env("TMUX_ENGINE_RUNTIME_DIR", &base)
            .output();
    };
    let Some(registry) = registry else {
        killed();
        panic!("no registry directory under {}", base.display());
    };
    let mode = std::fs::metadata(&base).unwrap().permissions().mode() & 0o777;
    let sockets = std::fs::read_dir(&registry).unwrap().flatten().count();
    let xdg = std::fs::read_dir(cli.runtime()).unwrap().flatten().count();
    killed();
    assert_eq!(mode, 0o700, "{}", base.display());
    assert_eq!(sockets, 1, "one server directory in {}", registry.display());
    assert_eq!(xdg, 0, "XDG_RUNTIME_DIR was used");
    assert_eq!(run(&["list"]), "");
}
