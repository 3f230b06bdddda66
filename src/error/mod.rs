//! The engine's one error type, with a stable code per failure, and
//! (`parse.rs`) what a malformed control-mode line is.
//!
//! Every variant maps to a code (`DUPLICATE_NAME`, `SERVER_GONE`, ...) that the
//! CLI prints and that callers match on; the message names the offending
//! value. Codes are part of the public contract: never rename one.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use parse::is_notification_name;
pub use parse::{ParseError, ParseErrorKind};

mod parse;

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

    /// The owner has as many terminals as it may have
    /// (`serve --max-terminals-per-owner`).
    #[error("too many terminals: {0}")]
    TooManyTerminals(String),

    /// The text would type a command the operator's policy forbids
    /// (`mcp --deny`, `--allow`, `--policy`); nothing was typed.
    #[error("forbidden command: {0}")]
    ForbiddenCommand(String),

    /// The shell's syntax check (`bash -n`, `sh -n`) refused the text,
    /// with the shell's message; nothing was typed.
    #[error("syntax error: {0}")]
    SyntaxError(String),

    /// An audit log's hash chain is broken at `line` (1-based; 0: its last
    /// line, found on opening it to append).
    #[error("audit log broken at line {line}: {reason}")]
    AuditBroken {
        /// The first bad line.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },

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
    /// The stable, machine-readable code of this error, e.g.
    /// [`ErrorCode::ServerGone`] (`SERVER_GONE`).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::TmuxMissing(_) => ErrorCode::TmuxMissing,
            Error::TmuxTooOld { .. } => ErrorCode::TmuxTooOld,
            Error::InvalidInput(_) => ErrorCode::InvalidInput,
            Error::Unsupported(_) => ErrorCode::Unsupported,
            Error::SocketPathTooLong { .. } => ErrorCode::SocketPathTooLong,
            Error::UnsafeDirectory { .. } => ErrorCode::UnsafeDirectory,
            Error::UnsafeFile { .. } => ErrorCode::UnsafeFile,
            Error::ServerGone { .. } => ErrorCode::ServerGone,
            Error::Unresponsive { .. } => ErrorCode::Unresponsive,
            Error::Command { .. } => ErrorCode::CommandFailed,
            Error::Parse(_) => ErrorCode::ParseError,
            Error::Io { .. } => ErrorCode::Io,
            Error::Cancelled(_) => ErrorCode::Cancelled,
            Error::DuplicateName(_) => ErrorCode::DuplicateName,
            Error::TooManyTerminals(_) => ErrorCode::TooManyTerminals,
            Error::ForbiddenCommand(_) => ErrorCode::ForbiddenCommand,
            Error::SyntaxError(_) => ErrorCode::SyntaxError,
            Error::AuditBroken { .. } => ErrorCode::AuditBroken,
            Error::ForeignTerminal(_) => ErrorCode::ForeignTerminal,
            Error::NoTerminal(_) => ErrorCode::NoTerminal,
            Error::OwnerNotLive(_) => ErrorCode::OwnerNotLive,
            Error::SendActive(_) => ErrorCode::SendActive,
            Error::RegistryDisposing => ErrorCode::RegistryDisposing,
            Error::NoBackend(_) => ErrorCode::NoBackend,
            Error::DuplicateBackend(_) => ErrorCode::DuplicateBackend,
            Error::TerminalClosing(_) => ErrorCode::TerminalClosing,
            Error::TerminalDead { .. } => ErrorCode::TerminalDead,
            Error::ReadOnly(_) => ErrorCode::ReadOnly,
            Error::BackendCleanup { .. } => ErrorCode::BackendCleanupFailed,
            Error::RollbackFailed { .. } => ErrorCode::RollbackFailed,
            Error::CloseFailed { .. } => ErrorCode::CloseFailed,
            Error::CleanupFailed { .. } => ErrorCode::CleanupFailed,
            Error::WaitTimeout { .. } => ErrorCode::Timeout,
            Error::WaitEnded { .. } => ErrorCode::WaitEnded,
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

/// The stable code of an [`Error`]: what callers match on, the CLI prints,
/// and the HTTP API and MCP tools answer.
///
/// Its [`Display`](fmt::Display), [`as_str`](ErrorCode::as_str), JSON form
/// and JSON schema (an enum of the strings, for the faces' schemas) are the
/// code's string (`NO_TERMINAL`); those strings are part of the public
/// contract and never change. Compare codes as values
/// (`error.code() == ErrorCode::NoTerminal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ErrorCode {
    /// No tmux binary was found.
    TmuxMissing,
    /// The tmux found is older than 3.2.
    TmuxTooOld,
    /// A value given by the caller was rejected.
    InvalidInput,
    /// The operation does not apply here.
    Unsupported,
    /// A socket path does not fit a unix socket address.
    SocketPathTooLong,
    /// A directory is not private to the user.
    UnsafeDirectory,
    /// A secret's file is not private to the user.
    UnsafeFile,
    /// The tmux server or its control connection is gone.
    ServerGone,
    /// tmux did not answer in time.
    Unresponsive,
    /// tmux answered a command with `%error`.
    CommandFailed,
    /// A control-mode line could not be parsed.
    ParseError,
    /// An operating-system call failed.
    Io,
    /// The caller cancelled the operation.
    Cancelled,
    /// The owner already has a terminal of that name.
    DuplicateName,
    /// The owner is at its terminal quota.
    TooManyTerminals,
    /// The operator's policy forbids the command; nothing was typed.
    ForbiddenCommand,
    /// The shell's syntax check refused the text; nothing was typed.
    SyntaxError,
    /// An audit log's hash chain is broken.
    AuditBroken,
    /// The terminal belongs to another owner.
    ForeignTerminal,
    /// No terminal has that id or name.
    NoTerminal,
    /// The owner has been disposed.
    OwnerNotLive,
    /// Another send is active on the terminal.
    SendActive,
    /// The registry is being disposed.
    RegistryDisposing,
    /// No backend for a terminal kind.
    NoBackend,
    /// A backend kind is already registered.
    DuplicateBackend,
    /// The terminal is closing.
    TerminalClosing,
    /// The terminal's program or server is dead.
    TerminalDead,
    /// A read-only viewer tried to type or resize.
    ReadOnly,
    /// A cancelled spawn's cleanup failed too.
    BackendCleanupFailed,
    /// A spawn and its rollback both failed.
    RollbackFailed,
    /// Closing one or more terminals failed.
    CloseFailed,
    /// Disposal finished with cleanup failures.
    CleanupFailed,
    /// A wait's deadline passed first.
    Timeout,
    /// A wait can never succeed: the program ended.
    WaitEnded,
}

