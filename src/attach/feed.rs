//! The driver of one hub: the sans-IO [`Hub`] under a lock, fed new
//! output by the terminal's stream itself (a [`Tap`]: the stream's writer
//! fans each chunk out to the viewers' queues, with no task between), and
//! one task that watches the terminal's status, takes joins, captures and
//! resizes, and runs the hub's effects (captures, waits for a lagging
//! viewer's room, exit deliveries) as tasks of their own, so nothing waits
//! for a viewer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::hub::{Effect, Hub};
use super::{AttacherConfig, ViewerEvent};
use crate::registry::{
    AttachTarget, OwnerId, Registry, RestartPolicy, TerminalId, TerminalStatus, ViewedTerminal,
};
use crate::stream::{OutputCursor, Stream, Tap};
use crate::vocab::Size;
use crate::{Error, ErrorCode, Result};

/// How long a rebuilt `always` terminal is waited for before its viewers
/// are ended.
pub(super) const REBUILD_WAIT: Duration = Duration::from_secs(30);
/// How long an exit status waits for room in a stalled viewer's queue.
const DELIVER_WAIT: Duration = Duration::from_secs(5);
/// Requests queued to one hub; senders wait, the hub task never does.
const COMMANDS: usize = 256;

/// The attacher's hubs by terminal. A hub removes itself when its task
/// ends, so a terminal that is gone leaves nothing behind once its last
/// viewer has left (the viewers hold the handle, not the map).
pub(crate) type Hubs = Mutex<HashMap<TerminalId, Arc<HubHandle>>>;

enum Command {
    Join {
        tx: mpsc::Sender<ViewerEvent>,
        since: Option<OutputCursor>,
        reply: oneshot::Sender<(OutputCursor, Size)>,
    },
    Room(u64),
    Captured(u64, Option<Bytes>),
    Resized(Size),
}

/// The handle viewers and the attacher hold on a running hub.
pub(crate) struct HubHandle {
    id: TerminalId,
    name: Option<String>,
    /// Swapped when an `always` terminal is rebuilt.
    terminal: Mutex<ViewedTerminal>,
    commands: mpsc::Sender<Command>,
    stop: CancellationToken,
    /// Whose kept history a page older than the ring is read from.
    registry: Registry,
}

impl HubHandle {
    pub(crate) fn id(&self) -> &TerminalId {
        &self.id
    }

    pub(crate) fn name(&self) -> &Option<String> {
        &self.name
    }

    /// The terminal currently served.
    pub(crate) fn terminal(&self) -> ViewedTerminal {
        self.terminal.lock().expect("hub terminal poisoned").clone()
    }

    /// Whether this hub is running and serves `terminal`.
    pub(crate) fn serves(&self, terminal: &ViewedTerminal) -> bool {
        !self.stop.is_cancelled() && !self.commands.is_closed() && self.terminal().same(terminal)
    }

    /// The page of the served terminal's past output ending at `before`,
    /// at most `max` bytes (see [`history::page`](super::history::page)),
    /// waiting for the kept history's writer to reach the ring's start
    /// when the page needs bytes from there.
    ///
    /// # Errors
    /// `UNSUPPORTED` when the terminal keeps no output stream; `IO` when
    /// the kept history's writer did not reach the bytes the page needs
    /// in time (see [`history::page`](super::history::page)).
    pub(crate) async fn history(&self, before: u64, max: u64) -> Result<super::HistoryPage> {
        let stream = self.terminal().stream()?;
        let registry = self.registry.clone();
        let id = self.id.clone();
        tokio::task::spawn_blocking(move || {
            let kept = registry.kept(&id);
            let wait = crate::history::WRITER_WAIT;
            super::history::page(&stream, kept.as_deref(), before, max, wait)
        })
        .await
        .map_err(|error| Error::io("reading a page of history", std::io::Error::other(error)))?
    }

    /// Stops the hub's task; its viewers' streams end.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    /// Adds a viewer; returns where the stream stands for it and the size.
    pub(crate) async fn join(
        &self,
        tx: mpsc::Sender<ViewerEvent>,
        since: Option<OutputCursor>,
    ) -> Result<(OutputCursor, Size)> {
        let (reply, answer) = oneshot::channel();
        let gone = || Error::TerminalDead {
            terminal: self.id.to_string(),
            status: "its output stream ended".to_owned(),
        };
        self.commands
            .send(Command::Join { tx, since, reply })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }

