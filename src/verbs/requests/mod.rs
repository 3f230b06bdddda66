//! The verbs' requests as clients send them, with the JSON Schemas they
//! see (derived by `schemars`, so schema and parser cannot drift), and the
//! one validation of each into what the registry takes. No IO, no registry
//! calls: every check here runs before anything moves.
//!
//! Field names are the wire contract of every face: HTTP bodies, MCP tool
//! arguments and the CLI (which builds these from its flags).
//!
//! `spawn`'s request, the largest, with the agent's defaults, is
//! `spawn.rs`.

mod spawn;

pub use self::spawn::SpawnRequest;

use std::time::Duration;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::Deserialize;

use super::bounds::Bound;
use super::{DEFAULT_WAIT_SECS, MAX_READ_LINES};
use crate::registry::{self, OutputCursor, Signal, WaitCondition, WaitFor};
use crate::{Error, Result};

/// What of a name's rules (`vocab::check_name`) a pattern says: no control
/// character, `:`, `.` or `\`, and no `-`, `=`, `$` or blank first.
/// (Invisible characters, a blank last and an id's shape are refused too.)
const NAME_PATTERN: &str = r"^[^\x00-\x20\x7f-\x9f:.\\=$-][^\x00-\x1f\x7f-\x9f:.\\]*$";

/// `list`: no arguments (an unknown one is an error, as for every verb).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {}

/// The verbs that name a terminal and nothing else: `show`, `screen`,
/// `kill`, `probe`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalRequest {
    /// Terminal id or name.
    pub terminal: String,
}

/// `send`: type text and wait until the program is done with it.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// Typed literally: a TAB never completes. Optional with `keys`.
    #[serde(default)]
    pub text: String,
    /// tmux key names, pressed after `text` (else typed as text).
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub keys: Option<Vec<String>>,
    /// Press Enter after it.
    #[serde(default)]
    pub submit: bool,
    /// Done when: `command` (the default: the shell marks its end, else as
    /// `stdin`), `stdin` (the program reads input), `idle` (output quiet),
    /// `exit` or `none` (at once).
    #[serde(default)]
    pub wait: Option<WaitFor>,
    /// Give up after this (default 30 s; alias `timeout`).
    #[serde(default, alias = "timeout")]
    #[schemars(range(min = 0, max = MAX_SECONDS))]
    pub timeout_secs: Option<f64>,
    /// May the shell's history keep it (default true; MCP's false).
    #[serde(default)]
    pub history: Option<bool>,
    /// Add the visible screen as `viewport`.
    #[serde(default)]
    pub include_screen: bool,
    /// Answer bytes at most: 512 to 65536 (64 KiB, the default).
    #[serde(default)]
    #[schemars(range(min = 512, max = 65536))]
    pub max_bytes: Option<usize>,
    /// Output lines at most (the newest kept).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_lines: Option<usize>,
    /// Raw bytes standing in for `text` (the CLI's `--stdin`, which may
    /// not be UTF-8); never on the wire.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) bytes: Option<Bytes>,
}

impl SendRequest {
    /// A request to type `text` into `terminal`, with the defaults.
    pub fn new(terminal: impl Into<String>, text: impl Into<String>) -> SendRequest {
        SendRequest {
            terminal: terminal.into(),
            text: text.into(),
            keys: None,
            submit: false,
            wait: None,
            timeout_secs: None,
            history: None,
            include_screen: false,
            max_bytes: None,
            max_lines: None,
            bytes: None,
        }
    }

    /// The bound on this send's answer.
    ///
    /// # Errors
    /// `INVALID_INPUT` as [`Bound::new`] says.
    pub(crate) fn bound(&self) -> Result<Bound> {
        Bound::new(self.max_bytes, self.max_lines)
    }

    /// The line this send types, as a guard rail judges it: `text` and
    /// the text elements of `keys` joined, and whether it runs (`submit`,
    /// or an `Enter` among the keys). Keys that are not valid are refused
    /// by the verb itself; here they are left out.
    pub fn typed_line(&self) -> (String, bool) {
        use crate::screen::keys::{KeyPiece, encode, parse_keys};
        let mut line = self.text.clone();
        let mut submit = self.submit;
        if let Some(keys) = &self.keys
            && let Ok(pieces) = parse_keys(keys)
        {
            for piece in pieces {
                match piece {
                    KeyPiece::Text(text) | KeyPiece::Word(text) => line.push_str(&text),
                    key @ KeyPiece::Key(_) => {
                        if encode(&[key], false) == b"\r" {
                            submit = true;
                            line.push('\n');
                        }
                    }
                }
            }
        }
        (line, submit)
    }

