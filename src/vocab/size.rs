//! A terminal's size in character cells, and the one parser of its
//! `COLSxROWS` text form (CLI flags, the web bridge, MCP arguments).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The largest width or height of a terminal (tmux itself takes 10000:
/// a 10000x10000 screen took 16 s and 6.9 GiB to answer, enough for one
/// client to take a server down).
pub const MAX_SIZE: u16 = 1000;

/// The most cells a terminal may have (`cols x rows`): a 4K display at a
/// small font is about 640x180 (115,200 cells). The largest allowed
/// terminal's screen, snapshot and resize answer in well under a second
/// and 64 MiB (`benches` and `tests/bridge/memory.rs` measure it).
pub const MAX_CELLS: u32 = 1 << 17;

/// A terminal size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
}

impl Size {
    /// A size of `cols` x `rows`, checked: both from 1 to [`MAX_SIZE`],
    /// at most [`MAX_CELLS`] cells.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the size when either is out of range.
    pub fn new(cols: u16, rows: u16) -> Result<Size> {
        let size = Size { cols, rows };
        size.check()?;
        Ok(size)
    }

    /// Checks that both sides are from 1 to [`MAX_SIZE`] and that there
    /// are at most [`MAX_CELLS`] cells: the one range check of every face
    /// (spawn, resize, the WebSocket's resize frames, the CLI's flags).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the size.
    pub fn check(&self) -> Result<()> {
        let ok = |n: u16| (1..=MAX_SIZE).contains(&n);
        if ok(self.cols) && ok(self.rows) && self.cells() <= MAX_CELLS {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "size {self} is out of range (each side from 1 to {MAX_SIZE}, at most \
                 {MAX_CELLS} cells)"
            )))
        }
    }

    /// `cols x rows`.
    pub fn cells(&self) -> u32 {
        u32::from(self.cols) * u32::from(self.rows)
    }
}

impl Default for Size {
    /// 80x24, tmux's own default.
    fn default() -> Self {
        Size { cols: 80, rows: 24 }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.cols, self.rows)
    }
}

impl FromStr for Size {
    type Err = Error;

    /// Parses `COLSxROWS` (`x` or `X`), each side from 1 to [`MAX_SIZE`],
    /// at most [`MAX_CELLS`] cells.
    fn from_str(text: &str) -> Result<Size> {
        let bad = || {
            Error::InvalidInput(format!(
                "size {text:?} is not COLSxROWS with each side from 1 to {MAX_SIZE}, at most \
                 {MAX_CELLS} cells"
            ))
        };
        let (cols, rows) = text.split_once(['x', 'X']).ok_or_else(bad)?;
        let side = |v: &str| v.parse::<u16>().map_err(|_| bad());
        Size::new(side(cols)?, side(rows)?).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn parses_and_checks_sizes() {
        let ok = [
            ("80x24", (80, 24)),
            ("1X1", (1, 1)),
            ("1000x131", (1000, 131)),
            ("362X362", (362, 362)),
        ];
        for (text, (cols, rows)) in ok {
            assert_eq!(
                text.parse::<Size>().ok(),
                Some(Size { cols, rows }),
                "{text}"
            );
        }
        for text in [
            "",
            "80",
            "80x",
            "x24",
            "0x24",
            "80x0",
            "1001x5",
            "-1x5",
            "80x24x1",
            " 80x24",
            "1000x132",
            "363x363",
            "10000x10000",
        ] {
            let err = text.parse::<Size>().expect_err(text);
            assert_eq!(err.code(), ErrorCode::InvalidInput, "{text}");
            assert!(err.to_string().contains("COLSxROWS"), "{err}");
        }
        assert!(Size::new(0, 5).is_err());
        assert_eq!(Size::default().to_string(), "80x24");
    }
}
