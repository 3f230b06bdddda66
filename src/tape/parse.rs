//! A tape file to its commands, each with the file and line it came from.
//! VHS's commands where they make sense for a terminal test (see
//! `docs/tapes.md`), its cosmetic settings accepted and ignored, and the
//! assertions VHS lacks. What the runner cannot do fails here, naming the
//! command and its line, before anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

use super::args::{Problem, compile, key, setting, style_want};
pub(crate) use super::args::{Setting, StyleWant};
use super::lex::{Arg, Words, commands, duration};
use crate::picture::Theme;
use crate::{Error, Result};

/// How deep `Source` may nest (a tape sourcing itself ends here).
const MAX_SOURCE_DEPTH: usize = 8;

/// Where a command was written: `demo.tape:12`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The tape file (a `Source`d file for its commands).
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One command of a tape and where it is.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// The file and line.
    pub at: Location,
    /// The line as written, for messages.
    pub source: String,
    /// What to do.
    pub command: Command,
}

/// A tape command.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub(crate) enum Command {
    /// `Output demo.gif|demo.png|demo.txt|demo.ascii|demo.test|demo.cast`:
    /// written when the tape ends (a text output holds a frame after
    /// every command shown, as VHS's).
    Output(PathBuf),
    /// `Set NAME VALUE`.
    Set(Setting),
    /// `Env KEY "value"`: the program's environment.
    Env(String, String),
    /// `Require PROGRAM`: fails unless it is on `PATH`.
    Require(String),
    /// `Type[@speed] "text"`.
    Type {
        /// The text, typed as is.
        text: String,
        /// The pause after each character (`None`: the tape's
        /// `TypingSpeed`, whose default sends the text at once).
        speed: Option<Duration>,
    },
    /// `Enter`, `Ctrl+C`, `Up 3`, `Backspace@100ms 5`: keys by tmux name.
    Key {
        /// The tmux key name (`Enter`, `C-c`, `BSpace`).
        key: String,
        /// How many times.
        count: u32,
        /// The pause between presses.
        speed: Option<Duration>,
    },
    /// `Sleep 500ms`: the tape's own explicit pause.
    Sleep(Duration),
    /// `Wait[+Screen|+Line][@timeout] [/regex/]`, `Wait Stable 200ms`.
    Wait {
        /// What is waited for.
        until: WaitFor,
        /// The deadline (`None`: the tape's `WaitTimeout`).
        timeout: Option<Duration>,
    },
    /// `Hide`: frames from here are left out of `Output` pictures.
    Hide,
    /// `Show`: frames are recorded again.
    Show,
    /// `Screenshot file.png` (or `.txt`): the screen now.
    Screenshot(PathBuf),
    /// `Copy "text"`: the clipboard `Paste` types.
    Copy(String),
    /// `Paste`: types the clipboard.
    Paste,
    /// `Expect[@timeout] ...`: waits until it holds, or fails the tape.
    Expect {
        /// What must hold.
        check: Check,
        /// The deadline (`None`: the tape's `WaitTimeout`).
        timeout: Option<Duration>,
    },
    /// `Snapshot NAME`: the screen against `__snapshots__/NAME.txt`.
    Snapshot(String),
}

/// What a `Wait` waits for.
#[derive(Clone, Debug)]
pub(crate) enum WaitFor {
    /// A match anywhere on the screen (`Wait+Screen`).
    Screen(Option<Regex>),
    /// A match on the cursor's line (`Wait`, `Wait+Line`); `None`: the
    /// tape's `WaitPattern`.
    Line(Option<Regex>),
    /// No output for this long (`Wait Stable 200ms`).
    Stable(Duration),
}

/// What an `Expect` checks.
#[derive(Clone, Debug)]
pub(crate) enum Check {
    /// `Expect /regex/`: on the screen.
    Screen(Regex),
    /// `Expect Line N /regex/`: on row N (1 is the top, -1 the bottom).
    Line(i32, Regex),
    /// `Expect Style "text" fg=red bold`: the text is on screen drawn so.
    Style(String, StyleWant),
    /// `Expect Exit 0`: the program exited with this status.
    Exit(i32),
    /// `Expect Tmux`: the screen model shows what tmux's own capture of
    /// the pane shows (text, attributes, cursor, mode).
    Tmux,
}

