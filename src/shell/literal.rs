//! Text typed at a shell's prompt, literally: a TAB, an ESC or any other
//! control byte inside a line reaches the command line as that byte,
//! never as a line-editing key (a TAB would complete `a<TAB>` into
//! `apple.txt`; `C-u` would erase the line; ESC would start a key
//! sequence). Line breaks stay what they are: each ends a line, as Enter
//! does, so text of several lines still runs line by line (a heredoc's
//! body line after line) with a prompt between, and the marks follow
//! every command.
//!
//! Two ways, chosen by what the shell's line editor asked for
//! ([`bracketed_paste_on`]):
//!
//! - **Bracketed paste** (bash 5.1 and later, zsh 5.1 and later: on by
//!   default, as `\e[?2004h` in the prompt says): a line holding a control
//!   byte goes between `\e[200~` and `\e[201~`, which readline and ZLE
//!   insert as text whatever it holds. Lines without one go as they are.
//! - **Quoting** (bash before 5.1 or with bracketed paste off, a POSIX sh
//!   such as dash with no line editor): every control byte but the line
//!   breaks is preceded by `C-v`, which readline and ZLE read as
//!   `quoted-insert`, and a terminal in its own line mode (dash reading
//!   its line) as `VLNEXT`, the literal-next character.
//!
//! A line holding `\e[201~` itself would end its paste early: it is
//! quoted instead. Pure: bytes in, bytes out.

use std::borrow::Cow;

use memchr::memmem;

/// Starts a bracketed paste.
const PASTE_START: &[u8] = b"\x1b[200~";

/// Ends a bracketed paste.
const PASTE_END: &[u8] = b"\x1b[201~";

/// `C-v`: readline's and ZLE's `quoted-insert`, a terminal's `VLNEXT`.
const LITERAL_NEXT: u8 = 0x16;

/// How a shell's line editor takes text literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Literal {
    /// Lines holding a control byte are bracketed pastes.
    Bracketed,
    /// Control bytes are preceded by `C-v`.
    Quoted,
}

/// Whether a byte would be a line-editing key: a C0 control byte other
/// than the line breaks, or DEL.
fn control(byte: u8) -> bool {
    (byte < 0x20 && byte != b'\n' && byte != b'\r') || byte == 0x7f
}

/// `text` made literal for a line editor that takes it `how`; the text
/// itself when it holds no control byte.
pub fn literal(text: &[u8], how: Literal) -> Cow<'_, [u8]> {
    if !text.iter().copied().any(control) {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len() + text.len() / 8 + 16);
    for line in text.split_inclusive(|&b| b == b'\n' || b == b'\r') {
        let end = line.len() - usize::from(matches!(line.last(), Some(b'\n' | b'\r')));
        let (body, rest) = line.split_at(end);
        if !body.iter().copied().any(control) {
            out.extend_from_slice(line);
            continue;
        }
        if how == Literal::Bracketed && memmem::find(body, PASTE_END).is_none() {
            out.extend_from_slice(PASTE_START);
            out.extend_from_slice(body);
            out.extend_from_slice(PASTE_END);
        } else {
            for &byte in body {
                if control(byte) {
                    out.push(LITERAL_NEXT);
                }
                out.push(byte);
            }
        }
        out.extend_from_slice(rest);
    }
    Cow::Owned(out)
}

/// Whether the newest of the bracketed paste mode switches in `output`
/// (what the shell printed since its prompt began) turns it on: a line
/// editor that asked for bracketed paste takes it.
pub fn bracketed_paste_on(output: &[u8]) -> bool {
    let on = memmem::rfind(output, b"\x1b[?2004h");
    let off = memmem::rfind(output, b"\x1b[?2004l");
    match (on, off) {
        (Some(on), Some(off)) => on > off,
        (on, _) => on.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_control_bytes_is_itself() {
        for how in [Literal::Bracketed, Literal::Quoted] {
            let text = b"echo one\nprintf '%s' x\r\xc3\xa9";
            assert!(matches!(literal(text, how), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn lines_with_control_bytes_are_bracketed() {
        let text = b"cat > Makefile <<'EOF'\nall:\n\t@echo built-ok\nEOF\r";
        assert_eq!(
            &*literal(text, Literal::Bracketed),
            &b"cat > Makefile <<'EOF'\nall:\n\x1b[200~\t@echo built-ok\x1b[201~\nEOF\r"[..]
        );
        // The line breaks stay outside the paste, the last line too.
        assert_eq!(
            &*literal(b"a\tb\x15c\x1b", Literal::Bracketed),
            &b"\x1b[200~a\tb\x15c\x1b\x1b[201~"[..]
        );
        // A line that would end its own paste is quoted instead.
        assert_eq!(
            &*literal(b"x\x1b[201~\t\r", Literal::Bracketed),
            &b"x\x16\x1b[201~\x16\t\r"[..]
        );
    }

    #[test]
    fn control_bytes_are_quoted() {
        assert_eq!(
            &*literal(b"a\tb\x03\x04\x7f\0z\necho\x1b\r", Literal::Quoted),
            &b"a\x16\tb\x16\x03\x16\x04\x16\x7f\x16\0z\necho\x16\x1b\r"[..]
        );
    }

    #[test]
    fn the_newest_mode_switch_counts() {
        assert!(!bracketed_paste_on(b"$ "));
        assert!(bracketed_paste_on(b"\x1b[?2004h$ "));
        assert!(!bracketed_paste_on(b"\x1b[?2004h\x1b[?2004l$ "));
        assert!(bracketed_paste_on(
            b"\x1b[?2004l\x1b]133;A\x07\x1b[?2004h$ "
        ));
    }
}
