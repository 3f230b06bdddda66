//! What a server is started with: [`ServerOptions`], their validation, and
//! the config file and start command they become.
//!
//! Pure: builds text and argv, reads the environment for the runtime
//! directory, runs nothing. `server` writes and runs what this produces.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::Tmux;
use super::command::{TmuxCommand, quote};
use super::dirs;
use crate::vocab::{Size, check_env_name, check_name};
use crate::{Error, Result};

/// Server option set on every engine server (`show -sv @tmux-engine`), so
/// a later process can tell the engine's servers from anyone else's.
pub const MARK_OPTION: &str = "@tmux-engine";
/// The value of [`MARK_OPTION`]: the version of this marking scheme.
pub(crate) const MARK_VALUE: &str = "1";
/// What to start: the program, its environment, and the server's settings.
/// Built from `Default` with the setters: `ServerOptions::default()
/// .command(argv).size(Size { cols: 100, rows: 30 })`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The window size, fixed whatever clients attach (default 80x24).
    pub size: Size,
    /// The program and its arguments, executed exactly as given: no shell
    /// parsing, one word included (see `exec_words`). Empty runs the
    /// default shell (see `shell`). For a shell command line, pass
    /// `shell_words(shell, line)`.
    pub command: Vec<OsString>,
    /// Pins the shell: sets tmux's `default-shell`, so it is the pane's
    /// program when `command` is empty.
    /// Must be an absolute path to an existing file (tmux silently falls
    /// back to `/bin/sh` otherwise). `None` leaves tmux's default, `$SHELL`.
    pub shell: Option<PathBuf>,
    /// The pane's working directory; `None` inherits the engine's.
    pub cwd: Option<PathBuf>,
    /// Variables set in the session's environment (`new-session -e`), which
    /// the pane's program inherits.
    pub env: Vec<(String, String)>,
    /// Variables set in the tmux server process's own environment, on top of
    /// the engine's (minus `TMUX` and `TMUX_PANE`). tmux copies it into its
    /// global environment, so panes inherit these too.
    pub server_env: Vec<(OsString, OsString)>,
    /// Start the tmux server with an empty environment plus `server_env`,
    /// instead of the engine's: so nothing of the caller's environment
    /// (`ENV`, `BASH_ENV`, `PS1`, ...) reaches the pane unless named. tmux
    /// itself needs none of it (`-S`, `-f` and `-u` are always given).
    pub clear_env: bool,
    /// Lines of scrollback kept per pane (default 10000).
    pub history_limit: u32,
    /// Keep the last output of a program that exits at once (default on).
    ///
    /// tmux 3.3a destroys a pane on SIGCHLD even while the pty still holds
    /// unread output, unless the pane is piped (`window_pane_destroy_ready`
    /// only checks `FIONREAD` when `pipe-pane` is active): `printf done;
    /// exit` then loses `done` from the screen itself (seen 3 times in 150
    /// under load; 0 in 300 with the pipe). So the start command chains a
    /// `DRAIN_PIPE` onto `new-session`, which runs before tmux returns to
    /// its event loop and so before it can see the exit. (Not as an
    /// `after-new-session` hook: from a control client's argv chain, 3.3a
    /// then puts the pane in view mode.) Costs one `cat` per pane and a copy
    /// of the output; `run` turns it off (its exit handshake covers it).
    pub drain_on_exit: bool,
    /// The session's name (default `main`), checked by
    /// `check_name`.
    pub session: String,
    /// Config lines appended after the engine's own, for tests. Trusted:
    /// written to the config file as they are, one line each.
    pub extra_config: Vec<String>,
    /// The relay that carries the pane's output to the engine raw, without
    /// control mode's escaping (see [`super::relay`]); default
    /// `default_relay`. Used by servers
    /// a control client starts ([`Server::prepare`](super::Server::prepare));
    /// the pipe then also keeps a fast exit's last output, in place of
    /// `DRAIN_PIPE`. `None`, or a relay that cannot run: `%output`.
    /// With `exit_handshake`, an executable relay is the program's wrapper
    /// too (`RELAY __exit-wrapper ...`, which keeps its exact status), in
    /// any server; without one the wrapper is `/bin/sh`.
    pub raw_relay: Option<PathBuf>,
    /// Where to create the server directory. `None`: `$TMUX_ENGINE_RUNTIME_DIR`,
    /// else `$XDG_RUNTIME_DIR` when it is a writable directory, else `/tmp`.
    pub runtime_dir: Option<PathBuf>,
    /// Run `command` under the exit handshake's wrapper (docs/tmux-quirks.md,
    /// "A program that exits at once"): once the program ends, the wrapper
    /// prints a private marker (`ESC ] 8765;tmux-engine-exit BEL`) and the
    /// pane stays until the engine, having read everything before it,
    /// acknowledges through the server directory's fifo; a control client
    /// started by [`launch`](crate::terminal::launch) does. Without an
    /// acknowledgement the pane never dies. Default off; `Terminal` (so the
    /// fixture) and the registry turn it on. Not for an empty `command`
    /// (tmux's login shell is kept).
    pub exit_handshake: bool,
    /// Start the pane with a launcher that waits for its program
    /// (`tmux/launcher.rs`) in place of `command`: the warm pool's
    /// servers, whose program a spawn starts later without a
    /// `respawn-pane`. Needs `exit_handshake` (the launch runs its
    /// wrapper). Default off.
    pub launcher: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            size: Size::default(),
            command: Vec::new(),
            shell: None,
            cwd: None,
            env: Vec::new(),
            server_env: Vec::new(),
            clear_env: false,
            history_limit: 10_000,
            drain_on_exit: true,
            session: "main".to_owned(),
            extra_config: Vec::new(),
            raw_relay: super::relay::default_relay(),
            runtime_dir: None,
            exit_handshake: false,
            launcher: false,
        }
    }
}

