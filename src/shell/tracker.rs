//! The one reader of an integrated shell's marks: fed a terminal's
//! stream as it arrives (bytes, their offset, their arrival time), it
//! keeps the prompt state and the command spans (the line as the shell
//! echoed it, where its output starts and ends, its exit code, when it
//! started and ended) and judges whether the integration still works.
//! No clock, no link, no I/O: the stream feeds it every byte in order
//! (`crate::stream::Stream::push`), and the send, `commands`, the
//! command wait, the waits since the last command and `show` read it.
//!
//! # The marks
//! bash and zsh go round `D;status A prompt B echo C output D;status A`:
//! a command is the span from its `C` to its `D`, its text what was
//! echoed between the `B` before and the `C`. An empty line, or Ctrl-C at
//! the prompt, is a `D` with no `C`: no command. A command's start and
//! end are the times its `C` and `D` carry (the engine's bash and zsh
//! integration stamp them; fish gives its run time on the `D`), else when
//! they arrived: a tracker that read them late (a process that linked to
//! a running terminal) would otherwise call every earlier command
//! instant.
//!
//! POSIX sh prints no `C` (the marks live in `PS1`, and sh has no hook
//! before a command runs), and its continuation prompt (`PS2`) ends with
//! `B` too. A command's output starts after the echo of its line, which
//! the terminal itself prints as the line is typed, so it comes first: the
//! tracker takes what follows a `B` up to the next line break as the
//! echo, and what follows as output, up to the `D` (a `B` before that `D`
//! is a continuation prompt: the next line joins the text). Text typed
//! ahead in one write is echoed at once, before the first command's
//! output: the sender says so ([`Tracker::typed`]), and the tracker then
//! skips all those lines' echo before the first output and starts each
//! later line's output at its prompt. A line that printed nothing and
//! echoed nothing but blanks or `^C` is no command.
//!
//! # When the marks stop
//! A mark out of the order above (a `B` or `C` after a `C` with no `D`: the
//! end mark stopped; a `C` or `D` after an `A` with no `B`: the prompt's
//! mark stopped) means the integration was lost, until a whole `D A B`
//! prompt comes again. `exec bash` leaves no mark out of order (`B C`,
//! then none ever): whoever sees the shell itself wait at its terminal
//! while a command seems to run says so ([`Tracker::stopped`]).
//!
//! # Cost
//! In a command's output the tracker only looks for the next mark's
//! intro (`memmem`); the bytes between marks are looked at only between a
//! mark and the first printable byte after it, and while a line is being
//! echoed. Bounded: [`MAX_SPANS`] spans, of each line's echo
//! [`MAX_ECHO`](super::span::MAX_ECHO) bytes and a tail of
//! [`ECHO_TAIL`](super::span::ECHO_TAIL).

use std::collections::VecDeque;
use std::sync::LazyLock;
use std::time::SystemTime;

use memchr::memmem;

use super::marks::{INTRO, MAX_MARK, MarkKind, Parsed, ShellIntegration, Stamp, parse};
use super::span::{Echo, Span};

/// The most spans kept (the newest): as many as `commands` lists at most.
pub const MAX_SPANS: usize = 1000;

static FINDER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(INTRO));

/// Where the shell is, as its marks say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    /// No mark seen yet (or the stream skipped output).
    Unknown,
    /// Printing its prompt (`A` seen, not `B`).
    Drawing,
    /// At its prompt, reading a line (`B` seen): `quiet` while nothing but
    /// escape sequences and blanks came after it.
    Reading {
        /// Nothing was typed or printed after the prompt.
        quiet: bool,
    },
    /// A command runs.
    Running,
    /// A command ended (`D`), its prompt not drawn yet.
    Ended,
}

