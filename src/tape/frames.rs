//! `Output demo.txt` (`.ascii`, `.test`) as VHS writes it (its
//! `testing.go`): after every command the tape runs while shown, the
//! screen's rows, each without its trailing blanks, then a line of 80
//! `─`. A VHS golden text file then compares byte for byte.
//!
//! VHS reads the screen right after a command; here a frame after typing
//! waits until the program has read what was typed and its output has
//! settled, so the same tape gives the same file on a busy machine.

use std::path::Path;
use std::time::Duration;

use crate::fixture::Fixture;
use crate::screen::Screen;

/// VHS's separator: 80 `─` whatever the terminal's width.
const SEPARATOR: &str =
    "────────────────────────────────────────────────────────────────────────────────";
/// How long the screen must stay unchanged, once the program reads again,
/// for a frame after input.
const QUIET: Duration = Duration::from_millis(100);
/// The longest a frame waits to settle: a program that never reads again
/// (it runs on, or waits in a way not seen) gets its frame as it is then.
const SETTLE_BOUND: Duration = Duration::from_secs(3);

/// Whether `path` is a text output (VHS: `.test`, `.ascii`, `.txt`).
pub(crate) fn is_text(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("txt" | "ascii" | "test")
    )
}

/// The frames of a tape's text outputs so far.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    text: String,
}

impl Frames {
    /// Appends `screen` as one frame.
    pub(crate) fn push(&mut self, screen: &Screen) {
        for row in screen.rows() {
            self.text.push_str(row.trim_end());
            self.text.push('\n');
        }
        self.text.push_str(SEPARATOR);
        self.text.push('\n');
    }

    /// Everything pushed, as the file's bytes.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// Waits (at most `SETTLE_BOUND`) until the program has read every byte
/// typed at it and is reading again, and its screen has then been still
/// for `QUIET`. Not settling is no failure: the frame is what is shown.
pub(crate) async fn settle(fx: &Fixture) {
    let Ok(terminal) = fx.terminal() else {
        return;
    };
    let pane = terminal.pid();
    if crate::fixture::tmux_client_in_front(pane) {
        let _ = fx.within(SETTLE_BOUND).wait_for_stable(QUIET).await;
        return;
    }
    let _ = terminal
        .within(SETTLE_BOUND)
        .until_ready("the program to read what was typed", || {
            crate::tmux::reading::blocked_on_input(pane) && unread(pane) == Some(0)
        })
        .await;
    let _ = fx.within(SETTLE_BOUND).wait_for_stable(QUIET).await;
}

/// Bytes typed at the terminal of the pane whose session leader is `pid`
/// that nothing has read yet (`FIONREAD` on its stdin); `None` when it
/// cannot be asked.
fn unread(pid: u32) -> Option<u32> {
    use rustix::fs::{Mode, OFlags};
    let terminal = rustix::fs::open(
        format!("/proc/{pid}/fd/0"),
        OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    rustix::io::ioctl_fionread(&terminal)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_outputs_are_vhs_s_three_extensions() {
        assert!(is_text(Path::new("a/out.txt")));
        assert!(is_text(Path::new("out.ascii")));
        assert!(is_text(Path::new("out.test")));
        assert!(!is_text(Path::new("out.gif")));
        assert!(!is_text(Path::new("out.png")));
        assert_eq!(SEPARATOR.chars().count(), 80);
    }
}
