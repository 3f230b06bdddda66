//! OSC 133 marks in a pane's byte stream: `ESC ] 133 ; KIND [; ARGS]`
//! ended by BEL or ST (`ESC \`), and what their order says of the shell
//! integration ([`integration`]).

use memchr::memmem;
use serde::Serialize;

/// One mark's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// `A`: a prompt starts.
    PromptStart,
    /// `B`: the prompt ends; what follows is typed input.
    PromptEnd,
    /// `C`: the command starts; what follows is its output.
    CommandStart,
    /// `D`: the command ended, with its exit status when given.
    CommandEnd(Option<i32>),
}

/// A mark and where it is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// What it marks.
    pub kind: MarkKind,
    /// The stream offset of its first byte (the ESC).
    pub start: u64,
    /// The stream offset just past its terminator.
    pub end: u64,
}

const INTRO: &[u8] = b"\x1b]133;";

/// The longest mark this scanner reads: an unterminated one longer than
/// this is not a mark.
pub const MAX_MARK: usize = 64;

/// The complete marks in `bytes`, which start at stream offset `base`;
/// and the offset up to which the stream is scanned for good (a mark cut
/// at the end is left for the next scan, from that offset).
pub fn scan(bytes: &[u8], base: u64) -> (Vec<Mark>, u64) {
    let mut marks = Vec::new();
    let mut done = bytes.len();
    let mut at = 0;
    while let Some(found) = memmem::find(&bytes[at..], INTRO) {
        let start = at + found;
        let body_start = start + INTRO.len();
        let rest = &bytes[body_start..bytes.len().min(body_start + MAX_MARK)];
        let terminator = rest.iter().enumerate().find_map(|(i, &b)| match b {
            0x07 => Some((i, 1)),
            0x1b if rest.get(i + 1) == Some(&b'\\') => Some((i, 2)),
            _ => None,
        });
        let Some((length, terminator_len)) = terminator else {
            if bytes.len() - body_start < MAX_MARK {
                // Cut at the end: scan it again with what follows.
                done = start;
                break;
            }
            at = body_start;
            continue;
        };
        let body = &rest[..length];
        let end = body_start + length + terminator_len;
        let kind = match body.first() {
            Some(b'A') => Some(MarkKind::PromptStart),
            Some(b'B') => Some(MarkKind::PromptEnd),
            Some(b'C') => Some(MarkKind::CommandStart),
            Some(b'D') => Some(MarkKind::CommandEnd(
                body.get(2..)
                    .and_then(|status| std::str::from_utf8(status).ok())
                    .and_then(|status| status.split(';').next()?.parse().ok()),
            )),
            _ => None,
        };
        if let Some(kind) = kind {
            marks.push(Mark {
                kind,
                start: base + start as u64,
                end: base + end as u64,
            });
        }
        at = end;
    }
    (marks, base + done as u64)
}

/// Whether a terminal's shell integration works, as the marks the
/// engine holds show it (`show`'s `shell_integration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub(crate) enum ShellIntegration {
    /// The shell marks its prompts and commands: sends get exit codes.
    Active,
    /// It marked them, then stopped marking some (its rc or a command
    /// replaced `PROMPT_COMMAND`, `PS1` or `PS0` later): exit codes are
    /// no longer given; a new terminal gets the integration again.
    Lost,
    /// It never marked anything: the program is no shell the engine
    /// integrates (a command, a `shell` line, fish, integration turned
    /// off), or the shell's own rc replaced the engine's.
    NeverStarted,
    /// Not known yet: the engine holds no mark, and either the shell has
    /// printed nothing yet or the engine linked to the terminal after its
    /// start (an engine restart, a one-shot CLI call); the next prompt
    /// tells.
    Unknown,
}