    /// Resizes the terminal and tells every viewer.
    pub(crate) async fn resize(&self, size: Size) -> Result<()> {
        self.terminal().resize(size).await?;
        // The hub task may have ended; the resize itself happened.
        let _ = self.commands.send(Command::Resized(size)).await;
        Ok(())
    }
}

/// Starts a hub for `found`'s terminal.
///
/// # Errors
/// When the terminal keeps no output stream (`UNSUPPORTED`), or cannot be
/// read (`SERVER_GONE`).
pub(crate) async fn start(
    registry: Registry,
    owner: OwnerId,
    found: AttachTarget,
    config: AttacherConfig,
    hubs: Weak<Hubs>,
    stop: CancellationToken,
    tasks: &TaskTracker,
) -> Result<Arc<HubHandle>> {
    let terminal = found.terminal;
    let stream = terminal.stream()?;
    let size = match terminal.snapshot(0).await {
        Ok(snapshot) => Size {
            cols: snapshot.width,
            rows: snapshot.height,
        },
        Err(_) => terminal.screen().await?.size(),
    };
    let (commands, receiver) = mpsc::channel(COMMANDS);
    let fan = Arc::new(Fan {
        state: Mutex::new(FanState {
            hub: Hub::new(&stream, size),
            pending: Vec::new(),
            direct: true,
        }),
        wake: Notify::new(),
    });
    let handle = Arc::new(HubHandle {
        id: found.snapshot.id.clone(),
        name: found.snapshot.name.clone(),
        terminal: Mutex::new(terminal.clone()),
        commands: commands.clone(),
        stop: stop.clone(),
        registry: registry.clone(),
    });
    let driver = Driver {
        fan,
        handle: Arc::clone(&handle),
        registry,
        owner,
        hubs,
        always: found.snapshot.restart == RestartPolicy::Always,
        config,
        commands,
        stop,
        tasks: tasks.clone(),
    };
    tasks.spawn(driver.run(terminal, stream, receiver));
    Ok(handle)
}

/// The hub's fan-out, shared by the stream's writer (the [`Tap`]) and the
/// hub's task.
struct Fan {
    state: Mutex<FanState>,
    /// Wakes the hub's task: the tap left effects to run, or a change to
    /// judge (see [`FanState::direct`]).
    wake: Notify,
}

struct FanState {
    hub: Hub,
    /// Effects the tap's fan-outs asked for (a lagging viewer's wait for
    /// room, a capture after a skip), run by the hub's task.
    pending: Vec<Effect>,
    /// The tap fans new output out itself. Off while the hub's task waits
    /// for a restarted program's first bytes (which repaint every viewer
    /// instead): then each change wakes the task, which decides.
    direct: bool,
}

impl Fan {
    fn lock(&self) -> MutexGuard<'_, FanState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This fan-out as a tap for [`Stream::tap`].
    fn weak(self: &Arc<Fan>) -> Weak<dyn Tap> {
        let weak: Weak<Fan> = Arc::downgrade(self);
        weak
    }
}

impl Tap for Fan {
    fn changed(&self, stream: &Stream) {
        let wake = {
            let mut state = self.lock();
            if state.direct {
                let FanState { hub, pending, .. } = &mut *state;
                hub.catch_up(stream, pending);
                crate::hops::mark(crate::hops::Hop::Hub);
                !pending.is_empty()
            } else {
                true
            }
        };
        if wake {
            self.wake.notify_one();
        }
    }
}

