//! What `/proc` tells about processes: the one parser of `/proc/PID/stat`,
//! [`ProcessId`] (a pid with its start time, proof against pid reuse),
//! a pane's foreground process group (how it waits for input is
//! `reading`'s), and every process of a pane's session (for killing the whole
//! tree, see [`process::kill_session`](super::process::kill_session)).
//!
//! Linux only in substance; elsewhere the answers are conservative (no stat,
//! no foreground group known, nothing blocked, no session members found).
//! Reads only; signalling is `process`'s job. It does not use `process`
//! either, which builds its liveness check on [`stat`].
//!
//! Finding the members of a pane's session (the kill's walk of the
//! process tree and the reapers' orphans) is `session.rs`.

mod session;

pub use self::session::session_members;

/// The fields of `/proc/PID/stat` the engine, its fixtures and benchmarks
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// One-letter state: `R`, `S`, `D`, `Z`, ...
    pub state: u8,
    /// Parent process.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// Session id.
    pub session: i32,
    /// The controlling terminal's device number, 0 for none.
    pub tty: i32,
    /// Foreground process group of the controlling terminal (-1 if none).
    pub tpgid: i32,
    /// CPU time in user mode, in clock ticks.
    pub utime: u64,
    /// CPU time in kernel mode, in clock ticks.
    pub stime: u64,
    /// When the process started, in clock ticks since boot: with the pid,
    /// it names one process even after the pid is reused.
    pub start_time: u64,
}

impl Stat {
    /// Whether the process has exited: a zombie (`Z`) its parent has not
    /// reaped yet, or dead (`X`, `x`). Its pid still exists, but nothing
    /// runs and no signal has any effect.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses `/proc/PID/stat`: `PID (COMM) STATE PPID PGRP SESSION TTY TPGID
/// ...`, `None` when a field is missing or malformed. COMM may hold spaces,
/// `)` and bytes that are not UTF-8, so fields are read after the last `)`.
pub fn parse_stat(text: &[u8]) -> Option<Stat> {
    let after = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(after + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // Fields are numbered from 1 as in proc(5); STATE, the first after
    // COMM, is field 3. Each call must ask for a later field than the last.
    let mut next_field = 3;
    let mut field = |number: usize| {
        let found = fields.nth(number.checked_sub(next_field)?);
        next_field = number + 1;
        found
    };
    let state = *field(3)?.as_bytes().first()?;
    let ppid = field(4)?.parse().ok()?;
    let pgrp = field(5)?.parse().ok()?;
    let session = field(6)?.parse().ok()?;
    let tty = field(7)?.parse().ok()?;
    let tpgid = field(8)?.parse().ok()?;
    let utime = field(14)?.parse().ok()?;
    let stime = field(15)?.parse().ok()?;
    let start_time = field(22)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        pgrp,
        session,
        tty,
        tpgid,
        utime,
        stime,
        start_time,
    })
}

/// One process, named so that a reused pid does not pass for it: its pid
/// and, where known, its start time ([`Stat::start_time`]). Pid 0 names
/// no process (unknown).
///
/// A bare pid converts with no start time: checks then trust the pid
/// alone, as `kill(2)` does. Record one with [`ProcessId::now`] as soon as
/// the pid is learnt, while the process is known to be the right one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// The pid; 0 when unknown.
    pub pid: u32,
    /// Its start time in clock ticks since boot, `None` when not known
    /// (not read, not Linux, or the process was already gone).
    pub start_time: Option<u64>,
}

impl ProcessId {
    /// Process `pid` as it is now, its start time read from `/proc`.
    pub fn now(pid: u32) -> ProcessId {
        let start_time = if pid == 0 {
            None
        } else {
            stat(pid).map(|stat| stat.start_time)
        };
        ProcessId { pid, start_time }
    }

    /// This process when it is named by pid and start time, else `None`
    /// (pid 0, or no start time): the only form a record keeps or a kill
    /// trusts, so "unknown" is `None`, never pid 0.
    pub fn known(self) -> Option<ProcessId> {
        (self.pid != 0 && self.start_time.is_some()).then_some(self)
    }

    /// Its stat, `None` when the pid names no process or another one (the
    /// start time differs) than this.
    pub fn stat(&self) -> Option<Stat> {
        if self.pid == 0 {
            return None;
        }
        stat(self.pid).filter(|stat| self.start_time.is_none_or(|t| t == stat.start_time))
    }
}

impl From<u32> for ProcessId {
    fn from(pid: u32) -> ProcessId {
        ProcessId {
            pid,
            start_time: None,
        }
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.pid.fmt(f)
    }
}

/// The stat of process `pid`, `None` when it is gone or unreadable (or
/// `/proc` is not Linux's).
pub fn stat(pid: u32) -> Option<Stat> {
    use std::io::Read;
    // One read into a buffer that fits any stat line: `fs::read` sees the
    // size procfs reports (0) and grows from 32 bytes, five reads a file,
    // which a scan of every process (`session_members`) multiplies.
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_stat(&buf[..len])
}

/// The children of process `pid`'s main thread
/// (`/proc/PID/task/PID/children`: a thread's own, so a multithreaded
/// process's other threads' children are not among them); `None` when
/// it is gone or the kernel keeps no such file.
pub fn children(pid: u32) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    Some(
        text.split_ascii_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect(),
    )
}

