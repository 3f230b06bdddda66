//! `%output` byte escaping (tmux's `\ooo`) and vis-decoding of names.
//!
//! tmux writes every pane byte below `0x20` and every backslash as `\` plus
//! exactly three octal digits, and every other byte raw (control-mode.md
//! §3.1). [`unescape_output`] undoes that for the parser's hot path;
//! [`escape_output`] is the inverse, used by tests, fixture recorders and
//! benchmarks. Names in notifications use a different, richer encoding
//! (`vis(3)`), decoded by [`unvis`]. Nothing here allocates per byte or
//! touches IO.

use std::fmt;

use bytes::{BufMut, BytesMut};

/// A backslash in `%output` data that is not followed by three octal digits
/// (at most `\377`). tmux never writes one, so it means a corrupt stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadEscape {
    /// Offset of the backslash in the escaped data.
    pub offset: usize,
}

impl fmt::Display for BadEscape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "backslash at offset {} is not followed by three octal digits",
            self.offset
        )
    }
}

impl std::error::Error for BadEscape {}

/// Decodes tmux's `%output` escaping of `data`, appending the bytes to `out`.
///
/// Runs without a backslash are copied whole (found with `memchr`), so plain
/// text costs one scan and one copy.
///
/// # Errors
/// [`BadEscape`] when a backslash is not followed by exactly three octal
/// digits with a value of at most `\377`. `out` then holds the bytes decoded
/// before it.
pub fn unescape_output(data: &[u8], out: &mut BytesMut) -> Result<(), BadEscape> {
    // The output is never longer than the input: reserve once so the loop
    // below never reallocates.
    out.reserve(data.len());
    let mut rest = data;
    while let Some(at) = memchr::memchr(b'\\', rest) {
        out.put_slice(&rest[..at]);
        let byte = match rest.get(at + 1..at + 4) {
            Some(&[a, b, c]) => octal3(a, b, c),
            _ => None,
        };
        let Some(byte) = byte else {
            return Err(BadEscape {
                offset: data.len() - rest.len() + at,
            });
        };
        out.put_u8(byte);
        rest = &rest[at + 4..];
    }
    out.put_slice(rest);
    Ok(())
}

/// The byte written as the three octal digits `a b c`, if they are octal and
/// the value fits in a byte.
fn octal3(a: u8, b: u8, c: u8) -> Option<u8> {
    let digit = |d: u8| (b'0'..=b'7').contains(&d).then(|| d - b'0');
    let (a, b, c) = (digit(a)?, digit(b)?, digit(c)?);
    // `a` above 3 would overflow a byte (`\400` and up); tmux never writes it.
    (a <= 3).then(|| (a << 6) | (b << 3) | c)
}

/// Escapes `data` the way tmux writes `%output` payloads: bytes below `0x20`
/// and `\` as `\ooo`, everything else raw.
pub fn escape_output(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 4);
    for &b in data {
        if b < 0x20 || b == b'\\' {
            out.extend_from_slice(&[b'\\', b'0' + (b >> 6), b'0' + ((b >> 3) & 7), b'0' + (b & 7)]);
        } else {
            out.push(b);
        }
    }
    out
}

