//! Finding text on a [`Screen`] and checking how it is drawn, in one line
//! of a test: [`Screen::find`] gives every match with its row, column and
//! cells, and [`Matches`] answers colour and attribute questions about all
//! of them at once.

use std::fmt;
use std::ops::Deref;

use super::{Attributes, Cell, Color, Screen};

/// One place a text is on the screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Its row, 0 at the top.
    pub row: u16,
    /// The column of its first cell, 0 at the left.
    pub col: u16,
    /// Its cells, left to right (a wide character's second half included).
    pub cells: Vec<Cell>,
}

impl Match {
    /// Whether every cell of it satisfies `check`.
    pub fn all(&self, mut check: impl FnMut(&Attributes) -> bool) -> bool {
        self.cells.iter().all(|cell| check(&cell.attributes))
    }
}

/// Every place a text is on the screen, top to bottom, left to right
/// ([`Screen::find`]). Derefs to a slice of [`Match`]es.
///
/// Each check holds when there is at least one match and every cell of
/// every match passes it: an absent text never passes. To check one match,
/// take it with [`first`](Matches::first), [`nth`](Matches::nth). `{}`
/// shows every match with its attributes, for assertion messages.
///
/// ```
/// use tmux_engine::screen::{Color, Screen};
/// use tmux_engine::vocab::Size;
///
/// let size = Size::new(20, 2)?;
/// let screen = Screen::from_ansi(size, b"\x1b[1;31mred\x1b[0m and red\r\n\x1b[32mok\x1b[0m");
/// let red = screen.find("red");
/// assert_eq!(red.len(), 2);
/// assert_eq!((red[1].row, red[1].col), (0, 8));
/// assert!(red.first().fg_is(Color::Indexed(1)) && red.first().bold());
/// assert!(!red.fg_is(Color::Indexed(1)), "the second one is plain");
/// assert!(screen.find("ok").fg_is(Color::Indexed(2)));
/// assert!(!screen.find("absent").fg_is(Color::Default), "no match is never a pass");
/// assert_eq!(
///     screen.snapshot_styled(),
///     "20x2 cursor 1:2 main\n |{bold fg=red}red{/} and red\n>|{fg=green}ok{/}\n",
/// );
/// # Ok::<(), tmux_engine::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matches {
    needle: String,
    matches: Vec<Match>,
}

impl Matches {
    /// Whether at least one match exists and every cell of every match
    /// satisfies `check`.
    pub fn all(&self, mut check: impl FnMut(&Attributes) -> bool) -> bool {
        !self.matches.is_empty() && self.matches.iter().all(|m| m.all(&mut check))
    }

    /// The first match alone (none when there is none).
    pub fn first(&self) -> Matches {
        self.nth(0)
    }

    /// The `n`th match alone, from 0 (none when there are fewer).
    pub fn nth(&self, n: usize) -> Matches {
        Matches {
            needle: self.needle.clone(),
            matches: self.matches.get(n).cloned().into_iter().collect(),
        }
    }

    /// Drawn in foreground colour `color` (`Color::Indexed(1)` is red).
    pub fn fg_is(&self, color: Color) -> bool {
        self.all(|a| a.fg == color)
    }

    /// Drawn on background colour `color`.
    pub fn bg_is(&self, color: Color) -> bool {
        self.all(|a| a.bg == color)
    }

    /// Bold.
    pub fn bold(&self) -> bool {
        self.all(|a| a.bold)
    }

    /// Dim.
    pub fn dim(&self) -> bool {
        self.all(|a| a.dim)
    }

    /// Italic.
    pub fn italic(&self) -> bool {
        self.all(|a| a.italic)
    }

    /// Underlined.
    pub fn underline(&self) -> bool {
        self.all(|a| a.underline)
    }

    /// In reverse video.
    pub fn inverse(&self) -> bool {
        self.all(|a| a.inverse)
    }

    /// Without colour or style.
    pub fn plain(&self) -> bool {
        self.all(Attributes::is_plain)
    }
}

