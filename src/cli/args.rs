//! The registry commands' arguments (clap types) and their one-way
//! conversion into the verb layer's requests (`tmux_engine::verbs`), whose
//! validation is every face's. No IO, no registry calls.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use tmux_engine::registry::{RestartPolicy, WaitFor};
use tmux_engine::verbs::{
    self, Arguments, CommandsRequest, ListRequest, ReadFormat, ReadRequest, RenameRequest,
    SearchRequest, SendRequest, SignalRequest, SpawnRequest, TerminalRequest, Verb, WaitRequest,
};
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
        /// Bytes of the whole answer (as JSON) at most [default: 65536].
        #[arg(long)]
        max_bytes: Option<usize>,
        /// Lines at most (the newest are kept).
        #[arg(long)]
        max_lines: Option<usize>,
        /// The output after this cursor (a `next_cursor` or a send's
        /// `cursor`), oldest first, instead of a page.
        #[arg(long, conflicts_with_all = ["offset", "count"])]
        since: Option<String>,
        /// With --since: lines | text | bytes (as written; raw on stdout,
        /// base64 in --json).
        #[arg(long, requires = "since")]
        format: Option<String>,
    },
    /// Search scrollback with a regex: one terminal's, or all of yours.
    Search {
        /// The regular expression (Rust regex syntax).
        regex: String,
        /// Only this terminal (id or name).
        #[arg(long)]
        terminal: Option<String>,
        /// Lines of context around each match (at most 10).
        #[arg(long)]
        context: Option<usize>,
        /// Matches at most (default 50, at most 500).
        #[arg(long)]
        max_matches: Option<usize>,
        /// Bytes of the whole answer (as JSON) at most [default: 65536].
        #[arg(long)]
        max_bytes: Option<usize>,
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
    /// Give a terminal a new name.
    Rename {
        /// Terminal id or name.
        target: String,
        /// The new name.
        name: String,
    },
    /// Check whether a terminal is alive (recreating a dead on-attach one).
    Probe {
        /// Terminal id or name.
        target: String,
    },
    /// Wait until the terminal shows a text, matches a regex, exits, or
    /// a command ends.
    Wait(WaitArgs),
    /// List the terminal's last commands (id, text, cursors, exit code,
    /// duration, running) as its output stream holds them.
    Commands {
        /// Terminal id or name.
        target: String,
        /// This many of the newest (default 20, at most 1000).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Record the terminal's output as asciicast v2 (asciinema) into FILE,
    /// from its screen now until it ends or Ctrl-C.
    Record {
        /// Terminal id or name.
        target: String,
        /// The recording to write (replaced).
        file: PathBuf,
        /// Bytes at most (default 64 MiB); later events are left out.
        #[arg(long)]
        limit: Option<u64>,
    },
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
    /// Working directory, an absolute path.
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
    /// Start the shell without the engine's prompt marks (no exact
    /// command output or exit codes from send).
    #[arg(long)]
    pub(crate) no_shell_integration: bool,
    /// Lines of scrollback to keep (default 10000, at most 1000000).
    #[arg(long)]
    pub(crate) history_limit: Option<u32>,
    /// A terminal for an agent: PAGER=cat, and an EDITOR that fails fast
    /// (--env overrides them; see docs/agents.md).
    #[arg(long)]
    pub(crate) agent: bool,
    /// Keep its output on disk under the state directory, so it comes
    /// back after a reboot (docs/history.md).
    #[arg(long)]
    pub(crate) keep_history: bool,
    /// A command line typed at the new prompt once it is restored after
    /// a reboot (e.g. `claude --resume`).
    #[arg(long, value_name = "LINE")]
    pub(crate) resume_command: Option<String>,
    /// Also write an asciicast v2 recording beside its kept history.
    #[arg(long)]
    pub(crate) record: bool,
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
    /// A key to press after the text, by tmux key name (Escape, Enter,
    /// C-c, Up, F1, ...; other text is typed as it is). Repeatable, in
    /// order.
    #[arg(long = "key", value_name = "KEY")]
    pub(crate) keys: Vec<String>,
    /// command (the default: until an integrated shell marks the
    /// command's end, else as stdin) | stdin (until the program waits for
    /// input again, e.g. the shell's prompt is back) | idle | exit | none.
    #[arg(long)]
    pub(crate) wait: Option<String>,
    /// Give up waiting after this many seconds.
    #[arg(long)]
    pub(crate) timeout: Option<f64>,
    /// Keep the command out of the shell's history.
    #[arg(long)]
    pub(crate) no_history: bool,
    /// Add the visible screen to the answer (`viewport`).
    #[arg(long)]
    pub(crate) include_screen: bool,
    /// Bytes of the whole answer (as JSON) at most [default: 65536].
    #[arg(long)]
    pub(crate) max_bytes: Option<usize>,
    /// Lines of output at most (the newest are kept).
    #[arg(long)]
    pub(crate) max_lines: Option<usize>,
}

/// `wait`'s arguments.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("until").required(true).args(["text", "regex", "exit", "command"])))]
pub(crate) struct WaitArgs {
    /// Terminal id or name.
    pub(crate) target: String,
    /// Wait until this text appears in a line of output (see --since).
    #[arg(long)]
    pub(crate) text: Option<String>,
    /// Wait until this regex matches a line of output (see --since).
    #[arg(long)]
    pub(crate) regex: Option<String>,
    /// Where --text and --regex look: command (the default: output after
    /// the newest command's start, never its echoed command line), screen
    /// (the screen and the last 200 lines), or a cursor EPOCH:OFFSET.
    #[arg(long)]
    pub(crate) since: Option<String>,
    /// Wait until the program exits.
    #[arg(long)]
    pub(crate) exit: bool,
    /// Wait until this command ends (an id from `commands`, or `last`);
    /// prints its output, or with --json its exit_code and duration_secs.
    #[arg(long)]
    pub(crate) command: Option<String>,
    /// Give up after this many seconds (default 30).
    #[arg(long, default_value_t = 30.0)]
    pub(crate) timeout: f64,
}

impl SpawnArgs {
    /// The verb layer's request these flags describe (its validation is
    /// every face's: a relative `--cwd` is refused, as over HTTP and MCP).
    pub(crate) fn request(self) -> Result<SpawnRequest> {
        let mut env = BTreeMap::new();
        for pair in self.env {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::InvalidInput(format!("environment {pair:?} is not K=V")))?;
            env.insert(key.to_owned(), value.to_owned());
        }
        let size = self.size.map(|size| size.parse::<Size>()).transpose()?;
        Ok(SpawnRequest {
            name: self.name,
            command: (!self.command.is_empty()).then_some(self.command),
            shell: self.shell,
            cwd: self.cwd,
            env: (!env.is_empty()).then_some(env),
            cols: size.map(|size| size.cols),
            rows: size.map(|size| size.rows),
            restart: Some(self.restart.parse::<RestartPolicy>()?),
            role: self.role,
            shell_integration: self.no_shell_integration.then_some(false),
            history_limit: self.history_limit,
            agent: self.agent.then_some(true),
            keep_history: self.keep_history.then_some(true),
            resume_command: self.resume_command,
            record: self.record.then_some(true),
        })
    }
}

