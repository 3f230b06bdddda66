//! A send to an integrated shell (see [`crate::shell`]): wait until the
//! shell shows its prompt (or something reads the terminal) before
//! typing, then follow the marks of every command the text makes until
//! the shell is back at its prompt, and cut exactly each command's output
//! out of the stream.
//!
//! The marks' order in the stream is `D;status A prompt B typed-echo C
//! output D;status A ...`; bash and zsh mark each command the shell reads
//! (a line, or the lines of a heredoc or loop), so one send of several
//! commands is several `C`..`D` spans. A POSIX sh has no `C` mark: its
//! output starts after the echo of the typed lines (the tty echoes them
//! all as they are typed), and each later one after the prompt before it.

use std::time::Duration;

use tokio::time::Instant;

use super::TmuxConfig;
use super::link::ServerLink;
use crate::registry::{CommandResult, CommandRun, SpawnSpec};
use crate::shell::ShellKind;
use crate::shell::marks::{MarkKind, scan};
use crate::stream::{OutputCursor, strip_escapes};
use crate::tmux::probe::{InputProbe, Observed};
use crate::tmux::procfs;
use crate::tmux::reading::{self, InputState};

/// How far back from the end a send looks for the newest mark.
const LOOK_BACK: u64 = 64 * 1024;

/// Looks (backing off: about a quarter second in all) before the shell's
/// line editor, polling while the newest mark says a command runs, counts
/// as a reader: its prompt may still be on its way to the engine.
const EDITOR_LOOKS: u32 = 6;

/// Looks (about half a second in all, no output between) before a program
/// waiting on other files than its terminal counts as busy: a build tool
/// polls its jobs' pipes for a while too, a server for ever.
const BUSY_LOOKS: u32 = 8;

/// The one judgement every send makes of a pane's foreground: an
/// [`InputProbe`] per kind of wait, so each needs its own number of looks
/// in a row (a reader two, or `looks`; the shell's line editor while a
/// command seems to run [`EDITOR_LOOKS`]; a busy program [`BUSY_LOOKS`]).
#[derive(Debug)]
pub(super) struct Judge {
    reader: InputProbe,
    editor: InputProbe,
    busy: InputProbe,
    /// The shell waits at its prompt in a plain `read` (see
    /// [`plain_prompt`]): so does its own `read`, so a reading shell while
    /// a command seems to run is judged as slowly as a line editor.
    plain_prompt: bool,
}

impl Judge {
    /// A judge whose reader needs `looks` looks.
    pub(super) fn new(looks: u32) -> Judge {
        Judge {
            reader: InputProbe::new().looks(looks),
            editor: InputProbe::new().looks(EDITOR_LOOKS.max(looks)),
            busy: InputProbe::new().looks(BUSY_LOOKS),
            plain_prompt: false,
        }
    }

    /// This judge for a shell whose prompt waits in a plain `read`.
    #[must_use]
    pub(super) fn plain_prompt(mut self, plain: bool) -> Judge {
        self.plain_prompt = plain;
        self
    }

    /// One look at the foreground: its `input` state, whether the shell
    /// is `in_front`, whether the marks say a command runs, and the output
    /// count now. `Ready` means it waits as `input` says.
    pub(super) fn observe(
        &mut self,
        in_front: bool,
        in_command: bool,
        input: InputState,
        seen: u64,
    ) -> Observed {
        // Which probe judges, and whether this look saw it waiting; the
        // others start over.
        let (which, waiting) = match input {
            InputState::Polling if in_front && in_command => (1, true),
            InputState::Reading if in_front && in_command && self.plain_prompt => (1, true),
            InputState::Reading | InputState::Polling => (0, true),
            // The shell itself waits on its terminal only.
            InputState::Busy => (2, !in_front || in_command),
            InputState::Other => (0, false),
        };
        let mut judged = Observed::Pause(Duration::ZERO);
        for (index, probe) in [&mut self.reader, &mut self.editor, &mut self.busy]
            .into_iter()
            .enumerate()
        {
            if index == which {
                judged = probe.observe(waiting, seen);
            } else {
                probe.reset();
            }
        }
        judged
    }

    /// Output came: every judgement starts over.
    pub(super) fn reset(&mut self) {
        self.reader.reset();
        self.editor.reset();
        self.busy.reset();
    }
}

