//! Liveness and killing of processes the engine did not spawn as children:
//! the tmux server daemonises (forks away from the `tmux` client we run), so
//! the engine only knows its pid; a pane's programs are the server's
//! children, known by their session (see [`kill_session`]).
//!
//! A dead daemon stays a zombie until its new parent reaps it, and some
//! container init processes reap late or never; so on Linux a zombie counts
//! as dead (read from `/proc`), where `kill(pid, 0)` alone would say alive.
//! No `unsafe`: signals go through rustix. Also the environment of a
//! command run through another program (`copy_env`).
//!
//! Every function takes a [`ProcessId`] (a bare `u32` converts): with a
//! start time recorded, a pid that a new process took is treated as gone,
//! never signalled or waited on in its place.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use super::procfs;
pub use super::procfs::ProcessId;

/// How often the polling waits look again (the blocking one, and the async
/// one where pidfds are unavailable).
const POLL: Duration = Duration::from_millis(10);

/// Gives `to` the environment `from` was set up with: each variable set,
/// each removal. What a command run through another program (`setsid`,
/// the relay's `__with-parent`) needs of the one it wraps.
pub(crate) fn copy_env(from: &std::process::Command, to: &mut tokio::process::Command) {
    for (key, value) in from.get_envs() {
        match value {
            Some(value) => to.env(key, value),
            None => to.env_remove(key),
        };
    }
}

fn pid(raw: u32) -> Option<Pid> {
    i32::try_from(raw).ok().and_then(Pid::from_raw)
}

