//! The `commands` verb and the wait for a command: what an integrated
//! shell marked in a terminal's stream, as the stream's one command
//! tracker ([`crate::shell::tracker`]) holds it, listed or awaited however
//! long after its send gave up. The values they answer are `command.rs`'s.
//!
//! Only what the tracker saw is known: from `known_from` (the first byte
//! the stream held) on. An end mark of a command that started before is
//! counted, never listed with a guessed code.

use std::time::{Duration, SystemTime};

use super::command::{Command, CommandRef, CommandsAnswer};
use super::io::next_change;
use super::seam::BackendTerminal;
use super::service::Owned;
use crate::shell::marks::ShellIntegration;
use crate::shell::span::Span;
use crate::stream::{OutputCursor, Stream};
use crate::{Error, Result};

/// The spans `stream`'s tracker holds (none for a program that is no
/// integrated shell), with its `known_from` and `unknown_ended`.
fn held_spans(stream: &Stream) -> (Vec<Span>, u64, usize) {
    match stream.tracker() {
        Some(tracker) => (
            tracker.spans().iter().cloned().collect(),
            tracker.known_from(),
            tracker.unknown_ended(),
        ),
        None => (Vec::new(), stream.held().start(), 0),
    }
}

/// The command `which` names among `spans`, if the stream's tracker holds
/// it; an error when it can never be (another stream's id, before what
/// the tracker knows, or no command starts there).
fn find(which: CommandRef, spans: &[Span], epoch: u64, known_from: u64) -> Result<Option<Span>> {
    match which {
        CommandRef::Last => Ok(spans.last().cloned()),
        CommandRef::Id(id) => {
            if id.epoch == epoch
                && let Some(found) = spans.iter().find(|span| span.start == id.offset)
            {
                return Ok(Some(found.clone()));
            }
            let why = if id.epoch != epoch {
                "it is of another stream (the engine restarted or the terminal was recreated since): nothing is known of it"
            } else if id.offset < known_from {
                "it started before the engine's stream of the terminal did: nothing is known of it"
            } else if spans.first().is_some_and(|first| id.offset < first.start) {
                "it is older than the commands kept: nothing is known of it"
            } else {
                "no command the shell marked starts there"
            };
            Err(Error::InvalidInput(format!("command {id}: {why}")))
        }
    }
}

impl Owned<'_> {
    /// The interactive shell the terminal runs, and whether its shell
    /// integration works, as the marks its stream holds show it (see
    /// [`integration`]); `None` when it has no live stream (its program
    /// ended, its server is gone).
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`.
    pub(crate) async fn shell_integration(
        self,
        target: &str,
    ) -> Result<(Option<std::path::PathBuf>, Option<ShellIntegration>)> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = match registry.terminal(owner, target).await {
            Ok(terminal) => terminal,
            Err(error @ (Error::NoTerminal(_) | Error::ForeignTerminal(_))) => return Err(error),
            Err(_) => return Ok((None, None)),
        };
        let integration = terminal.stream().map(|stream| stream.shell_integration());
        Ok((terminal.shell(), integration))
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
        terminal.catch_up().await;
        let stream = super::seam::stream_of(terminal.as_ref())?;
        let (spans, known_from, unknown_ended) = held_spans(&stream);
        let total = spans.len();
        let now = SystemTime::now();
        let commands = spans[total.saturating_sub(limit)..]
            .iter()
            .map(|span| Command::of(span, stream.epoch(), now))
            .collect();
        Ok(CommandsAnswer {
            commands,
            known_from: OutputCursor {
                epoch: stream.epoch(),
                offset: known_from,
            }
            .to_string(),
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
    ) -> Result<Command> {
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
) -> Result<Command> {
    // Subscribed before the first look, so no output slips between.
    let mut changes = terminal.stream().map(|stream| stream.changes());
    let mut status = terminal.watch_status();
    // "last" means the newest command when the wait began: a later one
    // is not it.
    let mut which = which;
    loop {
        let stream = super::seam::stream_of(terminal)?;
        let (spans, known_from, _) = held_spans(&stream);
        let epoch = stream.epoch();
        if let Some(span) = find(which, &spans, epoch, known_from)? {
            let command = Command::of(&span, epoch, SystemTime::now()).with_output(&stream, &span);
            if !command.running {
                return Ok(command);
            }
            which = CommandRef::Id(OutputCursor {
                epoch,
                offset: span.start,
            });
            so_far.clone_from(&command.output);
        }
        drop(stream);
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