/// What the marks `kinds` (in stream order) say of a terminal's shell
/// integration. `integrated`: its shell was started with the engine's rc;
/// `whole`: the marks were scanned from the program's first byte;
/// `printed`: the program printed something.
///
/// The marks go round `D A B C D A B ...` (POSIX sh: no `C`, and its
/// continuation prompt ends with `B` too). A mark out of that order (a
/// `B` or `C` after a `C` with no `D`: the end mark stopped; a `C` or `D`
/// after an `A` with no `B`: the prompt's mark stopped) means the
/// integration was lost, unless a whole `D A B` prompt came after it.
pub(crate) fn integration(
    kinds: impl IntoIterator<Item = MarkKind>,
    integrated: bool,
    whole: bool,
    printed: bool,
) -> ShellIntegration {
    if !integrated {
        return ShellIntegration::NeverStarted;
    }
    let (mut seen, mut lost) = (false, false);
    let (mut before, mut previous): (Option<MarkKind>, Option<MarkKind>) = (None, None);
    for kind in kinds {
        use MarkKind::{CommandEnd as D, CommandStart as C, PromptEnd as B, PromptStart as A};
        let in_order = matches!(
            (previous, kind),
            (None, _) | (Some(D(_)), A) | (Some(A), B) | (Some(B), B | C | D(_)) | (Some(C), D(_))
        );
        lost |= !in_order;
        if kind == B && previous == Some(A) && matches!(before, Some(D(_))) {
            lost = false;
        }
        seen = true;
        (before, previous) = (previous, Some(kind));
    }
    match (seen, lost) {
        (true, true) => ShellIntegration::Lost,
        (true, false) => ShellIntegration::Active,
        (false, _) if whole && printed => ShellIntegration::NeverStarted,
        (false, _) => ShellIntegration::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marks_order_says_whether_integration_works() {
        use MarkKind::{CommandEnd as D, CommandStart as C, PromptEnd as B, PromptStart as A};
        use ShellIntegration::{Active, Lost, NeverStarted, Unknown};
        let judge = |kinds: &[MarkKind]| integration(kinds.iter().copied(), true, true, true);
        let ok = D(Some(0));
        // bash and zsh; an empty line; POSIX sh with a continuation prompt.
        assert_eq!(judge(&[ok, A, B, C, ok, A, B]), Active);
        assert_eq!(judge(&[ok, A, B, ok, A, B, C]), Active);
        assert_eq!(judge(&[ok, A, B, B, ok, A, B]), Active);
        // The window may start anywhere.
        assert_eq!(judge(&[C, ok, A, B]), Active);
        // PROMPT_COMMAND replaced after start: no D, A from then on.
        assert_eq!(judge(&[ok, A, B, C, B, C, B]), Lost);
        // PS1 replaced: no B.
        assert_eq!(judge(&[ok, A, B, C, ok, A, C, ok, A]), Lost);
        // Put back: a whole prompt after the break.
        assert_eq!(judge(&[ok, A, B, C, B, C, ok, A, B]), Active);
        // No marks at all.
        assert_eq!(judge(&[]), NeverStarted);
        assert_eq!(integration([], true, false, true), Unknown);
        assert_eq!(integration([], true, true, false), Unknown);
        assert_eq!(integration([ok, A, B], false, true, true), NeverStarted);
    }

    #[test]
    fn finds_marks_with_either_terminator() {
        let stream = b"\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07echo hi\r\n\x1b]133;C\x1b\\hi\r\n\x1b]133;D;1\x07";
        let (marks, done) = scan(stream, 100);
        let kinds: Vec<MarkKind> = marks.iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            [
                MarkKind::CommandEnd(Some(0)),
                MarkKind::PromptStart,
                MarkKind::PromptEnd,
                MarkKind::CommandStart,
                MarkKind::CommandEnd(Some(1)),
            ]
        );
        assert_eq!(done, 100 + stream.len() as u64);
        assert_eq!(marks[0].start, 100);
        assert_eq!(marks[0].end, 100 + 10);
    }

    #[test]
    fn a_cut_mark_is_left_for_the_next_scan() {
        let (marks, done) = scan(b"out\x1b]133;D;", 0);
        assert!(marks.is_empty());
        assert_eq!(done, 3);
        let (marks, _) = scan(b"\x1b]133;D;7\x07", done);
        assert_eq!(marks[0].kind, MarkKind::CommandEnd(Some(7)));
        assert_eq!(marks[0].start, 3);
        // No status, or an unknown kind.
        let (marks, _) = scan(b"\x1b]133;D\x07\x1b]133;Z\x07", 0);
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[0].kind, MarkKind::CommandEnd(None));
    }
}
