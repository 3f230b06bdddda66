//! The watcher task of a tmux terminal ([`super::terminal`]): one per
//! terminal, no ticks. It holds the pane's subscription (a sink into the
//! terminal's stream) and pushes death through the status watch the moment
//! it is known: the pane's exit through [`wait_pane_exit`] (a pidfd on the
//! pane's process, or the relay's word over its link), the server's through
//! the control client's EOF; it follows every recreation (a respawn, a
//! probe, output after the end) as a spawn, and links to the pane's relay
//! again when this process's stream lost it (asking tmux again for as long
//! as it does not answer, never awaited in its loop's arms, so a cancel
//! still ends it at once). Apart from the terminal's verbs
//! (`terminal.rs`), which only read what it pushes.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{Fuse, FusedFuture};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::link::ServerLink;
use crate::Error;
use crate::control::client::{PaneEvent, PaneStream};
use crate::control::pane_exit::{PaneState, pane_state, wait_pane_exit};
use crate::control::subscribe::{Sink, SinkEvent};
use crate::registry::seam::TerminalStatus;
use crate::stream::Stream;
use crate::tmux::ProcessId;

/// The first pause before a relink asks tmux again whether the pane lives
/// (see [`relink`]); doubled after each try.
const RELINK_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between two such tries: a stall of tmux is followed
/// within this (plus the control client's timeout, which each try waits)
/// once it ends, and a long one costs a question per few seconds.
const RELINK_PAUSE_MAX: Duration = Duration::from_secs(2);

/// The watcher: holds the pane's subscription (a sink into the stream),
/// pushes death. One per terminal, no ticks.
pub(super) async fn watch_pane(
    shared: Arc<ServerLink>,
    mut stream: PaneStream,
    mut restreams: mpsc::Receiver<PaneStream>,
) {
    let mut status = shared.status.subscribe();
    let mut output = shared.stream.changes();
    // A relink under way: polled beside the rest, never awaited inside an
    // arm, so a cancel (the terminal dropped, the process shutting down)
    // ends it at once however long tmux takes to answer, and the pane's
    // exit and restreams are followed meanwhile. It outlives the inner
    // loops' start-overs.
    let mut relinking = pin!(Fuse::terminated());
    loop {
        let client = shared.client.clone();
        let pane = shared.pane;
        let exit = async move { wait_pane_exit(&client, pane).await };
        tokio::pin!(exit);
        let mut exit_seen = false;
        loop {
            tokio::select! {
                () = shared.stop.cancelled() => return,
                event = stream.recv() => match event {
                    // The sink takes every event; nothing is queued here.
                    Some(event) => take(&shared.stream, SinkEvent::Pane(event)),
                    None => {
                        let reason = stream
                            .close_reason()
                            .or_else(|| shared.client.closed_reason())
                            .unwrap_or_else(|| "control connection closed".to_owned());
                        shared.set_status(TerminalStatus::Gone { reason: format!("server gone: {reason}") });
                        return;
                    }
                },
                result = &mut exit, if !exit_seen => {
                    exit_seen = true;
                    // Output from here on is a new program's (below).
                    output.borrow_and_update();
                    match result {
                        Ok(exit) => shared.set_status(TerminalStatus::Exited { exit }),
                        Err(Error::ServerGone { reason }) => {
                            shared.set_status(TerminalStatus::Gone { reason: format!("server gone: {reason}") });
                        }
                        // tmux did not answer in time (its server stopped,
                        // or a machine under load): nothing is known dead.
                        // The watch starts over, each try paced by the
                        // client's timeouts.
                        Err(error @ Error::Unresponsive { .. }) => {
                            debug!(terminal = %shared.id, %error, "pane exit watch unanswered; watching again");
                            break;
                        }
                        Err(error) => {
                            // The pane vanished (its window was killed) while
                            // the server lives on.
                            warn!(terminal = %shared.id, %error, "pane exit watch failed");
                            if shared.client.closed_reason().is_none() {
                                shared.set_status(TerminalStatus::Gone { reason: "session gone".to_owned() });
                            }
                        }
                    }
                }
                // Running again after the end this watch saw: the pane was
                // respawned, by this process (which restreams too) or by
                // another one (the CLI's attach, an mcp's send), found by a
                // probe here or by the output below. Its program is followed
                // to its end as the first one was.
                _ = status.changed(), if exit_seen => {
                    if status.borrow_and_update().is_running() {
                        learn_pane_process(&shared).await;
                        break;
                    }
                }
                // Output after the end: a program runs in the pane again
                // (or the end's last bytes came late: one look finds it
                // dead).
                _ = output.changed(), if exit_seen && !status.borrow().is_running() => {
                    output.borrow_and_update();
                    if alive_again(&shared).await {
                        shared.set_status(TerminalStatus::Running);
                    }
                }
                // A loss told while a relink runs is looked at once it
                // ended (the notification's permit waits).
                () = shared.stream.lost_notified(), if relinking.is_terminated() => {
                    relinking.set(relink(&shared).fuse());
                }
                () = &mut relinking, if !relinking.is_terminated() => {}
                fresh = restreams.recv() => {
                    let Some(fresh) = fresh else { return };
                    // The old subscription stops feeding the stream first.
                    drop(stream);
                    stream = fresh.into_sink(sink_into(&shared.stream));
                    break;
                }
            }
        }
    }
}

