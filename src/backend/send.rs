//! Sends: writing text to the pane exactly (the control client's streamed
//! write, [`ControlClient::send_bytes`], queued in order behind any other
//! write to the terminal) and waiting for the requested condition.
//!
//! [`ControlClient::send_bytes`]: crate::control::client::ControlClient::send_bytes
//!
//! Wait conditions, all pushed or bounded, none polling tmux:
//! - `idle`: no output for the configured quiet period after the write;
//!   reported as `stdin_read` instead when the foreground group is then
//!   blocked reading the terminal (see [`reading::input_state`]), `busy`
//!   when it waits on other files only (a server);
//! - `stdin_read`: the foreground group is blocked reading the terminal
//!   (or, `busy`, waiting on other files), as [`InputProbe`] judges it:
//!   seen twice in a row with no output between. This reads `/proc` (not
//!   tmux) on a short backoff, only while such a send waits;
//! - `command`: see [`command`]: typed at the shell's prompt (or into a
//!   reader), followed until the shell is back at its prompt;
//! - `exited`: the status watch leaves `running` (pushed by the watcher);
//! - `timeout` and `cancelled` end any of them.
//!
//! A server that dies during a send fails it with `SERVER_GONE`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::command::{self, Follow};
use super::full_screen;
use super::link::ServerLink;
use super::pages::viewport;
use crate::registry::seam::{
    SendAnswer, SendHandle, SendOperation, SendRequest, TerminalStatus, WaitFor, WaitReason,
};
use crate::screen::keys;
use crate::tmux::TmuxCommand;
use crate::tmux::probe::Observed;
use crate::tmux::reading::{self, InputState, ReadMark};
use crate::{Error, Result};

/// Starts a send on `shared`'s pane.
pub(super) fn start(shared: &Arc<ServerLink>, request: SendRequest) -> Result<SendHandle> {
    if !shared.status.borrow().is_running() {
        return Err(Error::TerminalDead {
            terminal: shared.id.to_string(),
            status: shared.status.borrow().to_string(),
        });
    }
    let operation = SendOperation::new(Arc::clone(&shared.stream), shared.status.subscribe());
    shared.lock().active_send = Some(operation.stopper());
    let operation = Arc::new(operation);
    let (shared, driven) = (Arc::clone(shared), Arc::clone(&operation));
    let result = Box::pin(async move {
        let result = run(&shared, &driven, request).await;
        shared.lock().active_send = None;
        result
    });
    Ok(SendHandle { operation, result })
}

/// The longest a reply waits for its reader to read before its looks
/// count anyway (a reader whose reads `/proc` does not count).
const UNREAD_BOUND: Duration = Duration::from_secs(2);
/// How often a reply looks whether its reader read.
const UNREAD_PAUSE: Duration = Duration::from_millis(5);