/// What the tracker says of the commands of text typed at one offset
/// (see [`Tracker::progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Its commands so far, in order.
    pub spans: Vec<Span>,
    /// The shell is back at its prompt, quiet, after its commands ended.
    pub at_prompt: bool,
    /// A command ended and the prompt after it is not drawn yet.
    pub awaiting_prompt: bool,
    /// One of its commands runs.
    pub running: bool,
}

/// The order check behind [`ShellIntegration`].
#[derive(Debug, Clone, Copy, Default)]
struct Order {
    seen: bool,
    lost: bool,
    before: Option<MarkKind>,
    previous: Option<MarkKind>,
}

impl Order {
    /// Takes the next mark; `true` when it completed a whole prompt
    /// (`D A B`).
    fn see(&mut self, kind: MarkKind) -> bool {
        use MarkKind::{CommandEnd as D, CommandStart as C, PromptEnd as B, PromptStart as A};
        let in_order = matches!(
            (self.previous, kind),
            (None, _) | (Some(D(_)), A) | (Some(A), B) | (Some(B), B | C | D(_)) | (Some(C), D(_))
        );
        self.lost |= !in_order;
        let whole = kind == B && self.previous == Some(A) && matches!(self.before, Some(D(_)));
        if whole {
            self.lost = false;
        }
        self.seen = true;
        (self.before, self.previous) = (self.previous, Some(kind));
        whole
    }
}

/// The command tracker of one stream (see the module's notes).
#[derive(Debug, Clone)]
pub struct Tracker {
    /// POSIX sh: no `C` mark.
    sh: bool,
    /// The offset of the first byte fed.
    known_from: Option<u64>,
    /// The offset just past the last byte fed.
    fed: u64,
    /// A mark (or its intro) cut at the end of the last chunk, and where
    /// it starts.
    carry: Vec<u8>,
    state: Prompt,
    spans: VecDeque<Span>,
    /// `D` marks whose command started before the first byte fed.
    unknown_ended: usize,
    order: Order,
    /// Where the newest prompt began (its `A` mark).
    prompt_start: Option<u64>,
    /// Someone saw the marks stop ([`Tracker::stopped`]); a whole prompt
    /// clears it.
    stopped: bool,
    /// The echo since the newest `B` (bash, zsh: up to `C`; sh: up to the
    /// line break that ends it).
    echo: Echo,
    /// Nothing but escape sequences and blanks since the newest mark.
    quiet: bool,
    /// sh: line breaks of echo still to pass before output starts.
    echo_lines: usize,
    /// sh: lines typed ahead, their echo already passed, each read at a
    /// later prompt.
    ahead: VecDeque<Vec<u8>>,
}

impl Tracker {
    /// A tracker of an integrated shell's stream; `sh` for a POSIX sh
    /// (no `C` mark).
    pub fn new(sh: bool) -> Tracker {
        Tracker {
            sh,
            known_from: None,
            fed: 0,
            carry: Vec::new(),
            state: Prompt::Unknown,
            spans: VecDeque::new(),
            unknown_ended: 0,
            order: Order::default(),
            prompt_start: None,
            stopped: false,
            echo: Echo::default(),
            quiet: true,
            echo_lines: 0,
            ahead: VecDeque::new(),
        }
    }

    /// Takes the stream's next `bytes`, which start at `offset` and
    /// arrived at `time`. A first call anywhere is fine (a stream that
    /// joined a running shell): commands are known from there on. Bytes
    /// that do not follow the last ones (the stream skipped output) drop
    /// what was half read.
    pub fn feed(&mut self, bytes: &[u8], offset: u64, time: SystemTime) {
        if self.known_from.is_none() {
            self.known_from = Some(offset);
            self.fed = offset;
        }
        if offset != self.fed {
            self.skipped();
        }
        self.fed = offset + bytes.len() as u64;
        if self.carry.is_empty() {
            self.read(bytes, offset, time);
        } else {
            // Rare (a chunk ended inside a mark): one copy.
            let mut joined = std::mem::take(&mut self.carry);
            let base = offset - joined.len() as u64;
            joined.extend_from_slice(bytes);
            self.read(&joined, base, time);
        }
    }

