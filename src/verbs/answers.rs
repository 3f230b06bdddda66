//! The answers of the verbs that have no registry type of their own; the
//! others answer with the registry's values as they are
//! ([`TerminalSnapshot`], [`ReadPage`], [`Screen`], [`SignalDelivery`],
//! [`ProbeReport`]). Every face renders these, so a field has one name.
//!
//! [`TerminalSnapshot`]: crate::registry::TerminalSnapshot
//! [`ReadPage`]: crate::registry::ReadPage
//! [`Screen`]: crate::screen::Screen
//! [`SignalDelivery`]: crate::registry::SignalDelivery
//! [`ProbeReport`]: crate::registry::ProbeReport

use schemars::JsonSchema;
use serde::Serialize;

#[cfg(test)]
use super::bounds::MAX_ANSWER_BYTES;
use super::bounds::{Bound, json_len, keep_last_lines, keep_tail_json, keep_tail_lines_json};
use crate::registry::{ReadPage, SendOutput, SendResult, TerminalStatus, WaitReason};

/// How a send ended, with the output it produced: built here once for
/// every face.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SendAnswer {
    /// The output since the send began, escape sequences stripped.
    pub output: String,
    /// Why the send stopped waiting: `idle`, `stdin_read`, `exited`,
    /// `timeout` or `cancelled`.
    pub wait_reason: WaitReason,
    /// The terminal's status when the send ended.
    pub status: TerminalStatus,
    /// The visible screen when the send ended, only when the request
    /// asked for it (`include_screen: true`): most answers need the output
    /// alone, and the screen repeats it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<String>,
    /// Whether older output was cut to stay within a bound (the engine's
    /// or the request's `max_bytes`/`max_lines`).
    pub truncated: bool,
}

impl SendAnswer {
    /// The answer of a send that ended with `result` after `output`.
    /// The screen is kept when `include_screen`.
    pub fn new(result: SendResult, output: SendOutput, include_screen: bool) -> SendAnswer {
        SendAnswer {
            output: output.text,
            wait_reason: result.wait_reason,
            status: result.status,
            viewport: include_screen.then_some(result.viewport),
            truncated: result.truncated || output.truncated,
        }
    }

    /// The answer cut to `bound`: the newest output kept (then the newest
    /// rows of the screen, when even that does not fit), `truncated` set
    /// when anything went.
    #[must_use]
    pub fn bounded(mut self, bound: Bound) -> SendAnswer {
        if let Some(max) = bound.max_lines {
            self.truncated |= keep_last_lines(&mut self.output, max);
        }
        if json_len(&self) <= bound.max_bytes {
            return self;
        }
        self.truncated = true;
        // The output first, then what room is left for the screen.
        let viewport = self.viewport.as_mut().map(std::mem::take);
        let mut output = std::mem::take(&mut self.output);
        keep_tail_json(&mut output, bound.max_bytes.saturating_sub(json_len(&self)));
        self.output = output;
        if let Some(mut viewport) = viewport {
            keep_tail_json(
                &mut viewport,
                bound.max_bytes.saturating_sub(json_len(&self)),
            );
            self.viewport = Some(viewport);
        }
        self
    }
}

/// A read page cut to `bound`: the oldest lines dropped (its `range`
/// moved past them), `truncated` set when any went.
pub(crate) fn bounded_page(mut page: ReadPage, bound: Bound) -> ReadPage {
    let lines = std::mem::take(&mut page.lines);
    // Room for the fields beside the lines, as they may grow when cut.
    let mut shell = page.clone();
    shell.truncated = true;
    shell.range.start = shell.range.end;
    let budget = bound.max_bytes.saturating_sub(json_len(&shell));
    page.lines = lines;
    let (dropped, cut) = keep_tail_lines_json(&mut page.lines, budget, bound.max_lines);
    page.range.start = page.range.start.saturating_add(dropped).min(page.range.end);
    page.truncated |= cut;
    page
}

/// What `kill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KillAnswer {
    /// `false` when another kill of it was already under way (this one
    /// joined it).
    pub killed: bool,
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WaitAnswer {
    /// The matching line, or the exit status in words.
    pub matched: String,
}

/// What `write` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WriteAnswer {
    /// Bytes written.
    pub written: usize,
}

/// The size after `resize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ResizeAnswer {
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn answer(output: &str, viewport: Option<&str>) -> SendAnswer {
        SendAnswer {
            output: output.to_owned(),
            wait_reason: WaitReason::StdinRead,
            status: TerminalStatus::Running,
            viewport: viewport.map(str::to_owned),
            truncated: false,
        }
    }

    #[test]
    fn a_send_answer_fits_its_bound_whole() {
        let long: String = (0..20_000).map(|n| format!("{n}\n")).collect();
        for viewport in [None, Some("screen \"quoted\"\n".repeat(5000).as_str())] {
            let bound = Bound::new(Some(4096), None).unwrap();
            let cut = answer(&long, viewport).bounded(bound);
            assert!(json_len(&cut) <= 4096, "{}", json_len(&cut));
            assert!(cut.truncated);
            assert!(cut.output.ends_with("19999\n"));
            assert!(cut.output.len() > 1000, "the output keeps most of the room");
        }
        let small = answer("a\nb\nc\n", None);
        assert_eq!(small.clone().bounded(Bound::default()), small);
        let lines = small.bounded(Bound::new(None, Some(2)).unwrap());
        assert_eq!((lines.output.as_str(), lines.truncated), ("b\nc\n", true));
    }

    #[test]
    fn a_page_fits_its_bound_whole() {
        let lines: Vec<String> = (0..10_000).map(|n| format!("line {n}")).collect();
        let page = ReadPage {
            lines,
            total_lines: 10_000,
            range: 0..10_000,
            truncated: false,
        };
        let cut = bounded_page(page.clone(), Bound::new(Some(2048), None).unwrap());
        assert!(json_len(&cut) <= 2048, "{}", json_len(&cut));
        assert!(cut.truncated);
        assert_eq!(cut.lines.last().unwrap(), "line 9999");
        assert_eq!(cut.range.end - cut.range.start, cut.lines.len());
        assert_eq!(cut.lines[0], format!("line {}", cut.range.start));
        let whole = bounded_page(page, Bound::new(Some(MAX_ANSWER_BYTES), Some(10)).unwrap());
        assert_eq!(whole.range, 9_990..10_000);
    }
}
