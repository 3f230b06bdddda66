//! What a session or terminal name may be: [`check_name`]; and an
//! environment variable's: [`check_env_name`].
//!
//! Names reach tmux as targets (`=NAME`) and as format-expanded arguments;
//! the rules here keep every accepted name addressable, exactly, by that
//! target. Pure checks, no IO.

use crate::{Error, Result};

/// The longest session or terminal name [`check_name`] accepts, in bytes.
/// Names appear in every target and in listings; 64 bytes is plenty for a
/// human-chosen name and keeps command lines and error texts short.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// Checks a session or terminal name before it reaches tmux.
///
/// Accepted: 1 to [`MAX_NAME_LEN`] bytes of printable text. Rejected, with
/// the reason:
/// - control characters (C0, DEL, C1): tmux would store them vis-encoded, and
///   they are invisible in listings; format characters (bidi controls,
///   zero-width characters: see [`hidden_char`]) for the same reason;
/// - `:` and `.`: they separate session, window and pane in a target (tmux
///   replaces them with `_` when it stores a name);
/// - `\`: tmux stores it as `\\`, so the name could not be addressed;
/// - a leading `-` (reads as a flag), `=` (the exact-match marker) or `$`
///   (`=$1` addresses session *id* 1, not a session named `$1`);
/// - leading or trailing whitespace (invisible in listings).
///
/// `#` is allowed: the engine doubles it wherever tmux format-expands.
///
/// # Errors
///
/// [`Error::InvalidInput`] naming the name and the rule it breaks.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::InvalidInput(format!("name {name:?} {why}")));
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad(&format!(
            "is {} bytes, over the {MAX_NAME_LEN}-byte limit",
            name.len()
        ));
    }
    if let Some(c) = hidden_char(name) {
        return bad(&format!(
            "contains the invisible character U+{:04X}",
            u32::from(c)
        ));
    }
    if let Some(c) = name.chars().find(|c| matches!(c, ':' | '.' | '\\')) {
        return bad(&format!("contains {c:?}"));
    }
    if let Some(c) = name.chars().next().filter(|c| matches!(c, '-' | '=' | '$')) {
        return bad(&format!("starts with {c:?}"));
    }
    if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        return bad("starts or ends with whitespace");
    }
    Ok(())
}

/// The first character of `text` that a person would not see as written:
/// a control character (C0, DEL, C1), a format character (Unicode category
/// Cf: bidi embeddings, overrides and isolates, marks such as U+200E/F and
/// U+061C, zero-width spaces and joiners, U+FEFF, soft hyphen, tag
/// characters, ...) or a line or paragraph separator.
///
/// Why: a bidi override shows `evil` as `live` in a listing, and a
/// zero-width character makes two names that look identical; a name is
/// what a person picks a terminal by, so what it shows must be what it is.
pub(crate) fn hidden_char(text: &str) -> Option<char> {
    text.chars().find(|&c| c.is_control() || is_format(c))
}

/// Unicode category Cf (format characters, as of Unicode 16) plus the
/// line and paragraph separators (Zl, Zp): every one renders as nothing or
/// changes how its neighbours render.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

/// Checks the name of a variable for a pane's environment
/// (`new-session -e NAME=VALUE`): an `=` in it would move the split between
/// name and value, and a NUL cannot pass through argv at all.
///
/// # Errors
///
/// [`Error::InvalidInput`] for an empty name or one with `=` or NUL.
pub(crate) fn check_env_name(key: &str) -> Result<()> {
    if key.is_empty() || key.contains(['=', '\0']) {
        return Err(Error::InvalidInput(format!(
            "environment variable name {key:?} is empty or contains '=' or NUL"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn names() {
        let long = "x".repeat(MAX_NAME_LEN);
        let too_long = "x".repeat(MAX_NAME_LEN + 1);
        let good = [
            "main",
            "a b",
            "build #3",
            "é-名前",
            "x-",
            "~x",
            "a=b",
            "{last}",
            "%1",
            "@1",
            "!",
            long.as_str(),
            "a;b",
            "'q'",
            "\"dq\"",
        ];
        for name in good {
            assert!(check_name(name).is_ok(), "{name:?} rejected");
        }
        let bad = [
            "",
            too_long.as_str(),
            "a:b",
            "a.b",
            "a\\b",
            "-a",
            "=a",
            "$1",
            "a\nb",
            "a\tb",
            "\x7f",
            "a\u{85}",
            "a\u{202E}b",
            "a\u{200B}",
            " a",
            "a ",
        ];
        for name in bad {
            let err = check_name(name).expect_err(name);
            assert_eq!(err.code(), ErrorCode::InvalidInput);
        }
        insta::assert_snapshot!(
            check_name("a:b").expect_err("colon"),
            @r#"invalid input: name "a:b" contains ':'"#
        );
    }

    #[test]
    fn hidden_characters() {
        let hidden = "\0\u{1b}\u{7f}\u{9b}\u{AD}\u{61C}\u{200B}\u{200C}\u{200D}\u{200E}\u{200F}\
                      \u{2028}\u{2029}\u{202A}\u{202B}\u{202C}\u{202D}\u{202E}\u{2060}\u{2066}\
                      \u{2067}\u{2068}\u{2069}\u{FEFF}\u{E0001}\u{E0041}";
        for c in hidden.chars() {
            let text = format!("ok{c}ok");
            assert_eq!(hidden_char(&text), Some(c), "U+{:04X}", u32::from(c));
        }
        for visible in ["main", "é-名前", "a b", "שלום", "مرحبا", "🦀"] {
            assert_eq!(hidden_char(visible), None, "{visible:?}");
        }
        insta::assert_snapshot!(
            check_name("evil\u{202E}txt").expect_err("bidi"),
            @r#"invalid input: name "evil\u{202e}txt" contains the invisible character U+202E"#
        );
    }

    #[test]
    fn env_names() {
        for name in ["A", "a_b", "with space", "é"] {
            assert!(check_env_name(name).is_ok(), "{name:?} rejected");
        }
        for name in ["", "A=B", "=", "A\0"] {
            let err = check_env_name(name).expect_err(name);
            assert_eq!(err.code(), ErrorCode::InvalidInput);
        }
        insta::assert_snapshot!(
            check_env_name("A=B").expect_err("="),
            @r#"invalid input: environment variable name "A=B" is empty or contains '=' or NUL"#
        );
    }
}
