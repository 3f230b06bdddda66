//! The bound on a whole answer: `max_bytes` of its compact JSON (default
//! and ceiling [`MAX_ANSWER_BYTES`]) and `max_lines` of its text. Every
//! face renders the bounded answer, so a 200,000-line `seq` is the same
//! 64 KiB from the CLI's `--json`, the HTTP API and MCP, and nothing is
//! cut without `truncated` saying so (the rest is one cursor away).

use serde::Serialize;

use crate::{Error, Result};

/// Bytes of compact JSON one answer carries at most, and the default: a
/// few screens of output, small enough not to flood a model's context.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The least `max_bytes` a request may give: room for an answer's own
/// fields with a little text.
pub(crate) const MIN_ANSWER_BYTES: usize = 512;

/// How much of an answer a client takes, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    /// Bytes of the answer's compact JSON.
    pub(crate) max_bytes: usize,
    /// Lines of its text (`None`: as many as fit).
    pub(crate) max_lines: Option<usize>,
}

impl Default for Bound {
    fn default() -> Bound {
        Bound {
            max_bytes: MAX_ANSWER_BYTES,
            max_lines: None,
        }
    }
}

impl Bound {
    /// The bound a request's `max_bytes` and `max_lines` describe.
    ///
    /// # Errors
    /// `INVALID_INPUT` for `max_bytes` outside
    /// [`MIN_ANSWER_BYTES`]`..=`[`MAX_ANSWER_BYTES`] or a zero `max_lines`.
    pub(crate) fn new(max_bytes: Option<usize>, max_lines: Option<usize>) -> Result<Bound> {
        let max_bytes = max_bytes.unwrap_or(MAX_ANSWER_BYTES);
        if !(MIN_ANSWER_BYTES..=MAX_ANSWER_BYTES).contains(&max_bytes) {
            return Err(Error::InvalidInput(format!(
                "max_bytes {max_bytes} is outside {MIN_ANSWER_BYTES}..={MAX_ANSWER_BYTES}"
            )));
        }
        if max_lines == Some(0) {
            return Err(Error::InvalidInput(
                "max_lines 0 would return nothing: omit it for as many as fit".to_owned(),
            ));
        }
        Ok(Bound {
            max_bytes,
            max_lines,
        })
    }
}

/// The bytes `value` takes as compact JSON.
pub(crate) fn json_len(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// The bytes `c` takes inside a JSON string, as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if c < ' ' => 6,
        c => c.len_utf8(),
    }
}

/// Cuts the start of `text` until it takes at most `budget` bytes inside
/// a JSON string (at a character boundary); `true` when it cut anything.
pub(crate) fn keep_tail_json(text: &mut String, budget: usize) -> bool {
    let mut used = 0;
    let mut start = text.len();
    for (index, c) in text.char_indices().rev() {
        used += escaped_len(c);
        if used > budget {
            break;
        }
        start = index;
    }
    if start == 0 {
        return false;
    }
    text.drain(..start);
    true
}

/// Keeps the first and the last part of `text` (about half of `budget`
/// each, cut at a line's end when the part holds one) so that it takes at
/// most `budget` bytes inside a JSON string; the bytes cut from between
/// them, or `None` when it fits whole. A long build's first error and its
/// summary both stay.
pub(crate) fn keep_head_tail_json(text: &mut String, budget: usize) -> Option<usize> {
    if text.chars().map(escaped_len).sum::<usize>() <= budget {
        return None;
    }
    let (mut used, mut head_end) = (0, 0);
    for (index, c) in text.char_indices() {
        used += escaped_len(c);
        if used > budget / 2 {
            break;
        }
        head_end = index + c.len_utf8();
    }
    if let Some(newline) = text[..head_end].rfind('\n') {
        head_end = newline + 1;
    }
    let spent: usize = text[..head_end].chars().map(escaped_len).sum();
    let (mut used, mut tail_start) = (0, text.len());
    for (index, c) in text[head_end..].char_indices().rev() {
        used += escaped_len(c);
        if used > budget - spent {
            break;
        }
        tail_start = head_end + index;
    }
    if let Some(newline) = text[tail_start..].find('\n')
        && tail_start + newline + 1 < text.len()
        && !text[..tail_start].ends_with('\n')
    {
        tail_start += newline + 1;
    }
    text.replace_range(head_end..tail_start, "");
    Some(tail_start - head_end)
}

/// Keeps the first half and the last half of `max` lines of `text` (the
/// last line when `max` is 1); the bytes cut from between them, or `None`
/// when it has no more lines.
pub(crate) fn keep_head_tail_lines(text: &mut String, max: usize) -> Option<usize> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.len() <= max {
        return None;
    }
    let head: usize = lines[..max / 2].iter().map(|line| line.len()).sum();
    let tail: usize = lines[lines.len() - (max - max / 2)..]
        .iter()
        .map(|line| line.len())
        .sum();
    let cut = text.len() - head - tail;
    text.replace_range(head..head + cut, "");
    Some(cut)
}

