//! Attach transports: many viewers of one registry terminal, behind one
//! interface ([`Viewer`]).
//!
//! - **control** (the default, `hub.rs` + `feed.rs`): one hub per terminal
//!   fans the shared chunks of the terminal's output stream (the one the
//!   registry's sends and cursor reads read) out to each viewer's bounded
//!   queue, numbers every byte with its offset in that stream (a viewer's
//!   position is an [`OutputCursor`], `EPOCH:OFFSET`), replays a resume
//!   from the stream's ring, and repaints a lagging viewer with one
//!   coalesced snapshot.
//! - **pty** (`pty.rs`): `tmux attach` under an engine-owned
//!   pseudo-terminal, for programs that need tmux's own client rendering.
//!
//! Everything goes through [`Attacher::attach`], which resolves the
//! terminal through [`Owned::attach`](crate::registry::Owned::attach): owner fencing, the liveness probe
//! and `on-attach` recreation are the registry's. Front ends (the web
//! bridge) depend only on this module's types.
//!
//! This file is the attacher (resolving, hubs, counts) and the values a
//! viewer is told; the handle a face holds is `viewer.rs`.

mod feed;
mod history;
mod hub;
mod pty;
mod viewer;

pub use self::history::{HistoryPage, MAX_PAGE as MAX_HISTORY_PAGE};
pub use self::viewer::Viewer;
use self::viewer::{Counted, Counts, Link};

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::registry::{OwnerId, Registry, RestartPolicy, TerminalId};
use crate::stream::OutputCursor;
use crate::vocab::{ExitStatus, Size};
use crate::{Error, ErrorCode, Result};

/// How a viewer is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Fan-out of the engine's own control-mode stream, with offsets and
    /// resume. The default.
    #[default]
    Control,
    /// A `tmux attach` client under an engine-owned pseudo-terminal.
    Pty,
}

/// How to attach: `AttachOptions::default().read_only(true)`.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct AttachOptions {
    /// Which transport.
    pub transport: Transport,
    /// Input and resizes are refused (`READ_ONLY`).
    pub read_only: bool,
    /// Resume from here (control transport: a [`Hello::cursor`] moved past
    /// the bytes received); a snapshot when it cannot.
    pub since: Option<OutputCursor>,
    /// Resize the terminal to this on attach (writable viewers only; the
    /// PTY transport also sizes its pseudo-terminal with it).
    pub size: Option<Size>,
}

setters!(AttachOptions {
    transport: Transport,
    read_only: bool,
    since: Option<OutputCursor>,
    size: Option<Size>,
});

/// Tunables of an [`Attacher`]: `AttacherConfig::default().viewer_queue(..)`.
/// What a resume can replay is what the terminal's output stream holds
/// (`TmuxConfig::output_buffer`).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AttacherConfig {
    /// Events a viewer's queue holds before the viewer is skipped (default
    /// 1024).
    pub viewer_queue: usize,
    /// History lines above the screen in a snapshot's repaint (default 100).
    pub snapshot_history: usize,
}

impl Default for AttacherConfig {
    fn default() -> AttacherConfig {
        AttacherConfig {
            viewer_queue: 1024,
            snapshot_history: 100,
        }
    }
}

setters!(AttacherConfig {
    viewer_queue: usize,
    snapshot_history: usize,
});

/// What a viewer receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewerEvent {
    /// Bytes the program printed, exactly; `offset` (control transport) is
    /// the position of the first byte in the stream.
    Output {
        /// Stream offset of `bytes[0]`; `None` for the PTY transport.
        offset: Option<u64>,
        /// The bytes.
        bytes: Bytes,
    },
    /// Replaces whatever the viewer showed: write `repaint` to a terminal
    /// of `size`; live output continues from `offset`.
    Snapshot {
        /// The offset the repaint is current to.
        offset: u64,
        /// The terminal's size.
        size: Size,
        /// ANSI that clears and redraws screen, history and cursor.
        repaint: Bytes,
    },
    /// The terminal's size changed.
    Resize(Size),
    /// The program exited. The stream ends after it, except for an
    /// `always` terminal: a snapshot of the restarted program follows.
    Exit(ExitStatus),
}

/// What a viewer is told when it attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hello {
    /// The transport serving it.
    pub transport: Transport,
    /// Whether input and resizes are refused.
    pub read_only: bool,
    /// The terminal's size.
    pub size: Size,
    /// Where the terminal's output stream stood when the viewer joined
    /// (control transport): its epoch, and the offset of the next byte.
    pub cursor: Option<OutputCursor>,
    /// The terminal.
    pub id: TerminalId,
    /// Its name, if it has one.
    pub name: Option<String>,
}

