//! One function per verb: validate the request (before any lookup, so a
//! bad request is `INVALID_INPUT` whether or not the terminal exists), then
//! one registry call, then the answer. These are the only calls the faces
//! make to the registry for their verbs.

use tokio::sync::broadcast;

use super::answers::{KillAnswer, ReadAnswer, ShowAnswer, WaitAnswer, bounded_page};
use super::requests::RenameRequest;
use super::requests::{
    ListRequest, ReadRequest, ReadWhat, SendRequest, SignalRequest, SpawnRequest, TerminalRequest,
    WaitRequest,
};
use super::since::since_answer;
use crate::Result;
use crate::control::Notification;
use crate::registry::{
    AttachLock, Owned, ProbeReport, ReadPage, SendAnswer, SendHandle, SignalDelivery,
    TerminalSnapshot, WaitCondition,
};
use crate::screen::Screen;

/// `spawn`: a new terminal's snapshot. Dropping the future cancels the
/// spawn (the registry rolls back what it made); a face that wants it to
/// complete regardless runs it in a task of its own.
///
/// # Errors
/// `INVALID_INPUT` from [`SpawnRequest::validate`], or the registry's.
pub async fn spawn(owned: Owned<'_>, request: SpawnRequest) -> Result<TerminalSnapshot> {
    let spec = request.validate()?;
    owned.spawn(spec).await
}

/// `list`: the owner's terminals in creation order (the request has no
/// fields; it is taken so every verb has one).
///
/// # Errors
/// The registry's.
pub async fn list(owned: Owned<'_>, _request: &ListRequest) -> Result<Vec<TerminalSnapshot>> {
    owned.list().await
}

/// `show`: one terminal's snapshot, its interactive shell, and whether
/// its shell integration works.
///
/// # Errors
/// `NO_TERMINAL`, `FOREIGN_TERMINAL`, ...
pub(crate) async fn show(owned: Owned<'_>, request: &TerminalRequest) -> Result<ShowAnswer> {
    let snapshot = snapshot(owned, request).await?;
    let (shell, shell_integration) = owned.shell_integration(&request.terminal).await?;
    Ok(ShowAnswer {
        snapshot,
        shell: shell.map(|path| path.display().to_string()),
        shell_integration,
    })
}

/// One terminal's snapshot alone (what a face needs of it for its own
/// checks, e.g. MCP's guard: its pid), without `show`'s look at the marks.
///
/// # Errors
/// `NO_TERMINAL`, `FOREIGN_TERMINAL`, ...
pub(crate) async fn snapshot(
    owned: Owned<'_>,
    request: &TerminalRequest,
) -> Result<TerminalSnapshot> {
    owned.show(&request.terminal).await
}

/// What `"recreated":true` adds to an answer's JSON: room a bound keeps
/// for it.
const RECREATED_LEN: usize = r#","recreated":true"#.len();

/// Runs `use_it` on terminal `target` after [`Owned::revive`] brought it
/// back if it was a dead `on-attach` terminal, and says whether it was
/// recreated: how a send, read or wait from any face brings such a
/// terminal back, as an attach does. A terminal whose death this process
/// had not seen yet fails the use (`TERMINAL_DEAD`, `SERVER_GONE`): it is
/// revived then and the use made once more. `use_it` is told whether the
/// terminal was recreated (an answer's bound keeps room for saying so).
async fn revived<T, F, Fut>(owned: Owned<'_>, target: &str, use_it: F) -> Result<(T, bool)>
where
    F: Fn(bool) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let recreated = owned.revive(target).await?;
    match use_it(recreated).await {
        Err(error)
            if !recreated
                && owned.starts_programs()
                && matches!(
                    error.code(),
                    crate::ErrorCode::TerminalDead | crate::ErrorCode::ServerGone
                ) =>
        {
            if owned.revive(target).await? {
                Ok((use_it(true).await?, true))
            } else {
                Err(error)
            }
        }
        used => used.map(|value| (value, recreated)),
    }
}

/// `send`: starts typing (see [`SendRequest::validate`] for its default
/// wait); the handle follows its output, cancels it, or awaits its answer.
///
/// # Errors
/// `INVALID_INPUT` from [`SendRequest::validate`], or the registry's
/// (`SEND_ACTIVE`, `TERMINAL_DEAD`, ...).
pub async fn send(owned: Owned<'_>, request: SendRequest) -> Result<SendHandle<SendAnswer>> {
    let target = request.terminal.clone();
    let include_screen = request.include_screen;
    let bound = request.bound()?;
    let request = request.validate()?;
    let (handle, recreated) =
        revived(owned, &target, |_| owned.send(&target, request.clone())).await?;
    // The answer every face renders, once the send ended.
    Ok(handle.then(move |mut answer| async move {
        if !include_screen {
            answer.viewport = None;
        }
        answer.recreated = recreated;
        Ok(answer.bounded(bound))
    }))
}

