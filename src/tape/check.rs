//! The assertions VHS lacks: `Expect` (screen, line, style, exit status)
//! and `Snapshot` (a golden screen, text and attributes, under
//! `__snapshots__/`). Each waits until it holds, up to its deadline, as a
//! user would look again before calling it broken; a failure says what was
//! expected and what is there.

use std::path::Path;
use std::time::Duration;

use super::args::FLAGS;
use super::parse::{Check, StyleWant};
use crate::Error;
use crate::fixture::Fixture;
use crate::screen::{Attributes, Screen};

/// Why a command failed.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) message: String,
    /// The message already holds the screen (a wait's error does).
    pub(crate) shows_screen: bool,
}

impl Failed {
    pub(crate) fn plain(message: String) -> Failed {
        Failed {
            message,
            shows_screen: false,
        }
    }
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        let shows_screen = matches!(e, Error::WaitTimeout { .. } | Error::WaitEnded { .. });
        Failed {
            message: format!("{}: {e}", e.code().as_str()),
            shows_screen,
        }
    }
}

/// A wait's error as an expectation's failure: `why` when it ran out of
/// time, the reason when the program ended first.
pub(crate) fn missed(e: Error, why: String, timeout: Duration) -> Failed {
    match e {
        Error::WaitTimeout { .. } => Failed::plain(format!("{why} (waited {timeout:?})")),
        Error::WaitEnded { reason, .. } => Failed::plain(format!("{why} ({reason})")),
        other => other.into(),
    }
}

/// Waits until `check` holds.
pub(crate) async fn expect(fx: &Fixture, check: &Check, timeout: Duration) -> Result<(), Failed> {
    let within = fx.within(timeout);
    match check {
        Check::Screen(re) => {
            if let Err(e) = within.wait_for_regex(re).await {
                return Err(missed(e, format!("/{re}/ is not on the screen"), timeout));
            }
        }
        Check::Line(n, re) => {
            let line = |s: &Screen| -> String {
                let rows = i32::from(s.size().rows);
                let index = if *n > 0 { n - 1 } else { rows + n };
                usize::try_from(index)
                    .ok()
                    .and_then(|i| s.row(i))
                    .unwrap_or("")
                    .to_owned()
            };
            if let Err(e) = within.wait_for(|s| re.is_match(&line(s))).await {
                let now = line(&fx.screen_now());
                return Err(missed(
                    e,
                    format!("line {n} is {now:?}, not /{re}/"),
                    timeout,
                ));
            }
        }
        Check::Style(text, want) => {
            if let Err(e) = within.wait_for(|s| styled(s, text, want)).await {
                let found = fx.screen_now().find(text);
                let why = if found.is_empty() {
                    format!("{text:?} is not on the screen")
                } else {
                    format!("{text:?} is not drawn {}: {found}", describe(want))
                };
                return Err(missed(e, why, timeout));
            }
        }
        Check::Tmux => tmux_agrees(fx, timeout).await?,
        Check::Exit(code) => match within.wait_for_exit().await {
            Ok(status) if status.shell_status() == *code => {}
            Ok(status) => {
                return Err(Failed::plain(format!(
                    "the program {status}, not with {code}"
                )));
            }
            Err(e) => return Err(missed(e, "the program did not exit".to_owned(), timeout)),
        },
    }
    Ok(())
}

/// What `Expect Tmux` compares: text, attributes, cursor, screen mode.
/// (Not the cursor's visibility: a capture does not carry it.)
fn compared(screen: &Screen) -> (Vec<String>, Vec<String>, (u16, u16), bool) {
    let cursor = screen.cursor();
    (
        screen.rows().map(str::to_owned).collect(),
        screen.attributed_rows(),
        (cursor.row, cursor.col),
        screen.alternate_screen(),
    )
}

