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

/// Every live process of the session whose leader was the pane process
/// `session`, a child of tmux server `server` (the pane's process tree:
/// tmux starts the pane's program as a session leader, and its children stay
/// in that session unless they call `setsid` themselves).
///
/// Empty when pid `session` now names a live process that may not be the
/// pane: the pane exited, its pid was freed (a pid stays taken while its
/// session has members, so this happens only once none was left) and
/// another session leader got it, e.g. another tmux server or another
/// terminal's pane (pids wrap quickly where `pid_max` is 32768). Killing
/// that session would kill an unrelated process tree. So a live leader must
/// prove it is the pane: by its start time when `session` has one;
/// otherwise by being the child of `server` while that server lives. With
/// neither (no start time, server dead or unknown), a live leader is never
/// taken: any other session leader could hold that pid. A leader that is
/// gone or a zombie still holds its pid, so its members are the pane's.
///
/// Each member comes with the start time read here, so signals and waits
/// on it cannot hit a process that reuses its pid later.
///
/// Found without reading every process's `stat` (a kill at 5,000
/// terminals read 25,000 of them, ~12 µs each: the kill of all grew with
/// the square of the terminals): a member descends from the leader, or was
/// orphaned and handed to a reaper above the server (a subreaper, else
/// init). So the leader's tree and the session's members among the
/// children of the server and its ancestors are walked (`children` files,
/// a `stat` per process of the tree and per reaper's child never seen
/// before). Without `children` files (`CONFIG_PROC_CHILDREN`), or with the
/// server gone (its ancestors unknown), every process is looked at.
pub fn session_members(
    session: impl Into<ProcessId>,
    server: impl Into<ProcessId>,
) -> Vec<ProcessId> {
    let (session, server) = (session.into(), server.into());
    // Session 0 holds processes nobody called `setsid` for (kernel threads,
    // a container's first processes): never a pane's session.
    let Ok(session_id @ 1..) = i32::try_from(session.pid) else {
        return Vec::new();
    };
    let server_stat = server.stat().filter(|stat| !stat.has_exited());
    if let Some(leader) = stat(session.pid) {
        let ours = match session.start_time {
            Some(start) => start == leader.start_time,
            None if leader.has_exited() => true,
            None => server_stat
                .is_some_and(|_| i32::try_from(server.pid).is_ok_and(|pid| leader.ppid == pid)),
        };
        if !ours {
            return Vec::new();
        }
    }
    let candidates = match server_stat {
        Some(_) if has_children_files() => session_tree(session_id, server.pid),
        _ => None,
    };
    let member = |pid: u32| {
        let stat = stat(pid)?;
        (stat.session == session_id && !stat.has_exited()).then_some(ProcessId {
            pid,
            start_time: Some(stat.start_time),
        })
    };
    let mut members: Vec<ProcessId> = match candidates {
        Some(pids) => pids.into_iter().filter_map(member).collect(),
        None => listed_pids().filter_map(member).collect(),
    };
    members.sort_unstable_by_key(|member| member.pid);
    members
}

/// How many processes [`session_tree`] walks before it gives up for the
/// scan of every process.
const MAX_TREE: usize = 4096;

/// How many ancestors of the server [`session_tree`] looks at as reapers.
const MAX_ANCESTORS: usize = 64;

/// The candidates for session `session_id`'s members, found from its
/// leader's tree and from the orphans its reapers adopted: the leader and
/// every descendant (those that left the session are walked through: a
/// process may fork before its own `setsid`; the caller keeps the
/// members), and the trees of the session's members among the children of
/// `server` and of each of its ancestors (an orphan goes to the nearest
/// subreaper above its dead parent, else to init: for a pane's process,
/// the server or one of its ancestors). `None` past [`MAX_TREE`] processes.
fn session_tree(session_id: i32, server: u32) -> Option<Vec<u32>> {
    let leader = u32::try_from(session_id).ok()?;
    let mut next = vec![leader];
    let mut reaper = Some(server);
    for _ in 0..MAX_ANCESTORS {
        let Some(pid @ 1..) = reaper else { break };
        let reaper_stat = stat(pid);
        next.extend(adopted_into(pid, reaper_stat.as_ref(), session_id));
        reaper = reaper_stat.and_then(|stat| u32::try_from(stat.ppid).ok());
    }
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = next.pop() {
        if seen.insert(pid) {
            if seen.len() > MAX_TREE {
                return None;
            }
            next.extend(all_children(pid));
        }
    }
    Some(seen.into_iter().collect())
}

