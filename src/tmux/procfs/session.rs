//! Every process of a pane's session, for killing the whole tree: found
//! from the leader's tree and from the orphans its reapers adopted, never
//! by reading every process's `stat` where the kernel lists children, and
//! never a stranger's session behind a reused pid. Apart from the stat
//! reader (`mod.rs`) because it is the kill's search, with its own bounds
//! and cache ([`ADOPTED`]).

use super::{ProcessId, Stat, all_children, children, has_children_files, listed_pids, stat};

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
}
