//! The registry commands of the CLI (`spawn`, `list`, `send`, ...): each
//! invocation opens the registry on the state directory (adopting what is
//! recorded there), acts, and drops it without killing anything, so
//! terminals persist across invocations.
//!
//! Output goes to the writer the caller passes; errors come back as
//! [`CliError`] for `main.rs` to print (`error: CODE: message`, or a JSON
//! object with `--json`) and turn into an exit code.

use std::io::Write;
use std::path::PathBuf;

use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{Backend, OwnerId, Registry, RegistryConfig};
use tmux_engine::{Error, Result};

use super::args::{Global, OWNER_ENV, SHELL_ENV, STATE_DIR_ENV, TerminalCommand};
use super::report::{CliError, EXIT_INTERRUPTED_BASE};

/// The state directory: the flag, `$TMUX_ENGINE_STATE_DIR`,
/// `$XDG_STATE_HOME/tmux-engine`, or `~/.local/state/tmux-engine`.
///
/// # Errors
///
/// `INVALID_INPUT` when none can be found (no `HOME`).
pub fn state_dir(global: &Global) -> Result<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = global
        .state_dir
        .clone()
        .or_else(|| env(STATE_DIR_ENV).map(PathBuf::from))
    {
        return Ok(dir);
    }
    if let Some(state) = env("XDG_STATE_HOME") {
        return Ok(PathBuf::from(state).join("tmux-engine"));
    }
    env("HOME")
        .map(|home| PathBuf::from(home).join(".local/state/tmux-engine"))
        .ok_or_else(|| {
            Error::InvalidInput(
                "no state directory: pass --state-dir or set TMUX_ENGINE_STATE_DIR or HOME"
                    .to_owned(),
            )
        })
}

/// The owner: the flag, `$TMUX_ENGINE_OWNER`, `$USER`, or `uid-N`.
///
/// # Errors
///
/// `INVALID_INPUT` for an invalid owner id.
pub fn owner(global: &Global) -> Result<OwnerId> {
    let name = global
        .owner
        .clone()
        .or_else(|| std::env::var(OWNER_ENV).ok().filter(|v| !v.is_empty()))
        .or_else(|| std::env::var("USER").ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| format!("uid-{}", rustix::process::getuid().as_raw()));
    OwnerId::new(name)
}

/// Opens the registry on the state directory with the tmux backend.
/// `supervise`: whether this process runs the `always` restart loops (a
/// long-lived `mcp`/`serve` does; a one-shot command does not);
/// `reap_grace` overrides the backend's reap grace period.
///
/// # Errors
///
/// tmux discovery, or the state directory's errors.
pub async fn open_registry(
    global: &Global,
    supervise: bool,
    reap_grace: Option<std::time::Duration>,
) -> Result<Registry> {
    open_registry_keeping(global, supervise, reap_grace, false).await
}

/// Environment variable naming the file the boot id is read from instead
/// of the kernel's (a test seam: a test "reboots" by changing it).
pub(crate) const BOOT_ID_FILE_ENV: &str = "TMUX_ENGINE_BOOT_ID_FILE";

/// The registry settings every face shares: the state directory, the
/// `always` loops, whether spawns keep their history unless they say
/// (`--keep-history`), and the boot id's file when the seam names one.
pub(crate) fn registry_config(dir: PathBuf, supervise: bool, keep_history: bool) -> RegistryConfig {
    let mut config = RegistryConfig::default()
        .state_dir(dir)
        .supervise(supervise)
        .keep_history(keep_history);
    if let Some(file) = std::env::var_os(BOOT_ID_FILE_ENV).filter(|v| !v.is_empty()) {
        config = config.boot_id_file(file);
    }
    config
}

