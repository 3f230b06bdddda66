//! The terminal emulator behind every [`Screen`]: `alacritty_terminal`'s
//! `Term` fed by its `vte` parser, wrapped so that nothing else in the
//! crate names the emulator crate.
//!
//! Chosen over `vt100` 0.18 because it renders as tmux renders where `vt100` 0.18
//! did not: IND/NEL, the clear on DECCOLM, autowrap off, tab stops set and
//! cleared, the DEC line-drawing charset, insert mode, `CSI s`/`CSI u`; it
//! keeps combining marks (asciinema's `avt` drops them) and feeds faster
//! than both (the `screen_model` bench).

use alacritty_terminal::event::VoidListener;
use alacritty_terminal::grid::{Dimensions, Grid};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell as GridCell, Flags};
use alacritty_terminal::term::{Config, Term, TermMode};
use alacritty_terminal::vte::ansi::{Color as AnsiColor, Processor, StdSyncHandler};

use std::fmt::Write as _;

use super::{Attributes, Cell, Color, Cursor, Screen};
use crate::vocab::{MAX_SIZE, Size};

/// The grid size in the form the emulator takes: each side from 1 to
/// [`MAX_SIZE`] (a bigger one is clamped, so no size asks for gigabytes).
struct Dims(Size);

fn side(n: u16) -> usize {
    usize::from(n.clamp(1, MAX_SIZE))
}

impl Dimensions for Dims {
    fn total_lines(&self) -> usize {
        self.screen_lines()
    }

    fn screen_lines(&self) -> usize {
        side(self.0.rows)
    }

    fn columns(&self) -> usize {
        side(self.0.cols)
    }
}

/// A terminal emulator of a fixed size (until resized) keeping a bounded
/// scrollback: the model every [`Screen`] of a terminal, a recording or a
/// picture comes from. Feed it a program's output, read its [`Screen`].
///
/// ```
/// use tmux_engine::screen::Emulator;
/// use tmux_engine::vocab::Size;
///
/// let mut emulator = Emulator::new(Size { cols: 20, rows: 2 }, 0);
/// emulator.process(b"\x1b(0lqk\x1b(B ok");
/// assert_eq!(emulator.screen().row(0), Some("\u{250c}\u{2500}\u{2510} ok"));
/// ```
pub struct Emulator {
    term: Term<VoidListener>,
    parser: Processor<StdSyncHandler>,
}

impl Emulator {
    /// A blank emulator of `size` (each side clamped to 1..=[`MAX_SIZE`])
    /// keeping `scrollback` lines.
    pub fn new(size: Size, scrollback: usize) -> Emulator {
        let config = Config {
            scrolling_history: scrollback,
            ..Config::default()
        };
        Emulator {
            term: Term::new(config, &Dims(size), VoidListener),
            parser: Processor::new(),
        }
    }

    /// Applies a program's output.
    pub fn process(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.term, bytes);
        // A synchronized update (`CSI ? 2026 h`) makes the parser hold
        // output back until its end or a timeout; tmux applies it at once,
        // and a wait must see what was received, so flush it now.
        if self.parser.sync_timeout().sync_timeout().is_some() {
            self.parser.stop_sync(&mut self.term);
        }
    }

    /// The size now.
    pub fn size(&self) -> Size {
        let grid = self.term.grid();
        Size {
            cols: u16::try_from(grid.columns()).unwrap_or(u16::MAX),
            rows: u16::try_from(grid.screen_lines()).unwrap_or(u16::MAX),
        }
    }

    /// Resizes (after tmux resized the window); lines reflow as in tmux.
    pub fn set_size(&mut self, size: Size) {
        if size != self.size() {
            self.term.resize(Dims(size));
        }
    }

    /// The whole visible state: text, cells, cursor, modes.
    pub fn screen(&self) -> Screen {
        self.copy(true)
    }

    /// Text, cursor and modes without the cells: what a wait tests on every
    /// output event, so it stays cheap.
    pub(crate) fn text(&self) -> Screen {
        self.copy(false)
    }

    fn copy(&self, with_cells: bool) -> Screen {
        let grid = self.term.grid();
        let size = self.size();
        let mut rows = Vec::with_capacity(usize::from(size.rows));
        let mut wrapped = Vec::with_capacity(usize::from(size.rows));
        let mut cells = Vec::new();
        if with_cells {
            cells.reserve(usize::from(size.rows) * usize::from(size.cols));
        }
        for line in 0..grid.screen_lines() {
            let (text, wrap) = row_text(grid, line_at(line));
            rows.push(text);
            wrapped.push(wrap);
            if with_cells {
                let row = &grid[line_at(line)];
                cells.extend((0..grid.columns()).map(|col| cell_of(&row[Column(col)])));
            }
        }
        let point = grid.cursor.point;
        let mode = self.term.mode();
        Screen {
            rows,
            wrapped,
            cells,
            cursor: Cursor {
                row: u16::try_from(point.line.0.max(0)).unwrap_or(u16::MAX),
                col: u16::try_from(point.column.0).unwrap_or(u16::MAX),
            },
            cursor_visible: mode.contains(TermMode::SHOW_CURSOR),
            size,
            alternate: mode.contains(TermMode::ALT_SCREEN),
        }
    }

    /// Every scrollback line above the screen, oldest first, trailing
    /// blanks trimmed.
    pub fn scrollback_lines(&self) -> Vec<String> {
        let grid = self.term.grid();
        let total = grid.history_size();
        (1..=total)
            .rev()
            .map(|above| {
                let line = Line(-i32::try_from(above).unwrap_or(i32::MAX));
                row_text(grid, line).0.trim_end_matches(' ').to_owned()
            })
            .collect()
    }

    /// The screen as escapes that redraw it on a blank terminal of the same
    /// size: text with SGR, the cursor's place and visibility.
    pub fn formatted(&self) -> String {
        formatted(&self.screen())
    }
}

