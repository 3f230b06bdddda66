//! How a pane's foreground waits, as `/proc` shows it: reading its
//! terminal, polling with the terminal among its files, polling other
//! files only (busy), or neither ([`InputState`]). One look; the judgement
//! over several looks is [`probe`](super::probe)'s.
//!
//! Linux only in substance; elsewhere nothing is seen waiting.

use std::path::Path;

use super::procfs::{foreground_group, stat_of};

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const READ: i64 = 0;
    pub const READV: i64 = 19;
    pub const POLLS: &[i64] = &[7, 271]; // poll ppoll
    pub const SELECTS: &[i64] = &[23, 270]; // select pselect6
    pub const EPOLLS: &[i64] = &[232, 281, 441]; // epoll_wait epoll_pwait epoll_pwait2
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const READ: i64 = 63;
    pub const READV: i64 = 65;
    pub const POLLS: &[i64] = &[73]; // ppoll
    pub const SELECTS: &[i64] = &[72]; // pselect6
    pub const EPOLLS: &[i64] = &[22, 441]; // epoll_pwait epoll_pwait2
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod nr {
    pub const READ: i64 = -1;
    pub const READV: i64 = -1;
    pub const POLLS: &[i64] = &[];
    pub const SELECTS: &[i64] = &[];
    pub const EPOLLS: &[i64] = &[];
}

/// How a pane's foreground waits, as `/proc` shows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputState {
    /// Blocked in a read of its terminal (a cooked-mode reader: the
    /// shell's own `read`, `cat`).
    Reading,
    /// Blocked in a poll/select/epoll wait whose files include its
    /// terminal (a line editor: bash's readline at its prompt, a REPL, a
    /// TUI).
    Polling,
    /// Blocked in a poll/select/epoll wait on other files only (sockets,
    /// pipes: a server such as `python3 -m http.server`), never on its
    /// terminal.
    Busy,
    /// Running, asleep on something else (a child, a timer), or gone.
    Other,
}

impl InputState {
    /// Whether it waits for its terminal, either way.
    pub(crate) fn reads(self) -> bool {
        matches!(self, InputState::Reading | InputState::Polling)
    }
}

/// Whether the foreground process group of the pane whose session leader
/// is `pane_pid` is blocked waiting for terminal input
/// ([`input_state`] [`reads`](InputState::reads)).
pub(crate) fn blocked_on_input(pane_pid: u32) -> bool {
    input_state(pane_pid).reads()
}

/// Whether the terminal of the pane whose session leader is `pane_pid`
/// reads in its own line mode (canonical, `ICANON`) with `C-v` as its
/// literal-next character (`IEXTEN`, `VLNEXT`): a program reading it then
/// gets the byte after a `C-v` as it is, a `C-c` or `C-u` included. `None`
/// when the terminal's settings cannot be read (read through the pane
/// process's stdin; nothing is read from the terminal itself).
pub(crate) fn literal_next(pane_pid: u32) -> Option<bool> {
    use rustix::termios::{LocalModes, SpecialCodeIndex};
    let termios = terminal_modes(pane_pid)?;
    Some(
        termios
            .local_modes
            .contains(LocalModes::ICANON | LocalModes::IEXTEN)
            && termios.special_codes[SpecialCodeIndex::VLNEXT] == 0x16,
    )
}

/// Whether `bytes` typed at the terminal of the pane whose session leader
/// is `pane_pid` end a read blocked on it: any byte in raw mode; in line
/// mode (`ICANON`) only a line's end (newline, a return the terminal turns
/// into one, `VEOL`, `VEOL2`), end of file (`VEOF`) or, with `ISIG`, a
/// signal's key (`VINTR`, `VQUIT`, `VSUSP`). `false` when the terminal's
/// settings cannot be read. A byte quoted by `VLNEXT` is counted as if it
/// were not: the answer only decides whether a send waits (at most
/// `UNREAD_BOUND`) for the read to happen.
pub(crate) fn wakes_reader(pane_pid: u32, bytes: &[u8]) -> bool {
    use rustix::termios::{InputModes, LocalModes, SpecialCodeIndex as C};
    let Some(termios) = terminal_modes(pane_pid) else {
        return false;
    };
    if !termios.local_modes.contains(LocalModes::ICANON) {
        return !bytes.is_empty();
    }
    let code = |index| termios.special_codes[index];
    let mut ends = vec![b'\n', code(C::VEOF), code(C::VEOL), code(C::VEOL2)];
    if termios.input_modes.contains(InputModes::ICRNL)
        && !termios.input_modes.contains(InputModes::IGNCR)
    {
        ends.push(b'\r');
    }
    if termios.local_modes.contains(LocalModes::ISIG) {
        ends.extend([code(C::VINTR), code(C::VQUIT), code(C::VSUSP)]);
    }
    // A special character set to 0 (`_POSIX_VDISABLE` on Linux) is off.
    ends.retain(|&byte| byte != 0);
    bytes.iter().any(|byte| ends.contains(byte))
}

