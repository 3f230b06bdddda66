//! The built-in `tmux` backend: one private tmux server per terminal,
//! driven through the control client.
//!
//! | file          | job                                                   |
//! |---------------|-------------------------------------------------------|
//! | `mod.rs`      | [`TmuxBackend`], [`TmuxConfig`], spawn and adoption   |
//! | `reap.rs`     | removing servers and socket directories of no record  |
//! | `terminal.rs` | [`TmuxTerminal`]: watcher, signal, close, probe       |
//! | `send.rs`     | sends and their wait conditions                       |
//! | `capture.rs`  | scrollback pages and the screen (`capture-pane`)      |
//!
//! Each terminal's server lives in its own `tmux-engine-XXXXXX` directory
//! under the backend's runtime directory (one per state directory, see
//! [`TmuxConfig::for_state_dir`]); the record's locator names that
//! directory, so a later engine process adopts the server by it. The
//! session is always named [`SESSION`] and the pane is `%0`: no user text
//! reaches a tmux target.

mod capture;
mod reap;
mod send;
mod shared;
mod terminal;

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tracing::{debug, warn};

pub use capture::{DEFAULT_PAGE, MAX_PAGE};
pub use send::strip_escapes;
pub use terminal::TmuxTerminal;

use self::terminal::Parts;
use super::backend::{Backend, BackendTerminal, ReapReport, SpawnRequest, TerminalStatus};
use super::persist::TerminalRecord;
use super::spec::DEFAULT_KIND;
use super::{Registry, RegistryConfig, ScanReport};
use crate::control::PaneId;
use crate::control::client::{ClientOptions, ControlClient};
use crate::control::exit::{pane_state, wait_pane_exit};
use crate::control::subscribe::SubscribeOptions;
use crate::terminal::{Parts as TerminalParts, launch};
use crate::tmux::command::TmuxCommand;
use crate::tmux::options::{MARK_OPTION, MARK_VALUE};
use crate::tmux::process;
use crate::tmux::{ProcessId, ServerHandle, ServerOptions, Tmux};
use crate::vocab::Size;
use crate::{Error, Result};

/// The one session of every terminal's server.
pub const SESSION: &str = "main";

/// How the tmux backend runs terminals.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TmuxConfig {
    /// Where server directories are created; owned by this backend (reap
    /// removes what it finds there that no record names).
    pub runtime_dir: PathBuf,
    /// The pinned shell for terminals without a command (and for one-word
    /// commands); `None` uses `$SHELL`.
    pub shell: Option<PathBuf>,
    /// Scrollback lines kept per terminal.
    pub history_limit: u32,
    /// Quiet period after which a send counts as idle.
    pub quiet: Duration,
    /// A send's timeout when the request names none.
    pub send_timeout: Duration,
    /// How long a liveness probe waits for tmux's answer.
    pub probe_timeout: Duration,
    /// Bytes of recent output kept per terminal for sends.
    pub output_buffer: usize,
    /// Reap skips server directories younger than this: another process
    /// may be spawning there and not have written its record yet.
    pub reap_grace: Duration,
    /// When set, every server (and so every terminal's program) starts with
    /// exactly this environment plus the spawn's own `env`, instead of
    /// inheriting the engine's: a long-lived server process (the web
    /// bridge) must not hand its own secrets to the shells it spawns.
    pub environment: Option<Vec<(OsString, OsString)>>,
}

impl TmuxConfig {
    /// A config with default values and server directories in
    /// `runtime_dir`.
    pub fn new(runtime_dir: impl Into<PathBuf>) -> Self {
        TmuxConfig {
            runtime_dir: runtime_dir.into(),
            shell: None,
            history_limit: 10_000,
            quiet: Duration::from_millis(300),
            send_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(3),
            output_buffer: 4 << 20,
            reap_grace: Duration::from_secs(60),
            environment: None,
        }
    }

    /// The runtime directory for a registry on `state_dir`:
    /// `$XDG_RUNTIME_DIR` (else `/tmp`) / `tmux-engine-registry-UID-HASH`,
    /// where HASH is a hash of the state directory's path. Short (socket
    /// paths have a 107-byte limit) and distinct per state directory, so one
    /// registry's reap never touches another's servers.
    pub fn for_state_dir(state_dir: &Path) -> Self {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_dir())
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let absolute = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_owned());
        let uid = rustix::process::getuid().as_raw();
        let hash = fnv1a(absolute.as_os_str().as_encoded_bytes());
        Self::new(base.join(format!("tmux-engine-registry-{uid}-{hash:016x}")))
    }

    /// Sets the pinned shell.
    #[must_use]
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = Some(shell.into());
        self
    }

    /// Sets the idle quiet period.
    #[must_use]
    pub fn quiet(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// Starts servers with exactly `vars` (plus each spawn's `env`) instead
    /// of the engine's environment.
    #[must_use]
    pub fn environment(mut self, vars: Vec<(OsString, OsString)>) -> Self {
        self.environment = Some(vars);
        self
    }

    /// Sets the reap grace period.
    #[must_use]
    pub fn reap_grace(mut self, grace: Duration) -> Self {
        self.reap_grace = grace;
        self
    }
}

