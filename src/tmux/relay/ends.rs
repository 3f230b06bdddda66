//! The relay's watch on its pane's process, so that the engine processes
//! linked to it hold no pidfd of their own: one descriptor per idle
//! terminal in `serve` (the link), not two.
//!
//! tmux keeps a pane and its pipe under `remain-on-exit` after its program
//! ended, so the pipe's end tells nothing of the program's: the relay
//! holds a pidfd on the process a link names ([`wire::Request::Watch`]:
//! the pane's, `#{pane_pid}`, which a respawn replaces) and tells every
//! link that asked once it is readable. The relay learns no pid by itself
//! (a respawn would leave it following the old one); the watcher that
//! wants the end asks, each time it learnt a new pane process.
//!
//! [`wire::Request::Watch`]: super::wire::Request::Watch

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// What a watch found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watch {
    /// A pidfd on the process is held: its end will be told.
    Held,
    /// The process has ended already.
    Gone,
    /// No pidfd can be had (no such system call, no descriptor left): the
    /// asker keeps its own watch.
    Unwatchable,
}

/// The processes watched, each once however many links ask.
#[derive(Default)]
pub(super) struct Ends {
    watched: Vec<(u32, OwnedFd)>,
}

impl Ends {
    /// Watches `pid` (a process of the relay's user, a child of its tmux
    /// server).
    pub(super) fn watch(&mut self, pid: u32) -> Watch {
        if self.watched.iter().any(|(held, _)| *held == pid) {
            return Watch::Held;
        }
        let Some(raw) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return Watch::Unwatchable;
        };
        match rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => {
                self.watched.push((pid, fd));
                Watch::Held
            }
            Err(rustix::io::Errno::SRCH) => Watch::Gone,
            Err(_) => Watch::Unwatchable,
        }
    }

    /// The pidfds to poll, in the order of [`Ends::pid`].
    pub(super) fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.watched.iter().map(|(_, fd)| fd.as_fd())
    }

    /// The pid of the `index`th of [`Ends::fds`].
    pub(super) fn pid(&self, index: usize) -> u32 {
        self.watched[index].0
    }

    /// Lets go of every pidfd whose process `wanted` no longer names (it
    /// ended and was told, or no link waits for it any more).
    pub(super) fn retain(&mut self, wanted: impl Fn(u32) -> bool) {
        self.watched.retain(|(pid, _)| wanted(*pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_is_held_once_and_an_ended_one_is_gone() {
        let mut ends = Ends::default();
        assert_eq!(ends.watch(std::process::id()), Watch::Held);
        assert_eq!(ends.watch(std::process::id()), Watch::Held);
        assert_eq!(ends.fds().count(), 1);
        assert_eq!(ends.pid(0), std::process::id());
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("true runs");
        let pid = child.id();
        child.wait().expect("true ends");
        assert_eq!(ends.watch(pid), Watch::Gone);
        assert_eq!(ends.watch(0), Watch::Unwatchable);
        ends.retain(|_| false);
        assert_eq!(ends.fds().count(), 0);
    }
}
