//! Key names as tmux spells them (`Enter`, `Escape`, `C-c`, `M-x`, `Up`,
//! `F1`..`F12`, `PageUp`, `BSpace`, ...) turned into the bytes tmux's
//! `send-keys` writes to a pane (its `input-keys.c` table, xterm style), so
//! a send's keys travel the same ordered, exact byte path as its text.
//!
//! A `keys` element is either a key name or literal text (`":wq"`). An
//! element that looks like a key name but is none (`Esc`, `F13`, `C-Up2`,
//! `README`, `ZZ`) is a [`KeyPiece::Word`]: typed as text while a
//! full-screen program is in front (an editor's `README`, vim's `ZZ`),
//! refused anywhere else ([`refuse_words`]), so an agent that misspells a
//! key at a shell learns it at once instead of typing the word.

use crate::{Error, Result};

/// One element of a send's `keys`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPiece {
    /// Text typed as it is.
    Text(String),
    /// A word shaped like a key name that names none (`Esc`, `README`,
    /// `C-Foo`): typed as text where a full-screen program is in front,
    /// refused elsewhere ([`refuse_words`]).
    Word(String),
    /// A named key.
    Key(Key),
}

/// A named key with its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    base: Base,
    ctrl: bool,
    meta: bool,
    shift: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// A character key (`a`, `[`, and `Space`).
    Char(char),
    /// Bytes with no modifier form of their own (`Enter`, `Escape`).
    Plain(&'static [u8]),
    /// A cursor key, `ESC [ X` or in application cursor mode `ESC O X`.
    Cursor(u8),
    /// `ESC [ N ~` (`Home`, `PageUp`, `F5`..`F12`).
    Tilde(u8),
    /// `F1`..`F4`: `ESC O X`.
    Ss3(u8),
}

/// The names tmux knows (compared ignoring case, as tmux does), with what
/// each is.
const NAMES: &[(&str, Base)] = &[
    ("Enter", Base::Plain(b"\r")),
    ("Escape", Base::Plain(b"\x1b")),
    ("Tab", Base::Plain(b"\t")),
    ("BTab", Base::Plain(b"\x1b[Z")),
    ("BSpace", Base::Plain(b"\x7f")),
    ("Space", Base::Char(' ')),
    ("Up", Base::Cursor(b'A')),
    ("Down", Base::Cursor(b'B')),
    ("Right", Base::Cursor(b'C')),
    ("Left", Base::Cursor(b'D')),
    ("Home", Base::Tilde(1)),
    ("End", Base::Tilde(4)),
    ("IC", Base::Tilde(2)),
    ("Insert", Base::Tilde(2)),
    ("DC", Base::Tilde(3)),
    ("Delete", Base::Tilde(3)),
    ("PageUp", Base::Tilde(5)),
    ("PgUp", Base::Tilde(5)),
    ("PPage", Base::Tilde(5)),
    ("PageDown", Base::Tilde(6)),
    ("PgDn", Base::Tilde(6)),
    ("NPage", Base::Tilde(6)),
    ("F1", Base::Ss3(b'P')),
    ("F2", Base::Ss3(b'Q')),
    ("F3", Base::Ss3(b'R')),
    ("F4", Base::Ss3(b'S')),
    ("F5", Base::Tilde(15)),
    ("F6", Base::Tilde(17)),
    ("F7", Base::Tilde(18)),
    ("F8", Base::Tilde(19)),
    ("F9", Base::Tilde(20)),
    ("F10", Base::Tilde(21)),
    ("F11", Base::Tilde(23)),
    ("F12", Base::Tilde(24)),
];

/// Checks every element of a send's `keys`.
///
/// # Errors
/// `INVALID_INPUT` naming the first element that is an empty string.
pub fn parse_keys(keys: &[String]) -> Result<Vec<KeyPiece>> {
    keys.iter().map(|key| parse_piece(key)).collect()
}

