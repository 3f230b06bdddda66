//! The commands an integrated shell marked in a terminal's stream, found
//! again from the stream itself: what `commands` lists and what a wait
//! for a command collects, however long after its send gave up.
//!
//! A command is the span from its `C` mark to its `D` mark (see
//! [`crate::shell::marks`]); its id is the cursor just past its `C` (where
//! its output starts, the `start_cursor` its send answered), so it never
//! repeats: a restart of the engine or a respawn opens a stream of another
//! epoch. Only what the stream still holds is known: an end mark whose
//! start is older than the oldest byte held (evicted, or before the
//! engine linked to the terminal again) is counted, never listed with a
//! guessed code.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::io::next_change;
use super::seam::BackendTerminal;
use super::service::Owned;
use crate::shell::marks::{MarkKind, ShellIntegration, integration, scan};
use crate::stream::{OutputCursor, OutputSince};
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

/// One command the shell marked, as the stream holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MarkedCommand {
    /// Its id: the cursor where its output starts (`EPOCH:OFFSET`, the
    /// `start_cursor` of its send's answer). `wait {command: ID}` collects it.
    pub id: String,
    /// The command line as the shell echoed it, when the stream holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The cursor where its output starts (its id).
    pub start_cursor: String,
    /// The cursor where its output ends; `null` while it runs.
    pub end_cursor: Option<String>,
    /// Its exit status from the shell's end mark; `null` while it runs or
    /// when the shell gave none. Never guessed.
    pub exit_code: Option<i32>,
    /// Seconds from its start mark to its end mark (to now while it
    /// runs), as they reached the engine; `null` when not known.
    pub duration_secs: Option<f64>,
    /// Whether no end mark came yet.
    pub running: bool,
    /// Its output so far, escape sequences stripped (only in a wait's
    /// answer: a list would repeat the scrollback).
    #[serde(skip)]
    pub output: String,
}

/// What the stream says of a terminal's commands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandsAnswer {
    /// The newest commands, oldest first (at most the request's `limit`).
    pub commands: Vec<MarkedCommand>,
    /// The cursor of the oldest byte the stream holds: of anything before
    /// it (an evicted span, or what ran before the engine linked to the
    /// terminal again, e.g. after its restart) nothing is known.
    pub known_from: String,
    /// End marks in the stream whose command started before
    /// `known_from` (output held before them, no start mark): commands
    /// that ended, with no code reported for them. One that printed
    /// nothing is not counted: this is a floor.
    pub unknown_ended: usize,
    /// Commands found in the stream in all (before `limit`).
    pub total: usize,
}