/// Attaches viewers to registry terminals; owns one hub per terminal
/// viewed through the control transport.
#[derive(Clone)]
pub struct Attacher {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    config: AttacherConfig,
    hubs: Arc<feed::Hubs>,
    viewers: Arc<Counts>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl fmt::Debug for Attacher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attacher").finish_non_exhaustive()
    }
}

impl Attacher {
    /// An attacher over `registry` with the default [`AttacherConfig`].
    pub fn new(registry: Registry) -> Attacher {
        Attacher::with_config(registry, AttacherConfig::default())
    }

    /// An attacher with explicit tunables.
    pub fn with_config(registry: Registry, config: AttacherConfig) -> Attacher {
        Attacher {
            inner: Arc::new(Inner {
                registry,
                config,
                hubs: Arc::new(Mutex::new(HashMap::new())),
                viewers: Arc::new(Mutex::new(HashMap::new())),
                cancel: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// Attaches a viewer to `owner`'s terminal `target` (id or name).
    ///
    /// The terminal is resolved by [`Owned::attach`](crate::registry::Owned::attach): a dead `on-attach`
    /// terminal is recreated and the viewer attaches to the fresh one; a
    /// record that says running but whose server is gone is probed first.
    ///
    /// # Errors
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `TERMINAL_DEAD` (dead and not
    /// recreated here), `UNRESPONSIVE`, `INVALID_INPUT` for a bad size,
    /// `UNSUPPORTED` when the backend cannot serve the transport,
    /// `CANCELLED` after [`shutdown`](Attacher::shutdown).
    pub async fn attach(
        &self,
        owner: &OwnerId,
        target: &str,
        opts: AttachOptions,
    ) -> Result<Viewer> {
        if self.inner.cancel.is_cancelled() {
            return Err(Error::Cancelled("the attacher is shut down".to_owned()));
        }
        if let Some(size) = opts.size {
            size.check()?;
        }
        // A read-only viewer never starts a program: a dead `on-attach`
        // terminal stays dead for it.
        let found = match opts.transport {
            Transport::Control => self.resolve(owner, target, opts.read_only).await?,
            Transport::Pty => {
                let registry = self.inner.registry.owner(owner);
                let registry = if opts.read_only {
                    registry.read_only()
                } else {
                    registry
                };
                registry.attach(target).await?
            }
        };
        let (events_tx, events) = mpsc::channel(self.inner.config.viewer_queue);
        match opts.transport {
            Transport::Pty => {
                let (hello, link) = pty::open(
                    &found,
                    &opts,
                    events_tx,
                    &self.inner.cancel,
                    &self.inner.tasks,
                )
                .await?;
                let counted = Counted::new(&self.inner.viewers, hello.id.clone());
                Ok(Viewer {
                    hello,
                    events,
                    link: Link::Pty(link),
                    _counted: counted,
                })
            }
            Transport::Control => {
                let (hub, (cursor, size)) =
                    self.join(owner, target, found, &opts, events_tx).await?;
                let hello = Hello {
                    transport: Transport::Control,
                    read_only: opts.read_only,
                    size,
                    cursor: Some(cursor),
                    id: hub.id().clone(),
                    name: hub.name().clone(),
                };
                let counted = Counted::new(&self.inner.viewers, hello.id.clone());
                Ok(Viewer {
                    hello,
                    events,
                    link: Link::Control(hub),
                    _counted: counted,
                })
            }
        }
    }

    /// Joins a new viewer to the terminal's hub. When the server of an
    /// `always` terminal dies between the registry's check and the join
    /// (its stream cannot start, or its hub ended), the join waits for the
    /// rebuilt terminal instead of failing a viewer that raced a kill.
    async fn join(
        &self,
        owner: &OwnerId,
        target: &str,
        mut found: crate::registry::AttachTarget,
        opts: &AttachOptions,
        events: mpsc::Sender<ViewerEvent>,
    ) -> Result<(Arc<feed::HubHandle>, (OutputCursor, Size))> {
        let always = found.snapshot.restart == RestartPolicy::Always;
        let deadline = tokio::time::Instant::now() + feed::REBUILD_WAIT;
        loop {
            let joined: Result<_> = async {
                let hub = self.hub(owner, found).await?;
                if let (Some(size), false) = (opts.size, opts.read_only) {
                    hub.resize(size).await?;
                }
                let hello = hub.join(events.clone(), opts.since).await?;
                Ok((hub, hello))
            }
            .await;
            let error = match joined {
                Ok(joined) => return Ok(joined),
                Err(error) => error,
            };
            if !always
                || !matches!(
                    error.code(),
                    ErrorCode::ServerGone | ErrorCode::TerminalDead
                )
            {
                return Err(error);
            }
            found = self.rebuilt(owner, target, deadline, error).await?;
        }
    }

    /// Resolves `target` through the registry, riding out a server that
    /// vanished while it was checked (`SERVER_GONE`, e.g. killed during its
    /// adoption) when the terminal is `always`: its rebuild is waited for.
    async fn resolve(
        &self,
        owner: &OwnerId,
        target: &str,
        looking: bool,
    ) -> Result<crate::registry::AttachTarget> {
        let registry = self.inner.registry.owner(owner);
        let registry = if looking {
            registry.read_only()
        } else {
            registry
        };
        match registry.attach(target).await {
            Err(error)
                if error.code() == ErrorCode::ServerGone
                    && self
                        .inner
                        .registry
                        .owner(owner)
                        .show(target)
                        .await
                        .is_ok_and(|snapshot| snapshot.restart == RestartPolicy::Always) =>
            {
                let deadline = tokio::time::Instant::now() + feed::REBUILD_WAIT;
                self.rebuilt(owner, target, deadline, error).await
            }
            resolved => resolved,
        }
    }

    /// Waits (backing off) until the registry hands out the rebuilt
    /// terminal; `error` once `deadline` passed. Until the restart is in,
    /// the registry calls it dead.
    async fn rebuilt(
        &self,
        owner: &OwnerId,
        target: &str,
        deadline: tokio::time::Instant,
        error: Error,
    ) -> Result<crate::registry::AttachTarget> {
        let mut pause = std::time::Duration::from_millis(20);
        while tokio::time::Instant::now() < deadline {
            tokio::select! {
                () = self.inner.cancel.cancelled() => {
                    return Err(Error::Cancelled("the attacher is shut down".to_owned()));
                }
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(std::time::Duration::from_millis(500));
            match self.inner.registry.owner(owner).attach(target).await {
                Ok(fresh) => return Ok(fresh),
                Err(again)
                    if matches!(
                        again.code(),
                        ErrorCode::TerminalDead | ErrorCode::ServerGone
                    ) => {}
                Err(other) => return Err(other),
            }
        }
        Err(error)
    }

    /// The running hub of this terminal, or a new one when there is none,
    /// its task ended, or the registry handed out a different (recreated)
    /// terminal.
    async fn hub(
        &self,
        owner: &OwnerId,
        found: crate::registry::AttachTarget,
    ) -> Result<Arc<feed::HubHandle>> {
        let id = found.snapshot.id.clone();
        let existing = self
            .inner
            .hubs
            .lock()
            .expect("hub map poisoned")
            .get(&id)
            .cloned();
        if let Some(hub) = existing
            && hub.serves(&found.terminal)
        {
            return Ok(hub);
        }
        let hub = feed::start(
            self.inner.registry.clone(),
            owner.clone(),
            found,
            self.inner.config,
            Arc::downgrade(&self.inner.hubs),
            self.inner.cancel.child_token(),
            &self.inner.tasks,
        )
        .await?;
        let mut hubs = self.inner.hubs.lock().expect("hub map poisoned");
        // Another attach may have started one meanwhile: the newer serves
        // the same terminal, so keep whichever is in the map and alive.
        match hubs.get(&id) {
            Some(other) if other.serves(&hub.terminal()) => {
                hub.stop();
                Ok(Arc::clone(other))
            }
            _ => {
                if let Some(old) = hubs.insert(id, Arc::clone(&hub)) {
                    old.stop();
                }
                Ok(hub)
            }
        }
    }

    /// How many viewers of terminal `id` are attached now, over both
    /// transports (a viewer counts until it is dropped).
    pub fn viewers(&self, id: &TerminalId) -> usize {
        self.inner
            .viewers
            .lock()
            .expect("viewer counts poisoned")
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    /// How many hubs the attacher holds (one per terminal with viewers or
    /// a resumable stream); for leak tests.
    #[doc(hidden)]
    pub fn hub_count(&self) -> usize {
        self.inner.hubs.lock().expect("hub map poisoned").len()
    }

    /// Ends every viewer and hub, kills the PTY transport's clients, and
    /// resolves once all of the attacher's tasks finished. Terminals keep
    /// running.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.hubs.lock().expect("hub map poisoned").clear();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}
