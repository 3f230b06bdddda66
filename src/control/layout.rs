//! `%layout-change` layout strings parsed into a tree, and rendered back.
//!
//! The grammar is in docs/control-mode.md, "Layouts":
//! `csum,WxH,X,Y` followed by `,PANE` (a leaf), `{cells}` (left to right) or
//! `[cells]` (top to bottom). [`Layout`]'s `Display` re-renders the exact
//! string, so a parsed layout can be handed back to `select-layout`. Parsing
//! is nom on bytes; nothing here does IO.

use std::fmt;

use nom::IResult;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while_m_n};
use nom::character::complete::{char, digit1};
use nom::combinator::{all_consuming, map, map_res};
use nom::sequence::{preceded, separated_pair};

use super::PaneId;

/// Layouts nest one level per split direction change; real windows stay in
/// the low tens. The cap keeps a hostile line from overflowing the stack.
const MAX_DEPTH: usize = 64;

/// A parsed window layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The 16-bit checksum tmux prefixes the layout with.
    pub checksum: u16,
    /// The root cell.
    pub root: LayoutCell,
}

/// One cell of a layout: a pane or a split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutCell {
    /// Width in columns.
    pub width: u32,
    /// Height in rows.
    pub height: u32,
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// A pane, or children split one way.
    pub kind: LayoutKind,
}

/// What a layout cell holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    /// A pane (`,N` in the string).
    Pane(super::PaneId),
    /// Children side by side, left to right (`{...}`).
    LeftRight(Vec<LayoutCell>),
    /// Children stacked, top to bottom (`[...]`).
    TopBottom(Vec<LayoutCell>),
}

/// A layout string that does not follow the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutError {
    /// Byte offset where parsing stopped.
    pub offset: usize,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad layout at byte {}", self.offset)
    }
}

impl std::error::Error for LayoutError {}

/// tmux's layout checksum over `body`, the text after the checksum's comma
/// (`layout_checksum` in tmux's `layout-custom.c`).
pub fn checksum(body: &str) -> u16 {
    body.bytes().fold(0u16, |c, b| {
        ((c >> 1) | ((c & 1) << 15)).wrapping_add(u16::from(b))
    })
}

impl Layout {
    /// Parses a whole layout string such as `b25d,80x24,0,0,0`.
    ///
    /// The checksum is kept as written, not verified: tmux computed it, and
    /// [`Layout::checksum_matches`] tells whether it agrees.
    ///
    /// # Errors
    /// [`LayoutError`] with the offset where the string stops following the
    /// grammar (including trailing bytes and nesting deeper than 64 levels).
    pub fn parse(input: &[u8]) -> Result<Layout, LayoutError> {
        let parsed = all_consuming(map(
            separated_pair(checksum_hex, char(','), |i| cell(i, 0)),
            |(checksum, root)| Layout { checksum, root },
        ))(input);
        match parsed {
            Ok((_, layout)) => Ok(layout),
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(LayoutError {
                offset: input.len() - e.input.len(),
            }),
            // `complete` parsers never ask for more input.
            Err(nom::Err::Incomplete(_)) => Err(LayoutError {
                offset: input.len(),
            }),
        }
    }

    /// True when the checksum matches the rendered body.
    pub fn checksum_matches(&self) -> bool {
        checksum(&self.root.to_string()) == self.checksum
    }

    /// The panes of the layout, in the order they appear.
    pub fn panes(&self) -> Vec<PaneId> {
        let mut out = Vec::new();
        self.root.collect_panes(&mut out);
        out
    }
}

impl LayoutCell {
    fn collect_panes(&self, out: &mut Vec<PaneId>) {
        match &self.kind {
            LayoutKind::Pane(id) => out.push(*id),
            LayoutKind::LeftRight(cells) | LayoutKind::TopBottom(cells) => {
                for c in cells {
                    c.collect_panes(out);
                }
            }
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = LayoutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layout::parse(s.as_bytes())
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x},{}", self.checksum, self.root)
    }
}

impl fmt::Display for LayoutCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{},{},{}", self.width, self.height, self.x, self.y)?;
        let (open, close, cells) = match &self.kind {
            // The pane number is written without its `%`.
            LayoutKind::Pane(id) => return write!(f, ",{}", id.0),
            LayoutKind::LeftRight(cells) => ('{', '}', cells),
            LayoutKind::TopBottom(cells) => ('[', ']', cells),
        };
        write!(f, "{open}")?;
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{c}")?;
        }
        write!(f, "{close}")
    }
}

type LResult<'a, T> = IResult<&'a [u8], T>;

/// `b25d`: four hex digits (tmux prints `%04hx`).
fn checksum_hex(i: &[u8]) -> LResult<'_, u16> {
    map_res(take_while_m_n(4, 4, |b: u8| b.is_ascii_hexdigit()), |h| {
        // Four hex digits always fit in a u16; the ASCII check makes it UTF-8.
        u16::from_str_radix(std::str::from_utf8(h).unwrap_or("x"), 16)
    })(i)
}

/// A decimal `u32`.
fn number(i: &[u8]) -> LResult<'_, u32> {
    map_res(digit1, |d: &[u8]| {
        std::str::from_utf8(d).unwrap_or("x").parse::<u32>()
    })(i)
}