/// Whether the pane, seen dead before, runs a program now (respawned by
/// another process); a pane that does not answer in time counts as dead.
async fn alive_again(shared: &ServerLink) -> bool {
    let look = pane_state(&shared.client, shared.pane);
    matches!(
        tokio::time::timeout(shared.config.probe_timeout, look).await,
        Ok(Ok(state)) if !state.dead
    )
}

/// Learns the pane's process after a respawn this process did not make
/// (signals and `pid` aim at it; the old one is gone).
async fn learn_pane_process(shared: &ServerLink) {
    let look = pane_state(&shared.client, shared.pane);
    let Ok(Ok(PaneState { pid: Some(pid), .. })) =
        tokio::time::timeout(shared.config.probe_timeout, look).await
    else {
        return;
    };
    let known = shared.lock().pane_process.map(|process| process.pid);
    if known != Some(pid) {
        shared.set_pane_process(ProcessId::now(pid).known());
    }
}

/// The pane's output stopped reaching this process while its server
/// lives (its relay was killed, or its pipe replaced): links again, to the
/// same relay from where the stream is when it still runs, else to a new
/// one (a new epoch: the stream restarts, and sends and viewers spanning it
/// see a gap). Where neither works the stream stays lost, and says why.
///
/// First it asks tmux whether the pane still lives (a pipe also closes
/// when its pane or server goes: nothing to link to then, and the status
/// tells it). A question tmux does not answer (stopped, a machine under
/// load) or any other failure that tells nothing is asked again after a
/// pause that grows to [`RELINK_PAUSE_MAX`], for as long as the stream
/// stays lost: a terminal's output is not lost for good because tmux was
/// slow once. Only the watcher's cancel ends the wait (it drops this).
async fn relink(shared: &ServerLink) {
    let mut pause = RELINK_PAUSE;
    let why = loop {
        let Some(why) = shared.stream.lost() else {
            return;
        };
        match pane_state(&shared.client, shared.pane).await {
            Ok(state) if !state.dead => break why,
            Ok(_) => {
                debug!(terminal = %shared.id, why, "the pane's output ended with the pane");
                return;
            }
            Err(error @ (Error::ServerGone { .. } | Error::Command { .. })) => {
                // The server or the pane is gone: the exit watch, or the
                // control client's end, reports it.
                debug!(terminal = %shared.id, why, %error, "the pane's output ended with its server or pane");
                return;
            }
            Err(error) => {
                debug!(terminal = %shared.id, why, %error, ?pause, "whether the pane lives is unknown; asking again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RELINK_PAUSE_MAX);
            }
        }
    };
    let dir = shared.address.dir();
    let timeout = shared.config.probe_timeout;
    let end = shared.stream.end();
    let linked = match crate::tmux::relay::link(dir, end.epoch, end.offset, timeout).await {
        Ok(Some(linked)) => Some(linked),
        _ => super::stream_link::install(&shared.client, shared.pane, dir, &shared.config).await,
    };
    let Some(linked) = linked else {
        warn!(terminal = %shared.id, why, "the pane's output is lost to this process: no relay could be linked or started");
        return;
    };
    if linked.epoch == end.epoch {
        if linked.start != end.offset {
            shared.stream.skip_to(linked.start);
        }
        shared.stream.found();
    } else {
        shared.stream.restart(linked.epoch, linked.start);
    }
    warn!(terminal = %shared.id, why, epoch = linked.epoch, "linked to the pane's relay again");
    let (epoch, replaced) = (linked.epoch, linked.epoch != end.epoch);
    if let Err(error) = shared.client.attach_raw(shared.pane, linked) {
        warn!(terminal = %shared.id, why, %error, "the pane's output is lost to this process: linking its relay again");
        shared.stream.lose(format!("{why}; linking again: {error}"));
        return;
    }
    if replaced && shared.lock().keeps {
        // A new relay keeps nothing until asked; its order is still in
        // the server directory.
        match crate::tmux::relay::keep(dir, epoch, 0, timeout).await {
            Ok(Some(_)) => {}
            Ok(None) => warn!(terminal = %shared.id, "the new relay does not keep the history"),
            Err(error) => {
                warn!(terminal = %shared.id, %error, "asking the new relay to keep the history")
            }
        }
    }
}

/// One event of the pane's subscription into the stream.
fn take(stream: &Stream, event: SinkEvent) {
    match event {
        SinkEvent::Pane(PaneEvent::Output(bytes)) => {
            crate::hops::mark(crate::hops::Hop::Stream);
            stream.push(bytes);
        }
        // Output was skipped (or the pane respawned): sends that span it
        // say so, viewers are repainted.
        SinkEvent::Pane(PaneEvent::Resync(_)) => stream.skipped(),
        // This process fell behind the relay's window: the relay's offsets
        // go on at `to`.
        SinkEvent::Skip { to } => stream.skip_to(to),
        SinkEvent::Lost(why) => stream.lose(why),
    }
}

/// The pane's subscription as it feeds the stream: where the client routes
/// it (the raw reader or the control reader), with no task between (a
/// watcher task's wake-up cost each echo ~15 µs, more under load). It
/// holds the stream only, never the terminal: the client keeps it.
pub(super) fn sink_into(stream: &Arc<Stream>) -> Sink {
    let stream = Arc::clone(stream);
    Arc::new(move |event| take(&stream, event))
}