impl ErrorCode {
    /// The code's stable string, e.g. `NO_TERMINAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::TmuxMissing => "TMUX_MISSING",
            ErrorCode::TmuxTooOld => "TMUX_TOO_OLD",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::SocketPathTooLong => "SOCKET_PATH_TOO_LONG",
            ErrorCode::UnsafeDirectory => "UNSAFE_DIRECTORY",
            ErrorCode::UnsafeFile => "UNSAFE_FILE",
            ErrorCode::ServerGone => "SERVER_GONE",
            ErrorCode::Unresponsive => "UNRESPONSIVE",
            ErrorCode::CommandFailed => "COMMAND_FAILED",
            ErrorCode::ParseError => "PARSE_ERROR",
            ErrorCode::Io => "IO",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::DuplicateName => "DUPLICATE_NAME",
            ErrorCode::TooManyTerminals => "TOO_MANY_TERMINALS",
            ErrorCode::ForbiddenCommand => "FORBIDDEN_COMMAND",
            ErrorCode::SyntaxError => "SYNTAX_ERROR",
            ErrorCode::AuditBroken => "AUDIT_BROKEN",
            ErrorCode::ForeignTerminal => "FOREIGN_TERMINAL",
            ErrorCode::NoTerminal => "NO_TERMINAL",
            ErrorCode::OwnerNotLive => "OWNER_NOT_LIVE",
            ErrorCode::SendActive => "SEND_ACTIVE",
            ErrorCode::RegistryDisposing => "REGISTRY_DISPOSING",
            ErrorCode::NoBackend => "NO_BACKEND",
            ErrorCode::DuplicateBackend => "DUPLICATE_BACKEND",
            ErrorCode::TerminalClosing => "TERMINAL_CLOSING",
            ErrorCode::TerminalDead => "TERMINAL_DEAD",
            ErrorCode::ReadOnly => "READ_ONLY",
            ErrorCode::BackendCleanupFailed => "BACKEND_CLEANUP_FAILED",
            ErrorCode::RollbackFailed => "ROLLBACK_FAILED",
            ErrorCode::CloseFailed => "CLOSE_FAILED",
            ErrorCode::CleanupFailed => "CLEANUP_FAILED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::WaitEnded => "WAIT_ENDED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// Comparing with the code's string keeps callers written against the old
// `&'static str` code compiling; new code compares `ErrorCode` values.
impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for str {
    fn eq(&self, other: &ErrorCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_their_strings() {
        let error = Error::NoTerminal("x".into());
        assert_eq!(error.code(), ErrorCode::NoTerminal);
        assert_eq!(error.code().to_string(), "NO_TERMINAL");
        assert_eq!(error.code(), "NO_TERMINAL");
        assert_eq!(
            serde_json::to_string(&Error::RegistryDisposing.code()).expect("serialises"),
            "\"REGISTRY_DISPOSING\""
        );
        let timeout = Error::WaitTimeout {
            what: "x".into(),
            timeout: Duration::from_secs(1),
            screen: String::new(),
            last_output: String::new(),
        };
        assert_eq!(timeout.code().as_str(), "TIMEOUT");
    }

    #[cfg(feature = "schema")]
    #[test]
    fn json_form_and_schema_are_the_stable_strings() {
        let all = [
            ErrorCode::TmuxMissing,
            ErrorCode::TmuxTooOld,
            ErrorCode::InvalidInput,
            ErrorCode::Unsupported,
            ErrorCode::SocketPathTooLong,
            ErrorCode::UnsafeDirectory,
            ErrorCode::UnsafeFile,
            ErrorCode::ServerGone,
            ErrorCode::Unresponsive,
            ErrorCode::CommandFailed,
            ErrorCode::ParseError,
            ErrorCode::Io,
            ErrorCode::Cancelled,
            ErrorCode::DuplicateName,
            ErrorCode::TooManyTerminals,
            ErrorCode::ForbiddenCommand,
            ErrorCode::SyntaxError,
            ErrorCode::AuditBroken,
            ErrorCode::ForeignTerminal,
            ErrorCode::NoTerminal,
            ErrorCode::OwnerNotLive,
            ErrorCode::SendActive,
            ErrorCode::RegistryDisposing,
            ErrorCode::NoBackend,
            ErrorCode::DuplicateBackend,
            ErrorCode::TerminalClosing,
            ErrorCode::TerminalDead,
            ErrorCode::ReadOnly,
            ErrorCode::BackendCleanupFailed,
            ErrorCode::RollbackFailed,
            ErrorCode::CloseFailed,
            ErrorCode::CleanupFailed,
            ErrorCode::Timeout,
            ErrorCode::WaitEnded,
        ];
        let schema = serde_json::to_value(schemars::schema_for!(ErrorCode)).expect("schema");
        // Documented variants come as `oneOf` of one-value string enums.
        let listed: Vec<&str> = schema["oneOf"]
            .as_array()
            .expect("one schema per code")
            .iter()
            .filter_map(|one| one["const"].as_str().or(one["enum"][0].as_str()))
            .collect();
        assert_eq!(listed.len(), all.len(), "{schema}");
        for code in all {
            let json = serde_json::to_value(code).expect("serialises");
            assert_eq!(json, code.as_str(), "{code:?}");
            let back: ErrorCode = serde_json::from_value(json).expect("deserialises");
            assert_eq!(back, code);
            assert!(listed.contains(&code.as_str()), "{code:?} not in {schema}");
        }
    }
}
