//! The kept history written by the terminal's resident relay
//! ([`crate::tmux::Keeper`]): the one process that reads every byte the
//! pane writes, for as long as the pane lives.
//!
//! A writer inside an engine process lost bytes whenever it fell more
//! than its stream's ring behind (a flood on a loaded machine), and wrote
//! nothing while no engine process held the terminal (a spawn from the
//! command line, then nothing). The relay reads tmux's pipe itself and
//! writes each read before the next, so neither can happen: a slow disk
//! slows the relay, and tmux keeps the pipe's bytes meanwhile.
//!
//! The engine process that wants the history kept writes a [`KeepOrder`]
//! to the server directory ([`ORDER_FILE`]) and asks the relay
//! ([`crate::tmux::relay`]'s keep request); the relay then takes the
//! history's writer lock (the same flock an engine process writing it
//! would take, so one writer at a time across every process), maps its
//! stream's epoch in `meta.json` and writes from the offset asked for.
//! `meta.json` is saved when the mapping changes and at most once per
//! [`FLUSH_INTERVAL`] after output (the title, the working directory),
//! and at the end; an idle relay does not wake for it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};

use super::title::Titles;
use super::{FLUSH_INTERVAL, Kept};
use crate::screen::asciicast::{Header, Writer};
use crate::vocab::Size;

/// The order's file in the server directory (`0600`, in a `0700`
/// directory).
pub(crate) const ORDER_FILE: &str = "keep.json";

/// What the relay needs to keep a terminal's history: written by the
/// engine process that asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeepOrder {
    /// The history's directory.
    pub(crate) history: PathBuf,
    /// Its byte limit.
    pub(crate) limit: u64,
    /// Whether an asciicast recording goes beside it.
    pub(crate) record: bool,
    /// The history's writer lock (a flock file in the state directory).
    pub(crate) lock: PathBuf,
    /// The boot id to note in `meta.json`.
    pub(crate) boot_id: Option<String>,
    /// The terminal's size, when its history knows none yet.
    pub(crate) size: Option<Size>,
}

impl KeepOrder {
    /// Writes the order into the server directory `dir`, atomically.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub(crate) fn write(&self, dir: &Path) -> io::Result<()> {
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        crate::statedir::write_atomically(&dir.join(ORDER_FILE), ".tmp-keep-", &json)
    }

    fn read(dir: &Path) -> io::Result<KeepOrder> {
        let bytes = fs::read(dir.join(ORDER_FILE))?;
        serde_json::from_slice(&bytes).map_err(io::Error::other)
    }
}

/// The relay's keeper of the kept history (see the module's docs).
#[derive(Debug, Default)]
pub struct RelayKeeper {
    writing: Option<Writing>,
}

#[derive(Debug)]
struct Writing {
    kept: Kept,
    /// The history's writer lock, held while this relay writes.
    _lock: File,
    titles: Titles,
    recording: Option<Writer<File>>,
    started: Instant,
    /// When `meta.json` is next saved, while something waits to be.
    due: Option<Instant>,
    /// The terminal's tmux server: this relay's parent when it started.
    server: u32,
    /// The history offset of the next byte it is given (its stream's base
    /// plus its stream offset): a write the disk refused is a hole, and
    /// the next lands past it, where its offset says.
    next: u64,
}

/// Takes the writer lock at `path` without waiting.
fn take_lock(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(io::Error::other(
            "the kept history is written by another process",
        )),
        Err(errno) => Err(errno.into()),
    }
}