/// FNV-1a, 64 bits: stable across Rust versions (std's hasher is not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `tmux` backend.
#[derive(Debug)]
pub struct TmuxBackend {
    tmux: Arc<Tmux>,
    config: Arc<TmuxConfig>,
}

/// Opens a registry on `state_dir` with the tmux backend configured by
/// `config` (e.g. [`TmuxConfig::for_state_dir`]): what the CLI, and any
/// program keeping persistent terminals, starts with.
///
/// # Errors
///
/// `TMUX_MISSING`, `TMUX_TOO_OLD`, or the state directory's errors (see
/// [`Registry::open`]).
pub async fn open_registry(
    state_dir: impl Into<PathBuf>,
    config: TmuxConfig,
) -> Result<(Registry, ScanReport)> {
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::new(config)?);
    Registry::open(RegistryConfig::default().state_dir(state_dir), [backend]).await
}

impl TmuxBackend {
    /// A backend using the discovered tmux (`TMUX_ENGINE_TMUX` or `PATH`).
    ///
    /// # Errors
    ///
    /// `TMUX_MISSING`, `TMUX_TOO_OLD`.
    pub fn new(config: TmuxConfig) -> Result<Self> {
        Ok(Self::with_tmux(Arc::new(Tmux::discover()?), config))
    }

    /// A backend using `tmux`.
    pub fn with_tmux(tmux: Arc<Tmux>, config: TmuxConfig) -> Self {
        TmuxBackend {
            tmux,
            config: Arc::new(config),
        }
    }

    /// The config.
    pub fn config(&self) -> &TmuxConfig {
        &self.config
    }