/// `read`: a page of scrollback, or the output after a cursor, bounded as
/// the request says.
///
/// # Errors
/// `INVALID_INPUT` for a bad cursor, `since` beside `offset` or `count`, a `count`
/// over `MAX_READ_LINES` or a bad bound; or the registry's.
pub async fn read(owned: Owned<'_>, request: ReadRequest) -> Result<ReadAnswer> {
    let target = request.terminal.clone();
    let bound = request.bound()?;
    let what = request.what()?;
    let target = target.as_str();
    let (mut answer, recreated) = revived(owned, target, |recreated| {
        let what = what.clone();
        async move {
            let mut bound = bound;
            if recreated {
                // Room for saying so beside the rest.
                bound.max_bytes = bound.max_bytes.saturating_sub(RECREATED_LEN);
            }
            Ok(match what {
                ReadWhat::Page(request) => {
                    // The end first: output arriving between the two calls
                    // is then read again from the cursor, never skipped.
                    let next = owned.output_end(target).await?;
                    let page = owned.read(target, request).await?;
                    // The page is cut to leave room for the cursor beside it.
                    let room = ReadAnswer::page(ReadPage::default(), next).cursor_len();
                    ReadAnswer::page(bounded_page(page, bound, room), next)
                }
                ReadWhat::Since(cursor, format) => {
                    let output = owned.output_since(target, Some(cursor)).await?;
                    since_answer(&output, format, bound)
                }
            })
        }
    })
    .await?;
    answer.recreated = recreated;
    Ok(answer)
}

/// `screen`: the visible screen.
///
/// # Errors
/// The registry's.
pub async fn screen(owned: Owned<'_>, request: &TerminalRequest) -> Result<Screen> {
    owned.screen(&request.terminal).await
}

/// `wait`: until the condition holds; the matching line.
///
/// # Errors
/// `INVALID_INPUT` from [`WaitRequest::validate`], `TIMEOUT`,
/// `WAIT_ENDED`, or the registry's.
pub async fn wait(owned: Owned<'_>, request: &WaitRequest) -> Result<WaitAnswer> {
    let (condition, timeout) = request.validate()?;
    let target = &request.terminal;
    if let WaitCondition::Command(which) = condition {
        let (ended, recreated) = revived(owned, target, |_| {
            owned.wait_command(target, which, timeout)
        })
        .await?;
        return Ok(WaitAnswer {
            matched: ended.text.clone().unwrap_or_default(),
            command: Some(ended.id),
            exit_code: ended.exit_code,
            duration_secs: ended.duration_secs,
            output: Some(ended.output),
            recreated,
        });
    }
    let since = request.since()?;
    let (matched, recreated) = revived(owned, target, |_| {
        owned.wait_since(target, &condition, since, timeout)
    })
    .await?;
    Ok(WaitAnswer {
        matched,
        command: None,
        exit_code: None,
        duration_secs: None,
        output: None,
        recreated,
    })
}

/// `signal`: where the signal went.
///
/// # Errors
/// `INVALID_INPUT` for an unknown signal, or the registry's.
pub async fn signal(owned: Owned<'_>, request: &SignalRequest) -> Result<SignalDelivery> {
    let signal = request.validate()?;
    owned.signal(&request.terminal, signal).await
}

/// `rename`: the terminal's snapshot under its new name.
///
/// # Errors
/// `INVALID_INPUT` from [`RenameRequest::validate`]; `DUPLICATE_NAME`, or
/// the registry's.
pub async fn rename(owned: Owned<'_>, request: &RenameRequest) -> Result<TerminalSnapshot> {
    let name = request.validate()?;
    owned.rename(&request.terminal, name).await
}

/// `kill`: whether this call killed it.
///
/// # Errors
/// The registry's.
pub async fn kill(owned: Owned<'_>, request: &TerminalRequest) -> Result<KillAnswer> {
    let killed = owned.kill(&request.terminal).await?;
    Ok(KillAnswer { killed })
}

/// `probe`: whether it is alive (recreating a dead `on-attach` one).
///
/// # Errors
/// The registry's.
pub async fn probe(owned: Owned<'_>, request: &TerminalRequest) -> Result<ProbeReport> {
    owned.probe(&request.terminal).await
}

/// The terminal's control-mode notifications, live (the CLI's `events`).
///
/// # Errors
/// The registry's.
pub async fn events(
    owned: Owned<'_>,
    request: &TerminalRequest,
) -> Result<broadcast::Receiver<Notification>> {
    owned.events(&request.terminal).await
}

/// The command that attaches a person's terminal (the CLI's `attach`).
///
/// # Errors
/// The registry's.
pub async fn attach_command(
    owned: Owned<'_>,
    request: &TerminalRequest,
    read_only: bool,
) -> Result<std::process::Command> {
    owned.attach_command(&request.terminal, read_only).await
}

/// The guard held while an [`attach_command`] client attaches.
///
/// # Errors
/// The registry's.
pub async fn attach_lock(owned: Owned<'_>, request: &TerminalRequest) -> Result<AttachLock> {
    owned.attach_lock(&request.terminal).await
}
