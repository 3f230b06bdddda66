//! A watch process: once the process that started it is gone, however it
//! died (`kill -9` included), it makes sure a server it names is gone too
//! and removes the directories it was given.
//!
//! A server run with `exit-unattached on` whose only client is the engine's
//! control client (`run`, the test fixture, a pooled server) normally needs
//! no help: when the engine dies, that client reads EOF and leaves, the
//! server exits and its pane's program gets its hang-up. But tmux 3.3a
//! never lets a control client go while output for it is still queued
//! (`server_client_check_exit` waits for `control_all_done`, and a write
//! to a reader that died fails, so the buffer never drains): a server
//! that had output pending when the engine was SIGKILLed stays, and so
//! does its client. The watch, `/bin/sh` blocked reading a pipe whose only
//! writer is the engine, wakes at EOF, gives the server a moment to exit
//! on its own, then SIGKILLs it (only while that pid still runs tmux on
//! the same socket), and removes the directories. It runs in a process
//! group of its own, so the Ctrl-C that stops the engine's process group
//! does not stop it first.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::{Error, Result};

/// The watch's script: `$1` the server's pid (or empty), `$2` a path its
/// command line names (its socket, or the directory holding it);
/// the rest are paths to remove. Waits for EOF on stdin, up to 1 s for the
/// server to exit by itself, then SIGKILLs it if that pid is still a
/// process naming the socket.
const SCRIPT: &str = r#"read -r _
pid=$1 named=$2
shift 2
if [ -n "$pid" ]; then
  # Bounded by time, not by a count of forks (20 forks of `sleep` took
  # well over the second under load).
  timeout 1 tail -s 0.05 --pid="$pid" -f /dev/null 2>/dev/null
  if grep -qaF -- "$named" "/proc/$pid/cmdline" 2>/dev/null; then kill -9 "$pid"; fi
fi
rm -rf -- "$@""#;

/// The `argv[0]` of a watch, so `ps` says what it is.
const NAME: &str = "tmux-engine-watch";

/// A running watch; its pipe closes when this is dropped or the process
/// that holds it dies.
#[derive(Debug)]
pub struct Watch {
    child: Child,
}

impl Watch {
    /// Starts a watch for when this process dies: it ends the server of
    /// `server` (its pid, and a path its command line names: the socket or
    /// its directory, so a reused pid is never killed), if any, and
    /// removes `paths`.
    ///
    /// # Errors
    /// `IO` when `/bin/sh` cannot be started.
    pub fn start(server: Option<(u32, &Path)>, paths: &[&Path]) -> Result<Watch> {
        use std::os::unix::process::CommandExt;
        let (pid, named) = match server {
            Some((pid, named)) => (pid.to_string(), named.as_os_str().to_owned()),
            None => (String::new(), Default::default()),
        };
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg(NAME)
            .arg(pid)
            .arg(named)
            .args(paths)
            // The write end stays with us (std opens it close-on-exec, so
            // no other child inherits it and holds the read open).
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io("starting the watch", e))?;
        Ok(Watch { child })
    }

    /// The watch's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the watch once its owner has cleaned up itself: there is
    /// nothing left for it to do, so it is killed rather than told, and
    /// reaped at once (SIGKILL is immediate), leaving no zombie.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
