//! The built-in `tmux` backend: one private tmux server per terminal,
//! driven through the control client.
//!
//! | file          | job                                                   |
//! |---------------|-------------------------------------------------------|
//! | `mod.rs`      | [`TmuxBackend`], spawn and adoption                   |
//! | `config.rs`   | [`TmuxConfig`]: runtime directory, shell, timeouts    |
//! | `locator.rs`  | [`TmuxLocator`]: the record's locator, typed          |
//! | `records.rs`  | what a record names: its processes, check, retire     |
//! | `reap.rs`     | removing what is proven unclaimed; socket checks      |
//! | `terminal.rs` | `TmuxTerminal`: its I/O and signals                   |
//! | `watcher.rs`  | the task that follows the pane: its stream, its death |
//! | `lifetime.rs` | close, shutdown, probe and respawn of one terminal    |
//! | `send.rs`     | sends and their wait conditions                       |
//! | `pages.rs`    | scrollback pages and the screen (`capture-pane`)      |
//! | `link.rs`     | `ServerLink`: what a terminal's tasks share           |
//!
//! Each terminal's server lives in its own `tmux-engine-XXXXXX` directory
//! under the backend's runtime directory (one per state directory, see
//! [`TmuxConfig::for_state_dir`]); the record's locator names that
//! directory, so a later engine process adopts the server by it. The
//! session is always named `main` and the pane is `%0`: no user text
//! reaches a tmux target.

mod command;
mod config;
mod full_screen;
mod lifetime;
mod link;
mod locator;
mod pages;
mod pool;
mod reap;
mod records;
mod send;
mod stream_link;
mod terminal;
mod watcher;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tracing::{debug, warn};

pub use config::TmuxConfig;
use config::server_options;
pub use locator::TmuxLocator;
use records::adopted_pane;
pub(crate) use terminal::TmuxTerminal;

use self::terminal::Parts;
use crate::control::PaneId;
use crate::control::client::ControlClient;
use crate::control::pane_exit::{pane_state, wait_pane_exit};
use crate::control::subscribe::SubscribeOptions;
use crate::registry::seam::{
    Backend, BackendHealth, BackendTerminal, ReapReport, RecordCheck, SpawnRequest, TerminalStatus,
};
use crate::registry::{Registry, RegistryConfig, ScanReport, TerminalId};
use crate::statedir::TerminalRecord;
use crate::terminal::{Parts as TerminalParts, launch};
use crate::tmux::command::TmuxCommand;
use crate::tmux::options::{MARK_OPTION, MARK_VALUE, rearm_drain};
use crate::tmux::{ServerHandle, Tmux};
use crate::tmux::{dirs, process};
use crate::{Error, Result};

/// What snapshots and records call this backend's terminals.
pub(crate) const KIND: &str = "tmux";

/// The one session of every terminal's server.
pub(crate) const SESSION: &str = "main";

/// The server option naming the terminal a server runs (its id), set in
/// the config file so a server carries it from its first instant: what
/// lets reap prove a server unclaimed.
pub(crate) const ID_OPTION: &str = "@tmux-engine-id";

/// The server option naming the (canonical) state directory whose
/// registry started the server; empty without one.
pub(crate) const STATE_OPTION: &str = "@tmux-engine-state";

/// The `tmux` backend.
#[derive(Debug)]
pub struct TmuxBackend {
    tmux: Arc<Tmux>,
    config: Arc<TmuxConfig>,
    /// Pre-started servers, when `config.pool_size` asks for them.
    pool: Arc<pool::Pool>,
}

/// Opens a registry on `state_dir` with the tmux backend configured by
/// `config` (e.g. [`TmuxConfig::for_state_dir`]): what the CLI, and any
/// program keeping persistent terminals, starts with.
///
/// # Errors
///
/// `TMUX_MISSING`, `TMUX_TOO_OLD`, or the state directory's errors (see
/// [`Registry::open_with`]).
pub async fn open_registry(
    state_dir: impl Into<PathBuf>,
    config: TmuxConfig,
) -> Result<(Registry, ScanReport)> {
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::new(config)?);
    Registry::open_with(RegistryConfig::default().state_dir(state_dir), backend).await
}

