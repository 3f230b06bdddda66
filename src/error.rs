//! The engine's one error type, with a stable code per failure.
//!
//! Every variant maps to a code (`DUPLICATE_NAME`, `SERVER_GONE`, ...) that the
//! CLI prints and that callers match on; the message names the offending
//! value. Codes are part of the public contract: never rename one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::vocab::ParseError;

/// The result type of every fallible engine call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tmux binary was found (on `PATH`, or at `TMUX_ENGINE_TMUX`).
    #[error("tmux not found: {0}")]
    TmuxMissing(String),

    /// The tmux found is older than the engine supports (3.2).
    #[error("tmux {found} at {path} is too old: tmux-engine needs tmux 3.2 or newer")]
    TmuxTooOld {
        /// The version string tmux reported, e.g. `3.1c`.
        found: String,
        /// The binary that reported it.
        path: PathBuf,
    },

    /// A value given by the caller was rejected before reaching tmux.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The operation exists, but not for this backend or terminal kind.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A socket path does not fit in `sockaddr_un.sun_path`.
    #[error(
        "socket path {path} is {len} bytes, over the {max}-byte unix socket limit; \
         choose a shorter runtime directory (TMUX_ENGINE_RUNTIME_DIR)"
    )]
    SocketPathTooLong {
        /// The path that was too long.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The longest path the platform accepts.
        max: usize,
    },

    /// A runtime, socket or state directory is not private to the user
    /// (another owner, or group/other access), so the engine refuses it,
    /// as tmux refuses such a socket directory.
    #[error(
        "unsafe directory {path}: {reason}; remove it or choose another (TMUX_ENGINE_RUNTIME_DIR, --state-dir)"
    )]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A file holding a secret (a token file) is not private to the user
    /// (another owner, or group/other access), so the engine refuses it.
    #[error("unsafe file {path}: {reason}; chmod 600 it as its owner")]
    UnsafeFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The tmux server (or the control connection to it) is gone.
    #[error("tmux server gone: {reason}")]
    ServerGone {
        /// Why: the `%exit` reason, EOF, or the client's exit status.
        reason: String,
    },

    /// tmux did not answer a command within the deadline.
    #[error("tmux did not answer `{command}` within {timeout:?}")]
    Unresponsive {
        /// The command line that went unanswered.
        command: String,
        /// The deadline that passed.
        timeout: Duration,
    },

    /// tmux answered a command with `%error`.
    #[error("tmux rejected `{command}`: {message}")]
    Command {
        /// The command line that failed.
        command: String,
        /// tmux's error text (the lines of the `%error` block).
        message: String,
    },

    /// A line of the control-mode stream could not be parsed.
    #[error(transparent)]
    Parse(#[from] ParseError),

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. "spawning tmux".
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The operation was cancelled by its caller.
    #[error("cancelled: {0}")]
    Cancelled(String),

    /// A terminal name is already used by the same owner.
    #[error("duplicate name: {0}")]
    DuplicateName(String),

    /// The terminal belongs to another owner.
    #[error("terminal {0} belongs to another owner")]
    ForeignTerminal(String),

    /// No terminal has that id (or name).
    #[error("no terminal {0}")]
    NoTerminal(String),

    /// The owner has been disposed.
    #[error("owner {0} is not live")]
    OwnerNotLive(String),

    /// Another send is still active on the terminal.
    #[error("a send is already active on terminal {0}")]
    SendActive(String),

    /// The registry is being (or has been) disposed.
    #[error("the registry is disposing")]
    RegistryDisposing,

    /// No backend is registered for a terminal kind.
    #[error("no backend for kind {0}")]
    NoBackend(String),

    /// A backend kind is already registered.
    #[error("duplicate backend kind {0}")]
    DuplicateBackend(String),

    /// The terminal is closing, so it accepts no new sends.
    #[error("terminal {0} is closing")]
    TerminalClosing(String),

    /// The terminal's program or server is dead and its restart policy does
    /// not recreate it here.
    #[error("terminal {terminal} is dead: {status}")]
    TerminalDead {
        /// The terminal's id.
        terminal: String,
        /// Its last known status, e.g. `exited with code 1`.
        status: String,
    },

    /// A read-only viewer tried to type or resize.
    #[error("viewer of terminal {0} is read-only")]
    ReadOnly(String),

    /// A backend stopped a spawn because it was cancelled, and undoing its
    /// own half-made work failed too.
    ///
    /// Backends return this from `Backend::spawn`; the registry answers the
    /// caller with `cause` (or the caller's own cancellation) and keeps
    /// `cleanup` until disposal reports it.
    #[error("{cause}; backend cleanup also failed: {cleanup}")]
    BackendCleanup {
        /// Why the spawn stopped.
        cause: Box<Error>,
        /// What went wrong while cleaning up.
        cleanup: Arc<Error>,
    },

    /// A spawn failed and closing its unpublished terminal failed too.
    #[error("spawn and rollback both failed: {cause}; rollback: {rollback}")]
    RollbackFailed {
        /// Why the spawn failed.
        cause: Box<Error>,
        /// Why the rollback failed; disposal reports it again.
        rollback: Arc<Error>,
    },

    /// Closing one or more terminals failed; every failure is kept.
    #[error("failed to close {} terminal(s): {}", failures.len(), join(failures))]
    CloseFailed {
        /// One error per terminal that could not be closed.
        failures: Vec<Arc<Error>>,
    },

    /// A fixture wait did not see its condition on the screen in time.
    #[error(
        "timed out after {timeout:?} waiting for {what}\n\
         --- screen {screen}--- last output ---\n{last_output}"
    )]
    WaitTimeout {
        /// What was awaited, e.g. `text "ready"`.
        what: String,
        /// The deadline that passed.
        timeout: Duration,
        /// The screen at the deadline, in the fixture's snapshot form.
        screen: String,
        /// The last output bytes received, escaped and bounded.
        last_output: String,
    },

    /// A fixture wait can never succeed: the program exited (or its server
    /// went away) and the final screen does not satisfy it.
    #[error(
        "{reason} while waiting for {what}\n\
         --- screen {screen}--- last output ---\n{last_output}"
    )]
    WaitEnded {
        /// What was awaited.
        what: String,
        /// Why nothing more can come, e.g. `the program exited with code 3`.
        reason: String,
        /// The final screen, in the fixture's snapshot form.
        screen: String,
        /// The last output bytes received, escaped and bounded.
        last_output: String,
    },

    /// Disposing an owner or the registry finished, but some cleanup failed.
    #[error("failed to clean up registry lifecycle: {}", join(failures))]
    CleanupFailed {
        /// Every failure: retained rollback failures and close failures.
        failures: Vec<Arc<Error>>,
    },
}

