//! The exit handshake's wrapper as a process of its own: what the relay
//! executable runs when its first argument is `__exit-wrapper` (see
//! [`super::exit_handshake`] for the handshake, [`super::launcher`] for a
//! pooled pane's launch).
//!
//! It replaces the `/bin/sh` wrapper wherever a relay executable is known
//! (`tmux-engine-relay`, linked static: no loader, a few pages of its own):
//! dash cost about 104 KiB of private memory per terminal, most of it
//! relocations, and could not tell `exit 130` from a death by `SIGINT` (a
//! shell has only `$?`, 128 + the signal). This one waits for its program
//! and so has the exact status: a code is exited with as it is, and a
//! signal is raised again on the wrapper (core dumps aside), so tmux's
//! `pane_dead_status` or `pane_dead_signal` says what happened to the
//! program. Where no relay executable is known (a library whose program is
//! not the engine) the shell wrapper stays.
//!
//! What the shell did is kept: the program's words run as given (no shell
//! parsing); `INT`, `QUIT` and `TERM` aimed at the pane's process group do
//! not end the wrapper while its program runs (handlers, which `exec`
//! resets, so the program gets the default actions) and end it as the
//! default would once the program ended (`trap -` in the script); `HUP` is
//! left alone, so a killed pane takes the wrapper along. The server
//! directory is found from `$TMUX`, as the script found it. One difference
//! is glibc's: `std` starts the program with `posix_spawn`, which sets
//! glibc's two internal signals (32 and 33) to ignored in the child (so
//! the parent's handlers never run in it before its `exec`), and an
//! ignored signal stays ignored across `exec`. A glibc program handles
//! both again as it starts; one on another C library finds them ignored.
//!
//! Nothing here runs inside the engine: only in the wrapper's process, so
//! it writes to its pane and exits, and never returns an error.

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::exit_handshake::{FIFO, LAUNCH, MARKER, RUN, WRAPPER_ARG, WRAPPER_NAME};
use super::launcher::{LAUNCH_FIFO, LAUNCH_SPEC, SPEC_END};

/// `sh`'s status for a program that could not be found.
const NOT_FOUND: i32 = 127;
/// `sh`'s status for a program found but not executable.
const NOT_EXECUTABLE: i32 = 126;

/// The wrapper: `args` are the words after [`WRAPPER_ARG`]. Runs its
/// program (or, as a launcher, waits for one), then the handshake, then
/// ends as the program did. Never returns.
pub fn exit_wrapper(args: impl Iterator<Item = OsString>) -> ! {
    let mut args = args;
    let mode = args.next();
    if args
        .next()
        .is_none_or(|name| name.as_bytes() != WRAPPER_NAME)
    {
        usage();
    }
    let ended = Arc::new(AtomicBool::new(false));
    let dir = server_dir();
    let status = match mode.as_ref().and_then(|mode| mode.to_str()) {
        Some(RUN) => {
            shield(&ended);
            let told = dir.as_deref().and_then(start_signal);
            run(Launch::words(args.collect()), told)
        }
        Some(LAUNCH) => {
            let Some((launch, fifo)) = dir.as_deref().and_then(wait_launch) else {
                // The shell launcher's `read ... && .` ended so.
                std::process::exit(1);
            };
            shield(&ended);
            launch.enter();
            run(launch, fifo)
        }
        _ => usage(),
    };
    ended.store(true, Ordering::SeqCst);
    if let Some(dir) = dir {
        handshake(&dir);
    }
    end_as(status)
}

/// Tells how the wrapper is run, and exits 2.
fn usage() -> ! {
    eprintln!(
        "tmux-engine: the exit handshake's wrapper is run by the engine as \
         `{WRAPPER_ARG} run|launch tmux-engine-exit [WORDS...]`"
    );
    std::process::exit(2)
}

/// What the program ended with, or the status `sh` would have given a
/// program it could not start.
enum Status {
    /// The program ended.
    Ended(std::process::ExitStatus),
    /// Not started: this code.
    Code(i32),
}

/// The server directory: `$TMUX` is `SOCKET,PID,SESSION`, the socket in
/// it (`${TMUX%,*,*}`, then `${d%/*}`, as the shell wrapper found it).
fn server_dir() -> Option<PathBuf> {
    socket_dir(&std::env::var_os("TMUX")?.into_vec())
}