/// Polls until the model and tmux's capture agree. Both follow the same
/// output, so a difference that outlives the deadline is the model's.
async fn tmux_agrees(fx: &Fixture, timeout: Duration) -> Result<(), Failed> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let model = fx.screen_now();
        let real = fx.terminal()?.tmux_screen().await?;
        let (ours, theirs) = (compared(&model), compared(&real));
        if ours == theirs {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let mut diff = Vec::new();
            for (i, (a, b)) in ours.1.iter().zip(&theirs.1).enumerate() {
                if a != b {
                    diff.push(format!("row {}: model {a:?}\n        tmux  {b:?}", i + 1));
                }
            }
            if ours.2 != theirs.2 {
                diff.push(format!("cursor: model {:?}, tmux {:?}", ours.2, theirs.2));
            }
            if ours.3 != theirs.3 {
                diff.push(format!(
                    "alternate screen: model {}, tmux {}",
                    ours.3, theirs.3
                ));
            }
            return Err(Failed::plain(format!(
                "the screen model differs from tmux's capture (waited {timeout:?}):\n{}",
                diff.join("\n")
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True when some place `text` is on the screen is drawn as `want` says.
fn styled(screen: &Screen, text: &str, want: &StyleWant) -> bool {
    screen.find(text).iter().any(|m| m.all(|a| holds(a, want)))
}

fn holds(a: &Attributes, want: &StyleWant) -> bool {
    let flags = [a.bold, a.dim, a.italic, a.underline, a.inverse];
    want.fg.is_none_or(|c| a.fg == c)
        && want.bg.is_none_or(|c| a.bg == c)
        && want
            .flags
            .iter()
            .zip(flags)
            .all(|(w, on)| w.is_none_or(|w| w == on))
}

fn describe(want: &StyleWant) -> String {
    let mut parts = Vec::new();
    if let Some(c) = want.fg {
        parts.push(format!("fg={}", c.name()));
    }
    if let Some(c) = want.bg {
        parts.push(format!("bg={}", c.name()));
    }
    for (w, name) in want.flags.iter().zip(FLAGS) {
        match w {
            Some(true) => parts.push(name.to_owned()),
            Some(false) => parts.push(format!("no-{name}")),
            None => {}
        }
    }
    parts.join(" ")
}

/// The golden files of a snapshot: the text, and the text with attributes.
fn golden(screen: &Screen) -> (String, String) {
    let mut styled = screen.attributed_rows().join("\n");
    styled.push('\n');
    (screen.snapshot(), styled)
}

/// Compares the screen with `dir/NAME.txt` and `dir/NAME.styled.txt`,
/// waiting until it matches; writes them when missing or `update`.
/// Returns a note when it wrote them.
pub(crate) async fn snapshot(
    fx: &Fixture,
    dir: &Path,
    name: &str,
    update: bool,
    timeout: Duration,
) -> Result<Option<String>, Failed> {
    let text_path = dir.join(format!("{name}.txt"));
    let styled_path = dir.join(format!("{name}.styled.txt"));
    let existing = (
        std::fs::read_to_string(&text_path),
        std::fs::read_to_string(&styled_path),
    );
    if let (false, Ok(text), Ok(styled)) = (update, &existing.0, &existing.1) {
        let matches = fx
            .within(timeout)
            .wait_for(|s| golden(s) == (text.clone(), styled.clone()));
        if matches.await.is_ok() {
            return Ok(None);
        }
        let (now, now_styled) = golden(&fx.screen_now());
        let (want, got) = if now == *text {
            (styled.as_str(), now_styled.as_str())
        } else {
            (text.as_str(), now.as_str())
        };
        return Err(Failed {
            message: format!(
                "the screen differs from {} (waited {timeout:?}; `--update` accepts it)\n{}",
                text_path.display(),
                diff(want, got)
            ),
            shows_screen: true,
        });
    }
    // What is written must be a settled screen, not a frame of a redraw.
    fx.within(timeout)
        .wait_for_stable(Duration::from_millis(150))
        .await?;
    let (text, styled) = golden(&fx.screen_now());
    std::fs::create_dir_all(dir)
        .map_err(|e| Failed::plain(format!("creating {}: {e}", dir.display())))?;
    for (path, body) in [(&text_path, text), (&styled_path, styled)] {
        std::fs::write(path, body)
            .map_err(|e| Failed::plain(format!("writing {}: {e}", path.display())))?;
    }
    let verb = if existing.0.is_ok() {
        "updated"
    } else {
        "written"
    };
    Ok(Some(format!("snapshot {} {verb}", text_path.display())))
}

/// A line diff: `-` expected, `+` on the screen, ` ` the same.
fn diff(want: &str, got: &str) -> String {
    let (want, got): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = String::from("--- expected\n+++ on the screen\n");
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) if w == g => out.push_str(&format!(" {w}\n")),
            (w, g) => {
                if let Some(w) = w {
                    out.push_str(&format!("-{w}\n"));
                }
                if let Some(g) = g {
                    out.push_str(&format!("+{g}\n"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::Color;
    use crate::vocab::Size;

    #[test]
    fn style_checks_hold_when_one_match_is_drawn_so() {
        let s = Screen::from_ansi(
            Size { cols: 30, rows: 2 },
            b"echo ERROR\r\n\x1b[1;31mERROR\x1b[0m ok",
        );
        let mut want = StyleWant {
            fg: Some(Color::Indexed(1)),
            ..StyleWant::default()
        };
        want.flags[0] = Some(true);
        assert!(styled(&s, "ERROR", &want));
        want.bg = Some(Color::Indexed(4));
        assert!(!styled(&s, "ERROR", &want));
        assert!(!styled(&s, "absent", &StyleWant::default()));
        assert_eq!(describe(&want), "fg=red bg=blue bold");
    }

    #[test]
    fn diffs_mark_changed_lines() {
        assert_eq!(
            diff("a\nb\n", "a\nc\nd\n"),
            "--- expected\n+++ on the screen\n a\n-b\n+c\n+d\n"
        );
    }
}
