//! The commands of one tape line, split as VHS's lexer and parser split
//! them: each a command word with its `+Scope` and `@duration` suffixes,
//! then arguments (quoted strings, `/regex/`, bare words), several to a
//! line, a trailing `# comment` dropped. Strings are literal as in VHS: no
//! escapes, so a string holding `"` is written in `'...'` or `` `...` ``.

use std::time::Duration;

/// One argument of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    /// A quoted string, its quotes removed.
    Str(String),
    /// A `/regex/`, its slashes removed (`\/` stands for `/`).
    Regex(String),
    /// A bare word: a number, a duration, a name, `fg=red`.
    Word(String),
}

impl Arg {
    /// The text of any argument, as written inside its quotes.
    pub(crate) fn text(&self) -> &str {
        match self {
            Arg::Str(s) | Arg::Regex(s) | Arg::Word(s) => s,
        }
    }
}

/// A command line split into its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Words {
    /// The command word without suffixes: `Wait`, `Ctrl+C`, `Type`.
    pub(crate) command: String,
    /// The `+Screen`/`+Line` scope of `Wait`.
    pub(crate) scope: Option<String>,
    /// The `@500ms` suffix: a typing speed or a timeout.
    pub(crate) at: Option<Duration>,
    /// The arguments in order.
    pub(crate) args: Vec<Arg>,
}

/// Commands VHS (and this runner) know, besides keys.
const COMMANDS: &[&str] = &[
    "Output",
    "Set",
    "Env",
    "Require",
    "Type",
    "Sleep",
    "Wait",
    "Hide",
    "Show",
    "Screenshot",
    "Copy",
    "Paste",
    "Source",
    "Expect",
    "Snapshot",
];

/// Key words that start a key press (VHS's, plus `Home` and `End`).
const KEYS: &[&str] = &[
    "Enter",
    "Backspace",
    "Tab",
    "Space",
    "Escape",
    "Up",
    "Down",
    "Left",
    "Right",
    "Home",
    "End",
    "PageUp",
    "PageDown",
    "Delete",
    "Insert",
    "ScrollUp",
    "ScrollDown",
];

/// True for a bare word that begins a command: VHS's lexer makes these
/// keywords, so its parser ends the previous command's arguments there.
fn starts_command(word: &str) -> bool {
    let head = word.split('@').next().unwrap_or(word);
    let name = head.split('+').next().unwrap_or(head);
    COMMANDS.contains(&name)
        || KEYS.contains(&name)
        || matches!(name, "Ctrl" | "Alt" | "Shift") && head.contains('+')
}

/// One token of a line with where it starts and ends.
struct Token {
    arg: Arg,
    span: std::ops::Range<usize>,
}