fn parse_piece(element: &str) -> Result<KeyPiece> {
    if element.is_empty() {
        return Err(Error::InvalidInput(
            "keys has an empty element (a key name like Enter, or text)".into(),
        ));
    }
    if let Some(key) = parse_key(element) {
        return Ok(KeyPiece::Key(key));
    }
    if has_modifier(element) || looks_like_name(element) {
        return Ok(KeyPiece::Word(element.to_owned()));
    }
    Ok(KeyPiece::Text(element.to_owned()))
}

/// Refuses the first [`KeyPiece::Word`] of `pieces`: keys sent where no
/// full-screen program is in front.
///
/// # Errors
/// `INVALID_INPUT` naming the word and saying where it would be typed.
pub fn refuse_words(pieces: &[KeyPiece]) -> Result<()> {
    match pieces.iter().find_map(|piece| match piece {
        KeyPiece::Word(word) => Some(word),
        _ => None,
    }) {
        Some(word) => Err(Error::InvalidInput(format!(
            "keys: {word:?} is not a tmux key name (e.g. Enter, Escape, Tab, BSpace, Up, \
             PageUp, F1..F12, C-c, M-x); a word that names no key is typed as text only \
             while a full-screen program is in front; here, put it in text"
        ))),
        None => Ok(()),
    }
}

/// `C-`, `M-` or `S-` (any case) ahead of something.
fn has_modifier(word: &str) -> bool {
    let bytes = word.as_bytes();
    bytes.len() >= 2
        && matches!(bytes[0], b'C' | b'c' | b'M' | b'm' | b'S' | b's')
        && bytes[1] == b'-'
}

/// A capitalized word of letters and digits: what a key name looks like,
/// and what text rarely is as a whole element.
fn looks_like_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && word.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric())
}

/// The key `word` names, modifiers included, if it names one.
fn parse_key(word: &str) -> Option<Key> {
    let mut key = Key {
        base: Base::Plain(b""),
        ctrl: false,
        meta: false,
        shift: false,
    };
    let mut rest = word;
    while has_modifier(rest) {
        match rest.as_bytes()[0].to_ascii_uppercase() {
            b'C' => key.ctrl = true,
            b'M' => key.meta = true,
            _ => key.shift = true,
        }
        rest = &rest[2..];
    }
    let mut chars = rest.chars();
    key.base = match (chars.next(), chars.next()) {
        // A bare single character is text, not a key: only a modified one
        // (`C-c`) or a name is a key.
        (Some(c), None) if rest.len() != word.len() => Base::Char(c),
        (Some(_), None) => return None,
        _ => NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(rest))
            .map(|&(_, base)| base)?,
    };
    Some(key)
}

