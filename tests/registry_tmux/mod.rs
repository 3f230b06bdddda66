//! The registry against real tmux: the registry-logic scenarios that apply, exact
//! sends, wait reasons, paging, real signals, pushed death, recreation,
//! adoption across registries, and reaping. Each test has its own state
//! and runtime directories; every test ends by checking that no server or
//! socket directory it made is left.
#![allow(clippy::unwrap_used)]

mod attach;
mod attach_lifecycle;
mod commands;
mod cwd;
mod full_screen;
mod hardening;
mod kept_read;
mod lifecycle;
mod liveness;
mod old_records;
mod pool;
mod reboot;
mod revive;
mod search;
mod send;
mod shell_sends;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{
    Backend, OwnerId, Registry, RegistryConfig, ScanReport, SendRequest, SendResult, SpawnSpec,
    TerminalSnapshot, TerminalStatus, WaitFor,
};
use tmux_engine::vocab::ExitStatus;

use crate::support::{poll, tmux};

/// How long one wait inside a test may take.
const WAIT: Duration = Duration::from_secs(15);

/// A test's directories and registry. Fields drop in order: the guard
/// must kill the servers while their directories (and sockets) still exist.
struct Env {
    guard: Cleanup,
    registry: Registry,
    owner: OwnerId,
    dir: TempDir,
}

/// Kills every server left under a runtime directory when dropped, so a
/// failing test leaves nothing running (a passing one has nothing left).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for dir in server_dirs(&self.0) {
            let _ = std::process::Command::new("tmux")
                .arg("-S")
                .arg(dir.join("tmux.sock"))
                .arg("kill-server")
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Env {
    async fn new() -> Env {
        Env::with_config(RegistryConfig::default()).await
    }

    /// An environment whose registry uses `config` (its state directory is
    /// the test's).
    async fn with_config(config: RegistryConfig) -> Env {
        Env::with_shell(config, "/bin/sh").await
    }

    /// An environment whose registry uses `config` and pins `shell`.
    async fn with_shell(config: RegistryConfig, shell: &str) -> Env {
        let dir = crate::support::test_dir();
        let backend: Arc<dyn Backend> = backend_with(dir.path(), shell);
        let (registry, _) =
            Registry::open_with(config.state_dir(dir.path().join("state")), backend)
                .await
                .unwrap();
        Env {
            guard: Cleanup(runtime(dir.path())),
            dir,
            registry,
            owner: OwnerId::new("alice").unwrap(),
        }
    }

    fn runtime(&self) -> PathBuf {
        runtime(self.dir.path())
    }

    async fn spawn(&self, spec: SpawnSpec) -> TerminalSnapshot {
        self.registry.owner(&self.owner).spawn(spec).await.unwrap()
    }

    async fn send(&self, target: &str, text: &[u8], submit: bool, wait: WaitFor) -> SendResult {
        let request = SendRequest {
            text: bytes::Bytes::copy_from_slice(text),
            submit,
            wait,
            timeout: Some(WAIT),
            history: true,
            keys: Vec::new(),
        };
        self.registry
            .owner(&self.owner)
            .send(target, request)
            .await
            .unwrap()
            .result()
            .await
            .unwrap()
    }

    /// Disposes the registry and checks nothing is left running.
    async fn finish(self) {
        self.registry.dispose().await.unwrap();
        assert_clean(&self.runtime()).await;
    }
}

fn runtime(dir: &Path) -> PathBuf {
    dir.join("rt")
}

/// A backend with sockets under `dir/rt`, `/bin/sh` pinned, a short quiet
/// period and no reap grace.
fn backend(dir: &Path) -> Arc<TmuxBackend> {
    backend_with(dir, "/bin/sh")
}

/// [`backend`] with `shell` pinned.
fn backend_with(dir: &Path, shell: &str) -> Arc<TmuxBackend> {
    let config = TmuxConfig::new(runtime(dir))
        .shell(shell)
        .quiet(Duration::from_millis(200))
        .reap_grace(Duration::ZERO)
        .with_state_dir(dir.join("state"));
    Arc::new(TmuxBackend::with_tmux(tmux(), config))
}

/// Opens a registry on `dir/state` with the tmux backend.
async fn open(dir: &Path) -> (Registry, ScanReport) {
    let backend: Arc<dyn Backend> = backend(dir);
    Registry::open_with(
        RegistryConfig::default().state_dir(dir.join("state")),
        backend,
    )
    .await
    .unwrap()
}

/// A spec running `script` under `/bin/sh -c`.
fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new().command(["/bin/sh", "-c", script])
}

/// Server directories left in `runtime`.
fn server_dirs(runtime: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(runtime)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default()
}

/// Waits until no server directory is left under `runtime` and no tmux
/// server serves a socket there.
async fn assert_clean(runtime: &Path) {
    poll("server directories to go", WAIT, || async {
        server_dirs(runtime).is_empty().then_some(())
    })
    .await;
    let needle = runtime.to_string_lossy().into_owned();
    poll("tmux servers to exit", WAIT, || {
        let needle = needle.clone();
        async move { (!tmux_processes_mentioning(&needle)).then_some(()) }
    })
    .await;
}

/// Whether any tmux process has `needle` in its command line.
fn tmux_processes_mentioning(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        text.starts_with("tmux") && text.contains(needle)
    })
}

/// Runs a test body under the deadline with a fresh [`Env`], then
/// [`Env::finish`]es it.
async fn with_env(body: impl AsyncFnOnce(&Env)) {
    crate::support::within(async {
        let env = Env::new().await;
        body(&env).await;
        env.finish().await;
    })
    .await;
}

/// Waits for the terminal `target` to die and checks it exited with `code`.
async fn wait_exited(env: &Env, target: &str, code: i32) -> TerminalSnapshot {
    let dead = wait_status(env, target, |s| !s.status.is_running()).await;
    assert_eq!(
        dead.status,
        TerminalStatus::Exited {
            exit: ExitStatus::Code(code)
        }
    );
    dead
}

/// Polls the registry until the terminal's status satisfies `check`.
async fn wait_status(
    env: &Env,
    target: &str,
    check: impl Fn(&TerminalSnapshot) -> bool,
) -> TerminalSnapshot {
    poll("terminal status", WAIT, || async {
        let snapshot = env.registry.owner(&env.owner).show(target).await.unwrap();
        check(&snapshot).then_some(snapshot)
    })
    .await
}
