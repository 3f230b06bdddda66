//! The tmux control-mode protocol: typed values for what `tmux -C` writes.
//!
//! `parse` turns one line into a [`Line`], `codec` frames the byte stream and
//! folds `%begin`..`%end` blocks into a [`Reply`], `escape` holds the
//! `%output` byte escaping, and `client` drives a live `tmux -C` process.
//! Everything here except `client` is sans-IO: bytes in, values out.

use bytes::Bytes;

pub mod client;
pub(crate) mod codec;
pub mod escape;
pub(crate) mod layout;
pub(crate) mod pane_exit;
pub(crate) mod parse;
pub(crate) mod snapshot;
pub(crate) mod subscribe;

// The ids and the parse error are protocol vocabulary shared with `tmux/`:
// their one public path is the leaf `crate::vocab`.
pub(crate) use crate::vocab::{PaneId, ParseError, ParseErrorKind, SessionId, WindowId};
pub use codec::{ControlCodec, DEFAULT_MAX_LINE_LENGTH};
pub use layout::{Layout, LayoutCell, LayoutError, LayoutKind};
pub use pane_exit::wait_pane_exit;
pub use parse::parse_line;

/// Which guard line a `%begin`/`%end`/`%error` line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// `%begin`: a command's reply block opens.
    Begin,
    /// `%end`: the block closes, the command succeeded.
    End,
    /// `%error`: the block closes, the command failed.
    Error,
}

/// A `%begin`/`%end`/`%error TIME NUMBER FLAGS` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// Which of the three guards.
    pub kind: GuardKind,
    /// Seconds since the epoch when tmux fired the command.
    pub time: i64,
    /// tmux's server-global command number: pairs begin with end, nothing more.
    pub number: u32,
    /// `1` for commands this client wrote on its stdin, `0` for tmux's own
    /// (the attach command, hooks). Only flags-1 blocks answer our commands.
    pub flags: u32,
}

impl Guard {
    /// True when `other` closes the block this guard opened (same triple).
    pub fn closes(&self, other: &Guard) -> bool {
        self.time == other.time && self.number == other.number && self.flags == other.flags
    }
}

/// A command's answer: the lines between `%begin` and `%end`/`%error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Seconds since the epoch when tmux fired the command.
    pub time: i64,
    /// tmux's command number.
    pub number: u32,
    /// `1` when the command came from this client's stdin.
    pub flags: u32,
    /// True for `%end`, false for `%error`.
    pub ok: bool,
    /// The body lines, without their `\n`. Raw bytes: `capture-pane` output
    /// can hold ESC and invalid UTF-8.
    pub lines: Vec<Bytes>,
}

impl Reply {
    /// The body as text, lines joined by `\n`, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&String::from_utf8_lossy(line));
        }
        out
    }
}

