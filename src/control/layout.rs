//! `%layout-change` layout strings parsed into a tree.
//!
//! STUB: being written; see the issue brief.

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
