//! The values crossing the backend seam (`seam.rs`): statuses, liveness,
//! sends, pages, close reasons, the attach lock; and what callers see of a
//! terminal ([`TerminalSnapshot`]). Plain data, no I/O.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::stream::OutputCursor;
use crate::vocab::RestartPolicy;
use crate::vocab::ids::{OwnerId, TerminalId};
use crate::{Error, Result};

/// Why a terminal is being closed; backends may log it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// Its owner asked for it (`kill`).
    Kill,
    /// The spawn failed or was cancelled before publication.
    RolledBack,
    /// The registry was disposed.
    RegistryDisposed,
    /// It is being replaced by a rebuilt terminal with the same id.
    Replaced,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CloseReason::Kill => "kill requested",
            CloseReason::RolledBack => "spawn rolled back",
            CloseReason::RegistryDisposed => "registry disposed",
            CloseReason::Replaced => "replaced by a rebuilt terminal",
        })
    }
}

pub use crate::vocab::ExitStatus;

/// What [`BackendTerminal::attach_lock`](super::BackendTerminal::attach_lock) returns: held until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct AttachLock(Option<Box<dyn std::any::Any + Send + Sync>>);

impl AttachLock {
    /// A guard holding nothing.
    pub fn none() -> Self {
        AttachLock(None)
    }

    /// A guard holding `guard` until dropped.
    pub fn holding(guard: impl std::any::Any + Send + Sync) -> Self {
        AttachLock(Some(Box::new(guard)))
    }

    /// Whether it holds anything.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for AttachLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AttachLock").field(&self.is_held()).finish()
    }
}

/// A terminal's status as the registry reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TerminalStatus {
    /// The program is running.
    Running,
    /// The program ended; the pane (and its output) is still there.
    Exited {
        /// How it ended.
        exit: ExitStatus,
    },
    /// The session or server is gone.
    Gone {
        /// Why, e.g. `server exited`.
        reason: String,
    },
}

impl TerminalStatus {
    /// Whether the program is running.
    pub fn is_running(&self) -> bool {
        matches!(self, TerminalStatus::Running)
    }
}

impl fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminalStatus::Running => f.write_str("running"),
            TerminalStatus::Exited { exit } => exit.fmt(f),
            TerminalStatus::Gone { reason } => write!(f, "gone: {reason}"),
        }
    }
}

/// What callers see of one terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TerminalSnapshot {
    /// Its id.
    pub id: TerminalId,
    /// Its owner.
    pub owner: OwnerId,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its role, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Its backend kind.
    pub kind: String,
    /// The process id of the program the terminal runs (behind the exit
    /// handshake's wrapper, for the tmux backend), when the backend has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its status, with exit code or signal once dead.
    pub status: TerminalStatus,
    /// Its restart policy.
    pub restart: RestartPolicy,
    /// How many times the registry recreated it.
    pub restarts: u32,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Which way its output reaches the engine, when the backend says:
    /// `"raw"` (the pane's own bytes through its pipe) or `"control"`
    /// (tmux's `%output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// Whether its output is kept on disk (`keep_history`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_history: bool,
    /// When it was restored after the machine restarted (milliseconds
    /// since the Unix epoch): its old history is above a marked line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_ms: Option<u64>,
    /// Why its kept history cannot be written now (a full disk), while
    /// writes fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_error: Option<String>,
}

/// What a liveness probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Liveness {
    /// The program is running.
    Alive,
    /// The program ended and its pane remains.
    Exited {
        /// How it ended.
        exit: ExitStatus,
    },
    /// The server answers but the session (or pane) is gone.
    SessionGone,
    /// The server itself is gone.
    ServerGone {
        /// Why, e.g. `control client reached EOF`.
        reason: String,
    },
    /// The server did not answer within the deadline; it may be alive.
    Unresponsive {
        /// How long the probe waited.
        waited: Duration,
    },
}

impl Liveness {
    /// Whether the terminal is known to be dead (exited or gone); an
    /// unresponsive terminal is not known dead.
    pub fn is_dead(&self) -> bool {
        matches!(
            self,
            Liveness::Exited { .. } | Liveness::SessionGone | Liveness::ServerGone { .. }
        )
    }

    /// The status this observation implies, or `None` when it implies none
    /// (alive or unresponsive).
    pub fn dead_status(&self) -> Option<TerminalStatus> {
        match self {
            Liveness::Exited { exit } => Some(TerminalStatus::Exited { exit: *exit }),
            Liveness::SessionGone => Some(TerminalStatus::Gone {
                reason: "session gone".to_owned(),
            }),
            Liveness::ServerGone { reason } => Some(TerminalStatus::Gone {
                reason: reason.clone(),
            }),
            Liveness::Alive | Liveness::Unresponsive { .. } => None,
        }
    }
}

