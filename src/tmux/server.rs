//! One tmux server on a private socket: started hermetically, marked as the
//! engine's, killed on [`Server::kill`] or on drop.
//!
//! Each server lives in a fresh `tmux-engine-XXXXXX` directory of mode 0700
//! holding its socket and the engine's own config file; tmux never reads the
//! user's `~/.tmux.conf`. This module starts and stops servers and runs
//! one-shot `tmux` commands; the control connection is `control::client`'s
//! job (it spawns [`Server::control_command`]).

use std::ffi::OsString;
use std::fmt;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tempfile::TempDir;

use super::command::{TmuxCommand, check_name, quote};
use super::process;
use super::version::Tmux;
use crate::control::PaneId;
use crate::{Error, Result};

/// The socket's file name inside the server directory.
pub const SOCKET_NAME: &str = "tmux.sock";
/// The engine's config file inside the server directory.
pub const CONFIG_NAME: &str = "tmux.conf";
/// Prefix of every server directory, so orphans can be found and reaped.
pub const DIR_PREFIX: &str = "tmux-engine-";
/// Server option set on every engine server (`show -sv @tmux-engine`), so
/// a later process can tell the engine's servers from anyone else's.
pub const MARK_OPTION: &str = "@tmux-engine";
/// The value of [`MARK_OPTION`]: the version of this marking scheme.
pub const MARK_VALUE: &str = "1";
/// Environment variable naming the directory that holds server directories.
pub const RUNTIME_DIR_ENV: &str = "TMUX_ENGINE_RUNTIME_DIR";
/// The largest width or height tmux accepts for a window.
pub const MAX_SIZE: u16 = 10_000;

/// The longest socket path the platform's `sockaddr_un.sun_path` holds,
/// without its terminating NUL.
#[cfg(target_os = "linux")]
pub const MAX_SOCKET_PATH: usize = 107;
/// The longest socket path the platform's `sockaddr_un.sun_path` holds,
/// without its terminating NUL.
#[cfg(not(target_os = "linux"))]
pub const MAX_SOCKET_PATH: usize = 103;

/// How long a one-shot `tmux` command (including the start) may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server gets to exit after `kill-server` before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);
/// How long a `tmux kill-server` client may take inside `Drop`.
const DROP_CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// A terminal size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Size {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl Default for Size {
    /// 80x24, tmux's own default.
    fn default() -> Self {
        Size { cols: 80, rows: 24 }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.cols, self.rows)
    }
}

/// What to start: the program, its environment, and the server's settings.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The window size, fixed whatever clients attach (default 80x24).
    pub size: Size,
    /// The program and its arguments. Empty runs the default shell (see
    /// `shell`). One word is run by the shell as `SHELL -c WORD`; two or
    /// more are executed directly, with no shell quoting involved.
    pub command: Vec<OsString>,
    /// Pins the shell: sets tmux's `default-shell`, so it is the pane's
    /// program when `command` is empty and the shell for one-word commands.
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
    /// Lines of scrollback kept per pane (default 10000).
    pub history_limit: u32,
    /// The session's name (default `main`), checked by
    /// [`check_name`](super::check_name).
    pub session: String,
    /// Config lines appended after the engine's own, for tests. Trusted:
    /// written to the config file as they are, one line each.
    pub extra_config: Vec<String>,
    /// Where to create the server directory. `None`: `$TMUX_ENGINE_RUNTIME_DIR`,
    /// else `$XDG_RUNTIME_DIR` when it is a writable directory, else `/tmp`.
    pub runtime_dir: Option<PathBuf>,
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
            history_limit: 10_000,
            session: "main".to_owned(),
            extra_config: Vec::new(),
            runtime_dir: None,
        }
    }
}

/// The pane `new-session` created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstPane {
    /// Its id (`%0` on a fresh server).
    pub id: PaneId,
    /// The pid of its program.
    pub pid: u32,
}

/// A running tmux server on a private socket, with one session.
///
/// Dropping it kills the server (blocking the thread briefly) and removes
/// its directory; prefer [`Server::kill`] in async code.
#[derive(Debug)]
pub struct Server {
    tmux: Arc<Tmux>,
    /// `None` once killed, so `Drop` does nothing.
    dir: Option<TempDir>,
    dir_path: PathBuf,
    socket: PathBuf,
    config: PathBuf,
    name: String,
    target: String,
    pid: u32,
    first_pane: FirstPane,
    size: Size,
}

