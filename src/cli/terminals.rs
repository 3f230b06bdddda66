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
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::registry::tmux::{TmuxBackend, TmuxConfig};
use crate::registry::{
    Backend, OwnerId, ReadRequest, Registry, RegistryConfig, RestartPolicy, SendRequest, Signal,
    SpawnSpec, WaitFor,
};
use crate::{Error, Result};

/// Exit code of an engine error.
pub const EXIT_ERROR: u8 = 1;
/// Exit code of `wait` when its timeout passed first.
pub const EXIT_TIMEOUT: u8 = 4;
/// A command ended by SIGINT or SIGTERM exits with this plus the signal
/// number (130, 143), as a shell reports a process killed by it.
pub const EXIT_INTERRUPTED_BASE: u8 = 128;

/// Environment variable naming the default state directory.
pub const STATE_DIR_ENV: &str = "TMUX_ENGINE_STATE_DIR";
/// Environment variable naming the default owner.
pub const OWNER_ENV: &str = "TMUX_ENGINE_OWNER";
/// Environment variable pinning the shell of terminals spawned without a
/// command (default `$SHELL`).
pub const SHELL_ENV: &str = "TMUX_ENGINE_SHELL";

/// Options every registry command takes.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// State directory [default: $TMUX_ENGINE_STATE_DIR, else
    /// $XDG_STATE_HOME/tmux-engine, else ~/.local/state/tmux-engine].
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
    /// Owner of the terminals [default: $TMUX_ENGINE_OWNER, else the user name].
    #[arg(long, global = true)]
    pub owner: Option<String>,
    /// Print JSON (one object or array on stdout; errors as JSON on stderr).
    #[arg(long, global = true)]
    pub json: bool,
}

/// The registry commands.
#[derive(Subcommand, Debug, Clone)]
pub enum TerminalCommand {
    /// Start a terminal; prints its id (its snapshot with --json).
    Spawn(SpawnArgs),
    /// List the owner's terminals in creation order.
    List,
    /// Show one terminal.
    Show {
        /// Terminal id or name.
        target: String,
    },
    /// Type text into a terminal and print the output it produced.
    Send(SendArgs),
    /// Print a page of scrollback, counted back from the newest line.
    Read {
        /// Terminal id or name.
        target: String,
        /// Lines to skip back from the newest.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Lines to print.
        #[arg(long)]
        count: Option<usize>,
    },
    /// Print the visible screen.
    Screen {
        /// Terminal id or name.
        target: String,
    },
    /// Deliver a signal (INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 USR2)
    /// to the terminal's foreground process group.
    Signal {
        /// Terminal id or name.
        target: String,
        /// The signal, e.g. INT or SIGINT.
        signal: String,
    },
    /// Kill a terminal and its whole process tree.
    Kill {
        /// Terminal id or name.
        target: String,
    },
    /// Check whether a terminal is alive (recreating a dead on-attach one).
    Probe {
        /// Terminal id or name.
        target: String,
    },
    /// Wait until the terminal shows a text, matches a regex, or exits.
    Wait(WaitArgs),
    /// Print the terminal's control-mode events live, as JSON lines.
    Events {
        /// Terminal id or name.
        target: String,
    },
    /// Attach this terminal to the tmux session (tmux attach).
    Attach {
        /// Terminal id or name.
        target: String,
        /// Attach read-only.
        #[arg(long)]
        read_only: bool,
    },
    /// Remove servers and socket directories that no record names.
    Reap,
}

/// `spawn`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct SpawnArgs {
    /// A name unique among the owner's terminals.
    #[arg(long)]
    pub name: Option<String>,
    /// A free-form role, e.g. repl.
    #[arg(long)]
    pub role: Option<String>,
    /// never | on-attach | always.
    #[arg(long, default_value = "never")]
    pub restart: String,
    /// Working directory.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Environment variable K=V (repeatable).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Size as COLSxROWS.
    #[arg(long)]
    pub size: Option<String>,
    /// The program and its arguments (default: the shell).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `send`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct SendArgs {
    /// Terminal id or name.
    pub target: String,
    /// The text to type (exactly; see --stdin for bytes).
    pub text: Option<String>,
    /// Read the text from standard input instead (any bytes).
    #[arg(long)]
    pub stdin: bool,
    /// Press Enter after the text.
    #[arg(long)]
    pub submit: bool,
    /// idle | stdin | exit | none.
    #[arg(long, default_value = "idle")]
    pub wait: String,
    /// Give up waiting after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
}

/// `wait`'s arguments.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("until").required(true).args(["text", "regex", "exit"])))]
pub struct WaitArgs {
    /// Terminal id or name.
    pub target: String,
    /// Wait until this text appears on the screen or in recent scrollback.
    #[arg(long)]
    pub text: Option<String>,
    /// Wait until this regex matches a line of the screen or recent scrollback.
    #[arg(long)]
    pub regex: Option<String>,
    /// Wait until the program exits.
    #[arg(long)]
    pub exit: bool,
    /// Give up after this many seconds (default 30).
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
}

