//! The bodies of the registry commands, one per [`TerminalCommand`] verb,
//! each run through the verb layer (`tmux_engine::verbs`, the HTTP API's
//! and MCP's too) and written as text or, with `--json`, as the verb's
//! answer. A command with no flags of its own (`show`, `screen`, `signal`,
//! `kill`, `rename`, and any new verb) has no body here: its verb-table entry runs it
//! ([`table`]), and its answer is printed as it is.

use std::io::{Read, Write};

use serde_json::{Value, json};
use tmux_engine::control::{Event, Notification};
use tmux_engine::registry::{CorruptRecord, OwnerId, Registry, SignalDelivery, TerminalSnapshot};
use tmux_engine::verbs::{
    self, Arguments, ListRequest, ReadAnswer, ReadFormat, ReadRequest, SearchRequest,
    TerminalRequest,
};
use tmux_engine::{Error, Result};
use tokio::sync::broadcast;
use tracing::warn;

use super::args::TerminalCommand;
use super::report::{CliError, write_json, write_line};

fn summary(snapshot: &TerminalSnapshot) -> String {
    format!(
        "{}\t{}\t{}\t{}",
        snapshot.id,
        snapshot.name.as_deref().unwrap_or("-"),
        snapshot.status,
        snapshot
            .pid
            .map_or_else(|| "-".to_owned(), |pid| pid.to_string()),
    )
}

