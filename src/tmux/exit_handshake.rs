//! The exit handshake: a program's last bytes reach the engine before its
//! pane dies.
//!
//! tmux 3.3a loses the end of a program that exits at once twice over
//! (docs/tmux-quirks.md): Linux hands what the program wrote to the pty to
//! tmux's side asynchronously, so tmux can see the hang-up before the last
//! bytes are readable (they never reach the screen), and output tmux read
//! but had not yet written to a control client is discarded when the pane
//! dies (`control_write_pending`). Both need the program's side of the pty
//! kept open until the engine has its output.
//!
//! So, where [`ServerOptions::exit_handshake`] is on, the program runs under
//! a wrapper ([`wrap`]) that, once the program ended, opens the server
//! directory's [`FIFO`] (found from `$TMUX`, the socket's path tmux sets in
//! every pane), prints [`MARKER`] and waits for a line on the fifo before
//! it exits with the program's status (a program killed by a signal is
//! re-raised, so the pane reports the signal). The wrapper is the relay
//! executable ([`super::exit_wrapper`]) where the server has one, which
//! costs less memory and keeps the exact status, else a `/bin/sh` script
//! (a status above 128 is re-raised as a signal there: `sh` cannot tell
//! `exit 130` from a death by `SIGINT`). The engine, on seeing the
//! marker in the pane's stream, knows every earlier byte is in, and
//! [`acknowledge`]s. The fifo is opened before the marker is printed, so an
//! acknowledgement never finds nobody reading; a program that prints the
//! marker itself only gets an acknowledgement nobody reads.
//!
//! [`ServerOptions::exit_handshake`]: super::ServerOptions::exit_handshake

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::vocab::PaneId;
use crate::{Error, Result};

/// The fifo's name in the server directory.
pub(crate) const FIFO: &str = "exit.fifo";

/// What the wrapper prints once the program has ended: a private OSC that
/// terminals ignore.
pub const MARKER: &[u8] = b"\x1b]8765;tmux-engine-exit\x07";

/// What the wrapper runs once its program has ended: the handshake, then
/// the program's status. A macro, so [`SCRIPT`] and a pooled pane's
/// launch ([`WRAPPER_TAIL`]) share one text.
macro_rules! wrapper_tail {
    () => {
        "; s=$?; trap - INT QUIT TERM; \
    d=${TMUX%,*,*}; \
    [ -p \"${d%/*}/exit.fifo\" ] && command exec 2>/dev/null 3<>\"${d%/*}/exit.fifo\" \
    && printf '\\033]8765;tmux-engine-exit\\007' && IFS= read -r _ <&3; \
    exec 3<&-; \
    [ \"$s\" -gt 128 ] && kill -s \"$(kill -l \"$s\")\" \"$$\"; \
    exit \"$s\""
    };
}

/// The shell wrapper: runs `"$@"` (no shell parsing of the words), then
/// the handshake. `INT`, `QUIT` and `TERM` aimed at the program's process group
/// (the wrapper shares it: `sh -c` has no job control) are trapped so the
/// wrapper outlives a program that handles them; traps reset on exec, so
/// the program gets the default actions. `HUP` is not trapped: a pane that
/// is killed takes the wrapper along.
const SCRIPT: &str = concat!("trap : INT QUIT TERM; \"$@\"", wrapper_tail!());

/// The wrapper's script around its program, for a shell whose positional
/// parameters are already the program's words: what a pooled pane's
/// launcher runs ([`super::launcher`]), with the spec's environment
/// between the two as assignments on the program.
pub(super) const WRAPPER_HEAD: &str = "trap : INT QUIT TERM; ";
/// See [`WRAPPER_HEAD`].
pub(super) const WRAPPER_TAIL: &str = concat!("\"$@\"", wrapper_tail!());