    /// The same request typing `bytes` (any bytes) instead of its text.
    #[must_use]
    pub fn with_bytes(mut self, bytes: Bytes) -> SendRequest {
        self.bytes = Some(bytes);
        self
    }

    /// The registry's request. With no `wait`, the send waits for
    /// `command` (an integrated shell's end mark, else `stdin`: the
    /// program waits for input again) on every face: `idle` would cut a
    /// command's output at its first pause.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a `timeout_secs` that is not a number of
    /// seconds, and for an empty `keys` element.
    pub fn validate(self) -> Result<registry::SendRequest> {
        self.bound()?;
        let keys = crate::screen::keys::parse_keys(self.keys.as_deref().unwrap_or_default())?;
        let wait = self.wait.unwrap_or(WaitFor::Command);
        Ok(registry::SendRequest {
            text: self.bytes.unwrap_or_else(|| self.text.into_bytes().into()),
            submit: self.submit,
            wait,
            timeout: self
                .timeout_secs
                .map(|t| seconds(t, "timeout_secs"))
                .transpose()?,
            history: self.history.unwrap_or(true),
            keys,
        })
    }
}

/// `read`: a page of scrollback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// Lines to skip back from the newest (default 0).
    #[serde(default)]
    pub offset: usize,
    /// Lines to return (default 100).
    #[serde(default)]
    #[schemars(range(max = 10_000))]
    pub count: Option<usize>,
    /// Answer bytes at most: 512 to 65536 (64 KiB, the default).
    #[serde(default)]
    #[schemars(range(min = 512, max = 65536))]
    pub max_bytes: Option<usize>,
    /// Lines at most (the newest kept).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_lines: Option<usize>,
    /// A cursor (`next_cursor`, a send's cursors): the output after it.
    #[serde(default)]
    pub since: Option<String>,
    /// With `since`: `lines` (the default), `text` or `bytes` (exact,
    /// base64).
    #[serde(default)]
    pub format: Option<ReadFormat>,
}

/// How a `read since` answer carries the output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadFormat {
    /// Rendered as the terminal shows it, one string per line.
    #[default]
    Lines,
    /// Rendered as the terminal shows it, one string.
    Text,
    /// The bytes exactly as written, standard base64.
    Bytes,
}

impl std::str::FromStr for ReadFormat {
    type Err = Error;

    /// The format a word names, spelled as on the wire (the CLI's
    /// `--format`).
    fn from_str(word: &str) -> Result<ReadFormat> {
        use serde::de::IntoDeserializer as _;
        let word_in: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            word.into_deserializer();
        ReadFormat::deserialize(word_in).map_err(|_| {
            Error::InvalidInput(format!("format {word:?} is not lines, text or bytes"))
        })
    }
}

/// What a checked [`ReadRequest`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadWhat {
    /// A page counted back from the newest line.
    Page(registry::ReadRequest),
    /// The output after a cursor.
    Since(OutputCursor, ReadFormat),
}

impl ReadRequest {
    /// The registry's request.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a `count` over `MAX_READ_LINES`.
    pub fn validate(self) -> Result<registry::ReadRequest> {
        match self.what()? {
            ReadWhat::Page(request) => Ok(request),
            ReadWhat::Since(..) => Err(invalid("since is not a page read")),
        }
    }

    /// What this read asks for: a page, or the output after a cursor.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a cursor that does not parse, `since` beside
    /// `offset` or `count`, `format` without `since`, and what
    /// [`validate`](Self::validate) refuses.
    pub(crate) fn what(self) -> Result<ReadWhat> {
        self.bound()?;
        if let Some(since) = &self.since {
            if self.offset != 0 || self.count.is_some() {
                return Err(invalid("give since, or offset and count, not both"));
            }
            let cursor = since.parse::<OutputCursor>()?;
            return Ok(ReadWhat::Since(cursor, self.format.unwrap_or_default()));
        }
        if self.format.is_some() {
            return Err(invalid("format goes with since (a page is lines)"));
        }
        if let Some(count) = self.count
            && count > MAX_READ_LINES
        {
            return Err(Error::InvalidInput(format!(
                "count {count} is over the limit of {MAX_READ_LINES} lines"
            )));
        }
        Ok(ReadWhat::Page(registry::ReadRequest {
            offset: self.offset,
            count: self.count,
        }))
    }