impl Deref for Matches {
    type Target = [Match];

    fn deref(&self) -> &[Match] {
        &self.matches
    }
}

impl<'a> IntoIterator for &'a Matches {
    type Item = &'a Match;
    type IntoIter = std::slice::Iter<'a, Match>;

    fn into_iter(self) -> Self::IntoIter {
        self.matches.iter()
    }
}

impl fmt::Display for Matches {
    /// `"red": 2 matches` then one line per match: `0:0 {bold fg=red}red{/}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {} match(es)", self.needle, self.matches.len())?;
        for m in &self.matches {
            write!(
                f,
                "\n{}:{} {}",
                m.row,
                m.col,
                super::attributed_row(&m.cells)
            )?;
        }
        Ok(())
    }
}

impl Screen {
    /// Every place `text` is on the screen, within one row each (blank
    /// cells count as spaces, as for [`contains`](Screen::contains)), with
    /// its row, column and cells; matches do not overlap. See [`Matches`]
    /// for the checks and an example.
    pub fn find(&self, text: &str) -> Matches {
        let mut matches = Vec::new();
        if !text.is_empty() {
            for row in 0..self.size.rows {
                let cells = self.row_cells(row).unwrap_or(&[]);
                // The row as text, and the column each character starts at.
                let mut line = String::new();
                let mut starts = Vec::new();
                for (col, cell) in cells.iter().enumerate() {
                    if cell.wide_continuation {
                        continue;
                    }
                    starts.push((line.len(), col));
                    line.push_str(if cell.text.is_empty() {
                        " "
                    } else {
                        &cell.text
                    });
                }
                let col_at = |byte: usize| {
                    starts
                        .iter()
                        .find(|(at, _)| *at >= byte)
                        .map_or(cells.len(), |&(_, col)| col)
                };
                for (at, found) in line.match_indices(text) {
                    let (start, end) = (col_at(at), col_at(at + found.len()));
                    matches.push(Match {
                        row,
                        col: u16::try_from(start).unwrap_or(u16::MAX),
                        cells: cells[start..end].to_vec(),
                    });
                }
            }
        }
        Matches {
            needle: text.to_owned(),
            matches,
        }
    }

    /// [`snapshot`](Screen::snapshot) with attributes: the same header and
    /// gutter, each row as [`attributed_rows`](Screen::attributed_rows)
    /// writes it (`{bold fg=red}error{/}: ...`). Compact and stable, for
    /// `insta::assert_snapshot!(screen.snapshot_styled())`.
    pub fn snapshot_styled(&self) -> String {
        let mut out = self.snapshot_header();
        for (i, row) in self.attributed_rows().iter().enumerate() {
            let mark = if i == usize::from(self.cursor.row) {
                '>'
            } else {
                ' '
            };
            out.push(mark);
            out.push('|');
            out.push_str(row);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Size;

    fn screen(bytes: &[u8]) -> Screen {
        Screen::from_ansi(Size { cols: 12, rows: 3 }, bytes)
    }

    #[test]
    fn finds_every_match_with_its_cells_and_wide_characters() {
        let s = screen("界 red\r\n\x1b[4mredred\x1b[0m".as_bytes());
        let red = s.find("red");
        let at: Vec<(u16, u16)> = red.iter().map(|m| (m.row, m.col)).collect();
        assert_eq!(at, [(0, 3), (1, 0), (1, 3)]);
        assert!(red.nth(1).underline() && red.nth(2).underline());
        assert!(!red.underline() && red.first().plain());
        let wide = s.find("界 ");
        assert_eq!(wide[0].cells.len(), 3, "both halves and the space");
        assert!(s.find("").is_empty());
        assert_eq!(s.find("x").to_string(), "\"x\": 0 match(es)");
        assert_eq!(
            red.nth(1).to_string(),
            "\"red\": 1 match(es)\n1:0 {underline}red{/}"
        );
    }
}
