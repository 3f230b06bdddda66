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
//! because the server is gone (no server on the socket, the session gone,
//! the connection closed) closes the client for good with its reason:
//! what a closed connection always meant. One tmux does not answer by the
//! ready timeout while its server lives (stopped, or a machine under
//! load) closes nothing: that server and its program live, and a client
//! closed would have them reported gone (and a restart policy start a
//! second server for the terminal). The lines queued for it fail
//! `UNRESPONSIVE`, as any command tmux did not answer in time, none of
//! them written (nothing is before the attach is answered, so a retry
//! types nothing twice), and the client stays unlinked; the connection
//! stays open, and the next line's relink waits on it again rather than
//! open another (each link a stopped server holds unread identifies when
//! it is continued: see `Connected::waiting`). A server that dies
//! meanwhile ends that connection, which closes the client. An event
//! subscriber made while a relink waits asks for none of its own (the
//! link is not `Unlinked` then) and needs none: that connection's reader
//! runs, and routes the server's notifications to it once tmux, continued,
//! answers the attach (`tests/control/idle_link.rs`).
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

use super::connect::{Attaching, Launch, connect, refused_once};
use super::link::Link;
use super::shared::{Internal, Overdue, Pending, State};
use super::{ClientShared, stdin, watchdog};
use crate::Error;
use crate::tmux::client_protocol::End;
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ServerHandle, process};

/// The linger task: lets the connection go once it has been quiet for
/// `linger` and nothing needs it, links again when a line is queued (and
/// again at the next one, where tmux did not answer).
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
        // A connection tmux has not answered yet, waited on again.
        let mut waiting = None;
        loop {
            tokio::select! {
                () = &mut gone => {
                    shared.close("the control client detached".to_owned());
                    return;
                }
                () = &mut ended => return,
                () = shared.relink_wanted.notified() => {}
            }
            match relink(&shared, &cancel, &mut waiting).await {
                Relinked::Linked => break,
                Relinked::Unanswered => {}
                Relinked::Closed => return,
            }
        }
    }
}

/// How a relink ended.
enum Relinked {
    /// Linked again (or no relink was due).
    Linked,
    /// tmux did not answer in time, its server alive: the lines queued for
    /// it failed `UNRESPONSIVE`, unwritten, and the client stays unlinked.
    Unanswered,
    /// The server is gone: the client is closed.
    Closed,
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

/// Links again as the client first did, with the lines queued meanwhile:
/// over the connection tmux has not answered yet when there is one
/// (`waiting`, where it is left again if tmux still does not answer).
async fn relink(
    shared: &Arc<ClientShared>,
    cancel: &CancellationToken,
    waiting: &mut Option<Box<Attaching>>,
) -> Relinked {
    let Some(recipe) = &shared.relink else {
        return Relinked::Closed;
    };
    let lines = {
        let mut state = shared.lock();
        match std::mem::replace(&mut state.link, Link::Relinking) {
            Link::Unlinked { lines, .. } => lines,
            other => {
                state.link = other;
                return Relinked::Linked;
            }
        }
    };
    let mut argv = recipe.server.control_argv();
    argv.extend_from_slice(&recipe.extra);
    let (launch, release) = match waiting.take() {
        Some(attaching) => {
            let release = attaching.release.clone();
            (Launch::Waiting(attaching), release)
        }
        None if recipe.direct => (
            Launch::Direct(recipe.server.socket(), &argv),
            CancellationToken::new(),
        ),
        None => {
            let mut command = recipe.server.control_command();
            command.args(&recipe.extra);
            (Launch::Process(command), CancellationToken::new())
        }
    };
    let connected = connect(shared, launch, lines, cancel.clone(), release.clone()).await;
    if let Err(error) = connected.attached {
        if let Error::Unresponsive { timeout, .. } = error
            && server_alive(&recipe.server).await
        {
            debug!(%error, "tmux did not answer a relink; staying unlinked");
            unanswered(shared, connected.unsent, timeout);
            *waiting = connected.waiting.map(Box::new);
            return Relinked::Unanswered;
        }
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
        return Relinked::Closed;
    }
    let mut state = shared.lock();
    state.link = Link::Linked { release };
    if let Some(secs) = shared.opts.pause_after {
        let command = TmuxCommand::new("refresh-client").opt("-f", format!("pause-after={secs}"));
        shared.internal_locked(&mut state, &command, Internal::Ignore("pause-after"));
    }
    debug!("linked the control client again");
    Relinked::Linked
}

/// Whether the server of a relink tmux did not answer is still there: its
/// process, when the client knows it (a stopped one is; a zombie is not),
/// else a listener on its socket (a stopped server's still takes links
/// into its backlog, and a full backlog is a listener too). A server that
/// dies while linking closes the connection, which is no timeout: this
/// guards against a timeout that races its death.
async fn server_alive(server: &ServerHandle) -> bool {
    if server.pid() != 0 {
        return process::is_alive(server.process());
    }
    match tokio::net::UnixStream::connect(server.socket()).await {
        Ok(_) => true,
        Err(error) => error.kind() == std::io::ErrorKind::WouldBlock,
    }
}

/// After a relink tmux did not answer within `waited`: every line queued
/// for it fails `UNRESPONSIVE` (none was written: nothing is before the
/// attach is answered, so a caller's retry types nothing twice), and the
/// client is unlinked again, its next line bringing the next relink. Under
/// the state lock, where lines are queued: each line in `unsent` has its
/// pending entry, and both go together.
fn unanswered(
    shared: &ClientShared,
    unsent: Option<mpsc::UnboundedReceiver<bytes::Bytes>>,
    waited: Duration,
) {
    let mut state = shared.lock();
    let mut lines = unsent.unwrap_or_else(|| {
        // The lines went with the connection: a new queue, as `let_go` makes.
        let (queue, lines) = mpsc::unbounded_channel();
        state.stdin = stdin::Stdin::new(queue);
        lines
    });
    while lines.try_recv().is_ok() {}
    for pending in std::mem::take(&mut state.pending) {
        overdue(pending, waited);
    }
    state.link = Link::Unlinked {
        lines,
        wanted: false,
    };
    shared.unwatch_locked(&mut state);
}

/// Tells the caller of `pending`, if one still waits, that tmux did not
/// answer within `waited`; its in-flight slot goes with the entry.
fn overdue(pending: Pending, waited: Duration) {
    match pending {
        Pending::Caller { tx: Some(tx), .. } => {
            let _ = tx.send(Err(Overdue(waited)));
        }
        Pending::Guard(then) => overdue(*then, waited),
        Pending::Caller { tx: None, .. } | Pending::Internal(_) => {}
    }
}