/// The commands marked in `held` (a read of the whole stream held); `time`
/// says when a byte arrived.
pub fn scan_commands(
    held: &OutputSince,
    time: &dyn Fn(OutputCursor) -> Option<SystemTime>,
) -> (Vec<MarkedCommand>, usize) {
    let base = held.from.offset;
    let bytes = &held.bytes;
    let at = |offset: u64| OutputCursor {
        epoch: held.from.epoch,
        offset,
    };
    let slice = |start: u64, end: u64| {
        let start = usize::try_from(start - base).unwrap_or(usize::MAX);
        let end = usize::try_from(end - base).unwrap_or(usize::MAX);
        crate::screen::render::render(bytes.get(start..end.min(bytes.len())).unwrap_or_default())
    };
    let (marks, _) = scan(bytes, base);
    let mut commands = Vec::new();
    let mut unknown = 0;
    // The newest prompt's end (the echo of the line starts there) and the
    // command running: its `C` mark's start and end.
    let mut echo_from = None;
    let mut running: Option<(u64, u64)> = None;
    // The end of the mark before this one.
    let mut previous = base;
    for mark in marks {
        let before = previous;
        previous = mark.end;
        match mark.kind {
            MarkKind::PromptStart => {}
            MarkKind::PromptEnd => echo_from = Some(mark.end),
            MarkKind::CommandStart => {
                running = Some((mark.start, mark.end));
            }
            MarkKind::CommandEnd(status) => {
                let Some((c_start, start)) = running.take() else {
                    // An empty line's `D` (after a prompt), the first
                    // prompt's (nothing before it), or the end of a
                    // command whose `C` is not held: output before it.
                    if echo_from.is_none() && !slice(before, mark.start).trim().is_empty() {
                        unknown += 1;
                    }
                    continue;
                };
                let text = echo_from
                    .filter(|&from| from <= c_start)
                    .map(|from| slice(from, c_start).trim().to_owned())
                    .filter(|text| !text.is_empty());
                let end = mark.start.max(start);
                let duration = match (time(at(start.saturating_sub(1))), time(at(mark.start))) {
                    (Some(from), Some(to)) => to.duration_since(from).ok(),
                    _ => None,
                };
                commands.push(MarkedCommand {
                    id: at(start).to_string(),
                    text,
                    start_cursor: at(start).to_string(),
                    end_cursor: Some(at(end).to_string()),
                    exit_code: status,
                    duration_secs: duration.map(|d| d.as_secs_f64()),
                    running: false,
                    output: slice(start, end),
                });
                echo_from = None;
            }
        }
    }
    if let Some((c_start, start)) = running {
        let text = echo_from
            .filter(|&from| from <= c_start)
            .map(|from| slice(from, c_start).trim().to_owned())
            .filter(|text| !text.is_empty());
        let duration = time(at(start.saturating_sub(1)))
            .and_then(|from| SystemTime::now().duration_since(from).ok());
        commands.push(MarkedCommand {
            id: at(start).to_string(),
            text,
            start_cursor: at(start).to_string(),
            end_cursor: None,
            exit_code: None,
            duration_secs: duration.map(|d| d.as_secs_f64()),
            running: true,
            output: slice(start, base + bytes.len() as u64),
        });
    }
    (commands, unknown)
}

/// The commands the terminal's stream holds now.
fn held_commands(
    terminal: &dyn BackendTerminal,
) -> Result<(Vec<MarkedCommand>, usize, OutputSince)> {
    let stream = super::seam::stream_of(terminal)?;
    let held = stream.read(None);
    let (commands, unknown) = scan_commands(&held, &|at| stream.time_at(at));
    Ok((commands, unknown, held))
}

/// The command `which` names among `commands`, if the stream holds it;
/// an error when it can never be (another stream's id, evicted, or no
/// command starts there).
fn find(
    which: CommandRef,
    commands: Vec<MarkedCommand>,
    held: &OutputSince,
) -> Result<Option<MarkedCommand>> {
    match which {
        CommandRef::Last => Ok(commands.into_iter().last()),
        CommandRef::Id(id) => {
            let key = id.to_string();
            if let Some(found) = commands.into_iter().find(|c| c.id == key) {
                return Ok(Some(found));
            }
            let why = if id.epoch != held.from.epoch {
                "it is of another stream (the engine restarted or the terminal was recreated since): nothing is known of it"
            } else if id.offset < held.from.offset {
                "its start is no longer held: nothing is known of it"
            } else {
                "no command the shell marked starts there"
            };
            Err(Error::InvalidInput(format!("command {key}: {why}")))
        }
    }
}