async fn run(shared: &ServerLink, op: &SendOperation, request: SendRequest) -> Result<SendAnswer> {
    let timeout = request.timeout.unwrap_or(shared.config.send_timeout);
    let deadline = Instant::now() + timeout;
    // `command` on an integrated shell types at its prompt (or into a
    // reader) and follows its marks; anywhere else it waits for stdin.
    // A full-screen program in front takes keys (that is how `q` quits
    // `less`), never text meant for the shell.
    let front = full_screen::in_front(shared).await;
    if let Some(front) = &front
        && !request.text.is_empty()
    {
        let why = format!(
            "{front} (a full-screen program) is in front: text is not typed into it; \
             send keys to it, where any word that names no key is typed as text \
             (e.g. keys: [\"q\"] quits a pager, [\"o\", \"README\", \"Escape\"] types in vim)"
        );
        // Ended `full_screen` (unless cancelled first), whatever else
        // ended the wait for the text meanwhile.
        let wait_reason = op.settle_over(WaitReason::FullScreen);
        let mut answer = answer(shared, op, wait_reason).await.not_typed(why);
        answer.foreground_command = Some(front.clone());
        return Ok(answer);
    }
    // A word in keys that names no key is the program's text only where
    // a full-screen program takes keys; at a shell it is a misspelt key.
    if front.is_none() {
        keys::refuse_words(&request.keys)?;
    }
    // Keys to a full-screen program follow the shell's marks too: the
    // one that quits it (`q` to `less`, `:wq` in vim) ends a command, and
    // is answered with its exit code as a typed line would be.
    let shell = match request.wait {
        WaitFor::Command => command::integrated(shared),
        _ => None,
    };
    // The tracker is asked next whether a command runs: what the relay
    // read is handed over first. Marks printed just before this send (a
    // command typed by a send that did not wait, one a signal ended) may
    // still be held there or in its socket on a loaded machine, and a
    // stale prompt would have the text typed into a running program, or
    // a `C-c` answered as typed at the prompt.
    if shell.is_some() {
        shared.catch_up().await;
    }
    // Where the text goes, and the commands it makes followed: `None`
    // waits the plain way.
    let mut followed = match shell {
        // Keys alone while a command runs (`C-c` to `tail -f`, `C-d` to a
        // REPL) go in at once, whatever the program waits on, and are
        // followed as a reply: a key that ends the command answers its
        // exit code as a typed line would.
        Some(kind) if request.text.is_empty() && command::running(shared) => {
            Some(Follow::reply(kind))
        }
        Some(kind) if request.submit && front.is_none() => {
            match command::ready(shared, kind, deadline, op).await {
                Ok(follow) => Some(follow),
                Err(why) => return Ok(not_typed(shared, op, why).await),
            }
        }
        _ => None,
    };
    // Any other wait types at once (type-ahead into a busy program is
    // its point), except a line for an integrated shell that has not
    // drawn its first prompt yet: typed then, the terminal echoes it
    // before the line editor starts and the line editor again (twice in
    // the scrollback), and the history's leading space is not added. It
    // waits for that prompt as `command` does, then waits its own way.
    let first_prompt = if shell.is_none()
        && request.submit
        && front.is_none()
        && command::starting(shared)
        && let Some(kind) = command::integrated(shared)
    {
        match command::ready(shared, kind, deadline, op).await {
            Ok(follow) => Some(follow),
            Err(why) => return Ok(not_typed(shared, op, why).await),
        }
    } else {
        None
    };
    let typing = followed.as_ref().or(first_prompt.as_ref());
    let at_prompt = typing.is_some_and(|follow| !follow.is_reply());
    let what = match request.wait {
        WaitFor::Command => WaitFor::StdinRead,
        other => other,
    };
    // One write, Enter included: a second call would cost a round trip. A
    // leading space keeps it out of the history (the rc's ignorespace).
    let space = at_prompt && !request.history;
    let mut after = Vec::new();
    if !request.keys.is_empty() {
        let app_cursor = keys::needs_cursor_mode(&request.keys) && cursor_mode(shared).await?;
        after.extend_from_slice(&keys::encode(&request.keys, app_cursor));
    }
    if request.submit {
        after.push(b'\r');
    }
    let join = |text: &[u8]| [&b" "[..usize::from(space)], text, &after].concat();
    // `text` as sent (what the tracker and the follow count lines of),
    // and what is written: at a shell's prompt, its text made literal
    // (a TAB never completes; the keys after it stay keys).
    let text = join(&request.text);
    let literal = typing
        .and_then(|follow| follow.literal_way(shared))
        .map(|how| crate::shell::literal::literal(&request.text, how))
        .filter(|made| matches!(made, std::borrow::Cow::Owned(_)));
    let written = literal.map_or_else(|| text.clone(), |made| join(&made));
    if let Some(follow) = &mut followed {
        follow.typed(shared, &text);
    }
    // A reply's reader, marked before the write: seen waiting, it counts
    // once it read since (see `ReadMark`). Keys alone are marked where
    // they end its read (`C-d`, `Enter`; any key in raw mode): a key that
    // does not (an arrow at a line-mode reader) would only be waited for.
    let unread = match &followed {
        Some(follow) if follow.is_reply() => {
            let pane = shared.lock().pane_process;
            pane.filter(|pane| {
                !request.text.is_empty() || reading::wakes_reader(pane.pid, &written)
            })
            .and_then(|pane| ReadMark::now(pane.pid))
        }
        _ => None,
    };
    // A POSIX sh's tracker needs to know text typed at its prompt in one
    // write (its echo comes at once: see `crate::shell::tracker`); said
    // before the write, so the echo never comes first.
    if at_prompt && let Some(mut tracker) = shared.stream.tracker() {
        tracker.typed(&text);
    }
    // Typed only if the writes ahead of it are done in time; once begun,
    // it is typed whole.
    let stop = async {
        tokio::select! {
            () = op.cancelled() => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    };
    if !shared
        .client
        .send_bytes_unless(shared.pane, &written, stop)
        .await?
    {
        if at_prompt && let Some(mut tracker) = shared.stream.tracker() {
            tracker.untyped();
        }
        let why = if op.is_cancelled() {
            "the send was cancelled before its text was typed"
        } else {
            "not typed by the deadline: other input to the terminal was still being written"
        };
        return Ok(not_typed(shared, op, why.to_owned()).await);
    }
    let reason = match &mut followed {
        Some(state) => follow(shared, op, state, deadline, unread).await,
        None => wait(shared, op, what, deadline).await,
    };
    let mut wait_reason = op.settle(reason);
    let mut foreground = None;
    if matches!(
        wait_reason,
        WaitReason::StdinRead | WaitReason::Idle | WaitReason::Busy | WaitReason::FullScreen
    ) && let Some(front) = full_screen::in_front(shared).await
    {
        wait_reason = op.settle_over(WaitReason::FullScreen);
        foreground = Some(front);
    } else if wait_reason == WaitReason::FullScreen {
        // It left the alternate screen while the answer was made: what
        // follows is a program waiting for input again.
        wait_reason = WaitReason::StdinRead;
    }
    // A server that died under the send is a lost terminal, not a program
    // that exited: the caller gets a typed failure, not a result that
    // looks like a finished command. (A kill by the engine cancels the
    // send first, so it still ends `cancelled`.)
    if wait_reason == WaitReason::Exited
        && let TerminalStatus::Gone { reason } = shared.status.borrow().clone()
    {
        return Err(Error::ServerGone { reason });
    }
    let mut answer = answer(shared, op, wait_reason).await;
    answer.foreground_command = foreground;
    if let Some(state) = &followed {
        state.answer(shared, &mut answer);
    }
    Ok(answer)
}

/// The answer of a send that ended for `wait_reason`: the screen, the
/// terminal's status and the send's output now.
async fn answer(shared: &ServerLink, op: &SendOperation, wait_reason: WaitReason) -> SendAnswer {
    let viewport = viewport(shared).await.unwrap_or_default();
    let status = shared.status.borrow().clone();
    SendAnswer::new(wait_reason, status, viewport, op.read_output())
}

/// Whether the pane is in application cursor key mode (DECCKM, which
/// `less` and `vim` set): then tmux's `send-keys Up` writes `ESC O A`, and
/// so must the engine.
async fn cursor_mode(shared: &ServerLink) -> Result<bool> {
    let command = TmuxCommand::new("display-message")
        .flag("-p")
        .target(shared.pane)
        .arg("#{keypad_cursor_flag}");
    Ok(shared.command(&command).await?.text().trim() == "1")
}

/// The answer of a send whose text was not typed, `why`.
async fn not_typed(shared: &ServerLink, op: &SendOperation, why: String) -> SendAnswer {
    let reason = if op.is_cancelled() {
        WaitReason::Cancelled
    } else if !shared.status.borrow().is_running() {
        WaitReason::Exited
    } else {
        WaitReason::Timeout
    };
    answer(shared, op, op.settle(reason)).await.not_typed(why)
}

/// What the foreground's input state means for a send that waits for a
/// reader: `stdin_read` for one reading its terminal, `busy` for one
/// waiting on other files only.
fn waiting_reason(state: InputState) -> WaitReason {
    match state {
        InputState::Busy => WaitReason::Busy,
        _ => WaitReason::StdinRead,
    }
}

/// Follows an integrated shell's marks (`state`) until the shell is back
/// at its prompt with no typed input left (`command`), or until something
/// in it waits for input (a REPL, `read`: `stdin_read`; a server: `busy`),
/// the shell included when a typed command is unfinished. A reader counts
/// after two looks with no output between (three after a reply: one that
/// echoes nothing, `read -s`, must not end the send on a reader seen
/// before the text reached it), and once it read since `unread` (a
/// reply's reader, marked before the write; at most [`UNREAD_BOUND`] is
/// waited for that).
async fn follow(
    shared: &ServerLink,
    op: &SendOperation,
    state: &mut Follow,
    deadline: Instant,
    mut unread: Option<ReadMark>,
) -> WaitReason {
    let mut output = shared.stream.changes();
    let mut status = shared.status.subscribe();
    let looks = if state.is_reply() { 3 } else { 2 };
    let mut judge = command::Judge::new(looks).plain_prompt(command::plain_prompt(state.kind()));
    let mut watch = full_screen::Watch::new(op.start());
    // Whether the relay was asked to hand over what it holds since output
    // last came (see the `Ready` arm below).
    let mut drained = false;
    let written = Instant::now();
    loop {
        if let Some(reason) = full_screen_began(shared, op, &mut watch, deadline).await {
            return reason;
        }
        state.scan(shared);
        if state.at_prompt() && state.one_line() {
            return WaitReason::Command;
        }
        let seen = *output.borrow_and_update();
        // Only once the shell has the text (its echo came) can a reader
        // in front be waiting for more than it.
        if unread.is_some_and(|mark| mark.passed() || written.elapsed() >= UNREAD_BOUND) {
            unread = None;
        }
        let look =
            unread.is_none() && (state.at_prompt() || state.running() || state.echoed(shared));
        let mut pause = unread.map(|_| UNREAD_PAUSE);
        if look && let Some((in_front, input)) = command::foreground(shared) {
            // Between an end mark and its prompt's `B` the shell reads
            // while the rest of its prompt is on its way: judged slowly,
            // and then (a prompt without `B`) the send is done.
            let pending = state.running() || state.awaiting_prompt();
            let judged = judge.observe(in_front, pending, input, seen);
            match judged {
                Observed::Ready if state.at_prompt() || state.awaiting_prompt() => {
                    return WaitReason::Command;
                }
                Observed::Ready if in_front && pending && !drained => {
                    // The shell itself waits while its marks say a command
                    // runs: its end mark may still be between the pane and
                    // this process (a backlog of a huge output under load).
                    // The relay hands over all it has read first; what it
                    // brings is judged afresh, once.
                    drained = true;
                    shared.catch_up().await;
                    if *output.borrow() != seen {
                        judge.reset();
                    }
                    continue;
                }
                Observed::Ready => {
                    // The shell's own line editor (readline polls) waits
                    // while its marks say a command runs: the marks
                    // stopped (`exec bash`). Said to the tracker, which
                    // the next whole prompt would put right.
                    if in_front && input == InputState::Polling && state.running() {
                        shared.stream.marks_stopped();
                    }
                    return waiting_reason(input);
                }
                Observed::Pause(next) => pause = Some(next),
            }
        }
        if let Some(reason) = woken(op, &output, &mut status, deadline, pause).await {
            return reason;
        }
        if output_came(&mut output) {
            judge.reset();
            drained = false;
        }
    }
}

/// Waits for `what` after the write; the send's end reason.
async fn wait(
    shared: &ServerLink,
    op: &SendOperation,
    what: WaitFor,
    deadline: Instant,
) -> WaitReason {
    let mut output = shared.stream.changes();
    let mut status = shared.status.subscribe();
    let quiet = shared.config.quiet;
    let mut judge = command::Judge::new(2);
    if what == WaitFor::None {
        return WaitReason::Idle;
    }
    let mut watch = full_screen::Watch::new(op.start());
    loop {
        if what != WaitFor::Exit
            && let Some(reason) = full_screen_began(shared, op, &mut watch, deadline).await
        {
            return reason;
        }
        let input = || {
            let pane = shared.lock().pane_process;
            pane.map_or(InputState::Other, |pane| reading::input_state(pane.pid))
        };
        let pause = match what {
            WaitFor::Idle => Some(quiet),
            WaitFor::StdinRead => {
                let input = input();
                match judge.observe(false, true, input, *output.borrow_and_update()) {
                    Observed::Ready => return waiting_reason(input),
                    Observed::Pause(pause) => Some(pause),
                }
            }
            _ => None,
        };
        if let Some(reason) = woken(op, &output, &mut status, deadline, pause).await {
            return reason;
        }
        if output_came(&mut output) {
            judge.reset();
        } else if what == WaitFor::Idle {
            // The quiet period passed with no output.
            return match input() {
                InputState::Other => WaitReason::Idle,
                input => waiting_reason(input),
            };
        }
    }
}

/// The one wake-up of both send waits ([`follow`], [`wait`]): the send's
/// end (cancelled, timed out, the program exited), else `None` once the
/// stream changed or `pause` (when given) passed. The change is left
/// unseen in `output`, so [`output_came`] tells the two apart after.
async fn woken(
    op: &SendOperation,
    output: &watch::Receiver<u64>,
    status: &mut watch::Receiver<TerminalStatus>,
    deadline: Instant,
    pause: Option<Duration>,
) -> Option<WaitReason> {
    // A clone waits: it starts at `output`'s version and leaves it be.
    let mut changes = output.clone();
    tokio::select! {
        () = op.cancelled() => Some(WaitReason::Cancelled),
        () = tokio::time::sleep_until(deadline) => Some(WaitReason::Timeout),
        _ = status.wait_for(|status| !status.is_running()) => Some(WaitReason::Exited),
        changed = changes.changed() => changed.err().map(|_| WaitReason::Exited),
        () = tokio::time::sleep(pause.unwrap_or_default()), if pause.is_some() => None,
    }
}

/// Whether the stream changed since `output` last looked, and marks the
/// change seen: output came, or was lost, skipped or restarted (a change
/// with no new bytes counts too). A stream gone counts: the next wait
/// ends the send.
fn output_came(output: &mut watch::Receiver<u64>) -> bool {
    let came = output.has_changed().unwrap_or(true);
    output.mark_unchanged();
    came
}

/// `full_screen` once the output switched to the alternate screen and
/// tmux confirms it, after the program drew (its output went quiet for the
/// quiet period, or the deadline or a cancel came); `None` otherwise.
async fn full_screen_began(
    shared: &ServerLink,
    op: &SendOperation,
    watch: &mut full_screen::Watch,
    deadline: Instant,
) -> Option<WaitReason> {
    if !watch.entered(shared) || full_screen::in_front(shared).await.is_none() {
        return None;
    }
    let mut output = shared.stream.changes();
    loop {
        tokio::select! {
            () = op.cancelled() => return Some(WaitReason::Cancelled),
            () = tokio::time::sleep_until(deadline) => break,
            () = tokio::time::sleep(shared.config.quiet) => break,
            changed = output.changed() => if changed.is_err() { break },
        }
    }
    Some(WaitReason::FullScreen)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::stream::Stream;

    #[tokio::test(start_paused = true)]
    async fn a_wake_is_the_sends_end_or_leaves_what_changed_to_output_came() {
        let stream = Arc::new(Stream::new(64));
        let (terminal, mut status) = watch::channel(TerminalStatus::Running);
        let op = SendOperation::new(Arc::clone(&stream), status.clone());
        let mut output = stream.changes();
        let deadline = Instant::now() + Duration::from_secs(60);
        let pause = Some(Duration::from_millis(10));
        // The pause passed with nothing: look again, no output came (an
        // `idle` wait's quiet period).
        assert_eq!(
            woken(&op, &output, &mut status, deadline, pause).await,
            None
        );
        assert!(!output_came(&mut output));
        // Output wakes it at once, pause or not; `output_came` says so once.
        stream.push(Bytes::from_static(b"x"));
        assert_eq!(woken(&op, &output, &mut status, deadline, None).await, None);
        assert!(output_came(&mut output));
        assert!(!output_came(&mut output));
        // A change with no new bytes (a skip) counts as output too.
        stream.skipped();
        assert_eq!(
            woken(&op, &output, &mut status, deadline, pause).await,
            None
        );
        assert!(output_came(&mut output));
        // The ends every send shares.
        let soon = Instant::now() + Duration::from_secs(1);
        let ended = woken(&op, &output, &mut status, soon, None).await;
        assert_eq!(ended, Some(WaitReason::Timeout));
        terminal.send_replace(TerminalStatus::Gone {
            reason: "closed".to_owned(),
        });
        let ended = woken(&op, &output, &mut status, deadline, None).await;
        assert_eq!(ended, Some(WaitReason::Exited));
        let (_alive, mut running) = watch::channel(TerminalStatus::Running);
        op.cancel();
        let ended = woken(&op, &output, &mut running, deadline, None).await;
        assert_eq!(ended, Some(WaitReason::Cancelled));
    }
}
