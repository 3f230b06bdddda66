//! The bodies of the registry commands, one per [`TerminalCommand`] verb,
//! writing text or JSON to the caller's writer.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::terminals::{
    CliError, EXIT_TIMEOUT, TerminalCommand, WaitArgs, parse_signal, read_request, send_request,
    spawn_spec, wait_timeout, write_json, write_line,
};
use crate::control::Event;
use crate::control::client::{ClientOptions, ControlClient};
use crate::registry::tmux::SESSION;
use crate::registry::{OwnerId, ReadRequest, Registry, TerminalSnapshot};
use crate::tmux::{ServerHandle, Tmux};
use crate::{Error, Result};

/// How often `wait --text/--regex/--exit` looks again.
const WAIT_POLL: Duration = Duration::from_millis(50);
/// Scrollback lines `wait --text/--regex` searches.
const WAIT_LINES: usize = 200;

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
            let spec = spawn_spec(args)?;
            let snapshot = registry
                .spawn(owner, spec, &tokio_util::sync::CancellationToken::new())
                .await?;
            if json {
                write_json(out, &snapshot)?;
            } else {
                write_line(out, snapshot.id.as_str())?;
            }
        }
        TerminalCommand::List => {
            let list = registry.list(owner).await?;
            if json {
                write_json(out, &list)?;
            } else {
                for snapshot in &list {
                    write_line(out, &summary(snapshot))?;
                }
            }
        }
        TerminalCommand::Show { target } => {
            let snapshot = registry.show(owner, &target).await?;
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
            let request = send_request(&args, text)?;
            let handle = registry.send(owner, &args.target, request).await?;
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
                .read(owner, &target, read_request(offset, count))
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
            let screen = registry.screen(owner, &target).await?;
            if json {
                write_json(out, &screen)?;
            } else {
                for text in &screen.lines {
                    write_line(out, text)?;
                }
            }
        }
        TerminalCommand::Signal { target, signal } => {
            let signal = parse_signal(&signal)?;
            let delivery = registry.signal(owner, &target, signal).await?;
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
            let closed = registry.kill(owner, &target).await?;
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
            let report = registry.probe(owner, &target).await?;
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
        TerminalCommand::Reap => {
            let report = registry.reap().await?;
            if json {
                let failures: Vec<String> =
                    report.failures.iter().map(ToString::to_string).collect();
                write_json(
                    out,
                    &json!({"removed": report.removed, "failures": failures}),
                )?;
            } else {
                for removed in &report.removed {
                    write_line(out, removed)?;
                }
            }
            if let Some(failure) = report.failures.into_iter().next() {
                return Err(failure.into());
            }
        }
    }
    Ok(())
}

/// `wait`: polls the recent scrollback (or the pushed status) until the
/// condition holds or the timeout passes.
async fn wait(
    registry: &Registry,
    owner: &OwnerId,
    json: bool,
    args: &WaitArgs,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + wait_timeout(args)?;
    let regex = args
        .regex
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| {
            Error::InvalidInput(format!(
                "regex {:?}: {e}",
                args.regex.as_deref().unwrap_or("")
            ))
        })?;
    loop {
        let found: Option<String> = if args.exit {
            let snapshot = registry.show(owner, &args.target).await?;
            (!snapshot.status.is_running()).then(|| snapshot.status.to_string())
        } else {
            let page = registry
                .read(
                    owner,
                    &args.target,
                    ReadRequest {
                        offset: 0,
                        count: Some(WAIT_LINES),
                    },
                )
                .await?;
            match (&args.text, &regex) {
                (Some(text), _) => page
                    .lines
                    .iter()
                    .find(|l| l.contains(text.as_str()))
                    .cloned(),
                (None, Some(regex)) => page.lines.iter().find(|l| regex.is_match(l)).cloned(),
                _ => None,
            }
        };
        if let Some(found) = found {
            if json {
                write_json(out, &json!({ "matched": found }))?;
            } else {
                write_line(out, &found)?;
            }
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError {
                code: "TIMEOUT",
                message: format!(
                    "terminal {} did not match within {}s",
                    args.target, args.timeout
                ),
                exit: EXIT_TIMEOUT,
            });
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The server directory of a terminal checked alive (recreated by policy).
async fn server_of(registry: &Registry, owner: &OwnerId, target: &str) -> Result<ServerHandle> {
    let attach = registry.attach(owner, target).await?;
    let dir = attach
        .locator
        .get("dir")
        .and_then(|dir| dir.as_str())
        .ok_or_else(|| {
            Error::InvalidInput(format!("terminal {target} has no tmux server directory"))
        })?
        .to_owned();
    Ok(ServerHandle::open(
        Arc::new(Tmux::discover()?),
        dir,
        SESSION,
    ))
}

/// `events`: a control client of its own, every notification as a JSON
/// line, until the server goes.
async fn events(
    registry: &Registry,
    owner: &OwnerId,
    target: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let server = server_of(registry, owner, target).await?;
    let client = ControlClient::spawn(server.control_command(), ClientOptions::default()).await?;
    let mut events = client.subscribe_events();
    loop {
        match events.recv().await {
            Ok(notification) => {
                let value = crate::cli::decode::event_json(&Event::Notification(notification));
                write_json(out, &value)?;
                out.flush().map_err(|e| Error::io("writing stdout", e))?;
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(skipped)) => {
                write_json(out, &json!({"event": "lagged", "skipped": skipped}))?;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// `attach`: runs `tmux -S SOCK attach-session -t =main` on the user's
/// terminal (inherited stdio) until it detaches.
async fn attach(registry: &Registry, owner: &OwnerId, target: &str, read_only: bool) -> Result<()> {
    let server = server_of(registry, owner, target).await?;
    let mut args = vec![
        "-S".into(),
        server.socket().as_os_str().to_owned(),
        "attach-session".into(),
        "-t".into(),
        server.session().into(),
    ];
    if read_only {
        args.push("-r".into());
    }
    let mut command = server.tmux().command(args);
    let status = tokio::task::spawn_blocking(move || command.status())
        .await
        .map_err(|e| Error::io("running tmux attach", std::io::Error::other(e)))?
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