/// The first argument that makes the relay executable the exit handshake's
/// wrapper (`exit_wrapper`): `RELAY __exit-wrapper run tmux-engine-exit
/// WORDS...` runs WORDS, `RELAY __exit-wrapper launch tmux-engine-exit` is
/// a pooled pane's launcher. The wrapper's name is the fourth word, as
/// `$0` is the shell wrapper's, so one look at `/proc/PID/cmdline` tells
/// either.
pub const WRAPPER_ARG: &str = "__exit-wrapper";
/// The relay wrapper's mode that runs the words after its name.
pub(super) const RUN: &str = "run";
/// The relay wrapper's mode that is a pooled pane's launcher.
pub(super) const LAUNCH: &str = "launch";

/// `words` (as `new-session` or `respawn-pane` would run them) under the
/// wrapper: `RELAY __exit-wrapper run tmux-engine-exit WORDS...` with a
/// `relay` executable (see [`wrapper_executable`]), else `sh -c SCRIPT
/// tmux-engine-exit WORDS...`.
pub(crate) fn wrap(words: Vec<OsString>, relay: Option<&Path>) -> Vec<OsString> {
    let mut argv = wrapper_words(relay, RUN, SCRIPT);
    argv.extend(words);
    argv
}

/// The wrapper's first four words: `relay`'s `mode` ([`RUN`] or
/// [`LAUNCH`]) or `sh -c script`, then [`WRAPPER_NAME`].
pub(super) fn wrapper_words(relay: Option<&Path>, mode: &str, script: &str) -> Vec<OsString> {
    let name = std::ffi::OsStr::from_bytes(WRAPPER_NAME).to_owned();
    match relay {
        Some(relay) => vec![relay.into(), WRAPPER_ARG.into(), mode.into(), name],
        None => vec!["/bin/sh".into(), "-c".into(), script.into(), name],
    }
}

/// The executable that wraps a server's programs: its relay (`relay`,
/// [`ServerOptions::raw_relay`](super::ServerOptions::raw_relay)) when it
/// is an absolute path to an executable file (the relay executable
/// answers [`WRAPPER_ARG`]), else none:
/// the `/bin/sh` wrapper. A server with no raw relay (a library whose
/// program is not the engine, `TMUX_ENGINE_RELAY` empty) keeps the shell.
pub(crate) fn wrapper_executable(relay: Option<&Path>) -> Option<&Path> {
    relay.filter(|relay| super::process::runnable(relay))
}

/// The wrapper's name, its fourth word (`$0` of the shell wrapper): how
/// [`wrapped`] tells a wrapped pane.
pub(super) const WRAPPER_NAME: &[u8] = b"tmux-engine-exit";

/// What a pane's process is, as far as the exit handshake goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wrapped {
    /// Not the wrapper (yet: a pane's process is tmux's until it execs), or
    /// gone.
    No,
    /// The wrapper, its program not forked yet, or ended and not yet
    /// reaped or waited for.
    Between,
    /// The wrapper, running this program.
    Running(u32),
}

/// What `pane_pid` is: the wrapper running its program, the wrapper
/// between programs (before the first, or once it ended: it then waits
/// for the acknowledgement), or no wrapper.
pub(crate) fn wrapped(pane_pid: u32) -> Wrapped {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pane_pid}/cmdline")) else {
        return Wrapped::No;
    };
    if cmdline.split(|&b| b == 0).nth(3) != Some(WRAPPER_NAME) {
        return Wrapped::No;
    }
    let child = super::procfs::children(pane_pid).and_then(|children| children.first().copied());
    match child {
        // A zombie child has ended: only its reaping is left.
        Some(child) if super::process::is_alive(child) => Wrapped::Running(child),
        _ => Wrapped::Between,
    }
}