    /// Output was skipped: what was half read is dropped, and the prompt
    /// state is unknown until the next mark.
    pub fn skipped(&mut self) {
        self.carry.clear();
        self.state = Prompt::Unknown;
        self.echo.clear();
        self.echo_lines = 0;
        self.ahead.clear();
    }

    /// The sender typed `text` at the shell's prompt in one write. A POSIX
    /// sh needs it for text of several lines (see the module's notes); any
    /// shell whose prompt the marks did not show (a stream that joined it
    /// running) is taken to be at its prompt.
    pub fn typed(&mut self, text: &[u8]) {
        if self.state == Prompt::Unknown {
            // The sender judged a prompt the marks did not show (a stream
            // that joined a running shell, after its prompt): the line
            // starts here.
            self.state = Prompt::Reading { quiet: true };
            self.echo.clear();
            self.echo_lines = 1;
        }
        if !self.sh || !matches!(self.state, Prompt::Reading { .. }) {
            return;
        }
        let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\r' || b == b'\n').collect();
        // Text ending with Enter leaves one empty piece after it.
        if lines.last().is_some_and(|last| last.is_empty()) {
            lines.pop();
        }
        if lines.len() < 2 {
            return;
        }
        self.echo_lines = lines.len();
        self.ahead = lines[1..].iter().map(|line| line.to_vec()).collect();
    }

    /// The text said by [`Tracker::typed`] was not typed after all.
    pub fn untyped(&mut self) {
        self.ahead.clear();
        self.echo_lines = self.echo_lines.min(1);
    }

    /// Someone saw the marks stop: the shell itself waits at its terminal
    /// while its marks say a command runs (`exec bash`). The next whole
    /// prompt (`D A B`) says otherwise.
    pub fn stopped(&mut self) {
        if self.state == Prompt::Running {
            self.stopped = true;
        }
    }

    fn read(&mut self, bytes: &[u8], base: u64, time: SystemTime) {
        let mut at = 0;
        while let Some(found) = FINDER.find(&bytes[at..]) {
            let start = at + found;
            self.content(&bytes[at..start], base + at as u64, time);
            match parse(&bytes[start..]) {
                Parsed::Cut => {
                    self.carry = bytes[start..].to_vec();
                    return;
                }
                Parsed::Not => {
                    self.content(
                        &bytes[start..start + INTRO.len()],
                        base + start as u64,
                        time,
                    );
                    at = start + INTRO.len();
                }
                Parsed::Mark(kind, length, stamp) => {
                    let end = start + length;
                    if let Some(kind) = kind {
                        self.mark(kind, base + start as u64, base + end as u64, time, stamp);
                    }
                    at = end;
                }
            }
        }
        // An intro cut at the very end: keep it for the next chunk.
        let rest = &bytes[at..];
        let keep = (1..INTRO.len().min(rest.len() + 1))
            .rev()
            .find(|&n| rest.ends_with(&INTRO[..n]))
            .unwrap_or(0);
        self.content(&rest[..rest.len() - keep], base + at as u64, time);
        if keep > 0 {
            self.carry = rest[rest.len() - keep..].to_vec();
        }
        debug_assert!(self.carry.len() <= INTRO.len() + MAX_MARK);
    }

