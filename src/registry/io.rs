//! Terminal I/O through the registry: output streams, raw input, resize,
//! control-mode events, a person's attach, and the event-driven wait for
//! text, a regex or the program's exit. Text and regex waits read the
//! terminal's output stream (never tmux's scrollback: no `capture-pane`). Every call is fenced to the
//! terminal's exact owner, like every other verb; nothing here knows which
//! backend runs the terminal.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};

use super::seam::{AttachLock, BackendTerminal, OutputStream, Snapshot, TerminalStatus};
use super::service::Owned;
use crate::control::Notification;
use crate::screen::IntoRegex;
use crate::stream::Stream;
use crate::vocab::Size;
use crate::{Error, Result};

/// Lines of output held before a text or regex wait began that it
/// searches (`since: screen`), counted back from the newest line.
pub const WAIT_LINES: usize = 200;

/// What [`Owned::wait`] waits for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WaitCondition {
    /// A line of the output contains this text (where it looks:
    /// [`WaitSince`]).
    Text(String),
    /// A line of the output matches this expression.
    Regex(regex::Regex),
    /// The program ended.
    Exit,
    /// A command the shell marked ended (see [`Owned::wait_command`],
    /// which waits for it; [`Owned::wait`] does not).
    Command(super::CommandRef),
}

impl WaitCondition {
    /// A regex condition from a pattern.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a pattern that does not compile.
    pub fn regex(pattern: impl IntoRegex) -> Result<WaitCondition> {
        Ok(WaitCondition::Regex(pattern.into_regex()?))
    }

    fn describe(&self) -> String {
        match self {
            WaitCondition::Text(text) => format!("text {text:?}"),
            WaitCondition::Regex(regex) => format!("regex /{}/", regex.as_str()),
            WaitCondition::Exit => "the program to exit".to_owned(),
            WaitCondition::Command(_) => "a command to end".to_owned(),
        }
    }
}

/// Where a text or regex wait looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitSince {
    /// Output after the start of the newest command the shell marked (the
    /// last one the engine typed, as a rule): never the echo of its
    /// command line. Without a marked command held, as [`Screen`].
    ///
    /// [`Screen`]: WaitSince::Screen
    #[default]
    LastCommand,
    /// The last 200 lines of output the stream holds when the wait
    /// begins, and all output after (the screen and its scrollback, as
    /// far as this engine's stream saw them).
    Screen,
    /// Output after this cursor.
    Cursor(super::OutputCursor),
}

impl std::str::FromStr for WaitSince {
    type Err = Error;

    fn from_str(text: &str) -> Result<WaitSince> {
        match text {
            "screen" => Ok(WaitSince::Screen),
            "command" => Ok(WaitSince::LastCommand),
            cursor => cursor.parse().map(WaitSince::Cursor).map_err(|_| {
                Error::InvalidInput(format!(
                    "since {text:?} is not command, screen or a cursor (EPOCH:OFFSET)"
                ))
            }),
        }
    }
}

/// The first line of the output after `*from` that meets `condition`;
/// `*from` moves past the complete lines searched, so each look reads
/// only the newest.
fn search_stream(
    terminal: &dyn BackendTerminal,
    condition: &WaitCondition,
    from: &mut super::OutputCursor,
    last_lines: &mut String,
) -> Result<Option<String>> {
    let read = super::seam::stream_of(terminal)?.read(Some(*from));
    let text = super::strip_escapes(&read.bytes);
    if let Some(line) = text.split('\n').find(|line| matches(condition, line)) {
        return Ok(Some(line.to_owned()));
    }
    // Complete lines never match later: start after the last of them.
    let complete = read
        .bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    *from = super::OutputCursor {
        epoch: read.from.epoch,
        offset: read.from.offset + complete as u64,
    };
    last_lines.clone_from(&text);
    Ok(None)
}