/// The directory of the socket `$TMUX` (`tmux`) names.
fn socket_dir(tmux: &[u8]) -> Option<PathBuf> {
    let mut fields = tmux.rsplitn(3, |&b| b == b',');
    let (_, _, socket) = (fields.next(), fields.next(), fields.next());
    let socket = socket.unwrap_or(tmux);
    let dir = Path::new(std::ffi::OsStr::from_bytes(socket)).parent()?;
    Some(dir.to_owned())
}

/// `INT`, `QUIT` and `TERM` do nothing while the program runs, and what
/// their default does once `ended` is set. A signal that cannot be
/// handled is left as it is (the shell's `trap` would have failed alike).
fn shield(ended: &Arc<AtomicBool>) {
    use signal_hook::consts::{SIGINT, SIGQUIT, SIGTERM};
    for signal in [SIGINT, SIGQUIT, SIGTERM] {
        let _ = signal_hook::flag::register_conditional_default(signal, Arc::clone(ended));
    }
}

/// The handshake's fifo in `dir` open for writing, when the engine holds
/// it open for reading to learn of the program's start
/// ([`StartSignal`](super::exit_handshake::StartSignal)); `None` (`ENXIO`)
/// when nobody does, as for a restart or a library's terminal.
fn start_signal(dir: &Path) -> Option<std::fs::File> {
    super::exit_handshake::open_writer(&dir.join(FIFO)).ok()
}

/// Runs `launch`'s program and waits for it. `fifo`, the launch fifo the
/// spec came through or the handshake's fifo the engine reads
/// ([`start_signal`]), is let go once the program runs (or failed to
/// start): the engine, waiting for its last reader or writer to close,
/// learns so without looking in `/proc` (the child's copy closes at its
/// `exec`).
fn run(launch: Launch, fifo: Option<std::fs::File>) -> Status {
    let Some((program, words)) = launch.words.split_first() else {
        return Status::Code(0);
    };
    let mut command = std::process::Command::new(program);
    command.args(words);
    for (key, value) in &launch.env {
        command.env(key, value);
    }
    // `spawn` returns once the child has run `exec` (or failed to).
    let spawned = command.spawn();
    drop(fifo);
    match spawned.and_then(|mut child| child.wait()) {
        Ok(status) => Status::Ended(status),
        Err(error) => {
            eprintln!("tmux-engine: {}: {error}", program.to_string_lossy());
            Status::Code(match error.kind() {
                std::io::ErrorKind::NotFound => NOT_FOUND,
                _ => NOT_EXECUTABLE,
            })
        }
    }
}

/// The handshake: open the fifo (first, so an acknowledgement always finds
/// a reader), print the marker, wait for a line. Without a fifo there is
/// nobody to wait for.
fn handshake(dir: &Path) {
    let Ok(fifo) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(FIFO))
    else {
        return;
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(MARKER).and_then(|()| out.flush()).is_ok() {
        let _ = std::io::BufReader::new(fifo).read_until(b'\n', &mut Vec::new());
    }
}

/// Ends the wrapper as its program ended: its code, or its signal raised
/// again (at its default action; a signal whose default is not to end the
/// process cannot have ended it, so 128 + the signal then, as `sh` says).
fn end_as(status: Status) -> ! {
    let code = match status {
        Status::Code(code) => code,
        Status::Ended(status) => match (status.code(), status.signal()) {
            (Some(code), _) => code,
            (None, Some(signal)) => {
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                128 + signal
            }
            (None, None) => 1,
        },
    };
    std::process::exit(code)
}

/// A program to start: its directory, the variables it gets on top of the
/// wrapper's, its words.
#[derive(Debug, Default, PartialEq, Eq)]
struct Launch {
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    words: Vec<OsString>,
}

impl Launch {
    /// Just `words`, in the wrapper's own directory and environment.
    fn words(words: Vec<OsString>) -> Launch {
        Launch {
            words,
            ..Launch::default()
        }
    }

