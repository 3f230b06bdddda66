//! `%output` byte escaping (tmux's `\ooo`) and vis-decoding of names.
//!
//! tmux writes every pane byte below `0x20` and every backslash as `\` plus
//! exactly three octal digits, and every other byte raw
//! (docs/control-mode.md, "Pane output"). [`unescape_output`] undoes that for the parser's hot path;
//! [`escape_output`] is the inverse, used by tests, fixture recorders and
//! benchmarks. Names in notifications use a different, richer encoding
//! (`vis(3)`), decoded by [`unvis`]. Nothing here allocates per byte or
//! touches IO.

use std::fmt;

use bytes::BytesMut;
use wide::u8x16;

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
/// This is the decoder's hot loop, so it works on 128-byte blocks: a
/// bitmask of the backslashes in a block (SIMD compares, no `unsafe`), then per
/// escape a fixed-size copy of the run before it and a branch-free decode of
/// its three digits. Fixed-size copies over-write into slack that is cut off
/// at the end; they avoid the unpredictable branches of exact-length copies,
/// which cost more than the bytes (control-mode output has an escape every
/// 15 to 40 bytes: every `\r\n` and every `ESC`). Validity is checked once
/// at the end, and a bad escape is located by a slow second pass.
///
/// # Errors
/// [`BadEscape`] when a backslash is not followed by exactly three octal
/// digits with a value of at most `\377`. `out` is then left as it was.
pub fn unescape_output(data: &[u8], out: &mut BytesMut) -> Result<(), BadEscape> {
    let start = out.len();
    let Some(first) = memchr::memchr(b'\\', data) else {
        out.extend_from_slice(data);
        return Ok(());
    };
    let n = data.len();
    // The output is never longer than the input; `RUN` bytes of slack take
    // the over-long fixed-size copies.
    out.resize(start + n + RUN, 0);
    let dst = &mut out[start..];
    dst[..first].copy_from_slice(&data[..first]);
    let (mut r, mut w) = (first, first);
    // Nonzero once any escape was bad; checked once at the end.
    let mut bad = 0u32;
    let mut base = first;
    while base < n {
        let mask = if base + BLOCK <= n {
            backslashes(&data[base..base + BLOCK])
        } else {
            data[base..]
                .iter()
                .enumerate()
                .fold(0, |m, (i, &b)| m | (u128::from(b == b'\\') << i))
        };
        // Walked as two 64-bit halves: `u128` bit tricks cost twice the
        // instructions on a 64-bit machine.
        for half in 0..2 {
            let at = base + 64 * half;
            let mut bits = (mask >> (64 * half)) as u64;
            while bits != 0 {
                let p = at + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // A backslash among the previous escape's digits: invalid, and
                // reported by the slow pass below.
                let Some(len) = p.checked_sub(r) else {
                    bad = 1;
                    continue;
                };
                // Whole `RUN`-byte copies (inlined moves, no `memcpy` call),
                // exact only where the data ends; none between adjacent
                // escapes (every `\r\n`), which measured 3-4 % faster.
                if len != 0 {
                    let mut c = 0;
                    loop {
                        if r + c + RUN <= n {
                            dst[w + c..w + c + RUN].copy_from_slice(&data[r + c..r + c + RUN]);
                        } else {
                            dst[w + c..w + len].copy_from_slice(&data[r + c..p]);
                            break;
                        }
                        c += RUN;
                        if c >= len {
                            break;
                        }
                    }
                }
                w += len;
                // The mask says `data[p]` is the backslash; the digits follow.
                let word = match data.get(p..p + 4) {
                    Some(four) => {
                        let mut bytes = [0u8; 4];
                        bytes.copy_from_slice(four);
                        u32::from_le_bytes(bytes)
                    }
                    None => 0,
                };
                let (byte, flaw) = octal_escape(word);
                bad |= flaw;
                dst[w] = byte;
                w += 1;
                r = p + 4;
            }
        }
        base += BLOCK;
    }
    if bad != 0 {
        out.truncate(start);
        return Err(first_bad_escape(data));
    }
    if r < n {
        dst[w..w + (n - r)].copy_from_slice(&data[r..]);
        w += n - r;
    }
    out.truncate(start + w);
    Ok(())
}

/// Bytes scanned per backslash bitmask.
const BLOCK: usize = 128;
/// Bytes copied per run, whatever its length: runs longer than this need a
/// second copy, so it is sized for typical terminal text.
const RUN: usize = 64;

/// How many bytes past the data [`unescape_output`] temporarily uses in
/// `out`; callers managing capacity reserve this much extra.
pub(crate) const UNESCAPE_SLACK: usize = RUN;

/// Bit `i` set when `block[i]` is a backslash (`block` is [`BLOCK`] long).
///
/// A 16-lane byte compare and movemask (SSE2 on x86-64, NEON on aarch64,
/// through `wide`), about twice as fast as the 8-byte SWAR test it replaced.
fn backslashes(block: &[u8]) -> u128 {
    let needle = u8x16::splat(b'\\');
    let mut mask = 0u128;
    for (k, lanes) in block.chunks_exact(16).enumerate() {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(lanes);
        let bits = u8x16::from(bytes).simd_eq(needle).to_bitmask();
        mask |= u128::from(bits) << (k * 16);
    }
    mask
}