impl crate::tmux::Keeper for RelayKeeper {
    fn start(&mut self, dir: &Path, epoch: u64, from: u64, oldest: u64) -> io::Result<u64> {
        let order = KeepOrder::read(dir)?;
        let lock = take_lock(&order.lock)?;
        let kept = Kept::open(order.history, order.limit).map_err(io::Error::other)?;
        kept.write_here();
        let first = kept.resume(epoch, from, oldest, u64::MAX);
        let next = kept.stream_base(epoch).unwrap_or_else(|| kept.end()) + first;
        kept.update(|meta| {
            if order.boot_id.is_some() {
                meta.boot_id.clone_from(&order.boot_id);
            }
            meta.size = meta.size.or(order.size);
        });
        // The mapping is on disk before any cursor of this stream is read.
        kept.save_meta().map_err(io::Error::other)?;
        let recording = order.record.then(|| recorder(&kept, epoch)).flatten();
        self.writing = Some(Writing {
            kept,
            _lock: lock,
            titles: Titles::default(),
            recording,
            started: Instant::now(),
            due: None,
            server: std::os::unix::process::parent_id(),
            next,
        });
        Ok(first)
    }

    fn write(&mut self, bytes: &[u8]) {
        let Some(writing) = &mut self.writing else {
            return;
        };
        // A failed write is a hole, counted in `meta.gaps` by `append_at`;
        // the relay goes on serving the stream.
        let _ = writing.kept.append_at(writing.next, bytes);
        writing.next += bytes.len() as u64;
        if let Some(recording) = &mut writing.recording {
            let _ = recording.output(writing.started.elapsed(), bytes);
        }
        if let Some(title) = writing.titles.scan(bytes) {
            writing.kept.update(|meta| meta.title = Some(title));
        }
        writing
            .due
            .get_or_insert_with(|| Instant::now() + FLUSH_INTERVAL);
    }

    fn due(&self) -> Option<Instant> {
        self.writing.as_ref()?.due
    }

    fn tick(&mut self) {
        if let Some(writing) = &mut self.writing {
            writing.due = None;
            save(&writing.kept, writing.server);
        }
    }

    fn finish(&mut self) {
        if let Some(writing) = self.writing.take() {
            save(&writing.kept, writing.server);
        }
    }
}

/// Saves `meta.json` with the program's working directory as it is now
/// (as `server`'s pane shows it).
fn save(kept: &Kept, server: u32) {
    if let Some(cwd) = pane_directory(server) {
        kept.update(|meta| meta.cwd = Some(cwd));
    }
    let _ = kept.save_meta();
}

/// The asciicast v2 recording of stream `epoch` beside the history:
/// `<epoch>.cast` (`0600`), bounded by the history's limit, one output
/// event per read of the pipe.
fn recorder(kept: &Kept, epoch: u64) -> Option<Writer<File>> {
    let path = kept.dir().join(format!("{epoch:016x}.cast"));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .ok()?;
    let size = kept.meta().size.unwrap_or_default();
    Writer::new(file, &Header::now(size), kept.limit).ok()
}