impl Owned<'_> {
    /// Whether the terminal's shell integration works, as the marks its
    /// stream holds show it (see [`integration`]); `None` when it has no
    /// live stream (its program ended, its server is gone).
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`.
    pub(crate) async fn shell_integration(self, target: &str) -> Result<Option<ShellIntegration>> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = match registry.terminal(owner, target).await {
            Ok(terminal) => terminal,
            Err(error @ (Error::NoTerminal(_) | Error::ForeignTerminal(_))) => return Err(error),
            Err(_) => return Ok(None),
        };
        let Some(stream) = terminal.stream() else {
            return Ok(None);
        };
        let held = stream.read(None);
        let (marks, _) = scan(&held.bytes, held.from.offset);
        let whole = stream.whole();
        Ok(Some(integration(
            marks.iter().map(|mark| mark.kind),
            stream.integrated(),
            whole,
            !held.bytes.is_empty(),
        )))
    }

    /// The newest `limit` commands the terminal's shell marked, as its
    /// stream holds them (see the module's notes).
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`; `UNSUPPORTED` from a backend
    /// that keeps no stream.
    pub async fn commands(self, target: &str, limit: usize) -> Result<CommandsAnswer> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = registry.terminal(owner, target).await?;
        let (mut commands, unknown_ended, held) = held_commands(terminal.as_ref())?;
        let total = commands.len();
        commands.drain(..total.saturating_sub(limit));
        Ok(CommandsAnswer {
            commands,
            known_from: held.from.to_string(),
            unknown_ended,
            total,
        })
    }

    /// Waits until the command `which` ended (at once if it has) and
    /// returns it with its output.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a command the stream cannot hold; `TIMEOUT`
    /// past `timeout` (with its output so far); `WAIT_ENDED` when the
    /// program ended first; `NO_TERMINAL`, `FOREIGN_TERMINAL`.
    pub async fn wait_command(
        self,
        target: &str,
        which: CommandRef,
        timeout: Duration,
    ) -> Result<MarkedCommand> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = registry.terminal(owner, target).await?;
        let what = match which {
            CommandRef::Last => "the last command to end".to_owned(),
            CommandRef::Id(id) => format!("command {id} to end"),
        };
        let mut so_far = String::new();
        let waited = tokio::time::timeout(
            timeout,
            wait_for(terminal.as_ref(), which, &what, &mut so_far),
        )
        .await;
        waited.unwrap_or_else(|_| {
            Err(Error::WaitTimeout {
                what,
                timeout,
                screen: String::new(),
                last_output: so_far,
            })
        })
    }
}

/// The wait of [`Owned::wait_command`] without its deadline.
async fn wait_for(
    terminal: &dyn BackendTerminal,
    which: CommandRef,
    what: &str,
    so_far: &mut String,
) -> Result<MarkedCommand> {
    // Subscribed before the first look, so no output slips between.
    let mut changes = terminal.stream().map(|stream| stream.changes());
    let mut status = terminal.watch_status();
    // "last" means the newest command when the wait began: a later one
    // is not it.
    let mut which = which;
    loop {
        let (commands, _, held) = held_commands(terminal)?;
        match find(which, commands, &held)? {
            Some(command) if !command.running => return Ok(command),
            Some(command) => {
                which = CommandRef::Id(command.start_cursor.parse()?);
                so_far.clone_from(&command.output);
            }
            None => {}
        }
        next_change(terminal, &mut changes, &mut status)
            .await
            .map_err(|reason| Error::WaitEnded {
                what: what.to_owned(),
                reason,
                screen: String::new(),
                last_output: so_far.clone(),
            })?;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn held(bytes: &'static [u8]) -> OutputSince {
        OutputSince {
            bytes: Bytes::from_static(bytes),
            from: OutputCursor {
                epoch: 7,
                offset: 100,
            },
            gap: None,
        }
    }

    #[test]
    fn pairs_start_and_end_marks_and_never_guesses_a_code() {
        // An end whose start is not held, two commands, one running.
        let stream = held(
            b"\x1b]133;D;0\x07old\r\n\x1b]133;D;4\x07\x1b]133;A\x07$ \x1b]133;B\x07echo a\r\n\x1b]133;C\x07a\r\n\x1b]133;D;0\x07\
\x1b]133;A\x07$ \x1b]133;B\x07false\r\n\x1b]133;C\x07\x1b]133;D;1\x07\
\x1b]133;A\x07$ \x1b]133;B\x07sleep 9\r\n\x1b]133;C\x07zz",
        );
        let (commands, unknown) = scan_commands(&stream, &|_| None);
        assert_eq!(unknown, 1);
        let summary: Vec<_> = commands
            .iter()
            .map(|c| (c.text.as_deref(), c.exit_code, c.running, c.output.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (Some("echo a"), Some(0), false, "a\n"),
                (Some("false"), Some(1), false, ""),
                (Some("sleep 9"), None, true, "zz"),
            ]
        );
        assert!(commands[0].id.starts_with("0000000000000007:"));
        assert_eq!(commands[0].id, commands[0].start_cursor);
        assert!(commands.iter().all(|c| c.duration_secs.is_none()));
    }
}