impl Registry {
    /// Opens a registry of tmux terminals on `state_dir` with the default
    /// settings ([`TmuxConfig::for_state_dir`]), adopting the terminals
    /// recorded there; what a program keeping persistent terminals starts
    /// with. Corrupt records and failed adoptions are logged; use
    /// [`open_registry`] for other settings or the [`ScanReport`].
    ///
    /// # Errors
    ///
    /// `TMUX_MISSING`, `TMUX_TOO_OLD`, or the state directory's errors (see
    /// [`Registry::open_with`]).
    pub async fn open(state_dir: impl AsRef<Path>) -> Result<Registry> {
        let state_dir = state_dir.as_ref();
        let config = TmuxConfig::for_state_dir(state_dir);
        Ok(open_registry(state_dir, config).await?.0)
    }
}

impl TmuxBackend {
    /// A backend using the discovered tmux (`TMUX_ENGINE_TMUX` or `PATH`).
    ///
    /// # Errors
    ///
    /// `TMUX_MISSING`, `TMUX_TOO_OLD`; `UNSAFE_DIRECTORY` when the runtime
    /// directory exists but is not private to the user; `INVALID_INPUT`
    /// for a setting out of range ([`TmuxConfig::check`]).
    pub fn new(config: TmuxConfig) -> Result<Self> {
        let backend = Self::with_tmux(Arc::new(Tmux::discover()?), config)?;
        // Refused at once (every CLI call opens a backend), not only at
        // the next spawn: adoption and reap read this directory too.
        if backend.config.runtime_dir.exists() {
            dirs::check_private(&backend.config.runtime_dir)?;
        }
        Ok(backend)
    }

    /// A backend using `tmux`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a setting out of range ([`TmuxConfig::check`]).
    pub fn with_tmux(tmux: Arc<Tmux>, config: TmuxConfig) -> Result<Self> {
        config.check()?;
        let config = Arc::new(config);
        Ok(TmuxBackend {
            pool: pool::Pool::new(Arc::clone(&tmux), Arc::clone(&config)),
            tmux,
            config,
        })
    }

    /// How many pre-started servers wait for a spawn (see
    /// [`TmuxConfig::pool_size`]).
    pub fn pooled(&self) -> usize {
        self.pool.ready()
    }

    /// The config.
    pub fn config(&self) -> &TmuxConfig {
        &self.config
    }

    /// Creates the runtime directory (0700) or checks the one there: it is
    /// a predictable path, possibly under a shared `/tmp`, so one made by
    /// anyone else, or open to group or other, is refused
    /// (`UNSAFE_DIRECTORY`), never used.
    fn ensure_runtime_dir(&self) -> Result<()> {
        if let Some(parent) = self.config.runtime_dir.parent() {
            // Created when missing (a named `TMUX_ENGINE_RUNTIME_DIR` may
            // not exist yet), then checked like every runtime base.
            dirs::runtime_base(Some(parent))?;
        }
        dirs::ensure_private(&self.config.runtime_dir)
    }

    async fn spawn_terminal(&self, request: SpawnRequest) -> Result<Arc<dyn BackendTerminal>> {
        self.ensure_runtime_dir()?;
        let cancelled = || Error::Cancelled(format!("spawn of terminal {}", request.id));
        // A restore prints first: its command is not a pooled server's.
        let taken = if self.config.pool_size > 0 && request.restore.is_none() {
            tokio::select! {
                taken = self.pool.take(&request.id, &request.spec) => taken?,
                () = request.cancel.cancelled() => return Err(cancelled()),
            }
        } else {
            None
        };
        let pooled = taken.is_some();
        let (parts, pane_process) = match taken {
            Some(taken) => (taken.parts, taken.pane_process),
            None => {
                let mut opts = server_options(&self.config, &request.id, &request.spec)?;
                if let Some(restore) = &request.restore {
                    opts.command =
                        restore_words(&restore.replay, &opts.command, opts.shell.as_deref());
                }
                let opts = opts.for_terminal(&self.tmux, None)?;
                let start = launch(
                    Arc::clone(&self.tmux),
                    opts,
                    self.config.client_options(),
                    SubscribeOptions::default(),
                );
                // Dropping the start future rolls back: `Server`'s drop kills
                // whatever started and removes its directory.
                let parts = tokio::select! {
                    started = start => started?,
                    () = request.cancel.cancelled() => return Err(cancelled()),
                };
                if request.cancel.is_cancelled() {
                    return match parts.server.kill().await {
                        Ok(()) => Err(cancelled()),
                        Err(cleanup) => Err(Error::BackendCleanup {
                            cause: Box::new(cancelled()),
                            cleanup: Arc::new(cleanup),
                        }),
                    };
                }
                let pane_process = parts.server.first_pane_process().known();
                (parts, pane_process)
            }
        };
        let TerminalParts {
            server,
            client,
            pane,
            output: stream,
            stream_epoch,
            ..
        } = parts;
        let terminal = TmuxTerminal::start(Parts {
            id: request.id,
            spec: request.spec,
            config: Arc::clone(&self.config),
            client,
            pane,
            server: server.into_detached(),
            pane_process,
            status: TerminalStatus::Running,
            stream,
            joined: false,
            origin: stream_epoch.map(|epoch| (epoch, 0)),
        });
        if pooled && let Some(stream) = terminal.stream() {
            // The replacement starts once this terminal printed (its
            // connect's prompt), not beside its respawn.
            self.pool.refill_after_output(stream.changes());
        }
        Ok(terminal)
    }