/// The settings of the terminal of the pane whose session leader is
/// `pane_pid`, read through that process's stdin (nothing is read from
/// the terminal itself); `None` when they cannot be read.
fn terminal_modes(pane_pid: u32) -> Option<rustix::termios::Termios> {
    use rustix::fs::{Mode, OFlags};
    let terminal = rustix::fs::open(
        format!("/proc/{pane_pid}/fd/0"),
        OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    rustix::termios::tcgetattr(&terminal).ok()
}

/// How the foreground process group of the pane whose session leader is
/// `pane_pid` waits.
///
/// Decision: the group leader (the process whose pid is the group id;
/// shells make the first process of a job its leader), or the single
/// same-group child it waits for (a `sh -c` script running a reader),
/// must be asleep (`S`), and `/proc/PID/syscall` shows it in
/// - `read`/`readv`: on a terminal fd (`/dev/pts/*`) it reads; on any
///   other (a pipe) it waits for a writer that will end it: other;
/// - `poll`/`ppoll`, `select`/`pselect6` (how line editors such as
///   readline wait for a key): the files it waits on, read from its
///   memory (`/proc/PID/mem`), include a terminal or not; where its
///   memory is not readable (ptrace restrictions) it counts as reading;
///   with no file at all it sleeps on a timer: other, like `sleep`;
/// - `epoll_wait` and its kin (event loops: Node, TUIs on mio/crossterm,
///   whose main thread is the one `/proc/PID/syscall` shows): the files
///   its epoll set watches (`/proc/PID/fdinfo/EPFD`) include a terminal
///   or not;
/// - where `syscall` is unreadable, its `wchan` is the tty read path
///   (`n_tty_read`, or `wait_woken` that it sleeps in).
///
/// Of a pipeline only the leader is inspected.
pub(crate) fn input_state(pane_pid: u32) -> InputState {
    waiting_process(pane_pid).map_or(InputState::Other, |(_, state)| state)
}

/// The process of the pane's foreground that waits for input, and how
/// (see [`input_state`]); `None` when none does.
fn waiting_process(pane_pid: u32) -> Option<(i32, InputState)> {
    let group = foreground_group(pane_pid)?;
    // A shell script without job control keeps its children in its own
    // group and waits for them: follow the waiting chain down to the
    // process that does the reading.
    let mut pid = group;
    for _ in 0..16 {
        match process_input_state(pid) {
            InputState::Other => {}
            found => return Some((pid, found)),
        }
        pid = waited_child(pid, group)?;
    }
    None
}

/// How much the process waiting on the pane's terminal had read at one
/// moment: taken before text is typed to it, it tells when the text
/// reached it. A reader seen waiting before that may not have had it yet:
/// tmux writes typed keys to the pane in its next event-loop pass, and
/// the kernel hands them to the reader from a work queue, each of which a
/// loaded machine can delay past several looks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadMark {
    pid: u32,
    /// Its read counts now.
    reads: Reads,
}

impl ReadMark {
    /// The mark of the pane's waiting reader now; `None` when nothing
    /// waits for input or its counts cannot be read.
    pub(crate) fn now(pane_pid: u32) -> Option<ReadMark> {
        let (pid, state) = waiting_process(pane_pid)?;
        if !state.reads() {
            return None;
        }
        let pid = u32::try_from(pid).ok()?;
        Some(ReadMark {
            pid,
            reads: Reads::of(pid)?,
        })
    }

    /// Whether the reader read since the mark, or is gone. A read that
    /// returned nothing counts: a `C-d` at the start of a line is an end
    /// of file, read as 0 bytes.
    pub(crate) fn passed(&self) -> bool {
        Reads::of(self.pid)
            .is_none_or(|now| now.calls > self.reads.calls || now.bytes > self.reads.bytes)
    }
}

/// A process's read counts (`/proc/PID/io`), of any file.
#[derive(Debug, Clone, Copy)]
struct Reads {
    /// `rchar`: bytes its reads returned.
    bytes: u64,
    /// `syscr`: read calls that returned, with data, an end of file or an
    /// error (a read a signal cut short included).
    calls: u64,
}

impl Reads {
    /// `None` when the process is gone or its counts are not readable.
    fn of(pid: u32) -> Option<Reads> {
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
        let count = |key: &str| {
            io.lines()
                .find_map(|line| line.strip_prefix(key))
                .and_then(|count| count.trim().parse().ok())
        };
        Some(Reads {
            bytes: count("rchar:")?,
            calls: count("syscr:")?,
        })
    }
}