impl SendArgs {
    /// The text to type: TEXT, or with `--stdin` what `stdin` reads (any
    /// bytes), never both.
    fn text(&self, stdin: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
        match (&self.text, self.stdin) {
            (Some(_), true) => Err(Error::InvalidInput(
                "give TEXT or --stdin, not both".to_owned(),
            )),
            (Some(text), false) => Ok(text.clone().into_bytes()),
            (None, true) => stdin(),
            (None, false) => Ok(Vec::new()),
        }
    }

    /// The verb layer's request for these flags, typing `text`.
    pub(crate) fn request(&self, text: Vec<u8>) -> Result<SendRequest> {
        let mut request = match String::from_utf8(text) {
            Ok(text) => SendRequest::new(self.target.clone(), text),
            // Any bytes, as `--stdin` promises.
            Err(bytes) => SendRequest::new(self.target.clone(), String::new())
                .with_bytes(bytes.into_bytes().into()),
        };
        request.submit = self.submit;
        request.keys = (!self.keys.is_empty()).then(|| self.keys.clone());
        // Absent: the verb layer's default, the same on every face.
        request.wait = self
            .wait
            .as_deref()
            .map(str::parse::<WaitFor>)
            .transpose()?;
        request.timeout_secs = self.timeout;
        request.include_screen = self.include_screen;
        request.history = self.no_history.then_some(false);
        request.max_bytes = self.max_bytes;
        request.max_lines = self.max_lines;
        Ok(request)
    }
}

