//! A send's values, from the faces to the backend: what to type and when
//! it counts as done ([`SendRequest`], [`WaitFor`]), the send under way
//! ([`SendHandle`] over its [`SendOperation`], whose output so far is a
//! [`SendOutput`] read from the terminal's stream), and how it ended
//! ([`SendAnswer`], with its [`WaitReason`]). No I/O: the registry's
//! `send` is in `ops.rs`, the tmux backend's in `crate::backend`.
//!
//! This file is the request and the answer; the send under way (its
//! operation, handle and output so far) is `operation.rs`.

mod operation;

pub use self::operation::{SendHandle, SendOperation, SendOutput};

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::command::Command;
use super::values::TerminalStatus;
use crate::{Error, Result};

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

// The backend answers with this and every face renders it (the verb
// layer only cuts it to the request's bound), so a field has one name. Its
// doc line is the schema's description in the faces' documents (MCP's
// tools/list, OpenAPI), kept word for word.
/// How a send ended, with the output it produced: built here once for
/// every face.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SendAnswer {
    /// The output, escape sequences stripped: exactly the command's when
    /// an integrated shell marked it (`exit_code` is then present), else
    /// everything since the send began.
    pub output: String,
    /// The command's exit status, from an integrated shell's end mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Where `exit_code` came from: `shell_integration` (the shell's end
    /// mark), or `none` when there is none (a shell without the
    /// integration, marks that stopped, a command that did not end in the
    /// send): never guessed.
    pub exit_code_source: ExitCodeSource,
    /// Seconds from the command's start to its end, from the marks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// Why the send stopped waiting: `command`, `idle`, `stdin_read`,
    /// `busy` (the program waits on other files than its terminal),
    /// `exited`, `timeout`, `cancelled` or `full_screen` (a pager, editor
    /// or other full-screen program is in front: `foreground_command` and
    /// `screen` say which and what it shows; send it keys, not text).
    pub wait_reason: WaitReason,
    /// The program in front, when `wait_reason` is `full_screen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground_command: Option<String>,
    /// The screen as the full-screen program drew it, when `wait_reason`
    /// is `full_screen` (its output alone is cursor moves and repaints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// Whether the text was typed. `false` only when it could not be by
    /// the deadline (nothing read the terminal: a program runs) or the
    /// send was cancelled first; it is then never typed later.
    pub typed: bool,
    /// Why the text was not typed, when `typed` is `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_typed_reason: Option<String>,
    /// Each command the shell ran for this send, in order, as its marks
    /// told (an integrated shell; the newest 100 of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Command>,
    /// The terminal's status when the send ended.
    pub status: TerminalStatus,
    /// The visible screen when the send ended, only when the request
    /// asked for it (`include_screen: true`): most answers need the output
    /// alone, and the screen repeats it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<String>,
    /// Whether output was cut to stay within a bound (the engine's or the
    /// request's `max_bytes`/`max_lines`): `read` with `since:
    /// start_cursor` gets all of it.
    pub truncated: bool,
    /// Bytes of output cut from the middle to fit the request's bound: the
    /// first and the last part are kept (a build's first error and its
    /// summary), and the elided bytes lie between `elided_from` and
    /// `elided_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elided_bytes: Option<usize>,
    /// With `elided_bytes`: a cursor before the elided bytes (where this
    /// output began): `read` with `since` it reaches every one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elided_from: Option<String>,
    /// With `elided_bytes`: a cursor after them (the end of this output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elided_to: Option<String>,
    /// The cursor after the send's output: `read` with `since` it gets
    /// what the program wrote next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The cursor where the send's output began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_cursor: Option<String>,
    /// Whether this call brought a dead `on-attach` terminal back first
    /// (its kept history restored, its `resume_command` typed), as an
    /// attach does; absent when it did not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recreated: bool,
}

/// Where a send answer's `exit_code` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExitCodeSource {
    /// An integrated shell's end mark (OSC 133 `D`) gave it.
    ShellIntegration,
    /// No exit code: nothing marked the command's end.
    None,
}

/// The most commands a send answer lists (the newest).
const MAX_COMMANDS: usize = 100;

impl SendAnswer {
    /// The answer of a send that stopped waiting for `wait_reason`, the
    /// terminal then in `status` and showing `viewport`, after `output`:
    /// its text typed, no command marked (see
    /// [`command_ended`](SendAnswer::command_ended)), the viewport kept
    /// (a face drops it unless asked) and, for `full_screen`, shown as
    /// `screen`.
    pub fn new(
        wait_reason: WaitReason,
        status: TerminalStatus,
        viewport: String,
        output: SendOutput,
    ) -> SendAnswer {
        SendAnswer {
            output: output.text,
            exit_code: None,
            exit_code_source: ExitCodeSource::None,
            duration_secs: None,
            screen: (wait_reason == WaitReason::FullScreen).then(|| viewport.clone()),
            wait_reason,
            foreground_command: None,
            typed: true,
            not_typed_reason: None,
            commands: Vec::new(),
            status,
            viewport: Some(viewport),
            truncated: output.truncated,
            elided_bytes: None,
            elided_from: None,
            elided_to: None,
            cursor: Some(output.end.to_string()),
            start_cursor: Some(output.start.to_string()),
            recreated: false,
        }
    }

    /// This answer for a send whose text was not typed, `why`.
    #[must_use]
    pub fn not_typed(mut self, why: String) -> SendAnswer {
        self.typed = false;
        self.not_typed_reason = Some(why);
        self
    }

    /// Lists the commands the shell marked for this send, in order (the
    /// newest 100; `truncated` when more).
    pub fn list_commands(&mut self, commands: Vec<Command>) {
        let skip = commands.len().saturating_sub(MAX_COMMANDS);
        self.truncated |= skip > 0;
        self.commands = commands.into_iter().skip(skip).collect();
    }

    /// Answers with the end of the send's commands as an integrated shell
    /// marked it: exactly their `output` (no echoed command line, no
    /// prompt), the last one's `exit_code` when the shell gave one, and
    /// the `duration` from the first one's start to the last one's end.
    pub fn command_ended(&mut self, output: String, exit_code: Option<i32>, duration: Duration) {
        self.output = output;
        self.exit_code = exit_code;
        self.exit_code_source = match exit_code {
            Some(_) => ExitCodeSource::ShellIntegration,
            None => ExitCodeSource::None,
        };
        // Seconds to the millisecond: plenty, and shorter in every answer.
        self.duration_secs = Some((duration.as_secs_f64() * 1000.0).round() / 1000.0);
    }
}
