//! The registry commands: every verb of the verb table run one way
//! ([`run_verb`]: its entry runs it, and its answer is printed as it is
//! with `--json`, else as the entry's text), the HTTP API's and MCP's
//! entries too; then the bodies of the CLI's own commands (probe, record,
//! events, attach, reap).

use std::io::{Read, Write};

use serde_json::json;
use tmux_engine::control::{Event, Notification};
use tmux_engine::registry::{CorruptRecord, OwnerId, Registry};
use tmux_engine::verbs::{self, Arguments, TerminalRequest, Verb};
use tmux_engine::{Error, Result};
use tokio::sync::broadcast;
use tracing::warn;

use super::args::TerminalCommand;
use super::report::{CliError, write_json, write_line};

/// Runs `command` against an open registry: a verb of the table through
/// its entry, one way for all (its answer printed as `--json` or as the
/// entry's text for a person); the CLI's own commands by their bodies.
pub(super) async fn dispatch(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    command: TerminalCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    if let Some(call) = command.verb_call(read_stdin) {
        let (verb, arguments) = call?;
        return Ok(run_verb(registry, owner, json, verb, arguments, out).await?);
    }
    let named = |terminal: String| TerminalRequest { terminal };
    match command {
        TerminalCommand::Probe { target } => {
            let report = verbs::probe(registry.owner(owner), &named(target)).await?;
            if json {
                write_json(out, &report)?;
            } else {
                write_line(
                    out,
                    &format!(
                        "{}{}",
                        verbs::terminal_line(&report.snapshot),
                        if report.recreated { "\trecreated" } else { "" }
                    ),
                )?;
            }
        }
        TerminalCommand::Record {
            target,
            file,
            limit,
        } => {
            let recording = std::fs::File::create(&file)
                .map_err(|e| Error::io(format!("creating {}", file.display()), e))?;
            let limit = limit.unwrap_or(verbs::DEFAULT_RECORD_LIMIT);
            let pending = std::future::pending();
            let answer =
                verbs::record(registry.owner(owner), &target, recording, limit, pending).await?;
            if json {
                write_json(out, &answer)?;
            } else {
                write_line(out, &format!("{} bytes", answer.written))?;
            }
        }
        TerminalCommand::Events { target } => events(registry, owner, &named(target), out).await?,
        TerminalCommand::Attach { target, read_only } => {
            attach(registry, owner, &named(target), read_only).await?;
        }
        TerminalCommand::Reap { .. } => {
            let report = registry.reap().await?;
            if json {
                let failures: Vec<String> =
                    report.failures.iter().map(ToString::to_string).collect();
                write_json(
                    out,
                    &json!({
                        "removed": report.removed,
                        "skipped": report.skipped,
                        "corrupt": report.corrupt,
                        "failures": failures,
                    }),
                )?;
            } else {
                for removed in &report.removed {
                    write_line(out, removed)?;
                }
                for skipped in &report.skipped {
                    write_line(out, &format!("left alone: {skipped}"))?;
                }
                report_corrupt(&report.corrupt, false);
            }
            if let Some(failure) = report.failures.into_iter().next() {
                return Err(failure.into());
            }
        }
        // Every verb of the table was run above.
        _ => {}
    }
    Ok(())
}

/// Runs a verb of the table: its answer printed as it is (`--json`), or
/// as its entry's text for a person; a verb that scans the state
/// directory also reports what it found corrupt.
async fn run_verb(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    verb: &'static Verb,
    arguments: Arguments,
    out: &mut dyn Write,
) -> Result<()> {
    let answer = (verb.run)(registry.owner(owner), arguments).await?;
    if verb.scans {
        report_corrupt(&registry.corrupt_records(), json);
    }
    if json {
        return write_json(out, &answer);
    }
    out.write_all(&(verb.text)(answer)?)
        .map_err(|e| Error::io("writing stdout", e))
}