impl WaitArgs {
    /// The verb layer's request (clap makes exactly one of the three
    /// conditions present).
    pub(crate) fn request(&self) -> WaitRequest {
        WaitRequest {
            terminal: self.target.clone(),
            text: self.text.clone(),
            regex: self.regex.clone(),
            exit: self.exit.then_some(true),
            command: self.command.clone(),
            since: self.since.clone(),
            timeout_secs: Some(self.timeout),
        }
    }
}

impl TerminalCommand {
    /// The verb of the table this command runs, and its request built
    /// from the flags (`stdin` read for `send --stdin` alone); `None` for
    /// a command of the CLI's own (probe, record, events, attach, reap).
    /// `cli/verbs.rs` runs every verb the same way: a new verb needs only
    /// its variant and its line here.
    pub(crate) fn verb_call(
        &self,
        stdin: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Option<Result<(&'static Verb, Arguments)>> {
        let named = |target: &String| TerminalRequest {
            terminal: target.clone(),
        };
        let call =
            |verb: &'static Verb, request: Result<Arguments>| Some(request.map(|r| (verb, r)));
        match self {
            TerminalCommand::Spawn(args) => {
                call(&verbs::SPAWN, args.clone().request().map(Arguments::typed))
            }
            TerminalCommand::List => call(&verbs::LIST, Ok(Arguments::typed(ListRequest {}))),
            TerminalCommand::Show { target } => {
                call(&verbs::SHOW, Ok(Arguments::typed(named(target))))
            }
            TerminalCommand::Send(args) => call(
                &verbs::SEND,
                args.text(stdin)
                    .and_then(|text| args.request(text))
                    .map(Arguments::typed),
            ),
            TerminalCommand::Read {
                target,
                offset,
                count,
                max_bytes,
                max_lines,
                since,
                format,
            } => {
                let request = format
                    .as_deref()
                    .map(str::parse::<ReadFormat>)
                    .transpose()
                    .map(|format| {
                        Arguments::typed(ReadRequest {
                            terminal: target.clone(),
                            offset: *offset,
                            count: *count,
                            max_bytes: *max_bytes,
                            max_lines: *max_lines,
                            since: since.clone(),
                            format,
                        })
                    });
                call(&verbs::READ, request)
            }
            TerminalCommand::Search {
                regex,
                terminal,
                context,
                max_matches,
                max_bytes,
            } => call(
                &verbs::SEARCH,
                Ok(Arguments::typed(SearchRequest {
                    terminal: terminal.clone(),
                    regex: regex.clone(),
                    context: *context,
                    max_matches: *max_matches,
                    max_bytes: *max_bytes,
                })),
            ),
            TerminalCommand::Screen { target } => {
                call(&verbs::SCREEN, Ok(Arguments::typed(named(target))))
            }
            TerminalCommand::Signal { target, signal } => call(
                &verbs::SIGNAL,
                Ok(Arguments::typed(SignalRequest {
                    terminal: target.clone(),
                    signal: signal.clone(),
                })),
            ),
            TerminalCommand::Kill { target } => {
                call(&verbs::KILL, Ok(Arguments::typed(named(target))))
            }
            TerminalCommand::Rename { target, name } => call(
                &verbs::RENAME,
                Ok(Arguments::typed(RenameRequest {
                    terminal: target.clone(),
                    name: name.clone(),
                })),
            ),
            TerminalCommand::Wait(args) => call(&verbs::WAIT, Ok(Arguments::typed(args.request()))),
            TerminalCommand::Commands { target, limit } => call(
                &verbs::COMMANDS,
                Ok(Arguments::typed(CommandsRequest {
                    terminal: target.clone(),
                    limit: *limit,
                })),
            ),
            TerminalCommand::Probe { .. }
            | TerminalCommand::Record { .. }
            | TerminalCommand::Events { .. }
            | TerminalCommand::Attach { .. }
            | TerminalCommand::Reap { .. } => None,
        }
    }

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
