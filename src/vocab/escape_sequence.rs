//! Where a terminal escape sequence ends (ECMA-48's shapes): the one
//! reading of "skip this sequence" that the output's text forms share
//! (`strip_escapes` drops every sequence, `render` applies a CSI's cursor
//! moves and drops the rest).

use std::ops::Range;

/// The escape sequence starting at an ESC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EscapeSequence {
    /// `ESC [ params final`: the parameter and intermediate bytes' range
    /// and the final byte (absent when the bytes end inside it).
    Csi {
        params: Range<usize>,
        final_byte: Option<u8>,
    },
    /// Anything else: OSC, DCS, APC, PM, SOS (ended by BEL or ST), a
    /// charset designator (three bytes), a two-byte sequence, or a lone
    /// ESC at the end.
    Other,
}

/// Reads the sequence whose ESC is at `esc`; answers it and the index just
/// past it (at most `bytes.len()`).
pub(crate) fn escape_sequence(bytes: &[u8], esc: usize) -> (EscapeSequence, usize) {
    let mut i = esc + 1;
    match bytes.get(i) {
        Some(b'[') => {
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && !(0x40..=0x7e).contains(&bytes[end]) {
                end += 1;
            }
            let final_byte = bytes.get(end).copied();
            let next = (end + 1).min(bytes.len());
            let sequence = EscapeSequence::Csi {
                params: start..end,
                final_byte,
            };
            (sequence, next)
        }
        Some(b']' | b'P' | b'_' | b'^' | b'X') => {
            // String sequences end with BEL or ST (ESC \).
            i += 1;
            while i < bytes.len() {
                if bytes[i] == 0x07 {
                    return (EscapeSequence::Other, i + 1);
                }
                if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'\\') {
                    return (EscapeSequence::Other, i + 2);
                }
                i += 1;
            }
            (EscapeSequence::Other, i)
        }
        Some(b'(' | b')' | b'*' | b'+' | b'#' | b'%') => {
            (EscapeSequence::Other, (i + 2).min(bytes.len()))
        }
        Some(_) => (EscapeSequence::Other, i + 1),
        None => (EscapeSequence::Other, i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_ends_where_it_should() {
        let csi = b"\x1b[1;31mx";
        assert_eq!(
            escape_sequence(csi, 0),
            (
                EscapeSequence::Csi {
                    params: 2..6,
                    final_byte: Some(b'm')
                },
                7
            )
        );
        assert_eq!(escape_sequence(b"\x1b]0;title\x07x", 0).1, 10);
        assert_eq!(escape_sequence(b"\x1b]7;file:///\x1b\\x", 0).1, 14);
        assert_eq!(escape_sequence(b"\x1b(Bx", 0).1, 3);
        assert_eq!(escape_sequence(b"\x1b=x", 0).1, 2);
        // Cut short: never past the end.
        assert_eq!(escape_sequence(b"\x1b", 0).1, 1);
        assert_eq!(escape_sequence(b"\x1b(", 0).1, 2);
        assert_eq!(escape_sequence(b"\x1b]0;ti", 0).1, 6);
        let (cut, next) = escape_sequence(b"\x1b[12", 0);
        assert_eq!(
            cut,
            EscapeSequence::Csi {
                params: 2..4,
                final_byte: None
            }
        );
        assert_eq!(next, 4);
    }
}