    /// Bytes between marks.
    fn content(&mut self, bytes: &[u8], base: u64, time: SystemTime) {
        if bytes.is_empty() {
            return;
        }
        if self.quiet && printable(bytes) {
            self.quiet = false;
            if let Prompt::Reading { quiet } = &mut self.state {
                *quiet = false;
            }
        }
        if !matches!(self.state, Prompt::Reading { .. }) {
            return;
        }
        if !self.sh {
            self.echo.push(bytes);
            return;
        }
        // sh: the echo runs to the line break that ends the line(s)
        // typed; output follows.
        let mut from = 0;
        for newline in memchr::memchr_iter(b'\n', bytes) {
            self.echo_lines = self.echo_lines.saturating_sub(1);
            if self.echo_lines == 0 {
                from = newline + 1;
                break;
            }
        }
        if self.echo_lines > 0 || from == 0 {
            self.echo.push(bytes);
            return;
        }
        self.echo.push(&bytes[..from]);
        let line = first_line(&std::mem::take(&mut self.echo).head);
        let start = base + from as u64;
        match self.spans.back_mut() {
            // A continuation line of the command that runs.
            Some(span) if span.running() && self.order.previous == Some(MarkKind::PromptEnd) => {
                span.echo.push(b"\n");
                span.echo.push(&line);
                span.start = start;
            }
            _ => self.open(Echo::of(&line), start, time),
        }
        self.state = Prompt::Running;
    }

    fn open(&mut self, echo: Echo, start: u64, time: SystemTime) {
        if self.spans.len() == MAX_SPANS {
            self.spans.pop_front();
        }
        self.spans.push_back(Span {
            echo,
            start,
            end: None,
            exit_code: None,
            started: time,
            ended: None,
        });
    }

    /// A mark of `kind` from `start` to `end`, which arrived at `time`
    /// and carries `stamp`: the shell's own times, when it gave them, are
    /// the command's (see `marks`), its arrival where it gave none.
    fn mark(&mut self, kind: MarkKind, start: u64, end: u64, arrived: SystemTime, stamp: Stamp) {
        let time = stamp.at.unwrap_or(arrived);
        let printed = !self.quiet;
        self.quiet = true;
        if self.order.see(kind) {
            self.stopped = false;
        }
        // bash, zsh: a command cannot run on while the shell draws a
        // prompt or starts another: its end mark stopped (the
        // integration is lost): it ended there, its code unknown.
        if !self.sh
            && matches!(kind, MarkKind::PromptEnd | MarkKind::CommandStart)
            && let Some(span) = self.spans.back_mut().filter(|span| span.running())
        {
            span.end = Some(start.max(span.start));
            span.ended = Some(time);
        }
        match kind {
            MarkKind::PromptStart => {
                self.state = Prompt::Drawing;
                self.prompt_start = Some(start);
            }
            MarkKind::PromptEnd => {
                let running = self.spans.back().is_some_and(Span::running);
                self.state = Prompt::Reading { quiet: true };
                self.echo.clear();
                if !self.sh {
                    return;
                }
                // sh: the next line's echo follows, unless it was typed
                // ahead (its echo passed already).
                match self.ahead.pop_front() {
                    Some(line) => {
                        self.echo_lines = 0;
                        match self.spans.back_mut() {
                            Some(span) if running => {
                                span.echo.push(b"\n");
                                span.echo.push(&line);
                                span.start = end;
                            }
                            _ => self.open(Echo::of(&line), end, time),
                        }
                        self.state = Prompt::Running;
                    }
                    None => self.echo_lines = 1,
                }
            }
            MarkKind::CommandStart => {
                let echo = std::mem::take(&mut self.echo);
                self.ahead.clear();
                self.open(echo, end, time);
                self.state = Prompt::Running;
            }
            MarkKind::CommandEnd(status) => {
                let was = self.state;
                self.state = Prompt::Ended;
                self.echo_lines = 0;
                match self.spans.back_mut() {
                    Some(span) if span.running() && was == Prompt::Running => {
                        span.end = Some(start.max(span.start));
                        span.exit_code = status;
                        span.ended = Some(time);
                        // fish: its run time, not its start's arrival
                        // (which a late reader took at once).
                        if let Some(took) = stamp.took {
                            span.started = time.checked_sub(took).unwrap_or(time);
                        }
                        // sh: a line of blanks or `^C` that printed
                        // nothing is no command.
                        if self.sh && span.start >= start && no_command(&span.echo.head) {
                            self.spans.pop_back();
                        }
                    }
                    _ if was == Prompt::Unknown && printed => self.unknown_ended += 1,
                    _ => {}
                }
            }
        }
    }