/// The only child of `pid` in group `group`, when `pid` sleeps waiting for
/// a child (`wait4`/`waitid`).
fn waited_child(pid: i32, group: i32) -> Option<i32> {
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).ok()?;
    if wchan.trim() != "do_wait" {
        return None;
    }
    let mut same_group = super::procfs::children(u32::try_from(pid).ok()?)?
        .into_iter()
        .filter_map(|child| i32::try_from(child).ok())
        .filter(|&child| stat_of(child).is_some_and(|stat| stat.pgrp == group));
    let child = same_group.next()?;
    same_group.next().is_none().then_some(child)
}

/// How process `pid` waits (see [`input_state`]).
fn process_input_state(pid: i32) -> InputState {
    match stat_of(pid) {
        Some(stat) if stat.state == b'S' => {}
        _ => return InputState::Other,
    }
    let proc_dir = format!("/proc/{pid}");
    let polling = |yes: bool| {
        if yes {
            InputState::Polling
        } else {
            InputState::Busy
        }
    };
    if let Ok(text) = std::fs::read_to_string(format!("{proc_dir}/syscall")) {
        let mut words = text.split_ascii_whitespace();
        let Some(Ok(number)) = words.next().map(str::parse::<i64>) else {
            // `running` or unreadable: not blocked in a syscall.
            return InputState::Other;
        };
        let args: Vec<u64> = words
            .take(6)
            .filter_map(|word| u64::from_str_radix(word.trim_start_matches("0x"), 16).ok())
            .collect();
        let arg = |n: usize| args.get(n).copied().unwrap_or(0);
        let tty = |fd: u64| is_terminal_fd(&proc_dir, i64::try_from(fd).unwrap_or(-1));
        if number == nr::READ || number == nr::READV {
            // A read of a pipe or file ends by itself (a shell reading a
            // `$(...)`): not a program that waits on others.
            return if tty(arg(0)) {
                InputState::Reading
            } else {
                InputState::Other
            };
        }
        if nr::POLLS.contains(&number) {
            // struct pollfd { int fd; short events; short revents; }
            let count = usize::try_from(arg(1)).unwrap_or(0).min(256);
            if count == 0 {
                // No file at all: a sleep on a timer, which ends by itself.
                return InputState::Other;
            }
            return match read_memory(&proc_dir, arg(0), count * 8) {
                Some(fds) => polling(fds.chunks_exact(8).any(|pollfd| {
                    let fd = i32::from_ne_bytes([pollfd[0], pollfd[1], pollfd[2], pollfd[3]]);
                    let events = i16::from_ne_bytes([pollfd[4], pollfd[5]]);
                    // POLLIN or POLLPRI: waiting to read it.
                    events & 0x3 != 0 && u64::try_from(fd).is_ok_and(tty)
                })),
                None => InputState::Polling,
            };
        }
        if nr::SELECTS.contains(&number) {
            // The read set: a bit per fd below nfds, in longs.
            let count = usize::try_from(arg(0)).unwrap_or(0).min(1024);
            if count == 0 || (arg(1) == 0 && arg(2) == 0 && arg(3) == 0) {
                // No file at all: a sleep on a timer (PAM's delay after a
                // wrong password is `select(0, NULL, NULL, NULL, &tv)`),
                // which ends by itself: not a program that waits on others.
                return InputState::Other;
            }
            if arg(1) == 0 {
                return InputState::Busy;
            }
            return match read_memory(&proc_dir, arg(1), count.div_ceil(64) * 8) {
                Some(set) => polling(
                    (0..count).any(|fd| set[fd / 8] & (1 << (fd % 8)) != 0 && tty(fd as u64)),
                ),
                None => InputState::Polling,
            };
        }
        if nr::EPOLLS.contains(&number) {
            return match std::fs::read_to_string(format!("{proc_dir}/fdinfo/{}", arg(0))) {
                Ok(info) => polling(info.lines().any(|line| {
                    line.strip_prefix("tfd:")
                        .and_then(|rest| rest.split_ascii_whitespace().next()?.parse().ok())
                        .is_some_and(tty)
                })),
                Err(_) => InputState::Polling,
            };
        }
        return InputState::Other;
    }
    let wchan = std::fs::read_to_string(format!("{proc_dir}/wchan"));
    if wchan.is_ok_and(|wchan| matches!(wchan.trim(), "n_tty_read" | "wait_woken")) {
        InputState::Reading
    } else {
        InputState::Other
    }
}

