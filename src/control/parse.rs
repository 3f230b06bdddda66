//! One control-mode line (`&[u8]`, no `\n`) to a typed [`Line`]; nom inside, no IO.
//!
//! STUB: being written; see the issue brief.

use bytes::Bytes;

use super::Line;

/// What was wrong with a malformed line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The line was longer than the codec's limit; it was skipped.
    LineTooLong {
        /// How many bytes the line had (at least).
        len: usize,
    },
    /// Anything else (placeholder while the parser is written).
    Invalid,
}

/// A line that could not be parsed, with the line itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed control-mode line ({kind:?}): {line:?}")]
pub struct ParseError {
    /// What was wrong.
    pub kind: ParseErrorKind,
    /// The offending line (possibly cut short).
    pub line: Bytes,
}

/// Parses one line without its `\n`.
///
/// # Errors
/// A [`ParseError`] carrying the line when it is not valid control mode.
pub fn parse_line(line: &Bytes) -> Result<Line, ParseError> {
    Err(ParseError {
        kind: ParseErrorKind::Invalid,
        line: line.clone(),
    })
}
