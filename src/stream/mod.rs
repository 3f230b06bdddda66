//! One terminal's output stream: every byte its program printed, numbered
//! by its offset in an epoch ([`OutputCursor`], `EPOCH:OFFSET`), the
//! newest of them held in one bounded ring of shared chunks, and one watch
//! that wakes every reader as bytes arrive.
//!
//! It is the one place the engine keeps output: a send reads its answer
//! from it, `read since CURSOR` and the command list read it, and the
//! attach hub fans it out to viewers and replays a returning viewer's
//! missed bytes from it, so a viewer's offsets and an agent's cursors name
//! the same bytes. The backend's reader is its only writer.
//!
//! The ring grows on demand: a terminal that printed nothing holds
//! nothing, however large its limit.

mod cursor;
mod osc7;
mod ring;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::{Notify, watch};

use crate::shell::ShellKind;
use crate::shell::marks::ShellIntegration;
use crate::shell::tracker::Tracker;

pub use cursor::{CursorGap, OutputCursor, OutputSince, strip_escapes};
pub(crate) use ring::Ring;

/// One terminal's output stream, its one store of output. Shared by
/// `Arc` between its writer and its readers.
#[derive(Debug)]
pub struct Stream {
    /// Changed only by a [`restart`](Stream::restart), under the ring's lock.
    epoch: AtomicU64,
    /// The most bytes held.
    limit: usize,
    ring: Mutex<Ring>,
    /// The working directory the program last reported (OSC 7).
    osc7: Mutex<osc7::Osc7>,
    /// The byte count, bumped on every chunk (and touched on a skip):
    /// what waiters and the attach hub watch.
    changes: watch::Sender<u64>,
    /// The command tracker of its integrated shell (`None`: its program
    /// is no shell started with the engine's integration), fed every byte
    /// in order by `push`: the one reader of the shell's marks.
    tracker: Option<Mutex<Tracker>>,
    /// Whether that shell is a POSIX `sh` (no `C` mark): what a tracker
    /// made anew after a restart needs.
    sh: bool,
    /// It began after its program did (an engine linked to a running
    /// terminal): its first byte is not the program's.
    joined: bool,
    /// Why the pane's output stopped reaching this process while the pane
    /// lived on (see [`Stream::lost`]).
    lost: Mutex<Option<String>>,
    /// Wakes the terminal's watcher on a loss, which tries to link again.
    lost_wake: Notify,
    /// Readers run in the writer's own context on every change (see
    /// [`Tap`]); empty, it allocates nothing.
    taps: Mutex<Vec<Weak<dyn Tap>>>,
}

/// A reader the stream runs itself, in its writer's context, on every
/// change (bytes, a skip, a loss, a restart), after its watchers are
/// woken: the attach hub's fan-out, so a viewer's queue gets an echo with
/// no task of the hub's between (a task's wake-up cost each echo ~15 µs).
/// It runs under the writer's locks (the control client routes output
/// under its routing lock): it must never wait, and whatever lock it takes
/// must never be held by anyone who then changes the stream, taps or
/// untaps it.
pub(crate) trait Tap: Send + Sync {
    /// `stream` changed.
    fn changed(&self, stream: &Stream);
}

impl Stream {
    /// An empty stream in a fresh epoch, holding at most `limit` bytes:
    /// what a backend feeds a terminal's output into (see
    /// [`push`](Stream::push)), and what a send's output is read from.
    pub fn new(limit: usize) -> Stream {
        Stream {
            epoch: AtomicU64::new(OutputCursor::new_epoch()),
            limit,
            ring: Mutex::new(Ring::default()),
            osc7: Mutex::new(osc7::Osc7::default()),
            changes: watch::Sender::new(0),
            tracker: None,
            sh: false,
            joined: false,
            lost: Mutex::new(None),
            lost_wake: Notify::new(),
            taps: Mutex::new(Vec::new()),
        }
    }

    /// Runs `tap` on every change from now on, until it is dropped or
    /// [`untap`](Stream::untap)ped.
    pub(crate) fn tap(&self, tap: Weak<dyn Tap>) {
        let mut taps = self.taps.lock().unwrap_or_else(PoisonError::into_inner);
        taps.retain(|tap| tap.strong_count() > 0);
        taps.push(tap);
    }