impl Key {
    /// The bytes tmux writes for this key; `app_cursor` is the pane's
    /// cursor key mode (DECCKM, set by full-screen programs such as `less`
    /// and `vim`).
    fn encode(self, app_cursor: bool, out: &mut Vec<u8>) {
        let modifier = 1 + u8::from(self.shift) + 2 * u8::from(self.meta) + 4 * u8::from(self.ctrl);
        match self.base {
            Base::Char(c) => {
                if self.meta {
                    out.push(0x1b);
                }
                let c = if self.shift {
                    c.to_ascii_uppercase()
                } else {
                    c
                };
                if self.ctrl {
                    out.push(control(c));
                } else {
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
            Base::Plain(bytes) => {
                if self.meta {
                    out.push(0x1b);
                }
                out.extend_from_slice(bytes);
            }
            Base::Cursor(x) if modifier == 1 => {
                out.extend_from_slice(if app_cursor { b"\x1bO" } else { b"\x1b[" });
                out.push(x);
            }
            Base::Cursor(x) | Base::Ss3(x) if modifier > 1 => {
                out.extend_from_slice(format!("\x1b[1;{modifier}").as_bytes());
                out.push(x);
            }
            Base::Cursor(x) | Base::Ss3(x) => {
                out.extend_from_slice(b"\x1bO");
                out.push(x);
            }
            Base::Tilde(n) if modifier > 1 => {
                out.extend_from_slice(format!("\x1b[{n};{modifier}~").as_bytes());
            }
            Base::Tilde(n) => out.extend_from_slice(format!("\x1b[{n}~").as_bytes()),
        }
    }

    /// Whether the bytes depend on the cursor key mode.
    fn is_cursor(self) -> bool {
        matches!(self.base, Base::Cursor(_))
    }
}

/// `C-c` and friends: the C0 byte (`C-Space`/`C-@` NUL, `C-?` DEL).
fn control(c: char) -> u8 {
    match c {
        ' ' | '@' | '2' => 0,
        '?' | '8' => 0x7f,
        c if c.is_ascii() => (c.to_ascii_uppercase() as u8) & 0x1f,
        // tmux sends a non-ASCII character with C- as the character.
        _ => c as u8,
    }
}

/// Whether any piece's bytes depend on the pane's cursor key mode (then
/// the caller asks tmux for it before [`encode`]).
#[must_use]
pub(crate) fn needs_cursor_mode(pieces: &[KeyPiece]) -> bool {
    pieces
        .iter()
        .any(|piece| matches!(piece, KeyPiece::Key(key) if key.is_cursor()))
}

/// The bytes of `pieces`, in order, as tmux's `send-keys` would write them
/// to a pane in cursor key mode `app_cursor`.
#[must_use]
pub(crate) fn encode(pieces: &[KeyPiece], app_cursor: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            KeyPiece::Text(text) | KeyPiece::Word(text) => out.extend_from_slice(text.as_bytes()),
            KeyPiece::Key(key) => key.encode(app_cursor, &mut out),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn bytes(keys: &[&str]) -> Vec<u8> {
        let keys: Vec<String> = keys.iter().map(|&k| k.to_owned()).collect();
        encode(&parse_keys(&keys).unwrap(), false)
    }

    #[test]
    fn names_become_tmux_bytes() {
        assert_eq!(bytes(&["Escape", ":wq", "Enter"]), b"\x1b:wq\r");
        assert_eq!(bytes(&["C-c", "C-d", "c-a", "M-x"]), b"\x03\x04\x01\x1bx");
        assert_eq!(
            bytes(&["Up", "Left", "BSpace", "Tab"]),
            b"\x1b[A\x1b[D\x7f\t"
        );
        assert_eq!(
            bytes(&["F1", "F5", "F12", "PageUp", "pgdn"]),
            b"\x1bOP\x1b[15~\x1b[24~\x1b[5~\x1b[6~"
        );
        assert_eq!(
            bytes(&["C-Up", "S-F5", "Space", "q"]),
            b"\x1b[1;5A\x1b[15;2~ q"
        );
        let up = parse_keys(&["Up".to_owned()]).unwrap();
        assert!(needs_cursor_mode(&up));
        assert_eq!(encode(&up, true), b"\x1bOA");
    }

    #[test]
    fn a_misspelt_name_is_a_word_refused_by_name_where_no_program_takes_it() {
        let empty = parse_keys(&[String::new()]).unwrap_err();
        assert_eq!(empty.code(), "INVALID_INPUT");
        for word in [
            "Esc", "F13", "C-", "C-Foo", "Return", "README", "ZZ", "TODO",
        ] {
            let pieces = parse_keys(&[word.to_owned()]).unwrap();
            assert_eq!(pieces, [KeyPiece::Word(word.to_owned())], "{word}");
            let error = refuse_words(&pieces).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{word}");
            assert!(error.to_string().contains(word), "{error}");
            // Where a full-screen program takes it, it is its letters.
            assert_eq!(encode(&pieces, false), word.as_bytes());
        }
        let keys = ["o", "README", "Escape", ":wq", "Enter"].map(str::to_owned);
        assert_eq!(
            encode(&parse_keys(&keys).unwrap(), false),
            b"oREADME\x1b:wq\r"
        );
        assert!(refuse_words(&parse_keys(&["q".to_owned(), "C-c".to_owned()]).unwrap()).is_ok());
        assert_eq!(
            bytes(&["hello world", "ls -la", ":q!"]),
            b"hello worldls -la:q!"
        );
    }
}
