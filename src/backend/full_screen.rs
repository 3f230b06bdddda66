//! Full-screen programs in front of a send: a pager,
//! editor or monitor owns the terminal, so text meant for the shell must
//! not be typed into it, and a send that ends with one in front says so
//! (`wait_reason: "full_screen"`) instead of looking like a prompt.
//!
//! Two signs, either enough: the pane is on the alternate screen (tmux's
//! `#{alternate_on}`, the truth about the pane), or a process of the
//! pane's foreground group is a known pager or editor (git's `less -FRX`
//! never switches screens, and `git` itself leads the group while it
//! waits for its pager).
//! While a send waits, the output is scanned for the switch to the
//! alternate screen, so `top` (which never goes quiet) answers at once
//! rather than at the timeout.

use super::link::ServerLink;
use crate::tmux::TmuxCommand;
use crate::tmux::procfs;

/// Programs that own the terminal even without the alternate screen.
/// `delta` and `bat` page through `less` too, which is then named; they
/// stand here for a pager they run in themselves.
const KNOWN: &[&str] = &[
    "less", "more", "most", "pg", "man", "vi", "vim", "nvim", "view", "vimdiff", "nano", "pico",
    "emacs", "mg", "joe", "micro", "top", "htop", "btop", "watch", "tig", "mc", "ranger", "delta",
    "bat", "batcat",
];

/// The name of the process in front of the pane: a known pager, editor
/// or monitor anywhere in the terminal's foreground group, else the
/// group's leader (or, when that is the exit handshake's wrapper, the
/// program it runs), else any live member.
///
/// The whole group, not its leader: a program that runs a pager waits
/// for it alive (`git log` with `GIT_PAGER=less`, `gh`, `delta`, `man`'s
/// parent `sh`), so its name is the leader's while the pager owns the
/// terminal; and the leader of a pipeline (`seq | less`) is often done.
///
/// A known name counts only where its output is the terminal: a shell's
/// own background work shares its group where job control is off (fish
/// runs `fish_update_completions` so at its first start, whose script
/// runs `man` into a pipe), and took the terminal for a pager's.
fn foreground_name(shared: &ServerLink) -> Option<String> {
    let (pid, group) = front(shared)?;
    let pane = shared.lock().pane_process?;
    let members = group_members(pane.pid, group);
    let terminal = output_of(pane.pid);
    if let Some((_, known)) = members.iter().find(|(member, name)| {
        KNOWN.contains(&name.as_str()) && terminal.is_some() && output_of(*member) == terminal
    }) {
        return Some(known.clone());
    }
    let live = procfs::stat(pid).is_some_and(|stat| !stat.has_exited());
    match procfs::comm(pid) {
        Some(name) if live => Some(name),
        _ => members.into_iter().next().map(|(_, name)| name),
    }
}

/// Where process `pid` writes its standard output (`/dev/pts/N` for the
/// pane's own processes), `None` when that cannot be read.
fn output_of(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/fd/1")).ok()
}

/// The process in front of the pane and its group: the foreground
/// group's leader, or the program behind the exit handshake's wrapper
/// when the wrapper's own group is in front.
fn front(shared: &ServerLink) -> Option<(u32, u32)> {
    let pane = shared.lock().pane_process?;
    let group = u32::try_from(procfs::foreground_group(pane)?).ok()?;
    let pid = if group == pane.pid {
        crate::tmux::exit_handshake::program_pid(pane.pid)?
    } else {
        group
    };
    Some((pid, group))
}

/// The working directory of the terminal: the process in front's (read
/// from `/proc`, so it is right however it got there), else the shell's,
/// else the last one the shell reported (OSC 7), which outlives the
/// process.
pub(super) fn working_directory(shared: &ServerLink) -> Option<std::path::PathBuf> {
    let from_proc = || {
        let (front_pid, _) = front(shared)?;
        procfs::cwd(front_pid).or_else(|| {
            let pane = shared.lock().pane_process?;
            procfs::cwd(crate::tmux::exit_handshake::program_pid(pane.pid)?)
        })
    };
    from_proc().or_else(|| shared.stream.reported_directory())
}

/// The most processes of a pane's tree looked at for its foreground
/// group's members.
const MAX_TREE: usize = 4096;

/// The names of the live members of process group `group` among the
/// descendants of the pane's process `pane` (itself included), by pid.
///
/// The pane's tree, read through each task's `children` file, not every
/// process on the host: a send looks at this twice, and with 10,000
/// terminals on a host a scan of `/proc` read 30,000 `stat` files each
/// time. Every member of the pane's foreground group descends from its
/// process (its shell forked the pipeline) unless it was orphaned, whose
/// pager would then be seen by the alternate screen only. A kernel
/// without `children` files (`CONFIG_PROC_CHILDREN`) gets the scan.
fn group_members(pane: u32, group: u32) -> Vec<(u32, String)> {
    let member = |pid: u32| {
        procfs::stat(pid)
            .is_some_and(|stat| !stat.has_exited() && u32::try_from(stat.pgrp).ok() == Some(group))
    };
    let mut pids = match procfs::descendants(pane, MAX_TREE) {
        Some(tree) => tree.into_iter().filter(|&pid| member(pid)).collect(),
        None => {
            let Ok(entries) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&pid| member(pid))
                .collect::<Vec<u32>>()
        }
    };
    pids.sort_unstable();
    pids.into_iter()
        .filter_map(|pid| Some((pid, procfs::comm(pid)?)))
        .collect()
}

/// Whether tmux shows the pane's alternate screen.
async fn alternate_on(shared: &ServerLink) -> bool {
    let command = TmuxCommand::new("display-message")
        .flag("-p")
        .target(shared.pane)
        .arg("#{alternate_on}");
    shared
        .command(&command)
        .await
        .is_ok_and(|reply| reply.text().trim() == "1")
}

/// The foreground command when a full-screen program is in front, else
/// `None`.
pub(super) async fn in_front(shared: &ServerLink) -> Option<String> {
    let name = foreground_name(shared);
    let known = name.as_deref().is_some_and(|name| KNOWN.contains(&name));
    if known || alternate_on(shared).await {
        // The alternate screen with no process to name (a wrapper between
        // programs): still full screen.
        return Some(name.unwrap_or_default());
    }
    None
}

/// Follows a send's output for a switch to the alternate screen.
pub(super) struct Watch {
    /// How far the output was scanned.
    scanned: u64,
}

/// The sequences that switch to the alternate screen (`smcup`).
const ENTER: &[&[u8]] = &[b"\x1b[?1049h", b"\x1b[?1047h", b"\x1b[?47h"];
/// The longest of them, less one: what a chunk boundary may split.
const OVERLAP: u64 = 7;

impl Watch {
    /// A watch from offset `start` of the output ring.
    pub(super) fn new(start: u64) -> Watch {
        Watch { scanned: start }
    }

    /// Whether the output since the last look switched to the alternate
    /// screen (cheap: no tmux round trip unless it did).
    pub(super) fn entered(&mut self, shared: &ServerLink) -> bool {
        let (bytes, total) = {
            let held = shared.stream.held();
            let from = self.scanned.saturating_sub(OVERLAP);
            (held.since(from).0, held.total)
        };
        self.scanned = total;
        ENTER
            .iter()
            .any(|enter| bytes.windows(enter.len()).any(|window| window == *enter))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_process_tree_holds_the_children_of_every_thread() {
        // Forked by a test thread, not the main one: its `children` file.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let tree = procfs::descendants(std::process::id(), MAX_TREE).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(tree[0], std::process::id());
        assert!(tree.contains(&child.id()), "{tree:?}");
    }
}
