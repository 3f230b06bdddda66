//! A send to an integrated shell (see [`crate::shell`]): wait for the
//! first prompt before typing, then for the command's end mark, and cut
//! exactly the command's output out of the stream.
//!
//! The marks' order in the stream is `D;status A prompt B typed-echo C
//! output D;status A ...`. The shell is at its prompt when the newest
//! mark is `B` (or `A`, or a `D` not yet followed by its prompt); a newest
//! `C` means a program runs (a REPL, an editor), and the send then waits
//! the plain way (`stdin_read`). A POSIX sh has no `C` mark: its output
//! starts after the echo of the typed line.

use std::time::Duration;

use tokio::time::Instant;

use super::link::ServerLink;
use crate::registry::CommandResult;
use crate::registry::cursor::strip_escapes;
use crate::shell::ShellKind;
use crate::shell::marks::{MarkKind, scan};
use crate::tmux::procfs;

/// How far back from the end a send looks for the newest mark.
const LOOK_BACK: u64 = 64 * 1024;

/// The longest a send waits for a young shell's first prompt.
const FIRST_PROMPT: Duration = Duration::from_secs(10);

/// The kind of the shell `shared` runs with integration, if any.
pub(super) fn integrated(shared: &ServerLink) -> Option<ShellKind> {
    if !shared.spec.integrates_shell() {
        return None;
    }
    super::config::pinned_shell(&shared.config).and_then(|shell| ShellKind::of(&shell))
}

/// The newest mark in the last [`LOOK_BACK`] bytes, and whether only
/// escape sequences and blanks follow it (a prompt drawn, nothing typed
/// or printed after it).
fn newest_mark(shared: &ServerLink) -> Option<(MarkKind, bool)> {
    let (bytes, base) = {
        let mutable = shared.lock();
        let from = mutable
            .ring
            .total
            .saturating_sub(LOOK_BACK)
            .max(mutable.ring.start());
        (mutable.ring.since(from).0, from)
    };
    let (marks, _) = scan(&bytes, base);
    let mark = marks.last()?;
    let after = usize::try_from(mark.end - base).unwrap_or(usize::MAX);
    let quiet = strip_escapes(bytes.get(after..).unwrap_or_default())
        .trim()
        .is_empty();
    Some((mark.kind, quiet))
}

/// Whether the shell itself, not a program it runs, is in the foreground
/// (a POSIX sh marks no command start, so only this tells a REPL it runs
/// from its prompt).
fn shell_in_front(shared: &ServerLink) -> bool {
    let Some(pane) = shared.lock().pane_process else {
        return false;
    };
    procfs::foreground_group(pane) == i32::try_from(pane.pid).ok()
}

/// Whether the shell itself is in the foreground, blocked reading the
/// terminal: at its prompt.
fn shell_reads(shared: &ServerLink) -> bool {
    let pane = shared.lock().pane_process;
    shell_in_front(shared) && pane.is_some_and(|pane| procfs::blocked_on_input(pane.pid))
}

/// Whether the shell is at its prompt, waiting for a young shell's first
/// prompt, or for the prompt after a command just ended (so a command is
/// never typed ahead of it, echoed twice, or taken for the one before);
/// `false` when a program runs in it, or no prompt shows up in time. With no mark held (a young shell, or a link
/// made after the engine restarted), the shell reading in the foreground
/// counts as at its prompt.
pub(super) async fn at_prompt(shared: &ServerLink, deadline: Instant) -> bool {
    let mut output = shared.output.subscribe();
    let first = (Instant::now() + FIRST_PROMPT).min(deadline);
    let mut pause = Duration::from_millis(10);
    // A reading shell counts when seen twice with no output between: a
    // shell still starting may block a moment before its prompt.
    let mut reading_at: Option<u64> = None;
    loop {
        let seen = *output.borrow_and_update();
        match newest_mark(shared) {
            // A prompt, nothing after it, the shell in front: type.
            Some((MarkKind::PromptEnd | MarkKind::PromptStart | MarkKind::CommandEnd(_), true))
                if shell_in_front(shared) =>
            {
                return true;
            }
            // A program in front that reads the terminal (a REPL): no
            // marks will come. One that does not read may be ending (just
            // interrupted): wait for the shell's prompt, up to the limit.
            Some(_) if !shell_in_front(shared) => {
                let pane = shared.lock().pane_process;
                if pane.is_some_and(|pane| procfs::blocked_on_input(pane.pid)) {
                    return false;
                }
                reading_at = None;
            }
            // The shell is back in front of a command (just interrupted,
            // say): its end mark and prompt are on their way.
            Some(_) => reading_at = None,
            None if shell_reads(shared) => {
                // ... and with its prompt drawn: the cursor past column 0.
                let drawn = super::pages::geometry(shared)
                    .await
                    .is_ok_and(|geometry| geometry.cursor.0 > 0);
                if drawn && reading_at == Some(seen) {
                    return true;
                }
                reading_at = drawn.then_some(seen);
            }
            None => reading_at = None,
        }
        tokio::select! {
            changed = output.changed() => if changed.is_err() { return false },
            () = tokio::time::sleep(pause) => pause = (pause * 2).min(Duration::from_millis(100)),
            () = tokio::time::sleep_until(first) => return false,
        }
    }
}

/// Follows the stream from offset `from` (just before the typed text):
/// `Some` once the command's end mark came, `None` while it runs. `state`
/// carries the scan between calls.
pub(super) fn follow(
    shared: &ServerLink,
    kind: ShellKind,
    state: &mut Follow,
) -> Option<CommandResult> {
    let bytes = {
        let mutable = shared.lock();
        mutable.ring.since(state.scanned).0
    };
    let (marks, done) = scan(&bytes, state.scanned);
    if kind == ShellKind::Sh && state.output_start.is_none() {
        // No C mark: the output starts after the echoed line.
        if let Some(newline) = bytes.iter().position(|&b| b == b'\n') {
            state.output_start = Some(state.scanned + newline as u64 + 1);
            state.started = Some(Instant::now());
        }
    }
    state.scanned = done;
    for mark in marks {
        match mark.kind {
            MarkKind::CommandStart => {
                state.output_start = Some(mark.end);
                state.started = Some(Instant::now());
            }
            MarkKind::CommandEnd(status) => {
                let start = state.output_start.unwrap_or(mark.start).min(mark.start);
                let output = {
                    let mutable = shared.lock();
                    let (bytes, _) = mutable.ring.since(start);
                    let len = usize::try_from(mark.start - start).unwrap_or(usize::MAX);
                    strip_escapes(&bytes[..len.min(bytes.len())])
                };
                return Some(CommandResult {
                    output,
                    exit_code: status,
                    duration: state.started.unwrap_or(state.typed).elapsed(),
                });
            }
            MarkKind::PromptStart | MarkKind::PromptEnd => {}
        }
    }
    None
}

/// The scan of a command's output in progress.
#[derive(Debug)]
pub(super) struct Follow {
    scanned: u64,
    output_start: Option<u64>,
    started: Option<Instant>,
    typed: Instant,
}

impl Follow {
    /// A scan from stream offset `from`, the command typed now.
    pub(super) fn new(from: u64) -> Follow {
        Follow {
            scanned: from,
            output_start: None,
            started: None,
            typed: Instant::now(),
        }
    }

    /// Whether the command started (its output is flowing): from then
    /// on, a program waiting for input ends the send too.
    pub(super) fn started(&self) -> bool {
        self.output_start.is_some()
    }
}