/// A parsed tape.
#[derive(Clone, Debug)]
pub struct Tape {
    /// The file it was read from.
    pub path: PathBuf,
    /// Its commands, `Source`d files expanded in place.
    pub(crate) steps: Vec<Step>,
}

impl Tape {
    /// Reads and parses a tape file.
    ///
    /// # Errors
    /// `IO` when it cannot be read; `SYNTAX_ERROR` for a malformed line
    /// and `UNSUPPORTED` for a command this runner does not do, both
    /// starting with `file:line:`.
    pub fn read(path: &Path) -> Result<Tape> {
        let mut steps = Vec::new();
        read_into(path, 0, &mut steps)?;
        Ok(Tape {
            path: path.to_owned(),
            steps,
        })
    }

    /// Parses tape text as if read from `path` (which need not exist
    /// unless the text `Source`s a file).
    ///
    /// # Errors
    /// As [`Tape::read`].
    pub fn parse(path: &Path, text: &str) -> Result<Tape> {
        let mut steps = Vec::new();
        parse_into(path, text, 0, &mut steps)?;
        Ok(Tape {
            path: path.to_owned(),
            steps,
        })
    }

    /// How many commands it runs, `Source`d files expanded.
    pub fn step_count(&self) -> usize {
        self.steps.len()
    }

    /// Whether it is marked `Set Flaky true` (`--retries` applies to it).
    pub fn flaky(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.command, Command::Set(Setting::Flaky(true))))
    }

    /// The tape's name: its file stem.
    pub fn name(&self) -> String {
        self.path
            .file_stem()
            .map_or_else(|| "tape".to_owned(), |s| s.to_string_lossy().into_owned())
    }
}

fn read_into(path: &Path, depth: usize, steps: &mut Vec<Step>) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading tape {}", path.display()), e))?;
    parse_into(path, &text, depth, steps)
}

fn parse_into(path: &Path, text: &str, depth: usize, steps: &mut Vec<Step>) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for (i, raw) in text.lines().enumerate() {
        let at = Location {
            file: path.to_owned(),
            line: i + 1,
        };
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // VHS writes a theme's JSON bare: `Set Theme { "name": ... }`.
        if let Some(json) = line
            .strip_prefix("Set Theme ")
            .map(str::trim_start)
            .filter(|rest| rest.starts_with('{'))
        {
            let theme = Theme::parse(json).map_err(|m| {
                let m = if depth > 0 {
                    "not a theme (a Source'd file's text is never shown)".to_owned()
                } else {
                    m
                };
                Error::SyntaxError(format!("{at}: Set Theme: {m}"))
            })?;
            steps.push(Step {
                at,
                source: line.to_owned(),
                command: Command::Set(Setting::Theme(theme)),
            });
            continue;
        }
        // A `Source`d file may be no tape at all (`Source /etc/shadow`):
        // its errors name the line, never its text.
        let shown = |m: String| {
            if depth > 0 {
                "not a tape line (a Source'd file's text is never shown)".to_owned()
            } else {
                m
            }
        };
        let commands =
            commands(line).map_err(|m| Error::SyntaxError(format!("{at}: {}", shown(m))))?;
        for (source, words) in commands {
            if words.command == "Source" {
                let file =
                    one_text(&words).map_err(|m| Error::SyntaxError(format!("{at}: {m}")))?;
                if depth >= MAX_SOURCE_DEPTH {
                    return Err(Error::SyntaxError(format!(
                        "{at}: Source nested deeper than {MAX_SOURCE_DEPTH} (a tape sourcing itself?)"
                    )));
                }
                read_into(&dir.join(file), depth + 1, steps)
                    .map_err(|e| Error::SyntaxError(format!("{at}: in Source {file}: {e}")))?;
                continue;
            }
            let command = command(&words, dir).map_err(|e| match e {
                Problem::Syntax(m) if depth > 0 => {
                    Error::SyntaxError(format!("{at}: {}", shown(m)))
                }
                Problem::Syntax(m) => Error::SyntaxError(format!("{at}: {}: {m}", words.command)),
                Problem::Unsupported(m) => Error::Unsupported(format!("{at}: {}", shown(m))),
            })?;
            steps.push(Step {
                at: at.clone(),
                source,
                command,
            });
        }
    }
    Ok(())
}