    /// Reads a spec (see [`launcher`](super::launcher), which writes
    /// it): fields, each a tag byte and its bytes up to a NUL: `C` the
    /// directory, `E` `NAME=VALUE`, `W` a word. `None` for anything else
    /// (the engine wrote it: never seen).
    fn parse(spec: &[u8]) -> Option<Launch> {
        let mut launch = Launch::default();
        let body = spec.strip_suffix(&[0])?;
        for field in body.split(|&b| b == 0) {
            let (&tag, bytes) = field.split_first()?;
            let os = || OsString::from_vec(bytes.to_vec());
            match tag {
                b'C' => launch.cwd = Some(PathBuf::from(os())),
                b'E' => {
                    let at = bytes.iter().position(|&b| b == b'=')?;
                    launch.env.push((
                        OsString::from_vec(bytes[..at].to_vec()),
                        OsString::from_vec(bytes[at + 1..].to_vec()),
                    ));
                }
                b'W' => launch.words.push(os()),
                _ => return None,
            }
        }
        Some(launch)
    }

    /// Changes to the directory as tmux does for a pane (`spawn.c`): the
    /// one asked for, else `$HOME`, else `/`.
    fn enter(&self) {
        let Some(cwd) = &self.cwd else {
            return;
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        for dir in [Some(cwd.clone()), home, Some(PathBuf::from("/"))]
            .into_iter()
            .flatten()
        {
            if std::env::set_current_dir(&dir).is_ok() {
                return;
            }
        }
    }
}

/// A launcher's wait: the spec the engine writes through the launch fifo,
/// up to its [`SPEC_END`], and the fifo, held until the program runs (see
/// [`run`]); a lone newline and the writer's close (an older engine's)
/// say the spec is in [`LAUNCH_SPEC`] beside it. `None` when it cannot be
/// read, or ends before its end.
fn wait_launch(dir: &Path) -> Option<(Launch, Option<std::fs::File>)> {
    // Opening for reading blocks until the engine opens it to write; a
    // reader waiting in `open` is one the engine's non-blocking open sees.
    let mut fifo = std::fs::File::open(dir.join(LAUNCH_FIFO)).ok()?;
    let mut spec = Vec::new();
    let mut chunk = [0; 4096];
    while !spec.ends_with(SPEC_END) {
        match fifo.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => spec.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    if spec == b"\n" {
        spec.clear();
        std::fs::File::open(dir.join(LAUNCH_SPEC))
            .ok()?
            .read_to_end(&mut spec)
            .ok()?;
        return Some((Launch::parse(&spec)?, None));
    }
    // The spec's own last NUL stays: `parse` wants it.
    let spec = spec.strip_suffix(SPEC_END)?;
    Some((Launch::parse(&[spec, &[0]].concat())?, Some(fifo)))
}

#[cfg(test)]
mod tests {
    use super::super::launcher::spec;
    use super::*;

    #[test]
    fn a_spec_reads_back_as_written() {
        let words: Vec<OsString> = vec!["sh".into(), "-c".into(), "echo 'a b'\n$X=".into()];
        let env = vec![
            ("A".to_owned(), "1=2".to_owned()),
            ("not-a-shell-name".to_owned(), String::new()),
        ];
        let written = spec(Some(Path::new("/tmp/d ir")), &env, &words).expect("no NUL");
        let launch = Launch::parse(&written).expect("a spec");
        assert_eq!(launch.cwd.as_deref(), Some(Path::new("/tmp/d ir")));
        assert_eq!(
            launch.env,
            vec![
                ("A".into(), "1=2".into()),
                ("not-a-shell-name".into(), "".into())
            ]
        );
        assert_eq!(launch.words, words);
        let bare = spec(None, &[], &words).expect("no NUL");
        assert_eq!(Launch::parse(&bare), Some(Launch::words(words.clone())));
    }

    #[test]
    fn a_spec_refuses_what_it_cannot_carry() {
        let words = [OsString::from("true")];
        assert!(spec(None, &[], &["a\0b".into()]).is_err());
        assert!(spec(Some(Path::new("/a\0b")), &[], &words).is_err());
        assert!(spec(None, &[("A=B".into(), "v".into())], &words).is_err());
        assert!(spec(None, &[("A".into(), "v\0".into())], &words).is_err());
        for bad in [&b""[..], b"W", b"Xa\0", b"Eab\0"] {
            assert_eq!(Launch::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_server_dir_is_the_sockets() {
        let cases = [
            ("/run/te/d/sock,123,0", Some("/run/te/d")),
            ("/run/te/a,b/sock,1,2", Some("/run/te/a,b")),
        ];
        for (tmux, dir) in cases {
            assert_eq!(socket_dir(tmux.as_bytes()).as_deref(), dir.map(Path::new));
        }
    }
}
