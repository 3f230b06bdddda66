//! What a malformed control-mode line looks like to callers: a kind and the
//! line, with a readable message. No nom types leak through here.

use std::fmt;

use bytes::Bytes;

/// How much of a bad line an error message shows; the rest is cut with `…`
/// so a megabyte of `%output` never lands in a log line.
const SHOWN: usize = 120;

/// What was wrong with a malformed line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// A `%begin`/`%end`/`%error` line not followed by exactly three
    /// decimal numbers (time, command number, flags).
    BadGuard,
    /// A `%end`/`%error` line while no reply block was open.
    UnmatchedGuard,
    /// An id field that is not `%N`, `@N` or `$N` (with `N` a `u32`).
    BadId {
        /// Which field, e.g. `"window id"`.
        field: &'static str,
    },
    /// A numeric field that is not a decimal number of the right size.
    BadNumber {
        /// Which field, e.g. `"age"`.
        field: &'static str,
    },
    /// A required field is absent.
    MissingField {
        /// Which field, e.g. `"pane id"`.
        field: &'static str,
    },
    /// `%output` data with a backslash not followed by three octal digits.
    BadEscape {
        /// Offset of the backslash in the line.
        offset: usize,
    },
    /// A `%layout-change` layout that does not follow the layout grammar.
    BadLayout {
        /// Offset in the line where the layout stops making sense.
        offset: usize,
    },
    /// A field that tmux always writes as UTF-8 is not.
    NotUtf8 {
        /// Which field, e.g. `"session name"`.
        field: &'static str,
    },
    /// A line starting with `%` that is not followed by a notification name
    /// (letters, digits, `-`, `_`).
    BadName,
    /// The line was longer than the codec's limit; it was skipped.
    LineTooLong {
        /// How many bytes the line had before its `\n`.
        len: usize,
    },
    /// A reply block went over the codec's limit in lines or bytes: its
    /// lines were dropped, and this error stands for the whole block (the
    /// error's line is its `%begin` line).
    BlockTooLarge {
        /// How many body lines the block had.
        lines: usize,
        /// How many bytes they held, counted as the codec does (see
        /// `ControlCodec::with_block_limits`).
        bytes: usize,
    },
    /// The stream ended while a reply block was still open.
    UnterminatedBlock {
        /// How many body lines the block had received.
        lines: usize,
    },
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::BadGuard => {
                f.write_str("expected three numbers (time, command number, flags)")
            }
            ParseErrorKind::UnmatchedGuard => f.write_str("no reply block is open"),
            ParseErrorKind::BadId { field } | ParseErrorKind::BadNumber { field } => {
                write!(f, "bad {field}")
            }
            ParseErrorKind::MissingField { field } => write!(f, "missing {field}"),
            ParseErrorKind::BadEscape { offset } => {
                write!(
                    f,
                    "bad escape at byte {offset} (want \\ and three octal digits)"
                )
            }
            ParseErrorKind::BadLayout { offset } => write!(f, "bad layout at byte {offset}"),
            ParseErrorKind::NotUtf8 { field } => write!(f, "{field} is not UTF-8"),
            ParseErrorKind::BadName => f.write_str("bad notification name"),
            ParseErrorKind::LineTooLong { len } => {
                write!(f, "line of {len} bytes is over the length limit")
            }
            ParseErrorKind::BlockTooLarge { lines, bytes } => write!(
                f,
                "reply block of {lines} lines ({bytes} bytes) is over the size limit; its lines were dropped"
            ),
            ParseErrorKind::UnterminatedBlock { lines } => write!(
                f,
                "reply block still open at end of stream after {lines} line{}",
                if *lines == 1 { "" } else { "s" }
            ),
        }
    }
}

/// A line that could not be parsed, with the line itself.
///
/// Its message names the notification and shows the line escaped and cut to
/// a readable length: `malformed %window-add line: bad window id in
/// "%window-add x"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What was wrong.
    pub kind: ParseErrorKind,
    /// The offending line (possibly cut short; for an unterminated block,
    /// its `%begin` line).
    pub line: Bytes,
}

impl ParseError {
    /// The error for `line`.
    pub fn new(kind: ParseErrorKind, line: Bytes) -> Self {
        ParseError { kind, line }
    }

    /// The kebab-case name of the kind (`line-too-long`, `bad-id`, ...), as
    /// the `decode` command prints it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ParseErrorKind::BadGuard => "bad-guard",
            ParseErrorKind::UnmatchedGuard => "unmatched-guard",
            ParseErrorKind::BadId { .. } => "bad-id",
            ParseErrorKind::BadNumber { .. } => "bad-number",
            ParseErrorKind::MissingField { .. } => "missing-field",
            ParseErrorKind::BadEscape { .. } => "bad-escape",
            ParseErrorKind::BadLayout { .. } => "bad-layout",
            ParseErrorKind::NotUtf8 { .. } => "not-utf8",
            ParseErrorKind::BadName => "bad-name",
            ParseErrorKind::LineTooLong { .. } => "line-too-long",
            ParseErrorKind::BlockTooLarge { .. } => "block-too-large",
            ParseErrorKind::UnterminatedBlock { .. } => "unterminated-block",
        }
    }
}

/// The line as a quoted, ASCII-escaped string, cut at [`SHOWN`] bytes.
struct Shown<'a>(&'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut = self.0.len() > SHOWN;
        let shown = &self.0[..self.0.len().min(SHOWN)];
        write!(
            f,
            "\"{}{}\"",
            shown.escape_ascii(),
            if cut { "…" } else { "" }
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = Shown(&self.line);
        match self.kind {
            ParseErrorKind::LineTooLong { .. }
            | ParseErrorKind::BlockTooLarge { .. }
            | ParseErrorKind::UnterminatedBlock { .. } => {
                write!(f, "{}: {line}", self.kind)
            }
            _ => {
                let name = self
                    .line
                    .strip_prefix(b"%")
                    .map(|rest| &rest[..memchr::memchr(b' ', rest).unwrap_or(rest.len())])
                    .filter(|name| is_notification_name(name));
                match name {
                    Some(name) => write!(
                        f,
                        "malformed %{} line: {} in {line}",
                        name.escape_ascii(),
                        self.kind
                    ),
                    None => write!(f, "malformed control-mode line: {} in {line}", self.kind),
                }
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// True for a notification name: ASCII letters, digits, `-` and `_`.
pub(crate) fn is_notification_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