/// The program a pane runs: the wrapper's child when `pane_pid` is the
/// handshake's wrapper, else `pane_pid` itself. `None` while a wrapper has
/// no program (not forked yet, or ended: it then waits for the
/// acknowledgement). What a signal or a "who is in front" judgement must
/// aim at: the wrapper traps `INT`, `QUIT` and `TERM` and keeps its own
/// process group.
pub(crate) fn program_pid(pane_pid: u32) -> Option<u32> {
    match wrapped(pane_pid) {
        Wrapped::No => Some(pane_pid),
        Wrapped::Between => None,
        Wrapped::Running(child) => Some(child),
    }
}

/// How long [`started`] waits for a wrapper to start its program (and
/// a launch for its launcher to let the fifo go, `launcher.rs`).
pub(super) const START_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long [`started`] looks finely: a wrapper that is not running its
/// program by then is slow (a loaded machine), and a coarser look costs it
/// little.
const FINE_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// The step of the fine look: a wrapper usually runs its program within a
/// millisecond or two of its fork, and tokio's timer cannot sleep less
/// than one, so the look runs on a blocking thread. Each look is two small
/// `/proc` reads (about 10 µs), so 100 µs steps cost a few percent of a
/// core for a few milliseconds.
const FINE_STEP: std::time::Duration = std::time::Duration::from_micros(100);

/// Waits, up to [`START_WAIT`], until the pane `pane_pid`, started under
/// the wrapper, runs its program, so the pid a spawn reports is the
/// program's from the start (the pane's process is tmux's until it execs
/// the wrapper, and the wrapper's alone until it forks). Returns early when
/// the pane is gone.
///
/// Linux gives no event for another process's exec or fork short of
/// ptrace or the proc connector (root only), so this polls: finely for
/// [`FINE_WAIT`] (a new terminal's connect waits on it: the millisecond
/// steps this replaced cost 1 to 3 ms of it), then backing off to 20 ms.
pub(crate) async fn started(pane_pid: u32) {
    poll_until(pane_pid, running).await;
}

/// What [`started`] waits for: the wrapper running its program.
fn running(wrapped: Wrapped) -> bool {
    matches!(wrapped, Wrapped::Running(_))
}

/// Whether the pane `pane_pid` is as `done` wants it, or gone: what the
/// looks of [`poll_until`] and [`started_signalled`] wait for.
fn reached(pane_pid: u32, done: fn(Wrapped) -> bool) -> bool {
    done(wrapped(pane_pid)) || !super::process::is_alive(pane_pid)
}

/// The engine's end of a relay wrapper's word that its program runs: the
/// server's [`FIFO`] opened for reading before tmux runs the pane. The
/// relay wrapper (`RUN` mode, [`super::exit_wrapper`]) opens the fifo for
/// writing as it starts and closes it once its program has run `exec`; the
/// last writer gone is `EPOLLHUP` here (Linux reports it on a fifo only
/// after a writer came and went), so a new terminal's connect learns of
/// the start without the fine look in `/proc` of [`started`] (every
/// 100 µs from a blocking thread for up to 20 ms: on a loaded machine up
/// to 200 looks and as many thread wake-ups; a spawn churn's rate did not
/// move measurably either way, docs/benchmarks.md).
///
/// Held only until the start: while it is open, a line written to the
/// fifo finds a reader although no wrapper waits (see [`acknowledge`]),
/// and stays there for the wrapper's handshake, which then ends at once.
/// Only a program that prints [`MARKER`] itself in its first milliseconds
/// gets that far.
#[derive(Debug)]
pub(crate) struct StartSignal(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>);

