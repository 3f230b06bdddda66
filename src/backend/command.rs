//! A send to an integrated shell (see [`crate::shell`]): wait until the
//! shell shows its prompt (or something reads the terminal) before
//! typing, then follow the commands the text makes until the shell is
//! back at its prompt. What the marks say (the prompt state, each
//! command's span) is the stream's command tracker's
//! ([`crate::shell::tracker`]): this file only asks it, and judges the
//! foreground process.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::TmuxConfig;
use super::link::ServerLink;
use crate::registry::{Command, SendAnswer, SendOperation, SpawnSpec, WaitReason};
use crate::shell::ShellKind;
use crate::shell::literal::{self, Literal};
use crate::shell::tracker::{Progress, Prompt};
use crate::tmux::probe::{InputProbe, Observed};
use crate::tmux::procfs;
use crate::tmux::reading::{self, InputState};

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
    ShellKind::of(&super::config::terminal_shell(config, spec).ok()?)
}

/// Where the tracker says the shell is, and whether it saw any mark.
fn prompt(shared: &ServerLink) -> (Prompt, bool) {
    shared
        .stream
        .tracker()
        .map_or((Prompt::Unknown, false), |tracker| {
            (tracker.prompt(), tracker.last_mark().is_some())
        })
}

/// The most bytes of a prompt looked through for its bracketed paste
/// switch (a prompt is short; without a mark held, the newest output).
const PROMPT_SCAN: u64 = 16 * 1024;

/// How text typed at `kind`'s prompt now goes in literally (see
/// [`crate::shell::literal`]): bracketed where the line editor turned
/// bracketed paste on since its prompt began, else quoted with `C-v`,
/// which bash, zsh and a POSIX sh's terminal all read as literal-next.
fn prompt_literal_way(shared: &ServerLink, kind: ShellKind) -> Option<Literal> {
    let from = shared
        .stream
        .tracker()
        .and_then(|tracker| tracker.prompt_start());
    if bracketed_since(shared, from) {
        Some(Literal::Bracketed)
    } else {
        matches!(kind, ShellKind::Bash | ShellKind::Zsh | ShellKind::Sh).then_some(Literal::Quoted)
    }
}

/// Whether the output since `from` (else the oldest held byte), its last
/// [`PROMPT_SCAN`] bytes at most, turned bracketed paste on.
fn bracketed_since(shared: &ServerLink, from: Option<u64>) -> bool {
    let held = shared.stream.held();
    let from = from
        .unwrap_or(0)
        .max(held.start())
        .max(held.total.saturating_sub(PROMPT_SCAN));
    let output = held.between(from, held.total).unwrap_or_default();
    literal::bracketed_paste_on(&output)
}

/// How a reply typed into the program a command runs goes in literally:
/// bracketed where the program turned bracketed paste on since the
/// command began (a REPL's readline), quoted with `C-v` where the terminal
/// reads in its own line mode (`cat`, `od`, the shell's `read`), else as
/// it is (a program reading raw takes each byte as it means it).
fn reply_literal_way(shared: &ServerLink) -> Option<Literal> {
    let from = shared.stream.tracker().and_then(|tracker| {
        tracker
            .spans()
            .back()
            .filter(|span| span.running())
            .map(|span| span.start)
    });
    if bracketed_since(shared, from) {
        return Some(Literal::Bracketed);
    }
    let pane = shared.lock().pane_process?;
    reading::literal_next(pane.pid)?.then_some(Literal::Quoted)
}

/// Whether the tracker says a command of the shell runs now.
pub(super) fn running(shared: &ServerLink) -> bool {
    prompt(shared).0 == Prompt::Running
}

