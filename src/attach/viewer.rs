//! One attached viewer, the handle a face holds: its events out, input
//! and resizes in, a page of history, whichever transport serves it, and
//! its place in the attacher's counts while it lives. Apart from the
//! attacher (`mod.rs`), which makes viewers, because this is what every
//! face calls per frame; it never resolves a terminal.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{Hello, HistoryPage, ViewerEvent, feed, pty};
use crate::registry::{TerminalId, WriteAnswer};
use crate::vocab::Size;
use crate::{Error, Result};

/// One attached viewer: events out, input and resizes in. Dropping it
/// detaches (the PTY transport kills its `tmux attach` client).
pub struct Viewer {
    pub(super) hello: Hello,
    pub(super) events: mpsc::Receiver<ViewerEvent>,
    pub(super) link: Link,
    pub(super) _counted: Counted,
}

/// The attacher's live viewers per terminal, both transports.
pub(super) type Counts = Mutex<HashMap<TerminalId, usize>>;

/// One viewer's place in [`Counts`]: counted while the viewer lives.
pub(super) struct Counted {
    counts: Arc<Counts>,
    id: TerminalId,
}

impl Counted {
    pub(super) fn new(counts: &Arc<Counts>, id: TerminalId) -> Counted {
        *counts
            .lock()
            .expect("viewer counts poisoned")
            .entry(id.clone())
            .or_default() += 1;
        Counted {
            counts: Arc::clone(counts),
            id,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().expect("viewer counts poisoned");
        if let Some(count) = counts.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.id);
            }
        }
    }
}

/// How a viewer reaches its terminal: the control hub, or its own PTY.
pub(super) enum Link {
    Control(Arc<feed::HubHandle>),
    Pty(pty::PtyLink),
}

impl fmt::Debug for Viewer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Viewer")
            .field("hello", &self.hello)
            .finish_non_exhaustive()
    }
}

impl Viewer {
    /// What the viewer was told on attach.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The next event; `None` once the stream ended (exit, terminal gone,
    /// attacher shut down).
    pub async fn recv(&mut self) -> Option<ViewerEvent> {
        let Viewer { events, link, .. } = self;
        let Link::Pty(pty) = link else {
            return events.recv().await;
        };
        let output = |bytes| ViewerEvent::Output {
            offset: None,
            bytes,
        };
        // The client's output first: a program's last bytes go out before
        // its exit. Once the pty ended (the session kills the client after
        // it queued the exit), whatever the session queued still follows;
        // once the session ended, what the pty still holds, then the end.
        tokio::select! {
            biased;
            read = pty.read() => match read {
                Some(bytes) => Some(output(bytes)),
                None => events.try_recv().ok(),
            },
            event = events.recv() => match event {
                Some(event) => Some(event),
                None => pty.read_now().map(output),
            },
        }
    }

    /// The next event if one is queued, without waiting: a face sends
    /// whatever is queued in one batch (one flush) after [`recv`](Self::recv).
    pub fn try_recv(&mut self) -> Option<ViewerEvent> {
        self.events.try_recv().ok()
    }

    /// Types `bytes` into the program exactly.
    ///
    /// # Errors
    /// `READ_ONLY` for a read-only viewer; the backend's failure
    /// (`TERMINAL_DEAD`, `SERVER_GONE`).
    pub async fn input(&self, bytes: Bytes) -> Result<()> {
        self.writable()?;
        match &self.link {
            Link::Control(hub) => hub.terminal().write(bytes).await,
            Link::Pty(pty) => pty.write(&bytes).await,
        }
    }

    /// [`input`](Self::input), returning once the bytes are queued to the
    /// program behind every earlier write, with tmux's answer still to
    /// come: a face looks at it with its next input (so a viewer has a
    /// bounded number of writes in flight), and tmux's answer wakes no one
    /// on the echo's way (see
    /// [`BackendTerminal::write_queued`](crate::registry::BackendTerminal::write_queued)).
    ///
    /// # Errors
    /// `READ_ONLY` for a read-only viewer; the backend's failure when the
    /// bytes could not be queued (`SERVER_GONE`); later failures come in
    /// the answer.
    pub async fn input_queued(&self, bytes: Bytes) -> Result<WriteAnswer> {
        self.writable()?;
        match &self.link {
            Link::Control(hub) => hub.terminal().write_queued(bytes).await,
            Link::Pty(pty) => {
                pty.write(&bytes).await?;
                Ok(crate::registry::answered())
            }
        }
    }

    /// Resizes the terminal (the last writable viewer to resize owns the
    /// size); every viewer is told.
    ///
    /// # Errors
    /// `READ_ONLY` for a read-only viewer; `INVALID_INPUT` for a size out
    /// of range; the backend's failure.
    pub async fn resize(&self, size: Size) -> Result<()> {
        self.writable()?;
        size.check()?;
        match &self.link {
            Link::Control(hub) => hub.resize(size).await,
            Link::Pty(pty) => pty.resize(size).await,
        }
    }

    /// The page of the terminal's past output ending at offset `before`
    /// of the hello's stream, at most `max` bytes (4 MiB at most
    /// whatever is asked): from the stream's ring, and older than it
    /// holds from the kept history. Read-only viewers may read it too (it
    /// is output they are allowed to see). The PTY transport has no
    /// offsets: its page is empty.
    ///
    /// # Errors
    /// `UNSUPPORTED` when the terminal keeps no output stream; [`Error::Io`]
    /// when the read could not run.
    pub async fn history(&self, before: u64, max: u64) -> Result<HistoryPage> {
        match &self.link {
            Link::Control(hub) => hub.history(before, max).await,
            Link::Pty(_) => Ok(HistoryPage::default()),
        }
    }

    fn writable(&self) -> Result<()> {
        if self.hello.read_only {
            return Err(Error::ReadOnly(self.hello.id.to_string()));
        }
        Ok(())
    }
}