/// Decodes `\ooo` given as the little-endian word of its four bytes (the
/// backslash is not checked: the caller found it). The second value is
/// nonzero unless the three digits are octal and the first is at most `3`.
fn octal_escape(word: u32) -> (u8, u32) {
    // Subtract '0' from the digit bytes. A byte below '0' borrows from the
    // next one but is itself left with high bits set, so it is still caught;
    // a missing word (0) fails the same way.
    let x = word.wrapping_sub(0x3030_3000);
    let flaw = x & 0xf8f8_fc00;
    let byte = ((x >> 2) & 0xc0) | ((x >> 13) & 0x38) | ((x >> 24) & 0x07);
    // The masks keep `byte` within 8 bits.
    (u8::try_from(byte).unwrap_or(0), flaw)
}

/// The byte written as the three octal digits `a b c`, if they are octal and
/// the value fits in a byte.
fn octal3(a: u8, b: u8, c: u8) -> Option<u8> {
    let digit = |d: u8| (b'0'..=b'7').contains(&d).then(|| d - b'0');
    let (a, b, c) = (digit(a)?, digit(b)?, digit(c)?);
    // `a` above 3 would overflow a byte (`\400` and up); tmux never writes it.
    (a <= 3).then_some((a << 6) | (b << 3) | c)
}

/// Where the first bad escape is (the data is known to hold one).
fn first_bad_escape(data: &[u8]) -> BadEscape {
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &data[at..]) {
        let p = at + i;
        match data.get(p + 1..p + 4) {
            Some(&[a, b, c]) if octal3(a, b, c).is_some() => at = p + 4,
            _ => return BadEscape { offset: p },
        }
    }
    // Unreachable for data the fast path rejected; point past the end.
    BadEscape { offset: data.len() }
}

/// Escapes `data` the way tmux writes `%output` payloads: bytes below `0x20`
/// and `\` as `\ooo`, everything else raw.
pub fn escape_output(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 4);
    for &b in data {
        if b < 0x20 || b == b'\\' {
            out.extend_from_slice(&[
                b'\\',
                b'0' + (b >> 6),
                b'0' + ((b >> 3) & 7),
                b'0' + (b & 7),
            ]);
        } else {
            out.push(b);
        }
    }
    out
}

/// Decodes a `vis(3)`-encoded name as tmux prints session and window names
/// (`VIS_OCTAL | VIS_CSTYLE | VIS_TAB | VIS_NL`, docs/control-mode.md, "Names").
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
            (b"\\134]\\015]", b"\\]\r]"),
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
            // `]` after a backslash trips the SWAR test too; still an error
            // at the backslash.
            (b"\\]00", 0),
            (b"\\]]]]", 0),
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

    /// The obvious decoder, to check the fast one against.
    fn reference(data: &[u8]) -> Result<Vec<u8>, BadEscape> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < data.len() {
            if data[i] != b'\\' {
                out.push(data[i]);
                i += 1;
                continue;
            }
            match data.get(i + 1..i + 4) {
                Some(&[a, b, c]) if octal3(a, b, c).is_some() => {
                    out.extend(octal3(a, b, c));
                    i += 4;
                }
                _ => return Err(BadEscape { offset: i }),
            }
        }
        Ok(out)
    }

    #[test]
    fn fast_path_edges() {
        // Escapes across block boundaries, long runs, escapes at the very end.
        for len in [0usize, 1, 63, 64, 65, 127, 128, 129, 200, 300] {
            for at in [0usize, 1, 60, 62, 63, 64, 124, 125, 126, 127, 128, 129] {
                let mut raw = vec![b'x'; len];
                if at < len {
                    raw[at] = b'\n';
                }
                raw.push(b'\r');
                let escaped = escape_output(&raw);
                assert_eq!(unescape(&escaped), Ok(raw.clone()), "len {len} at {at}");
                let mut bad = escaped.clone();
                bad.push(b'\\');
                assert_eq!(unescape(&bad), reference(&bad), "len {len} at {at}");
            }
        }
    }

    #[test]
    fn failed_unescape_leaves_out_unchanged() {
        let mut out = BytesMut::from(&b"kept"[..]);
        assert!(unescape_output(b"a\\015b\\9", &mut out).is_err());
        assert_eq!(&out[..], b"kept");
    }

    proptest! {
        #[test]
        fn fast_decoder_agrees_with_reference(
            data in proptest::collection::vec(
                prop_oneof![
                    4 => any::<u8>(),
                    2 => Just(b'\\'),
                    3 => b'0'..=b'7',
                ],
                0..400,
            )
        ) {
            prop_assert_eq!(unescape(&data), reference(&data));
        }

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
