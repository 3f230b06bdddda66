//! A registry on the tmux backend for the live tests of the registry, the
//! backend and attach (`tests/registry/`, `tests/backend/`,
//! `tests/attach/`): each test has its own state and runtime directories;
//! every test ends by checking that no server or socket directory it made
//! is left.
#![allow(clippy::unwrap_used)]

pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use tempfile::TempDir;
pub(crate) use tmux_engine::backend::{TmuxBackend, TmuxConfig};
pub(crate) use tmux_engine::registry::{
    Backend, OwnerId, Registry, RegistryConfig, ScanReport, SendAnswer, SendRequest, SpawnSpec,
    TerminalSnapshot, TerminalStatus, WaitFor,
};
pub(crate) use tmux_engine::vocab::ExitStatus;

pub(crate) use crate::support::{poll, tmux};

/// How long one wait inside a test may take.
pub(crate) const WAIT: Duration = Duration::from_secs(15);

/// A test's directories and registry. Fields drop in order: the guard
/// must kill the servers while their directories (and sockets) still exist.
pub(crate) struct Env {
    pub(crate) guard: Cleanup,
    pub(crate) registry: Registry,
    pub(crate) owner: OwnerId,
    pub(crate) dir: TempDir,
}

/// Kills every server left under a runtime directory when dropped, so a
/// failing test leaves nothing running (a passing one has nothing left).
pub(crate) struct Cleanup(pub(crate) PathBuf);

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
    pub(crate) async fn new() -> Env {
        Env::with_config(RegistryConfig::default()).await
    }

    /// An environment whose registry uses `config` (its state directory is
    /// the test's).
    pub(crate) async fn with_config(config: RegistryConfig) -> Env {
        Env::with_shell(config, "/bin/sh").await
    }

    /// An environment whose registry uses `config` and pins `shell`.
    pub(crate) async fn with_shell(config: RegistryConfig, shell: &str) -> Env {
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

    pub(crate) fn runtime(&self) -> PathBuf {
        runtime(self.dir.path())
    }

    /// This test's directory and owner with a second registry opened on
    /// its state directory (as another engine, or the next run, opens
    /// it), this one dropped first (shut down or not, as the test left
    /// it); and what the open found.
    pub(crate) async fn reopen(self) -> (Env, ScanReport) {
        let Env {
            dir,
            registry,
            owner,
            guard,
        } = self;
        drop(registry);
        let (registry, report) = open(dir.path()).await;
        let env = Env {
            dir,
            registry,
            owner,
            guard,
        };
        (env, report)
    }

    pub(crate) async fn spawn(&self, spec: SpawnSpec) -> TerminalSnapshot {
        self.registry.owner(&self.owner).spawn(spec).await.unwrap()
    }

    pub(crate) async fn send(
        &self,
        target: &str,
        text: &[u8],
        submit: bool,
        wait: WaitFor,
    ) -> SendAnswer {
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
    pub(crate) async fn finish(self) {
        self.registry.dispose().await.unwrap();
        assert_clean(&self.runtime()).await;
    }
}

pub(crate) fn runtime(dir: &Path) -> PathBuf {
    dir.join("rt")
}

/// A backend with sockets under `dir/rt`, `/bin/sh` pinned, a short quiet
/// period and no reap grace.
pub(crate) fn backend(dir: &Path) -> Arc<TmuxBackend> {
    backend_with(dir, "/bin/sh")
}

/// [`backend`] with `shell` pinned.
pub(crate) fn backend_with(dir: &Path, shell: &str) -> Arc<TmuxBackend> {
    Arc::new(TmuxBackend::with_tmux(tmux(), config(dir, shell)).unwrap())
}

/// [`backend_with`]'s config.
fn config(dir: &Path, shell: &str) -> TmuxConfig {
    TmuxConfig::new(runtime(dir))
        .shell(shell)
        .quiet(Duration::from_millis(200))
        .reap_grace(Duration::ZERO)
        .with_state_dir(dir.join("state"))
}

/// Opens a registry on `dir/state` with the tmux backend.
pub(crate) async fn open(dir: &Path) -> (Registry, ScanReport) {
    open_configured(dir, |config| config).await
}

/// [`open`] with the backend's config changed by `change`.
pub(crate) async fn open_configured(
    dir: &Path,
    change: impl FnOnce(TmuxConfig) -> TmuxConfig,
) -> (Registry, ScanReport) {
    let config = change(config(dir, "/bin/sh"));
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::with_tmux(tmux(), config).unwrap());
    Registry::open_with(
        RegistryConfig::default().state_dir(dir.join("state")),
        backend,
    )
    .await
    .unwrap()
}

/// A spec running `script` under `/bin/sh -c`.
pub(crate) fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new().command(["/bin/sh", "-c", script])
}

/// Server directories left in `runtime`.
pub(crate) fn server_dirs(runtime: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(runtime)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default()
}

/// Runs tmux with `args` on the one server under `runtime` and returns
/// what it printed.
pub(crate) fn tmux_at(runtime: &Path, args: &[&str]) -> String {
    let dirs = server_dirs(runtime);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(dirs[0].join("tmux.sock"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Waits until no server directory is left under `runtime` and no tmux
/// server serves a socket there.
pub(crate) async fn assert_clean(runtime: &Path) {
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
pub(crate) fn tmux_processes_mentioning(needle: &str) -> bool {
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
pub(crate) async fn with_env(body: impl AsyncFnOnce(&Env)) {
    crate::support::within(async {
        let env = Env::new().await;
        body(&env).await;
        env.finish().await;
    })
    .await;
}

/// Waits for the terminal `target` to die and checks it exited with `code`.
pub(crate) async fn wait_exited(env: &Env, target: &str, code: i32) -> TerminalSnapshot {
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
pub(crate) async fn wait_status(
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