/// The working directory of the program in front of this relay's pane:
/// tmux runs the relay as a child of the terminal's server, beside the
/// pane's process (the one child with a controlling terminal that leads
/// its session). `None` once `server`, the relay's parent when it
/// started, is not its parent any more: a server that died left its
/// relay and its pane's processes to the same reaper, beside other
/// terminals' orphans, whose directory is not this terminal's (a reboot
/// test read another pane's there, and the restore started in it).
fn pane_directory(server: u32) -> Option<PathBuf> {
    use crate::tmux::procfs;
    if std::os::unix::process::parent_id() != server {
        return None;
    }
    let me = std::process::id();
    let pane = procfs::children(server)?
        .into_iter()
        .filter(|&pid| pid != me)
        .find(|&pid| {
            procfs::stat(pid).is_some_and(|stat| {
                stat.tty != 0 && i64::from(stat.session) == i64::from(pid) && !stat.has_exited()
            })
        })?;
    let program = crate::tmux::exit_handshake::program_pid(pane);
    let front = procfs::foreground_group(procfs::ProcessId::now(pane))
        .and_then(|group| u32::try_from(group).ok())
        .filter(|&group| group != pane)
        .or(program)?;
    procfs::cwd(front).or_else(|| procfs::cwd(program?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::stream::OutputCursor;
    use crate::tmux::Keeper;

    fn order(root: &Path) -> KeepOrder {
        KeepOrder {
            history: root.join("history"),
            limit: 1 << 20,
            record: true,
            lock: root.join("history.lock"),
            boot_id: Some("boot-a".into()),
            size: Some(Size { cols: 80, rows: 24 }),
        }
    }

    /// A relay whose server died reads no directory: the process it
    /// would look among (here a `sh` with a pane-like child: a session
    /// leader with a terminal, in a directory of its own) is not its
    /// parent. Asked with that `sh` as its server, it would read there.
    #[test]
    fn a_relay_reads_no_directory_once_its_server_is_not_its_parent() {
        use std::time::{Duration, Instant};
        let (_main, tty) = crate::tmux::reading::test_pty();
        let elsewhere = tempfile::tempdir().unwrap();
        // `setsid -c`: a new session whose controlling terminal is its
        // stdin (given explicitly: an `&` job's is /dev/null otherwise).
        let mut server = std::process::Command::new("/bin/sh")
            .args(["-c", "exec 3<&0; setsid -c sleep 300 <&3 & wait"])
            .current_dir(elsewhere.path())
            .stdin(tty)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let pane = || {
            crate::tmux::procfs::children(server.id())?
                .into_iter()
                .find(|&pid| {
                    crate::tmux::procfs::stat(pid).is_some_and(|stat| {
                        stat.tty != 0 && i64::from(stat.session) == i64::from(pid)
                    })
                })
        };
        let pane = loop {
            if let Some(pane) = pane() {
                break pane;
            }
            assert!(Instant::now() < deadline, "setsid never ran");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_ne!(std::os::unix::process::parent_id(), server.id());
        assert_eq!(pane_directory(server.id()), None, "not this relay's server");
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(i32::try_from(pane).unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        server.wait().unwrap();
    }

    /// The keeper maps its stream, writes every byte it is given, notes
    /// the title and saves `meta.json` when due and at the end; a second
    /// keeper of the same history is refused while the first holds it.
    #[test]
    fn keeps_every_byte_under_its_epoch_and_one_writer_at_a_time() {
        let root = tempfile::tempdir().unwrap();
        let server = ordered(root.path());
        let mut keeper = RelayKeeper::default();
        assert_eq!(keeper.start(&server, 7, 0, 0).unwrap(), 0);
        let mut other = RelayKeeper::default();
        assert!(other.start(&server, 8, 0, 0).is_err(), "one writer");
        let mut all = Vec::new();
        for n in 0..1000 {
            let line = format!("line {n}\r\n");
            keeper.write(line.as_bytes());
            all.extend_from_slice(line.as_bytes());
        }
        keeper.write(b"\x1b]2;the title\x07");
        all.extend_from_slice(b"\x1b]2;the title\x07");
        assert!(keeper.due().is_some(), "a save is due after output");
        keeper.finish();
        assert!(keeper.due().is_none());
        let kept = Kept::existing(root.path().join("history"), 1 << 20)
            .unwrap()
            .unwrap();
        let cursor = OutputCursor {
            epoch: 7,
            offset: 0,
        };
        assert_eq!(&kept.read(Some(cursor)).unwrap().bytes[..], &all[..]);
        let meta = kept.meta();
        assert_eq!(meta.title.as_deref(), Some("the title"));
        assert_eq!(meta.boot_id.as_deref(), Some("boot-a"));
        assert_eq!(meta.gaps, 0);
        assert!(
            root.path()
                .join("history")
                .join(format!("{:016x}.cast", 7))
                .is_file()
        );
        // Finished: the lock is free for the next writer, which goes on
        // where this stream was written to.
        assert_eq!(other.start(&server, 7, 0, 0).unwrap(), all.len() as u64);
    }

    /// A server directory with the keep order in it, under `root`.
    fn ordered(root: &Path) -> PathBuf {
        let server = root.join("server");
        fs::create_dir(&server).unwrap();
        order(root).write(&server).unwrap();
        server
    }

    /// A restore's history (`old output\r\n`, 12 bytes, replayed first by
    /// stream 9), kept by the relay holding the stream from `oldest` on,
    /// which then writes `new\r\n`; read back from the files.
    fn restored(root: &Path, oldest: u64) -> Kept {
        let server = ordered(root);
        let kept = Kept::open(root.join("history"), 1 << 20).unwrap();
        kept.append(b"old output\r\n").unwrap();
        kept.save_meta().unwrap();
        let mut keeper = RelayKeeper::default();
        assert_eq!(keeper.start(&server, 9, 12, oldest).unwrap(), oldest);
        keeper.write(b"new\r\n");
        keeper.finish();
        Kept::existing(root.join("history"), 1 << 20)
            .unwrap()
            .unwrap()
    }

    /// A restored stream begins with the kept bytes it printed again:
    /// asked from there, its byte 0 maps onto them, nothing is written
    /// twice.
    #[test]
    fn a_restored_stream_maps_onto_the_bytes_it_replays() {
        let root = tempfile::tempdir().unwrap();
        let kept = restored(root.path(), 12);
        let cursor = OutputCursor {
            epoch: 9,
            offset: 4,
        };
        assert_eq!(
            &kept.read(Some(cursor)).unwrap().bytes[..],
            b"output\r\nnew\r\n"
        );
        assert_eq!(kept.meta().gaps, 0);
    }

    /// The relay no longer held the bytes asked for (its window passed
    /// them): they are a hole, and every cursor of the stream names its
    /// own bytes. The keeper counted the loss but wrote on right after
    /// the history's end, so every offset past the hole read 8 bytes
    /// further on than it named.
    #[test]
    fn bytes_the_relay_no_longer_held_are_a_hole() {
        let root = tempfile::tempdir().unwrap();
        // 8 bytes after the replay the relay evicted before the ask.
        let kept = restored(root.path(), 20);
        let at = |offset| kept.read(Some(OutputCursor { epoch: 9, offset })).unwrap();
        let before = at(4);
        assert_eq!((&before.bytes[..], before.gap), (&b"output\r\n"[..], None));
        let past = at(20);
        assert_eq!((&past.bytes[..], past.gap), (&b"new\r\n"[..], None));
        let inside = at(before.end().offset);
        assert_eq!(inside.gap, Some(crate::stream::CursorGap::Evicted));
        assert_eq!(
            (inside.from.offset, &inside.bytes[..]),
            (20, &b"new\r\n"[..])
        );
        assert_eq!(kept.meta().gaps, 1, "the hole is counted");
    }

    /// A write the disk refused is a hole of its own length: the
    /// relay's next bytes land where their offsets say.
    #[test]
    fn a_write_the_disk_refused_leaves_a_hole_in_the_relays_history() {
        let root = tempfile::tempdir().unwrap();
        let server = ordered(root.path());
        let mut keeper = RelayKeeper::default();
        assert_eq!(keeper.start(&server, 7, 0, 0).unwrap(), 0);
        keeper.write(b"one\r\n");
        let history = root.path().join("history");
        let segment = history.join(super::super::segment_name(0));
        fs::remove_file(&segment).unwrap();
        std::os::unix::fs::symlink("/dev/full", &segment).unwrap();
        keeper.write(b"lost\r\n");
        keeper.write(b"three\r\n");
        keeper.finish();
        let kept = Kept::existing(history, 1 << 20).unwrap().unwrap();
        let read = kept
            .read(Some(OutputCursor {
                epoch: 7,
                offset: 11,
            }))
            .unwrap();
        assert_eq!((&read.bytes[..], read.gap), (&b"three\r\n"[..], None));
        assert_eq!(kept.meta().gaps, 1);
    }
}