fn command(w: &Words, dir: &Path) -> std::result::Result<Command, Problem> {
    let name = w.command.as_str();
    Ok(match name {
        "Output" => {
            let file = dir.join(one_text(w)?);
            let ext = extension(&file);
            if !matches!(
                ext.as_str(),
                "gif" | "png" | "txt" | "ascii" | "test" | "cast"
            ) {
                return Err(Problem::Unsupported(format!(
                    "Output {}: .{ext} is not supported (gif, png, txt, ascii, test and cast are)",
                    file.display()
                )));
            }
            Command::Output(file)
        }
        "Set" => Command::Set(setting(w)?),
        "Env" => match w.args.as_slice() {
            [key, value] => Command::Env(key.text().to_owned(), value.text().to_owned()),
            _ => return Err("write Env KEY \"value\"".to_owned().into()),
        },
        "Require" => Command::Require(one_text(w)?.to_owned()),
        "Type" => Command::Type {
            text: strings(w)?,
            speed: w.at,
        },
        "Sleep" => match w.args.as_slice() {
            [Arg::Word(d)] => Command::Sleep(duration(d)?),
            _ => return Err("write Sleep 500ms".to_owned().into()),
        },
        "Wait" => wait(w)?,
        "Hide" => Command::Hide,
        "Show" => Command::Show,
        "Screenshot" => {
            let file = dir.join(one_text(w)?);
            if !matches!(extension(&file).as_str(), "png" | "txt") {
                return Err(format!("{} is not a .png or .txt file", file.display()).into());
            }
            Command::Screenshot(file)
        }
        "Copy" => Command::Copy(strings(w)?),
        "Paste" => Command::Paste,
        "Expect" => Command::Expect {
            check: check(w)?,
            timeout: w.at,
        },
        "Snapshot" => {
            let snap = one_text(w)?;
            if snap.is_empty() || snap.contains(['/', '\\']) || snap.starts_with('.') {
                return Err(format!("{snap:?} is not a plain file name").into());
            }
            Command::Snapshot(snap.to_owned())
        }
        _ => match key(name) {
            Some(key) => {
                let count = match w.args.as_slice() {
                    [] => 1,
                    [Arg::Word(n)] => n
                        .parse()
                        .ok()
                        .filter(|&n: &u32| (1..=10_000).contains(&n))
                        .ok_or_else(|| format!("bad count {n:?}"))?,
                    _ => return Err(format!("write {name} or {name} 3").into()),
                };
                Command::Key {
                    key,
                    count,
                    speed: w.at,
                }
            }
            None => {
                return Err(Problem::Unsupported(format!(
                    "{name}: not a command tmux-engine runs (see docs/tapes.md)"
                )));
            }
        },
    })
}

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// `Type`'s and `Copy`'s text: VHS joins several strings with a space.
fn strings(w: &Words) -> std::result::Result<String, String> {
    if w.args.is_empty() || w.args.iter().any(|a| matches!(a, Arg::Regex(_))) {
        return Err(format!("{} expects string", w.command));
    }
    Ok(w.args.iter().map(Arg::text).collect::<Vec<_>>().join(" "))
}

pub(super) fn one_text(w: &Words) -> std::result::Result<&str, String> {
    match w.args.as_slice() {
        [arg] => Ok(arg.text()),
        _ => Err(format!("{} takes one argument", w.command)),
    }
}

fn wait(w: &Words) -> std::result::Result<Command, Problem> {
    let until = match (w.scope.as_deref(), w.args.as_slice()) {
        (None, [Arg::Word(s), Arg::Word(d)]) if s == "Stable" => WaitFor::Stable(duration(d)?),
        (None | Some("Line"), []) => WaitFor::Line(None),
        (None | Some("Line"), [Arg::Regex(r)]) => WaitFor::Line(Some(compile(r)?)),
        (Some("Screen"), []) => WaitFor::Screen(None),
        (Some("Screen"), [Arg::Regex(r)]) => WaitFor::Screen(Some(compile(r)?)),
        (Some(scope), _) if scope != "Line" && scope != "Screen" => {
            return Err(format!("unknown scope +{scope} (Screen or Line)").into());
        }
        _ => {
            return Err(
                "write Wait /regex/, Wait+Screen /regex/ or Wait Stable 200ms"
                    .to_owned()
                    .into(),
            );
        }
    };
    Ok(Command::Wait {
        until,
        timeout: w.at,
    })
}