/// The tokens of a line as VHS's lexer reads them: quoted strings (no
/// escapes), `/regex/`, bare words (ended by blanks or a quote, so
/// `Type@.2'x'` is two), and a `#` where a token would start comments out
/// the rest of the line.
fn tokens(line: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let rest = &line[at..];
        let skipped = rest.len() - rest.trim_start().len();
        at += skipped;
        let rest = &line[at..];
        let Some(first) = rest.chars().next() else {
            break;
        };
        let (arg, len) = match first {
            '#' => break,
            '"' | '\'' | '`' => {
                let body = &rest[1..];
                let end = body
                    .find(first)
                    .ok_or_else(|| format!("unterminated string {rest}"))?;
                (Arg::Str(body[..end].to_owned()), end + 2)
            }
            '/' => {
                let (regex, tail) = regex(&rest[1..]).ok_or_else(|| {
                    format!("unterminated regex {rest} (end it with an unescaped /)")
                })?;
                (Arg::Regex(regex), rest.len() - tail.len())
            }
            _ => {
                let end = rest
                    .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`'))
                    .unwrap_or(rest.len());
                (Arg::Word(rest[..end].to_owned()), end)
            }
        };
        out.push(Token {
            arg,
            span: at..at + len,
        });
        at += len;
    }
    Ok(out)
}

/// Splits one line into its commands, as VHS's parser does: several may
/// share a line (`Type "ls" Enter`, `Ctrl+C Sleep 1s`), each ending where
/// a word that starts a command comes; `Set` and `Env` take their next
/// two tokens whatever they are; a trailing `# comment` is dropped. Each
/// command comes with its own text, for messages.
///
/// # Errors
/// A message for an unterminated string or regex, an argument before any
/// command, or a bad `@duration`.
pub(crate) fn commands(line: &str) -> Result<Vec<(String, Words)>, String> {
    let tokens = tokens(line)?;
    let mut groups: Vec<Vec<Token>> = Vec::new();
    let mut fixed: usize = 0;
    for token in tokens {
        let starts = fixed == 0 && matches!(&token.arg, Arg::Word(w) if starts_command(w))
            || groups.is_empty();
        if starts {
            fixed = match &token.arg {
                Arg::Word(w) if w == "Set" || w == "Env" => 2,
                _ => 0,
            };
            groups.push(vec![token]);
        } else {
            fixed = fixed.saturating_sub(1);
            if let Some(group) = groups.last_mut() {
                group.push(token);
            }
        }
    }
    groups
        .into_iter()
        .map(|group| {
            let span = group[0].span.start..group[group.len() - 1].span.end;
            let mut group = group.into_iter().map(|t| t.arg);
            let head = match group.next() {
                Some(Arg::Word(w)) => w,
                Some(other) => return Err(format!("{} is not a command", other.text())),
                None => return Err("empty command".to_owned()),
            };
            Ok((line[span].to_owned(), words_of(&head, group.collect())?))
        })
        .collect()
}

/// The parts of one command: its head word (`Wait+Screen@5s`) and its
/// arguments.
fn words_of(head: &str, args: Vec<Arg>) -> Result<Words, String> {
    let (head, at) = match head.split_once('@') {
        Some((head, at)) => (head, Some(duration(at)?)),
        None => (head, None),
    };
    // `Wait+Screen`, but not the key chords `Ctrl+C` and `Alt+Enter`.
    let (command, scope) = match head.split_once('+') {
        Some((word, scope)) if word == "Wait" => (word.to_owned(), Some(scope.to_owned())),
        _ => (head.to_owned(), None),
    };
    Ok(Words {
        command,
        scope,
        at,
        args,
    })
}

/// Splits a line holding one command.
///
/// # Errors
/// As [`commands`]; also when the line holds more than one command.
#[cfg(test)]
pub(crate) fn words(line: &str) -> Result<Words, String> {
    let mut all = commands(line)?;
    match all.len() {
        1 => Ok(all.remove(0).1),
        n => Err(format!("{n} commands")),
    }
}

/// The body of a `/regex/` up to its closing slash, and what follows.
fn regex(body: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '/' => return Some((out, &body[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// A VHS duration: `500ms`, `2s`, `1m`, or a bare number of seconds
/// (`2`, `0.5`).
///
/// # Errors
/// A message naming the text.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration {text:?} (write 500ms, 2s or 1.5)");
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(bad()),
    };
    if !seconds.is_finite() || !(0.0..=86_400.0).contains(&seconds) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_into_command_suffixes_and_arguments() {
        let w = words(r"Wait+Screen@5s /a\/b c/").expect("words");
        assert_eq!(w.command, "Wait");
        assert_eq!(w.scope.as_deref(), Some("Screen"));
        assert_eq!(w.at, Some(Duration::from_secs(5)));
        assert_eq!(w.args, vec![Arg::Regex("a/b c".into())]);
        let w = words(r#"Expect Style "ERROR x" fg=red bold"#).expect("words");
        assert_eq!(
            w.args,
            vec![
                Arg::Word("Style".into()),
                Arg::Str("ERROR x".into()),
                Arg::Word("fg=red".into()),
                Arg::Word("bold".into())
            ]
        );
        let w = words("Ctrl+C").expect("words");
        assert_eq!((w.command.as_str(), w.scope), ("Ctrl+C", None));
        let w = words(r#"Type 'say "hi"'"#).expect("words");
        assert_eq!(w.args, vec![Arg::Str(r#"say "hi""#.into())]);
        assert!(words(r#"Type "open"#).is_err());
        assert!(words("Wait /open").is_err());
    }

    #[test]
    fn several_commands_share_a_line_as_in_vhs() {
        let all = commands(r#"Type "echo hi" Enter Sleep 1s # then wait"#).expect("line");
        let names: Vec<&str> = all.iter().map(|(_, w)| w.command.as_str()).collect();
        assert_eq!(names, ["Type", "Enter", "Sleep"]);
        assert_eq!(all[0].0, r#"Type "echo hi""#);
        assert_eq!(all[2].1.args, vec![Arg::Word("1s".into())]);
        let all = commands("Ctrl+C Sleep 1s").expect("line");
        assert_eq!(all.len(), 2);
        let w = words("Type@.2'fast'").expect("no space after the speed");
        assert_eq!(w.at, Some(Duration::from_millis(200)));
        assert_eq!(w.args, vec![Arg::Str("fast".into())]);
        // Set and Env take their two tokens even when one reads as a key.
        let all = commands(r#"Set Shell bash Env KEY Enter Type "x""#).expect("line");
        let names: Vec<&str> = all.iter().map(|(_, w)| w.command.as_str()).collect();
        assert_eq!(names, ["Set", "Env", "Type"]);
        // A comment starts only where a token would.
        let w = words(r#"Expect Style "x" bg=#102030 # red"#).expect("line");
        assert_eq!(w.args.len(), 3);
        assert!(commands("# only a comment").expect("comment").is_empty());
    }

    #[test]
    fn durations_read_as_vhs_writes_them() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
        assert!(duration("2h").is_err());
        assert!(duration("fast").is_err());
    }
}