/// Drops the oldest of `lines` until they take at most `budget` bytes as
/// JSON array items (and at most `max_lines` of them), cutting a lone line
/// too long on its own; how many were dropped, and whether anything was
/// cut.
pub(crate) fn keep_tail_lines_json(
    lines: &mut Vec<String>,
    budget: usize,
    max_lines: Option<usize>,
) -> (usize, bool) {
    let mut used = 0;
    let mut keep = 0;
    for line in lines.iter().rev() {
        // The quotes and the comma around each item.
        let next = used + 3 + line.chars().map(escaped_len).sum::<usize>();
        if next > budget || max_lines.is_some_and(|max| keep >= max) {
            break;
        }
        used = next;
        keep += 1;
    }
    let dropped = lines.len() - keep;
    if keep == 0 && !lines.is_empty() {
        // Not even the newest line fits: keep its tail.
        let mut last = lines.pop().unwrap_or_default();
        keep_tail_json(&mut last, budget.saturating_sub(3));
        *lines = vec![last];
        return (dropped - 1, true);
    }
    lines.drain(..dropped);
    (dropped, dropped > 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        assert_eq!(Bound::new(None, None).unwrap(), Bound::default());
        for (bytes, lines) in [
            (Some(MAX_ANSWER_BYTES + 1), None),
            (Some(10), None),
            (None, Some(0)),
        ] {
            let error = Bound::new(bytes, lines).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bytes:?} {lines:?}");
        }
    }

    #[test]
    fn keep_tail_json_counts_escapes() {
        let cases = [
            ("hello", 10, "hello", false),
            ("hello", 3, "llo", true),
            ("a\"b", 2, "b", true),
            ("a\"b", 3, "\"b", true),
            ("aéb", 2, "b", true),
            ("a\u{1b}b", 6, "b", true),
            ("a\u{1b}b", 7, "\u{1b}b", true),
        ];
        for (input, budget, want, cut) in cases {
            let mut text = input.to_owned();
            assert_eq!(keep_tail_json(&mut text, budget), cut, "{input:?} {budget}");
            assert_eq!(text, want, "{input:?} {budget}");
            assert!(json_len(&text) - 2 <= budget, "{input:?} {budget}");
        }
    }

    /// An agent needs a cut output's start and its end (the error is
    /// usually last): the first and the last part stay, within the
    /// budget, and the count of what went between them is exact.
    #[test]
    fn head_and_tail_are_kept() {
        let long: String = (0..10_000).map(|n| format!("{n}\n")).collect();
        for budget in [100, 1000, 4096] {
            let mut text = long.clone();
            let elided = keep_head_tail_json(&mut text, budget).unwrap();
            assert!(text.starts_with("0\n1\n"), "{budget}: {text}");
            assert!(text.ends_with("9999\n"), "{budget}");
            assert!(json_len(&text) - 2 <= budget, "{budget}");
            assert!(
                text.len() * 3 > budget,
                "{budget}: most of the room is used"
            );
            assert_eq!(text.len() + elided, long.len(), "{budget}");
            // Cut between lines: every kept line is whole.
            for line in text.lines() {
                assert!(line.parse::<u32>().is_ok(), "{budget}: {line:?}");
            }
        }
        let mut short = "fits".to_owned();
        assert_eq!(keep_head_tail_json(&mut short, 10), None);
        let mut text = "a\nb\nc\nd\ne\n".to_owned();
        assert_eq!(keep_head_tail_lines(&mut text, 3), Some(4));
        assert_eq!(text, "a\nd\ne\n");
        let mut text = "a\nb\n".to_owned();
        assert_eq!(keep_head_tail_lines(&mut text, 1), Some(2));
        assert_eq!(text, "b\n");
        assert_eq!(keep_head_tail_lines(&mut text, 1), None);
    }

    #[test]
    fn keep_tail_lines_json_fits_the_array() {
        let lines = |all: &[&str]| all.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut got = lines(&["aaa", "bb", "c"]);
        assert_eq!(keep_tail_lines_json(&mut got, 9, None), (1, true));
        assert_eq!(got, lines(&["bb", "c"]));
        let mut got = lines(&["aaa", "bb", "c"]);
        assert_eq!(keep_tail_lines_json(&mut got, 100, Some(1)), (2, true));
        assert_eq!(got, lines(&["c"]));
        let mut got = lines(&["aaa", "bbbbbb"]);
        assert_eq!(keep_tail_lines_json(&mut got, 7, None), (1, true));
        assert_eq!(got, lines(&["bbbb"]));
        let mut got = lines(&["a", "b"]);
        assert_eq!(keep_tail_lines_json(&mut got, 100, None), (0, false));
        assert!(json_len(&got) <= 100);
    }
}