/// `WxH,X,Y` followed by `,PANE`, `{cells}` or `[cells]`.
fn cell(i: &[u8], depth: usize) -> LResult<'_, LayoutCell> {
    if depth > MAX_DEPTH {
        return Err(nom::Err::Failure(nom::error::Error::new(
            i,
            nom::error::ErrorKind::TooLarge,
        )));
    }
    let (i, (width, height)) = separated_pair(number, char('x'), number)(i)?;
    let (i, x) = preceded(char(','), number)(i)?;
    let (i, y) = preceded(char(','), number)(i)?;
    let (i, kind) = alt((
        map(preceded(char(','), number), |n| LayoutKind::Pane(PaneId(n))),
        map(|i| children(i, depth, b"{", b"}"), LayoutKind::LeftRight),
        map(|i| children(i, depth, b"[", b"]"), LayoutKind::TopBottom),
    ))(i)?;
    Ok((
        i,
        LayoutCell {
            width,
            height,
            x,
            y,
            kind,
        },
    ))
}

/// `{cell,cell,...}` or `[cell,...]`: one or more cells, comma separated.
fn children<'a>(
    i: &'a [u8],
    depth: usize,
    open: &'static [u8],
    close: &'static [u8],
) -> LResult<'a, Vec<LayoutCell>> {
    let (mut i, first) = preceded(tag(open), |i| cell(i, depth + 1))(i)?;
    let mut cells = vec![first];
    loop {
        if let Ok((rest, _)) = tag::<_, _, nom::error::Error<&[u8]>>(close)(i) {
            return Ok((rest, cells));
        }
        let (rest, c) = preceded(char(','), |i| cell(i, depth + 1))(i)?;
        cells.push(c);
        i = rest;
    }
}

/// Parses a layout and the rest after it up to a space (used by the line
/// parser, where a layout is one space-separated field).
pub(crate) fn layout_field(i: &[u8]) -> Result<(Layout, &[u8]), LayoutError> {
    let end = memchr::memchr(b' ', i).unwrap_or(i.len());
    let (field, rest) = i.split_at(end);
    Layout::parse(field).map(|l| (l, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout string seen in the 3.3a transcripts (`fixtures/control/`).
    const REAL: &[&str] = &[
        "b25d,80x24,0,0,0",
        "020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2}",
        "b25e,80x24,0,0,1",
        "a87d,100x30,0,0,0",
        "eb8f,100x30,0,0{50x30,0,0,1,49x30,51,0,2}",
        "38e9,60x20,0,0{30x20,0,0,1,29x20,31,0,2}",
        "b69d,90x25,0,0,0",
        "c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3]",
        "3262,80x24,0,0[80x12,0,0,2,80x11,0,13{40x11,0,13,3,39x11,41,13,4}]",
        "a7f4,80x24,0,0[80x11,0,0{39x11,0,0,2,40x11,40,0,3},80x12,0,12,4]",
    ];

    #[test]
    fn real_layouts_round_trip_with_valid_checksums() {
        for s in REAL {
            let layout: Layout = s.parse().expect(s);
            assert_eq!(layout.to_string(), *s);
            assert!(layout.checksum_matches(), "checksum of {s}");
            let (_, body) = s.split_once(',').expect("comma");
            assert_eq!(checksum(body), layout.checksum, "{s}");
        }
    }

    #[test]
    fn parses_the_tree() {
        let layout: Layout = "3262,80x24,0,0[80x12,0,0,2,80x11,0,13{40x11,0,13,3,39x11,41,13,4}]"
            .parse()
            .expect("valid");
        assert_eq!(layout.checksum, 0x3262);
        assert_eq!(layout.panes(), vec![PaneId(2), PaneId(3), PaneId(4)]);
        let LayoutKind::TopBottom(rows) = &layout.root.kind else {
            panic!("expected a top-bottom split: {layout:?}");
        };
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].kind, LayoutKind::Pane(PaneId(2)));
        assert_eq!(
            (rows[1].width, rows[1].height, rows[1].x, rows[1].y),
            (80, 11, 0, 13)
        );
        let LayoutKind::LeftRight(cols) = &rows[1].kind else {
            panic!("expected a left-right split");
        };
        assert_eq!(cols[1].kind, LayoutKind::Pane(PaneId(4)));
        assert_eq!(cols[1].x, 41);
    }

    #[test]
    fn rejects_bad_layouts() {
        let cases: &[(&str, usize)] = &[
            ("", 0),
            ("b25d", 4),
            ("b25,80x24,0,0,0", 0),
            ("zzzz,80x24,0,0,0", 0),
            ("b25d,80x24,0,0", 14),
            ("b25d,80x24,0,0,", 14),
            ("b25d,80x24,0,0,0,", 16),
            ("b25d,80x24,0,0{}", 14),
            ("b25d,80x24,0,0{40x24,0,0,1", 14),
            ("b25d,80x24,0,0{40x24,0,0,1]", 14),
            ("b25d,80x24,0,0,99999999999", 14),
            ("b25d,80x24,0,0,0 extra", 16),
        ];
        for (input, offset) in cases {
            assert_eq!(
                Layout::parse(input.as_bytes()),
                Err(LayoutError { offset: *offset }),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let mut s = String::from("0000,");
        for _ in 0..10_000 {
            s.push_str("1x1,0,0{");
        }
        assert!(Layout::parse(s.as_bytes()).is_err());
        let mut ok = String::from("0000,");
        for _ in 0..MAX_DEPTH {
            ok.push_str("1x1,0,0{");
        }
        ok.push_str("1x1,0,0,1");
        for _ in 0..MAX_DEPTH {
            ok.push('}');
        }
        assert!(Layout::parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn error_text() {
        insta::assert_snapshot!(LayoutError { offset: 14 }.to_string(), @"bad layout at byte 14");
    }
}