/// Every asynchronous notification tmux 3.2 to 3.5 (and 3.8-dev) emits.
///
/// Names (of sessions, windows, buffers) are given as tmux prints them, which
/// is vis-encoded (`a\\b` for `a\b`); see [`escape::unvis`] to recover them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notification {
    /// `%output %P DATA`: pane bytes, unescaped.
    Output {
        /// The pane that wrote.
        pane: PaneId,
        /// The exact bytes the program wrote (a UTF-8 character may be split
        /// across two notifications).
        data: Bytes,
    },
    /// `%extended-output %P AGE ... : DATA` (3.2+, with `pause-after`).
    ExtendedOutput {
        /// The pane that wrote.
        pane: PaneId,
        /// How long the bytes waited inside tmux, in milliseconds.
        age_ms: u64,
        /// The exact bytes.
        data: Bytes,
    },
    /// `%pause %P`: tmux stopped sending this pane's output to this client.
    Pause {
        /// The paused pane.
        pane: PaneId,
    },
    /// `%continue %P`: output of a paused pane flows again.
    Continue {
        /// The resumed pane.
        pane: PaneId,
    },
    /// `%layout-change @W LAYOUT VISIBLE FLAGS`.
    LayoutChange {
        /// The window.
        window: WindowId,
        /// The window's layout.
        layout: Layout,
        /// The layout as shown (differs while a pane is zoomed).
        visible_layout: Layout,
        /// `#{window_raw_flags}`, possibly empty (`*`, `-`, `Z`, ...).
        flags: String,
    },
    /// `%window-add @W`: a window was linked into this client's session.
    WindowAdd {
        /// The window.
        window: WindowId,
    },
    /// `%unlinked-window-add @W`: a window was created in another session.
    UnlinkedWindowAdd {
        /// The window.
        window: WindowId,
    },
    /// `%window-close @W` (unreliable in which of the two forms it comes).
    WindowClose {
        /// The window.
        window: WindowId,
    },
    /// `%unlinked-window-close @W`.
    UnlinkedWindowClose {
        /// The window.
        window: WindowId,
    },
    /// `%window-renamed @W NAME`.
    WindowRenamed {
        /// The window.
        window: WindowId,
        /// Its new (vis-encoded) name.
        name: String,
    },
    /// `%unlinked-window-renamed @W NAME`.
    UnlinkedWindowRenamed {
        /// The window.
        window: WindowId,
        /// Its new (vis-encoded) name.
        name: String,
    },
    /// `%window-pane-changed @W %P`: the window's active pane changed.
    WindowPaneChanged {
        /// The window.
        window: WindowId,
        /// Its new active pane.
        pane: PaneId,
    },
    /// `%session-changed $S NAME`: this client is now attached to `$S`.
    SessionChanged {
        /// The session.
        session: SessionId,
        /// Its (vis-encoded) name.
        name: String,
    },
    /// `%client-session-changed CLIENT $S NAME`: another client switched.
    ClientSessionChanged {
        /// The other client's name (`/dev/pts/3`, `client-1234`).
        client: String,
        /// The session it is now attached to.
        session: SessionId,
        /// That session's (vis-encoded) name.
        name: String,
    },
    /// `%client-detached CLIENT` (3.2+).
    ClientDetached {
        /// The client that detached.
        client: String,
    },
    /// `%session-renamed $S NAME`.
    SessionRenamed {
        /// The session.
        session: SessionId,
        /// Its new (vis-encoded) name.
        name: String,
    },
    /// `%session-window-changed $S @W`: a session's current window changed.
    SessionWindowChanged {
        /// The session.
        session: SessionId,
        /// Its new current window.
        window: WindowId,
    },
    /// `%sessions-changed`: a session was created or destroyed.
    SessionsChanged,
    /// `%pane-mode-changed %P`: a pane entered or left a mode.
    PaneModeChanged {
        /// The pane.
        pane: PaneId,
    },
    /// `%subscription-changed NAME $S @W IDX %P ... : VALUE` (3.2+).
    SubscriptionChanged {
        /// The subscription's name.
        name: String,
        /// The session.
        session: SessionId,
        /// The window, `None` for `-`.
        window: Option<WindowId>,
        /// The window index, `None` for `-`.
        index: Option<u32>,
        /// The pane, `None` for `-`.
        pane: Option<PaneId>,
        /// The format's raw value.
        value: Bytes,
    },
    /// `%exit [REASON]`: the last line of a control client.
    Exit {
        /// Why, when tmux said (`server exited unexpectedly`, `too far behind`).
        reason: Option<String>,
    },
    /// `%config-error TEXT` (3.4+).
    ConfigError {
        /// The error text.
        text: String,
    },
    /// `%message TEXT` (3.4+): `display-message` aimed at this client.
    Message {
        /// The (vis-encoded) message.
        text: String,
    },
    /// `%paste-buffer-changed NAME` (3.4+).
    PasteBufferChanged {
        /// The buffer's name.
        name: String,
    },
    /// `%paste-buffer-deleted NAME` (3.4+).
    PasteBufferDeleted {
        /// The buffer's name.
        name: String,
    },
    /// Any other `%name ...` line, kept for forward compatibility.
    Unknown {
        /// The name without `%`.
        name: String,
        /// Everything after the name and its separating space.
        args: Bytes,
    },
}

impl Notification {
    /// The kebab-case wire name, e.g. `window-add` (the `name` for `Unknown`).
    pub fn name(&self) -> &str {
        match self {
            Notification::Output { .. } => "output",
            Notification::ExtendedOutput { .. } => "extended-output",
            Notification::Pause { .. } => "pause",
            Notification::Continue { .. } => "continue",
            Notification::LayoutChange { .. } => "layout-change",
            Notification::WindowAdd { .. } => "window-add",
            Notification::UnlinkedWindowAdd { .. } => "unlinked-window-add",
            Notification::WindowClose { .. } => "window-close",
            Notification::UnlinkedWindowClose { .. } => "unlinked-window-close",
            Notification::WindowRenamed { .. } => "window-renamed",
            Notification::UnlinkedWindowRenamed { .. } => "unlinked-window-renamed",
            Notification::WindowPaneChanged { .. } => "window-pane-changed",
            Notification::SessionChanged { .. } => "session-changed",
            Notification::ClientSessionChanged { .. } => "client-session-changed",
            Notification::ClientDetached { .. } => "client-detached",
            Notification::SessionRenamed { .. } => "session-renamed",
            Notification::SessionWindowChanged { .. } => "session-window-changed",
            Notification::SessionsChanged => "sessions-changed",
            Notification::PaneModeChanged { .. } => "pane-mode-changed",
            Notification::SubscriptionChanged { .. } => "subscription-changed",
            Notification::Exit { .. } => "exit",
            Notification::ConfigError { .. } => "config-error",
            Notification::Message { .. } => "message",
            Notification::PasteBufferChanged { .. } => "paste-buffer-changed",
            Notification::PasteBufferDeleted { .. } => "paste-buffer-deleted",
            Notification::Unknown { name, .. } => name,
        }
    }
}

/// One parsed line, before the codec folds blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A `%begin`/`%end`/`%error` guard.
    Guard(Guard),
    /// A notification.
    Notification(Notification),
    /// A line that does not start with `%`: block content, or (outside a
    /// block) bare output such as tmux 3.5's `run-shell` lines.
    Text(Bytes),
}

/// What the codec yields: replies, notifications, and what it could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An asynchronous notification.
    Notification(Notification),
    /// A whole reply block.
    Reply(Reply),
    /// A line outside any block that is not a notification.
    Text(Bytes),
    /// A line that could not be decoded; decoding goes on after it.
    Malformed(ParseError),
}