/// Runs `command` against an open registry: each verb through the verb
/// layer (`tmux_engine::verbs`), whose answers `--json` prints as they are.
pub(super) async fn dispatch(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    command: TerminalCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let named = |terminal: String| TerminalRequest { terminal };
    match command {
        TerminalCommand::Spawn(args) => {
            let snapshot = verbs::spawn(registry.owner(owner), args.request()?).await?;
            if json {
                write_json(out, &snapshot)?;
            } else {
                write_line(out, snapshot.id.as_str())?;
            }
        }
        TerminalCommand::List => {
            let list = verbs::list(registry.owner(owner), &ListRequest {}).await?;
            report_corrupt(&registry.corrupt_records(), json);
            if json {
                write_json(out, &list)?;
            } else {
                for snapshot in &list {
                    write_line(out, &summary(snapshot))?;
                }
            }
        }
        TerminalCommand::Send(args) => {
            let text = match (&args.text, args.stdin) {
                (Some(_), true) => {
                    return Err(
                        Error::InvalidInput("give TEXT or --stdin, not both".to_owned()).into(),
                    );
                }
                (Some(text), false) => text.clone().into_bytes(),
                (None, true) => {
                    let mut bytes = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut bytes)
                        .map_err(|e| Error::io("reading stdin", e))?;
                    bytes
                }
                (None, false) => Vec::new(),
            };
            let request = args.request(text)?;
            let sent = verbs::send(registry.owner(owner), request)
                .await?
                .answer()
                .await?;
            if json {
                write_json(out, &sent)?;
            } else {
                out.write_all(sent.output.as_bytes())
                    .map_err(|e| Error::io("writing stdout", e))?;
                if !sent.output.is_empty() && !sent.output.ends_with('\n') {
                    write_line(out, "")?;
                }
            }
        }
        TerminalCommand::Read {
            target,
            offset,
            count,
            max_bytes,
            max_lines,
            since,
            format,
        } => {
            let format = format
                .as_deref()
                .map(str::parse::<ReadFormat>)
                .transpose()?;
            let request = ReadRequest {
                terminal: target,
                offset,
                count,
                max_bytes,
                max_lines,
                since,
                format,
            };
            let answer = verbs::read(registry.owner(owner), request).await?;
            if json {
                write_json(out, &answer)?;
            } else {
                write_read(out, &answer)?;
            }
        }
        TerminalCommand::Search {
            regex,
            terminal,
            context,
            max_matches,
            max_bytes,
        } => {
            let request = SearchRequest {
                terminal,
                regex,
                context,
                max_matches,
                max_bytes,
            };
            let found = verbs::search(registry.owner(owner), &request).await?;
            if json {
                write_json(out, &found)?;
            } else {
                for found in &found.matches {
                    let who = found.name.as_deref().unwrap_or(&found.terminal);
                    for text in &found.before {
                        write_line(out, &format!("{who}-{text}"))?;
                    }
                    write_line(out, &format!("{who}:{}:{}", found.line, found.text))?;
                    for text in &found.after {
                        write_line(out, &format!("{who}-{text}"))?;
                    }
                }
            }
        }
        TerminalCommand::Probe { target } => {
            let report = verbs::probe(registry.owner(owner), &named(target)).await?;
            if json {
                write_json(out, &report)?;
            } else {
                write_line(
                    out,
                    &format!(
                        "{}{}",
                        summary(&report.snapshot),
                        if report.recreated { "\trecreated" } else { "" }
                    ),
                )?;
            }
        }
        TerminalCommand::Wait(args) => {
            let found = verbs::wait(registry.owner(owner), &args.request()).await?;
            if json {
                write_json(out, &found)?;
            } else if let Some(output) = &found.output {
                out.write_all(output.as_bytes())
                    .map_err(|e| Error::io("writing the output".to_owned(), e))?;
            } else {
                write_line(out, &found.matched)?;
            }
        }
        TerminalCommand::Commands { target, limit } => {
            let request = verbs::CommandsRequest {
                terminal: target,
                limit,
            };
            let listed = verbs::commands(registry.owner(owner), &request).await?;
            if json {
                write_json(out, &listed)?;
            } else {
                for command in &listed.commands {
                    let code = command
                        .exit_code
                        .map_or_else(|| "-".to_owned(), |code| code.to_string());
                    let state = if command.running { "running" } else { "ended" };
                    let text = command.text.as_deref().unwrap_or("");
                    write_line(out, &format!("{}\t{state}\t{code}\t{text}", command.id))?;
                }
                if listed.unknown_ended > 0 {
                    write_line(
                        out,
                        &format!(
                            "({} earlier commands ended before {}: nothing known of them)",
                            listed.unknown_ended, listed.known_from
                        ),
                    )?;
                }
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
        other => table(registry, owner, json, &other, out).await?,
    }
    Ok(())
}

/// A command without flags of its own: its verb-table entry runs it, and
/// its answer is printed as it is (`--json`), or for a person.
async fn table(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    command: &TerminalCommand,
    out: &mut dyn Write,
) -> Result<()> {
    let (word, arguments) = command.table_call();
    let verb = verbs::VERBS
        .iter()
        .find(|verb| verb.cli == word)
        .ok_or_else(|| Error::Unsupported(format!("{word} is not a verb of the table")))?;
    let answer = (verb.run)(registry.owner(owner), Arguments::Json(arguments)).await?;
    if json {
        return write_json(out, &answer);
    }
    match verb.name {
        "kill" if answer["killed"] == true => write_line(out, "killed"),
        "kill" => write_line(out, "joined a kill in flight"),
        "show" => {
            // The snapshot's line, then whether sends get exit codes.
            let integration = answer["shell_integration"]
                .as_str()
                .unwrap_or("-")
                .to_owned();
            let line = summary(&typed::<TerminalSnapshot>(answer)?);
            write_line(out, &format!("{line}\tshell_integration={integration}"))
        }
        "rename" => write_line(out, &summary(&typed::<TerminalSnapshot>(answer)?)),
        "signal" => {
            let delivery = typed::<SignalDelivery>(answer)?;
            let line = format!("{} -> process group {}", delivery.signal, delivery.pgid);
            write_line(out, &line)
        }
        "screen" => {
            for line in answer["lines"].as_array().into_iter().flatten() {
                write_line(out, line.as_str().unwrap_or(""))?;
            }
            Ok(())
        }
        _ => {
            let text = serde_json::to_string_pretty(&answer)
                .map_err(|e| Error::io("encoding the answer", std::io::Error::other(e)))?;
            write_line(out, &text)
        }
    }
}

/// An answer back as its type, for its text form.
fn typed<T: serde::de::DeserializeOwned>(answer: Value) -> Result<T> {
    serde_json::from_value(answer)
        .map_err(|e| Error::io("reading the answer", std::io::Error::other(e)))
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

/// A read for people: its lines, its text, or its bytes exactly.
fn write_read(out: &mut dyn Write, answer: &ReadAnswer) -> Result<()> {
    use base64::Engine as _;
    for text in answer.lines.iter().flatten() {
        write_line(out, text)?;
    }
    if let Some(text) = &answer.text {
        out.write_all(text.as_bytes())
            .map_err(|e| Error::io("writing stdout", e))?;
    }
    if let Some(encoded) = &answer.bytes {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| Error::io("decoding the output", std::io::Error::other(e)))?;
        out.write_all(&bytes)
            .map_err(|e| Error::io("writing stdout", e))?;
    }
    Ok(())
}
