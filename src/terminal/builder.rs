//! [`TerminalBuilder`]: what a [`Terminal`] runs and how, with defaults a
//! newcomer never has to touch.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::Terminal;
use super::launch::launch;
use crate::control::client::{ClientOptions, Delivery};
use crate::control::subscribe::SubscribeOptions;
use crate::tmux::{ServerOptions, Tmux};
use crate::vocab::Size;
use crate::{Error, Result};

/// The default deadline of every wait.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines of scrollback tmux and the screen model keep by default.
pub(crate) const DEFAULT_SCROLLBACK: usize = 1000;

/// Configures and starts a [`Terminal`]: `Terminal::builder()`.
///
/// Defaults: the user's shell (`$SHELL`) at 80x24, the caller's
/// environment, 1000 lines of scrollback, waits of 10 s, tmux found on
/// `PATH` (or `TMUX_ENGINE_TMUX`).
#[derive(Clone, Debug)]
#[must_use]
pub struct TerminalBuilder {
    pub(crate) command: Vec<OsString>,
    pub(crate) shell: Option<PathBuf>,
    pub(crate) size: Size,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) server_env: Vec<(OsString, OsString)>,
    pub(crate) clear_env: bool,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) timeout: Duration,
    pub(crate) term: Option<String>,
    pub(crate) scrollback: usize,
    pub(crate) runtime_dir: Option<PathBuf>,
    pub(crate) tmux: Option<Arc<Tmux>>,
    pub(crate) extra_config: Vec<String>,
}

impl Default for TerminalBuilder {
    fn default() -> Self {
        TerminalBuilder {
            command: Vec::new(),
            shell: None,
            size: Size::default(),
            env: Vec::new(),
            server_env: Vec::new(),
            clear_env: false,
            cwd: None,
            timeout: DEFAULT_TIMEOUT,
            term: None,
            scrollback: DEFAULT_SCROLLBACK,
            runtime_dir: None,
            tmux: None,
            extra_config: Vec::new(),
        }
    }
}

impl TerminalBuilder {
    /// The program and its arguments, executed exactly as given (no shell
    /// parsing, one word included). Empty (the default) runs the shell.
    pub fn command<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.command = argv.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one argument to the command.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.command.push(arg.into());
        self
    }

    /// The shell run when there is no command (default `$SHELL`); an
    /// absolute path.
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = Some(shell.into());
        self
    }

    /// The size in character cells (default 80x24). It stays fixed
    /// whatever attaches, until [`Terminal::resize`].
    pub fn size(mut self, cols: u16, rows: u16) -> Self {
        self.size = Size { cols, rows };
        self
    }

    /// Sets a variable in the program's environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts from an empty environment instead of the caller's: only
    /// `PATH`, `HOME`, `USER`, `LANG`, `TERM` of the caller, and what
    /// [`env`](Self::env) sets, reach the program.
    pub fn env_clear(mut self) -> Self {
        self.clear_env = true;
        for key in ["PATH", "HOME", "USER", "LANG"] {
            if let Some(value) = std::env::var_os(key) {
                self.server_env.push((key.into(), value));
            }
        }
        self
    }

    /// The program's working directory (default: the caller's).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The deadline of every wait that does not name its own (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `TERM` for the program, and the terminal tmux emulates (tmux's
    /// `default-terminal`; default: tmux's own, `screen` or `tmux-256color`).
    pub fn term(mut self, term: impl Into<String>) -> Self {
        self.term = Some(term.into());
        self
    }

    /// Lines of scrollback tmux and the screen model keep (default 1000).
    pub fn scrollback(mut self, lines: usize) -> Self {
        self.scrollback = lines;
        self
    }

    /// Where the server's private directory goes (default:
    /// `$TMUX_ENGINE_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR`, else `/tmp`).
    pub fn runtime_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.runtime_dir = Some(dir.into());
        self
    }

    /// The tmux to use (default: discovered once per process).
    pub fn tmux(mut self, tmux: Arc<Tmux>) -> Self {
        self.tmux = Some(tmux);
        self
    }

    /// Starts the server and the program; the screen model follows the
    /// program's output from its first byte.
    ///
    /// # Errors
    /// `TMUX_MISSING`/`TMUX_TOO_OLD` from discovery, `INVALID_INPUT` for bad
    /// options (a size out of range, NUL in an argument), tmux start errors
    /// (`COMMAND_FAILED`, `SERVER_GONE`, `UNRESPONSIVE`). Nothing is left
    /// running on error.
    pub async fn start(self) -> Result<Terminal> {
        let tmux = match &self.tmux {
            Some(tmux) => tmux.clone(),
            None => discover()?,
        };
        let opts = self.server_options(&tmux)?;
        let subscribe = SubscribeOptions {
            delivery: Delivery::Resync,
            snapshot_first: false,
        };
        let parts = launch(tmux, opts, ClientOptions::default(), subscribe).await?;
        Ok(Terminal::from_parts(
            parts,
            self.size,
            self.scrollback,
            self.timeout,
        ))
    }

    /// The server options this builder describes.
    pub(crate) fn server_options(&self, tmux: &Tmux) -> Result<ServerOptions> {
        self.size.check()?;
        // Executed exactly, one word included: `ServerOptions` applies
        // `tmux::options::exec_words`.
        ServerOptions {
            size: self.size,
            command: self.command.clone(),
            shell: self.shell.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            server_env: self.server_env.clone(),
            clear_env: self.clear_env,
            history_limit: u32::try_from(self.scrollback).map_err(|_| {
                Error::InvalidInput(format!(
                    "scrollback of {} lines is too large",
                    self.scrollback
                ))
            })?,
            extra_config: self.extra_config.clone(),
            runtime_dir: self.runtime_dir.clone(),
            // The program's last bytes are on the screen before it exits
            // (the control client acknowledges the marker; see
            // `tmux::exit_handshake`).
            exit_handshake: true,
            ..ServerOptions::default()
        }
        .for_terminal(tmux, self.term.as_deref())
    }
}

/// The tmux found on `PATH` (or `TMUX_ENGINE_TMUX`), looked up once.
pub(crate) fn discover() -> Result<Arc<Tmux>> {
    static TMUX: OnceLock<Arc<Tmux>> = OnceLock::new();
    if let Some(tmux) = TMUX.get() {
        return Ok(tmux.clone());
    }
    let tmux = Arc::new(Tmux::discover()?);
    Ok(TMUX.get_or_init(|| tmux).clone())
}