/// Joins errors into one `; `-separated line for an aggregate's message.
fn join(failures: &[Arc<Error>]) -> String {
    failures
        .iter()
        .map(|failure| failure.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl Error {
    /// The stable, machine-readable code of this error, e.g. `SERVER_GONE`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::TmuxMissing(_) => "TMUX_MISSING",
            Error::TmuxTooOld { .. } => "TMUX_TOO_OLD",
            Error::InvalidInput(_) => "INVALID_INPUT",
            Error::Unsupported(_) => "UNSUPPORTED",
            Error::SocketPathTooLong { .. } => "SOCKET_PATH_TOO_LONG",
            Error::UnsafeDirectory { .. } => "UNSAFE_DIRECTORY",
            Error::UnsafeFile { .. } => "UNSAFE_FILE",
            Error::ServerGone { .. } => "SERVER_GONE",
            Error::Unresponsive { .. } => "UNRESPONSIVE",
            Error::Command { .. } => "COMMAND_FAILED",
            Error::Parse(_) => "PARSE_ERROR",
            Error::Io { .. } => "IO",
            Error::Cancelled(_) => "CANCELLED",
            Error::DuplicateName(_) => "DUPLICATE_NAME",
            Error::ForeignTerminal(_) => "FOREIGN_TERMINAL",
            Error::NoTerminal(_) => "NO_TERMINAL",
            Error::OwnerNotLive(_) => "OWNER_NOT_LIVE",
            Error::SendActive(_) => "SEND_ACTIVE",
            Error::RegistryDisposing => "REGISTRY_DISPOSING",
            Error::NoBackend(_) => "NO_BACKEND",
            Error::DuplicateBackend(_) => "DUPLICATE_BACKEND",
            Error::TerminalClosing(_) => "TERMINAL_CLOSING",
            Error::TerminalDead { .. } => "TERMINAL_DEAD",
            Error::ReadOnly(_) => "READ_ONLY",
            Error::BackendCleanup { .. } => "BACKEND_CLEANUP_FAILED",
            Error::RollbackFailed { .. } => "ROLLBACK_FAILED",
            Error::CloseFailed { .. } => "CLOSE_FAILED",
            Error::CleanupFailed { .. } => "CLEANUP_FAILED",
            Error::WaitTimeout { .. } => "TIMEOUT",
            Error::WaitEnded { .. } => "WAIT_ENDED",
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