fn line_at(index: usize) -> Line {
    Line(i32::try_from(index).unwrap_or(i32::MAX))
}

/// One row's text (a blank cell is a space, a wide character's spacer
/// nothing) and whether the program wrapped it onto the next row.
fn row_text(grid: &Grid<GridCell>, line: Line) -> (String, bool) {
    let row = &grid[line];
    let mut text = String::with_capacity(grid.columns());
    let mut wrap = false;
    for col in 0..grid.columns() {
        let cell = &row[Column(col)];
        wrap = cell.flags.contains(Flags::WRAPLINE);
        if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
            continue;
        }
        push_text(&mut text, cell);
    }
    (text, wrap)
}

fn push_text(out: &mut String, cell: &GridCell) {
    if cell.flags.contains(Flags::LEADING_WIDE_CHAR_SPACER) || cell.c == '\t' {
        // A wide character that did not fit left this column blank; a tab
        // is kept in its first cell for copying, but shows as a blank.
        out.push(' ');
        return;
    }
    out.push(cell.c);
    if let Some(marks) = cell.zerowidth() {
        out.extend(marks);
    }
}

fn cell_of(cell: &GridCell) -> Cell {
    let spacer = cell.flags.contains(Flags::WIDE_CHAR_SPACER);
    let mut text = String::new();
    if !spacer && (cell.c != ' ' || cell.zerowidth().is_some()) {
        push_text(&mut text, cell);
        if text == " " {
            text.clear();
        }
    }
    Cell {
        text,
        attributes: attributes_of(cell),
        wide_continuation: spacer,
    }
}

fn attributes_of(cell: &GridCell) -> Attributes {
    let flags = cell.flags;
    Attributes {
        fg: color_of(cell.fg),
        bg: color_of(cell.bg),
        bold: flags.contains(Flags::BOLD),
        dim: flags.contains(Flags::DIM),
        italic: flags.contains(Flags::ITALIC),
        underline: flags.intersects(Flags::ALL_UNDERLINES),
        inverse: flags.contains(Flags::INVERSE),
    }
}

fn color_of(color: AnsiColor) -> Color {
    match color {
        // Black..White are 0-7 and the bright ones 8-15; the rest
        // (foreground, background, cursor, dim variants) are the
        // terminal's defaults, which the terminal never stores in a cell.
        AnsiColor::Named(named) => u8::try_from(named as usize)
            .ok()
            .filter(|i| *i < 16)
            .map_or(Color::Default, Color::Indexed),
        AnsiColor::Indexed(i) => Color::Indexed(i),
        AnsiColor::Spec(rgb) => Color::Rgb(rgb.r, rgb.g, rgb.b),
    }
}

/// Escapes that redraw `screen` on a blank terminal of its size.
pub(crate) fn formatted(screen: &Screen) -> String {
    let mut out = String::from("\x1b[0m\x1b[H\x1b[2J");
    let size = screen.size();
    for row in 0..size.rows {
        let _ = write!(out, "\x1b[{};1H", row + 1);
        let mut current = Attributes::default();
        for cell in screen.row_cells(row).unwrap_or(&[]) {
            if cell.wide_continuation {
                continue;
            }
            if cell.attributes != current {
                out.push_str(&sgr(&cell.attributes));
                current = cell.attributes;
            }
            out.push_str(if cell.text.is_empty() {
                " "
            } else {
                &cell.text
            });
        }
        if !current.is_plain() {
            out.push_str("\x1b[0m");
        }
    }
    let cursor = screen.cursor();
    let _ = write!(out, "\x1b[{};{}H", cursor.row + 1, cursor.col + 1);
    if !screen.cursor_visible() {
        out.push_str("\x1b[?25l");
    }
    out
}

/// The SGR that sets `attrs` from any state.
fn sgr(attrs: &Attributes) -> String {
    let mut codes = vec!["0".to_owned()];
    for (on, code) in [
        (attrs.bold, "1"),
        (attrs.dim, "2"),
        (attrs.italic, "3"),
        (attrs.underline, "4"),
        (attrs.inverse, "7"),
    ] {
        if on {
            codes.push(code.to_owned());
        }
    }
    for (color, base) in [(attrs.fg, 38), (attrs.bg, 48)] {
        match color {
            Color::Default => {}
            Color::Indexed(i) => codes.push(format!("{base};5;{i}")),
            Color::Rgb(r, g, b) => codes.push(format!("{base};2;{r};{g};{b}")),
        }
    }
    format!("\x1b[{}m", codes.join(";"))
}
