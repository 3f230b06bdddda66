//! One tmux server on a private socket: started hermetically, marked as the
//! engine's, killed on [`Server::kill`] or on drop.
//!
//! Each server lives in a fresh `tmux-engine-XXXXXX` directory of mode 0700
//! holding its socket and the engine's own config file; tmux never reads the
//! user's `~/.tmux.conf`. This module starts and stops servers and runs
//! one-shot `tmux` commands; the control connection is `control::client`'s
//! job (it spawns [`Server::control_command`]).

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use rustix::process::Signal;

use super::allocator;
use super::command::TmuxCommand;
pub use super::first_reply::FirstPane;
use super::first_reply::{first_reply, parse_start};
use super::handle::{RUN_TIMEOUT, ServerHandle};
use super::kill::KillRequest;
use super::options::{ServerOptions, StartMode, config_text, runtime_base, start_argv, validate};
use super::process;
use super::procfs::ProcessId;
use super::version::Tmux;
use crate::vocab::{PaneId, Size};
use crate::{Error, Result};

/// Prefix of every server directory, so orphans can be found and reaped.
pub const DIR_PREFIX: &str = "tmux-engine-";

/// The longest socket path the platform's `sockaddr_un.sun_path` holds,
/// without its terminating NUL.
#[cfg(target_os = "linux")]
pub const MAX_SOCKET_PATH: usize = 107;
/// The longest socket path the platform's `sockaddr_un.sun_path` holds,
/// without its terminating NUL.
#[cfg(not(target_os = "linux"))]
pub const MAX_SOCKET_PATH: usize = 103;

/// A running tmux server on a private socket, with one session.
///
/// Dropping it kills the server (blocking the thread briefly) and removes
/// its directory; prefer [`Server::kill`] in async code.
#[derive(Debug)]
pub struct Server {
    /// The addressing (binary, directory, socket, config, session, pid) and
    /// the stopping logic, which a detached server has as well; this value
    /// adds the ownership.
    handle: ServerHandle,
    /// Whether this value still has to kill the server: false once killed
    /// or detached, so `Drop` does nothing.
    owned: bool,
    first_pane: FirstPane,
    /// The first pane's program with its start time (pid 0 until started).
    pane_process: ProcessId,
    size: Size,
    /// See [`Server::raw_socket`].
    raw_socket: Option<std::path::PathBuf>,
    /// See [`Server::exit_handshake`].
    exit_handshake: bool,
    /// See [`Server::launcher`].
    launcher: bool,
}

/// The environment of a server's start command, which the server keeps.
struct StartEnv {
    /// Set on top of the engine's (or of nothing, when `clear`): the
    /// caller's, then [`allocator::SERVER_TUNABLES`] where
    /// `allocator::tunes` says so.
    vars: Vec<(OsString, OsString)>,
    /// Start from an empty environment instead of the engine's.
    clear: bool,
}