impl StartSignal {
    /// Opens the fifo of the server in `dir` (made by then) for reading;
    /// `None` when it cannot be (no fifo, no runtime with I/O): the
    /// caller's [`started_signalled`] then looks in `/proc` as before.
    pub(crate) fn open(dir: &Path) -> Option<StartSignal> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            dir.join(FIFO),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let interest = tokio::io::Interest::READABLE;
        // Deprecated as unsound when the caller may close the fd while it
        // is registered: the `OwnedFd` moves in, so nothing else can.
        #[allow(deprecated)]
        let fd = tokio::io::unix::AsyncFd::with_interest(fd, interest).ok()?;
        Some(StartSignal(fd))
    }

    /// Resolves once a writer came and went; never on an error (the
    /// caller's coarse look stands in).
    async fn hung_up(&self) {
        loop {
            let Ok(mut guard) = self.0.readable().await else {
                return std::future::pending().await;
            };
            if guard.ready().is_read_closed() {
                return;
            }
            // Readable without a hang-up: a stray line (see the type's
            // doc), left for the wrapper's handshake.
            guard.clear_ready();
        }
    }
}

/// [`started`], told by the wrapper through `signal` when there is one
/// (see [`StartSignal`]): returns when the fifo's writer has gone (the
/// program has run `exec`, or failed to), or when a look in `/proc` that
/// backs off from [`SIGNALLED_LOOK`] finds it running or the pane gone (a
/// wrapper of an older engine that tells nothing, a pane that died before
/// its wrapper ran), or after [`START_WAIT`].
pub(crate) async fn started_signalled(pane_pid: u32, signal: Option<StartSignal>) {
    let Some(signal) = signal else {
        return started(pane_pid).await;
    };
    let ready = move || reached(pane_pid, running);
    if ready() {
        return;
    }
    tokio::select! {
        () = signal.hung_up() => {}
        () = back_off(std::time::Instant::now(), SIGNALLED_LOOK, ready) => {}
    }
}

/// The first pause of [`started_signalled`]'s look in `/proc`: longer than
/// a wrapper usually takes to run its program, so a told start costs no
/// look at all.
const SIGNALLED_LOOK: std::time::Duration = std::time::Duration::from_millis(4);

/// Waits as [`started`] does until the pane `pane_pid` runs the wrapper
/// at all, its program or none: a pooled pane's launcher
/// ([`super::launcher`]) waits for its program from then on.
pub(crate) async fn exec_seen(pane_pid: u32) {
    poll_until(pane_pid, |wrapped| wrapped != Wrapped::No).await;
}

/// Polls (see [`started`]) until `done` says yes of the pane's state, or
/// the pane is gone, or [`START_WAIT`] passed.
async fn poll_until(pane_pid: u32, done: fn(Wrapped) -> bool) {
    let begun = std::time::Instant::now();
    let ready = move || reached(pane_pid, done);
    if ready() {
        return;
    }
    let fine = tokio::task::spawn_blocking(move || {
        while begun.elapsed() < FINE_WAIT {
            std::thread::sleep(FINE_STEP);
            if ready() {
                return true;
            }
        }
        false
    })
    .await;
    if matches!(fine, Ok(true)) {
        return;
    }
    back_off(begun, std::time::Duration::from_millis(1), ready).await;
}

/// Looks until `ready`, first after `pause`, the pause doubling up to
/// 20 ms, until [`START_WAIT`] from `begun`.
async fn back_off(
    begun: std::time::Instant,
    mut pause: std::time::Duration,
    ready: impl Fn() -> bool,
) {
    let deadline = tokio::time::Instant::from_std(begun) + START_WAIT;
    while tokio::time::Instant::now() + pause < deadline {
        tokio::time::sleep(pause).await;
        if ready() {
            return;
        }
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
}

/// Makes the fifo in the server's private directory `dir` (0600).
///
/// # Errors
/// `IO` when it cannot be made.
pub(crate) fn make_fifo(dir: &Path) -> Result<()> {
    make_fifo_at(&dir.join(FIFO))
}

/// Makes a fifo at `path` (0600).
///
/// # Errors
/// `IO` when it cannot be made.
pub(crate) fn make_fifo_at(path: &Path) -> Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .map_err(|errno| Error::io(format!("making the fifo {}", path.display()), errno.into()))
}

