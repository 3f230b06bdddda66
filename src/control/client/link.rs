//! What the client's state holds of its connection's lifetime
//! (`linger.rs` lets an idle one go and links again): the link's state
//! and how to link again. Types only, so the state (`shared.rs`) and the
//! linger task can both use them.

use std::ffi::OsString;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tmux::ServerHandle;

/// Whether the client's connection is up.
pub(super) enum Link {
    /// Connected; cancelling `release` lets this connection go.
    Linked { release: CancellationToken },
    /// Let go: lines wait in `lines` for the next connection; `wanted`
    /// once one was queued (the linger task was woken).
    Unlinked {
        lines: mpsc::UnboundedReceiver<Bytes>,
        wanted: bool,
    },
    /// The linger task is linking again.
    Relinking,
}

/// How a client links again: as it first did.
pub(super) struct Recipe {
    pub(super) server: ServerHandle,
    /// What followed the attach command.
    pub(super) extra: Vec<OsString>,
    /// A direct link (else a `tmux -C` process).
    pub(super) direct: bool,
}