/// Whether an integrated shell may still be starting: its stream holds
/// the program from its first byte and no mark came yet (a shell's first
/// prompt brings its first marks). A stream that joined the terminal
/// later knows nothing of its start: false.
pub(super) fn starting(shared: &ServerLink) -> bool {
    shared.stream.whole() && !prompt(shared).1
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

/// Waits until the terminal takes typed text, up to `deadline` (or a
/// cancel of `send`): the shell at its prompt, drawn and reading (so a
/// command is never typed ahead of it and echoed twice:
/// [`Follow::prompt`]), or a reader in front ([`Follow::reply`]); else why
/// the text is not typed.
pub(super) async fn ready(
    shared: &ServerLink,
    kind: ShellKind,
    deadline: Instant,
    send: &SendOperation,
) -> std::result::Result<Follow, String> {
    let mut output = shared.stream.changes();
    let mut status = shared.status.subscribe();
    let mut judge = Judge::new(2).plain_prompt(plain_prompt(kind));
    loop {
        let seen = *output.borrow_and_update();
        if !status.borrow_and_update().is_running() {
            return Err("the terminal's program ended before its text was typed".to_owned());
        }
        let Some((in_front, state)) = foreground(shared) else {
            // No process known (a link being made): nothing to look at.
            return Ok(Follow::prompt(kind));
        };
        let (prompt, marked) = prompt(shared);
        // The prompt drawn and readline (or ZLE) waiting for a key: once
        // is enough, the prompt ends with `B` only once the line editor
        // owns the terminal.
        if in_front && state.reads() && prompt == (Prompt::Reading { quiet: true }) {
            return Ok(Follow::prompt(kind));
        }
        let in_command = prompt == Prompt::Running;
        // Text is never typed into a busy program.
        let input = match state {
            InputState::Busy => InputState::Other,
            other => other,
        };
        let judged = judge.observe(in_front, in_command, input, seen);
        let pause = match judged {
            Observed::Ready if in_command || !in_front => return Ok(Follow::reply(kind)),
            Observed::Ready if marked => return Ok(Follow::prompt(kind)),
            Observed::Ready => {
                // No mark held (a link made after the engine restarted):
                // the shell's prompt drawn means the cursor is past
                // column 0.
                let drawn = super::pages::geometry(shared)
                    .await
                    .is_ok_and(|geometry| geometry.cursor.0 > 0);
                if drawn {
                    return Ok(Follow::prompt(kind));
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
            () = send.cancelled() => return Err("the send was cancelled".to_owned()),
            () = tokio::time::sleep_until(deadline) => {
                return Err(format!("not typed by the deadline: {why}"));
            }
            changed = output.changed() => {
                if changed.is_err() {
                    return Err("the terminal's output ended".to_owned());
                }
                judge.reset();
            }
            _ = status.changed() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Where a send's text goes on an integrated shell, and the commands it
/// makes as the stream's tracker follows them from where it was typed:
/// typed at the shell's prompt, or as a reply to a reader inside the
/// command that runs (its own `read`, a REPL, an editor), followed as
/// part of that command. A send anywhere else waits the plain way.
#[derive(Debug)]
pub(super) struct Follow {
    kind: ShellKind,
    /// Typed into a reader inside a command: that command is the send's.
    reply: bool,
    /// The stream's epoch and offset where the text was typed.
    epoch: u64,
    typed_at: u64,
    /// Whether the typed text is one line (no pending input can follow
    /// the first prompt).
    one_line: bool,
    /// What the tracker said at the last look.
    progress: Progress,
}

impl Follow {
    /// Text typed at `kind`'s prompt, drawn and reading.
    pub(super) fn prompt(kind: ShellKind) -> Follow {
        Follow {
            kind,
            reply: false,
            epoch: 0,
            typed_at: 0,
            one_line: true,
            progress: Progress {
                spans: Vec::new(),
                at_prompt: false,
                awaiting_prompt: false,
                running: false,
            },
        }
    }

    /// A reply typed to a reader inside the command of `kind` that runs.
    pub(super) fn reply(kind: ShellKind) -> Follow {
        Follow {
            reply: true,
            ..Follow::prompt(kind)
        }
    }

    /// Whether the text is a reply to a reader inside a command.
    pub(super) fn is_reply(&self) -> bool {
        self.reply
    }

    /// How the text goes in literally here, if it must (see
    /// [`crate::shell::literal`]): at the prompt, as the shell's line
    /// editor reads it; a reply, as the program reading it takes bytes.
    pub(super) fn literal_way(&self, shared: &ServerLink) -> Option<Literal> {
        if self.reply {
            reply_literal_way(shared)
        } else {
            prompt_literal_way(shared, self.kind)
        }
    }

    /// `text` (as sent: what the tracker counts lines of) is typed next:
    /// follows from the stream's end now.
    pub(super) fn typed(&mut self, shared: &ServerLink, text: &[u8]) {
        let breaks = text.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
        let trailing = usize::from(matches!(text.last(), Some(b'\r' | b'\n')));
        self.epoch = shared.stream.epoch();
        self.typed_at = shared.stream.held().total;
        // A reply is one line of the command it answers.
        self.one_line = self.reply || breaks <= trailing;
    }

    /// Whether the shell is back at its prompt after a command of this
    /// send ended.
    pub(super) fn at_prompt(&self) -> bool {
        self.progress.at_prompt
    }

    /// Whether the send is done once the prompt is back: with one line
    /// typed nothing can follow it; with more, the shell must be seen
    /// reading with no input left.
    pub(super) fn one_line(&self) -> bool {
        self.one_line
    }

    /// The shell this follow is of.
    pub(super) fn kind(&self) -> ShellKind {
        self.kind
    }

    /// Whether an end mark came and the prompt after it is on its way.
    pub(super) fn awaiting_prompt(&self) -> bool {
        self.progress.awaiting_prompt
    }

    /// Whether a command of this send runs now.
    pub(super) fn running(&self) -> bool {
        self.progress.running
    }

    /// Whether anything came after the typed text (its echo at least): a
    /// reader seen before that may not have had the text yet.
    pub(super) fn echoed(&self, shared: &ServerLink) -> bool {
        shared.stream.held().total > self.typed_at
    }

    /// Takes what the tracker says now.
    pub(super) fn scan(&mut self, shared: &ServerLink) {
        if let Some(tracker) = shared.stream.tracker() {
            self.progress = tracker.progress(self.typed_at, self.reply);
        }
    }

    /// Writes what the marks said into `answer`: the send's commands and,
    /// when it ended `command`, all their output (a reply's from where it
    /// was typed), the last one's exit code, from the first one's start
    /// to the last one's end.
    pub(super) fn answer(&self, shared: &ServerLink, answer: &mut SendAnswer) {
        let now = SystemTime::now();
        let spans = &self.progress.spans;
        answer.list_commands(
            spans
                .iter()
                .map(|span| Command::of(span, self.epoch, now))
                .collect(),
        );
        let ended: Vec<_> = spans.iter().filter(|s| !s.running()).collect();
        let (Some(first), Some(last)) = (ended.first(), ended.last()) else {
            return;
        };
        if answer.wait_reason != WaitReason::Command {
            return;
        }
        let output = ended
            .iter()
            .map(|span| Command::output_of(&shared.stream, span, self.typed_at))
            .collect();
        let duration = last
            .ended
            .and_then(|end| end.duration_since(first.started).ok())
            .unwrap_or_default();
        answer.command_ended(output, last.exit_code, duration);
    }
}
