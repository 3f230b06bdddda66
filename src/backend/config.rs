//! [`TmuxConfig`]: how the tmux backend runs terminals, and where their
//! servers live.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{ID_OPTION, SESSION, STATE_OPTION};
use crate::Result;
use crate::control::client::ClientOptions;
use crate::registry::{SpawnSpec, TerminalId};
use crate::tmux::ServerOptions;
use crate::tmux::command::quote;
use crate::tmux::dirs;
use crate::tmux::options::shell_words;
use crate::vocab::Size;

/// How the tmux backend runs terminals.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TmuxConfig {
    /// Where server directories are created; owned by this backend (reap
    /// removes what it finds there that no record names).
    pub runtime_dir: PathBuf,
    /// The pinned shell for terminals without a command and for shell lines
    /// ([`SpawnSpec::shell`]) whose spawn names none in its `env`'s
    /// `SHELL`; `None` uses the user's (`$SHELL`, else the login shell).
    pub shell: Option<PathBuf>,
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
    /// The state directory whose registry uses this backend, stamped on
    /// every server (the `@tmux-engine-state` server option) so reap only
    /// judges its own.
    pub state_dir: Option<PathBuf>,
    /// When set, every server (and so every terminal's program) starts with
    /// exactly this environment plus the spawn's own `env`, instead of
    /// inheriting the engine's: a long-lived server process (the web
    /// bridge) must not hand its own secrets to the shells it spawns.
    pub environment: Option<Vec<(OsString, OsString)>>,
    /// Servers kept started ahead of spawns (see `pool.rs`): a spawn then
    /// respawns its program into one instead of starting tmux. Default 0:
    /// every command-line call opens a backend, and a pool is worth its
    /// servers only in a long-lived process (`serve --pool`, default
    /// [`TmuxConfig::DEFAULT_POOL_SIZE`]). The pool fills after the first spawn.
    pub pool_size: usize,
    /// The output relay every terminal's pane is piped to (one resident
    /// process per terminal that numbers its bytes for every engine
    /// process, and writes its kept history), and the exit handshake's
    /// wrapper in front of each program; `None`: the default
    /// (`TMUX_ENGINE_RELAY`, else the one beside the `tmux-engine`
    /// binary, else none: output rides `%output`, and the wrapper is
    /// `/bin/sh`).
    pub relay: Option<PathBuf>,
    /// A terminal lets go of its control connection once it has been idle
    /// this long (no command under way, no event subscriber), and links
    /// again on its next command, unseen by callers: an idle terminal then
    /// costs no connection (two descriptors in this process, 64 KiB in
    /// its server). `None` keeps every connection. Only terminals read
    /// through their relay let go. Default [`TmuxConfig::IDLE_UNLINK`].
    pub idle_unlink: Option<Duration>,
    /// How long tmux may take to answer a terminal's control client before
    /// the engine says `UNRESPONSIVE` (a stopped server, or a machine under
    /// heavy load): a command unanswered this long fails so, and so does a
    /// link whose attach tmux has not answered (a spawn's, an adoption's, a
    /// relink after an idle let-go); nothing is reported gone for it. Every
    /// control client the backend makes takes it (spawn, adoption, pool).
    /// Shorter tells a stall sooner, and fails the commands of a machine
    /// only slow for a moment. Default [`TmuxConfig::CONTROL_TIMEOUT`];
    /// outside [`TmuxConfig::CONTROL_TIMEOUT_RANGE`] the backend refuses
    /// the config ([`TmuxConfig::check`]).
    pub control_timeout: Duration,
}

/// The warm pool size of a long-lived process such as `serve`.
pub(crate) const DEFAULT_POOL_SIZE: usize = 2;

impl TmuxConfig {
    /// The warm pool size of a long-lived process such as `serve`.
    pub const DEFAULT_POOL_SIZE: usize = DEFAULT_POOL_SIZE;

    /// How long a terminal stays linked once idle ([`TmuxConfig::idle_unlink`]):
    /// longer than the pauses of someone typing or of a harness between
    /// two commands, so a relink (a few milliseconds) is paid only after
    /// a real rest.
    pub const IDLE_UNLINK: Duration = Duration::from_secs(10);

    /// The default [`TmuxConfig::control_timeout`]: the control client's
    /// own default, long enough for a loaded machine's tmux.
    pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

    /// The [`TmuxConfig::control_timeout`]s the backend takes: below 10 ms
    /// a tmux that is merely busy would fail its commands, and past an
    /// hour a stalled one would hold every verb that long (and a deadline
    /// that far may not be representable).
    pub const CONTROL_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
        Duration::from_millis(10)..=Duration::from_secs(3600);

