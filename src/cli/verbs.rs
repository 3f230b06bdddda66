//! The bodies of the registry commands, one per [`TerminalCommand`] verb,
//! writing text or JSON to the caller's writer.

use std::io::{Read, Write};

use serde_json::json;
use tmux_engine::control::{Event, Notification};
use tmux_engine::registry::{
    CorruptRecord, OwnerId, ReadRequest, Registry, Signal, TerminalSnapshot,
};
use tmux_engine::{Error, Result};
use tokio::sync::broadcast;
use tracing::warn;

use super::args::{TerminalCommand, WaitArgs};
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

/// Runs `command` against an open registry.
pub(super) async fn dispatch(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    command: TerminalCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    match command {
        TerminalCommand::Spawn(args) => {
            let spec = args.spec()?;
            let snapshot = registry.owner(owner).spawn(spec).await?;
            if json {
                write_json(out, &snapshot)?;
            } else {
                write_line(out, snapshot.id.as_str())?;
            }
        }
        TerminalCommand::List => {
            let list = registry.owner(owner).list().await?;
            report_corrupt(&registry.corrupt_records(), json);
            if json {
                write_json(out, &list)?;
            } else {
                for snapshot in &list {
                    write_line(out, &summary(snapshot))?;
                }
            }
        }
        TerminalCommand::Show { target } => {
            let snapshot = registry.owner(owner).show(&target).await?;
            if json {
                write_json(out, &snapshot)?;
            } else {
                write_line(out, &summary(&snapshot))?;
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
            let handle = registry.owner(owner).send(&args.target, request).await?;
            let operation = handle.operation();
            let result = handle.result().await?;
            let output = operation.read_output();
            if json {
                write_json(
                    out,
                    &json!({
                        "output": output.text,
                        "wait_reason": result.wait_reason,
                        "status": result.status,
                        "viewport": result.viewport,
                        "truncated": result.truncated || output.truncated,
                    }),
                )?;
            } else {
                out.write_all(output.text.as_bytes())
                    .map_err(|e| Error::io("writing stdout", e))?;
                if !output.text.is_empty() && !output.text.ends_with('\n') {
                    write_line(out, "")?;
                }
            }
        }
        TerminalCommand::Read {
            target,
            offset,
            count,
        } => {
            let page = registry
                .owner(owner)
                .read(&target, ReadRequest { offset, count })
                .await?;
            if json {
                write_json(out, &page)?;
            } else {
                for text in &page.lines {
                    write_line(out, text)?;
                }
            }
        }
        TerminalCommand::Screen { target } => {
            let screen = registry.owner(owner).screen(&target).await?;
            if json {
                write_json(out, &screen)?;
            } else {
                for text in screen.rows() {
                    write_line(out, text)?;
                }
            }
        }
        TerminalCommand::Signal { target, signal } => {
            let signal = signal.parse::<Signal>()?;
            let delivery = registry.owner(owner).signal(&target, signal).await?;
            if json {
                write_json(out, &delivery)?;
            } else {
                write_line(
                    out,
                    &format!("{} -> process group {}", delivery.signal, delivery.pgid),
                )?;
            }
        }
        TerminalCommand::Kill { target } => {
            let closed = registry.owner(owner).kill(&target).await?;
            if json {
                write_json(out, &json!({ "killed": closed }))?;
            } else {
                write_line(
                    out,
                    if closed {
                        "killed"
                    } else {
                        "joined a kill in flight"
                    },
                )?;
            }
        }
        TerminalCommand::Probe { target } => {
            let report = registry.owner(owner).probe(&target).await?;
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
        TerminalCommand::Wait(args) => wait(registry, owner, json, &args, out).await?,
        TerminalCommand::Events { target } => events(registry, owner, &target, out).await?,
        TerminalCommand::Attach { target, read_only } => {
            attach(registry, owner, &target, read_only).await?;
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
    }
    Ok(())
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

/// `wait`: the registry's event-driven wait; a timeout exits with
/// [`EXIT_TIMEOUT`].
async fn wait(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    args: &WaitArgs,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let condition = args.condition()?;
    let found = registry
        .owner(owner)
        .wait(&args.target, &condition, args.deadline()?)
        .await?;
    if json {
        write_json(out, &json!({ "matched": found }))?;
    } else {
        write_line(out, &found)?;
    }
    Ok(())
}

/// `events`: every notification of the terminal's control connection as a
/// JSON line, until the server goes.
async fn events(
    registry: &Registry,
    owner: &OwnerId,
    target: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let mut events = registry.owner(owner).events(target).await?;
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
async fn attach(registry: &Registry, owner: &OwnerId, target: &str, read_only: bool) -> Result<()> {
    let mut command = tokio::process::Command::from(
        registry
            .owner(owner)
            .attach_command(target, read_only)
            .await?,
    );
    // Subscribed before the spawn, so the attach's notification is not missed.
    let mut events = registry.owner(owner).events(target).await?;
    let lock = registry.owner(owner).attach_lock(target).await?;
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