/// Whether a `kind` shell waits for its next command in a blocking `read`
/// of its terminal, as its own `read` builtin does: POSIX sh (no line
/// editor), and zsh, whose line editor reads a key at a time with a plain
/// `read(2)` where bash's readline polls. Seen reading while the marks say
/// a command runs, such a shell may be at its next prompt whose end mark
/// is still on its way behind the command's output (a `seq 1 200000`
/// under load: tmux relays the backlog in bursts, and a 10 ms lull between
/// two looks ended the send `stdin_read` before zsh's `D`, 1 send in 2
/// beside two busy loops), so it is judged as slowly as a line editor.
pub(super) fn plain_prompt(kind: ShellKind) -> bool {
    matches!(kind, ShellKind::Sh | ShellKind::Zsh)
}

/// The kind of the shell `shared` runs with integration, if any.
pub(super) fn integrated(shared: &ServerLink) -> Option<ShellKind> {
    integrated_shell(&shared.spec, &shared.config)
}

/// The kind of the shell `spec` runs with integration under `config`, if any.
pub(super) fn integrated_shell(spec: &SpawnSpec, config: &TmuxConfig) -> Option<ShellKind> {
    if !spec.integrates_shell() {
        return None;
    }
    super::config::pinned_shell(config).and_then(|shell| ShellKind::of(&shell))
}

/// The newest mark in the last [`LOOK_BACK`] bytes, and whether only
/// escape sequences and blanks follow it (a prompt drawn, nothing typed
/// or printed after it).
fn newest_mark(shared: &ServerLink) -> Option<(MarkKind, bool)> {
    let (bytes, base) = {
        let held = shared.stream.held();
        let from = held.total.saturating_sub(LOOK_BACK).max(held.start());
        (held.since(from).0, from)
    };
    let (marks, _) = scan(&bytes, base);
    let mark = marks.last()?;
    let after = usize::try_from(mark.end - base).unwrap_or(usize::MAX);
    let quiet = strip_escapes(bytes.get(after..).unwrap_or_default())
        .trim()
        .is_empty();
    Some((mark.kind, quiet))
}

/// What the pane's foreground does now: whether the shell itself is in
/// front, and how its foreground group waits (see
/// [`reading::input_state`]). `None` when the pane's process is not known.
pub(super) fn foreground(shared: &ServerLink) -> Option<(bool, InputState)> {
    let pane = shared.lock().pane_process?;
    // The shell is in front when the terminal's foreground group is its
    // own: under the exit handshake's wrapper it is the wrapper's child.
    let program = crate::tmux::exit_handshake::program_pid(pane.pid)?;
    let group = procfs::foreground_group(pane)?;
    let in_front = procfs::stat(program).is_some_and(|stat| stat.pgrp == group);
    Some((in_front, reading::input_state(pane.pid)))
}

/// What a send may type into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ready {
    /// The shell shows its prompt: type, and follow the marks.
    Prompt,
    /// Something reads the terminal inside a command (the shell's own
    /// `read`, a REPL, an editor): type the reply now, and follow it as
    /// part of the command that runs.
    Reader,
    /// Nothing read the terminal by the deadline: why (the text is not
    /// typed).
    Not(String),
}