    /// A config with default values and server directories in
    /// `runtime_dir`.
    pub fn new(runtime_dir: impl Into<PathBuf>) -> Self {
        TmuxConfig {
            runtime_dir: runtime_dir.into(),
            shell: None,
            quiet: Duration::from_millis(300),
            send_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(3),
            output_buffer: 4 << 20,
            reap_grace: Duration::from_secs(60),
            state_dir: None,
            environment: None,
            pool_size: 0,
            relay: None,
            idle_unlink: Some(Self::IDLE_UNLINK),
            control_timeout: Self::CONTROL_TIMEOUT,
        }
    }

    /// Checks the settings a backend cannot run with; what
    /// [`TmuxBackend::with_tmux`](super::TmuxBackend::with_tmux) (and so
    /// [`TmuxBackend::new`](super::TmuxBackend::new)) asks first.
    ///
    /// # Errors
    /// `INVALID_INPUT` when [`TmuxConfig::control_timeout`] is outside
    /// [`TmuxConfig::CONTROL_TIMEOUT_RANGE`].
    pub fn check(&self) -> Result<()> {
        let range = Self::CONTROL_TIMEOUT_RANGE;
        if !range.contains(&self.control_timeout) {
            return Err(crate::Error::InvalidInput(format!(
                "control_timeout {:?} is outside {:?}..={:?}",
                self.control_timeout,
                range.start(),
                range.end()
            )));
        }
        Ok(())
    }

    /// Sets how long tmux may take to answer a control client
    /// ([`TmuxConfig::control_timeout`]; checked when a backend is made).
    #[must_use]
    pub fn control_timeout(mut self, timeout: Duration) -> Self {
        self.control_timeout = timeout;
        self
    }

    /// The options of every control client the backend makes: the
    /// defaults, with [`TmuxConfig::control_timeout`] as both the command
    /// and the ready timeout.
    pub(super) fn client_options(&self) -> ClientOptions {
        ClientOptions::default()
            .command_timeout(self.control_timeout)
            .ready_timeout(self.control_timeout)
    }

    /// Pipes every terminal's pane to `relay` (an executable that answers
    /// `tmux-engine-relay`'s arguments), whatever the default would be; it
    /// is each program's exit handshake wrapper too.
    pub fn relay(mut self, relay: impl Into<PathBuf>) -> Self {
        self.relay = Some(relay.into());
        self
    }

    /// The relay terminals are piped to (see [`TmuxConfig::relay`]).
    pub(super) fn relay_executable(&self) -> Option<PathBuf> {
        self.relay
            .clone()
            .or_else(crate::tmux::relay::default_relay)
    }

    /// The runtime directory for a registry on `state_dir`: the runtime
    /// base every server uses (`dirs::runtime_base_path`:
    /// `$TMUX_ENGINE_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR`, else `/tmp`) /
    /// `tmux-engine-registry-UID-HASH`,
    /// where HASH is a hash of the state directory's canonical path. Short
    /// (socket paths have a 107-byte limit) and distinct per state
    /// directory, so one registry's reap never touches another's servers.
    ///
    /// Creates the state directory (mode 0700) when it does not exist yet,
    /// so that its canonical path, and so the hash, is the same on the
    /// first call as on every later one, however the path was spelt.
    pub fn for_state_dir(state_dir: &Path) -> Self {
        let (base, _) = dirs::runtime_base_path(None);
        // Created private, as `StateDir::open` would (it checks it is).
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir);
        let canonical = std::fs::canonicalize(state_dir)
            .or_else(|_| std::path::absolute(state_dir))
            .unwrap_or_else(|_| state_dir.to_owned());
        let uid = rustix::process::getuid().as_raw();
        let hash = fnv1a(canonical.as_os_str().as_encoded_bytes());
        let mut config = Self::new(base.join(format!("tmux-engine-registry-{uid}-{hash:016x}")));
        config.state_dir = Some(canonical);
        config
    }

    /// Sets the state directory stamped on servers (see
    /// [`TmuxConfig::state_dir`]); canonicalised when it exists.
    #[must_use]
    pub fn with_state_dir(mut self, state_dir: impl Into<PathBuf>) -> Self {
        let dir = state_dir.into();
        self.state_dir = Some(std::fs::canonicalize(&dir).unwrap_or(dir));
        self
    }

    /// The value of [`STATE_OPTION`](super::STATE_OPTION) for this config's servers.
    pub(crate) fn state_mark(&self) -> String {
        self.state_dir
            .as_deref()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default()
    }

    /// Sets the pinned shell.
    #[must_use]
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = Some(shell.into());
        self
    }

    /// Sets how long an idle terminal keeps its control connection
    /// ([`TmuxConfig::idle_unlink`]); `None` keeps it for good.
    #[must_use]
    pub fn idle_unlink(mut self, linger: Option<Duration>) -> Self {
        self.idle_unlink = linger;
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

    /// Sets the warm pool's size (see [`TmuxConfig::pool_size`]).
    #[must_use]
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Sets the reap grace period.
    #[must_use]
    pub fn reap_grace(mut self, grace: Duration) -> Self {
        self.reap_grace = grace;
        self
    }
}