    async fn adopt_record(
        &self,
        record: &TerminalRecord,
    ) -> Result<Option<Arc<dyn BackendTerminal>>> {
        let locator = TmuxLocator::of(record);
        let Some(dir) = &locator.dir else {
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
        let recorded_server = locator.server;
        let deadline = tokio::time::Instant::now() + self.config.probe_timeout;
        let mut pause = Duration::from_millis(10);
        // The pane's relay, when one runs, serves this process too: the
        // same bytes, counted in the same epoch, as every other process.
        let mut linked = stream_link::existing(dir, self.config.probe_timeout).await;
        let (client, mut streams) = loop {
            // This client acknowledges the exit handshake's marker from
            // now on where no relay does (a server started without the
            // handshake has no fifo: nothing waits).
            let opts = self
                .config
                .client_options()
                .exit_handshake(Some(dir.clone()));
            let subscribe = [(pane, SubscribeOptions::default())];
            let attempt = if linked.is_some() {
                ControlClient::attach_quiet(&handle, opts, &subscribe).await
            } else {
                ControlClient::attach(&handle, opts, &subscribe).await
            };
            match attempt {
                Ok(connected) => break connected,
                // No server on the socket, or no session: dead. Except that
                // tmux 3.3a sometimes drops a new client ("server exited
                // unexpectedly") while another client of the same server is
                // going away, e.g. the previous engine's, killed just before:
                // while the recorded server lives, try again.
                Err(error @ (Error::ServerGone { .. } | Error::Command { .. })) => {
                    let live = recorded_server.is_some_and(|server| {
                        process::is_alive(server) && process::looks_like_tmux(server)
                    });
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
        // A failed query is no answer, not "not the engine's": the error
        // keeps the terminal unattached (not gone) for a later try.
        let checked = async {
            if client.command(&mark).await?.text().trim() != MARK_VALUE {
                warn!(terminal = %record.id, socket = %handle.socket().display(), "server lacks the engine's mark; not adopting");
                return Ok(None);
            }
            match pane_state(&client, pane).await {
                Ok(state) => Ok(Some(state)),
                Err(Error::Command { .. }) => Ok(None),
                Err(error) => Err(error),
            }
        };
        let state = match checked.await {
            Ok(Some(state)) => state,
            other => {
                client.detach().await;
                return other.map(|_| None);
            }
        };
        if let Some(pid) = state.server_pid {
            handle.set_pid(pid);
        }
        if linked.is_none() && !state.dead {
            // No relay (it was killed, or the server is older than relays):
            // a new one, for this process and every later one. Its stream is
            // a new one (what the pane printed meanwhile reached nobody).
            linked = stream_link::install(&client, pane, dir, &self.config).await;
            if linked.is_none() {
                // None could start: a drain of our own keeps a fast exit's
                // tail on the screen (this client's output rides `%output`).
                if let Err(error) = client.command(&rearm_drain(pane)).await {
                    debug!(terminal = %record.id, %error, "re-arming the drain pipe on adoption");
                }
            }
        }
        if !state.dead && linked.is_none() {
            // A program that ended while no engine was attached printed its
            // marker to nobody: its wrapper waits, every byte of it in tmux
            // by now (the pane's side of the pty stayed open). Let it go,
            // now that this client sees the pane's exit. (A relay
            // acknowledges the marker itself.)
            if crate::tmux::exit_handshake::acknowledge(dir) {
                debug!(terminal = %record.id, "acknowledged an exit that happened while detached");
            }
        }
        let origin = linked.as_ref().map(|linked| (linked.epoch, linked.start));
        // From the program's first byte when the relay holds it all.
        let joined = !linked.as_ref().is_some_and(|l| l.first && l.start == 0);
        if let Some(linked) = linked {
            client.attach_raw(pane, linked)?;
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
        let pane_process = adopted_pane(locator.pane_process, state.pid, state.dead);
        let replaying = origin.is_some().then(|| client.clone());
        let terminal = TmuxTerminal::start(Parts {
            id: record.id.clone(),
            spec: record.spec.clone(),
            config: Arc::clone(&self.config),
            client,
            pane,
            server: handle,
            pane_process,
            status,
            stream,
            joined,
            origin,
        });
        if let Some(client) = replaying {
            // Everything the relay held when this process linked is in the
            // stream before the terminal is used: a cursor another process
            // handed out reads its bytes at once.
            client.drain_raw(pane).await;
        }
        Ok(Some(terminal))
    }
}

/// The command of a terminal restored after a reboot: prints the replay file
/// byte for byte (`stty -opost`: no `\n` to `\r\n`, the bytes are the
/// terminal's own output already), removes it, then runs `command` (the
/// shell when it is empty).
fn restore_words(
    replay: &Path,
    command: &[std::ffi::OsString],
    shell: Option<&Path>,
) -> Vec<std::ffi::OsString> {
    const SCRIPT: &str = "stty -opost 2>/dev/null; cat -- \"$1\"; rm -f -- \"$1\"; \
        stty opost 2>/dev/null; shift; exec \"$@\"";
    let mut words: Vec<std::ffi::OsString> = vec![
        "/bin/sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "tmux-engine-restore".into(),
        replay.into(),
    ];
    if command.is_empty() {
        words.push(shell.unwrap_or(Path::new("/bin/sh")).into());
    } else {
        words.extend(command.iter().cloned());
    }
    words
}

impl Backend for TmuxBackend {
    fn kind(&self) -> &str {
        KIND
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

    fn check<'a>(&'a self, record: &'a TerminalRecord) -> BoxFuture<'a, Option<RecordCheck>> {
        Box::pin(async move { Some(self.check_record(record).await) })
    }

    fn retire<'a>(&'a self, record: &'a TerminalRecord) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.retire_record(record))
    }

    fn reap<'a>(
        &'a self,
        records: &'a [TerminalRecord],
        claimed: &'a [TerminalId],
    ) -> BoxFuture<'a, Result<ReapReport>> {
        Box::pin(async move {
            let own = self.pool.dirs();
            reap::reap(&self.tmux, &self.config, records, claimed, &own).await
        })
    }

    /// Usable when the tmux binary still runs for us, the runtime
    /// directory (where every server's socket goes) takes new entries, and
    /// a pool that has none ready can still start servers. Two `access(2)`
    /// calls and a lock: no process is started on a probe.
    fn health(&self) -> BackendHealth {
        use rustix::fs::{Access, access};
        let (pool_hits, pool_misses, failing) = self.pool.counts();
        let pool_ready = self.pool.ready();
        let tmux = self.tmux.path();
        let runtime = &self.config.runtime_dir;
        let problem = if let Err(e) = access(tmux, Access::EXEC_OK) {
            Some(format!("tmux cannot be run: {e}"))
        } else if runtime.exists()
            && let Err(e) = access(runtime, Access::WRITE_OK | Access::EXEC_OK)
        {
            Some(format!("the runtime directory is not writable: {e}"))
        } else if self.config.pool_size > 0 && pool_ready == 0 {
            failing.map(|why| format!("the pool cannot start tmux servers: {why}"))
        } else {
            None
        };
        BackendHealth {
            problem,
            pool_hits,
            pool_misses,
            pool_ready,
        }
    }
}
