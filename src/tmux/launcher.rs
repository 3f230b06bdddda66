//! A pane that waits for its program: the warm pool's servers run a
//! launcher in place of a placeholder program, so a spawn starts the
//! terminal's program without `respawn-pane` (the bulk of a new
//! terminal's connect time).
//!
//! A `respawn-pane -k` made tmux close the pane's pty, open a new one,
//! fork, and run `utempter`'s helper and wait for it, all before it
//! answered: about 1.2 ms alone and 2.8 ms of a spawn's 4 ms (a probe
//! timing each step of serve's spawn, idle machine), with the exit
//! handshake's wrapper still to start after it. The launcher is that
//! wrapper, started with the pooled server: it blocks reading a line from
//! [`LAUNCH_FIFO`] in the server's private directory, then starts what the
//! engine wrote there first, and runs the wrapper's tail after it. Its
//! fourth word is the wrapper's name, so
//! [`wrapped`](super::exit_handshake::wrapped) sees a wrapper between
//! programs until the program runs, and its program from then on.
//!
//! Two launchers, as there are two wrappers
//! ([`wrapper_executable`](super::exit_handshake::wrapper_executable)):
//! the relay executable's (`__exit-wrapper launch`, see
//! [`super::exit_wrapper`]) reads its spec (the directory, the variables,
//! the words) from the fifo itself, up to [`SPEC_END`]: a file beside it was
//! an inode allocated per spawn, the dearest file operation of a spawn
//! churn (ext4 without a journal searches past every inode freed in the
//! last minute); a launcher also reads [`LAUNCH_SPEC`] after a lone newline,
//! as an older engine wrote it. It holds the fifo open until its program
//! runs, so the engine learns that from the fifo's last reader closing
//! (`EPOLLERR` on its end) rather than by looking in `/proc` every 100 µs.
//! The shell's sources [`LAUNCH_SCRIPT`]: change to
//! the spec's directory, set the positional parameters to the program's
//! words, and run the wrapper's own script with the spec's environment in
//! front of the program (assignments on the command, so they reach the
//! program and not the wrapper).
//!
//! What tmux does for a respawn's `-c` and `-e` is kept: the directory is
//! tried, then `$HOME`, then `/` (`spawn.c`); the environment adds to the
//! pane's. A spec the shell's script cannot carry exactly (an environment
//! name that is not a shell name: [`assignable`]) is respawned as before.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use super::exit_handshake::{
    LAUNCH, START_WAIT, WRAPPER_HEAD, WRAPPER_TAIL, wrapper_words, write_line,
};
use crate::{Error, Result};

/// The fifo the launcher waits on, in the server directory.
pub(crate) const LAUNCH_FIFO: &str = "launch.fifo";
/// The script the shell launcher sources, in the server directory;
/// removed once its program runs ([`forget`]), so the spec's environment
/// does not stay on disk.
pub(crate) const LAUNCH_SCRIPT: &str = "launch.sh";
/// Where an older engine wrote the relay executable's spec (see [`spec`]),
/// which its launcher still reads after a lone newline on the fifo.
pub(crate) const LAUNCH_SPEC: &str = "launch.spec";

/// What ends a spec written through the fifo: one NUL after the spec's own
/// last one. A spec never holds two in a row (each field is a tag byte,
/// then its bytes, then a NUL), so the launcher knows its end without the
/// writer's close, which it waits for no longer (see [`launch`]).
pub(crate) const SPEC_END: &[u8] = b"\0\0";

/// What a launch writes for a launcher: the shell's script (the file
/// [`LAUNCH_SCRIPT`]), or the relay executable's spec (through the fifo,
/// no file), and its text.
#[derive(Debug)]
pub(crate) struct LaunchFile {
    /// `None`: the spec, written through the fifo.
    name: Option<&'static str>,
    text: Vec<u8>,
}

/// How long a launch waits for a launcher that has not opened its fifo
/// yet (a pooled server taken right after it started).
const OPEN_WAIT: Duration = Duration::from_secs(2);

/// The launcher's script: the server directory from `$TMUX` (as the
/// wrapper finds its fifo), one line from the fifo, then the launch.
const LAUNCHER: &str = "d=${TMUX%,*,*}; d=${d%/*}; \
    IFS= read -r _ < \"$d/launch.fifo\" && . \"$d/launch.sh\"";

/// The launcher's words, as a pane's command: the relay executable's
/// launcher with a `relay` (see
/// [`wrapper_executable`](super::exit_handshake::wrapper_executable)),
/// else the shell's.
pub(crate) fn words(relay: Option<&Path>) -> Vec<OsString> {
    wrapper_words(relay, LAUNCH, LAUNCHER)
}