/// When a send counts as finished.
///
/// Its wire names are the CLI's and the bridges' words: `idle`, `stdin`,
/// `exit`, `none`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum WaitFor {
    /// Output went quiet, or the program blocked reading its terminal.
    #[default]
    Idle,
    /// The foreground process group blocked reading the terminal.
    #[serde(rename = "stdin")]
    StdinRead,
    /// The program exited.
    Exit,
    /// Immediately after the text was written.
    None,
    /// The command ended, by the marks of an integrated shell (see
    /// `crate::shell`); where no marks come (another program runs, or
    /// integration is off), the same as `stdin`.
    Command,
}

impl std::str::FromStr for WaitFor {
    type Err = Error;

    /// Parses the CLI's and the bridges' words: `command`, `idle`,
    /// `stdin`, `exit`, `none`.
    fn from_str(text: &str) -> Result<WaitFor> {
        match text {
            "idle" => Ok(WaitFor::Idle),
            "stdin" => Ok(WaitFor::StdinRead),
            "exit" => Ok(WaitFor::Exit),
            "none" => Ok(WaitFor::None),
            "command" => Ok(WaitFor::Command),
            other => Err(Error::InvalidInput(format!(
                "wait {other:?} is not one of command, idle, stdin, exit, none"
            ))),
        }
    }
}

/// One send: text to type and how to wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRequest {
    /// Bytes to deliver exactly as given (any bytes, any length).
    pub text: Bytes,
    /// Whether to press Enter after the text.
    pub submit: bool,
    /// When the send counts as finished.
    pub wait: WaitFor,
    /// Give up waiting after this long (the backend's default when `None`).
    pub timeout: Option<Duration>,
    /// Whether the command may go into the shell's history; `false` keeps
    /// it out where the backend can (an integrated shell at its prompt:
    /// typed with a leading space).
    pub history: bool,
    /// Keys to press after the text (and before Enter): checked names and
    /// text pieces, turned into bytes by the backend, which knows the
    /// pane's cursor key mode.
    pub keys: Vec<crate::screen::keys::KeyPiece>,
}

impl Default for SendRequest {
    /// Nothing to type, Enter not pressed, the default wait and timeout,
    /// history kept.
    fn default() -> SendRequest {
        SendRequest {
            text: Bytes::new(),
            submit: false,
            wait: WaitFor::default(),
            timeout: None,
            history: true,
            keys: Vec::new(),
        }
    }
}

/// The output produced since a send began.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOutput {
    /// The output as text, escape sequences stripped.
    pub text: String,
    /// The output as raw bytes.
    pub bytes: Bytes,
    /// Whether older output was dropped to stay within the backend's bound.
    pub truncated: bool,
    /// Where the send's output began and where it ends now (`None` from a
    /// backend that keeps no cursors): `read since` the first gets all of
    /// it, as far as the ring still holds it.
    pub cursors: Option<(OutputCursor, OutputCursor)>,
}

/// Why a send stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// Output went quiet.
    Idle,
    /// The foreground process group blocked reading the terminal.
    StdinRead,
    /// The foreground process group blocked waiting on other files than
    /// its terminal (sockets, pipes: a server): it will not take input.
    Busy,
    /// The program exited.
    Exited,
    /// The command ended: the shell marked its end (`wait: command`).
    Command,
    /// The timeout passed.
    Timeout,
    /// The send was cancelled.
    Cancelled,
    /// A full-screen program (the alternate screen, or a known pager or
    /// editor) is in front: text for the shell is not typed into it; keys
    /// still are (`q` quits `less`).
    FullScreen,
}

/// How a send ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SendResult {
    /// The visible screen when the send ended.
    pub viewport: String,
    /// Why it stopped waiting.
    pub wait_reason: WaitReason,
    /// The terminal's status when it ended.
    pub status: TerminalStatus,
    /// Whether the send's output was truncated.
    pub truncated: bool,
    /// What the shell's marks said about the send's commands, when the
    /// send waited for them (`wait: command` on an integrated shell) and
    /// they all ended: the output of every one, the last one's exit code,
    /// from the first one's start to the last one's end.
    pub command: Option<CommandResult>,
    /// Every command the shell marked for this send, in order (ended ones;
    /// a send that ended on a reader lists those before it).
    pub commands: Vec<super::Command>,
    /// `None` when the text was typed; else why it was not by the send's
    /// deadline or cancel. Such text is never typed later.
    pub not_typed: Option<String>,
    /// The foreground command, when the send ended `full_screen`.
    pub foreground: Option<String>,
}

/// A command's end as an integrated shell marked it (see
/// `crate::shell`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResult {
    /// Exactly its output, escape sequences stripped: no echoed command
    /// line, no prompt.
    pub output: String,
    /// Its exit status, when the shell gave one.
    pub exit_code: Option<i32>,
    /// From its start to its end mark.
    pub duration: Duration,
}

