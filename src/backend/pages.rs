//! Reading what a pane shows: pages of scrollback and the visible screen,
//! through `capture-pane -p` (plain text, no escapes) on the exact pane.
//!
//! Lines are counted from the oldest retained history line (index 0) to the
//! last non-blank screen row (the cursor row on a blank screen). Blank rows
//! below it are not lines yet, so "the newest line" is what was printed
//! last, not the bottom of an empty screen or the empty row under the
//! cursor after a final newline.

use super::link::ServerLink;
use crate::control::snapshot::capture_snapshot;
use crate::registry::seam::{ReadPage, ReadRequest, Screen};
use crate::tmux::command::TmuxCommand;
use crate::{Error, Result};

/// Lines a read returns when the caller names no count.
const DEFAULT_PAGE: usize = 100;
/// The most lines one read returns; more is cut (`truncated`).
const MAX_PAGE: usize = 10_000;

/// Geometry and history of a pane.
pub(super) struct Geometry {
    history: usize,
    /// Column and row of the cursor.
    pub(super) cursor: (u16, u16),
}

pub(super) async fn geometry(shared: &ServerLink) -> Result<Geometry> {
    let format = "#{history_size} #{cursor_x} #{cursor_y}";
    let command = TmuxCommand::new("list-panes")
        .target(shared.pane)
        .opt("-F", format);
    let reply = shared.command(&command).await?;
    let text = reply.text();
    let numbers: Vec<u64> = text
        .split_ascii_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    let small = |n: u64| u16::try_from(n).unwrap_or(u16::MAX);
    match numbers[..] {
        [history, x, y] => Ok(Geometry {
            history: usize::try_from(history).unwrap_or(usize::MAX),
            cursor: (small(x), small(y)),
        }),
        _ => Err(Error::Command {
            command: command.line().to_owned(),
            message: format!("unexpected answer {text:?}"),
        }),
    }
}

/// `capture-pane -p` of tmux lines `start..=end` (negative: history).
async fn capture(shared: &ServerLink, range: Option<(i64, i64)>) -> Result<Vec<String>> {
    let mut command = TmuxCommand::new("capture-pane")
        .flag("-p")
        .target(shared.pane);
    if let Some((start, end)) = range {
        command = command
            .opt("-S", start.to_string())
            .opt("-E", end.to_string());
    }
    let reply = shared.command(&command).await?;
    Ok(reply
        .lines
        .iter()
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect())
}

/// The visible screen with attributes and cursor, as tmux holds it
/// (`capture-pane -e`, drawn into an emulator of the pane's size).
pub(super) async fn screen(shared: &ServerLink) -> Result<Screen> {
    let snapshot = capture_snapshot(&shared.client, shared.pane, 0).await?;
    Ok(Screen::from_snapshot(&snapshot))
}

/// The screen as one string, trailing blank lines dropped (a send's
/// viewport).
pub(super) async fn viewport(shared: &ServerLink) -> Result<String> {
    let mut lines = capture(shared, None).await?;
    while lines.last().is_some_and(|line| line.trim_end().is_empty()) {
        lines.pop();
    }
    Ok(lines.join("\n"))
}

/// One page of scrollback counted from the newest line; offsets and counts
/// of any size clamp to what exists.
pub(super) async fn read(shared: &ServerLink, request: ReadRequest) -> Result<ReadPage> {
    let (geometry, screen) = tokio::try_join!(geometry(shared), capture(shared, None))?;
    let last_used = screen
        .iter()
        .rposition(|line| !line.trim_end().is_empty())
        .unwrap_or(usize::from(geometry.cursor.1));
    let total = geometry.history + last_used + 1;
    let wanted = request.count.unwrap_or(DEFAULT_PAGE);
    let count = wanted.min(MAX_PAGE);
    let end = total.saturating_sub(request.offset);
    let start = end.saturating_sub(count);
    let truncated = wanted > count && start > 0;
    if start == end {
        return Ok(ReadPage {
            lines: Vec::new(),
            total_lines: total,
            range: start..end,
            truncated,
        });
    }
    // tmux numbers the first screen row 0 and history rows negatively.
    let history = i64::try_from(geometry.history).unwrap_or(i64::MAX);
    let to_tmux = |index: usize| i64::try_from(index).unwrap_or(i64::MAX) - history;
    let mut lines = capture(shared, Some((to_tmux(start), to_tmux(end - 1)))).await?;
    // Output may have scrolled between the two commands; keep the page
    // size what the range says.
    lines.truncate(end - start);
    Ok(ReadPage {
        lines,
        total_lines: total,
        range: start..end,
        truncated,
    })
}
