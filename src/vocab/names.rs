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
pub const MAX_NAME_LEN: usize = 64;

/// Checks a session or terminal name before it reaches tmux.
///
/// Accepted: 1 to [`MAX_NAME_LEN`] bytes of printable text. Rejected, with
/// the reason:
/// - control characters (C0, DEL, C1): tmux would store them vis-encoded, and
///   they are invisible in listings;
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
pub fn check_name(name: &str) -> Result<()> {
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
    if name.chars().any(char::is_control) {
        return bad("contains a control character");
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

/// Checks the name of a variable for a pane's environment
/// (`new-session -e NAME=VALUE`): an `=` in it would move the split between
/// name and value, and a NUL cannot pass through argv at all.
///
/// # Errors
///
/// [`Error::InvalidInput`] for an empty name or one with `=` or NUL.
pub fn check_env_name(key: &str) -> Result<()> {
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
            " a",
            "a ",
        ];
        for name in bad {
            let err = check_name(name).expect_err(name);
            assert_eq!(err.code(), "INVALID_INPUT");
        }
        insta::assert_snapshot!(
            check_name("a:b").expect_err("colon"),
            @r#"invalid input: name "a:b" contains ':'"#
        );
    }

    #[test]
    fn env_names() {
        for name in ["A", "a_b", "with space", "é"] {
            assert!(check_env_name(name).is_ok(), "{name:?} rejected");
        }
        for name in ["", "A=B", "=", "A\0"] {
            let err = check_env_name(name).expect_err(name);
            assert_eq!(err.code(), "INVALID_INPUT");
        }
        insta::assert_snapshot!(
            check_env_name("A=B").expect_err("="),
            @r#"invalid input: environment variable name "A=B" is empty or contains '=' or NUL"#
        );
    }
}
