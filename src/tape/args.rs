//! The arguments of tape commands: `Set` settings, key names (`Ctrl+C`
//! -> tmux's `C-c`), colours and styles of `Expect Style`.

use std::time::Duration;

use regex::Regex;

use super::lex::{Arg, Words, duration};
use crate::Error;
use crate::picture::Theme;
use crate::screen::Color;

/// The attributes `Expect Style` asks for; what is not named is not
/// checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StyleWant {
    /// `fg=NAME`.
    pub fg: Option<Color>,
    /// `bg=NAME`.
    pub bg: Option<Color>,
    /// `bold`, `dim`, `italic`, `underline`, `inverse` (`no-bold` ... for
    /// false), in that order.
    pub flags: [Option<bool>; 5],
}

/// The names of [`StyleWant::flags`].
pub(crate) const FLAGS: [&str; 5] = ["bold", "dim", "italic", "underline", "inverse"];

/// A `Set` command.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub(crate) enum Setting {
    /// `Set Shell bash|sh|"python3 -q"`: the program (default `bash`).
    Shell(String),
    /// `Set FontSize 22` (pixels): the pictures' font.
    FontSize(f32),
    /// `Set Width 1200` (pixels): columns that fit, as VHS sizes its window.
    Width(u32),
    /// `Set Height 600` (pixels): rows that fit.
    Height(u32),
    /// `Set Size 80x24`: columns and rows, directly.
    Size(u16, u16),
    /// `Set Padding 20` (pixels around the picture's cells).
    Padding(u32),
    /// `Set LineHeight 1.2`.
    LineHeight(f32),
    /// `Set Framerate 20`: the GIF's frame cap.
    Framerate(u32),
    /// `Set Theme "Dracula"` or a VHS theme JSON.
    Theme(Theme),
    /// `Set TypingSpeed 50ms`: pause after each typed character.
    TypingSpeed(Duration),
    /// `Set WaitTimeout 10s`: every wait's and expectation's deadline.
    WaitTimeout(Duration),
    /// `Set WaitPattern /regex/`: what a bare `Wait` looks for.
    WaitPattern(Regex),
    /// `Set Flaky true`: `--retries` applies to this tape.
    Flaky(bool),
    /// `Set TypeAhead true`: type at once, without waiting until the
    /// program reads its terminal (a nested tmux, an `epoll` reader).
    TypeAhead(bool),
    /// A VHS setting without effect here (`Set WindowBar Colorful`).
    Cosmetic,
}

/// Why a line was refused.
pub(super) enum Problem {
    Syntax(String),
    Unsupported(String),
}

impl From<String> for Problem {
    fn from(m: String) -> Problem {
        Problem::Syntax(m)
    }
}

/// A tape's regex: `^` and `$` match at each line's ends, as a reader of
/// the screen expects.
pub(super) fn compile(pattern: &str) -> std::result::Result<Regex, String> {
    regex::RegexBuilder::new(pattern)
        .multi_line(true)
        .build()
        .map_err(|e| format!("regex /{pattern}/: {e}"))
}

/// VHS settings that only change how its browser draws the window: taken,
/// and without effect here.
const COSMETIC: &[&str] = &[
    "FontFamily",
    "LetterSpacing",
    "Margin",
    "MarginFill",
    "WindowBar",
    "WindowBarSize",
    "BorderRadius",
    "CursorBlink",
    "PlaybackSpeed",
    "LoopOffset",
];

pub(super) fn style_want(args: &[Arg]) -> std::result::Result<StyleWant, String> {
    let mut want = StyleWant::default();
    for arg in args {
        let word = arg.text();
        if let Some(name) = word.strip_prefix("fg=") {
            want.fg = Some(color(name)?);
        } else if let Some(name) = word.strip_prefix("bg=") {
            want.bg = Some(color(name)?);
        } else {
            let (on, flag) = word
                .strip_prefix("no-")
                .map_or((true, word), |f| (false, f));
            let i = FLAGS.iter().position(|f| *f == flag).ok_or_else(|| {
                format!("unknown style {word:?} (fg=, bg=, {})", FLAGS.join(", "))
            })?;
            want.flags[i] = Some(on);
        }
    }
    Ok(want)
}

/// A colour as `Color::name` writes it (`red`, `bright-blue`, `208`,
/// `#ff8800`, `default`).
fn color(name: &str) -> std::result::Result<Color, String> {
    const NAMES: [&str; 8] = [
        "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
    ];
    let base = |n: &str| NAMES.iter().position(|c| *c == n);
    if name == "default" {
        return Ok(Color::Default);
    }
    if let Some(i) = base(name) {
        return Ok(Color::Indexed(u8::try_from(i).unwrap_or(0)));
    }
    if let Some(i) = name.strip_prefix("bright-").and_then(base) {
        return Ok(Color::Indexed(u8::try_from(i + 8).unwrap_or(8)));
    }
    if let Ok(i) = name.parse::<u8>() {
        return Ok(Color::Indexed(i));
    }
    if let Some(hex) = name.strip_prefix('#')
        && hex.len() == 6
        && let Ok(v) = u32::from_str_radix(hex, 16)
    {
        let [_, r, g, b] = v.to_be_bytes();
        return Ok(Color::Rgb(r, g, b));
    }
    Err(format!(
        "unknown colour {name:?} (red, bright-red, 208, #ff8800)"
    ))
}