    /// Stops running `tap`; once it returns, no change runs it any more.
    pub(crate) fn untap(&self, tap: &Weak<dyn Tap>) {
        self.taps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|held| held.strong_count() > 0 && !held.ptr_eq(tap));
    }

    /// Runs the taps (after the watchers were woken: the task a tap wakes
    /// runs next); forgets the dropped ones.
    fn tapped(&self) {
        let mut taps = self.taps.lock().unwrap_or_else(PoisonError::into_inner);
        if taps.is_empty() {
            return;
        }
        taps.retain(|tap| match tap.upgrade() {
            Some(tap) => {
                tap.changed(self);
                true
            }
            None => false,
        });
    }

    /// This stream as a reader of a terminal's relay (the raw path, see
    /// `tmux::relay`): it counts in the relay's epoch, which every engine
    /// process linked to the terminal shares, and its first byte is the
    /// relay's offset `start`. `None` keeps it a stream of its own.
    #[must_use]
    pub(crate) fn shared(mut self, origin: Option<(u64, u64)>) -> Stream {
        if let Some((epoch, start)) = origin {
            *self.epoch.get_mut() = epoch;
            self.ring
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .total = start;
            self.changes.send_replace(start);
        }
        self
    }

    /// This stream, saying which shell its program is when it was started
    /// with the engine's integration (its commands are tracked then) and
    /// whether the stream `joined` it running.
    #[must_use]
    pub(crate) fn shell(mut self, integrated: Option<ShellKind>, joined: bool) -> Stream {
        self.sh = integrated == Some(ShellKind::Sh);
        self.tracker = integrated.map(|_| Mutex::new(Tracker::new(self.sh)));
        self.joined = joined;
        self
    }

    /// The command tracker, when its program is an integrated shell (a std
    /// mutex: never held across an await).
    pub(crate) fn tracker(&self) -> Option<MutexGuard<'_, Tracker>> {
        self.tracker
            .as_ref()
            .map(|tracker| tracker.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Someone saw the shell's marks stop (see
    /// [`Tracker::stopped`]).
    pub(crate) fn marks_stopped(&self) {
        if let Some(mut tracker) = self.tracker() {
            tracker.stopped();
        }
    }

    /// Whether the shell integration works (`show`'s `shell_integration`).
    pub(crate) fn shell_integration(&self) -> ShellIntegration {
        let whole = self.whole();
        let printed = self.held().total > 0;
        self.tracker()
            .map_or(ShellIntegration::NeverStarted, |tracker| {
                tracker.integration(whole, printed)
            })
    }

    /// Whether it holds its program's output from the first byte on (not
    /// joined later, nothing evicted yet).
    pub(crate) fn whole(&self) -> bool {
        !self.joined && self.held().start() == 0
    }

    /// Whether it began after its program did (an engine linked to a
    /// running terminal).
    pub(crate) fn joined(&self) -> bool {
        self.joined
    }

    /// The epoch its offsets count in.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The held window, for readers that take several looks at once (a
    /// std mutex: never held across an await).
    pub(crate) fn held(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends output and wakes the watchers: the one way bytes enter
    /// the stream, called by whatever reads the terminal's output.
    pub fn push(&self, bytes: Bytes) {
        self.osc7
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .scan(&bytes);
        // Fed before the bytes are held and watchers woken, so whoever
        // wakes finds the commands up to date.
        if let Some(mut tracker) = self.tracker() {
            let offset = self.held().total;
            tracker.feed(&bytes, offset, SystemTime::now());
        }
        let total = {
            let mut ring = self.held();
            ring.push(bytes, self.limit);
            ring.total
        };
        self.changes.send_replace(total);
        self.tapped();
    }

    /// Output was skipped here (the reader's subscription lagged and
    /// resynced): what was held before does not lead up to what follows.
    pub(crate) fn skipped(&self) {
        if let Some(mut tracker) = self.tracker() {
            tracker.skipped();
        }
        {
            let mut ring = self.held();
            ring.gaps += 1;
            ring.skipped_at = ring.total;
        }
        self.changes.send_modify(|_| {});
        self.tapped();
    }

    /// This process fell behind the terminal's relay further than it holds:
    /// the bytes before `to` never arrive, and output goes on at `to`
    /// (offsets stay the relay's, so cursors keep their meaning in every
    /// process).
    pub(crate) fn skip_to(&self, to: u64) {
        if let Some(mut tracker) = self.tracker() {
            tracker.skipped();
        }
        self.held().jump(to);
        self.changes.send_modify(|_| {});
        self.tapped();
    }

    /// The pane's output stopped reaching this process while the pane may
    /// live on (its relay was killed, its pipe replaced), with why: the
    /// terminal's watcher links again ([`Stream::lost_notified`]).
    pub(crate) fn lose(&self, why: String) {
        *self.lost.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        self.lost_wake.notify_one();
        self.changes.send_modify(|_| {});
        self.tapped();
    }

    /// Resolves once the output is lost (see [`Stream::lose`]): what the
    /// terminal's watcher waits on to link again.
    pub(crate) async fn lost_notified(&self) {
        self.lost_wake.notified().await;
    }

    /// The output reaches this process again, from a new relay's stream
    /// (its `epoch`, from its offset `start`): what was held belongs to the
    /// old stream, whose cursors are stale from now on.
    pub(crate) fn restart(&self, epoch: u64, start: u64) {
        if let Some(mut tracker) = self.tracker() {
            // Its commands' offsets counted in the old stream.
            *tracker = Tracker::new(self.sh);
        }
        {
            let mut ring = self.held();
            ring.restart(start);
            self.epoch.store(epoch, Ordering::Release);
        }
        *self.lost.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.changes.send_modify(|_| {});
        self.tapped();
    }

    /// The output reaches this process again from the same stream.
    pub(crate) fn found(&self) {
        *self.lost.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Why the output stopped reaching this process, once it has (its
    /// relay was killed or its pipe replaced; the terminal's watcher links
    /// again).
    pub fn lost(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The working directory the program reported last (OSC 7, which the
    /// engine's shell integration prints at every prompt), when one was
    /// reported by this machine.
    pub fn reported_directory(&self) -> Option<std::path::PathBuf> {
        self.osc7
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest
            .clone()
    }

    /// A receiver of the byte count, woken on every chunk and skip.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The cursor at the end of the output now.
    pub fn end(&self) -> OutputCursor {
        self.at(self.held().total)
    }

    fn at(&self, offset: u64) -> OutputCursor {
        OutputCursor {
            epoch: self.epoch(),
            offset,
        }
    }

    /// The output from `since` (`None`: the oldest byte held) to now, as
    /// far as the ring holds it: a cursor of another epoch, or past the
    /// end, is stale; one older than the ring resumes at its oldest byte.
    pub fn read(&self, since: Option<OutputCursor>) -> OutputSince {
        let ring = self.held();
        let oldest = ring.start();
        let (start, gap) = match since {
            None => (oldest, None),
            Some(cursor) if cursor.epoch != self.epoch() || cursor.offset > ring.total => {
                (oldest, Some(CursorGap::Stale))
            }
            Some(cursor) if cursor.offset < oldest => (oldest, Some(CursorGap::Evicted)),
            Some(cursor) => (cursor.offset, None),
        };
        OutputSince {
            bytes: ring.since(start).0,
            from: self.at(start),
            gap,
        }
    }

    /// When the byte at `at` arrived, while the ring holds it (`None` for
    /// another epoch): what a command's duration is measured by.
    pub fn time_at(&self, at: OutputCursor) -> Option<SystemTime> {
        (at.epoch == self.epoch())
            .then(|| self.held().time_at(at.offset))
            .flatten()
    }
}

/// A stream of at most `limit` bytes that was fed `chunks`, for tests.
#[cfg(test)]
pub(crate) fn stream_of(chunks: &[&'static [u8]], limit: usize) -> Stream {
    let stream = Stream::new(limit);
    for chunk in chunks {
        stream.push(Bytes::from_static(chunk));
    }
    stream
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_at_inside_behind_and_ahead_of_the_window() {
        let stream = stream_of(&[b"hello ", b"world\r\n", b"$ "], 8);
        let epoch = stream.epoch();
        let at = |offset| OutputCursor { epoch, offset };
        assert_eq!(stream.end(), at(15));
        // Inside: exactly the bytes after it.
        let read = stream.read(Some(at(10)));
        assert_eq!(
            (&read.bytes[..], read.from, read.gap),
            (&b"d\r\n$ "[..], at(10), None)
        );
        assert_eq!(read.end(), stream.end());
        // At the end: nothing, no gap.
        let read = stream.read(Some(at(15)));
        assert_eq!((read.bytes.len(), read.gap), (0, None));
        // Behind the window: from the oldest byte held, evicted.
        let read = stream.read(Some(at(2)));
        assert_eq!((&read.bytes[..], read.from), (&b"orld\r\n$ "[..], at(7)));
        assert_eq!(read.gap, Some(CursorGap::Evicted));
        // Ahead of the end (a count from another stream): stale.
        let read = stream.read(Some(at(16)));
        assert_eq!((read.from, read.gap), (at(7), Some(CursorGap::Stale)));
        // No cursor: everything held.
        assert_eq!(stream.read(None).bytes.len(), 8);
    }

    #[test]
    fn a_cursor_of_another_epoch_is_stale() {
        let old = stream_of(&[b"before the restart"], 64);
        let new = stream_of(&[b"after"], 64);
        assert_ne!(old.epoch(), new.epoch());
        let read = new.read(Some(old.end()));
        assert_eq!(
            (&read.bytes[..], read.gap),
            (&b"after"[..], Some(CursorGap::Stale))
        );
        assert_eq!(read.from.epoch, new.epoch());
        assert!(new.time_at(old.end()).is_none());
        let first = OutputCursor {
            epoch: new.epoch(),
            offset: 0,
        };
        assert!(new.time_at(first).is_some());
    }

    #[test]
    fn watchers_wake_on_bytes_and_skips() {
        let stream = Stream::new(16);
        let mut changes = stream.changes();
        assert!(!changes.has_changed().unwrap_or(true));
        stream.push(Bytes::from_static(b"abc"));
        assert!(changes.has_changed().unwrap_or(false));
        assert_eq!(*changes.borrow_and_update(), 3);
        stream.skipped();
        assert!(changes.has_changed().unwrap_or(false));
        let ring = stream.held();
        assert_eq!((ring.gaps, ring.skipped_at), (1, 3));
    }

    /// Counts the changes it saw and the byte count at the last one.
    #[derive(Default)]
    struct Counter(Mutex<(usize, u64)>);

    impl Tap for Counter {
        fn changed(&self, stream: &Stream) {
            let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            seen.0 += 1;
            seen.1 = stream.held().total;
        }
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_tap_runs_on_every_change_until_untapped_or_dropped() {
        let stream = Stream::new(16);
        let kept = std::sync::Arc::new(Counter::default());
        let dropped = std::sync::Arc::new(Counter::default());
        let kept_weak: Weak<dyn Tap> = std::sync::Arc::downgrade(&kept) as Weak<dyn Tap>;
        stream.tap(kept_weak.clone());
        stream.tap(std::sync::Arc::downgrade(&dropped) as Weak<dyn Tap>);
        stream.push(Bytes::from_static(b"abc"));
        // It sees the bytes already held when it runs.
        assert_eq!(*kept.0.lock().unwrap(), (1, 3));
        assert_eq!(*dropped.0.lock().unwrap(), (1, 3));
        stream.skipped();
        stream.skip_to(10);
        stream.lose("gone".to_owned());
        stream.restart(stream.epoch() + 1, 0);
        assert_eq!(kept.0.lock().unwrap().0, 5);
        drop(dropped);
        stream.push(Bytes::from_static(b"d"));
        assert_eq!(*kept.0.lock().unwrap(), (6, 1));
        assert_eq!(
            stream.taps.lock().unwrap().len(),
            1,
            "the dropped tap is forgotten"
        );
        stream.untap(&kept_weak);
        stream.push(Bytes::from_static(b"e"));
        assert_eq!(kept.0.lock().unwrap().0, 6);
        assert!(stream.taps.lock().unwrap().is_empty());
    }

    #[test]
    fn an_idle_stream_holds_nothing() {
        // Memory per idle terminal counts at thousands of terminals: the
        // limit is a bound,
        // not an allocation.
        let stream = Stream::new(4 << 20);
        let ring = stream.held();
        assert_eq!((ring.total, ring.start()), (0, 0));
        assert_eq!(ring.chunks(0, 0).map(|c| c.len()), Some(0));
    }
}