impl ServerOptions {
    /// Applies the engine's policy for a terminal's server on `tmux`, on
    /// top of what the caller set: the one step `Terminal`'s builder (and
    /// so the fixture) and the registry's tmux backend share, so their
    /// servers do not drift apart.
    ///
    /// - `term`, when given: the program's `TERM` (in the server's
    ///   environment, which panes inherit) and the terminal tmux emulates
    ///   (`default-terminal`, ahead of `extra_config`).
    /// - An empty `remain-on-exit-format` where tmux has it (3.3+): the
    ///   default "Pane is dead" line scrolls a dead pane's screen up by
    ///   one; empty leaves the final screen as the program left it.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a `term` with a NUL.
    pub fn for_terminal(mut self, tmux: &Tmux, term: Option<&str>) -> Result<ServerOptions> {
        if let Some(term) = term {
            self.server_env.retain(|(key, _)| key != "TERM");
            self.server_env.push(("TERM".into(), term.into()));
            self.extra_config.insert(
                0,
                format!("set -g default-terminal {}", quote(term.as_bytes())?),
            );
        }
        if tmux.has_remain_on_exit_format() {
            self.extra_config
                .push("set -g remain-on-exit-format \"\"".to_owned());
        }
        Ok(self)
    }
}

setters!(ServerOptions {
    size: Size,
    command: Vec<OsString>,
    shell: Option<PathBuf>,
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
    server_env: Vec<(OsString, OsString)>,
    clear_env: bool,
    history_limit: u32,
    drain_on_exit: bool,
    session: String,
    extra_config: Vec<String>,
    raw_relay: Option<PathBuf>,
    runtime_dir: Option<PathBuf>,
    exit_handshake: bool,
    launcher: bool,
});

/// Runs a lone word: tmux hands a one-word command to `sh -c` (its own
/// rule, `spawn.c`), so `id>/tmp/p` would redirect. `env` executes it
/// instead (`--`: a word starting with `-` is not an option of `env`).
const ENV: &str = "/usr/bin/env";
/// Runs a lone word containing `=`, which `env` would take for an
/// assignment: `exec "$0"` is never an assignment and looks the word up on
/// `PATH` like `execvp`.
const SH: &str = "/bin/sh";
const EXEC_ARG0: &str = "exec \"$0\"";