struct Driver {
    fan: Arc<Fan>,
    handle: Arc<HubHandle>,
    registry: Registry,
    owner: OwnerId,
    hubs: Weak<Hubs>,
    always: bool,
    config: AttacherConfig,
    commands: mpsc::Sender<Command>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Driver {
    async fn run(
        self,
        mut terminal: ViewedTerminal,
        mut stream: Arc<Stream>,
        mut receiver: mpsc::Receiver<Command>,
    ) {
        let fan = Arc::clone(&self.fan);
        let mut status = terminal.watch_status();
        let mut exited = !status.borrow_and_update().is_running();
        // Started on a dead `always` terminal: its restart repaints too.
        let mut restarting = exited && self.always;
        fan.lock().direct = !restarting;
        let tap = fan.weak();
        stream.tap(tap.clone());
        // Bytes pushed between the hub's start and the tap: fanned out now.
        fan.changed(&stream);
        // Made once: one made each turn registered and dropped a waiter on
        // the token for every wake-up.
        let stopped = self.stop.clone().cancelled_owned();
        tokio::pin!(stopped);
        let woken = fan.wake.notified();
        tokio::pin!(woken);
        loop {
            let mut effects = Vec::new();
            let mut replace = false;
            tokio::select! {
                biased;
                () = &mut stopped => break,
                () = &mut woken => {
                    woken.set(fan.wake.notified());
                    let mut state = fan.lock();
                    // The restarted program printed before its status
                    // said running: repaint from the new program.
                    if restarting && state.hub.behind(&stream) {
                        restarting = false;
                        state.hub.discontinuity(&mut effects);
                    }
                    state.hub.catch_up(&stream, &mut effects);
                    state.direct = !restarting;
                }
                Some(command) = receiver.recv() => self.command(command, &stream, &mut effects),
                changed = status.changed() => match changed {
                    Err(_) => replace = true,
                    Ok(()) => {
                        let mut state = fan.lock();
                        // The backend wrote every byte before the status:
                        // they reach the viewers before an exit.
                        if !restarting {
                            state.hub.catch_up(&stream, &mut effects);
                        }
                        let now = status.borrow_and_update().clone();
                        match now {
                            TerminalStatus::Exited { exit } if !exited => {
                                exited = true;
                                restarting = self.always;
                                state.hub.exited(exit, !self.always, &mut effects);
                            }
                            TerminalStatus::Running if exited => {
                                // Restarted in place: repaint the new program.
                                exited = false;
                                if restarting {
                                    restarting = false;
                                    state.hub.discontinuity(&mut effects);
                                }
                            }
                            TerminalStatus::Gone { .. } => replace = true,
                            _ => {}
                        }
                        // Under the same lock: no tap fans a restarted
                        // program's bytes out before the task judged them.
                        state.direct = !restarting;
                    }
                },
            }
            {
                // The tap's effects first: they came of output before.
                let mut state = fan.lock();
                let mut tapped = std::mem::take(&mut state.pending);
                tapped.append(&mut effects);
                effects = tapped;
            }
            let ended = !self.always && exited;
            self.apply(effects, &terminal);
            if ended {
                break;
            }
            if replace {
                let Some(fresh) = self.rebuilt(&terminal).await else {
                    break;
                };
                let Ok(fresh_stream) = fresh.stream() else {
                    break;
                };
                stream.untap(&tap);
                stream = fresh_stream;
                status = fresh.watch_status();
                exited = !status.borrow_and_update().is_running();
                restarting = exited;
                *self.handle.terminal.lock().expect("hub terminal poisoned") = fresh.clone();
                terminal = fresh;
                let mut effects = Vec::new();
                {
                    let mut state = fan.lock();
                    state.hub.restream(&stream);
                    state.hub.discontinuity(&mut effects);
                    state.direct = !restarting;
                }
                stream.tap(tap.clone());
                fan.changed(&stream);
                self.apply(effects, &terminal);
            }
        }
        stream.untap(&tap);
        self.stop.cancel();
        self.forget();
        debug!(terminal = %self.handle.id, "hub ended");
    }

    /// Takes this hub out of the attacher's map (unless a newer one
    /// replaced it there), so nothing of it outlives its last viewer.
    fn forget(&self) {
        let Some(hubs) = self.hubs.upgrade() else {
            return;
        };
        let mut hubs = hubs.lock().expect("hub map poisoned");
        if hubs
            .get(&self.handle.id)
            .is_some_and(|hub| Arc::ptr_eq(hub, &self.handle))
        {
            hubs.remove(&self.handle.id);
        }
    }

    fn command(&self, command: Command, stream: &Stream, effects: &mut Vec<Effect>) {
        match command {
            Command::Join { tx, since, reply } => {
                let mut state = self.fan.lock();
                let cursor = state.hub.cursor();
                state.hub.join(tx, since, stream, effects);
                let _ = reply.send((cursor, state.hub.size()));
            }
            Command::Room(id) => self.fan.lock().hub.room(id, effects),
            Command::Captured(epoch, repaint) => {
                self.fan
                    .lock()
                    .hub
                    .snapshot(epoch, repaint, stream, effects);
            }
            Command::Resized(size) => self.fan.lock().hub.resized(size, effects),
        }
    }

    /// The terminal behind an `always` policy after its server was
    /// rebuilt; `None` when it is not `always` or no new one came in time.
    async fn rebuilt(&self, old: &ViewedTerminal) -> Option<ViewedTerminal> {
        if !self.always {
            return None;
        }
        let deadline = tokio::time::Instant::now() + REBUILD_WAIT;
        let mut pause = Duration::from_millis(20);
        let id = self.handle.id.to_string();
        while tokio::time::Instant::now() < deadline {
            match self.registry.owner(&self.owner).attach(&id).await {
                Ok(found) if !found.terminal.same(old) => return Some(found.terminal),
                // Killed (or handed to someone else): nothing will come back.
                Err(error)
                    if matches!(
                        error.code(),
                        ErrorCode::NoTerminal | ErrorCode::ForeignTerminal
                    ) =>
                {
                    return None;
                }
                _ => {}
            }
            tokio::select! {
                () = self.stop.cancelled() => return None,
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        None
    }

    fn apply(&self, effects: Vec<Effect>, terminal: &ViewedTerminal) {
        for effect in effects {
            let stop = self.stop.clone();
            let commands = self.commands.clone();
            match effect {
                Effect::WatchRoom(id, tx) => {
                    self.tasks.spawn(async move {
                        tokio::select! {
                            () = stop.cancelled() => {}
                            permit = tx.reserve() => {
                                drop(permit);
                                let _ = commands.send(Command::Room(id)).await;
                            }
                        }
                    });
                }
                Effect::Capture(epoch) => {
                    let terminal = terminal.clone();
                    let history = self.config.snapshot_history;
                    self.tasks.spawn(async move {
                        let repaint = tokio::select! {
                            () = stop.cancelled() => return,
                            repaint = repaint(&terminal, history) => repaint,
                        };
                        let _ = commands.send(Command::Captured(epoch, repaint)).await;
                    });
                }
                Effect::Farewell {
                    viewers,
                    offset,
                    size,
                    exit,
                } => {
                    // Not bound to `stop` either: the hub ends right after.
                    let terminal = terminal.clone();
                    let history = self.config.snapshot_history;
                    self.tasks.spawn(async move {
                        let repaint =
                            tokio::time::timeout(DELIVER_WAIT, repaint(&terminal, history))
                                .await
                                .ok()
                                .flatten();
                        for tx in viewers {
                            let _ = tokio::time::timeout(DELIVER_WAIT, async {
                                if let Some(repaint) = repaint.clone() {
                                    let snapshot = ViewerEvent::Snapshot {
                                        offset,
                                        size,
                                        repaint,
                                    };
                                    tx.send(snapshot).await.ok()?;
                                }
                                tx.send(ViewerEvent::Exit(exit)).await.ok()
                            })
                            .await;
                        }
                    });
                }
                Effect::Deliver(tx, event) => {
                    // Not bound to `stop`: the hub ends right after an exit,
                    // and the status must still arrive.
                    if let Err(mpsc::error::TrySendError::Full(event)) = tx.try_send(event) {
                        self.tasks.spawn(async move {
                            let _ = tokio::time::timeout(DELIVER_WAIT, tx.send(event)).await;
                        });
                    }
                }
            }
        }
    }
}

/// A repaint of the terminal: its snapshot with attributes, or (for a
/// backend without snapshots) its plain screen text.
async fn repaint(terminal: &ViewedTerminal, history: usize) -> Option<Bytes> {
    match terminal.snapshot(history).await {
        Ok(snapshot) => Some(Bytes::from(snapshot.to_ansi())),
        Err(Error::Unsupported(_)) => {
            let screen = terminal.screen().await.ok()?;
            let mut out = b"\x1b[0m\x1b[H\x1b[2J".to_vec();
            out.extend_from_slice(screen.rows().collect::<Vec<_>>().join("\r\n").as_bytes());
            let cursor = screen.cursor();
            out.extend_from_slice(
                format!("\x1b[{};{}H", cursor.row + 1, cursor.col + 1).as_bytes(),
            );
            Some(Bytes::from(out))
        }
        Err(error) => {
            debug!(%error, "snapshot for viewers failed");
            None
        }
    }
}