/// `send --stdin`'s text: all of standard input, any bytes.
fn read_stdin() -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("reading stdin", e))?;
    Ok(bytes)
}

/// Reports records moved aside as corrupt on stderr (stdout keeps its
/// shape: a `list --json` consumer still reads one array), one line each:
/// `warning: CORRUPT_RECORD: PATH: ERROR`, or with `--json` a JSON object
/// `{"warning": "CORRUPT_RECORD", "path", "id", "error"}`.
fn report_corrupt(corrupt: &[CorruptRecord], json: bool) {
    let mut err = std::io::stderr().lock();
    for record in corrupt {
        let _ = if json {
            writeln!(
                err,
                "{}",
                json!({
                    "warning": "CORRUPT_RECORD",
                    "path": record.path,
                    "id": record.id,
                    "error": record.error,
                })
            )
        } else {
            writeln!(
                err,
                "warning: CORRUPT_RECORD: {}: {} (moved aside; its terminal is left alone)",
                record.path.display(),
                record.error
            )
        };
    }
}

/// `events`: every notification of the terminal's control connection as a
/// JSON line, until the server goes.
async fn events(
    registry: &Registry,
    owner: &OwnerId,
    target: &TerminalRequest,
    out: &mut dyn Write,
) -> Result<()> {
    let mut events = verbs::events(registry.owner(owner), target).await?;
    loop {
        match events.recv().await {
            Ok(notification) => {
                let value = crate::cli::decode::event_json(&Event::Notification(notification));
                write_json(out, &value)?;
                out.flush().map_err(|e| Error::io("writing stdout", e))?;
            }
            Err(broadcast::error::RecvError::Lagged(skipped)) => {
                write_json(out, &json!({"event": "lagged", "skipped": skipped}))?;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// `attach`: runs the backend's attach command (for tmux, `tmux attach`)
/// on the user's terminal (inherited stdio) until it detaches.
///
/// The backend's attach lock (tmux: the handshake lock) is held from before
/// the spawn until tmux reports the client attached (its
/// `%client-session-changed` reached our control client), so the attach
/// never overlaps another engine client's handshake. The person's detach
/// cannot be locked: it happens when they choose (docs/tmux-quirks.md).
async fn attach(
    registry: &Registry,
    owner: &OwnerId,
    target: &TerminalRequest,
    read_only: bool,
) -> Result<()> {
    let mut command = tokio::process::Command::from(
        verbs::attach_command(registry.owner(owner), target, read_only).await?,
    );
    // Subscribed before the spawn, so the attach's notification is not missed.
    let mut events = verbs::events(registry.owner(owner), target).await?;
    let lock = verbs::attach_lock(registry.owner(owner), target).await?;
    let mut child = command
        .spawn()
        .map_err(|e| Error::io("running tmux attach", e))?;
    let attached = async {
        loop {
            match events.recv().await {
                Ok(Notification::ClientSessionChanged { .. }) => return true,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    };
    let mut exited = None;
    tokio::select! {
        confirmed = tokio::time::timeout(ATTACH_CONFIRM, attached) => match confirmed {
            Ok(true) => {}
            Ok(false) => warn!("the terminal's connection closed while attaching"),
            Err(_) => warn!(
                waited = ?ATTACH_CONFIRM,
                "tmux did not report the attach; releasing the handshake lock anyway"
            ),
        },
        // A failed attach exits without attaching: nothing left to guard.
        status = child.wait() => exited = Some(status),
    }
    drop(lock);
    drop(events);
    let status = match exited {
        Some(status) => status,
        None => child.wait().await,
    }
    .map_err(|e| Error::io("running tmux attach", e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: "attach-session".to_owned(),
            message: format!("tmux exited with {status}"),
        })
    }
}

/// How long `attach` holds the lock waiting for tmux to report the client
/// attached (a failed attach exits without any report).
const ATTACH_CONFIRM: std::time::Duration = std::time::Duration::from_secs(5);