impl Server {
    /// Starts a server and lets go of the client that started it: the
    /// same `tmux -C new-session ...` as [`Server::prepare`]'s command
    /// (one way to start a server), which also reports the server pid and
    /// first pane in its reply. The client detaches once that reply is in;
    /// the session stays. For a caller with its own client on the server
    /// later (tests, tools); a program's output before that client attaches
    /// is on its screen, not in any stream. A raw relay in `opts` is not
    /// set up: nobody listens for it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad name, size, shell, cwd or
    /// variable; [`Error::SocketPathTooLong`] when the runtime directory is
    /// too deep; [`Error::Io`] when the directory or config cannot be
    /// written; [`Error::Command`] when tmux fails to start or its reply is
    /// not the report; [`Error::Unresponsive`] when it does not answer
    /// within 10 s. Nothing is left running on error.
    pub async fn start(tmux: Arc<Tmux>, opts: ServerOptions) -> Result<Server> {
        let opts = ServerOptions {
            raw_relay: None,
            ..opts
        };
        let (mut server, command, line) = Self::prepare_as(tmux, opts, StartMode::Report)?;
        let started = match tokio::time::timeout(RUN_TIMEOUT, first_reply(command, &line)).await {
            Ok(Ok(reply)) => parse_start(&reply, &line),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Unresponsive {
                command: line,
                timeout: RUN_TIMEOUT,
            }),
        };
        match started {
            Ok((pid, first_pane)) => {
                server.set_started(pid, first_pane);
                Ok(server)
            }
            Err(e) => {
                if let Err(cleanup) = server.kill().await {
                    tracing::warn!(error = %cleanup, "cleaning up after a failed start");
                }
                Err(e)
            }
        }
    }

    /// Prepares a server without starting tmux: its directory, socket path
    /// and config. The server starts when the returned command runs: a
    /// `tmux -u -S SOCK -f CONF -C new-session ...` control client whose
    /// argv command creates the session, so that client is attached before
    /// the program writes its first byte (a client attached afterwards
    /// misses that output). Once it is up, call [`Server::set_started`].
    ///
    /// Dropping the server before or after the command ran still kills
    /// whatever started, by socket.
    ///
    /// # Errors
    ///
    /// As [`Server::start`], minus the tmux failures, which surface when the
    /// command runs.
    pub fn prepare(
        tmux: Arc<Tmux>,
        opts: ServerOptions,
    ) -> Result<(Server, tokio::process::Command)> {
        let (server, command, _) = Self::prepare_as(tmux, opts, StartMode::Quiet)?;
        Ok((server, command))
    }

    /// [`Server::prepare`] with the report `mode`; also the start command's
    /// text, for errors.
    fn prepare_as(
        tmux: Arc<Tmux>,
        opts: ServerOptions,
        mode: StartMode,
    ) -> Result<(Server, tokio::process::Command, String)> {
        let (server, argv, env) = Self::create(tmux, opts, mode)?;
        let line = argv_text(&argv);
        let mut args = vec![
            OsString::from("-S"),
            server.socket().as_os_str().to_owned(),
            OsString::from("-f"),
            server.config().as_os_str().to_owned(),
            OsString::from("-C"),
        ];
        args.extend(argv);
        let mut cmd = tokio::process::Command::from(server.tmux().command(args));
        if env.clear {
            cmd.env_clear();
        }
        for (k, v) in &env.vars {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C at the engine's terminal must
            // reach the engine only, which then shuts tmux down in order.
            .process_group(0)
            .kill_on_drop(true);
        Ok((server, cmd, line))
    }

    /// Records the server pid and first pane of a server started through
    /// [`Server::prepare`]'s command.
    pub fn set_started(&mut self, pid: u32, first_pane: FirstPane) {
        self.handle.set_pid(pid);
        self.first_pane = first_pane;
        // Read now, while the pane is known to be this server's child (tmux
        // just reported it): from then on a recycled pid cannot pass for it.
        self.pane_process = ProcessId::now(first_pane.pid);
        tracing::debug!(
            socket = %self.socket().display(),
            pid,
            pane = %first_pane.id,
            "tmux server started"
        );
    }

    /// The directory, config and start argv of a server not yet running,
    /// and the environment its start command runs with.
    fn create(
        tmux: Arc<Tmux>,
        opts: ServerOptions,
        mode: StartMode,
    ) -> Result<(Server, Vec<OsString>, StartEnv)> {
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
        // Fresh from mkdtemp, so private by construction; checked anyway,
        // as tmux checks its socket directory.
        super::dirs::check_private(dir.path())?;
        let handle =
            ServerHandle::from_parts(tmux, dir.path().to_path_buf(), opts.session.clone(), 0);
        check_socket_path(handle.socket())?;
        let tuned = allocator::tunes(&opts.server_env, opts.clear_env);
        write_config(handle.config(), &config_text(&opts, tuned)?)?;
        // Before tmux runs: the wrapper opens it once the program ended.
        let handshake = opts.exit_handshake && (!opts.command.is_empty() || opts.launcher);
        if handshake {
            super::exit_handshake::make_fifo(dir.path())?;
        }
        // Before tmux runs too: the launcher opens it at once.
        if opts.launcher {
            super::launcher::make_fifo(dir.path())?;
        }

        // The engine process must be listening there when tmux runs the
        // pipe: the relay links it first.
        let raw_socket = dir.path().join(super::relay::RAW_SOCKET);
        let raw = opts
            .raw_relay
            .as_ref()
            .and_then(|relay| super::relay::pipe_command(relay, dir.path(), false));
        let argv = start_argv(&opts, handle.session(), mode, raw.as_deref())?;
        // Owned from here on, before tmux runs: if starting fails or the
        // caller's future is dropped, `kill` or `Drop` stops whatever did
        // start (by socket; the pid is not known yet) and removes the
        // directory.
        let _ = dir.keep();
        let server = Server {
            handle,
            owned: true,
            first_pane: FirstPane {
                id: PaneId(0),
                pid: 0,
            },
            pane_process: ProcessId::default(),
            size: opts.size,
            raw_socket: raw.map(|_| raw_socket),
            exit_handshake: handshake,
            launcher: opts.launcher,
        };
        let mut vars = opts.server_env;
        if tuned {
            vars.push((
                allocator::VARIABLE.into(),
                allocator::SERVER_TUNABLES.into(),
            ));
        }
        let env = StartEnv {
            vars,
            clear: opts.clear_env,
        };
        Ok((server, argv, env))
    }

    /// Where the pane's raw output relay connects (see
    /// [`relay`](super::relay)), when the start command pipes the pane to
    /// one: the engine must listen there before the command runs. `None`:
    /// the pane's output rides `%output`.
    pub fn raw_socket(&self) -> Option<&Path> {
        self.raw_socket.as_deref()
    }

    /// Whether the pane's program runs under the exit handshake (see
    /// [`exit_handshake`](super::exit_handshake)): its wrapper waits for
    /// an [`acknowledge`](super::exit_handshake::acknowledge) in this
    /// server's directory once it has printed the marker.
    pub(crate) fn exit_handshake(&self) -> bool {
        self.exit_handshake
    }

    /// Whether the pane runs a launcher waiting for its program (see
    /// [`launcher`](super::launcher)): the warm pool's servers.
    pub(crate) fn launcher(&self) -> bool {
        self.launcher
    }

    /// The socket path (`tmux -S`).
    pub fn socket(&self) -> &Path {
        self.handle.socket()
    }

    /// The server's private directory (mode 0700): socket and config.
    pub fn dir(&self) -> &Path {
        self.handle.dir()
    }

    /// The engine's config file the server was started with.
    pub fn config(&self) -> &Path {
        self.handle.config()
    }

    /// The exact session target, `=NAME`, for session commands
    /// (`has-session -t`, `attach-session -t`). Window and pane commands
    /// read `=NAME` as a *window* name: give them `=NAME:` instead.
    pub fn session(&self) -> &str {
        self.handle.session()
    }

    /// The session's name, without the `=`.
    pub fn session_name(&self) -> &str {
        self.handle.session_name()
    }

    /// The server's pid (`#{pid}`).
    pub fn pid(&self) -> u32 {
        self.handle.pid()
    }

    /// The pane the session started with.
    pub fn first_pane(&self) -> FirstPane {
        self.first_pane
    }

    /// The first pane's program, with the start time read when the server
    /// reported it: what the kill path takes as `pane` (pid 0 before
    /// [`set_started`](Self::set_started)).
    pub fn first_pane_process(&self) -> ProcessId {
        self.pane_process
    }

    /// The tmux binary running this server.
    pub fn tmux(&self) -> &Arc<Tmux> {
        self.handle.tmux()
    }

    /// The fixed window size.
    pub fn size(&self) -> Size {
        self.size
    }

    /// True while the server process exists (checked by pid, no socket
    /// round trip).
    pub fn is_alive(&self) -> bool {
        process::is_alive(self.handle.process())
    }

    /// Sends SIGCHLD to the server, so it reaps exited panes.
    ///
    /// Seen on tmux 3.3a: in a freshly started server the SIGCHLD for a
    /// pane's exit is sometimes lost (up to half the time for a program that
    /// exits within a second of the start). The pane then shows
    /// `#{pane_dead}` 1 with an empty `#{pane_dead_status}` forever, its
    /// program a zombie. A later SIGCHLD makes tmux call `waitpid` and record
    /// the status. Harmless when nothing is pending: tmux finds no child to
    /// reap. Liveness probes call this when a pane stays dead without a
    /// status.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the signal cannot be sent.
    pub fn nudge_child_reaper(&self) -> Result<()> {
        let server = self.handle.process();
        if process::looks_like_tmux(server) {
            process::signal(server, Signal::CHILD)?;
        }
        Ok(())
    }

    /// `tmux -u -S SOCK -C attach-session -t =NAME`, with piped stdio and
    /// killed on drop: the control client. `-u` because tmux sanitises every
    /// reply to a client it does not think is UTF-8.
    pub fn control_command(&self) -> tokio::process::Command {
        self.handle.control_command()
    }

    /// The handshake lock of this server's control clients; see
    /// [`ServerHandle::control_lock`].
    pub fn control_lock(&self) -> std::path::PathBuf {
        self.handle.control_lock()
    }

    /// Runs `cmd` as a one-shot `tmux -S SOCK ...` process (the argv form,
    /// no control connection) and returns its standard output.
    ///
    /// # Errors
    ///
    /// [`Error::Command`] with tmux's stderr when it fails;
    /// [`Error::Unresponsive`] after 10 s; [`Error::Io`] when
    /// tmux cannot be spawned.
    pub async fn run(&self, cmd: &TmuxCommand) -> Result<String> {
        self.handle.run(cmd).await
    }

    /// Kills the server and its first pane's process tree, then removes
    /// the directory: [`ServerHandle::kill_with`] with the first pane and a
    /// one-shot `tmux kill-server`.
    ///
    /// # Errors
    ///
    /// As [`ServerHandle::kill_with`].
    pub async fn kill(self) -> Result<()> {
        self.kill_with(None).await
    }

    /// [`kill`](Self::kill), asking the server to exit with `request`
    /// (e.g. `kill-server` over the caller's control client, see
    /// [`KillRequest`]) instead of a one-shot `tmux kill-server`. This is
    /// how a terminal (server, control client, pane) ends as a whole:
    ///
    /// ```no_run
    /// # use tmux_engine::control::client::ControlClient;
    /// # use tmux_engine::tmux::{KillRequest, Server, TmuxCommand};
    /// # async fn kill(server: Server, client: ControlClient) -> tmux_engine::Result<()> {
    /// let kill = TmuxCommand::new("kill-server");
    /// let request: KillRequest<'_> = Box::pin(async {
    ///     // No reply needed: the server's exit is what the kill waits for.
    ///     let _ = client.command(&kill).await;
    /// });
    /// server.kill_with(Some(request)).await?;
    /// // The client sees EOF now; wait for it (briefly) if it matters.
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`ServerHandle::kill_with`].
    pub async fn kill_with(mut self, request: Option<KillRequest<'_>>) -> Result<()> {
        if !self.owned {
            return Ok(());
        }
        // Owned until the end: if this future is dropped half way, or the
        // kill fails, `Drop` runs the kill path again. A start that failed
        // after tmux ran learns its pid there.
        let pane = Some(self.pane_process);
        self.handle.kill_with(pane, request).await?;
        self.owned = false;
        Ok(())
    }

    /// The server as a [`ServerHandle`]: its address and pid, for reads
    /// (a handle never kills on drop; this server still does).
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// Gives up ownership: the server keeps running after this value is
    /// gone, and the returned [`ServerHandle`] never kills on drop.
    ///
    /// For servers that must outlive the engine (the registry's terminals);
    /// only [`ServerHandle::kill`] stops such a server afterwards.
    pub fn into_detached(mut self) -> ServerHandle {
        // The directory stays on disk: it holds the socket the next engine
        // process adopts.
        self.owned = false;
        self.handle.clone()
    }
}

impl Drop for Server {
    /// The kill path, blocking ([`ServerHandle::kill_blocking`]): best
    /// effort, never panics; a failure is logged.
    fn drop(&mut self) {
        if !std::mem::take(&mut self.owned) {
            return;
        }
        if let Err(error) = self.handle.kill_blocking(Some(self.pane_process)) {
            tracing::warn!(dir = %self.dir().display(), %error, "killing a tmux server on drop");
        }
    }
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

fn argv_text(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::ErrorCode;

    #[test]
    fn socket_path_limit() {
        let ok = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH - 1)));
        assert!(check_socket_path(&ok).is_ok());
        let long = PathBuf::from(format!("/{}", "a".repeat(MAX_SOCKET_PATH)));
        let err = check_socket_path(&long).expect_err("too long");
        assert_eq!(err.code(), ErrorCode::SocketPathTooLong);
        assert!(
            err.to_string()
                .contains(&format!("is {} bytes", MAX_SOCKET_PATH + 1))
        );
    }
}