/// Decodes a `vis(3)`-encoded name as tmux prints session and window names
/// (`VIS_OCTAL | VIS_CSTYLE | VIS_TAB | VIS_NL`, control-mode.md §4.2).
///
/// Understands `\\`, the C-style escapes `\n \t \r \a \b \f \v \s \0 \E`
/// and `\ooo` (one to three octal digits). Anything else after a backslash,
/// and a trailing lone backslash, is kept as written: a name is display text,
/// so a best effort beats an error. Bytes that do not form UTF-8 after
/// decoding are replaced with U+FFFD.
pub fn unvis(name: &str) -> String {
    let src = name.as_bytes();
    if memchr::memchr(b'\\', src).is_none() {
        return name.to_owned();
    }
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        if b != b'\\' || i + 1 == src.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let next = src[i + 1];
        let simple = match next {
            b'\\' => Some(b'\\'),
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'v' => Some(0x0b),
            b's' => Some(b' '),
            b'E' => Some(0x1b),
            _ => None,
        };
        if let Some(byte) = simple {
            out.push(byte);
            i += 2;
            continue;
        }
        if (b'0'..=b'7').contains(&next) {
            // Up to three digits, like vis's decoder; `\0` alone is NUL.
            let mut value: u32 = 0;
            let mut j = i + 1;
            while j < src.len() && j < i + 4 && (b'0'..=b'7').contains(&src[j]) {
                value = value * 8 + u32::from(src[j] - b'0');
                j += 1;
            }
            // Three digits can reach 0o777; vis never writes more than a byte,
            // so anything bigger is kept literally rather than truncated.
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i = j;
                continue;
            }
        }
        out.push(b'\\');
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unescape(data: &[u8]) -> Result<Vec<u8>, BadEscape> {
        let mut out = BytesMut::new();
        unescape_output(data, &mut out).map(|()| out.to_vec())
    }

    #[test]
    fn unescape_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"plain text", b"plain text"),
            (b"\\015\\012", b"\r\n"),
            (b"A\\011B\\134C", b"A\tB\\C"),
            (b"\\000", b"\0"),
            (b"\\033[1m", b"\x1b[1m"),
            (b"\\377", b"\xff"),
            // bytes >= 0x80 and DEL are raw on the wire (V06)
            (b"\xff\xfe \x7f", b"\xff\xfe \x7f"),
            (b"\\134012", b"\\012"),
            (b"end\\012", b"end\n"),
        ];
        for (input, want) in cases {
            assert_eq!(unescape(input).as_deref(), Ok(*want), "input {input:?}");
        }
    }

    #[test]
    fn unescape_rejects_bad_escapes() {
        let cases: &[(&[u8], usize)] = &[
            (b"\\", 0),
            (b"ab\\", 2),
            (b"ab\\01", 2),
            (b"\\01x", 0),
            (b"ok\\012\\8", 6),
            (b"\\400", 0),
            (b"\\n", 0),
            (b"x\\\\", 1),
        ];
        for (input, offset) in cases {
            assert_eq!(
                unescape(input),
                Err(BadEscape { offset: *offset }),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn bad_escape_text() {
        insta::assert_snapshot!(
            BadEscape { offset: 7 }.to_string(),
            @"backslash at offset 7 is not followed by three octal digits"
        );
    }

    #[test]
    fn escape_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"A\tB\\C", b"A\\011B\\134C"),
            (b"\r\n", b"\\015\\012"),
            (b"\x1f \x7f\xff", b"\\037 \x7f\xff"),
        ];
        for (input, want) in cases {
            assert_eq!(escape_output(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn unvis_table() {
        let cases = [
            ("main", "main"),
            ("demo renamed", "demo renamed"),
            ("a\\\\b", "a\\b"),
            ("two\\nlines", "two\nlines"),
            ("tab\\there", "tab\there"),
            ("esc\\033x", "esc\x1bx"),
            ("nul\\0", "nul\0"),
            ("bell\\a\\E", "bell\x07\x1b"),
            ("caf\\303\\251", "café"),
            ("sess-é", "sess-é"),
            ("trailing\\", "trailing\\"),
            ("unknown\\q", "unknown\\q"),
            ("big\\777", "big\\777"),
            ("bad\\377", "bad\u{fffd}"),
        ];
        for (input, want) in cases {
            assert_eq!(unvis(input), want, "input {input:?}");
        }
    }

    proptest! {
        #[test]
        fn escape_round_trips(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let escaped = escape_output(&data);
            prop_assert!(escaped.iter().all(|&b| b >= 0x20));
            prop_assert_eq!(unescape(&escaped), Ok(data));
        }

        #[test]
        fn unescape_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = unescape(&data);
        }

        #[test]
        fn unvis_never_panics(name in "\\PC*") {
            let _ = unvis(&name);
        }
    }
}