pub(super) fn setting(w: &Words) -> std::result::Result<Setting, Problem> {
    let [name, value] = w.args.as_slice() else {
        return Err("write Set NAME VALUE".to_owned().into());
    };
    let (name, text) = (name.text(), value.text());
    let number = |what: &str| -> std::result::Result<f64, String> {
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("Set {what}: bad number {text:?}"))
    };
    let pixels = |what: &str| -> std::result::Result<u32, String> {
        number(what).map(|v| v.min(100_000.0) as u32)
    };
    Ok(match name {
        "Shell" => Setting::Shell(text.to_owned()),
        "FontSize" => Setting::FontSize(number(name)?.min(512.0) as f32),
        "Width" => Setting::Width(pixels(name)?),
        "Height" => Setting::Height(pixels(name)?),
        "Size" => {
            let size: crate::vocab::Size = text.parse().map_err(|e: Error| e.to_string())?;
            Setting::Size(size.cols, size.rows)
        }
        "Padding" => Setting::Padding(text.parse().map_err(|_| format!("bad padding {text:?}"))?),
        "LineHeight" => Setting::LineHeight(number(name)?.min(10.0) as f32),
        "Framerate" => Setting::Framerate(pixels(name)?.min(100)),
        "Theme" => Setting::Theme(Theme::parse(text).map_err(Problem::Syntax)?),
        "TypingSpeed" => Setting::TypingSpeed(duration(text)?),
        "WaitTimeout" => Setting::WaitTimeout(duration(text)?),
        "WaitPattern" => Setting::WaitPattern(compile(text)?),
        "Flaky" => Setting::Flaky(boolean(name, text)?),
        "TypeAhead" => Setting::TypeAhead(boolean(name, text)?),
        _ if COSMETIC.contains(&name) => Setting::Cosmetic,
        _ => {
            return Err(Problem::Unsupported(format!(
                "Set {name}: not a setting tmux-engine knows (see docs/tapes.md)"
            )));
        }
    })
}

fn boolean(name: &str, text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("Set {name}: {text:?} is not true or false")),
    }
}

/// A key command's tmux key name: `Enter`, `Ctrl+C` -> `C-c`,
/// `Alt+Shift+Tab` -> `M-BTab`; `None` for a word that is no key.
pub(super) fn key(name: &str) -> Option<String> {
    let mut parts: Vec<&str> = name.split('+').collect();
    let base = parts.pop()?;
    let mut shift = false;
    let mut prefix = String::new();
    for m in parts {
        match m {
            "Ctrl" => prefix.push_str("C-"),
            "Alt" => prefix.push_str("M-"),
            "Shift" => shift = true,
            _ => return None,
        }
    }
    let chord = !prefix.is_empty() || shift;
    let named = match base {
        "Enter" => "Enter",
        "Backspace" => "BSpace",
        "Tab" if shift => {
            shift = false;
            "BTab"
        }
        "Tab" => "Tab",
        "Space" => "Space",
        "Escape" => "Escape",
        "Up" | "Down" | "Left" | "Right" | "Home" | "End" => base,
        "PageUp" => "PPage",
        "PageDown" => "NPage",
        "Delete" => "DC",
        "Insert" => "IC",
        _ if chord && base.chars().count() == 1 => {
            let c = base.chars().next()?;
            // tmux names a control chord by its lower-case letter.
            let c = if prefix.contains("C-") {
                c.to_ascii_lowercase()
            } else {
                c
            };
            return Some(format!("{prefix}{}{c}", if shift { "S-" } else { "" }));
        }
        _ => return None,
    };
    Some(format!("{prefix}{}{named}", if shift { "S-" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_tmux_names() {
        assert_eq!(key("Enter").as_deref(), Some("Enter"));
        assert_eq!(key("Ctrl+C").as_deref(), Some("C-c"));
        assert_eq!(key("Ctrl+Alt+X").as_deref(), Some("C-M-x"));
        assert_eq!(key("Shift+Tab").as_deref(), Some("BTab"));
        assert_eq!(key("Backspace").as_deref(), Some("BSpace"));
        assert_eq!(key("Alt+Enter").as_deref(), Some("M-Enter"));
        assert_eq!(key("Type"), None);
        assert_eq!(key("Foo+X"), None);
    }
}
