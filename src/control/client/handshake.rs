//! The handshake lock: an exclusive file lock that engine processes sharing
//! one tmux server hold while a control client connects and while one
//! leaves, so that the two never overlap.
//!
//! Why: tmux 3.3a crashes (SIGSEGV, every pane lost) when a control
//! notification that goes to all control clients (`%client-detached`,
//! `%sessions-changed`, ...) is sent while another control client is still
//! identifying itself: the client is already flagged as control mode but has
//! no control state yet (`CONTROL_SHOULD_NOTIFY_CLIENT` in control-notify.c
//! lacks the `control_state != NULL` check later versions have). Its
//! identify messages span several server reads (each file descriptor it
//! passes ends one), so the window is real, and a control client leaving is
//! exactly what sends `%client-detached`. Serialising the two closes it for
//! every client the engine runs.
//!
//! The lock is advisory (`flock`), so it is dropped by the kernel if its
//! holder dies. The engine takes it on the server's directory itself (a
//! `flock` holds on a directory's descriptor as on a file's): a
//! `control.lock` file in it was one more inode a spawn allocated, and an
//! inode's allocation is the dearest file operation of a spawn churn (ext4
//! without a journal searches past every inode freed in the last minute).
//! Waiting for it is bounded: a holder that hangs costs a delay, never a
//! deadlock.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::Duration;

use tracing::warn;

/// A held handshake lock; dropping it releases the lock.
#[derive(Debug)]
pub struct HandshakeLock {
    file: File,
}

impl Drop for HandshakeLock {
    /// Unlocks before the file closes: the lock belongs to the open file
    /// description, which a child another thread is spawning shares until
    /// its `exec` closes it, so closing our descriptor alone could leave it
    /// held for that moment (a detach then seemed to keep the lock).
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Whether [`acquire`] may create the lock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Create {
    /// Connecting: a lock file a caller named may not be there yet.
    IfMissing,
    /// Detaching: only an existing path. A server's directory may be on
    /// its way out (a rolled-back spawn removes it while its client
    /// detaches), and a file created meanwhile would make that removal
    /// fail.
    Never,
}

/// Takes the lock on `path`, waiting at most `patience`. `None` when it
/// could not be had: the caller goes on without it, as it would on a tmux
/// that does not need it, and that is logged at warn (never silent),
/// except when detaching finds no lock file (no client ever connected).
pub(crate) async fn acquire(
    path: &Path,
    create: Create,
    patience: Duration,
) -> Option<HandshakeLock> {
    // Read-only first: the engine's lock is the server's directory itself
    // (`ServerHandle::control_lock`), which opens no other way; a file a
    // caller named is made only when missing.
    let opened = File::open(path).or_else(|error| match create {
        Create::IfMissing if error.kind() == std::io::ErrorKind::NotFound => File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path),
        _ => Err(error),
    });
    let file = match opened {
        Ok(file) => file,
        Err(error) if create == Create::Never && error.kind() == std::io::ErrorKind::NotFound => {
            return None;
        }
        Err(error) => {
            warn!(path = %path.display(), %error, "cannot open the handshake lock; going on without it");
            return None;
        }
    };
    let deadline = tokio::time::Instant::now() + patience;
    // Holders keep it for a handshake or a detach: a few milliseconds.
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Some(HandshakeLock { file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => {
                warn!(path = %path.display(), %error, "cannot take the handshake lock; going on without it");
                return None;
            }
        }
        if tokio::time::Instant::now() + pause > deadline {
            warn!(path = %path.display(), "handshake lock still held after {patience:?}; going on without it");
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Holds the handshake lock at `path` (a server's
/// [`ServerHandle::control_lock`](crate::tmux::ServerHandle::control_lock))
/// around a client the engine starts that is not a control client, e.g. a
/// person's `tmux attach`: its attach and detach send the notifications
/// that crash tmux 3.3a while a control client identifies. Waits at most
/// `patience`; `None` (logged at warn) when the lock could not be had.
pub async fn hold_handshake_lock(path: &Path, patience: Duration) -> Option<HandshakeLock> {
    acquire(path, Create::IfMissing, patience).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_bounded_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.lock");
        let second = Duration::from_secs(1);
        // Detaching never creates the file.
        assert!(acquire(&path, Create::Never, second).await.is_none());
        assert!(!path.exists());
        let held = acquire(&path, Create::IfMissing, second).await.unwrap();
        // Held elsewhere (flock locks belong to the open file, so a second
        // open in this process contends like another process would).
        let short = Duration::from_millis(30);
        assert!(acquire(&path, Create::Never, short).await.is_none());
        let waiter = tokio::spawn({
            let path = path.clone();
            async move {
                acquire(&path, Create::Never, Duration::from_secs(10))
                    .await
                    .is_some()
            }
        });
        drop(held);
        assert!(waiter.await.unwrap(), "released locks are taken by waiters");
        // A directory is locked as it is, never created: gone, its name
        // with a trailing slash (`ServerHandle::control_lock`) leaves no
        // file in its place.
        let gone = dir.path().join("gone");
        assert!(
            acquire(&gone.join(""), Create::IfMissing, second)
                .await
                .is_none()
        );
        assert!(!gone.exists(), "a file was made where a directory was");
        let held = acquire(dir.path(), Create::Never, second).await.unwrap();
        assert!(
            acquire(dir.path(), Create::IfMissing, short)
                .await
                .is_none()
        );
        drop(held);
        assert!(acquire(dir.path(), Create::Never, second).await.is_some());
        // A path that cannot be opened is not an error, only no lock.
        let missing = dir.path().join("missing/dir/lock");
        assert!(acquire(&missing, Create::IfMissing, second).await.is_none());
    }

    #[tokio::test]
    async fn a_released_lock_is_free_while_a_spawning_child_still_shares_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.lock");
        let held = acquire(&path, Create::IfMissing, Duration::from_secs(1))
            .await
            .unwrap();
        // What a child forked by another thread holds until its exec.
        let inherited = held.file.try_clone().unwrap();
        drop(held);
        let again = acquire(&path, Create::Never, Duration::from_millis(30)).await;
        assert!(again.is_some(), "the lock outlived its holder");
        drop(inherited);
    }
}