/// The wait itself, without its deadline; `last_lines` keeps what was
/// searched last, for the timeout's message.
async fn wait_on(
    terminal: &dyn BackendTerminal,
    condition: &WaitCondition,
    since: WaitSince,
    what: &str,
    last_lines: &mut String,
) -> Result<String> {
    let mut status = terminal.watch_status();
    if let WaitCondition::Command(_) = condition {
        return Err(Error::InvalidInput(
            "a wait for a command is Owned::wait_command".to_owned(),
        ));
    }
    if let WaitCondition::Exit = condition {
        let ended = status
            .wait_for(|status| !status.is_running())
            .await
            .map_err(|_| ended(what, "the terminal is gone"))?;
        return Ok(ended.to_string());
    }
    // Subscribed before the first look, so no output slips between.
    let mut changes = terminal.stream().map(|stream| stream.changes());
    let stream = super::seam::stream_of(terminal)?;
    let mut from = match since {
        WaitSince::LastCommand => {
            last_command_start(&stream).unwrap_or_else(|| last_lines_start(&stream, WAIT_LINES))
        }
        WaitSince::Screen => last_lines_start(&stream, WAIT_LINES),
        WaitSince::Cursor(cursor) => cursor,
    };
    // A stream that joined the running terminal (a one-shot CLI call, a
    // restarted engine) holds nothing printed before it: one look at the
    // screen and its scrollback as tmux keeps them, when the wait began,
    // covers that; every later look reads the stream only.
    let before_link = !matches!(since, WaitSince::Cursor(_))
        && from.offset == stream.held().start()
        && stream.joined();
    drop(stream);
    if before_link {
        let page = terminal
            .read(super::seam::ReadRequest {
                offset: 0,
                count: Some(WAIT_LINES),
            })
            .await;
        match page {
            Ok(page) => {
                if let Some(line) = page.lines.iter().find(|line| matches(condition, line)) {
                    return Ok(line.clone());
                }
                *last_lines = page.lines.join("\n");
            }
            Err(error) if !terminal.status().is_running() => {
                return Err(ended(what, &error.to_string()));
            }
            Err(error) => return Err(error),
        }
    }
    loop {
        if let Some(line) = search_stream(terminal, condition, &mut from, last_lines)? {
            return Ok(line);
        }
        next_change(terminal, &mut changes, &mut status)
            .await
            .map_err(|reason| ended(what, &reason))?;
    }
}

/// Where output after the newest command's start begins, when the
/// stream's tracker holds a command.
fn last_command_start(stream: &Stream) -> Option<super::OutputCursor> {
    let start = stream.tracker()?.spans().back()?.start;
    Some(super::OutputCursor {
        epoch: stream.epoch(),
        offset: start,
    })
}

/// The cursor where the last `lines` lines `stream` holds start (the
/// line the newest byte is on counts; its oldest byte when it holds
/// fewer).
fn last_lines_start(stream: &Stream, lines: usize) -> super::OutputCursor {
    let read = stream.read(None);
    let bytes = &read.bytes;
    let last = bytes.len().saturating_sub(1);
    let start = memchr::memrchr_iter(b'\n', bytes)
        .filter(|&at| at != last)
        .nth(lines.saturating_sub(1))
        .map_or(0, |at| at + 1);
    super::OutputCursor {
        epoch: read.from.epoch,
        offset: read.from.offset + start as u64,
    }
}

/// Waits for the next change worth a look: a burst of output (taken as
/// one) or a new status. Run after each look, so the caller looks once
/// more after its stream ended (the server went) or the program ended,
/// and only then gets `Err` with why no change can come.
pub(super) async fn next_change(
    terminal: &dyn BackendTerminal,
    changes: &mut Option<watch::Receiver<u64>>,
    status: &mut watch::Receiver<TerminalStatus>,
) -> std::result::Result<(), String> {
    let current = terminal.status();
    if !current.is_running() {
        return Err(format!("the program {current}"));
    }
    let Some(watch) = changes.as_mut() else {
        return Err("the terminal has no output stream".to_owned());
    };
    // The stream's own watch, woken after the bytes are in it (a separate
    // subscription could wake a look before they were, and none after),
    // and one wake serves a burst.
    tokio::select! {
        changed = watch.changed() => {
            if changed.is_err() {
                // The stream went: one last look, then the status says
                // the terminal ended.
                *changes = None;
            }
        }
        // The program ended: one last look at what it left.
        _ = status.changed() => {}
    }
    Ok(())
}

fn matches(condition: &WaitCondition, line: &str) -> bool {
    match condition {
        WaitCondition::Text(text) => line.contains(text.as_str()),
        WaitCondition::Regex(regex) => regex.is_match(line),
        WaitCondition::Exit | WaitCondition::Command(_) => false,
    }
}

fn ended(what: &str, reason: &str) -> Error {
    Error::WaitEnded {
        what: what.to_owned(),
        reason: reason.to_owned(),
        screen: String::new(),
        last_output: String::new(),
    }
}

