//! A warm pool of pre-started servers: a spawn takes one and starts its
//! program in it instead of starting tmux.
//!
//! Each pooled server is a whole private server (its own directory,
//! socket, control client, raw output pipe) started with the backend's
//! options, its pane running a launcher that waits for its program
//! ([`crate::tmux::launcher`]) and prints nothing. A spawn takes one out
//! for good: it is stamped with the terminal's id, sized, and the spec's
//! program, cwd and environment are handed to the launcher, so the program
//! starts in the pane tmux already made (no `respawn-pane`, which was
//! most of a new terminal's connect time). A spec the launcher cannot
//! carry exactly is respawned into
//! the pane with the same [`respawn_commands`] as a restart. So a pooled
//! server is never shared (one terminal each, whoever its owner) and never
//! reused after a terminal ran in it. Taken servers are replaced in the
//! background.
//!
//! A pooled server carries the backend's marks with a placeholder id that
//! no record names, so a later engine's reap removes it like any other
//! unclaimed server; it is no terminal (no record), so nothing lists it.
//! Dropping the pool kills the servers it holds. Until it is taken it also
//! runs with `exit-unattached on`, its only client the engine's control
//! client: when the engine dies (SIGKILL included) the client's connection
//! ends and the server exits, even one still starting then: the `tmux -C`
//! process that starts it is killed by the kernel with the engine
//! ([`Starter::DiesWithEngine`]), which tmux 3.3a would otherwise keep, and
//! the server with it, had it replies left to write. A take turns it off
//! before anything else, so a terminal outlives the engine as always.
//!
//! A spec the pool cannot serve (server-level options a respawn cannot
//! change: another shell, environment, history, size of the server...)
//! starts fresh, as without a pool.

use std::sync::{Arc, Mutex, Weak};

use tokio::sync::watch;
use tracing::debug;

use super::config::server_options;
use super::{ID_OPTION, SESSION};
use crate::control::client::ClientOptions;
use crate::control::pane_exit::pane_state;
use crate::control::subscribe::SubscribeOptions;
use crate::registry::{SpawnSpec, TerminalId};
use crate::terminal::{Parts, Starter, launch_as};
use crate::tmux::command::{TmuxCommand, resize_window};
use crate::tmux::options::{launch_script, respawn_commands};
use crate::tmux::{ProcessId, ServerOptions, Tmux};
use crate::tmux::{exit_handshake, launcher};
use crate::vocab::Size;
use crate::{Error, Result};

use super::config::TmuxConfig;

/// The placeholder id of a pooled server: of a minted id's form (reap
/// reads it), with a time no minted id has, so no record ever names it.
const POOL_ID: &str = "t-0-0000000000000000";

/// Whether `id` is a pooled server's placeholder. A young one is never
/// taken for a spawn its spawner abandoned: a pool holds no spawn lock, so
/// without this a reap beside the pool (serve reaps in the background
/// while it serves) killed servers the pool was still starting.
pub(super) fn is_pooled(id: &str) -> bool {
    id == POOL_ID
}

/// How long a refill waits for a taken terminal's first output at most
/// (see [`Pool::refill_after_output`]): a program may print nothing.
const REFILL_DEFER: std::time::Duration = std::time::Duration::from_millis(250);

/// A waiting pooled server exits with its control client (see the module
/// doc); a take sets it back to the terminal default (off).
const DIES_WITH_ENGINE: &str = "set -s exit-unattached on";

/// The servers started ahead of spawns.
#[derive(Debug)]
pub(super) struct Pool {
    tmux: Arc<Tmux>,
    config: Arc<TmuxConfig>,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// Oldest first: taken first, so none waits forever.
    ready: std::collections::VecDeque<Parts>,
    /// Starts under way.
    starting: usize,
    /// Spawns a ready server served, and spawns that found none (or one
    /// that died as it was taken): `serve`'s metrics.
    hits: u64,
    misses: u64,
    /// Why the last start failed, until one succeeds: `serve`'s readiness.
    failing: Option<String>,
}

/// A pooled server turned into a terminal's.
pub(super) struct Taken {
    /// The server, client and subscribed pane, the program started in it.
    pub parts: Parts,
    /// The spec's program (the placeholder's pid is gone).
    pub pane_process: Option<ProcessId>,
}

