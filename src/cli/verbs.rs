//! The bodies of the registry commands, one per [`TerminalCommand`] verb,
//! writing text or JSON to the caller's writer.

use std::io::{Read, Write};
use std::sync::Arc;

use serde_json::json;

use super::terminals::{
    CliError, EXIT_TIMEOUT, TerminalCommand, WaitArgs, parse_signal, read_request, send_request,
    spawn_spec, wait_timeout, write_json, write_line,
};
use crate::control::client::{ClientOptions, ControlClient};
use crate::control::exit::wait_pane_exit;
use crate::control::{Event, PaneId};
use crate::registry::tmux::SESSION;
use crate::registry::{OwnerId, ReadRequest, Registry, TerminalSnapshot, TerminalStatus};
use crate::tmux::{ServerHandle, Tmux};
use crate::{Error, Result};

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

/// `wait`: until the condition holds or the timeout passes. Event-driven:
/// the text is looked for again only when the pane printed something (seen
/// through a control client of its own), and `--exit` waits on the pane's
/// pushed exit, so an idle terminal costs nothing while waiting.
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
    let timed_out = || CliError {
        code: "TIMEOUT",
        message: format!(
            "terminal {} did not match within {}s",
            args.target, args.timeout
        ),
        exit: EXIT_TIMEOUT,
    };
    let found = match check(registry, owner, args, regex.as_ref()).await? {
        Some(found) => found,
        None => {
            let connected = async {
                let server = server_of(registry, owner, &args.target).await?;
                ControlClient::attach(&server, ClientOptions::default(), &[])
                    .await
                    .map(|(client, _)| client)
            };
            let client = match connected.await {
                Ok(client) => client,
                // It may have ended between the look and the attach (a
                // dead terminal cannot be attached): look once more.
                Err(error) => match check(registry, owner, args, regex.as_ref()).await? {
                    Some(found) => return finish_wait(json, &found, out),
                    None => return Err(error.into()),
                },
            };
            // Subscribed before the second look, so no output slips between.
            let mut events = client.subscribe_events();
            let waited = async {
                if args.exit {
                    let exit = wait_pane_exit(&client, PaneId(0)).await?;
                    // Worded as `check` words a status it finds at once.
                    return Ok::<_, CliError>(TerminalStatus::Exited { exit }.to_string());
                }
                loop {
                    if let Some(found) = check(registry, owner, args, regex.as_ref()).await? {
                        return Ok(found);
                    }
                    if !next_output(&mut events).await {
                        // The server went: one last look at what it left.
                        return check(registry, owner, args, regex.as_ref())
                            .await?
                            .ok_or_else(|| {
                                CliError::from(Error::ServerGone {
                                    reason: client
                                        .closed_reason()
                                        .unwrap_or_else(|| "the server exited".to_owned()),
                                })
                            });
                    }
                }
            };
            let found = tokio::time::timeout_at(deadline, waited)
                .await
                .map_err(|_| timed_out())??;
            client.detach().await;
            found
        }
    };
    finish_wait(json, &found, out)
}

/// Prints what `wait` found.
fn finish_wait(json: bool, found: &str, out: &mut dyn Write) -> std::result::Result<(), CliError> {
    if json {
        write_json(out, &json!({ "matched": found }))?;
    } else {
        write_line(out, found)?;
    }
    Ok(())
}

/// One look: the exit status once the program ended (`--exit`), else the
/// first of the last [`WAIT_LINES`] lines that matches.
async fn check(
    registry: &Registry,
    owner: &OwnerId,
    args: &WaitArgs,
    regex: Option<&regex::Regex>,
) -> Result<Option<String>> {
    if args.exit {
        let snapshot = registry.show(owner, &args.target).await?;
        return Ok((!snapshot.status.is_running()).then(|| snapshot.status.to_string()));
    }
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
    Ok(match (&args.text, regex) {
        (Some(text), _) => page
            .lines
            .iter()
            .find(|l| l.contains(text.as_str()))
            .cloned(),
        (None, Some(regex)) => page.lines.iter().find(|l| regex.is_match(l)).cloned(),
        _ => None,
    })
}

/// Waits for pane output, then takes whatever else is already queued (one
/// look serves a burst). False once the connection closed.
async fn next_output(
    events: &mut tokio::sync::broadcast::Receiver<crate::control::Notification>,
) -> bool {
    use crate::control::Notification;
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    loop {
        match events.recv().await {
            Ok(Notification::Output { .. } | Notification::ExtendedOutput { .. })
            | Err(RecvError::Lagged(_)) => break,
            Ok(_) => {}
            Err(RecvError::Closed) => return false,
        }
    }
    loop {
        match events.try_recv() {
            Ok(_) | Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Closed) => return false,
        }
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
    let (client, _) = ControlClient::attach(&server, ClientOptions::default(), &[]).await?;
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