fn check(w: &Words) -> std::result::Result<Check, String> {
    Ok(match w.args.as_slice() {
        [Arg::Regex(r)] => Check::Screen(compile(r)?),
        [Arg::Word(kw), Arg::Word(n), Arg::Regex(r)] if kw == "Line" => {
            let n: i32 = n
                .parse()
                .ok()
                .filter(|&n| n != 0)
                .ok_or_else(|| format!("bad line {n:?} (1 is the top, -1 the bottom)"))?;
            Check::Line(n, compile(r)?)
        }
        [Arg::Word(kw)] if kw == "Tmux" => Check::Tmux,
        [Arg::Word(kw), Arg::Word(n)] if kw == "Exit" => {
            Check::Exit(n.parse().map_err(|_| format!("bad exit status {n:?}"))?)
        }
        [Arg::Word(kw), Arg::Str(text), want @ ..] if kw == "Style" && !want.is_empty() => {
            Check::Style(text.clone(), style_want(want)?)
        }
        _ => {
            return Err("write Expect /regex/, Expect Line N /regex/, \
                 Expect Style \"text\" fg=red bold, Expect Exit 0 or Expect Tmux"
                .to_owned());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::Color;

    fn parse(text: &str) -> Result<Tape> {
        Tape::parse(Path::new("t.tape"), text)
    }

    #[test]
    fn errors_name_the_file_line_and_command() {
        let e = parse("Type \"ok\"\n\nMakeCoffee now\n").expect_err("unsupported");
        assert_eq!(e.code().as_str(), "UNSUPPORTED");
        assert!(e.to_string().contains("t.tape:3: MakeCoffee"), "{e}");
        let e = parse("Set WindowBar Colorful\nSet Telepathy on\n").expect_err("setting");
        assert!(e.to_string().contains("t.tape:2: Set Telepathy"), "{e}");
        let e = parse("Output demo.mp4\n").expect_err("mp4");
        assert!(e.to_string().contains("t.tape:1: Output"), "{e}");
        let e = parse("Expect Line 0 /x/\n").expect_err("line 0");
        assert_eq!(e.code().as_str(), "SYNTAX_ERROR");
        assert!(e.to_string().contains("t.tape:1: Expect: bad line"), "{e}");
    }

    #[test]
    fn assertions_parse() {
        let tape = parse(
            "Expect@2s /a+/\nExpect Line -1 /\\$ $/\nExpect Style \"E\" fg=red bg=#102030 bold no-dim\nExpect Exit 3\nSnapshot menu\nWait Stable 200ms\nSet Flaky true\n",
        )
        .expect("parses");
        assert_eq!(tape.steps.len(), 7);
        match &tape.steps[2].command {
            Command::Expect {
                check: Check::Style(text, want),
                ..
            } => {
                assert_eq!(text, "E");
                assert_eq!(want.fg, Some(Color::Indexed(1)));
                assert_eq!(want.bg, Some(Color::Rgb(0x10, 0x20, 0x30)));
                assert_eq!(want.flags[0], Some(true));
                assert_eq!(want.flags[1], Some(false));
            }
            other => panic!("{other:?}"),
        }
        assert!(tape.flaky());
        let themed = parse("Set Theme { \"name\": \"x\", \"background\": \"#010203\" }\n")
            .expect("bare JSON");
        assert!(matches!(
            &themed.steps[0].command,
            Command::Set(Setting::Theme(t)) if t.background == [1, 2, 3]
        ));
        assert!(matches!(
            tape.steps[5].command,
            Command::Wait {
                until: WaitFor::Stable(d),
                ..
            } if d == Duration::from_millis(200)
        ));
    }

    /// `Source` of a file that is no tape once printed its
    /// first line into the error (a shadow hash into CI logs).
    #[test]
    fn a_sourced_non_tape_is_never_echoed() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("shadow"),
            "root:$6$SECRETSALT$SECRETHASH:19000:0:99999:7:::\n",
        )
        .expect("writing");
        std::fs::write(dir.path().join("theme"), "Set Theme { SECRET-THEME\n").expect("writing");
        for sourced in ["shadow", "theme"] {
            let tape = dir.path().join("t.tape");
            let e = Tape::parse(&tape, &format!("Source {sourced}\n")).expect_err("not a tape");
            let text = e.to_string();
            assert!(!text.contains("SECRET"), "{text}");
            assert!(text.contains(sourced) && text.contains(":1"), "{text}");
        }
    }
}