/// The words tmux must be given so that it executes `argv` exactly, with no
/// shell parsing: the one rule behind every programmatic interface (the
/// server's start command, `Terminal`, the registry's spawn and respawn).
///
/// Empty stays empty (the shell); two or more words go unchanged (tmux
/// executes them with `execvp`); one word is run through `/usr/bin/env --`,
/// or `/bin/sh -c 'exec "$0"'` when it contains `=`.
///
/// # Errors
/// `INVALID_INPUT` for one word that both starts with `-` and contains `=`:
/// neither runner executes it unchanged.
pub(crate) fn exec_words(argv: &[OsString]) -> Result<Vec<OsString>> {
    let [word] = argv else {
        return Ok(argv.to_vec());
    };
    let bytes = word.as_bytes();
    match (bytes.starts_with(b"-"), bytes.contains(&b'=')) {
        (_, false) => Ok(vec![ENV.into(), "--".into(), word.clone()]),
        (false, true) => Ok(vec![SH.into(), "-c".into(), EXEC_ARG0.into(), word.clone()]),
        (true, true) => Err(Error::InvalidInput(format!(
            "command {word:?} starts with '-' and contains '=': no runner executes it as one word"
        ))),
    }
}

/// The words the exit handshake's wrapper is given to run `argv` exactly:
/// `argv` itself under the relay executable's wrapper (`relay`, see
/// [`wrapper_executable`](super::exit_handshake::wrapper_executable)),
/// which looks the program up and executes it with no shell, one word
/// included, else [`exec_words`] (the `/bin/sh` wrapper's `"$@"` would run
/// a builtin of that name, `cd` or `exit`, where tmux runs the file). Why:
/// `/usr/bin/env` in front of a lone word was one more exec per spawn
/// under the relay's wrapper, ~3 % of a spawn's CPU (perf, a spawn churn).
///
/// # Errors
/// As for [`exec_words`], without a relay.
fn wrapped_words(argv: &[OsString], relay: Option<&std::path::Path>) -> Result<Vec<OsString>> {
    match relay {
        Some(_) => Ok(argv.to_vec()),
        None => exec_words(argv),
    }
}

/// The words that run `line` through a shell, parsed as a shell command
/// line: `SHELL -c LINE`, with `/bin/sh` when no shell is pinned. The only
/// way the engine asks for shell parsing (`spawn --shell`).
pub(crate) fn shell_words(shell: Option<&std::path::Path>, line: &str) -> Vec<OsString> {
    let shell = shell.map_or_else(|| OsString::from(SH), |s| s.as_os_str().to_owned());
    vec![shell, "-c".into(), line.into()]
}

/// Rejects options tmux would misread or silently replace.
pub(super) fn validate(opts: &ServerOptions) -> Result<()> {
    check_name(&opts.session)?;
    // The one range check (each side, and the cells).
    opts.size.check()?;
    // tmux parses option numbers as int; a config error would put the
    // pane into view mode on tmux before 3.4.
    if i32::try_from(opts.history_limit).is_err() {
        return Err(Error::InvalidInput(format!(
            "history limit {} is over {}",
            opts.history_limit,
            i32::MAX
        )));
    }
    if opts.launcher && !opts.exit_handshake {
        return Err(Error::InvalidInput(
            "a launcher needs the exit handshake (it runs the wrapper)".to_owned(),
        ));
    }
    if let Some(shell) = &opts.shell
        && (!shell.is_absolute() || !shell.is_file())
    {
        return Err(Error::InvalidInput(format!(
            "shell {} is not an absolute path to a file",
            shell.display()
        )));
    }
    if let Some(cwd) = &opts.cwd
        && !cwd.is_dir()
    {
        return Err(Error::InvalidInput(format!(
            "cwd {} is not a directory",
            cwd.display()
        )));
    }
    for (key, _) in &opts.env {
        check_env_name(key)?;
    }
    for line in &opts.extra_config {
        if line.contains(['\n', '\r', '\0']) {
            return Err(Error::InvalidInput(format!(
                "extra config line {line:?} contains a line break or NUL"
            )));
        }
    }
    Ok(())
}

/// The directory that holds server directories (see
/// [`ServerOptions::runtime_dir`]): [`dirs::runtime_base`], the one
/// resolution every server shares.
pub(crate) fn runtime_base(opts: &ServerOptions) -> Result<PathBuf> {
    dirs::runtime_base(opts.runtime_dir.as_deref())
}