impl Pool {
    pub(super) fn new(tmux: Arc<Tmux>, config: Arc<TmuxConfig>) -> Arc<Pool> {
        Arc::new(Pool {
            tmux,
            config,
            state: Mutex::new(PoolState::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many servers are ready to be taken.
    pub(super) fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    /// Hits, misses, and why starting servers fails, if it does.
    pub(super) fn counts(&self) -> (u64, u64, Option<String>) {
        let state = self.lock();
        (state.hits, state.misses, state.failing.clone())
    }

    fn count(&self, hit: bool) {
        let mut state = self.lock();
        if hit {
            state.hits += 1;
        } else {
            state.misses += 1;
        }
    }

    /// The directories of the servers ready to be taken: this engine's,
    /// which its own reap leaves alone however old (one still starting is
    /// young, see [`is_pooled`]).
    pub(super) fn dirs(&self) -> Vec<std::path::PathBuf> {
        let state = self.lock();
        state
            .ready
            .iter()
            .map(|parts| parts.server.dir().to_owned())
            .collect()
    }

    /// The options every pooled server is started with.
    fn options(&self) -> Result<ServerOptions> {
        let id = TerminalId::parse(POOL_ID)?;
        // The command only makes the options a program's (no shell
        // integration); the launcher runs in its place.
        let spec = SpawnSpec::new().command(["cat"]);
        let mut opts = server_options(&self.config, &id, &spec)?.for_terminal(&self.tmux, None)?;
        opts.extra_config.push(DIES_WITH_ENGINE.to_owned());
        opts.launcher = opts.exit_handshake;
        Ok(opts)
    }

    /// Starts servers in the background until `config.pool_size` are ready
    /// or starting. Needs a tokio runtime; does nothing without one.
    pub(super) fn refill(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let missing = {
            let mut state = self.lock();
            let have = state.ready.len() + state.starting;
            let missing = self.config.pool_size.saturating_sub(have);
            state.starting += missing;
            missing
        };
        for _ in 0..missing {
            let pool = Arc::downgrade(self);
            let (tmux, opts) = (Arc::clone(&self.tmux), self.options());
            let client = self.config.client_options();
            runtime.spawn(start_one(pool, tmux, opts, client));
        }
    }

    /// A ready server with `spec`'s program started in it, or `None`
    /// when none is ready, the spec needs what a respawn cannot give, or
    /// the server died as it was taken (the caller then starts fresh). A
    /// server that died while it waited is removed and the next one
    /// tried. Refills in the background at once unless it returns a
    /// server: then the caller refills with
    /// [`refill_after_output`](Pool::refill_after_output), so the new
    /// server's start is not on the new terminal's path (a refill at once
    /// forked a tmux server while the respawn and the shell ran).
    ///
    /// # Errors
    /// The respawn's or launch's failure while the server lives (the taken
    /// server is killed by then).
    pub(super) async fn take(
        self: &Arc<Self>,
        id: &TerminalId,
        spec: &SpawnSpec,
    ) -> Result<Option<Taken>> {
        let wanted = server_options(&self.config, id, spec)?.for_terminal(&self.tmux, None)?;
        if !self.serves(&wanted)? {
            return Ok(None);
        }
        let taken = self.take_ready(id, &wanted).await;
        self.count(matches!(taken, Ok(Some(_))));
        taken
    }

    /// [`take`](Pool::take) once the spec is one the pool serves.
    async fn take_ready(
        self: &Arc<Self>,
        id: &TerminalId,
        wanted: &ServerOptions,
    ) -> Result<Option<Taken>> {
        loop {
            let parts = self.lock().ready.pop_front();
            let Some(parts) = parts else {
                self.refill();
                return Ok(None);
            };
            if parts.client.closed_reason().is_some() {
                // It died while it waited (killed from outside): it was
                // no terminal's yet, so it goes and the next one is tried.
                debug!(terminal = %id, "a pooled server died while it waited");
                self.discard(parts).await;
                continue;
            }
            return match into_terminal(&parts, id, wanted).await {
                Ok(pane_process) => Ok(Some(Taken {
                    parts,
                    pane_process,
                })),
                Err(error) => {
                    // Its connection closed under the hand-over: the server
                    // died, not the spawn, which a fresh server then serves.
                    let died = parts.client.closed_reason().is_some();
                    self.discard(parts).await;
                    if died {
                        debug!(terminal = %id, %error, "a pooled server died as it was taken");
                        Ok(None)
                    } else {
                        Err(error)
                    }
                }
            };
        }
    }

    /// Gives up a server taken from the pool (dead, or failed as it was
    /// taken): one is started in its place, it is killed and its
    /// connection ends.
    async fn discard(self: &Arc<Self>, parts: Parts) {
        self.refill();
        let _ = parts.server.kill().await;
        parts.client.detach().await;
    }

    /// Refills once a taken terminal's output (`changes`, its stream's byte
    /// count) grows past the hand-over's, its first output being what a connect waits
    /// for, or after [`REFILL_DEFER`] for a program that prints nothing, or
    /// at once when the terminal is gone. Needs a tokio runtime; refills at
    /// once without one (none then, see [`refill`](Pool::refill)).
    pub(super) fn refill_after_output(self: &Arc<Self>, mut changes: watch::Receiver<u64>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.refill();
        };
        let pool = Arc::downgrade(self);
        runtime.spawn(async move {
            // Past the count at the hand-over: the placeholder printed
            // nothing, but a server that did must not refill at once.
            let at = *changes.borrow_and_update();
            let _ = tokio::time::timeout(REFILL_DEFER, changes.wait_for(|n| *n > at)).await;
            if let Some(pool) = pool.upgrade() {
                pool.refill();
            }
        });
    }

    /// Whether a pooled server started with the pool's options becomes one
    /// started with `wanted` by a respawn (program, cwd, env) and a resize.
    fn serves(&self, wanted: &ServerOptions) -> Result<bool> {
        Ok(respawnable(&self.options()?, wanted))
    }
}

/// Whether a server started with `pool` becomes one started with `wanted`
/// by [`into_terminal`]: equal but for what a respawn and a resize set (the
/// program, its cwd and env, the size) and the marks a take changes (the
/// id, [`DIES_WITH_ENGINE`]). By the derived equality of everything else,
/// so a field added to [`ServerOptions`] is compared without a word here.
fn respawnable(pool: &ServerOptions, wanted: &ServerOptions) -> bool {
    let fixed = |opts: &ServerOptions| {
        let mut opts = opts.clone();
        opts.command.clear();
        opts.cwd = None;
        opts.env.clear();
        opts.size = Size::default();
        opts.launcher = false;
        opts.extra_config
            .retain(|line| !line.contains(ID_OPTION) && line != DIES_WITH_ENGINE);
        opts
    };
    fixed(pool) == fixed(wanted)
}

async fn start_one(
    pool: Weak<Pool>,
    tmux: Arc<Tmux>,
    opts: Result<ServerOptions>,
    client: ClientOptions,
) {
    let started = match opts {
        Ok(opts) => {
            launch_as(
                tmux,
                opts,
                client,
                SubscribeOptions::default(),
                Starter::DiesWithEngine,
            )
            .await
        }
        Err(error) => Err(error),
    };
    let Some(pool) = pool.upgrade() else {
        // The pool is gone: so is what it started (dropping kills).
        return;
    };
    let mut state = pool.lock();
    state.starting = state.starting.saturating_sub(1);
    match started {
        Ok(parts) => {
            state.failing = None;
            state.ready.push_back(parts);
        }
        // No retry loop: the next take refills again.
        Err(error) => {
            debug!(%error, "starting a pooled server");
            // Its code only: the message names paths, and a probe shows it.
            state.failing = Some(error.code().as_str().to_owned());
        }
    }
}

/// Stamps the server with `id`, sizes its window and starts `wanted`'s
/// program in the pane: through the pane's launcher when it has one and
/// the spec allows ([`launch_script`]), else by `respawn-pane`; the
/// new program's process.
async fn into_terminal(
    parts: &Parts,
    id: &TerminalId,
    wanted: &ServerOptions,
) -> Result<Option<ProcessId>> {
    let client = &parts.client;
    let pane = parts.pane;
    // First: from here on the server is a terminal's and outlives us.
    let persist = TmuxCommand::new("set-option")
        .flag("-s")
        .arg("exit-unattached")
        .arg("off");
    let mark = TmuxCommand::new("set-option")
        .flag("-s")
        .arg(ID_OPTION)
        .arg(id.as_str());
    let resize = resize_window(pane, wanted.size);
    let launcher = parts.server.first_pane_process().pid;
    // The script only for a launcher still waiting for it.
    let waiting =
        launcher != 0 && exit_handshake::wrapped(launcher) == exit_handshake::Wrapped::Between;
    let script = if waiting {
        launch_script(wanted)?
    } else {
        None
    };
    if let Some(script) = script {
        // The program starts once the window has its size, so it reads
        // the right one from the start; no tmux command is left after it.
        let (persisted, marked, resized) = futures_util::join!(
            client.command(&persist),
            client.command(&mark),
            client.command(&resize),
        );
        persisted?;
        marked?;
        resized?;
        launcher::launch(parts.server.dir(), launcher, &script).await?;
        exit_handshake::started(launcher).await;
        // Running: the launcher has the script open (or its program ended
        // already); not yet running, it may still be opening it.
        if exit_handshake::wrapped(launcher) != exit_handshake::Wrapped::Between {
            launcher::forget(parts.server.dir(), &script);
        }
        debug!(terminal = %id, session = SESSION, "launched in a pooled server");
        return Ok(ProcessId::now(launcher).known());
    }
    // The pipe (raw or drain) survives a respawn: the new program's first
    // byte takes the same way as the placeholder's would have.
    let (respawn, _) = respawn_commands(wanted, pane)?;
    // Pipelined: the client queues each in the order its future is first
    // polled (`futures_util::join!` polls in order on every poll, unlike
    // tokio's, which rotates; the in-flight permits are FIFO), and
    // tmux runs them in that order, so the persist comes first as before,
    // and the pane state is read after the respawn. One round trip instead
    // of five (a new terminal's connect waited on each).
    let (persisted, marked, resized, respawned, state) = futures_util::join!(
        client.command(&persist),
        client.command(&mark),
        client.command(&resize),
        client.command(&respawn),
        pane_state(client, pane),
    );
    persisted?;
    marked?;
    resized?;
    respawned?;
    let state = state?;
    if state.dead && state.pid.is_none() {
        return Err(Error::ServerGone {
            reason: format!("pooled server of terminal {id}: the program did not start"),
        });
    }
    if let Some(pid) = state.pid {
        exit_handshake::started(pid).await;
    }
    debug!(terminal = %id, session = SESSION, "spawned into a pooled server");
    Ok(state.pid.and_then(|pid| ProcessId::now(pid).known()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a respawn sets may differ; anything else refuses the pool,
    /// whichever field it is (`exit_handshake` escaped the hand-written
    /// comparison this replaced).
    #[test]
    fn a_pooled_server_serves_only_options_a_respawn_can_reach() {
        let pool = ServerOptions::default()
            .command(vec!["cat".into()])
            .extra_config(vec![
                format!("set -s {ID_OPTION} {POOL_ID}"),
                DIES_WITH_ENGINE.to_owned(),
                "set -s @other 1".to_owned(),
            ]);
        let wanted = ServerOptions::default()
            .command(vec!["bash".into()])
            .cwd(Some("/tmp".into()))
            .env(vec![("A".to_owned(), "1".to_owned())])
            .size(Size {
                cols: 120,
                rows: 40,
            })
            .extra_config(vec![
                format!("set -s {ID_OPTION} t-1-0123456789abcdef"),
                "set -s @other 1".to_owned(),
            ]);
        assert!(respawnable(&pool, &wanted));
        let refused = [
            wanted.clone().history_limit(5),
            wanted.clone().exit_handshake(true),
            wanted.clone().drain_on_exit(false),
            wanted.clone().clear_env(true),
            wanted
                .clone()
                .raw_relay(wanted.raw_relay.is_none().then(|| "/relay".into())),
            wanted.clone().shell(Some("/bin/sh".into())),
            wanted
                .clone()
                .extra_config(vec!["set -s @other 2".to_owned()]),
        ];
        for other in refused {
            assert!(!respawnable(&pool, &other), "{other:?}");
        }
    }
}