/// `len` bytes of the memory of the process at `proc_dir` from `address`;
/// `None` when it may not be read (ptrace rules) or is not mapped.
fn read_memory(proc_dir: &str, address: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    if len == 0 {
        return Some(Vec::new());
    }
    let file = std::fs::File::open(format!("{proc_dir}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, address).ok()?;
    Some(buf)
}

/// Whether fd `fd` of the process at `proc_dir` is a terminal.
fn is_terminal_fd(proc_dir: &str, fd: i64) -> bool {
    std::fs::read_link(Path::new(proc_dir).join("fd").join(fd.to_string())).is_ok_and(|target| {
        let target = target.to_string_lossy();
        target.starts_with("/dev/pts/") || target.starts_with("/dev/tty")
    })
}

/// A new pty's two ends: its main side, and its terminal side opened as
/// a file (for a program's stdin), for tests that need a real terminal.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn test_pty() -> (rustix::fd::OwnedFd, std::fs::File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::os::unix::ffi::OsStringExt;
    let main = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&main).unwrap();
    unlockpt(&main).unwrap();
    let name = ptsname(&main, Vec::new()).unwrap();
    let path = std::path::PathBuf::from(std::ffi::OsString::from_vec(name.into_bytes()));
    let program = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    (main, program)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_read_mark_passes_once_its_reader_read() {
        // `head -c 1` reads its stdin (a pipe here) and waits on it.
        let mut child = Command::new("head")
            .args(["-c", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Blocked in its read once loaded (loading reads its libraries).
        let deadline = Instant::now() + Duration::from_secs(30);
        let blocked = || {
            let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
            let state = stat_of(i32::try_from(pid).unwrap()).unwrap().state;
            state == b'S' && syscall.split_ascii_whitespace().next() == Some(&nr::READ.to_string())
        };
        while !blocked() {
            assert!(Instant::now() < deadline, "head never waited on its stdin");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mark = ReadMark {
            pid,
            reads: Reads::of(pid).expect("a child's io counts are readable"),
        };
        assert!(!mark.passed(), "nothing was written yet");
        child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
        // It read the byte, then it exits and is gone: passed either way,
        // and not before the write.
        while !mark.passed() {
            assert!(Instant::now() < deadline, "the read never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.wait().unwrap();
        let zero = Reads { bytes: 0, calls: 0 };
        assert!(
            ReadMark { pid, reads: zero }.passed(),
            "a reaped reader is gone"
        );
    }

    #[test]
    fn an_end_of_file_read_passes_the_mark_and_keys_wake_by_the_terminal_s_mode() {
        let (main, program) = test_pty();
        // Two reads of its terminal: the first ends at a `C-d`, read as
        // 0 bytes, and the second then waits, so the reader stays.
        let mut child = Command::new("/bin/sh")
            .args(["-c", "read a; read b"])
            .stdin(Stdio::from(program))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let reads_tty = || {
            let syscall =
                std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            let state = stat_of(i32::try_from(pid).unwrap()).map(|stat| stat.state);
            state == Some(b'S')
                && syscall.split_ascii_whitespace().next() == Some(&nr::READ.to_string())
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !reads_tty() {
            assert!(Instant::now() < deadline, "sh never read its terminal");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A new pty reads in line mode, with ICRNL and ISIG.
        assert!(!wakes_reader(pid, b"x"), "half a line ends no read");
        assert!(!wakes_reader(pid, b"\x1b[A"), "an arrow ends no read");
        assert!(wakes_reader(pid, b"x\r"), "a return ends the line");
        assert!(wakes_reader(pid, b"\x04"), "C-d is the end of file");
        assert!(wakes_reader(pid, b"\x03"), "C-c is a signal's key");
        let mark = ReadMark {
            pid,
            reads: Reads::of(pid).expect("a child's io counts are readable"),
        };
        assert!(!mark.passed(), "nothing was typed yet");
        rustix::io::write(&main, b"\x04").unwrap();
        while !mark.passed() {
            assert!(
                Instant::now() < deadline,
                "the end of file's read never showed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Passed by the read, not by an end: it reads its second line.
        while !reads_tty() {
            assert!(Instant::now() < deadline, "sh never read its second line");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            Reads::of(pid).map(|now| now.bytes),
            Some(mark.reads.bytes),
            "0 bytes read"
        );
        // In raw mode any byte ends a read.
        let mut raw = rustix::termios::tcgetattr(&main).unwrap();
        raw.make_raw();
        rustix::termios::tcsetattr(&main, rustix::termios::OptionalActions::Now, &raw).unwrap();
        assert!(wakes_reader(pid, b"x"), "raw mode: any byte");
        assert!(!wakes_reader(pid, b""), "nothing typed ends nothing");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
