//! What a terminal shows: [`Screen`], a plain copy of a terminal emulator's
//! visible state (text, cells with attributes, cursor), its renderings
//! (snapshot text, attribute tags, scrollback), and the screen model that
//! follows a pane's output events (`model`) with the waits on it ([`Within`]).
//!
//! Renderings are pure and stable across runs (they end up in `insta`
//! snapshots), so trailing blanks are trimmed and nothing depends on
//! timing. Only the model's feeding task talks to tmux, through the
//! control client.

pub mod asciicast;
mod emulator;
mod find;
pub mod keys;
pub(crate) mod model;
pub(crate) mod record;
pub(crate) mod render;
pub(crate) mod wait;

pub use emulator::Emulator;
pub use find::{Match, Matches};
pub use wait::{IntoRegex, Within};

use std::fmt::{self, Write as _};

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::control::subscribe::Snapshot;
use crate::vocab::Size;

/// A cursor position, 0-based.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cursor {
    /// Row from the top of the screen.
    pub row: u16,
    /// Column from the left.
    pub col: u16,
}

/// A cell's foreground or background color.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Color {
    /// The terminal's default color.
    #[default]
    Default,
    /// One of the 256 palette colors (0-7 normal, 8-15 bright).
    Indexed(u8),
    /// A 24-bit color.
    Rgb(u8, u8, u8),
}

impl Color {
    /// A readable name: `red`, `bright-blue`, `208`, `#ff8800`.
    pub fn name(self) -> String {
        const NAMES: [&str; 8] = [
            "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
        ];
        match self {
            Color::Default => "default".to_owned(),
            Color::Indexed(i) if i < 8 => NAMES[usize::from(i)].to_owned(),
            Color::Indexed(i) if i < 16 => format!("bright-{}", NAMES[usize::from(i - 8)]),
            Color::Indexed(i) => i.to_string(),
            Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        }
    }
}

/// How a cell is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Attributes {
    /// Foreground color.
    pub fg: Color,
    /// Background color.
    pub bg: Color,
    /// Bold (SGR 1).
    pub bold: bool,
    /// Dim (SGR 2).
    pub dim: bool,
    /// Italic (SGR 3).
    pub italic: bool,
    /// Underlined (SGR 4).
    pub underline: bool,
    /// Reverse video (SGR 7).
    pub inverse: bool,
}

impl Attributes {
    /// True for the default look (no color, no style).
    pub fn is_plain(&self) -> bool {
        *self == Attributes::default()
    }

    /// The tag [`Screen::attributed_rows`] writes: `{bold fg=red}`.
    fn tag(&self) -> String {
        let mut parts = Vec::new();
        for (on, name) in [
            (self.bold, "bold"),
            (self.dim, "dim"),
            (self.italic, "italic"),
            (self.underline, "underline"),
            (self.inverse, "inverse"),
        ] {
            if on {
                parts.push(name.to_owned());
            }
        }
        if self.fg != Color::Default {
            parts.push(format!("fg={}", self.fg.name()));
        }
        if self.bg != Color::Default {
            parts.push(format!("bg={}", self.bg.name()));
        }
        format!("{{{}}}", parts.join(" "))
    }
}

/// One character cell of the screen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cell {
    /// What the cell shows (a character with its combining marks); empty
    /// for a blank cell and for the second half of a wide character.
    pub text: String,
    /// How it is drawn.
    pub attributes: Attributes,
    /// True for the second column of a wide character (its text is in the
    /// cell to the left).
    pub wide_continuation: bool,
}

/// The visible screen at one moment: text rows, cells with attributes,
/// cursor, size and mode.
///
/// Built from a terminal emulator fed with the pane's output (or with
/// tmux's own `capture-pane -e`), so it is what the program has drawn, not
/// what it once printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    rows: Vec<String>,
    wrapped: Vec<bool>,
    /// Row-major, `size.cols` a row; empty in the text-only copies waits
    /// test on (never handed out).
    cells: Vec<Cell>,
    cursor: Cursor,
    cursor_visible: bool,
    size: Size,
    alternate: bool,
}

impl Screen {
    /// The screen a terminal of `size` shows after receiving `bytes`.
    pub fn from_ansi(size: Size, bytes: &[u8]) -> Screen {
        let mut emulator = Emulator::new(size, 0);
        emulator.process(bytes);
        emulator.screen()
    }

    /// The screen tmux captured (`capture-pane -e` with the pane's size,
    /// cursor and mode), attributes included.
    pub fn from_snapshot(snapshot: &Snapshot) -> Screen {
        let size = Size {
            cols: snapshot.width.max(1),
            rows: snapshot.height.max(1),
        };
        let mut emulator = Emulator::new(size, 0);
        draw_snapshot(&mut emulator, snapshot);
        emulator.screen()
    }

    /// The rows, top first, each without trailing blanks.
    pub fn rows(&self) -> impl Iterator<Item = &str> {
        self.rows.iter().map(|r| r.trim_end_matches(' '))
    }

