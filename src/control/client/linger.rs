//! Letting go of an idle client's connection, and linking again on its
//! next use, unseen by its callers.
//!
//! Why: a terminal whose output comes from its relay (`raw.rs`) needs its
//! control connection only for the next command, and an idle one held it
//! for ever: two descriptors in this process (the link's socket and its
//! data socket), and 64 KiB in the tmux server (`imsg_init`'s read buffer
//! per client), with its tasks and buffers here. With
//! [`unlink_when_idle`](super::ControlClient::unlink_when_idle), the
//! client's linger task lets the connection go once nothing has been
//! written for the linger time and nothing needs it (no command pending,
//! no write under way, no event subscriber, no pane on `%output`, no
//! subscriber lagging or resyncing); the client itself stays, with its
//! routes, its raw readers and its watchdog. A line written while
//! unlinked waits in stdin's queue and wakes this task, which links again
//! as the client first did (under the handshake lock, with the same
//! attach command): one relink however many callers race, each line
//! written in order once tmux has answered the attach. A link that fails
//! (no server on the socket, the session gone, no answer by the ready
//! timeout) closes the client for good with its reason: what a closed
//! connection always meant.
//!
//! While unlinked, nothing here learns of the server's death by itself:
//! the relay's link ends (its pipe closes with the server) and the pane's
//! process ends (the relay's pidfd, told over that link), and whoever sees
//! either asks tmux, which links again and finds it gone.
//!
//! The swap, under the state lock so no line can fall between: the
//! connection's stdin is put aside ([`State::leaving`]) and a new one,
//! queueing only, takes its place; the reader, once it holds the
//! handshake lock, drops the old one (its EOF detaches: tmux 3.3a crashes
//! when a client leaves while another identifies) and ends without
//! closing anything.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::connect::{Launch, connect, refused_once};
use super::link::Link;
use super::shared::{Internal, State};
use super::{ClientShared, stdin, watchdog};
use crate::tmux::client_protocol::End;
use crate::tmux::command::TmuxCommand;

/// The linger task: lets the connection go once it has been quiet for
/// `linger` and nothing needs it, links again when a line is queued.
/// Ends with the client (`cancel` or the connection's end).
pub(super) async fn linger(shared: Arc<ClientShared>, cancel: CancellationToken, linger: Duration) {
    let gone = cancel.clone().cancelled_owned();
    tokio::pin!(gone);
    let ended = shared.ended.clone().cancelled_owned();
    tokio::pin!(ended);
    loop {
        loop {
            // On the watchdogs' grid: terminals that went quiet together
            // are let go in one wake-up.
            let at = watchdog::on_grid(shared.lock().last_line + linger, linger);
            tokio::select! {
                () = &mut gone => return,
                () = &mut ended => return,
                () = tokio::time::sleep_until(at) => {}
            }
            if let_go(&shared, linger) {
                break;
            }
        }
        tokio::select! {
            () = &mut gone => {
                shared.close("the control client detached".to_owned());
                return;
            }
            () = &mut ended => return,
            () = shared.relink_wanted.notified() => {}
        }
        if !relink(&shared, &cancel).await {
            return;
        }
    }
}

/// Lets the connection go when it has been quiet for `linger` and nothing
/// needs it; whether it did.
fn let_go(shared: &ClientShared, linger: Duration) -> bool {
    // The broadcast's lock before the state's, as `subscribe_events` takes them.
    let events = shared.events.lock().unwrap_or_else(|e| e.into_inner());
    let observed = events.as_ref().is_some_and(|tx| tx.receiver_count() > 0);
    let mut state = shared.lock();
    drop(events);
    let now = Instant::now();
    if state.closed.is_some() || state.last_line + linger > now {
        return false;
    }
    // A write under way holds the typist between its pieces, when
    // nothing may be pending.
    let writing = shared.input.try_lock().is_err();
    if observed || writing || !quiet(&state) {
        // Looked at again a linger from now.
        state.last_line = now;
        return false;
    }
    let Link::Linked { release } = &state.link else {
        return false;
    };
    let release = release.clone();
    let (queue, lines) = mpsc::unbounded_channel();
    let leaving = std::mem::replace(&mut state.stdin, stdin::Stdin::new(queue));
    state.leaving = Some(leaving);
    state.link = Link::Unlinked {
        lines,
        wanted: false,
    };
    drop(state);
    debug!("letting go of an idle control connection");
    release.cancel();
    true
}

/// Whether the connection carries nothing anyone waits for: no command
/// pending, stdin idle, and every followed pane read from its relay, with
/// no subscriber behind (a resync is commands).
fn quiet(state: &State) -> bool {
    state.pending.is_empty()
        && state.stdin.idle()
        && state
            .routes
            .panes
            .iter()
            .all(|(pane, route)| state.raw.contains_key(pane) && route.quiet())
}

/// Links again as the client first did, with the lines queued meanwhile;
/// false when that failed, which closed the client.
async fn relink(shared: &Arc<ClientShared>, cancel: &CancellationToken) -> bool {
    let Some(recipe) = &shared.relink else {
        return false;
    };
    let lines = {
        let mut state = shared.lock();
        match std::mem::replace(&mut state.link, Link::Relinking) {
            Link::Unlinked { lines, .. } => lines,
            other => {
                state.link = other;
                return true;
            }
        }
    };
    let release = CancellationToken::new();
    let mut argv = recipe.server.control_argv();
    argv.extend_from_slice(&recipe.extra);
    let launch = if recipe.direct {
        Launch::Direct(recipe.server.socket(), &argv)
    } else {
        let mut command = recipe.server.control_command();
        command.args(&recipe.extra);
        Launch::Process(command)
    };
    let connected = connect(shared, launch, lines, cancel.clone(), release.clone()).await;
    if let Err(error) = connected.attached {
        let why = match connected.refusal.as_ref().and_then(|end| end.get()) {
            Some(End::Refused(why)) => {
                refused_once(recipe.server.socket(), why);
                why.clone()
            }
            _ => error.to_string(),
        };
        debug!(%why, "linking the control client again failed");
        shared.close(format!("linking again: {why}"));
        // What the failed connection started ends with it.
        cancel.cancel();
        return false;
    }
    let mut state = shared.lock();
    state.link = Link::Linked { release };
    if let Some(secs) = shared.opts.pause_after {
        let command = TmuxCommand::new("refresh-client").opt("-f", format!("pause-after={secs}"));
        shared.internal_locked(&mut state, &command, Internal::Ignore("pause-after"));
    }
    debug!("linked the control client again");
    true
}