/// The session of each child of a reaper seen before, by reaper and pid.
type Sessions = std::collections::HashMap<u32, std::collections::HashMap<u32, i32>>;

/// What [`adopted_into`] learnt: a child's session is read once. A process
/// can leave its session (`setsid`) but never join one it did not lead, so
/// a session remembered as another one's stays another one's; one that
/// left is dropped by the caller's own check of each member. Only a pid
/// freed and taken again by a new child of the same reaper between two
/// looks is taken for the old one.
static ADOPTED: std::sync::Mutex<Option<Sessions>> = std::sync::Mutex::new(None);

/// The children of `reaper` (its `stat`, read by the caller) in session
/// `session_id`: at 10,000 terminals init has 10,000 tmux servers as
/// children, so each one's session is read once ([`ADOPTED`]), not at
/// every kill.
fn adopted_into(reaper: u32, reaper_stat: Option<&Stat>, session_id: i32) -> Vec<u32> {
    let now = adoptive_children(reaper, reaper_stat);
    let mut adopted = ADOPTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let known = adopted
        .get_or_insert_with(Default::default)
        .entry(reaper)
        .or_default();
    let mut fresh = std::collections::HashMap::with_capacity(now.len());
    for pid in now {
        let session = match known.get(&pid) {
            Some(&session) => Some(session),
            None => stat(pid).map(|stat| stat.session),
        };
        if let Some(session) = session {
            fresh.insert(pid, session);
        }
    }
    *known = fresh;
    known
        .iter()
        .filter(|&(_, &session)| session == session_id)
        .map(|(&pid, _)| pid)
        .collect()
}

/// The children of `reaper` an orphan can be among: those of its main
/// thread while that thread lives, else those of every thread.
///
/// The kernel hands an orphan to the first thread of the reaper that is
/// not exiting, the main thread first (`find_new_reaper` and
/// `find_alive_thread` in kernel/exit.c; init's `child_reaper` is its main
/// thread until that thread exits), so the other threads' `children` files
/// hold only children they forked themselves, never a pane's process: one
/// file read instead of one per thread (this sandbox's init has 41 threads,
/// read at every kill). A main thread that exited before the others shows
/// its process as a zombie: then every thread's children are read.
fn adoptive_children(reaper: u32, reaper_stat: Option<&Stat>) -> Vec<u32> {
    match reaper_stat {
        Some(stat) if !stat.has_exited() => children(reaper).unwrap_or_default(),
        _ => all_children(reaper),
    }
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

    /// A child made a session leader by `setsid` stands in for a pane: its
    /// session is listed for its parent (the "server") or by its start
    /// time, and left alone for a live process that is not its parent (the
    /// pid-reuse case), with no server and no start time known, and for
    /// another start time.
    #[test]
    fn session_is_listed_only_for_the_leaders_parent() {
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .spawn()
            .unwrap();
        struct Reap<'a>(&'a mut std::process::Child);
        impl Drop for Reap<'_> {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let child = Reap(&mut child);
        let leader = child.0.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // `setsid` execs `sleep` in place once it has made the session.
        while stat(leader).is_none_or(|s| u32::try_from(s.session) != Ok(leader)) {
            assert!(
                std::time::Instant::now() < deadline,
                "setsid never took effect"
            );
            std::thread::yield_now();
        }
        let pids = |members: Vec<ProcessId>| members.iter().map(|m| m.pid).collect::<Vec<_>>();
        assert_eq!(pids(session_members(leader, std::process::id())), [leader]);
        let stranger = u32::try_from(stat(std::process::id()).unwrap().ppid).unwrap();
        assert!(session_members(leader, stranger).is_empty());
        assert!(session_members(leader, 0).is_empty());
        assert!(session_members(0, 0).is_empty());
        // With its start time the leader needs no live server to vouch for
        // it, and a recycled pid (another start time) is refused even then.
        let recorded = ProcessId::now(leader);
        assert_eq!(pids(session_members(recorded, 0)), [leader]);
        let recycled = ProcessId {
            start_time: recorded.start_time.map(|t| t + 1),
            ..recorded
        };
        assert!(session_members(recycled, std::process::id()).is_empty());
        assert_eq!(recycled.stat(), None);
        assert!(recorded.stat().is_some());
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