/// Lets the wrapper of the server in `dir` exit: one line into its fifo.
/// Returns whether a wrapper was waiting (one that is not reading yet, or
/// a fifo that does not exist, is not an error: nothing waits then).
pub(crate) fn acknowledge(dir: &Path) -> bool {
    write_line(&dir.join(FIFO)).is_ok()
}

/// Writes one line into the fifo at `path` without blocking: `ENXIO` when
/// nobody has it open for reading (the acknowledgement's and a pooled
/// pane's launch's one way to wake a shell, see [`super::launcher`]).
pub(crate) fn write_line(path: &Path) -> std::io::Result<()> {
    open_writer(path)?.write_all(b"\n")
}

/// The fifo at `path` opened for writing without blocking: `ENXIO` at once
/// when nobody has it open for reading, where a blocking open would wait
/// for a reader that may never come (the acknowledgement, a launch's spec,
/// a wrapper's start signal).
pub(crate) fn open_writer(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

/// Where the exit handshake of a server's panes is acknowledged, and each
/// pane's marker scan: what a control client's reader runs on every chunk
/// it routes.
#[derive(Debug)]
pub(crate) struct ExitWatch {
    dir: PathBuf,
    scans: HashMap<PaneId, MarkerScan>,
}

impl ExitWatch {
    /// Acknowledges in the server directory `dir`.
    pub(crate) fn new(dir: PathBuf) -> ExitWatch {
        ExitWatch {
            dir,
            scans: HashMap::new(),
        }
    }

    /// `pane` printed `data`, routed by now: acknowledges the marker once
    /// it is complete.
    pub(crate) fn seen(&mut self, pane: PaneId, data: &[u8]) {
        if self.scans.entry(pane).or_default().feed(data) {
            self.scans.remove(&pane);
            let waiting = acknowledge(&self.dir);
            tracing::debug!(%pane, waiting, "exit marker seen: acknowledged");
        }
    }
}

/// Finds [`MARKER`] in a stream of chunks, split anywhere.
#[derive(Debug, Default)]
pub(crate) struct MarkerScan {
    /// The end of the previous chunks that could begin the marker.
    tail: Vec<u8>,
}

impl MarkerScan {
    /// Bytes kept between chunks: a marker not yet ended has at most this
    /// many of its bytes in them.
    const KEEP: usize = MARKER.len() - 1;

    /// Whether the marker ends in `chunk` (or began in earlier ones).
    /// Every chunk of every pane's output passes here, keystroke echoes
    /// included, so it allocates nothing once its tail is there.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> bool {
        if !self.tail.is_empty() {
            // A marker begun in the kept bytes ends in the chunk's first
            // `KEEP` bytes.
            let head = chunk.get(..Self::KEEP).unwrap_or(chunk);
            let mut edge = [0u8; 2 * Self::KEEP];
            let (kept, rest) = edge.split_at_mut(self.tail.len());
            kept.copy_from_slice(&self.tail);
            rest[..head.len()].copy_from_slice(head);
            let edge = &edge[..self.tail.len() + head.len()];
            if edge.windows(MARKER.len()).any(|w| w == MARKER) {
                return true;
            }
        }
        if memchr::memmem::find(chunk, MARKER).is_some() {
            return true;
        }
        match chunk.len().checked_sub(Self::KEEP) {
            Some(start) => {
                self.tail.clear();
                self.tail.extend_from_slice(&chunk[start..]);
            }
            None => {
                self.tail.extend_from_slice(chunk);
                let excess = self.tail.len().saturating_sub(Self::KEEP);
                self.tail.drain(..excess);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pooled pane's launch runs the very wrapper a respawn runs.
    #[test]
    fn the_launch_runs_the_wrapper_script() {
        assert_eq!(format!("{WRAPPER_HEAD}{WRAPPER_TAIL}"), SCRIPT);
    }

    /// Either wrapper names itself by its fourth word, which [`wrapped`]
    /// reads, and runs the words as given after it.
    #[test]
    fn both_wrappers_name_themselves_fourth() {
        let relay = Path::new("/opt/te/tmux-engine-relay");
        for relay in [Some(relay), None] {
            let argv = wrap(vec!["cat".into(), "a b".into()], relay);
            assert_eq!(argv[3].as_bytes(), WRAPPER_NAME, "{argv:?}");
            assert_eq!(&argv[4..], ["cat", "a b"], "{argv:?}");
        }
        let relayed = wrap(vec!["cat".into()], Some(relay));
        assert_eq!(
            relayed[..3],
            ["/opt/te/tmux-engine-relay", "__exit-wrapper", "run"]
        );
        assert_eq!(wrap(vec!["cat".into()], None)[..2], ["/bin/sh", "-c"]);
    }

    /// Only a relay that can run wraps: anything else leaves the shell.
    #[test]
    fn only_an_executable_relay_wraps() {
        let exe = std::env::current_exe().expect("the test binary");
        assert_eq!(wrapper_executable(Some(&exe)), Some(exe.as_path()));
        let dir = tempfile::tempdir().expect("a temp dir");
        let plain = dir.path().join("relay");
        std::fs::write(&plain, b"").expect("write");
        for relay in [
            None,
            Some(plain.as_path()),
            Some(dir.path()),
            Some(Path::new("relative/relay")),
            Some(dir.path().join("missing").as_path()),
        ] {
            assert_eq!(wrapper_executable(relay), None, "{relay:?}");
        }
    }

    #[test]
    fn the_marker_is_found_across_any_split() {
        let mut stream = b"done\r\n".to_vec();
        stream.extend_from_slice(MARKER);
        for cut in 0..stream.len() {
            for second in cut..stream.len() {
                let mut scan = MarkerScan::default();
                let found = [&stream[..cut], &stream[cut..second], &stream[second..]]
                    .iter()
                    .any(|chunk| scan.feed(chunk));
                assert!(found, "split at {cut} and {second}");
            }
        }
        let mut scan = MarkerScan::default();
        assert!(!scan.feed(&MARKER[..MARKER.len() - 1]));
        assert!(!scan.feed(b"x"));
    }

    #[test]
    fn the_scan_keeps_only_what_could_begin_the_marker() {
        let mut scan = MarkerScan::default();
        for chunk in [&b"a"[..], &[b'b'; 100], b"cd", &MARKER[..3]] {
            assert!(!scan.feed(chunk));
            assert!(scan.tail.len() <= MarkerScan::KEEP, "{}", scan.tail.len());
        }
        // The marker's first three bytes were kept: the rest completes it.
        assert!(scan.feed(&MARKER[3..]));
        // Near misses in one chunk and across two are not the marker.
        let mut near = MARKER.to_vec();
        near[MARKER.len() - 1] = b'x';
        let mut scan = MarkerScan::default();
        assert!(!scan.feed(&near));
        assert!(!scan.feed(&near[..5]));
        assert!(!scan.feed(&near[5..]));
    }

    #[test]
    fn the_script_prints_the_marker_it_scans_for() {
        let printed = SCRIPT
            .split("printf '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("a printf");
        let printed = printed.replace("\\033", "\x1b").replace("\\007", "\x07");
        assert_eq!(printed.as_bytes(), MARKER);
    }

    /// Outside a server with a fifo (no `$TMUX`, or a directory with no
    /// `exit.fifo`), the shell wrapper makes no file where the fifo would
    /// be (`3<>` creates a regular one: `/exit.fifo` with `$TMUX` unset),
    /// prints no marker, and exits with its program's status.
    #[test]
    fn the_shell_wrapper_makes_no_fifo_where_there_is_none() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let socket = dir.path().join("tmux.sock");
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("tmux-engine-exit")
            .args(["sh", "-c", "exit 3"])
            .env("TMUX", format!("{},1,0", socket.display()))
            .output()
            .expect("running the wrapper");
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(!dir.path().join(FIFO).exists());
    }
}
