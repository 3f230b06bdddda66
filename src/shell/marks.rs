//! OSC 133 marks in a pane's byte stream: `ESC ] 133 ; KIND [; ARGS]`
//! ended by BEL or ST (`ESC \`): how one is read. What their order means
//! is the tracker's ([`super::tracker`]), nobody else's.
//!
//! The engine's own integration also stamps a command's `C` and `D` with
//! the shell's clock (`t=SECONDS.FRACTION`, bash's and zsh's
//! `EPOCHREALTIME`), or its `D` with the command's run time (`d=MS`,
//! fish's `CMD_DURATION`): a command's times are then in the stream's
//! bytes, the same for every process that reads them, however late it
//! read them (a CLI call linking to a running terminal, an engine
//! restarted, a history read back after a reboot). Terminals ignore
//! parameters they do not know.

use std::time::{Duration, SystemTime};

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

/// What every mark starts with.
pub(crate) const INTRO: &[u8] = b"\x1b]133;";

/// The longest mark this scanner reads: an unterminated one longer than
/// this is not a mark.
pub const MAX_MARK: usize = 64;

/// What the bytes at an [`INTRO`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A mark of this kind (`None`: a kind this engine ignores), this many
    /// bytes long, terminator included, and the times it carries.
    Mark(Option<MarkKind>, usize, Stamp),
    /// Cut by the end of the bytes: read it again with what follows.
    Cut,
    /// No terminator within [`MAX_MARK`]: not a mark.
    Not,
}

/// The mark at the start of `bytes`, which begin with [`INTRO`].
pub(crate) fn parse(bytes: &[u8]) -> Parsed {
    let body_start = INTRO.len();
    let rest = &bytes[body_start..bytes.len().min(body_start + MAX_MARK)];
    let terminator = rest.iter().enumerate().find_map(|(i, &b)| match b {
        0x07 => Some((i, 1)),
        0x1b if rest.get(i + 1) == Some(&b'\\') => Some((i, 2)),
        _ => None,
    });
    let Some((length, terminator_len)) = terminator else {
        return if bytes.len() - body_start < MAX_MARK {
            Parsed::Cut
        } else {
            Parsed::Not
        };
    };
    let body = &rest[..length];
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
    Parsed::Mark(kind, body_start + length + terminator_len, stamp(body))
}

/// The times a mark carries (see the module's notes); what a mark
/// without them, or with a value that does not read, leaves `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// `t=`: when the shell printed the mark, by its clock.
    pub(crate) at: Option<SystemTime>,
    /// `d=`: how long the command ran, as the shell measured it.
    pub(crate) took: Option<Duration>,
}

/// The times in a mark's `body` (its kind and parameters, between the
/// intro and the terminator).
fn stamp(body: &[u8]) -> Stamp {
    let mut stamp = Stamp::default();
    for param in body.split(|&b| b == b';').skip(1) {
        let Ok(param) = std::str::from_utf8(param) else {
            continue;
        };
        if let Some(value) = param.strip_prefix("t=") {
            stamp.at = seconds(value).map(|since| SystemTime::UNIX_EPOCH + since);
        } else if let Some(value) = param.strip_prefix("d=") {
            stamp.took = value.parse::<u64>().ok().map(Duration::from_millis);
        }
    }
    stamp
}

/// `SECONDS[.FRACTION]` as a duration; the decimal point may be a comma
/// (bash writes `EPOCHREALTIME` with the locale's). Nothing else reads:
/// no sign, no exponent; a fraction past nanoseconds is cut.
fn seconds(value: &str) -> Option<Duration> {
    let (whole, fraction) = value.split_once(['.', ',']).unwrap_or((value, ""));
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) {
        return None;
    }
    let nanos = if fraction.is_empty() {
        0
    } else {
        format!("{:0<9}", &fraction[..fraction.len().min(9)])
            .parse()
            .ok()?
    };
    Some(Duration::new(whole.parse().ok()?, nanos))
}