/// Waits until the terminal takes typed text, up to `deadline` (or
/// `cancel`): the shell at its prompt, drawn and reading (so a command is
/// never typed ahead of it and echoed twice), or a reader in front.
pub(super) async fn ready(
    shared: &ServerLink,
    kind: ShellKind,
    deadline: Instant,
    cancel: &tokio_util::sync::CancellationToken,
) -> Ready {
    let mut output = shared.stream.changes();
    let mut status = shared.status.subscribe();
    let mut judge = Judge::new(2).plain_prompt(plain_prompt(kind));
    loop {
        let seen = *output.borrow_and_update();
        if !status.borrow_and_update().is_running() {
            return Ready::Not("the terminal's program ended before its text was typed".to_owned());
        }
        let Some((in_front, state)) = foreground(shared) else {
            // No process known (a link being made): nothing to look at.
            return Ready::Prompt;
        };
        let mark = newest_mark(shared);
        // The prompt drawn and readline (or ZLE) waiting for a key: once
        // is enough, the prompt ends with `B` only once the line editor
        // owns the terminal.
        if in_front && state.reads() && mark == Some((MarkKind::PromptEnd, true)) {
            return Ready::Prompt;
        }
        let in_command = matches!(mark, Some((MarkKind::CommandStart, _)));
        // Text is never typed into a busy program.
        let input = match state {
            InputState::Busy => InputState::Other,
            other => other,
        };
        let judged = judge.observe(in_front, in_command, input, seen);
        let pause = match judged {
            Observed::Ready if in_command || !in_front => return Ready::Reader,
            Observed::Ready if mark.is_some() => return Ready::Prompt,
            Observed::Ready => {
                // No mark held (a link made after the engine restarted):
                // the shell's prompt drawn means the cursor is past
                // column 0.
                let drawn = super::pages::geometry(shared)
                    .await
                    .is_ok_and(|geometry| geometry.cursor.0 > 0);
                if drawn {
                    return Ready::Prompt;
                }
                judge.reset();
                Duration::from_millis(10)
            }
            Observed::Pause(pause) => pause,
        };
        let why = match (in_front, state) {
            (false, InputState::Busy) => {
                "a program runs that waits on other files, not its terminal (busy)"
            }
            (false, _) => "a program runs and does not read its terminal",
            (true, _) => "the shell showed no prompt",
        };
        tokio::select! {
            () = cancel.cancelled() => return Ready::Not("the send was cancelled".to_owned()),
            () = tokio::time::sleep_until(deadline) => {
                return Ready::Not(format!("not typed by the deadline: {why}"));
            }
            changed = output.changed() => {
                if changed.is_err() {
                    return Ready::Not("the terminal's output ended".to_owned());
                }
                judge.reset();
            }
            _ = status.changed() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// The scan of a send's commands in progress, from the stream offset
/// where its text was typed.
#[derive(Debug)]
pub(super) struct Follow {
    kind: ShellKind,
    epoch: u64,
    scanned: u64,
    typed_at: u64,
    /// Where the echo of the next command line starts (the newest `B`).
    echo_from: u64,
    /// The command running: where its output starts, when it started,
    /// and its text.
    running: Option<(u64, Instant, Option<String>)>,
    /// POSIX sh: line breaks of the typed echo still to skip.
    echo_lines: usize,
    /// POSIX sh: a prompt after an end mark (a next command may follow).
    after_prompt: Option<u64>,
    /// The commands ended, with their outputs and when they ended.
    ended: Vec<(CommandRun, String, Instant)>,
    /// When the first command started.
    first_start: Option<Instant>,
    /// An end mark came, then the prompt after it, and nothing newer.
    at_prompt: bool,
    /// An end mark came and its prompt's `B` not yet.
    awaiting_prompt: bool,
    /// Whether the typed text is one line (no pending input can follow
    /// the first prompt).
    one_line: bool,
}

impl Follow {
    /// A scan of text typed at the prompt at stream offset `from`.
    pub(super) fn new(shared: &ServerLink, kind: ShellKind, from: u64, text: &[u8]) -> Follow {
        let breaks = text.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
        let trailing = usize::from(matches!(text.last(), Some(b'\r' | b'\n')));
        let mut follow = Follow {
            kind,
            epoch: shared.stream.epoch(),
            scanned: from,
            typed_at: from,
            echo_from: from,
            running: None,
            echo_lines: breaks,
            after_prompt: None,
            ended: Vec::new(),
            first_start: None,
            at_prompt: false,
            awaiting_prompt: false,
            one_line: breaks <= trailing,
        };
        if kind == ShellKind::Sh && breaks == 0 {
            follow.running = Some((from, Instant::now(), None));
        }
        follow
    }

    /// A scan of a reply typed at offset `from` to a command that runs.
    pub(super) fn reply(shared: &ServerLink, kind: ShellKind, from: u64) -> Follow {
        let mut follow = Follow::new(shared, kind, from, b"");
        follow.running = Some((from, Instant::now(), None));
        follow.echo_lines = 0;
        follow.one_line = true;
        follow
    }

    /// Whether the shell is back at its prompt after a command of this
    /// send ended.
    pub(super) fn at_prompt(&self) -> bool {
        self.at_prompt
    }

    /// Whether the send is done once the prompt is back: with one line
    /// typed nothing can follow it; with more, the shell must be seen
    /// reading with no input left.
    pub(super) fn one_line(&self) -> bool {
        self.one_line
    }

    /// The shell this scan follows.
    pub(super) fn kind(&self) -> ShellKind {
        self.kind
    }

    /// Whether an end mark came and the prompt after it is on its way
    /// (its `B` not seen yet).
    pub(super) fn awaiting_prompt(&self) -> bool {
        self.awaiting_prompt
    }

    /// Whether a command of this send runs now.
    pub(super) fn running(&self) -> bool {
        self.running.is_some()
    }

    /// Whether anything came after the typed text (its echo at least): a
    /// reader seen before that may not have had the text yet.
    pub(super) fn echoed(&self, shared: &ServerLink) -> bool {
        shared.stream.held().total > self.typed_at
    }

    /// Reads the stream scanned since the last call and takes its marks.
    pub(super) fn scan(&mut self, shared: &ServerLink) {
        let bytes = shared.stream.held().since(self.scanned).0;
        let base = self.scanned;
        let (marks, done) = scan(&bytes, base);
        if self.kind == ShellKind::Sh && self.echo_lines > 0 && self.running.is_none() {
            // Skip the echo of the typed lines (bounded by the first mark).
            let limit = marks.first().map_or(bytes.len(), |mark| {
                usize::try_from(mark.start - base).unwrap_or(usize::MAX)
            });
            let mut at = 0;
            while self.echo_lines > 0 {
                let Some(newline) = bytes[at..limit.min(bytes.len())]
                    .iter()
                    .position(|&b| b == b'\n')
                else {
                    break;
                };
                at += newline + 1;
                self.echo_lines -= 1;
            }
            if self.echo_lines == 0 || !marks.is_empty() {
                self.echo_lines = 0;
                self.running = Some((base + at as u64, Instant::now(), None));
            }
        }
        self.scanned = done;
        for mark in marks {
            match mark.kind {
                MarkKind::PromptStart => {}
                MarkKind::PromptEnd => {
                    self.echo_from = mark.end;
                    if self.kind == ShellKind::Sh {
                        // sh: a command's output follows the last prompt
                        // (`PS2` ends with `B` too) before it.
                        match self.running.as_mut() {
                            Some(running) => running.0 = mark.end,
                            None => self.after_prompt = Some(mark.end),
                        }
                    }
                    self.at_prompt = self.running.is_none() && !self.ended.is_empty();
                    self.awaiting_prompt = false;
                }
                MarkKind::CommandStart => {
                    let text = self.text(shared, mark.start);
                    self.running = Some((mark.end, Instant::now(), text));
                    self.at_prompt = false;
                }
                MarkKind::CommandEnd(status) => {
                    let running = self.running.take().or_else(|| {
                        // sh: a command after a prompt of this send.
                        self.after_prompt
                            .take()
                            .map(|start| (start, Instant::now(), None))
                    });
                    self.at_prompt = false;
                    self.awaiting_prompt = true;
                    // A `D` with no command (an empty line) ends nothing.
                    let Some((start, when, text)) = running else {
                        continue;
                    };
                    self.first_start.get_or_insert(when);
                    let start = start.min(mark.start);
                    let output = self.cut(shared, start, mark.start);
                    let cursor = |offset| OutputCursor {
                        epoch: self.epoch,
                        offset,
                    };
                    self.ended.push((
                        CommandRun {
                            text,
                            exit_code: status,
                            duration: when.elapsed(),
                            cursors: Some((cursor(start), cursor(mark.start))),
                        },
                        output,
                        Instant::now(),
                    ));
                }
            }
        }
        // Output after the newest mark (the echo of a next line) means the
        // shell is not idle at that prompt.
        if self.at_prompt {
            let tail = shared.stream.held().since(self.echo_from).0;
            if !strip_escapes(&tail).trim().is_empty() {
                self.at_prompt = false;
            }
        }
    }

    /// The echoed command line from the newest prompt up to `end`.
    fn text(&self, shared: &ServerLink, end: u64) -> Option<String> {
        let text = self.cut(shared, self.echo_from.max(self.typed_at), end);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    /// The stream from `start` to `end` as the terminal shows it.
    fn cut(&self, shared: &ServerLink, start: u64, end: u64) -> String {
        let (bytes, _) = shared.stream.held().since(start);
        let len = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        crate::screen::render::render(&bytes[..len.min(bytes.len())])
    }

    /// The commands ended so far.
    pub(super) fn commands(&self) -> Vec<CommandRun> {
        self.ended.iter().map(|(run, ..)| run.clone()).collect()
    }

    /// The send's result once every command ended: all their output, the
    /// last one's exit code, from the first one's start to the last one's
    /// end.
    pub(super) fn result(&self) -> Option<CommandResult> {
        let (last, _, ended) = self.ended.last()?;
        let output = self
            .ended
            .iter()
            .map(|(_, output, _)| output.as_str())
            .collect();
        let duration = self
            .first_start
            .map_or(last.duration, |start| ended.duration_since(start));
        Some(CommandResult {
            output,
            exit_code: last.exit_code,
            duration,
        })
    }
}
