//! Output as the terminal shows it, as an agent reads it: a program's bytes
//! with carriage returns, backspaces, erases and cursor moves applied, one
//! row per line, so a `\r` progress bar reads `100%`, not
//! `5%10%...100%`. Rows are unbounded (no wrap at the pane's width) and as
//! many as the output has: it renders a whole answer, not a screen.
//!
//! Where nothing moves the cursor it equals
//! [`strip_escapes`](crate::registry::strip_escapes): escape sequences and
//! other control characters dropped, `\r\n` a newline, tabs kept.

use crate::vocab::{EscapeSequence, escape_sequence};

/// The rows being drawn and where the cursor is.
struct Canvas {
    rows: Vec<Vec<char>>,
    row: usize,
    col: usize,
}

impl Canvas {
    fn put(&mut self, c: char) {
        let line = &mut self.rows[self.row];
        if self.col < line.len() {
            line[self.col] = c;
        } else {
            line.resize(self.col, ' ');
            line.push(c);
        }
        self.col += 1;
    }

    fn down(&mut self, n: usize) {
        self.row += n;
        if self.rows.len() <= self.row {
            self.rows.resize(self.row + 1, Vec::new());
        }
    }

    /// `CSI params final`: the moves and erases a line shows.
    fn csi(&mut self, params: &[u8], last: u8) {
        let text = std::str::from_utf8(params).unwrap_or("");
        let first = text.split(';').next().unwrap_or("");
        let n = first.parse::<usize>().unwrap_or(0);
        let count = n.max(1);
        match last {
            b'C' => self.col += count,
            b'D' => self.col = self.col.saturating_sub(count),
            b'G' => self.col = count - 1,
            b'A' => self.row = self.row.saturating_sub(count),
            b'B' => self.down(count),
            b'K' => {
                let line = &mut self.rows[self.row];
                match n {
                    0 => line.truncate(self.col),
                    1 => {
                        let end = (self.col + 1).min(line.len());
                        line[..end].fill(' ');
                    }
                    _ => line.clear(),
                }
            }
            _ => {}
        }
    }
}

/// `bytes` as the terminal shows them, one `\n` per row; a trailing `\n`
/// when the output ended at a line's start.
#[must_use]
pub fn render(bytes: &[u8]) -> String {
    let mut canvas = Canvas {
        rows: vec![Vec::new()],
        row: 0,
        col: 0,
    };
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => {
                let (sequence, next) = escape_sequence(bytes, i);
                if let EscapeSequence::Csi {
                    params,
                    final_byte: Some(last),
                } = sequence
                {
                    canvas.csi(&bytes[params], last);
                }
                i = next;
            }
            b'\n' => {
                canvas.down(1);
                canvas.col = 0;
                i += 1;
            }
            b'\r' => {
                canvas.col = 0;
                i += 1;
            }
            0x08 => {
                canvas.col = canvas.col.saturating_sub(1);
                i += 1;
            }
            b'\t' => {
                canvas.put('\t');
                i += 1;
            }
            byte if byte < 0x20 || byte == 0x7f => i += 1,
            _ => {
                // A run of text up to the next control byte, decoded.
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b < 0x20 || b == 0x7f)
                    .map_or(bytes.len(), |at| i + at);
                for c in String::from_utf8_lossy(&bytes[i..end]).chars() {
                    canvas.put(c);
                }
                i = end;
            }
        }
    }
    // A last row of blanks the cursor went back to the start of is what
    // the next prompt overwrites: zsh's partial-line filler (PROMPT_SP,
    // `%`, spaces to the width, `\r \r`), not output; the only row too
    // (a command that printed nothing answered 80 spaces in zsh).
    if canvas.row == canvas.rows.len() - 1
        && canvas.col == 0
        && canvas.rows[canvas.row].iter().all(|&c| c == ' ')
    {
        canvas.rows[canvas.row].clear();
    }
    let mut out = String::with_capacity(bytes.len());
    let last = canvas.rows.len() - 1;
    for (n, row) in canvas.rows.iter().enumerate() {
        out.extend(row.iter());
        if n < last {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::registry::strip_escapes;

    #[test]
    fn zsh_partial_line_filler_is_not_output() {
        let filler = format!(
            "\x1b[1m\x1b[7m%\x1b[27m\x1b[1m\x1b[0m{}\r \r",
            " ".repeat(79)
        );
        assert_eq!(render(format!("42\r\n{filler}").as_bytes()), "42\n");
        // Of a command that printed nothing.
        assert_eq!(render(filler.as_bytes()), "");
        // Spaces a program printed, the cursor after them, stay.
        assert_eq!(render(b"a\n  "), "a\n  ");
    }

    #[test]
    fn carriage_returns_backspaces_and_erases_apply() {
        assert_eq!(render(b"5%\r10%\r100%\r\n"), "100%\n");
        assert_eq!(render(b"abc\x08\x08X\n"), "aXc\n");
        assert_eq!(render(b"downloading 99%\r\x1b[Kdone\r\n"), "done\n");
        assert_eq!(render(b"a\r\nb\r\n\x1b[2A\x1b[2Cz"), "a z\nb\n");
    }

    #[test]
    fn plain_output_renders_as_it_strips() {
        for bytes in [
            &b"hello\r\n\x1b[1;31mred\x1b[0m\tend\r\n\xff\x1b]0;title\x07x"[..],
            b"no newline",
            b"",
            b"\r\n\r\n",
        ] {
            assert_eq!(render(bytes), strip_escapes(bytes), "{bytes:?}");
        }
    }
}