/// Whether `path` is an absolute path to a file this process may
/// execute: what the engine checks of an executable it names on a command
/// line tmux runs (the relay, the exit wrapper), since one that cannot run
/// fails there, out of sight.
pub(crate) fn runnable(path: &std::path::Path) -> bool {
    path.is_absolute()
        && path.is_file()
        && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// True while process `process` exists and has not exited (a zombie is
/// dead). Pid 0 and pids beyond `i32::MAX` are never alive, nor is a pid
/// another process took since `process`'s start time was recorded.
pub fn is_alive(process: impl Into<ProcessId>) -> bool {
    let process = process.into();
    let Some(p) = pid(process.pid) else {
        return false;
    };
    #[cfg(target_os = "linux")]
    {
        let _ = p;
        process.stat().is_some_and(|stat| !stat.has_exited())
    }
    #[cfg(not(target_os = "linux"))]
    {
        match rustix::process::test_kill_process(p) {
            Ok(()) => true,
            // EPERM: it exists but belongs to someone else.
            Err(e) => e == rustix::io::Errno::PERM,
        }
    }
}

/// True when `process` is still that process (its start time, when
/// recorded, matches) and looks like a tmux server or client (its command
/// name starts with `tmux`): checked before a SIGKILL so that a recycled
/// pid is not hit. Without a start time, an unrelated tmux that took the
/// pid passes; record one ([`ProcessId::now`]) where it matters. Where the
/// name cannot be read (not Linux), assumes yes.
pub fn looks_like_tmux(process: impl Into<ProcessId>) -> bool {
    let process = process.into();
    #[cfg(target_os = "linux")]
    {
        process.stat().is_some()
            && super::procfs::comm(process.pid).is_some_and(|comm| comm.starts_with("tmux"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        process.pid != 0
    }
}

/// Sends `signal` to `process`; a process that is already gone (or whose
/// pid another process took since its start time was recorded) is not an
/// error and gets nothing.
///
/// With a start time, the process is pinned by a pidfd before its start
/// time is compared, and signalled through that pidfd: the signal cannot
/// reach a process that took the pid in between.
///
/// # Errors
///
/// The OS error (EPERM, ...) as [`crate::Error::Io`].
pub fn signal(process: impl Into<ProcessId>, signal: Signal) -> crate::Result<()> {
    let process = process.into();
    let Some(p) = pid(process.pid) else {
        return Ok(());
    };
    let sent = match pinned(process, p) {
        Pinned::Gone => return Ok(()),
        #[cfg(target_os = "linux")]
        Pinned::Fd(fd) => rustix::process::pidfd_send_signal(&fd, signal),
        Pinned::Unpinned => rustix::process::kill_process(p, signal),
    };
    match sent {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(crate::Error::io(
            format!("sending {signal:?} to pid {}", process.pid),
            e.into(),
        )),
    }
}

/// A process held so that its pid cannot change hands under us.
enum Pinned {
    /// No such process (any more), or its pid now names another.
    Gone,
    /// A pidfd on the very process (Linux, start time recorded).
    #[cfg(target_os = "linux")]
    Fd(rustix::fd::OwnedFd),
    /// Only the pid: no start time to check, or no pidfd to be had.
    Unpinned,
}

/// Opens a pidfd on `process` and checks, after opening, that its start
/// time still matches: from then on the fd names that process only.
fn pinned(process: ProcessId, p: Pid) -> Pinned {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{PidfdFlags, pidfd_open};
        match pidfd_open(p, PidfdFlags::empty()) {
            Ok(fd) if process.start_time.is_none() || process.stat().is_some() => Pinned::Fd(fd),
            Ok(_) | Err(rustix::io::Errno::SRCH) => Pinned::Gone,
            // EMFILE, ENOSYS...: the pid alone, checked just before.
            Err(_) if process.start_time.is_some() && process.stat().is_none() => Pinned::Gone,
            Err(_) => Pinned::Unpinned,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (process, p);
        Pinned::Unpinned
    }
}

/// SIGKILLs every process of the session led by pane process `session` of
/// tmux server `server` (0: unknown) and returns them: a pane's program is
/// a session leader (tmux calls `setsid` for it), so this is everything it
/// started, except what moved to a session of its own. A pid reused by an
/// unrelated session leader since the pane exited is left alone (see
/// [`procfs::session_members`]: give `session` its start time, or a live
/// `server`). Best effort: a failed signal is logged.
pub fn kill_session(session: impl Into<ProcessId>, server: impl Into<ProcessId>) -> Vec<ProcessId> {
    let members = procfs::session_members(session, server);
    for &member in &members {
        // Gone already is no error; EPERM would be a process that is not
        // the pane's (its programs run as the engine's user).
        if let Err(error) = signal(member, Signal::KILL) {
            tracing::warn!(pid = member.pid, %error, "killing a pane process");
        }
    }
    members
}

/// Waits until `process` is dead or `timeout` passed, blocking the
/// thread. Returns whether it is dead.
pub fn wait_dead_blocking(process: impl Into<ProcessId>, timeout: Duration) -> bool {
    let process = process.into();
    let deadline = Instant::now() + timeout;
    loop {
        if !is_alive(process) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Resolves when `process` has exited, at once when it no longer exists
/// (or is no valid pid, or its pid names another process now). Pushed, not polled: a pidfd becomes readable
/// when its process exits, i.e. when it turns zombie, for any process, not
/// only our children; that is the zombie-counts-as-dead rule of
/// [`is_alive`]. Where pidfds cannot be had (not Linux, very old kernels,
/// no fd left), it falls back to polling [`is_alive`].
///
/// Without a start time, a pid recycled before the call is watched in
/// place of the gone process; with one, the pidfd is checked after it is
/// opened, so it watches `process` or nothing.
pub async fn exited(process: impl Into<ProcessId>) {
    let process = process.into();
    let Some(p) = pid(process.pid) else {
        return;
    };
    #[cfg(target_os = "linux")]
    {
        match pinned(process, p) {
            Pinned::Gone => return,
            Pinned::Fd(fd) => {
                // `AsyncFd::new` is deprecated as unsound when the caller may
                // close the fd while it is registered; here the `OwnedFd`
                // moves into the `AsyncFd`, so nothing else can close it,
                // which is the safety `register` asks for.
                #[allow(deprecated)]
                let registered = tokio::io::unix::AsyncFd::new(fd);
                if let Ok(fd) = registered {
                    // Readable means exited; an error (the reactor is shutting
                    // down) falls through to the polling below.
                    if fd.readable().await.is_ok() {
                        return;
                    }
                }
            }
            // EMFILE, ENOSYS...: poll instead.
            Pinned::Unpinned => {}
        }
    }
    let _ = p;
    while is_alive(process) {
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `process` is dead or `timeout` passed. Returns whether it
/// is dead. Built on [`exited`], so it returns the moment the process
/// exits rather than at the next poll.
pub async fn wait_dead(process: impl Into<ProcessId>, timeout: Duration) -> bool {
    tokio::time::timeout(timeout, exited(process)).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_bogus_pids_are_not() {
        assert!(is_alive(std::process::id()));
        assert!(!is_alive(0));
        assert!(!is_alive(u32::MAX));
        assert!(!looks_like_tmux(0));
    }

    #[test]
    fn reaped_child_is_dead_and_unreaped_zombie_is_dead() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        // Not reaped yet: a zombie once it exits, which must count as dead.
        assert!(wait_dead_blocking(pid, Duration::from_secs(10)));
        child.wait().expect("reap");
        assert!(!is_alive(pid));
        // Beyond any pid_max: ESRCH, which is not an error.
        signal(i32::MAX as u32, Signal::KILL).expect("a gone pid is not an error");
    }

    #[tokio::test]
    async fn exited_resolves_at_exit_including_as_an_unreaped_zombie() {
        // Gone or invalid pids resolve at once.
        exited(0).await;
        exited(u32::MAX).await;
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let start = Instant::now();
        assert!(!wait_dead(pid, Duration::from_millis(20)).await);
        // Never reaped while waiting: the zombie must count as dead.
        assert!(wait_dead(pid, Duration::from_secs(10)).await);
        assert!(start.elapsed() >= Duration::from_millis(150));
        assert!(!is_alive(pid));
        child.wait().expect("reap");
        exited(pid).await;
    }

    /// A start time that does not match stands for a process that took the
    /// pid: it is never signalled, looks like no tmux, and counts as gone.
    #[tokio::test]
    async fn a_recycled_pid_is_neither_signalled_nor_waited_on() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let real = ProcessId::now(child.id());
        let recycled = ProcessId {
            start_time: real.start_time.map(|t| t + 1),
            ..real
        };
        signal(recycled, Signal::KILL).expect("a gone process is no error");
        assert!(is_alive(real));
        assert!(!is_alive(recycled));
        assert!(!looks_like_tmux(recycled));
        assert!(wait_dead(recycled, Duration::ZERO).await);
        signal(real, Signal::KILL).expect("kill");
        assert!(wait_dead(real, Duration::from_secs(10)).await);
        child.wait().expect("reap");
    }

    /// A member whose parent died was handed to a reaper (init, or a
    /// subreaper above this process): no descendant of the leader, found all
    /// the same.
    #[test]
    fn an_orphan_of_the_session_is_found_and_killed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let marker = dir.path().join("orphan");
        let script = format!(
            "(sleep 30 & echo $! > '{}'); exec sleep 30",
            marker.display()
        );
        let mut child = std::process::Command::new("setsid")
            .args(["sh", "-c", &script])
            .spawn()
            .expect("setsid");
        let leader = child.id();
        let server = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let orphan: u32 = loop {
            let adopted = std::fs::read_to_string(&marker)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok())
                // Its parent, the subshell, is gone: it is no child of the leader.
                .filter(|&pid| {
                    procfs::stat(pid).is_some_and(|stat| {
                        i64::from(stat.ppid) != i64::from(leader)
                            && procfs::stat(u32::try_from(stat.ppid).unwrap_or(0))
                                .is_none_or(|parent| parent.session != stat.session)
                    })
                });
            if let Some(pid) = adopted {
                break pid;
            }
            assert!(Instant::now() < deadline, "no orphan appeared");
            std::thread::sleep(Duration::from_millis(10));
        };
        let members = procfs::session_members(leader, server);
        assert!(
            members.iter().any(|member| member.pid == orphan),
            "orphan {orphan} not among {members:?}"
        );
        assert_eq!(kill_session(leader, server).len(), 2);
        child.wait().expect("reap");
        assert!(
            wait_dead_blocking(orphan, Duration::from_secs(5)),
            "orphan {orphan} survived"
        );
    }

    #[test]
    fn session_of_a_setsid_child_is_found_and_killed() {
        let mut child = std::process::Command::new("setsid")
            .args(["sh", "-c", "sleep 30 & exec sleep 30"])
            .spawn()
            .expect("setsid");
        let leader = child.id();
        // This process stands in for the tmux server: the leader's parent.
        let server = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let members = loop {
            let m = procfs::session_members(leader, server);
            if m.len() == 2 {
                break m;
            }
            assert!(
                Instant::now() < deadline,
                "session never had 2 members: {m:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(members.iter().any(|member| member.pid == leader));
        assert_eq!(kill_session(leader, server).len(), 2);
        child.wait().expect("reap");
        for pid in members {
            assert!(
                wait_dead_blocking(pid, Duration::from_secs(5)),
                "{pid} survived"
            );
        }
    }
}