    /// The commands of text typed at offset `from`: those that started
    /// after it, and with `reply` (text typed into a reader inside a
    /// command) the command that ran then too.
    pub fn progress(&self, from: u64, reply: bool) -> Progress {
        let first = self
            .spans
            .iter()
            .position(|span| {
                span.start >= from || (reply && span.end.is_none_or(|end| end >= from))
            })
            .unwrap_or(self.spans.len());
        let spans: Vec<Span> = self.spans.iter().skip(first).cloned().collect();
        let running = spans.iter().any(Span::running);
        Progress {
            at_prompt: self.state == Prompt::Reading { quiet: true }
                && !spans.is_empty()
                && !running,
            awaiting_prompt: matches!(self.state, Prompt::Ended | Prompt::Drawing),
            running,
            spans,
        }
    }

    /// Where the shell is.
    pub fn prompt(&self) -> Prompt {
        self.state
    }

    /// The offset where the newest prompt began (its `A` mark), if one
    /// was seen.
    pub fn prompt_start(&self) -> Option<u64> {
        self.prompt_start
    }

    /// The newest mark seen, if any.
    pub fn last_mark(&self) -> Option<MarkKind> {
        self.order.previous
    }

    /// The spans kept, oldest first.
    pub fn spans(&self) -> &VecDeque<Span> {
        &self.spans
    }

    /// The offset of the first byte fed: nothing is known of commands
    /// before it.
    pub fn known_from(&self) -> u64 {
        self.known_from.unwrap_or(self.fed)
    }

    /// End marks of commands that started before [`known_from`] with
    /// output before them: commands that ended with nothing else known.
    ///
    /// [`known_from`]: Tracker::known_from
    pub fn unknown_ended(&self) -> usize {
        self.unknown_ended
    }

    /// Whether the integration works, as the marks so far say; `whole`:
    /// the tracker was fed from the program's first byte; `printed`: the
    /// program printed something. (A tracker of a shell started without
    /// the engine's integration is never asked: that is `never_started`.)
    pub fn integration(&self, whole: bool, printed: bool) -> ShellIntegration {
        match (self.order.seen, self.order.lost || self.stopped) {
            (true, true) => ShellIntegration::Lost,
            (true, false) => ShellIntegration::Active,
            (false, _) if whole && printed => ShellIntegration::NeverStarted,
            (false, _) => ShellIntegration::Unknown,
        }
    }
}

/// The echo up to its first line break (sh: the line typed; what
/// follows is the echo of lines typed ahead).
fn first_line(echo: &[u8]) -> Vec<u8> {
    let end = memchr::memchr2(b'\r', b'\n', echo).unwrap_or(echo.len());
    echo[..end].to_vec()
}

/// Whether an sh line's echo is no command: blanks, or cut by Ctrl-C.
fn no_command(echo: &[u8]) -> bool {
    let text = echo.trim_ascii();
    text.is_empty() || text.ends_with(b"^C")
}

/// Whether `bytes` hold a printable byte outside escape sequences (a
/// sequence cut by the chunk's end may count its tail as printable: the
/// state it sets is a hint, made again at the next mark).
fn printable(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            0x1b => {
                at += 1;
                match bytes.get(at) {
                    Some(b'[') => {
                        at += 1;
                        while at < bytes.len() && !(0x40..=0x7e).contains(&bytes[at]) {
                            at += 1;
                        }
                    }
                    Some(b']') => {
                        while at < bytes.len() && bytes[at] != 0x07 && bytes[at] != b'\\' {
                            at += 1;
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            b if b > b' ' && b != 0x7f => return true,
            _ => at += 1,
        }
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "tracker_tests.rs"]
mod tests;
