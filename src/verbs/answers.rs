//! The answers of the verbs that have no registry type of their own; the
//! others answer with the registry's values as they are
//! ([`TerminalSnapshot`], [`ReadPage`], [`Screen`], [`SignalDelivery`],
//! [`ProbeReport`]), a send's cut to the request's bound here
//! ([`SendAnswer`]). Every face renders these, so a field has one name.
//!
//! [`SendAnswer`]: crate::registry::SendAnswer
//! [`TerminalSnapshot`]: crate::registry::TerminalSnapshot
//! [`ReadPage`]: crate::registry::ReadPage
//! [`Screen`]: crate::screen::Screen
//! [`SignalDelivery`]: crate::registry::SignalDelivery
//! [`ProbeReport`]: crate::registry::ProbeReport

use schemars::JsonSchema;
use serde::Serialize;

#[cfg(test)]
use super::bounds::MAX_ANSWER_BYTES;
use super::bounds::{
    Bound, json_len, keep_head_tail_json, keep_head_tail_lines, keep_tail_json,
    keep_tail_lines_json,
};
use crate::registry::{CursorGap, OutputCursor, ReadPage, SendAnswer, TerminalSnapshot};
use crate::shell::marks::ShellIntegration;

impl SendAnswer {
    /// The answer cut to `bound`: the first and the last part of the
    /// output kept (`elided_bytes` and its cursors say what went between),
    /// then the newest rows of the screen, `truncated` set when anything
    /// went.
    #[must_use]
    pub(crate) fn bounded(mut self, bound: Bound) -> SendAnswer {
        let mut elided = 0;
        if let Some(max) = bound.max_lines
            && let Some(cut) = keep_head_tail_lines(&mut self.output, max)
        {
            elided += cut;
            self.elide(elided);
        }
        if json_len(&self) <= bound.max_bytes {
            return self;
        }
        self.truncated = true;
        // The command list gets at most a quarter (the newest kept), the
        // output what is left, then the screen what room remains.
        while self.commands.len() > 1 && json_len(&self.commands) > bound.max_bytes / 4 {
            let half = self.commands.len() / 2;
            self.commands.drain(..half);
        }
        let viewport = self.viewport.as_mut().map(std::mem::take);
        let screen = self.screen.as_mut().map(std::mem::take);
        let mut output = std::mem::take(&mut self.output);
        // Room for the elided fields at their widest (the count only shrinks).
        self.elide(elided + output.len());
        let room = bound.max_bytes.saturating_sub(json_len(&self));
        let cut = keep_head_tail_json(&mut output, room).unwrap_or(0);
        self.elide(elided + cut);
        self.output = output;
        if let Some(mut screen) = screen {
            keep_tail_json(&mut screen, bound.max_bytes.saturating_sub(json_len(&self)));
            self.screen = Some(screen);
        }
        if let Some(mut viewport) = viewport {
            keep_tail_json(
                &mut viewport,
                bound.max_bytes.saturating_sub(json_len(&self)),
            );
            self.viewport = Some(viewport);
        }
        self
    }

    /// Says `bytes` of output were cut from the middle (none: nothing
    /// was), with the cursors around them.
    fn elide(&mut self, bytes: usize) {
        let some = bytes > 0;
        self.truncated |= some;
        self.elided_bytes = some.then_some(bytes);
        self.elided_from = self.start_cursor.clone().filter(|_| some);
        self.elided_to = self.cursor.clone().filter(|_| some);
    }
}

/// A read page cut to `bound`: the oldest lines dropped (its `range`
/// moved past them), `truncated` set when any went.
/// `room` bytes are left for fields the answer adds beside the page.
pub(crate) fn bounded_page(mut page: ReadPage, bound: Bound, room: usize) -> ReadPage {
    let lines = std::mem::take(&mut page.lines);
    // Room for the fields beside the lines, as they may grow when cut.
    let mut shell = page.clone();
    shell.truncated = true;
    shell.range.start = shell.range.end;
    let budget = bound.max_bytes.saturating_sub(json_len(&shell) + room);
    page.lines = lines;
    let (dropped, cut) = keep_tail_lines_json(&mut page.lines, budget, bound.max_lines);
    page.range.start = page.range.start.saturating_add(dropped).min(page.range.end);
    page.truncated |= cut;
    page
}

/// What `read` returns: a page counted back from the newest line
/// (`lines`, `total_lines`, `range`), or with `since`, the output after a
/// cursor (`lines`, `text` or `bytes` as `format` says, and `more`). Both
/// give `next_cursor`, where a `read since` goes on from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReadAnswer {
    /// The lines, oldest first, escape sequences stripped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<String>>,
    /// `format: text`: the output as one string, escape sequences stripped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `format: bytes`: the output exactly as written, standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    /// A page: how many lines the terminal retains in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// A page: which lines these are, as indexes from the oldest retained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<std::ops::Range<usize>>,
    /// Whether the answer lacks something: lines cut from a page, or, with
    /// `since`, output before `resumed_at` (see `gap`) or after
    /// `next_cursor` (see `more`).
    pub truncated: bool,
    /// The cursor to read on from with `since` (absent from a terminal
    /// that keeps no cursors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With `since`, past a gap: where the answer starts instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<String>,
    /// With `since`: why the answer does not start at the cursor given
    /// (`evicted`: the output ring no longer holds it; `stale`: the
    /// cursor is of an earlier engine run or an earlier terminal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<CursorGap>,
    /// With `since`: whether more output follows `next_cursor` already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<bool>,
    /// Whether this call brought a dead `on-attach` terminal back first
    /// (its kept history restored, its `resume_command` typed), as an
    /// attach does; absent when it did not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recreated: bool,
}