/// The options of the server that runs `spec` as terminal `id`, before
/// the engine's policy ([`ServerOptions::for_terminal`], applied at
/// spawn): what spawn starts, and what respawn runs again in place.
///
/// # Errors
/// `INVALID_INPUT` when `id` or the state directory cannot be quoted.
pub(super) fn server_options(
    config: &TmuxConfig,
    id: &TerminalId,
    spec: &SpawnSpec,
) -> Result<ServerOptions> {
    // In the config file, not set after the start: a server the engine
    // was killed while starting still says whose it is.
    let marks = vec![
        format!("set -s {ID_OPTION} {}", quote(id.as_str().as_bytes())?),
        format!(
            "set -s {STATE_OPTION} {}",
            quote(config.state_mark().as_bytes())?
        ),
    ];
    let shell = terminal_shell(config, spec)?;
    // Shell integration: the terminal's shell with the engine's rc.
    let integration = if spec.integrates_shell() {
        crate::shell::prepare(&shell, &crate::shell::rc_dir(&config.runtime_dir))?
    } else {
        None
    };
    let mut env: Vec<(String, String)> = spec
        .env
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut command = command_words(spec, Some(&shell));
    if let Some(integration) = integration {
        command = integration.words;
        env.extend(integration.env);
    }
    let defaults = ServerOptions::default();
    Ok(ServerOptions {
        size: spec.size.map_or_else(Size::default, |size| Size {
            cols: size.cols,
            rows: size.rows,
        }),
        command,
        shell: Some(shell),
        cwd: spec.cwd.clone(),
        env,
        history_limit: spec.history_limit.unwrap_or(defaults.history_limit),
        session: SESSION.to_owned(),
        runtime_dir: Some(config.runtime_dir.clone()),
        extra_config: marks,
        server_env: config.environment.clone().unwrap_or_default(),
        clear_env: config.environment.is_some(),
        // A program's last bytes reach the stream and the screen before
        // its pane dies, on the `%output` path too (tmux::exit_handshake);
        // each control client of the server acknowledges.
        exit_handshake: true,
        raw_relay: config.relay_executable(),
        ..defaults
    })
}

/// The shell of terminals without a command and of shell lines: the
/// config's, else the user's ([`crate::shell::user_shell`]).
pub(super) fn pinned_shell(config: &TmuxConfig) -> PathBuf {
    config
        .shell
        .clone()
        .unwrap_or_else(crate::shell::user_shell)
}

/// The shell of a terminal spawned as `spec`, interactive or running its
/// shell line: the one its `env`'s `SHELL` names
/// ([`crate::shell::find_shell`]: one rule on every face), else the pinned
/// one.
///
/// # Errors
/// `INVALID_INPUT` when `SHELL` names no executable.
pub(super) fn terminal_shell(config: &TmuxConfig, spec: &SpawnSpec) -> Result<PathBuf> {
    match spec.env.get("SHELL") {
        Some(named) => crate::shell::find_shell(named),
        None => Ok(pinned_shell(config)),
    }
}

/// The argv a spec runs: its words, or its shell line under `shell`. tmux
/// is then given [`exec_words`](crate::tmux::options::exec_words) of it (the
/// relay's exit wrapper: the words as they are), so words are executed exactly.
fn command_words(spec: &SpawnSpec, shell: Option<&Path>) -> Vec<OsString> {
    match &spec.shell {
        Some(line) => shell_words(shell, line),
        None => spec.command.iter().map(OsString::from).collect(),
    }
}

/// FNV-1a, 64 bits: stable across Rust versions (std's hasher is not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn control_timeouts_outside_the_range_are_refused() {
        let config = |timeout| TmuxConfig::new("/nonexistent").control_timeout(timeout);
        let cases = [
            (Duration::ZERO, false),
            (Duration::from_millis(9), false),
            (Duration::from_millis(10), true),
            (TmuxConfig::CONTROL_TIMEOUT, true),
            (Duration::from_secs(3600), true),
            (Duration::from_secs(3601), false),
            (Duration::MAX, false),
        ];
        for (timeout, ok) in cases {
            let checked = config(timeout).check();
            assert_eq!(checked.is_ok(), ok, "{timeout:?}: {checked:?}");
            if let Err(error) = checked {
                assert_eq!(error.code(), ErrorCode::InvalidInput, "{timeout:?}");
            }
        }
        assert_eq!(
            TmuxConfig::new("/nonexistent").control_timeout,
            TmuxConfig::CONTROL_TIMEOUT
        );
        insta::assert_snapshot!(
            config(Duration::ZERO).check().expect_err("zero"),
            @"invalid input: control_timeout 0ns is outside 10ms..=3600s"
        );
    }
}
