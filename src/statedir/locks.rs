//! Advisory locks in the state directory, so that every process sharing
//! it (CLIs, a `serve`, library users) keeps the registry's invariants,
//! not only each process on its own.
//!
//! Each lock is an exclusive `flock(2)` on a file under `<state>/locks/`:
//!
//! | file                  | held while                                    |
//! |-----------------------|-----------------------------------------------|
//! | `name-BUCKET.lock`    | a named spawn checks its name and publishes   |
//! | `ID.send.lock`        | a send to terminal ID runs                    |
//! | `ID.restart.lock`     | a process runs ID's `always` restart loop     |
//! | `ID.spawn.lock`       | ID is being spawned, until its record is out; |
//! |                       | ID is recreated, or killed                    |
//!
//! A spawn and a recreation or kill share one file: they never overlap
//! (only a published terminal is recreated or killed, and nothing holds
//! both), and a kill then makes no file of its own (an inode's allocation
//! per kill, see below; engines before this took `ID.live.lock`, which a
//! kill still removes).
//!
//! `flock` because the kernel releases it when its holder dies, however it
//! dies (a SIGKILLed CLI leaves no stale reservation), and because it is
//! per open file: two registries in one process exclude each other too.
//! Advisory only: every engine process takes them, nothing else needs to.
//!
//! Blocking file work: callers run [`StateDir::lock`] from
//! `spawn_blocking`. Lock files of a killed terminal are removed by the
//! kill. A taker that locked a file no longer at its path (the kill
//! removed it meanwhile) takes the one there now, so two takers never hold
//! two different files of one lock.
//!
//! Names share [`NAME_LOCKS`] lock files, picked by a hash of the owner
//! and the name, made once and never removed: a file per name left one
//! behind per name used, for ever (a churn of uniquely named spawns), and
//! one made and removed per spawn cost an inode's allocation each time,
//! which ext4 makes slow under churn (`recently_deleted`: each new inode
//! skips over the freshly freed ones; file creation was ~24 % of serve's
//! CPU under a spawn churn at 500 live terminals). Two names in one file
//! only wait for each other's check (a spawn, a rename), never for more; a
//! task holds one name's lock at a time, so sharing cannot deadlock.
//!
//! A name lock file also holds a stamp (a count, its first 8 bytes), which
//! whoever holds the lock to check a name moves on ([`FileLock::bump`]) to
//! an odd value before any record with a name of that file is written, and
//! to the even one after it once the lock is let go: a process that finds
//! the stamp where it left it knows no other process has written a record
//! with such a name since, so its own entries answer whether the name is
//! taken, with no rescan of the state directory (a named spawn's rescan
//! cost O(live): at 9,000 live terminals spawns ran at ~28 per second). A
//! writer that dies in between leaves the stamp odd, which no process
//! takes for one it left. An even stamp read at any time, the lock held or
//! not, says every record of its names was written before: a scan begun
//! after reading it finds them all ([`StateDir::name_stamps`]).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use rustix::fs::{FlockOperation, flock};

use super::records::{LOCKS_DIR, StateDir};
use crate::vocab::{OwnerId, TerminalId};
use crate::{Error, Result};

/// What a per-terminal lock guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// One send at a time.
    Send,
    /// Recreation and kill: one at a time, so a terminal is recreated once.
    Live,
    /// The `always` restart loop: one process runs it.
    Restart,
    /// A spawn in progress: a reaper leaves a young server without a
    /// record alone while its spawner holds this, and takes it as
    /// abandoned once the spawner died (the kernel released it).
    Spawn,
    /// Writing the kept history: one process at a time, or two engines
    /// holding the terminal would each write its bytes.
    History,
}

impl Purpose {
    const ALL: [Purpose; 5] = [
        Purpose::Send,
        Purpose::Live,
        Purpose::Restart,
        Purpose::Spawn,
        Purpose::History,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Purpose::Send => "send",
            // The spawn's file (see the module's comment).
            Purpose::Live | Purpose::Spawn => "spawn",
            Purpose::Restart => "restart",
            Purpose::History => "history",
        }
    }
}