/// Whether a terminal's shell integration works, as the marks the
/// engine holds show it (`show`'s `shell_integration`; the tracker,
/// [`super::tracker::Tracker::integration`], judges it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ShellIntegration {
    /// The shell marks its prompts and commands: sends get exit codes.
    Active,
    /// It marked them, then stopped marking some (its rc or a command
    /// replaced `PROMPT_COMMAND`, `PS1` or `PS0` later, or `exec` put
    /// another shell in its place): exit codes are no longer given; a new
    /// terminal gets the integration again.
    Lost,
    /// It never marked anything: the program is no shell the engine
    /// integrates (a command, a `shell` line, tcsh, integration turned
    /// off), or the shell's own rc replaced the engine's.
    NeverStarted,
    /// Not known yet: the engine holds no mark, and either the shell has
    /// printed nothing yet or the engine linked to the terminal after its
    /// start (an engine restart, a one-shot CLI call); the next prompt
    /// tells.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_marks_with_either_terminator_and_leaves_cut_ones() {
        use MarkKind::{CommandEnd as D, CommandStart as C, PromptEnd as B, PromptStart as A};
        let table: &[(&[u8], Parsed)] = &[
            (
                b"\x1b]133;D;0\x07rest",
                Parsed::Mark(Some(D(Some(0))), 10, Stamp::default()),
            ),
            (
                b"\x1b]133;D;130;aid=1\x1b\\",
                Parsed::Mark(Some(D(Some(130))), 19, Stamp::default()),
            ),
            (
                b"\x1b]133;D\x07",
                Parsed::Mark(Some(D(None)), 8, Stamp::default()),
            ),
            (
                b"\x1b]133;A\x07",
                Parsed::Mark(Some(A), 8, Stamp::default()),
            ),
            (
                b"\x1b]133;B\x1b\\",
                Parsed::Mark(Some(B), 9, Stamp::default()),
            ),
            (
                b"\x1b]133;C\x07",
                Parsed::Mark(Some(C), 8, Stamp::default()),
            ),
            (b"\x1b]133;Z\x07", Parsed::Mark(None, 8, Stamp::default())),
            (b"\x1b]133;D;", Parsed::Cut),
            (b"\x1b]133;D;0\x1b", Parsed::Cut),
        ];
        for (bytes, want) in table {
            assert_eq!(parse(bytes), *want, "{bytes:?}");
        }
        let mut long = INTRO.to_vec();
        long.resize(INTRO.len() + MAX_MARK + 1, b'x');
        assert_eq!(parse(&long), Parsed::Not);
    }

    #[test]
    fn reads_the_times_a_mark_carries_and_ignores_what_does_not_read() {
        let at = |secs: u64, nanos: u32| Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos));
        let table: &[(&[u8], Stamp)] = &[
            (b"\x1b]133;C\x07", Stamp::default()),
            (
                b"\x1b]133;C;t=1765130000.123456\x07",
                Stamp {
                    at: at(1_765_130_000, 123_456_000),
                    took: None,
                },
            ),
            (
                b"\x1b]133;D;0;t=1765130000,5\x1b\\",
                Stamp {
                    at: at(1_765_130_000, 500_000_000),
                    took: None,
                },
            ),
            (
                b"\x1b]133;D;130;d=1500\x07",
                Stamp {
                    at: None,
                    took: Some(Duration::from_millis(1500)),
                },
            ),
            (
                b"\x1b]133;D;0;aid=7;t=12.000000001\x07",
                Stamp {
                    at: at(12, 1),
                    took: None,
                },
            ),
            // bash before 5.0 has no EPOCHREALTIME: an empty value.
            (b"\x1b]133;C;t=\x07", Stamp::default()),
            (b"\x1b]133;C;t=-5\x07", Stamp::default()),
            (b"\x1b]133;C;t=1e9\x07", Stamp::default()),
            (
                b"\x1b]133;C;t=1.0123456789\x07",
                Stamp {
                    at: at(1, 12_345_678),
                    took: None,
                },
            ),
            (b"\x1b]133;D;0;d=x\x07", Stamp::default()),
        ];
        for (mark, want) in table {
            let Parsed::Mark(_, _, stamp) = parse(mark) else {
                panic!("not a whole mark: {mark:?}");
            };
            assert_eq!(stamp, *want, "{mark:?}");
        }
    }
}