/// The name process `pid` runs under (`/proc/PID/comm`, without its
/// newline), `None` when it is gone.
pub(crate) fn comm(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

/// The working directory of process `pid`, `None` when it is gone or
/// another user's.
pub(crate) fn cwd(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The program `process` runs (`/proc/PID/exe`), `None` when it is gone,
/// unreadable, or its pid names another process by the time the link is
/// read (checked after: a reused pid's program is never returned).
pub(crate) fn executable(process: ProcessId) -> Option<std::path::PathBuf> {
    if process.pid == 0 {
        return None;
    }
    let exe = std::fs::read_link(format!("/proc/{}/exe", process.pid)).ok()?;
    process.stat().map(|_| exe)
}

/// [`stat`] for a pid read from another stat (`pgrp`, `tpgid`, ...):
/// negative ones name no process.
pub(super) fn stat_of(pid: i32) -> Option<Stat> {
    stat(u32::try_from(pid).ok()?)
}

/// The foreground process group of the terminal whose session leader is
/// `pane` (the pane's process; tmux makes it a session leader). Falls back
/// to the pane process's own group when the terminal reports none. `None`
/// when `pane` is gone, or its pid names another process now (its start
/// time, when known, differs): a stranger's group is never returned.
pub(crate) fn foreground_group(pane: impl Into<ProcessId>) -> Option<i32> {
    let stat = pane.into().stat()?;
    if stat.has_exited() {
        return None;
    }
    Some(if stat.tpgid > 0 {
        stat.tpgid
    } else {
        stat.pgrp
    })
}

/// Whether this kernel lists each thread's children in `/proc`
/// (`CONFIG_PROC_CHILDREN`).
pub(crate) fn has_children_files() -> bool {
    let me = std::process::id();
    std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
}

/// The children of `pid`, from the `children` file of each of its threads
/// (a child is listed under the thread that forked it; [`children`] reads
/// the main thread's alone); empty when it is gone or the kernel keeps no
/// such files.
pub(crate) fn all_children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|n| n.parse::<u32>().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `root` and its descendants (at most `max`); `None` when the kernel
/// keeps no `children` files.
pub(crate) fn descendants(root: u32, max: usize) -> Option<Vec<u32>> {
    if !has_children_files() {
        return None;
    }
    let mut tree = Vec::new();
    let mut next = vec![root];
    while let Some(pid) = next.pop() {
        if tree.len() >= max {
            break;
        }
        tree.push(pid);
        next.extend(all_children(pid));
    }
    Some(tree)
}

/// Every pid listed in `/proc`, live or not (none where it cannot be
/// read); callers check each one's state.
fn listed_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

/// Every live process with `arg` as one whole word of its command line.
///
/// A private server's socket path is such a word for every process of that
/// server: its clients name it with `-S`, and the server, forked from the
/// client that started it, keeps that client's command line. So this finds
/// a server whose pid is not known yet (a start cancelled mid-fork). Linux
/// only; empty elsewhere.
pub fn processes_naming(arg: &std::ffi::OsStr) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt;
    let want = arg.as_bytes();
    listed_pids()
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).any(|word| word == want))
                && stat(pid).is_some_and(|stat| !stat.has_exited())
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A stat line as Linux writes it, COMM left to the caller.
    fn line(comm: &[u8]) -> Vec<u8> {
        let mut line = b"42 (".to_vec();
        line.extend_from_slice(comm);
        line.extend_from_slice(
            b") S 1 40 40 34816 41 4194304 0 0 0 0 7 3 0 0 20 0 1 0 12345 \
              2465792 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1\n",
        );
        line
    }

    #[test]
    fn parses_stat_with_odd_command_names() {
        let want = Stat {
            state: b'S',
            ppid: 1,
            pgrp: 40,
            session: 40,
            tty: 34816,
            tpgid: 41,
            utime: 7,
            stime: 3,
            start_time: 12345,
        };
        for comm in [&b"sh"[..], b"a) b (c)", b"x)) S 9 9", b"\xff\xfe)"] {
            assert_eq!(parse_stat(&line(comm)), Some(want), "{comm:?}");
        }
        assert!(!want.has_exited());
        let zombie = b"42 (sh) Z 1 40 40 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9";
        assert!(parse_stat(zombie).unwrap().has_exited());
        for bad in [
            &b"42 (x"[..],
            b"42 (x) S 1",
            b"42 (x) S 1 40 40 0 -1",
            b"garbage",
        ] {
            assert_eq!(parse_stat(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn own_process_is_readable() {
        let stat = stat(std::process::id()).unwrap();
        assert_eq!(
            u32::try_from(stat.ppid).unwrap(),
            std::os::unix::process::parent_id()
        );
        assert!(!stat.has_exited());
        assert_eq!(super::stat(0), None);
    }

    #[test]
    fn processes_are_found_by_a_word_of_their_command_line() {
        let marker = format!("/tmp/no-such-socket-{}", std::process::id());
        // `$0` of a shell that waits on its stdin with a builtin (no child
        // process, which would show the same command line until its exec).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line; :", &marker])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Until `exec`, the child still shows this test's command line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let found = processes_naming(std::ffi::OsStr::new(&marker));
            if !found.is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::yield_now();
        };
        // A prefix of a word is not the word.
        let prefix = processes_naming(std::ffi::OsStr::new(&marker[..marker.len() - 1]));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, vec![child.id()]);
        assert!(prefix.is_empty());
        assert!(processes_naming(std::ffi::OsStr::new(&marker)).is_empty());
    }

    #[test]
    fn executable_is_read_only_for_the_process_named() {
        let me = ProcessId::now(std::process::id());
        let exe = std::env::current_exe().unwrap();
        assert_eq!(executable(me), Some(exe));
        // The same pid with another start time names a process gone since.
        let other = ProcessId {
            start_time: me.start_time.map(|t| t + 1),
            ..me
        };
        assert_eq!(executable(other), None);
        assert_eq!(executable(ProcessId::from(0)), None);
    }
}