/// The suffix of the file engines before the shared spawn file took for
/// [`Purpose::Live`], removed with a killed terminal's locks.
const LEGACY_LIVE: &str = "live";

/// How many lock files the names of every owner share (see the module's
/// comment): few enough to make each once, enough that spawns of
/// different names seldom wait for each other (8 at once: one in ~150).
pub(crate) const NAME_LOCKS: u64 = 1024;

/// A held lock; dropping it (or the process dying) releases it.
#[derive(Debug)]
pub(crate) struct FileLock {
    file: File,
    /// The stamp to leave when let go ([`FileLock::bump`]).
    done: Option<u64>,
}

impl FileLock {
    /// Moves the lock file's stamp on to an odd value (see the module's
    /// comment), and to the even one after it when the lock is let go; the
    /// stamp it had (0 for a file never stamped). Only while the lock is
    /// held.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be read or written.
    pub(crate) fn bump(&mut self) -> Result<u64> {
        use std::os::unix::fs::FileExt;
        let stamp = read_stamp(&self.file)
            .map_err(|error| Error::io("reading a name lock's stamp", error))?;
        // Odd already: its writer died before it was done.
        let writing = (stamp | 1).wrapping_add(2);
        self.file
            .write_all_at(&writing.to_le_bytes(), 0)
            .map_err(|error| Error::io("writing a name lock's stamp", error))?;
        self.done = Some(writing.wrapping_add(1));
        Ok(stamp)
    }

    /// The even stamp the lock leaves when it is let go, after
    /// [`bump`](Self::bump).
    pub(crate) fn done_stamp(&self) -> Option<u64> {
        self.done
    }
}

/// The file of name lock `bucket` (below [`NAME_LOCKS`]).
fn name_lock_file(bucket: u64) -> String {
    format!("name-{bucket:03x}.lock")
}

/// The stamp of a name lock file (0 when it has none, or a torn one: a
/// value no process leaves).
fn read_stamp(file: &File) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0; 8];
    Ok(match file.read_at(&mut bytes, 0)? {
        8 => u64::from_le_bytes(bytes),
        _ => 0,
    })
}

impl Drop for FileLock {
    /// Unlocks before the file closes. A `flock` belongs to the open file
    /// description, which a child being spawned by another thread shares
    /// until its `exec` closes it (`O_CLOEXEC`): closing our descriptor
    /// alone would leave the lock held for that moment, and a send right
    /// after the previous one ended failed with `SEND_ACTIVE` under load.
    /// `LOCK_UN` releases it for every descriptor at once.
    fn drop(&mut self) {
        if let Some(done) = self.done {
            use std::os::unix::fs::FileExt;
            // Not written (a full disk): the stamp stays odd, which only
            // costs the next checks of these names a rescan.
            let _ = self.file.write_all_at(&done.to_le_bytes(), 0);
        }
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

/// FNV-1a, 64 bits: stable across builds, so every engine process names a
/// name's lock file the same.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl StateDir {
    /// The path of the lock file `file`.
    pub(crate) fn lock_path(&self, file: &str) -> PathBuf {
        self.root().join(LOCKS_DIR).join(file)
    }

    /// The lock file name of `owner`'s terminal name `name`: one of
    /// [`NAME_LOCKS`], by a hash (names may hold any character).
    pub(crate) fn name_lock(owner: &OwnerId, name: &str) -> String {
        let bytes = owner
            .as_str()
            .bytes()
            .chain([0])
            .chain(name.bytes())
            .collect::<Vec<u8>>();
        name_lock_file(fnv1a(bytes) % NAME_LOCKS)
    }

    /// The even stamps of every name lock file, by file name (a file not
    /// made yet has stamp 0), read without their locks: a scan begun after
    /// this finds every record of their names (see the module's comment).
    /// Files whose stamp is odd, or cannot be read, are left out.
    pub(crate) fn name_stamps(&self) -> Vec<(String, u64)> {
        (0..NAME_LOCKS)
            .filter_map(|bucket| {
                let name = name_lock_file(bucket);
                let stamp = match File::open(self.lock_path(&name)) {
                    Ok(file) => read_stamp(&file).ok()?,
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
                    Err(_) => return None,
                };
                (stamp % 2 == 0).then_some((name, stamp))
            })
            .collect()
    }

    /// The lock file name of terminal `id` for `purpose`.
    pub(crate) fn terminal_lock(id: &TerminalId, purpose: Purpose) -> String {
        format!("{id}.{}.lock", purpose.suffix())
    }

    fn open_lock(&self, file: &str) -> Result<File> {
        let path = self.lock_path(file);
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|error| Error::io(format!("opening lock {}", path.display()), error))
    }