/// A failed command: its code, message and exit status.
#[derive(Debug)]
pub struct CliError {
    /// The stable code, e.g. `NO_TERMINAL`.
    pub code: &'static str,
    /// The message.
    pub message: String,
    /// The process exit status.
    pub exit: u8,
}

impl From<Error> for CliError {
    fn from(error: Error) -> Self {
        CliError {
            code: error.code(),
            message: error.to_string(),
            exit: EXIT_ERROR,
        }
    }
}

impl CliError {
    /// Writes the error as `error: CODE: message`, or as JSON.
    pub fn print(&self, json: bool, mut err: impl Write) {
        let _ = if json {
            writeln!(
                err,
                "{}",
                json!({"error": {"code": self.code, "message": self.message}})
            )
        } else {
            writeln!(err, "error: {}: {}", self.code, self.message)
        };
    }
}

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
///
/// # Errors
///
/// tmux discovery, or the state directory's errors.
pub async fn open_registry(global: &Global) -> Result<Registry> {
    let dir = state_dir(global)?;
    let mut config = TmuxConfig::for_state_dir(&dir);
    if let Some(shell) = std::env::var_os(SHELL_ENV).filter(|v| !v.is_empty()) {
        config = config.shell(shell);
    }
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::new(config)?);
    let (registry, _report) =
        Registry::open(RegistryConfig::default().state_dir(dir), [backend]).await?;
    Ok(registry)
}

pub(super) fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string(value)
        .map_err(|e| Error::io("encoding JSON", std::io::Error::other(e)))?;
    writeln!(out, "{text}").map_err(|e| Error::io("writing stdout", e))
}

pub(super) fn write_line(out: &mut dyn Write, text: &str) -> Result<()> {
    writeln!(out, "{text}").map_err(|e| Error::io("writing stdout", e))
}

fn seconds(value: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::InvalidInput(format!("{what} {value} is not a number of seconds")))
}

/// How long a finished command waits for its control connections to close.
const DETACH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
    let registry = open_registry(global).await?;
    let result = tokio::select! {
        result = super::verbs::dispatch(&registry, &owner, global.json, command, out) => result,
        signal = interrupts.recv() => Err(CliError {
            code: "INTERRUPTED",
            message: format!("interrupted by signal {signal}; the terminals keep running"),
            exit: EXIT_INTERRUPTED_BASE.saturating_add(u8::try_from(signal).unwrap_or(0)),
        }),
    };
    // Dropping the registry detaches; the terminals keep running. Wait for
    // the detaches to finish: one cut off by the runtime's end would leave
    // without the handshake lock (see `ClientOptions::handshake_lock`).
    drop(registry);
    let _ = tokio::time::timeout(DETACH_WAIT, crate::control::client::all_closed()).await;
    result
}

/// Builds a spec from `spawn`'s arguments.
pub(super) fn spawn_spec(args: SpawnArgs) -> Result<SpawnSpec> {
    let mut spec = SpawnSpec::new("tmux").restart(args.restart.parse::<RestartPolicy>()?);
    if let Some(name) = args.name {
        spec = spec.name(name);
    }
    if let Some(role) = args.role {
        spec = spec.role(role);
    }
    if let Some(cwd) = args.cwd {
        spec = spec.cwd(
            std::path::absolute(&cwd)
                .map_err(|e| Error::io(format!("resolving cwd {}", cwd.display()), e))?,
        );
    }
    for pair in args.env {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Error::InvalidInput(format!("environment {pair:?} is not K=V")))?;
        spec = spec.env(key, value);
    }
    if let Some(size) = args.size {
        let size: crate::vocab::Size = size.parse()?;
        spec = spec.size(size.cols, size.rows);
    }
    if !args.command.is_empty() {
        spec = spec.command(args.command);
    }
    Ok(spec)
}

/// A send request from `send`'s arguments and the text to type.
pub(super) fn send_request(args: &SendArgs, text: Vec<u8>) -> Result<SendRequest> {
    let wait = match args.wait.as_str() {
        "idle" => WaitFor::Idle,
        "stdin" => WaitFor::StdinRead,
        "exit" => WaitFor::Exit,
        "none" => WaitFor::None,
        other => {
            return Err(Error::InvalidInput(format!(
                "wait {other:?} is not one of idle, stdin, exit, none"
            )));
        }
    };
    Ok(SendRequest {
        text: text.into(),
        submit: args.submit,
        wait,
        timeout: args.timeout.map(|t| seconds(t, "timeout")).transpose()?,
    })
}

pub(super) fn read_request(offset: usize, count: Option<usize>) -> ReadRequest {
    ReadRequest { offset, count }
}

pub(super) fn parse_signal(text: &str) -> Result<Signal> {
    text.parse()
}

pub(super) fn wait_timeout(args: &WaitArgs) -> Result<Duration> {
    seconds(args.timeout, "timeout")
}