    /// The bound on this read's answer.
    ///
    /// # Errors
    /// `INVALID_INPUT` as [`Bound::new`] says.
    pub(crate) fn bound(&self) -> Result<Bound> {
        Bound::new(self.max_bytes, self.max_lines)
    }
}

/// `wait`: until a text, a regex, or the program's exit.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// Until a line contains this (where: `since`).
    #[serde(default)]
    pub text: Option<String>,
    /// Until a line matches this (Rust `regex` syntax; where: `since`).
    #[serde(default)]
    pub regex: Option<String>,
    /// `command` (the default: the newest command's output, never its echo),
    /// `screen` (with 200 lines of scrollback) or a cursor: the output after
    /// it.
    #[serde(default)]
    pub since: Option<String>,
    /// Until the program exits (`true`).
    #[serde(default)]
    pub exit: Option<bool>,
    /// Until this command ends: an id (terminal_commands; a send's
    /// `start_cursor`) or `last`.
    #[serde(default)]
    pub command: Option<String>,
    /// Give up after this (default 30 s).
    #[serde(default, alias = "timeout")]
    #[schemars(range(min = 0, max = MAX_SECONDS))]
    pub timeout_secs: Option<f64>,
}

impl WaitRequest {
    /// Where a text or regex wait looks.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a `since` that is not `command`, `screen` or a
    /// cursor.
    pub fn since(&self) -> Result<crate::registry::WaitSince> {
        self.since
            .as_deref()
            .map_or(Ok(crate::registry::WaitSince::default()), str::parse)
    }

    /// What to wait for, and for how long.
    ///
    /// # Errors
    /// `INVALID_INPUT` for none or several of `text`, `regex`, `exit:
    /// true`, `command`, a command that is neither `last` nor an id, a regex that does not compile, or a timeout that is not a
    /// number of seconds.
    pub fn validate(&self) -> Result<(WaitCondition, Duration)> {
        let exit = self.exit.unwrap_or(false);
        let condition = match (&self.text, &self.regex, exit, &self.command) {
            (Some(text), None, false, None) => WaitCondition::Text(text.clone()),
            (None, Some(regex), false, None) => WaitCondition::regex(regex.as_str())?,
            (None, None, true, None) => WaitCondition::Exit,
            (None, None, false, Some(command)) => WaitCondition::Command(command.parse()?),
            _ => {
                return Err(invalid(
                    "give exactly one of text, regex, exit: true, command",
                ));
            }
        };
        let timeout = seconds(
            self.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS),
            "timeout_secs",
        )?;
        Ok((condition, timeout))
    }
}

/// The signal names `Signal`'s parse takes, as a pattern (any case, an
/// optional `SIG`): the schema says what the parse says.
const SIGNAL_PATTERN: &str = "^(?:[Ss][Ii][Gg])?(?:[Ii][Nn][Tt]|[Tt][Ee][Rr][Mm]|[Kk][Ii][Ll][Ll]|\
    [Hh][Uu][Pp]|[Qq][Uu][Ii][Tt]|[Tt][Ss][Tt][Pp]|[Cc][Oo][Nn][Tt]|[Ww][Ii][Nn][Cc][Hh]|\
    [Uu][Ss][Rr][12])$";

/// `signal`: deliver a signal to the foreground process group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 or USR2 (`SIG` prefix
    /// allowed).
    #[schemars(regex(pattern = SIGNAL_PATTERN))]
    pub signal: String,
}

impl SignalRequest {
    /// The signal.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a signal outside the allowed set.
    pub fn validate(&self) -> Result<Signal> {
        self.signal.parse()
    }
}

/// `rename`: give a terminal another name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// Unique among yours, not shaped like an id, no `:`, `.` or control
    /// characters, at most 64 bytes.
    #[schemars(length(min = 1, max = 64), regex(pattern = NAME_PATTERN))]
    pub name: String,
}

impl RenameRequest {
    /// The new name, checked.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a name a spawn would refuse.
    pub fn validate(&self) -> Result<&str> {
        crate::vocab::validate_name(&self.name)?;
        Ok(&self.name)
    }
}

fn invalid(message: &str) -> Error {
    Error::InvalidInput(message.to_owned())
}

/// The longest wait a request may ask for (about 31 years): stated in the
/// schemas, so a schema-valid wait is never refused.
const MAX_SECONDS: f64 = 1e9;

fn seconds(value: f64, field: &str) -> Result<Duration> {
    if value > MAX_SECONDS {
        return Err(Error::InvalidInput(format!(
            "{field} {value} is over the maximum of {MAX_SECONDS} seconds"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::InvalidInput(format!("{field} {value} is not a number of seconds")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