/// [`open_registry`], with `keep_history` the spawns' default.
///
/// # Errors
///
/// As for [`open_registry`].
pub async fn open_registry_keeping(
    global: &Global,
    supervise: bool,
    reap_grace: Option<std::time::Duration>,
    keep_history: bool,
) -> Result<Registry> {
    let dir = state_dir(global)?;
    let mut config = TmuxConfig::for_state_dir(&dir);
    if let Some(grace) = reap_grace {
        config = config.reap_grace(grace);
    }
    if let Some(shell) = std::env::var_os(SHELL_ENV).filter(|v| !v.is_empty()) {
        config = config.shell(shell);
    }
    // Terminals are attached only when a verb needs one.
    let backend: std::sync::Arc<dyn Backend> = std::sync::Arc::new(TmuxBackend::new(config)?);
    let registry_config = registry_config(dir, supervise, keep_history);
    let (registry, _report) = Registry::open_with(registry_config, backend).await?;
    Ok(registry)
}

/// How long a finished command waits for its control connections to close.
pub(super) const DETACH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs one registry command, writing its output to `out`.
///
/// # Errors
///
/// The engine's error, or `TIMEOUT` (exit [`EXIT_TIMEOUT`]) when `wait`
/// gave up.
pub async fn run(
    global: &Global,
    command: TerminalCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let owner = owner(global)?;
    // Before anything attaches: a Ctrl-C or SIGTERM from here on ends the
    // command through the detach below, never by killing the process
    // mid-connection (see `ClientOptions::handshake_lock`).
    let mut interrupts = super::run::Interrupts::register()?;
    let registry = open_registry(global, false, command.reap_grace()?).await?;
    let result = tokio::select! {
        result = super::verbs::dispatch(&registry, &owner, global.json, command, out) => result,
        signal = interrupts.recv() => Err(CliError {
            code: "INTERRUPTED",
            message: format!("interrupted by signal {signal}; the terminals keep running"),
            exit: EXIT_INTERRUPTED_BASE.saturating_add(u8::try_from(signal).unwrap_or(0)),
        }),
    };
    // Let go of the terminals (they keep running) and wait until every
    // detach is done: one cut off by the runtime's end would leave without
    // the handshake lock (see `ClientOptions::handshake_lock`).
    let _ = tokio::time::timeout(DETACH_WAIT, registry.shutdown()).await;
    result
}

/// What a long-lived `serve` or `mcp` starts once it answers (serve: right
/// after it printed its URL): a `reap` in the background (only what is
/// proven unclaimed, a spawn a crash cut short included), so a crash
/// leaves no orphaned programs behind the next start. In the background
/// because a reap may take seconds (a server that does not answer, one
/// tmux 3.3a keeps until SIGKILL) and nothing that is served needs it:
/// it removes only what no record names, and adoption is lazy. A young
/// server directory cannot be judged at once (the `tmux` a crashed
/// spawner started may still be creating its server), so while any is
/// left the reap runs again, every [`REAP_AGAIN`], until none is left or
/// [`REAP_AGAIN_FOR`] has passed. Failures are logged, never fatal: the
/// terminals that exist still need serving.
pub(crate) fn reap_at_start(registry: &tmux_engine::registry::Registry) {
    let registry = registry.clone();
    tokio::spawn(async move {
        if reap_logged(&registry).await == 0 {
            return;
        }
        let until = tokio::time::Instant::now() + REAP_AGAIN_FOR;
        while tokio::time::Instant::now() < until {
            tokio::time::sleep(REAP_AGAIN).await;
            if reap_logged(&registry).await == 0 {
                break;
            }
        }
    });
}

/// How often [`reap_at_start`] looks again at young server directories.
const REAP_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// How long [`reap_at_start`] keeps looking: past the default reap grace,
/// a directory is no longer young and the next start judges it anyway.
const REAP_AGAIN_FOR: std::time::Duration = std::time::Duration::from_secs(90);

/// One reap, its removals and failures logged; the young directories it
/// had to leave.
async fn reap_logged(registry: &tmux_engine::registry::Registry) -> usize {
    match registry.reap().await {
        Ok(report) => {
            for removed in &report.removed {
                tracing::info!(%removed, "reaped at start");
            }
            for failure in &report.failures {
                tracing::warn!(%failure, "reaping at start");
            }
            report.young
        }
        Err(error) => {
            tracing::warn!(%error, "reaping at start");
            0
        }
    }
}