impl Server {
    /// Starts a server: creates its directory and config, runs
    /// `tmux -S SOCK -f CONF new-session -d ...`, pins the window size and
    /// reads back the server pid and the first pane.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad name, size, shell, cwd or
    /// variable; [`Error::SocketPathTooLong`] when the runtime directory is
    /// too deep; [`Error::Io`] when the directory or config cannot be
    /// written; [`Error::Command`] when tmux fails to start;
    /// [`Error::Unresponsive`] when it does not answer within
    /// [`RUN_TIMEOUT`].
    pub async fn start(tmux: Arc<Tmux>, opts: ServerOptions) -> Result<Server> {
        validate(&opts)?;
        let base = runtime_base(&opts)?;
        let dir = tempfile::Builder::new()
            .prefix(DIR_PREFIX)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&base)
            .map_err(|e| {
                Error::io(
                    format!("creating a server directory in {}", base.display()),
                    e,
                )
            })?;
        let dir_path = dir.path().to_path_buf();
        let socket = dir_path.join(SOCKET_NAME);
        check_socket_path(&socket)?;
        let config = dir_path.join(CONFIG_NAME);
        write_config(&config, &config_text(&opts)?)?;

        let target = format!("={}", opts.session);
        let argv = start_argv(&opts, &target)?;
        let mut cli = cli(&tmux, &socket, &config);
        cli.args(&argv);
        for (k, v) in &opts.server_env {
            cli.env(k, v);
        }
        let line = argv_text(&argv);
        let started = match output(cli, &line, RUN_TIMEOUT).await {
            Ok(out) => parse_start(&out, &line),
            Err(e) => Err(e),
        };
        let (pid, first_pane) = match started {
            Ok(v) => v,
            Err(e) => {
                // The server may have started before the failure: never
                // leave it running.
                let _ = output(
                    cli_args(&tmux, &socket, &config, ["kill-server"]),
                    "kill-server",
                    RUN_TIMEOUT,
                )
                .await;
                return Err(e);
            }
        };
        tracing::debug!(socket = %socket.display(), pid, pane = %first_pane.id, "tmux server started");
        Ok(Server {
            tmux,
            dir: Some(dir),
            dir_path,
            socket,
            config,
            name: opts.session,
            target,
            pid,
            first_pane,
            size: opts.size,
        })
    }

    /// The socket path (`tmux -S`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The server's private directory (mode 0700): socket and config.
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// The engine's config file the server was started with.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The exact session target, `=NAME`, for session commands
    /// (`has-session -t`, `attach-session -t`). Window and pane commands
    /// read `=NAME` as a *window* name: give them `=NAME:` instead.
    pub fn session(&self) -> &str {
        &self.target
    }

    /// The session's name, without the `=`.
    pub fn session_name(&self) -> &str {
        &self.name
    }

    /// The server's pid (`#{pid}`).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The pane the session started with.
    pub fn first_pane(&self) -> FirstPane {
        self.first_pane
    }

    /// The tmux binary running this server.
    pub fn tmux(&self) -> &Arc<Tmux> {
        &self.tmux
    }

    /// The fixed window size.
    pub fn size(&self) -> Size {
        self.size
    }

    /// True while the server process exists (checked by pid, no socket
    /// round trip).
    pub fn is_alive(&self) -> bool {
        process::is_alive(self.pid)
    }

    /// `tmux -u -S SOCK -C attach-session -t =NAME`, with piped stdio and
    /// killed on drop: the control client. `-u` because tmux sanitises every
    /// reply to a client it does not think is UTF-8.
    pub fn control_command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::from(self.tmux.command([
            OsString::from("-S"),
            self.socket.clone().into_os_string(),
            OsString::from("-C"),
            OsString::from("attach-session"),
            OsString::from("-t"),
            OsString::from(&self.target),
        ]));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `cmd` as a one-shot `tmux -S SOCK ...` process (the argv form,
    /// no control connection) and returns its standard output.
    ///
    /// # Errors
    ///
    /// [`Error::Command`] with tmux's stderr when it fails;
    /// [`Error::Unresponsive`] after [`RUN_TIMEOUT`]; [`Error::Io`] when
    /// tmux cannot be spawned.
    pub async fn run(&self, cmd: &TmuxCommand) -> Result<String> {
        let mut cli = cli(&self.tmux, &self.socket, &self.config);
        cli.args(cmd.argv());
        output(cli, cmd.line(), RUN_TIMEOUT).await
    }

    /// Kills the server: `kill-server`, waits for the process to exit
    /// (SIGKILL after a grace period), then removes the socket directory.
    ///
    /// # Errors
    ///
    /// [`Error::Unresponsive`] when the server survives SIGKILL;
    /// [`Error::Io`] when the signal or the directory removal fails.
    pub async fn kill(mut self) -> Result<()> {
        let Some(dir) = self.dir.take() else {
            return Ok(());
        };
        // Fails when the server is already gone, which is what we want.
        let _ = self.run(&TmuxCommand::new("kill-server")).await;
        if !process::wait_dead(self.pid, KILL_GRACE).await {
            tracing::warn!(
                pid = self.pid,
                "tmux server ignored kill-server; sending SIGKILL"
            );
            if process::looks_like_tmux(self.pid) {
                process::signal(self.pid, Signal::KILL)?;
            }
            if !process::wait_dead(self.pid, KILL_GRACE).await {
                return Err(Error::Unresponsive {
                    command: format!("kill-server (pid {} survived SIGKILL)", self.pid),
                    timeout: KILL_GRACE * 2,
                });
            }
        }
        dir.close().map_err(|e| {
            Error::io(
                format!("removing server directory {}", self.dir_path.display()),
                e,
            )
        })
    }

    /// `kill` without a runtime, for `Drop`: best effort, never panics.
    fn kill_blocking(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        let mut cli = cli_args(&self.tmux, &self.socket, &self.config, ["kill-server"]).into_std();
        cli.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match cli.spawn() {
            Ok(mut child) => {
                let deadline = Instant::now() + DROP_CLIENT_TIMEOUT;
                loop {
                    match child.try_wait() {
                        Ok(Some(_)) => break,
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        _ => {
                            let _ = child.kill();
                            let _ = child.wait();
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "spawning tmux kill-server on drop"),
        }
        if !process::wait_dead_blocking(self.pid, KILL_GRACE) {
            tracing::warn!(
                pid = self.pid,
                "tmux server ignored kill-server; sending SIGKILL"
            );
            if process::looks_like_tmux(self.pid) {
                let _ = process::signal(self.pid, Signal::KILL);
            }
            process::wait_dead_blocking(self.pid, KILL_GRACE);
        }
        if let Err(e) = dir.close() {
            tracing::warn!(dir = %self.dir_path.display(), error = %e, "removing server directory");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_blocking();
    }
}

/// Rejects options tmux would misread or silently replace.
fn validate(opts: &ServerOptions) -> Result<()> {
    check_name(&opts.session)?;
    let Size { cols, rows } = opts.size;
    if !(1..=MAX_SIZE).contains(&cols) || !(1..=MAX_SIZE).contains(&rows) {
        return Err(Error::InvalidInput(format!(
            "size {} is outside 1x1..{MAX_SIZE}x{MAX_SIZE}",
            opts.size
        )));
    }
    // tmux parses option numbers as int; a config error would put the
    // pane into view mode on tmux before 3.4.
    if i32::try_from(opts.history_limit).is_err() {
        return Err(Error::InvalidInput(format!(
            "history limit {} is over {}",
            opts.history_limit,
            i32::MAX
        )));
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
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(Error::InvalidInput(format!(
                "environment variable name {key:?} is empty or contains '=' or NUL"
            )));
        }
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
/// [`ServerOptions::runtime_dir`]), created when named but missing, made
/// absolute (a relative socket path would depend on the cwd).
fn runtime_base(opts: &ServerOptions) -> Result<PathBuf> {
    let named = opts.runtime_dir.clone().or_else(|| {
        std::env::var_os(RUNTIME_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let base = match named {
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| {
                Error::io(format!("creating runtime directory {}", dir.display()), e)
            })?;
            dir
        }
        None => std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| {
                dir.is_dir()
                    && rustix::fs::access(
                        dir,
                        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
                    )
                    .is_ok()
            })
            .unwrap_or_else(|| PathBuf::from("/tmp")),
    };
    std::path::absolute(&base)
        .map_err(|e| Error::io(format!("resolving runtime directory {}", base.display()), e))
}

/// Fails when `socket` does not fit in `sun_path`.
pub fn check_socket_path(socket: &Path) -> Result<()> {
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::SocketPathTooLong {
            path: socket.to_path_buf(),
            len,
            max: MAX_SOCKET_PATH,
        });
    }
    Ok(())
}

/// The engine's config file. Every line must be valid on every supported
/// tmux: before 3.4 an error puts the first pane into view mode.
fn config_text(opts: &ServerOptions) -> Result<String> {
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
    lines.extend(opts.extra_config.iter().cloned());
    let mut text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

fn write_config(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(format!("creating config {}", path.display()), e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| Error::io(format!("writing config {}", path.display()), e))
}

/// The format `new-session -P` prints: server pid, pane id, pane pid.
const START_FORMAT: &str = "#{pid} #{pane_id} #{pane_pid}";

/// `new-session -d ... -P -F FMT -- CMD ; set-option -w -t =NAME: window-size manual`.
fn start_argv(opts: &ServerOptions, target: &str) -> Result<Vec<OsString>> {
    let mut new = TmuxCommand::new("new-session")
        .flag("-d")
        // -s and -c are format-expanded: format_opt doubles `#`.
        .format_opt("-s", &opts.session)?
        .opt("-x", opts.size.cols.to_string())?
        .opt("-y", opts.size.rows.to_string())?
        .flag("-P")
        .opt("-F", START_FORMAT)?;
    if let Some(cwd) = &opts.cwd {
        let cwd = std::path::absolute(cwd)
            .map_err(|e| Error::io(format!("resolving cwd {}", cwd.display()), e))?;
        new = new.format_opt("-c", cwd.as_os_str().as_bytes())?;
    }
    for (key, value) in &opts.env {
        new = new.opt("-e", format!("{key}={value}"))?;
    }
    for word in &opts.command {
        new = new.arg(word.as_bytes())?;
    }
    // Per window, so clients that attach (a PTY fallback, a control client
    // that claims a size) never resize it.
    let pin = TmuxCommand::new("set-option")
        .flag("-w")
        .target(format!("{target}:"))?
        .arg("window-size")?
        .arg("manual")?;
    let mut argv = new.argv().to_vec();
    argv.push(OsString::from(";"));
    argv.extend_from_slice(pin.argv());
    Ok(argv)
}

fn argv_text(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses `PID %N PANE_PID` from the start command's output.
fn parse_start(out: &str, command: &str) -> Result<(u32, FirstPane)> {
    let bad = || Error::Command {
        command: command.to_owned(),
        message: format!("unexpected output {out:?} (expected \"PID %PANE PANE_PID\")"),
    };
    let mut words = out.lines().next().ok_or_else(bad)?.split(' ');
    let (Some(pid), Some(pane), Some(pane_pid), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(bad());
    };
    let pid = pid.parse().map_err(|_| bad())?;
    let id = pane.parse().map_err(|_| bad())?;
    let pane_pid = pane_pid.parse().map_err(|_| bad())?;
    Ok((pid, FirstPane { id, pid: pane_pid }))
}

/// `tmux -u -S SOCK -f CONF`, stdin closed, output captured, killed if the
/// caller gives up. `-f` on every call: a command that starts a server
/// (there should be none) still gets the engine's config.
fn cli(tmux: &Tmux, socket: &Path, config: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::from(tmux.command([
        OsString::from("-S"),
        socket.as_os_str().to_owned(),
        OsString::from("-f"),
        config.as_os_str().to_owned(),
    ]));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn cli_args<const N: usize>(
    tmux: &Tmux,
    socket: &Path,
    config: &Path,
    args: [&str; N],
) -> tokio::process::Command {
    let mut cmd = cli(tmux, socket, config);
    cmd.args(args);
    cmd
}

/// Runs a `tmux` CLI process to completion within `timeout`.
async fn output(mut cmd: tokio::process::Command, line: &str, timeout: Duration) -> Result<String> {
    let run = cmd.output();
    let out = match tokio::time::timeout(timeout, run).await {
        Ok(out) => out.map_err(|e| Error::io(format!("spawning tmux for `{line}`"), e))?,
        Err(_) => {
            return Err(Error::Unresponsive {
                command: line.to_owned(),
                timeout,
            });
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(Error::Command {
            command: line.to_owned(),
            message: if stderr.is_empty() {
                format!("tmux exited with {}", out.status)
            } else {
                stderr
            },
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_limit() {
        let ok = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH - 1)));
        assert!(check_socket_path(&ok).is_ok());
        let long = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH)));
        let err = check_socket_path(&long).expect_err("too long");
        assert_eq!(err.code(), "SOCKET_PATH_TOO_LONG");
        assert!(
            err.to_string()
                .contains(&format!("is {} bytes", MAX_SOCKET_PATH + 1))
        );
    }

    #[test]
    fn validates_options() {
        let cases: Vec<(ServerOptions, &str)> = vec![
            (
                ServerOptions {
                    session: "a:b".into(),
                    ..Default::default()
                },
                "name \"a:b\"",
            ),
            (
                ServerOptions {
                    size: Size { cols: 0, rows: 24 },
                    ..Default::default()
                },
                "size 0x24",
            ),
            (
                ServerOptions {
                    size: Size {
                        cols: 80,
                        rows: MAX_SIZE + 1,
                    },
                    ..Default::default()
                },
                "size 80x10001",
            ),
            (
                ServerOptions {
                    history_limit: u32::MAX,
                    ..Default::default()
                },
                "history limit",
            ),
            (
                ServerOptions {
                    shell: Some("bash".into()),
                    ..Default::default()
                },
                "shell bash",
            ),
            (
                ServerOptions {
                    cwd: Some("/nonexistent/dir".into()),
                    ..Default::default()
                },
                "cwd /nonexistent/dir",
            ),
            (
                ServerOptions {
                    env: vec![("A=B".into(), "c".into())],
                    ..Default::default()
                },
                "\"A=B\"",
            ),
            (
                ServerOptions {
                    extra_config: vec!["set -g status on\nkill-server".into()],
                    ..Default::default()
                },
                "line break",
            ),
        ];
        for (opts, want) in cases {
            let err = validate(&opts).expect_err(want);
            assert_eq!(err.code(), "INVALID_INPUT");
            assert!(err.to_string().contains(want), "{err} lacks {want}");
        }
        validate(&ServerOptions::default()).expect("defaults are valid");
    }

    #[test]
    fn start_argv_quotes_for_argv() {
        let opts = ServerOptions {
            session: "s#1".into(),
            command: vec!["sh".into(), "-c".into(), "echo x;".into()],
            env: vec![("K".into(), "v;".into())],
            ..Default::default()
        };
        let argv = start_argv(&opts, "=s#1").expect("valid");
        let text: Vec<_> = argv.iter().map(|a| a.to_str().expect("utf8")).collect();
        assert_eq!(
            text,
            [
                "new-session",
                "-d",
                "-s",
                "s##1",
                "-x",
                "80",
                "-y",
                "24",
                "-P",
                "-F",
                START_FORMAT,
                "-e",
                r"K=v\;",
                "--",
                "sh",
                "-c",
                r"echo x\;",
                ";",
                "set-option",
                "-w",
                "-t",
                "=s#1:",
                "--",
                "window-size",
                "manual",
            ]
        );
    }

    #[test]
    fn parses_start_output() {
        let (pid, pane) = parse_start("123 %0 456\n", "new-session").expect("parses");
        assert_eq!((pid, pane.id, pane.pid), (123, PaneId(0), 456));
        for bad in ["", "123 %0", "123 0 456", "x %0 456", "1 %0 2 3"] {
            let err = parse_start(bad, "new-session").expect_err(bad);
            assert_eq!(err.code(), "COMMAND_FAILED");
        }
    }

    #[test]
    fn config_is_hermetic_and_quoted() {
        let opts = ServerOptions {
            shell: Some("/bin/my shell;x".into()),
            history_limit: 500,
            size: Size {
                cols: 100,
                rows: 30,
            },
            ..Default::default()
        };
        let text = config_text(&opts).expect("valid");
        for want in [
            "set -s @tmux-engine \"1\"\n",
            "set -g remain-on-exit on\n",
            "set -g history-limit 500\n",
            "set -g default-size \"100x30\"\n",
            "set -g default-shell \"/bin/my shell\\;x\"\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        assert!(
            !text.contains("set -g window-size"),
            "global manual size crashes tmux"
        );
    }
}
