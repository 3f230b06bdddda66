//! The words of one tape line: a command word with its `+Scope` and
//! `@duration` suffixes, then arguments (quoted strings, `/regex/`, bare
//! words). Strings are literal as in VHS: no escapes, so a string holding
//! `"` is written in `'...'` or `` `...` ``.

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

/// Splits one line (not a comment, not blank).
///
/// # Errors
/// A message for an unterminated string or regex, or a bad `@duration`.
pub(crate) fn words(line: &str) -> Result<Words, String> {
    let line = line.trim();
    let (head, mut rest) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(h, r)| (h, r.trim_start()));
    let (head, at) = match head.split_once('@') {
        Some((head, at)) => (head, Some(duration(at)?)),
        None => (head, None),
    };
    // `Wait+Screen`, but not the key chords `Ctrl+C` and `Alt+Enter`.
    let (command, scope) = match head.split_once('+') {
        Some((word, scope)) if word == "Wait" => (word.to_owned(), Some(scope.to_owned())),
        _ => (head.to_owned(), None),
    };
    let mut args = Vec::new();
    while !rest.is_empty() {
        let first = rest.chars().next().unwrap_or(' ');
        let (arg, tail) = match first {
            '"' | '\'' | '`' => {
                let body = &rest[1..];
                let end = body
                    .find(first)
                    .ok_or_else(|| format!("unterminated string {rest}"))?;
                (Arg::Str(body[..end].to_owned()), &body[end + 1..])
            }
            '/' => {
                let (regex, tail) = regex(&rest[1..]).ok_or_else(|| {
                    format!("unterminated regex {rest} (end it with an unescaped /)")
                })?;
                (Arg::Regex(regex), tail)
            }
            _ => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (Arg::Word(rest[..end].to_owned()), &rest[end..])
            }
        };
        args.push(arg);
        rest = tail.trim_start();
    }
    Ok(Words {
        command,
        scope,
        at,
        args,
    })
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
    fn durations_read_as_vhs_writes_them() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
        assert!(duration("2h").is_err());
        assert!(duration("fast").is_err());
    }
}