/// The live part of a send, shared between the registry and its caller.
pub trait SendOperation: Send + Sync + 'static {
    /// The output produced since the send began.
    fn read_output(&self) -> SendOutput;

    /// Asks the send to stop waiting; `true` when this call stopped it,
    /// `false` when it had already finished.
    fn cancel(&self) -> bool;

    /// Resolves once the send's output is longer than `len` bytes (the
    /// `bytes.len()` of the last [`read_output`](Self::read_output)), or
    /// when no more output can come. Lets a caller follow the output
    /// without polling. The default, for backends that cannot push, sleeps
    /// briefly, so a loop over `read_output` still makes progress.
    fn output_beyond(&self, len: usize) -> BoxFuture<'_, ()> {
        let _ = len;
        Box::pin(tokio::time::sleep(Duration::from_millis(10)))
    }
}

/// A send under way: its live operation (the output so far, the cancel)
/// and the future of its end. A backend's `start_send` gives one ending in
/// its [`SendResult`]; [`Owned::send`](super::Owned::send) one the registry
/// drives to its end even if the handle is dropped (the terminal accepts
/// the next send only then); the verb layer one ending in its answer.
pub struct SendHandle<T = SendResult> {
    /// Reads output and cancels while the send runs.
    pub operation: Arc<dyn SendOperation>,
    /// Resolves when the send ends.
    pub result: BoxFuture<'static, Result<T>>,
}

impl<T> fmt::Debug for SendHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendHandle").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> SendHandle<T> {
    /// The output produced since the send began.
    pub fn read_output(&self) -> SendOutput {
        self.operation.read_output()
    }

    /// Stops waiting; `true` when this call stopped the send, `false` when
    /// it had already finished.
    pub fn cancel(&self) -> bool {
        self.operation.cancel()
    }

    /// The live operation, to read output or cancel from elsewhere while
    /// [`result`](SendHandle::result) is awaited.
    pub fn operation(&self) -> Arc<dyn SendOperation> {
        Arc::clone(&self.operation)
    }

    /// Resolves once the send's output is longer than `len` bytes (pass the
    /// `bytes.len()` of the last [`read_output`](SendHandle::read_output)),
    /// or when the terminal can produce no more: follow output without
    /// polling.
    pub async fn output_beyond(&self, len: usize) {
        self.operation.output_beyond(len).await;
    }

    /// Waits for the send to end.
    ///
    /// # Errors
    ///
    /// The backend's failure (for tmux, `SERVER_GONE` when the server died
    /// during the send), or `REGISTRY_DISPOSING` when the registry was
    /// disposed first.
    pub async fn result(self) -> Result<T> {
        self.result.await
    }

    /// The same send, its end made into another value by `then` (which
    /// reads the output through the operation it is given).
    pub fn then<U, F>(
        self,
        then: impl FnOnce(T, Arc<dyn SendOperation>) -> F + Send + 'static,
    ) -> SendHandle<U>
    where
        F: std::future::Future<Output = Result<U>> + Send + 'static,
    {
        let operation = Arc::clone(&self.operation);
        let result = self.result;
        SendHandle {
            operation: Arc::clone(&operation),
            result: Box::pin(async move { then(result.await?, operation).await }),
        }
    }
}

/// Which page of scrollback to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    /// Lines to skip, counted back from the newest line.
    pub offset: usize,
    /// How many lines to return (the backend's default page when `None`).
    pub count: Option<usize>,
}

/// One bounded page of scrollback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReadPage {
    /// The page's lines, oldest first.
    pub lines: Vec<String>,
    /// How many lines the terminal retains in all.
    pub total_lines: usize,
    /// Which lines these are, as indexes from the oldest retained line.
    pub range: Range<usize>,
    /// Whether the page was cut short by the backend's bound.
    pub truncated: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn liveness_dead_states() {
        assert!(!Liveness::Alive.is_dead());
        assert!(
            !Liveness::Unresponsive {
                waited: Duration::from_secs(1)
            }
            .is_dead()
        );
        assert!(Liveness::SessionGone.is_dead());
        assert_eq!(
            Liveness::Exited {
                exit: ExitStatus::Code(3)
            }
            .dead_status(),
            Some(TerminalStatus::Exited {
                exit: ExitStatus::Code(3)
            })
        );
    }
}

/// What a restore after a reboot prints before a terminal's program: its kept
/// history and the marked line, in a private file the new terminal prints
/// byte for byte (no output processing) and then removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The file to print.
    pub replay: std::path::PathBuf,
    /// How many of its bytes are kept history (the rest is the marker).
    pub kept_bytes: u64,
}