/// The engine's config file. Every line must be valid on every supported
/// tmux: before 3.4 an error puts the first pane into view mode.
pub(super) fn config_text(opts: &ServerOptions, tuned: bool) -> Result<String> {
    let mut lines = vec![
        "# Written by tmux-engine; tmux reads this instead of ~/.tmux.conf.".to_owned(),
        format!("set -s {MARK_OPTION} {}", quote(MARK_VALUE.as_bytes())?),
        // A dead pane stays with its exit status: "the program exited" is a
        // pane state (#{pane_dead}), never a vanished session.
        "set -g remain-on-exit on".to_owned(),
        // So the session only goes when killed, and then the server has
        // nothing left and exits instead of lingering as an orphan: "server
        // gone" means the terminal is gone.
        "set -s exit-empty on".to_owned(),
        "set -s exit-unattached off".to_owned(),
        "set -g destroy-unattached off".to_owned(),
        format!("set -g history-limit {}", opts.history_limit),
        format!(
            "set -g default-size {}",
            quote(opts.size.to_string().as_bytes())?
        ),
        "set -g status off".to_owned(),
        "set -g automatic-rename off".to_owned(),
        "set -g allow-rename off".to_owned(),
        // Not `set -g window-size manual`: with a global manual size tmux
        // (3.3a, up to 3.6a at least) dereferences NULL while creating any
        // window and the server dies (tmux PR #4849). The start command pins
        // the session's window instead.
    ];
    if let Some(shell) = &opts.shell {
        lines.push(format!(
            "set -g default-shell {}",
            quote(shell.as_os_str().as_bytes())?
        ));
    }
    if tuned {
        // Read before the first pane exists, so no program inherits the
        // server's allocator settings.
        lines.push(super::allocator::UNSET_LINE.to_owned());
    }
    lines.extend(opts.extra_config.iter().cloned());
    let mut text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

/// The `pipe-pane` command that keeps a pane's last output (see
/// [`ServerOptions::drain_on_exit`]); re-apply it after `respawn-pane`.
pub(crate) const DRAIN_PIPE: &str = "exec cat >/dev/null";

/// `pipe-pane -t PANE -- DRAIN_PIPE`: the drain put back on a pane whose
/// pipe may be a dead engine's raw relay (an adopted server), replacing
/// whatever pipe it has.
pub(crate) fn rearm_drain(pane: impl std::fmt::Display) -> TmuxCommand {
    TmuxCommand::new("pipe-pane").target(pane).arg(DRAIN_PIPE)
}

/// `pipe-pane -o -t TARGET -- DRAIN_PIPE` (see [`ServerOptions::drain_on_exit`]).
fn drain(target: impl std::fmt::Display) -> TmuxCommand {
    TmuxCommand::new("pipe-pane")
        .flag("-o")
        .target(target)
        .arg(DRAIN_PIPE)
}

/// `-c CWD -e KEY=VALUE... -- WORDS`: what to run, told to `new-session`
/// and `respawn-pane` alike, so a respawned program gets exactly what the
/// first one got (cwd, environment, [`exec_words`]).
fn program_args(mut command: TmuxCommand, opts: &ServerOptions) -> Result<TmuxCommand> {
    if let Some(cwd) = absolute_cwd(opts)? {
        // -c is format-expanded: format_opt doubles `#`.
        command = command.format_opt("-c", cwd.as_os_str().as_bytes());
    }
    for (key, value) in &opts.env {
        command = command.opt("-e", format!("{key}={value}"));
    }
    let relay = super::exit_handshake::wrapper_executable(opts.raw_relay.as_deref());
    let words = if opts.launcher {
        super::launcher::words(relay)
    } else if opts.exit_handshake && !opts.command.is_empty() {
        super::exit_handshake::wrap(wrapped_words(&opts.command, relay)?, relay)
    } else {
        exec_words(&opts.command)?
    };
    for word in words {
        command = command.arg(word.as_bytes());
    }
    command.checked()?;
    Ok(command)
}

/// `respawn-pane -k -t PANE ...`: the program of `opts` again in `pane`,
/// as the server's `new-session` ran it; with the drain pipe to write
/// right behind it when `opts.drain_on_exit`, so tmux runs both before
/// its event loop can see the new program exit. The drain is for a pane
/// with no pipe left: tmux keeps a pane's pipe across `respawn-pane`
/// (spawn.c closes only the pty), and `pipe-pane -o` closes an open one
/// (cmd-pipe-pane.c: `-o` opens a new pipe only where there was none), so
/// the caller sends it only when `#{pane_pipe}` is 0.
///
/// # Errors
/// `INVALID_INPUT` as for `new-session` (see [`exec_words`]); an I/O error
/// resolving `cwd`.
pub(crate) fn respawn_commands(
    opts: &ServerOptions,
    pane: impl std::fmt::Display + Copy,
) -> Result<(TmuxCommand, Option<TmuxCommand>)> {
    let respawn = TmuxCommand::new("respawn-pane").flag("-k").target(pane);
    let respawn = program_args(respawn, opts)?;
    Ok((respawn, opts.drain_on_exit.then(|| drain(pane))))
}

/// The launch file that starts `opts`'s program in a pooled pane's
/// launcher exactly as [`respawn_commands`] would (see
/// [`super::launcher`]), or `None` when it cannot: no exit handshake, no
/// words (tmux's own shell), or, for the shell launcher, an environment
/// name `sh` cannot assign. A pooled server's launcher is the one its own
/// options chose, and a pool serves only options equal to its own but for
/// what a respawn sets (the relay included), so the file fits it.
///
/// # Errors
/// As for [`respawn_commands`].
pub(crate) fn launch_script(opts: &ServerOptions) -> Result<Option<super::launcher::LaunchFile>> {
    if !opts.exit_handshake || opts.command.is_empty() {
        return Ok(None);
    }
    let relay = super::exit_handshake::wrapper_executable(opts.raw_relay.as_deref());
    let words = wrapped_words(&opts.command, relay)?;
    super::launcher::launch_file(relay, absolute_cwd(opts)?.as_deref(), &opts.env, &words)
}

/// `opts.cwd` made absolute, as `new-session`, `respawn-pane` and a launch
/// all get it.
fn absolute_cwd(opts: &ServerOptions) -> Result<Option<PathBuf>> {
    opts.cwd
        .as_ref()
        .map(|cwd| {
            std::path::absolute(cwd)
                .map_err(|e| Error::io(format!("resolving cwd {}", cwd.display()), e))
        })
        .transpose()
}

/// The format `new-session -P` prints: server pid, pane id, pane pid.
pub(super) const START_FORMAT: &str = "#{pid} #{pane_id} #{pane_pid}";

/// Whether `new-session` reports the first pane in its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StartMode {
    /// `-P -F` [`START_FORMAT`]: the reply block says the server pid and
    /// the first pane, for a caller that only waits for that block.
    Report,
    /// No report: the control client that starts the server asks itself.
    Quiet,
}

