//! `read since`: the output after a cursor, oldest first, cut to the
//! answer's bound at a line end, with the cursor where it stopped, so
//! reading on from `next_cursor` reaches every byte the ring still holds.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::answers::ReadAnswer;
use super::bounds::{Bound, json_len, keep_tail_json};
use super::requests::ReadFormat;
use crate::registry::{OutputCursor, OutputSince, strip_escapes};

/// The answer for `output` (read from a cursor, ending at `end` when that
/// was known apart from it), cut to `bound`.
pub(crate) fn since_answer(output: &OutputSince, format: ReadFormat, bound: Bound) -> ReadAnswer {
    let end = output.end();
    let mut answer = ReadAnswer {
        lines: None,
        text: None,
        bytes: None,
        total_lines: None,
        range: None,
        truncated: true,
        next_cursor: Some(end.to_string()),
        resumed_at: output.gap.map(|_| output.from.to_string()),
        gap: output.gap,
        more: Some(true),
        recreated: false,
    };
    match format {
        ReadFormat::Lines => answer.lines = Some(Vec::new()),
        ReadFormat::Text => answer.text = Some(String::new()),
        ReadFormat::Bytes => answer.bytes = Some(String::new()),
    }
    // Room for the fields beside the output, at their largest.
    let budget = bound.max_bytes.saturating_sub(json_len(&answer));
    let bytes = &output.bytes[..];
    let taken = match format {
        ReadFormat::Bytes => {
            let fit = (budget / 4 * 3).min(bytes.len());
            answer.bytes = Some(STANDARD.encode(&bytes[..fit]));
            fit
        }
        ReadFormat::Lines | ReadFormat::Text => {
            let (taken, pieces) = take_lines(bytes, format, budget, bound.max_lines);
            match format {
                ReadFormat::Lines => answer.lines = Some(pieces),
                _ => answer.text = Some(pieces.concat()),
            }
            taken
        }
    };
    let more = taken < bytes.len();
    answer.more = Some(more);
    answer.truncated = more || output.gap.is_some();
    answer.next_cursor = Some(
        OutputCursor {
            epoch: output.from.epoch,
            offset: output.from.offset + taken as u64,
        }
        .to_string(),
    );
    debug_assert!(end.offset >= output.from.offset);
    answer
}

/// Whole lines of `bytes` from its start, stripped, while they fit in
/// `budget` (as JSON array items or one string) and `max_lines`: how many
/// bytes they took, and the pieces (lines without their newline, or text
/// with it). A first line too long for the budget on its own is cut, so a
/// read always moves on.
fn take_lines(
    bytes: &[u8],
    format: ReadFormat,
    budget: usize,
    max_lines: Option<usize>,
) -> (usize, Vec<String>) {
    let mut taken = 0;
    let mut used = 0;
    let mut pieces = Vec::new();
    for raw in bytes.split_inclusive(|&b| b == b'\n') {
        if max_lines.is_some_and(|max| pieces.len() >= max) {
            break;
        }
        // As the terminal shows the line (`\r` progress, backspaces).
        let mut piece = crate::screen::render::render(raw);
        if format == ReadFormat::Lines && piece.ends_with('\n') {
            piece.pop();
        }
        // Quotes and a comma around an array item; none in one string.
        let around = if format == ReadFormat::Lines { 3 } else { 0 };
        let cost = json_len(&piece) - 2 + around;
        if used + cost > budget {
            if pieces.is_empty() {
                // Not even one line fits: its head, by raw bytes.
                let mut cut = budget.saturating_sub(around).min(raw.len()) / 6;
                cut = cut.max(1).min(raw.len());
                let mut head = strip_escapes(&raw[..cut]);
                keep_tail_json(&mut head, budget.saturating_sub(around));
                return (cut, vec![head]);
            }
            break;
        }
        used += cost;
        taken += raw.len();
        pieces.push(piece);
    }
    (taken, pieces)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::registry::CursorGap;

    fn since(bytes: &'static [u8], offset: u64, gap: Option<CursorGap>) -> OutputSince {
        OutputSince {
            bytes: Bytes::from_static(bytes),
            from: OutputCursor { epoch: 7, offset },
            gap,
        }
    }

    #[test]
    fn everything_that_fits_is_returned_whole() {
        let output = since(b"a\r\n\x1b[31mb\x1b[0m\r\n$ ", 10, None);
        let answer = since_answer(&output, ReadFormat::Lines, Bound::default());
        assert_eq!(answer.lines.unwrap(), ["a", "b", "$ "]);
        assert_eq!(answer.next_cursor.unwrap(), output.end().to_string());
        assert_eq!((answer.truncated, answer.more), (false, Some(false)));
        let text = since_answer(&output, ReadFormat::Text, Bound::default());
        assert_eq!(text.text.unwrap(), "a\nb\n$ ");
        let raw = since_answer(&output, ReadFormat::Bytes, Bound::default());
        assert_eq!(
            STANDARD.decode(raw.bytes.unwrap()).unwrap(),
            &output.bytes[..]
        );
    }

    #[test]
    fn reading_on_from_next_cursor_reaches_every_line() {
        let all: String = (1..=5000).map(|n| format!("{n}\r\n")).collect();
        let all: &'static [u8] = Box::leak(all.into_bytes().into_boxed_slice());
        let bound = Bound::new(Some(1024), None).unwrap();
        let mut offset = 0;
        let mut seen = Vec::new();
        while offset < all.len() as u64 {
            let start = usize::try_from(offset).unwrap();
            let output = OutputSince {
                bytes: Bytes::from_static(&all[start..]),
                from: OutputCursor { epoch: 7, offset },
                gap: None,
            };
            let answer = since_answer(&output, ReadFormat::Lines, bound);
            assert!(json_len(&answer) <= 1024, "{}", json_len(&answer));
            let next: OutputCursor = answer.next_cursor.unwrap().parse().unwrap();
            assert!(next.offset > offset);
            offset = next.offset;
            seen.extend(answer.lines.unwrap());
        }
        let want: Vec<String> = (1..=5000).map(|n| n.to_string()).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_gap_is_typed_and_a_long_line_still_moves_on() {
        let output = since(b"abc\n", 0, Some(CursorGap::Stale));
        let answer = since_answer(&output, ReadFormat::Lines, Bound::default());
        assert_eq!(answer.gap, Some(CursorGap::Stale));
        assert_eq!(answer.resumed_at.unwrap(), "0000000000000007:0");
        assert!(answer.truncated);
        let long = since(Box::leak(vec![b'x'; 5000].into_boxed_slice()), 0, None);
        let bound = Bound::new(Some(512), None).unwrap();
        let answer = since_answer(&long, ReadFormat::Lines, bound);
        assert!(json_len(&answer) <= 512);
        let next: OutputCursor = answer.next_cursor.unwrap().parse().unwrap();
        assert!(next.offset > 0 && answer.more == Some(true));
    }
}