    /// One row without trailing blanks; `None` past the bottom.
    pub fn row(&self, row: usize) -> Option<&str> {
        self.rows.get(row).map(|r| r.trim_end_matches(' '))
    }

    /// The cell at `row`, `col` (0-based); `None` outside the screen.
    pub fn cell(&self, row: u16, col: u16) -> Option<&Cell> {
        if row >= self.size.rows || col >= self.size.cols {
            return None;
        }
        self.cells
            .get(usize::from(row) * usize::from(self.size.cols) + usize::from(col))
    }

    /// One row's cells, left to right; `None` past the bottom.
    pub fn row_cells(&self, row: u16) -> Option<&[Cell]> {
        let cols = usize::from(self.size.cols);
        let start = usize::from(row) * cols;
        self.cells.get(start..start + cols)
    }

    /// The screen as text: rows joined by `\n`, each without trailing
    /// blanks, except that a row the program wrapped continues on the next
    /// one without a break (so wrapped text is found too). Trailing blank
    /// rows are dropped. Regex waits match this text, so `(?m)^42$` works.
    pub fn text(&self) -> String {
        self.joined(false)
    }

    /// True when `needle` is on the screen now. Blank cells count as
    /// spaces, so a prompt `"$ "` is found although a terminal cannot tell
    /// a written space from an empty cell; rows are separated by `\n` as in
    /// [`Screen::text`].
    pub fn contains(&self, needle: &str) -> bool {
        self.joined(true).contains(needle)
    }

    fn joined(&self, pad: bool) -> String {
        let width = usize::from(self.size.cols);
        let mut text = String::new();
        for (i, row) in self.rows.iter().enumerate() {
            if self.wrapped.get(i).copied().unwrap_or(false) {
                text.push_str(row);
            } else if pad {
                text.push_str(row);
                let cells: usize = row.chars().count();
                text.extend(std::iter::repeat_n(' ', width.saturating_sub(cells)));
                text.push('\n');
            } else {
                text.push_str(row.trim_end_matches(' '));
                text.push('\n');
            }
        }
        if !pad {
            let keep = text.trim_end_matches('\n').len();
            text.truncate(keep);
        }
        text
    }

    /// Where the cursor is.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// False when the program hid the cursor (`CSI ? 25 l`).
    pub fn cursor_visible(&self) -> bool {
        self.cursor_visible
    }

    /// The screen size.
    pub fn size(&self) -> Size {
        self.size
    }

    /// True while the program is on the alternate screen (a full-screen TUI).
    pub fn alternate_screen(&self) -> bool {
        self.alternate
    }

    /// A stable text form for `insta::assert_snapshot!`: a header with size,
    /// cursor and screen mode, then every row behind a `|` gutter, trailing
    /// blanks trimmed; the cursor's row is marked with `>` in the gutter.
    ///
    /// ```text
    /// 20x3 cursor 1:2 main
    ///  |$ echo hi
    /// >|hi
    ///  |
    /// ```
    pub fn snapshot(&self) -> String {
        let mut out = self.snapshot_header();
        for (i, row) in self.rows().enumerate() {
            let mark = if i == usize::from(self.cursor.row) {
                '>'
            } else {
                ' '
            };
            let _ = writeln!(out, "{mark}|{row}");
        }
        out
    }

    /// The first line of the snapshot forms: size, cursor, screen mode.
    fn snapshot_header(&self) -> String {
        format!(
            "{} cursor {}:{}{} {}\n",
            self.size,
            self.cursor.row,
            self.cursor.col,
            if self.cursor_visible { "" } else { " hidden" },
            if self.alternate { "alternate" } else { "main" }
        )
    }

    /// The visible rows with attributes as readable tags: a run of styled
    /// cells is `{bold fg=red}text{/}`; a literal `{` is written `{{`.
    /// Trailing unstyled blanks are trimmed. Stable, so fit for snapshots.
    pub fn attributed_rows(&self) -> Vec<String> {
        (0..self.size.rows)
            .map(|row| attributed_row(self.row_cells(row).unwrap_or(&[])))
            .collect()
    }
}

impl fmt::Display for Screen {
    /// The [`Screen::snapshot`] form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.snapshot())
    }
}

impl Serialize for Screen {
    /// `{"lines": [...], "cols", "rows", "cursor": [col, row]}`: the
    /// `--json screen` object of the CLI, the web bridge and MCP.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Screen", 4)?;
        out.serialize_field("lines", &self.rows().collect::<Vec<_>>())?;
        out.serialize_field("cols", &self.size.cols)?;
        out.serialize_field("rows", &self.size.rows)?;
        out.serialize_field("cursor", &(self.cursor.col, self.cursor.row))?;
        out.end()
    }
}

