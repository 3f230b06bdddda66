//! The registry commands' arguments (clap types) and their one-way
//! conversion into the registry's requests. No IO, no registry calls.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use tmux_engine::registry::{RestartPolicy, SendRequest, SpawnSpec, WaitCondition, WaitFor};
use tmux_engine::vocab::Size;
use tmux_engine::{Error, Result};

/// Environment variable naming the default state directory.
pub(crate) const STATE_DIR_ENV: &str = "TMUX_ENGINE_STATE_DIR";
/// Environment variable naming the default owner.
pub(crate) const OWNER_ENV: &str = "TMUX_ENGINE_OWNER";
/// Environment variable pinning the shell of terminals spawned without a
/// command (default `$SHELL`).
pub(crate) const SHELL_ENV: &str = "TMUX_ENGINE_SHELL";

/// Options every registry command takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct Global {
    /// State directory [default: $TMUX_ENGINE_STATE_DIR, else
    /// $XDG_STATE_HOME/tmux-engine, else ~/.local/state/tmux-engine].
    #[arg(long, global = true)]
    pub(crate) state_dir: Option<PathBuf>,
    /// Owner of the terminals [default: $TMUX_ENGINE_OWNER, else the user name].
    #[arg(long, global = true)]
    pub(crate) owner: Option<String>,
    /// Print JSON (one object or array on stdout; errors as JSON on stderr).
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

/// The registry commands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum TerminalCommand {
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
    Reap {
        /// Leave server directories younger than this many seconds alone
        /// (default 60): a spawn in another process may not have written
        /// its record yet. 0 when no spawn can be in flight.
        #[arg(long)]
        grace: Option<f64>,
    },
}

/// `spawn`'s arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct SpawnArgs {
    /// A name unique among the owner's terminals.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// A free-form role, e.g. repl.
    #[arg(long)]
    pub(crate) role: Option<String>,
    /// never | on-attach | always.
    #[arg(long, default_value = "never")]
    pub(crate) restart: String,
    /// Working directory.
    #[arg(long)]
    pub(crate) cwd: Option<PathBuf>,
    /// Environment variable K=V (repeatable).
    #[arg(long = "env")]
    pub(crate) env: Vec<String>,
    /// Size as COLSxROWS.
    #[arg(long)]
    pub(crate) size: Option<String>,
    /// A command line for the shell to parse (SHELL -c LINE), instead of
    /// a command's words.
    #[arg(long, value_name = "LINE", conflicts_with = "command")]
    pub(crate) shell: Option<String>,
    /// The program and its arguments, executed exactly (one word
    /// included; no shell parsing) [default: the shell].
    #[arg(last = true)]
    pub(crate) command: Vec<String>,
}

/// `send`'s arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct SendArgs {
    /// Terminal id or name.
    pub(crate) target: String,
    /// The text to type (exactly; see --stdin for bytes).
    pub(crate) text: Option<String>,
    /// Read the text from standard input instead (any bytes).
    #[arg(long)]
    pub(crate) stdin: bool,
    /// Press Enter after the text.
    #[arg(long)]
    pub(crate) submit: bool,
    /// idle | stdin | exit | none.
    #[arg(long, default_value = "idle")]
    pub(crate) wait: String,
    /// Give up waiting after this many seconds.
    #[arg(long)]
    pub(crate) timeout: Option<f64>,
}

/// `wait`'s arguments.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("until").required(true).args(["text", "regex", "exit"])))]
pub(crate) struct WaitArgs {
    /// Terminal id or name.
    pub(crate) target: String,
    /// Wait until this text appears on the screen or in recent scrollback.
    #[arg(long)]
    pub(crate) text: Option<String>,
    /// Wait until this regex matches a line of the screen or recent scrollback.
    #[arg(long)]
    pub(crate) regex: Option<String>,
    /// Wait until the program exits.
    #[arg(long)]
    pub(crate) exit: bool,
    /// Give up after this many seconds (default 30).
    #[arg(long, default_value_t = 30.0)]
    pub(crate) timeout: f64,
}

impl SpawnArgs {
    /// The spec these arguments describe.
    pub(crate) fn spec(self) -> Result<SpawnSpec> {
        let mut spec = SpawnSpec::new().restart(self.restart.parse::<RestartPolicy>()?);
        if let Some(name) = self.name {
            spec = spec.name(name);
        }
        if let Some(role) = self.role {
            spec = spec.role(role);
        }
        if let Some(cwd) = self.cwd {
            spec = spec.cwd(
                std::path::absolute(&cwd)
                    .map_err(|e| Error::io(format!("resolving cwd {}", cwd.display()), e))?,
            );
        }
        for pair in self.env {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::InvalidInput(format!("environment {pair:?} is not K=V")))?;
            spec = spec.env(key, value);
        }
        if let Some(size) = self.size {
            let size: Size = size.parse()?;
            spec = spec.size(size.cols, size.rows);
        }
        if !self.command.is_empty() {
            spec = spec.command(self.command);
        }
        if let Some(line) = self.shell {
            spec = spec.shell(line);
        }
        Ok(spec)
    }
}

impl SendArgs {
    /// The send request for these arguments and the text to type.
    pub(crate) fn request(&self, text: Vec<u8>) -> Result<SendRequest> {
        Ok(SendRequest {
            text: text.into(),
            submit: self.submit,
            wait: self.wait.parse::<WaitFor>()?,
            timeout: self.timeout.map(|t| seconds(t, "timeout")).transpose()?,
        })
    }
}

impl WaitArgs {
    /// What to wait for (clap makes exactly one of the three present).
    pub(crate) fn condition(&self) -> Result<WaitCondition> {
        match (&self.text, &self.regex) {
            (Some(text), _) => Ok(WaitCondition::Text(text.clone())),
            (None, Some(regex)) => WaitCondition::regex(regex),
            (None, None) => Ok(WaitCondition::Exit),
        }
    }

    /// The deadline.
    pub(crate) fn deadline(&self) -> Result<Duration> {
        seconds(self.timeout, "timeout")
    }
}

impl TerminalCommand {
    /// The reap grace period this command asks for, if it is `reap --grace`.
    pub(crate) fn reap_grace(&self) -> Result<Option<Duration>> {
        match self {
            TerminalCommand::Reap { grace: Some(grace) } => seconds(*grace, "grace").map(Some),
            _ => Ok(None),
        }
    }
}

fn seconds(value: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::InvalidInput(format!("{what} {value} is not a number of seconds")))
}
