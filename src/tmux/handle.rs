//! A tmux server the engine does not own: [`ServerHandle`] addresses a
//! server by its private directory and never kills it on drop.
//!
//! The registry's terminals outlive the engine process, so their servers
//! cannot be [`Server`](super::Server)s (which kill on drop). A handle comes
//! from [`Server::into_detached`](super::Server::into_detached) after a
//! start, or from [`ServerHandle::open`] for a server found on disk (an
//! adopted terminal). Only the kill path stops the server
//! ([`ServerHandle::kill`] and its forms, in `kill.rs`).
//!
//! This module is the lower of the two: it owns a server directory's
//! layout ([`SOCKET_NAME`], [`CONFIG_NAME`]) and the one-shot `tmux` runner
//! ([`RUN_TIMEOUT`]) that [`Server`](super::Server) builds on; it never
//! imports `server`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use super::command::TmuxCommand;
use super::options::{MARK_OPTION, MARK_VALUE};
use super::procfs::ProcessId;
use super::version::Tmux;
use crate::{Error, Result};

/// The socket's file name inside the server directory.
pub const SOCKET_NAME: &str = "tmux.sock";
/// The engine's config file inside the server directory.
pub const CONFIG_NAME: &str = "tmux.conf";

/// Set (to anything but `0`), every engine control client is a `tmux -C`
/// process, as before the direct link: a way around a tmux the link
/// does not suit. See [`ServerHandle::links_directly`].
pub const CONTROL_PROCESS_ENV: &str = "TMUX_ENGINE_CONTROL_PROCESS";

/// How long a one-shot `tmux` command (including the start) may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(10);

/// A tmux server on a private socket that is not killed on drop.
#[derive(Debug, Clone)]
pub struct ServerHandle {
    tmux: Arc<Tmux>,
    dir: PathBuf,
    socket: PathBuf,
    config: PathBuf,
    name: String,
    target: String,
    /// The server process; pid 0 when unknown.
    pid: ProcessId,
}

impl ServerHandle {
    pub(super) fn from_parts(tmux: Arc<Tmux>, dir: PathBuf, name: String, pid: u32) -> Self {
        ServerHandle {
            socket: dir.join(SOCKET_NAME),
            config: dir.join(CONFIG_NAME),
            target: format!("={name}"),
            tmux,
            dir,
            name,
            pid: ProcessId::now(pid),
        }
    }

    /// A handle on the server whose directory (socket and config) is `dir`
    /// and whose one session is `session`. Nothing is checked: the server
    /// may be gone; its pid is unknown (0) until [`set_pid`](Self::set_pid).
    pub fn open(tmux: Arc<Tmux>, dir: impl Into<PathBuf>, session: &str) -> Self {
        Self::from_parts(tmux, dir.into(), session.to_owned(), 0)
    }

    /// The server's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The socket path (`tmux -S`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The handshake lock every engine control client of this server takes:
    /// the server's directory itself, `flock`ed (a lock file in it was an
    /// inode allocated per spawn), named with a trailing slash, so that a
    /// connect that finds the directory gone (a terminal killed meanwhile)
    /// can never create a file in its place (`EISDIR`); see
    /// [`ClientOptions::handshake_lock`](crate::control::client::ClientOptions::handshake_lock).
    pub fn control_lock(&self) -> PathBuf {
        self.dir.join("")
    }

    /// The engine's config file, in the server's directory.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The exact session target, `=NAME`.
    pub fn session(&self) -> &str {
        &self.target
    }

    /// The session's name, without the `=`.
    pub fn session_name(&self) -> &str {
        &self.name
    }

    /// The server's pid, 0 when unknown.
    pub fn pid(&self) -> u32 {
        self.pid.pid
    }

    /// The server process: its pid (0 when unknown) and start time, which
    /// keeps checks and signals off a process that reuses the pid.
    pub fn process(&self) -> ProcessId {
        self.pid
    }

