//! A terminal's size in character cells, and the one parser of its
//! `COLSxROWS` text form (CLI flags, the web bridge, MCP arguments).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The largest width or height tmux accepts for a window.
pub const MAX_SIZE: u16 = 10_000;

/// A terminal size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
}

impl Size {
    /// A size of `cols` x `rows`, checked: both from 1 to [`MAX_SIZE`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the size when either is out of range.
    pub fn new(cols: u16, rows: u16) -> Result<Size> {
        let size = Size { cols, rows };
        size.check()?;
        Ok(size)
    }

    /// Checks that both sides are from 1 to [`MAX_SIZE`] (tmux's limit).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the size.
    pub fn check(&self) -> Result<()> {
        let ok = |n: u16| (1..=MAX_SIZE).contains(&n);
        if ok(self.cols) && ok(self.rows) {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "size {self} is out of range (each side from 1 to {MAX_SIZE})"
            )))
        }
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

    /// Parses `COLSxROWS` (`x` or `X`), each side from 1 to [`MAX_SIZE`].
    fn from_str(text: &str) -> Result<Size> {
        let bad = || {
            Error::InvalidInput(format!(
                "size {text:?} is not COLSxROWS with each side from 1 to {MAX_SIZE}"
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
            ("10000x10000", (10000, 10000)),
        ];
        for (text, (cols, rows)) in ok {
            assert_eq!(
                text.parse::<Size>().ok(),
                Some(Size { cols, rows }),
                "{text}"
            );
        }
        for text in [
            "", "80", "80x", "x24", "0x24", "80x0", "10001x5", "-1x5", "80x24x1", " 80x24",
        ] {
            let err = text.parse::<Size>().expect_err(text);
            assert_eq!(err.code(), ErrorCode::InvalidInput, "{text}");
            assert!(err.to_string().contains("COLSxROWS"), "{err}");
        }
        assert!(Size::new(0, 5).is_err());
        assert_eq!(Size::default().to_string(), "80x24");
    }
}