/// `new-session [-P -F FMT] ... -- CMD ; set-option -w -t =NAME: window-size manual`.
///
/// With `raw` (a relay's pipe command, see [`super::relay`]) the pipe is
/// the relay instead of the drain, and the control client's `%output` is
/// turned off in the same command list ([`super::relay::QUIET_OUTPUT`]):
/// both before tmux reads the pane's first byte, so the pipe carries all
/// of it and control mode none.
pub(super) fn start_argv(
    opts: &ServerOptions,
    target: &str,
    mode: StartMode,
    raw: Option<&str>,
) -> Result<Vec<OsString>> {
    let mut new = TmuxCommand::new("new-session")
        // -s and -c are format-expanded: format_opt doubles `#`.
        .format_opt("-s", &opts.session)
        .opt("-x", opts.size.cols.to_string())
        .opt("-y", opts.size.rows.to_string());
    if mode == StartMode::Report {
        new = new.flag("-P").opt("-F", START_FORMAT);
    }
    let mut argv = program_args(new, opts)?.argv().to_vec();
    if let Some(relay) = raw {
        let pipe = TmuxCommand::new("pipe-pane")
            .target(format!("{target}:"))
            .arg(relay);
        argv.push(OsString::from(";"));
        argv.extend_from_slice(pipe.argv());
        argv.push(OsString::from(";"));
        argv.extend(super::relay::QUIET_OUTPUT.iter().map(OsString::from));
    } else if opts.drain_on_exit {
        argv.push(OsString::from(";"));
        argv.extend_from_slice(drain(format!("{target}:")).argv());
    }
    // Per window, so clients that attach (a PTY fallback, a control client
    // that claims a size) never resize it.
    let pin = TmuxCommand::new("set-option")
        .flag("-w")
        .target(format!("{target}:"))
        .arg("window-size")
        .arg("manual");
    argv.push(OsString::from(";"));
    argv.extend_from_slice(pin.argv());
    Ok(argv)
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