    fn ensure_runtime_dir(&self) -> Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.config.runtime_dir)
            .map_err(|e| {
                Error::io(
                    format!(
                        "creating runtime directory {}",
                        self.config.runtime_dir.display()
                    ),
                    e,
                )
            })
    }

    fn server_options(&self, request: &SpawnRequest) -> ServerOptions {
        let spec = &request.spec;
        let shell = self.config.shell.clone().or_else(|| {
            std::env::var_os("SHELL")
                .map(PathBuf::from)
                .filter(|shell| shell.is_absolute() && shell.is_file())
        });
        ServerOptions {
            size: spec.size.map_or_else(Size::default, |size| Size {
                cols: size.cols,
                rows: size.rows,
            }),
            command: spec.command.iter().map(OsString::from).collect(),
            shell,
            cwd: spec.cwd.clone(),
            env: spec
                .env
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            history_limit: self.config.history_limit,
            session: SESSION.to_owned(),
            runtime_dir: Some(self.config.runtime_dir.clone()),
            server_env: self.config.environment.clone().unwrap_or_default(),
            clear_env: self.config.environment.is_some(),
            ..ServerOptions::default()
        }
    }

    async fn spawn_terminal(&self, request: SpawnRequest) -> Result<Arc<dyn BackendTerminal>> {
        self.ensure_runtime_dir()?;
        let opts = self.server_options(&request);
        let start = launch(
            Arc::clone(&self.tmux),
            opts,
            ClientOptions::default(),
            SubscribeOptions::default(),
        );
        // Dropping the start future rolls back: `Server`'s drop kills
        // whatever started and removes its directory.
        let parts = tokio::select! {
            started = start => started?,
            () = request.cancel.cancelled() => {
                return Err(Error::Cancelled(format!("spawn of terminal {}", request.id)));
            }
        };
        let TerminalParts {
            server,
            client,
            pane,
            output: stream,
            ..
        } = parts;
        if request.cancel.is_cancelled() {
            let cause = Error::Cancelled(format!("spawn of terminal {}", request.id));
            return match server.kill().await {
                Ok(()) => Err(cause),
                Err(cleanup) => Err(Error::BackendCleanup {
                    cause: Box::new(cause),
                    cleanup: Arc::new(cleanup),
                }),
            };
        }
        let pane_process = server.first_pane_process();
        let handle = server.into_detached();
        Ok(TmuxTerminal::start(Parts {
            id: request.id,
            spec: request.spec,
            config: Arc::clone(&self.config),
            client,
            pane,
            server: handle,
            pane_process,
            status: TerminalStatus::Running,
            stream,
        }))
    }

    async fn adopt_record(
        &self,
        record: &TerminalRecord,
    ) -> Result<Option<Arc<dyn BackendTerminal>>> {
        let Some(dir) = record.locator.get("dir").and_then(|dir| dir.as_str()) else {
            warn!(terminal = %record.id, "record has no server directory; not adopting");
            return Ok(None);
        };
        let mut handle = ServerHandle::open(Arc::clone(&self.tmux), dir, SESSION);
        if !handle.socket().exists() {
            return Ok(None);
        }
        let pane = PaneId(0);
        // The server pid the record names, if that process is still a tmux:
        // a refused attach to a live server is retried below.
        let recorded_pid = record
            .locator
            .get("server_pid")
            .and_then(serde_json::Value::as_u64)
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|&pid| pid != 0);
        let deadline = tokio::time::Instant::now() + self.config.probe_timeout;
        let mut pause = Duration::from_millis(10);
        let (client, mut streams) = loop {
            let attempt = ControlClient::attach(
                &handle,
                ClientOptions::default(),
                &[(pane, SubscribeOptions::default())],
            )
            .await;
            match attempt {
                Ok(connected) => break connected,
                // No server on the socket, or no session: dead. Except that
                // tmux 3.3a sometimes drops a new client ("server exited
                // unexpectedly") while another client of the same server is
                // going away, e.g. the previous engine's, killed just before:
                // while the recorded server lives, try again.
                Err(error @ (Error::ServerGone { .. } | Error::Command { .. })) => {
                    let live = recorded_pid
                        .is_some_and(|pid| process::is_alive(pid) && process::looks_like_tmux(pid));
                    if !live || tokio::time::Instant::now() + pause > deadline {
                        debug!(terminal = %record.id, %error, "not adopting: no server answers");
                        return Ok(None);
                    }
                    debug!(terminal = %record.id, %error, "attach refused by a live server; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(error) => return Err(error),
            }
        };
        let stream = streams.pop().expect("one subscription was asked for");
        let mark = TmuxCommand::new("show-options")
            .flag("-sv")
            .arg(MARK_OPTION);
        let marked = client
            .command(&mark)
            .await
            .is_ok_and(|reply| reply.text().trim() == MARK_VALUE);
        if !marked {
            warn!(terminal = %record.id, socket = %handle.socket().display(), "server lacks the engine's mark; not adopting");
            client.detach().await;
            return Ok(None);
        }
        let state = match pane_state(&client, pane).await {
            Ok(state) => state,
            Err(Error::Command { .. }) => {
                client.detach().await;
                return Ok(None);
            }
            Err(error) => {
                client.detach().await;
                return Err(error);
            }
        };
        if let Some(pid) = state.server_pid {
            handle.set_pid(pid);
        }
        let exit = match state.exit {
            // Dead without a status: tmux 3.3a lost the pane's SIGCHLD (its
            // program is an unreaped zombie). `wait_pane_exit` nudges the
            // server until the status shows, so an exited terminal is not
            // adopted as running.
            None if state.dead => {
                tokio::time::timeout(self.config.probe_timeout, wait_pane_exit(&client, pane))
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
            exit => exit,
        };
        let status = match exit {
            Some(exit) => TerminalStatus::Exited { exit },
            None => TerminalStatus::Running,
        };
        Ok(Some(TmuxTerminal::start(Parts {
            id: record.id.clone(),
            spec: record.spec.clone(),
            config: Arc::clone(&self.config),
            client,
            pane,
            server: handle,
            pane_process: ProcessId::now(state.pid.unwrap_or(0)),
            status,
            stream,
        })))
    }
}

impl Backend for TmuxBackend {
    fn kind(&self) -> &str {
        DEFAULT_KIND
    }

    fn spawn(&self, request: SpawnRequest) -> BoxFuture<'_, Result<Arc<dyn BackendTerminal>>> {
        Box::pin(self.spawn_terminal(request))
    }

    fn adopt<'a>(
        &'a self,
        record: &'a TerminalRecord,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn BackendTerminal>>>> {
        Box::pin(self.adopt_record(record))
    }

    fn reap<'a>(&'a self, records: &'a [TerminalRecord]) -> BoxFuture<'a, Result<ReapReport>> {
        Box::pin(reap::reap(&self.tmux, &self.config, records))
    }
}