/// Makes the launcher's fifo in the server's private directory `dir`.
///
/// # Errors
/// `IO` when it cannot be made.
pub(crate) fn make_fifo(dir: &Path) -> Result<()> {
    super::exit_handshake::make_fifo_at(&dir.join(LAUNCH_FIFO))
}

/// Whether `sh` can assign every name of `env` exactly (a name that is
/// not a shell name cannot be carried by the script: such a spec is
/// respawned, see [`options::launch_script`](super::options::launch_script)).
pub(crate) fn assignable(env: &[(String, String)]) -> bool {
    env.iter().all(|(key, _)| {
        let mut bytes = key.bytes();
        bytes
            .next()
            .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
            && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
    })
}

/// `bytes` single-quoted for `sh` (every byte but NUL stands for itself).
fn sh_quote(out: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    if bytes.contains(&0) {
        return Err(Error::InvalidInput(format!(
            "{:?} contains a NUL byte",
            String::from_utf8_lossy(bytes)
        )));
    }
    out.push(b'\'');
    for &b in bytes {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    Ok(())
}

/// What starts `words` (as tmux would exec them) in `cwd` (absolute) with
/// `env` added, for the launcher of a server whose wrapper is `relay`
/// (see [`words`]): the relay's spec, or the shell's script; `None` for a
/// spec the shell cannot carry (see [`assignable`]).
///
/// # Errors
/// `INVALID_INPUT` for a NUL in a word, a name, a value or the directory
/// (or an `=` in a name, for the relay's).
pub(crate) fn launch_file(
    relay: Option<&Path>,
    cwd: Option<&Path>,
    env: &[(String, String)],
    words: &[OsString],
) -> Result<Option<LaunchFile>> {
    if relay.is_some() {
        let text = spec(cwd, env, words)?;
        return Ok(Some(LaunchFile { name: None, text }));
    }
    if !assignable(env) {
        return Ok(None);
    }
    let text = script(cwd, env, words)?;
    Ok(Some(LaunchFile {
        name: Some(LAUNCH_SCRIPT),
        text,
    }))
}

/// The relay executable's launch spec (read by
/// [`exit_wrapper`](super::exit_wrapper)): fields, each a tag byte and its
/// bytes up to a NUL: `C` the directory (absolute), `E` `NAME=VALUE` added
/// to the environment, `W` a word. Binary-safe, so any name tmux's `-e`
/// takes is carried.
///
/// # Errors
/// `INVALID_INPUT` for a NUL in a word, a name, a value or the directory,
/// or an `=` in a name.
pub(super) fn spec(
    cwd: Option<&Path>,
    env: &[(String, String)],
    words: &[OsString],
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut field = |tag: u8, parts: &[&[u8]]| {
        out.push(tag);
        for part in parts {
            if part.contains(&0) {
                return Err(Error::InvalidInput(format!(
                    "{:?} contains a NUL byte",
                    String::from_utf8_lossy(part)
                )));
            }
            out.extend_from_slice(part);
        }
        out.push(0);
        Ok(())
    };
    if let Some(cwd) = cwd {
        field(b'C', &[cwd.as_os_str().as_bytes()])?;
    }
    for (key, value) in env {
        if key.contains('=') {
            return Err(Error::InvalidInput(format!(
                "the variable name {key:?} contains '='"
            )));
        }
        field(b'E', &[key.as_bytes(), b"=", value.as_bytes()])?;
    }
    for word in words {
        field(b'W', &[word.as_bytes()])?;
    }
    Ok(out)
}

/// The shell launcher's script (see the module doc): change to `cwd`,
/// run `words` with `env` in front.
///
/// # Errors
/// `INVALID_INPUT` for a NUL in a word, a value or the directory.
fn script(cwd: Option<&Path>, env: &[(String, String)], words: &[OsString]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(cwd) = cwd {
        out.extend_from_slice(b"cd -- ");
        sh_quote(&mut out, cwd.as_os_str().as_bytes())?;
        out.extend_from_slice(b" 2>/dev/null || cd 2>/dev/null || cd /\n");
    }
    out.extend_from_slice(b"set --");
    for word in words {
        out.push(b' ');
        sh_quote(&mut out, word.as_bytes())?;
    }
    out.push(b'\n');
    let mut assignments = Vec::new();
    for (key, value) in env {
        assignments.extend_from_slice(key.as_bytes());
        assignments.push(b'=');
        sh_quote(&mut assignments, value.as_bytes())?;
        assignments.push(b' ');
    }
    out.extend_from_slice(WRAPPER_HEAD.as_bytes());
    out.extend_from_slice(&assignments);
    out.extend_from_slice(WRAPPER_TAIL.as_bytes());
    out.push(b'\n');
    Ok(out)
}

/// Starts a program in the pooled pane whose server directory is `dir`,
/// its launcher's pid `launcher`: writes the launch `file` (see
/// [`launch_file`]), then the line the launcher waits for; or, for the
/// relay executable's launcher, the spec itself through the fifo, then
/// waits (up to [`START_WAIT`]) until the launcher let the fifo go: its
/// program runs, or could not start, or the launcher is gone.
///
/// # Errors
/// `IO` writing the file or the fifo; `SERVER_GONE` when no launcher takes
/// it (it died, or never opened its fifo within [`OPEN_WAIT`]).
pub(crate) async fn launch(dir: &Path, launcher: u32, file: &LaunchFile) -> Result<()> {
    let path = file.name.map(|name| dir.join(name));
    if let Some(path) = &path {
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut opened| opened.write_all(&file.text));
        written.map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    let remove = || {
        if let Some(path) = &path {
            let _ = std::fs::remove_file(path);
        }
    };
    let fifo = dir.join(LAUNCH_FIFO);
    let begun = tokio::time::Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        // Non-blocking: no reader (ENXIO) is a launcher not there yet, or
        // gone, never a launch that hangs.
        let sent = match path {
            Some(_) => write_line(&fifo).map(|()| None),
            None => write_spec(&fifo, &file.text).map(Some),
        };
        match sent {
            Ok(None) => return Ok(()),
            Ok(Some(written)) => {
                let_go(written).await;
                return Ok(());
            }
            Err(error) if error.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
                if !super::process::is_alive(launcher) || begun.elapsed() >= OPEN_WAIT {
                    remove();
                    return Err(Error::ServerGone {
                        reason: format!(
                            "the pooled pane's launcher (pid {launcher}) is not waiting"
                        ),
                    });
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(error) => {
                remove();
                return Err(Error::io(format!("writing {}", fifo.display()), error));
            }
        }
    }
}

/// Writes `spec` and the NUL that makes its end a [`SPEC_END`] through
/// the launch fifo at `path` to a launcher waiting in its `open`, which
/// reads up to that end.
/// Opened non-blocking, so no reader is `ENXIO` at once; then blocking: a
/// spec past the pipe's room (64 KiB of environment) waits for the
/// launcher's reads, which follow at once, and a launcher gone meanwhile
/// is `EPIPE`, never a wait.
fn write_spec(path: &Path, spec: &[u8]) -> std::io::Result<std::fs::File> {
    let mut fifo = super::exit_handshake::open_writer(path)?;
    let flags = rustix::fs::fcntl_getfl(&fifo)?;
    rustix::fs::fcntl_setfl(&fifo, flags - rustix::fs::OFlags::NONBLOCK)?;
    fifo.write_all(&[spec, &SPEC_END[1..]].concat())?;
    Ok(fifo)
}

/// Waits until the launch fifo's other end, `fifo` written, has no reader
/// left (the kernel flags a pipe's writer `EPOLLERR` then), at most
/// [`START_WAIT`]. A launcher lets it go once its program runs: the pid
/// look that follows finds it running at once, not after a poll.
async fn let_go(fifo: std::fs::File) {
    use tokio::io::Interest;
    // Deprecated as unsound where the caller may close the descriptor while
    // it is registered; the `File` moves into the `AsyncFd`, so nothing
    // else can (the safety `register` asks for), as in `process.rs`.
    #[allow(deprecated)]
    let registered = tokio::io::unix::AsyncFd::with_interest(fifo, Interest::ERROR);
    let Ok(watch) = registered else {
        return;
    };
    let _ = tokio::time::timeout(START_WAIT, watch.ready(Interest::ERROR)).await;
}

/// Removes the launch `file` of the server in `dir` once its program runs
/// (the shell launcher holds its script open, so the rest of the wrapper
/// still reads; the relay's read its spec before it started the program).
/// Not from the script itself: `rm` is no `sh` builtin, and its fork and
/// exec were a millisecond of a new terminal's connect.
pub(crate) fn forget(dir: &Path, file: &LaunchFile) {
    if let Some(name) = file.name {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_every_byte_for_sh() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"plain", b"'plain'"),
            (b"it's", b"'it'\\''s'"),
            (b"$HOME `x` \"y\"\n", b"'$HOME `x` \"y\"\n'"),
            (b"", b"''"),
        ];
        for (raw, quoted) in cases {
            let mut out = Vec::new();
            sh_quote(&mut out, raw).expect("no NUL");
            assert_eq!(&out, quoted, "{:?}", String::from_utf8_lossy(raw));
        }
        assert!(sh_quote(&mut Vec::new(), b"a\0b").is_err());
    }

    #[test]
    fn assigns_only_shell_names() {
        let env = |key: &str| vec![(key.to_owned(), "v".to_owned())];
        assert!(assignable(&[]));
        assert!(assignable(&env("_A1")));
        for key in ["1A", "A-B", "", "A B"] {
            assert!(!assignable(&env(key)), "{key:?}");
        }
    }
}