    /// Records the server's pid (`#{pid}`), learnt from the server itself,
    /// with its start time read now (see [`ProcessId::now`]).
    pub fn set_pid(&mut self, pid: u32) {
        self.pid = ProcessId::now(pid);
    }

    /// The tmux binary.
    pub fn tmux(&self) -> &Arc<Tmux> {
        &self.tmux
    }

    /// `tmux -u -N -S SOCK -C attach-session -t =NAME` with piped stdio,
    /// killed on drop (the client, not the server).
    ///
    /// `-N`: `attach-session` starts a server when none answers the socket
    /// (tmux's `CMD_STARTSERVER`). On a dead server's stale socket that
    /// server has no session and exits again, but while it lives the
    /// socket listens, and a status check in between (another process's
    /// `list`) took the dead terminal for a running one.
    pub fn control_command(&self) -> tokio::process::Command {
        let mut args = vec![
            OsString::from("-N"),
            OsString::from("-S"),
            self.socket.clone().into_os_string(),
            OsString::from("-C"),
        ];
        args.extend(self.control_argv());
        let mut cmd = tokio::process::Command::from(self.tmux.command(args));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C at the engine's terminal must
            // reach the engine only, which then shuts tmux down in order.
            .process_group(0)
            .kill_on_drop(true);
        cmd
    }

    /// What a control client asks the server, after `-C`:
    /// `attach-session -t =NAME` ([`control_command`](Self::control_command)'s
    /// command; a direct link sends it as its `MSG_COMMAND`).
    pub fn control_argv(&self) -> Vec<OsString> {
        vec![
            OsString::from("attach-session"),
            OsString::from("-t"),
            OsString::from(&self.target),
        ]
    }

    /// Whether the engine's control clients link to a server's socket
    /// themselves (`tmux::client_protocol`) rather than through a
    /// `tmux -C` process: yes, unless `TMUX_ENGINE_CONTROL_PROCESS` is set
    /// to anything but `0` or empty. Read once per process.
    pub fn links_directly() -> bool {
        static DIRECT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DIRECT.get_or_init(|| {
            std::env::var_os(CONTROL_PROCESS_ENV).is_none_or(|v| v.is_empty() || v == "0")
        })
    }

    /// Runs `cmd` as a one-shot `tmux -S SOCK ...` process and returns its
    /// standard output.
    ///
    /// # Errors
    ///
    /// As [`Server::run`](super::Server::run).
    pub async fn run(&self, cmd: &TmuxCommand) -> Result<String> {
        self.run_within(cmd, RUN_TIMEOUT).await
    }

    /// [`run`](Self::run) giving the client `timeout`.
    pub(super) async fn run_within(&self, cmd: &TmuxCommand, timeout: Duration) -> Result<String> {
        let cmd = cmd.checked()?;
        let mut cli = self.cli();
        cli.args(cmd.argv());
        output(cli, cmd.line(), timeout).await
    }

    /// Whether a server answers on the socket and carries the engine's
    /// mark (`@tmux-engine`): `None` when none answers (no socket, or a
    /// stale one), `Some(false)` for a server that is not the engine's,
    /// which reapers must leave alone.
    pub async fn marked(&self) -> Option<bool> {
        if !self.socket.exists() {
            return None;
        }
        let mark = TmuxCommand::new("show-options")
            .flag("-sv")
            .arg(MARK_OPTION);
        let value = self.run(&mark).await.ok()?;
        Some(value.trim() == MARK_VALUE)
    }

    /// `tmux -u -S SOCK -f CONF` for a one-shot command (see [`cli`]).
    pub(super) fn cli(&self) -> tokio::process::Command {
        cli(&self.tmux, &self.socket, &self.config)
    }
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

/// Runs a `tmux` CLI process to completion within `timeout`.
pub(super) async fn output(
    mut cmd: tokio::process::Command,
    line: &str,
    timeout: Duration,
) -> Result<String> {
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
