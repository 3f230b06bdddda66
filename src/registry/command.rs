//! One command an integrated shell marked in a terminal's stream, as a
//! value: what `commands` lists, what a wait for a command collects and
//! (through [`Command::of`]) the `commands` of a send's answer: one type,
//! built in one place; and how a wait names one ([`CommandRef`]). Plain
//! data over the stream's tracker spans: the verbs are `commands.rs`'s.
//!
//! A command's id is the cursor where its output starts (just past its
//! `C` mark; POSIX sh: past the echo of its line), the `start_cursor` its
//! send answered, so it never repeats: a new stream (a restart of the
//! server, a respawn) counts in another epoch.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::shell::span::{Echo, Span};
use crate::stream::{OutputCursor, Stream};
use crate::{Error, Result};

/// Which command a wait collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandRef {
    /// The newest command the stream holds (or the next one, if it holds
    /// none).
    Last,
    /// The command with this id (its start cursor).
    Id(OutputCursor),
}

impl std::str::FromStr for CommandRef {
    type Err = Error;

    fn from_str(text: &str) -> Result<CommandRef> {
        if text == "last" {
            return Ok(CommandRef::Last);
        }
        text.parse().map(CommandRef::Id).map_err(|_| {
            Error::InvalidInput(format!(
                "command {text:?} is neither \"last\" nor a command id (EPOCH:OFFSET, as `commands` lists it)"
            ))
        })
    }
}

/// One command the shell marked: the one command type of every answer
/// (a send's `commands[i]` and a `commands` entry are the same, field for
/// field).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Command {
    /// Its id: the cursor where its output starts (`EPOCH:OFFSET`, the
    /// `start_cursor` of its send's answer). `wait {command: ID}` collects it.
    pub id: String,
    /// The command line as the shell echoed it (escape sequences
    /// stripped, continuation prompts kept), when known; one of more than
    /// 3 lines or 1 KiB is its first and last line with
    /// `[... N bytes in all ...]` between.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The cursor where its output starts (its id).
    pub start_cursor: String,
    /// The cursor where its output ends; `null` while it runs.
    pub end_cursor: Option<String>,
    /// Its exit status from the shell's end mark; `null` while it runs or
    /// when the shell gave none. Never guessed.
    pub exit_code: Option<i32>,
    /// Seconds from its start to its end (to now while it runs), to the
    /// millisecond: by the times the shell stamped on its marks (bash 5+,
    /// zsh, fish with the engine's integration), the same in every
    /// process; else as its marks reached this process, which makes a
    /// command that ended before this process linked to the terminal 0.
    pub duration_secs: Option<f64>,
    /// Whether no end mark came yet.
    pub running: bool,
    /// Its output so far, escape sequences stripped (only in a wait's
    /// answer: a list would repeat the scrollback).
    #[serde(skip)]
    pub output: String,
}

impl Command {
    /// The command `span` of a stream in `epoch`, its duration to `now`
    /// while it runs (no output: see [`Command::with_output`]).
    pub(crate) fn of(span: &Span, epoch: u64, now: SystemTime) -> Command {
        let at = |offset| OutputCursor { epoch, offset }.to_string();
        let text = bounded_text(&span.echo);
        let text = text.trim();
        let duration = span
            .ended
            .unwrap_or(now)
            .duration_since(span.started)
            .unwrap_or_default();
        Command {
            id: at(span.start),
            text: (!text.is_empty()).then(|| text.to_owned()),
            start_cursor: at(span.start),
            end_cursor: span.end.map(at),
            exit_code: span.exit_code,
            duration_secs: Some(seconds(duration)),
            running: span.running(),
            output: String::new(),
        }
    }

    /// This command with its output as `stream` holds it (from its start
    /// to its end, or to now while it runs).
    #[must_use]
    pub(crate) fn with_output(mut self, stream: &Stream, span: &Span) -> Command {
        self.output = Command::output_of(stream, span, 0);
        self
    }

    /// The output of `span` after offset `from` as `stream` holds it, as
    /// the terminal shows it.
    pub(crate) fn output_of(stream: &Stream, span: &Span, from: u64) -> String {
        let held = stream.held();
        let end = span.end.unwrap_or(held.total).min(held.total);
        let start = span.start.max(from).max(held.start()).min(end);
        let bytes = held.between(start, end).unwrap_or_default();
        crate::screen::render::render(&bytes)
    }
}

/// A command's `text` is whole up to this many lines...
const TEXT_LINES: usize = 3;

/// ... and this many bytes; a longer one is its first and its last line,
/// each at most [`LINE_CHARS`] characters, with its size between: a pasted
/// heredoc's answer costs its output, not the paste again.
const TEXT_BYTES: usize = 1024;

/// The most characters of each line a cut `text` keeps.
const LINE_CHARS: usize = 200;

/// The command line as the terminal shows it, bounded (see [`TEXT_BYTES`]).
fn bounded_text(echo: &Echo) -> String {
    let head = crate::screen::render::render(&echo.head);
    let head = head.trim();
    if echo.whole() && head.len() <= TEXT_BYTES && head.lines().count() <= TEXT_LINES {
        return head.to_owned();
    }
    let tail = if echo.whole() {
        head.to_owned()
    } else {
        crate::screen::render::render(echo.tail())
    };
    let first = head.lines().next().unwrap_or_default();
    let first: String = first.chars().take(LINE_CHARS).collect();
    let last = tail.trim_end().lines().next_back().unwrap_or_default();
    let skip = last.chars().count().saturating_sub(LINE_CHARS);
    let last: String = last.chars().skip(skip).collect();
    format!("{first}\n[... {} bytes in all ...]\n{last}", echo.len)
}

/// Seconds to the millisecond: plenty, and shorter in every answer.
pub(crate) fn seconds(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0).round() / 1000.0
}

/// What the stream says of a terminal's commands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandsAnswer {
    /// The newest commands, oldest first (at most the request's `limit`).
    pub commands: Vec<Command>,
    /// The cursor of the first byte the stream's tracker read: of anything
    /// before it (what ran before the engine linked to the terminal, e.g.
    /// after its restart) nothing is known.
    pub known_from: String,
    /// End marks whose command started before `known_from` (output
    /// before them, no start mark): commands that ended, with no code
    /// reported for them. One that printed nothing is not counted: this is
    /// a floor.
    pub unknown_ended: usize,
    /// Commands the tracker holds in all (before `limit`).
    pub total: usize,
}