/// The object [`Screen`]'s `Serialize` writes, for its JSON Schema.
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[schemars(rename = "Screen")]
#[allow(dead_code)] // Only its schema is used.
struct ScreenJson {
    /// The visible rows, top first.
    lines: Vec<String>,
    /// Columns.
    cols: u16,
    /// Rows.
    rows: u16,
    /// The cursor as `[col, row]`, zero-based. (An array, not a tuple:
    /// both are the same type, and a tuple's `prefixItems` trips
    /// schemathesis 4.32.5's check of answers, which reads it as the
    /// draft-7 `items` array that draft 2020-12 refuses.)
    cursor: [u16; 2],
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Screen {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        ScreenJson::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ScreenJson::json_schema(generator)
    }
}

fn attributed_row(cells: &[Cell]) -> String {
    let mut out = String::new();
    let mut current = Attributes::default();
    // Length of `out` up to the last cell that must be kept.
    let mut keep = 0;
    for cell in cells {
        if cell.wide_continuation {
            continue;
        }
        let attrs = cell.attributes;
        if attrs != current {
            if !current.is_plain() {
                // Styled cells are always kept, so their close is.
                out.push_str("{/}");
                keep = out.len();
            }
            if !attrs.is_plain() {
                out.push_str(&attrs.tag());
            }
            current = attrs;
        }
        let text = if cell.text.is_empty() {
            " "
        } else {
            &cell.text
        };
        for c in text.chars() {
            if c == '{' {
                out.push('{');
            }
            out.push(c);
        }
        if text != " " || !attrs.is_plain() {
            keep = out.len();
        }
    }
    if !current.is_plain() {
        out.push_str("{/}");
        keep = out.len();
    }
    out.truncate(keep);
    out
}

/// Draws tmux's capture into a fresh emulator of the capture's size: the
/// history on the main screen, and the screen on the alternate one when
/// the program is there.
pub(crate) fn draw_snapshot(emulator: &mut Emulator, snap: &Snapshot) {
    // `capture-pane -e` writes line-drawing cells between SO and SI, as
    // tmux's own client does with G1 set to the DEC special graphics.
    emulator.process(b"\x1b)0");
    if snap.alternate_screen {
        // History belongs to the main screen; the capture is the
        // alternate one, so draw it there.
        let main = Snapshot {
            screen: Vec::new(),
            ..snap.clone()
        };
        emulator.process(&main.to_ansi());
        emulator.process(b"\x1b[?1049h");
        let alt = Snapshot {
            history: Vec::new(),
            ..snap.clone()
        };
        emulator.process(&alt.to_ansi());
    } else {
        emulator.process(&snap.to_ansi());
    }
}

/// `bytes` as printable text: ASCII as is, `\n`, `\r`, `\t`, `\e` and
/// `\xNN` for the rest of the control bytes, valid UTF-8 kept; at most the
/// last `max` bytes, with a note of what was left out.
pub(crate) fn escape_tail(bytes: &[u8], max: usize) -> String {
    let skipped = bytes.len().saturating_sub(max);
    let tail = &bytes[skipped..];
    let mut out = String::new();
    if skipped > 0 {
        let _ = write!(out, "[{skipped} earlier bytes not shown]");
    }
    for chunk in tail.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x1b' => out.push_str("\\e"),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => {
                    let _ = write!(out, "\\x{:02x}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(cols: u16, rows: u16, bytes: &[u8]) -> Emulator {
        let mut p = Emulator::new(Size { cols, rows }, 100);
        p.process(bytes);
        p
    }

    #[test]
    fn snapshot_marks_the_cursor_and_trims() {
        let p = parser(12, 3, b"$ echo hi  \r\nhi\r\n$ ");
        let screen = p.screen();
        assert_eq!(
            screen.snapshot(),
            "12x3 cursor 2:2 main\n |$ echo hi\n |hi\n>|$\n"
        );
        assert_eq!(screen.text(), "$ echo hi\nhi\n$");
    }

    #[test]
    fn overwritten_text_is_gone_and_wrapped_text_is_found() {
        let p = parser(10, 2, b"MARKER\r\x1b[Kok");
        let screen = p.screen();
        assert!(!screen.contains("MARKER"));
        assert!(screen.contains("ok"));
        let p = parser(5, 3, b"abcdefgh");
        let screen = p.screen();
        assert!(screen.contains("cdefg"), "{:?}", screen.text());
    }

    #[test]
    fn attributes_render_as_tags() {
        let p = parser(20, 1, b"a\x1b[1;31mred\x1b[0m {b}\x1b[7m \x1b[0m");
        assert_eq!(
            p.screen().attributed_rows(),
            ["a{bold fg=red}red{/} {{b}{inverse} {/}"]
        );
    }

    #[test]
    fn scrollback_lists_lines_above_the_screen() {
        let p = parser(10, 2, b"one\r\ntwo\r\nthree\r\nfour");
        assert_eq!(p.scrollback_lines(), ["one", "two"]);
    }

    #[test]
    fn escape_tail_is_bounded_and_readable() {
        assert_eq!(
            escape_tail(b"a\x1b[K\r\n\\\xff", 100),
            "a\\e[K\\r\\n\\\\\\xff"
        );
        assert_eq!(
            escape_tail(b"0123456789", 4),
            "[6 earlier bytes not shown]6789"
        );
    }
}