impl Owned<'_> {
    /// A live stream of the terminal's output from now on. A dead
    /// `on-attach` terminal is recreated first (as for
    /// [`attach`](Owned::attach)); any other dead one is `TERMINAL_DEAD`.
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `TERMINAL_DEAD`, `UNRESPONSIVE`.
    pub async fn output(self, target: &str) -> Result<OutputStream> {
        self.attach(target).await?.terminal.output()
    }

    /// The pane as it is now (the screen with attributes and cursor, no
    /// history) and a live stream of its output from then on: what a
    /// recording starts from.
    ///
    /// # Errors
    /// As for [`output`](Owned::output).
    pub async fn snapshot_and_output(self, target: &str) -> Result<(Snapshot, OutputStream)> {
        let terminal = self.attach(target).await?.terminal;
        // The stream first, so nothing falls between the two: output of
        // that instant is in both (drawn twice in a replay) rather than lost.
        let stream = terminal.output()?;
        let snapshot = terminal.snapshot(0).await?;
        Ok((snapshot, stream))
    }

    /// Writes `bytes` to the terminal's program exactly, as typed input.
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `TERMINAL_DEAD`, or the backend's
    /// failure.
    pub async fn write(self, target: &str, bytes: Bytes) -> Result<()> {
        let (registry, owner) = (self.registry, self.owner);
        registry.terminal(owner, target).await?.write(bytes).await
    }

    /// Resizes the terminal.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a size out of range; as
    /// [`write`](Owned::write).
    pub async fn resize(self, target: &str, size: Size) -> Result<()> {
        let (registry, owner) = (self.registry, self.owner);
        size.check()?;
        registry.terminal(owner, target).await?.resize(size).await
    }

    /// Every control-mode notification of the terminal's server, live
    /// (see [`BackendTerminal::events`]). Recreates like
    /// [`output`](Owned::output).
    ///
    /// # Errors
    /// As [`output`](Owned::output); `UNSUPPORTED` for a backend without
    /// control-mode events.
    pub async fn events(self, target: &str) -> Result<broadcast::Receiver<Notification>> {
        self.attach(target).await?.terminal.events()
    }

    /// The command that attaches a person's terminal to this one (see
    /// [`BackendTerminal::attach_command`]). Recreates like
    /// [`output`](Owned::output).
    ///
    /// # Errors
    /// As [`output`](Owned::output); `UNSUPPORTED` for a backend that
    /// cannot attach.
    pub async fn attach_command(
        self,
        target: &str,
        read_only: bool,
    ) -> Result<std::process::Command> {
        self.attach(target)
            .await?
            .terminal
            .attach_command(read_only)
    }

    /// The guard to hold while the [`attach_command`](Owned::attach_command)
    /// client attaches (see [`BackendTerminal::attach_lock`]): taken before
    /// spawning it, dropped once it is attached.
    ///
    /// # Errors
    /// As [`output`](Owned::output).
    pub async fn attach_lock(self, target: &str) -> Result<AttachLock> {
        Ok(self.attach(target).await?.terminal.attach_lock().await)
    }

    /// Waits until `condition` holds: returns the matching line, or the
    /// exit status in words (`exited with code 3`).
    ///
    /// Event-driven: the output stream is searched again only after the
    /// program printed something (only its new lines), and an exit is pushed by the backend, so
    /// an idle terminal costs nothing while waiting.
    ///
    /// # Errors
    /// `TIMEOUT` past `timeout` (the message shows the last lines
    /// searched); `WAIT_ENDED` when the program ended (or its server went
    /// away) without a match; `NO_TERMINAL`, `FOREIGN_TERMINAL`.
    pub async fn wait(
        self,
        target: &str,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<String> {
        self.wait_since(target, condition, WaitSince::default(), timeout)
            .await
    }

    /// [`wait`](Owned::wait), a text or regex looked for where `since`
    /// says.
    ///
    /// # Errors
    /// As [`wait`](Owned::wait).
    pub async fn wait_since(
        self,
        target: &str,
        condition: &WaitCondition,
        since: WaitSince,
        timeout: Duration,
    ) -> Result<String> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = registry.terminal(owner, target).await?;
        let what = condition.describe();
        let mut last_lines = String::new();
        let waited = tokio::time::timeout(
            timeout,
            wait_on(terminal.as_ref(), condition, since, &what, &mut last_lines),
        )
        .await;
        waited.unwrap_or_else(|_| {
            Err(Error::WaitTimeout {
                what,
                timeout,
                screen: last_lines,
                last_output: String::new(),
            })
        })
    }
}