    /// Takes the lock `file`, waiting for its holder to release it.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the lock file cannot be opened or locked.
    pub(crate) fn lock(&self, file: &str) -> Result<FileLock> {
        loop {
            // A blocking `flock` never says `WOULDBLOCK`, so `take` answers
            // `Some`; the loop only spares an `expect`.
            if let Some(lock) = self.take(file, FlockOperation::LockExclusive)? {
                return Ok(lock);
            }
        }
    }

    /// Takes the lock `file` if nobody holds it; `None` when someone does.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub(crate) fn try_lock(&self, file: &str) -> Result<Option<FileLock>> {
        self.take(file, FlockOperation::NonBlockingLockExclusive)
    }

    /// Locks the file at `file`'s path with `operation`, again on the file
    /// there now while the one locked is no longer it (see [`held`](Self::held));
    /// `None` when the lock is held (`WOULDBLOCK`).
    fn take(&self, file: &str, operation: FlockOperation) -> Result<Option<FileLock>> {
        loop {
            let handle = self.open_lock(file)?;
            match flock(&handle, operation) {
                Ok(()) => {
                    if let Some(lock) = self.held(file, handle) {
                        return Ok(Some(lock));
                    }
                }
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
                Err(errno) => {
                    return Err(Error::io(
                        format!("locking {}", self.lock_path(file).display()),
                        errno.into(),
                    ));
                }
            }
        }
    }

    /// The lock on `handle`, locked, if it is still the file at `file`'s
    /// path; `None` (unlocked) when a kill removed it meanwhile.
    fn held(&self, file: &str, handle: File) -> Option<FileLock> {
        use std::os::unix::fs::MetadataExt;
        let path = self.lock_path(file);
        let same = match (handle.metadata(), std::fs::metadata(&path)) {
            (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
            _ => false,
        };
        if !same {
            let _ = flock(&handle, FlockOperation::Unlock);
            return None;
        }
        Some(FileLock {
            file: handle,
            done: None,
        })
    }

    /// Removes the lock files of a killed terminal (an older engine's
    /// `ID.live.lock` too); missing ones are fine.
    pub(crate) fn remove_terminal_locks(&self, id: &TerminalId) {
        for purpose in Purpose::ALL {
            if purpose != Purpose::Live {
                self.remove_lock(&Self::terminal_lock(id, purpose));
            }
        }
        self.remove_lock(&format!("{id}.{LEGACY_LIVE}.lock"));
    }

    /// Removes the lock file `file`; a missing one is fine.
    pub(crate) fn remove_lock(&self, file: &str) {
        let _ = std::fs::remove_file(self.lock_path(file));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_excludes_another_open_of_it_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let id = TerminalId::mint().unwrap();
        let file = StateDir::terminal_lock(&id, Purpose::Send);
        let held = state.try_lock(&file).unwrap().unwrap();
        assert!(state.try_lock(&file).unwrap().is_none());
        drop(held);
        let again = state.lock(&file).unwrap();
        drop(again);
        let owner = OwnerId::new("a").unwrap();
        assert_ne!(
            StateDir::name_lock(&owner, "x"),
            StateDir::name_lock(&owner, "y")
        );
        state.remove_terminal_locks(&id);
        assert!(!state.lock_path(&file).exists());
    }

    #[test]
    fn a_dropped_lock_is_free_while_a_spawning_child_still_shares_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let id = TerminalId::mint().unwrap();
        let file = StateDir::terminal_lock(&id, Purpose::Send);
        let held = state.try_lock(&file).unwrap().unwrap();
        // What a child forked by another thread holds until its exec: a
        // second descriptor of the same open file description.
        let inherited = held.file.try_clone().unwrap();
        drop(held);
        let next = state.try_lock(&file).unwrap();
        assert!(next.is_some(), "the lock outlived its holder");
        drop(inherited);
    }

    #[test]
    fn a_removed_lock_file_is_no_lock_and_a_waiter_on_it_takes_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let id = TerminalId::mint().unwrap();
        let file = StateDir::terminal_lock(&id, Purpose::Live);
        let path = state.lock_path(&file);
        let held = state.lock(&file).unwrap();
        // A taker that opened the file before a kill removed it.
        let late = File::open(&path).unwrap();
        state.remove_terminal_locks(&id);
        drop(held);
        flock(&late, FlockOperation::NonBlockingLockExclusive).unwrap();
        assert!(
            state.held(&file, late).is_none(),
            "a removed file is no lock"
        );
        let next = state.try_lock(&file).unwrap().expect("the lock is free");
        assert!(state.try_lock(&file).unwrap().is_none(), "held by next");
        drop(next);
    }

    /// A check moves a name lock's stamp to an odd value while it holds the
    /// lock and to the next even one when it lets it go; only even stamps
    /// are learnt, a file not made yet as 0.
    #[test]
    fn a_name_stamp_is_odd_while_held_and_even_once_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let owner = OwnerId::new("a").unwrap();
        let file = StateDir::name_lock(&owner, "x");
        let stamp_of = |state: &StateDir| {
            let stamps = state.name_stamps();
            assert_eq!(stamps.len() as u64 + 1, NAME_LOCKS, "{file} is left out");
            stamps
                .into_iter()
                .all(|(name, stamp)| name != file && stamp == 0)
        };
        let mut held = state.lock(&file).unwrap();
        assert_eq!(held.bump().unwrap(), 0);
        assert_eq!(held.done_stamp(), Some(4));
        assert!(stamp_of(&state), "the held file's stamp is odd");
        drop(held);
        let learnt = state.name_stamps();
        assert_eq!(learnt.len() as u64, NAME_LOCKS);
        assert!(learnt.contains(&(file.clone(), 4)), "{learnt:?}");
        let mut again = state.lock(&file).unwrap();
        assert_eq!(again.bump().unwrap(), 4);
        // Left odd, as by a writer that died: the next one moves past it.
        again.done = None;
        drop(again);
        assert!(stamp_of(&state), "a dead writer's odd stamp is learnt");
        let mut next = state.lock(&file).unwrap();
        assert_eq!(next.bump().unwrap(), 7);
        assert_eq!(next.done_stamp(), Some(10));
    }

    #[test]
    fn names_share_a_fixed_set_of_lock_files_that_stay() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let owner = OwnerId::new("a").unwrap();
        let files: std::collections::HashSet<String> = (0..20_000)
            .map(|n| StateDir::name_lock(&owner, &format!("agent-{n}")))
            .collect();
        assert_eq!(
            files.len() as u64,
            NAME_LOCKS,
            "every bucket used, none more"
        );
        let file = StateDir::name_lock(&owner, "x");
        drop(state.lock(&file).unwrap());
        assert!(state.lock_path(&file).exists(), "a name's file stays");
    }

    /// Takers of a name's lock in threads, each letting go at once: never
    /// two inside at a time.
    #[test]
    fn a_name_s_lock_excludes_takers_in_threads() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let state = Arc::new(StateDir::open(dir.path().join("state")).unwrap());
        let owner = OwnerId::new("a").unwrap();
        let file = StateDir::name_lock(&owner, "x");
        let inside = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(AtomicU32::new(0));
        let takers: Vec<_> = (0..4)
            .map(|_| {
                let (state, file) = (Arc::clone(&state), file.clone());
                let (inside, entered) = (Arc::clone(&inside), Arc::clone(&entered));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let lock = state.lock(&file).unwrap();
                        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                        entered.fetch_add(1, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.store(false, Ordering::SeqCst);
                        drop(lock);
                    }
                })
            })
            .collect();
        for taker in takers {
            taker.join().unwrap();
        }
        assert_eq!(entered.load(Ordering::SeqCst), 800);
    }
}