impl ReadAnswer {
    /// A page's answer, going on at `next` (the end of the output).
    pub fn page(page: ReadPage, next: Option<OutputCursor>) -> ReadAnswer {
        ReadAnswer {
            lines: Some(page.lines),
            text: None,
            bytes: None,
            total_lines: Some(page.total_lines),
            range: Some(page.range),
            truncated: page.truncated,
            next_cursor: next.map(|cursor| cursor.to_string()),
            resumed_at: None,
            gap: None,
            more: None,
            recreated: false,
        }
    }

    /// The bytes `next_cursor` adds to the answer's JSON.
    pub(crate) fn cursor_len(&self) -> usize {
        let mut without = self.clone();
        without.next_cursor = None;
        json_len(self) - json_len(&without)
    }
}

/// What `show` answers: the terminal's snapshot and whether its shell
/// integration works.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct ShowAnswer {
    /// The snapshot, as `list` gives it.
    #[serde(flatten)]
    pub(crate) snapshot: TerminalSnapshot,
    /// The interactive shell it runs (its spawn's `SHELL`, else the
    /// engine's): absent for a command, a shell line, or a terminal whose
    /// program ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shell: Option<String>,
    /// Whether sends get exit codes from the shell's marks: `active`,
    /// `lost` (the marks stopped: its rc or a command replaced
    /// `PROMPT_COMMAND`/`PS1` later), `never_started` (no integrated
    /// shell, or its rc replaced the engine's) or `unknown` (no mark seen
    /// yet since the engine linked to it); absent once its program ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shell_integration: Option<ShellIntegration>,
}

/// What `kill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KillAnswer {
    /// `false` when another kill of it was already under way (this one
    /// joined it).
    pub killed: bool,
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WaitAnswer {
    /// The matching line, the exit status in words, or (a wait for a
    /// command) the command line as the shell echoed it.
    pub matched: String,
    /// A wait for a command: its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A wait for a command: its exit status from the shell's end mark
    /// (`null` when the shell gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A wait for a command: seconds from its start to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// A wait for a command: its output, escape sequences stripped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Whether this call brought a dead `on-attach` terminal back first
    /// (its kept history restored, its `resume_command` typed), as an
    /// attach does; absent when it did not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recreated: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::{ExitCodeSource, TerminalStatus, WaitReason};

    fn answer(output: &str, viewport: Option<&str>) -> SendAnswer {
        SendAnswer {
            output: output.to_owned(),
            exit_code: None,
            exit_code_source: ExitCodeSource::None,
            duration_secs: None,
            wait_reason: WaitReason::StdinRead,
            foreground_command: None,
            screen: None,
            typed: true,
            not_typed_reason: None,
            commands: Vec::new(),
            status: TerminalStatus::Running,
            viewport: viewport.map(str::to_owned),
            truncated: false,
            elided_bytes: None,
            elided_from: None,
            elided_to: None,
            cursor: Some("0123456789abcdef:123456".to_owned()),
            start_cursor: Some("0123456789abcdef:0".to_owned()),
            recreated: false,
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
            assert!(cut.output.starts_with("0\n1\n"), "the head stays too");
            assert!(cut.output.len() > 1000, "the output keeps most of the room");
            assert_eq!(cut.output.len() + cut.elided_bytes.unwrap(), long.len());
            assert_eq!(cut.elided_from, cut.start_cursor);
            assert_eq!(cut.elided_to, cut.cursor);
        }
        let small = answer("a\nb\nc\n", None);
        assert_eq!(small.clone().bounded(Bound::default()), small);
        let lines = small.bounded(Bound::new(None, Some(2)).unwrap());
        assert_eq!((lines.output.as_str(), lines.truncated), ("a\nc\n", true));
        assert_eq!(lines.elided_bytes, Some(2));
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
        let cut = bounded_page(page.clone(), Bound::new(Some(2048), None).unwrap(), 0);
        assert!(json_len(&cut) <= 2048, "{}", json_len(&cut));
        assert!(cut.truncated);
        assert_eq!(cut.lines.last().unwrap(), "line 9999");
        assert_eq!(cut.range.end - cut.range.start, cut.lines.len());
        assert_eq!(cut.lines[0], format!("line {}", cut.range.start));
        let whole = bounded_page(
            page,
            Bound::new(Some(MAX_ANSWER_BYTES), Some(10)).unwrap(),
            0,
        );
        assert_eq!(whole.range, 9_990..10_000);
    }
}
