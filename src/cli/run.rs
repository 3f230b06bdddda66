//! `tmux-engine run`: a command in a private tmux server, its pane output
//! streamed to stdout through control mode, its exit status passed on.
//!
//! The session is created by the control client itself
//! (`tmux -C new-session ...`), with the pane subscribed before tmux writes a
//! byte, so the program's first output is not lost. Delivery is lossless: a
//! slow stdout slows tmux's reading of the pane (the program blocks) instead
//! of dropping bytes, which is what a pipe user expects.
//!
//! tmux (up to 3.7 at least) throws away output it has read but not yet
//! written to a control client when the pane's process exits
//! (`control_write_pending` discards blocks once the pane fd is closed), so
//! the last bytes of a program that exits at once are often lost. `run`
//! therefore wraps the command in `/bin/sh`, which prints a private OSC
//! marker carrying the status once the command ends and then waits for the
//! engine's acknowledgement: everything before the marker has reached us,
//! and the pane only dies after that.

use std::ffi::OsString;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use tmux_engine::control::client::SubscribeOptions;
use tmux_engine::control::client::{ClientOptions, ControlClient, Delivery, PaneEvent, PaneStream};
use tmux_engine::control::wait_pane_exit;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::Watch;
use tmux_engine::tmux::{ServerOptions, Tmux};
use tmux_engine::vocab::PaneId;
use tmux_engine::vocab::Size;
use tmux_engine::{Error, Result};

/// What `run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Pane size, columns × rows.
    pub size: Size,
    /// The program and its arguments (executed directly, no shell).
    pub command: Vec<OsString>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// The program ended: its shell-style status (128 + N for signal N).
    Exited(i32),
    /// SIGINT, SIGTERM or SIGHUP stopped the run; the server was removed.
    Interrupted(i32),
}

/// Runs the command, streaming its pane output to `out`.
///
/// # Errors
/// tmux discovery and startup errors; `SERVER_GONE` when tmux dies before
/// the program ends; `IO` when `out` fails.
pub async fn run(opts: RunOptions, mut out: impl tokio::io::AsyncWrite + Unpin) -> Result<RunEnd> {
    if opts.command.is_empty() {
        return Err(Error::InvalidInput("run needs a command".into()));
    }
    let mut interrupts = Interrupts::register()?;
    let tmux = Arc::new(Tmux::discover()?);
    let nonce = format!(
        "{:016x}",
        getrandom::u64()
            .map_err(|e| Error::io("drawing a random marker", std::io::Error::other(e)))?
    );
    let server_opts = {
        // The exit handshake keeps the pane alive until its output is in.
        // `exit-unattached on`: the server lives only while a client is
        // attached. Ours is the one creating the session, so it is attached
        // from the server's first moment; if the engine is SIGKILLed, its
        // `tmux -C` child reads EOF and leaves, and the server exits,
        // hanging up the pane (the wrapper's `read` included) instead of
        // leaking tmux, the wrapper and the program.
        ServerOptions::default()
            .size(opts.size)
            .command(wrapped(&nonce, opts.command))
            .drain_on_exit(false)
            // `%output`, not the raw pipe: delivery is lossless, and only
            // control mode makes tmux stop reading a pane whose reader
            // lags; a pipe's buffer in tmux has no bound, so a slow stdout
            // would grow the server instead of slowing the program.
            .raw_relay(None)
            .extra_config(vec!["set -s exit-unattached on".to_owned()])
    };
    let client_opts = {
        // pause-after would let tmux drop output; lossless needs it off.
        ClientOptions::default().pause_after(None).pane_pause(false)
    };
    let lossless = SubscribeOptions::default()
        .delivery(Delivery::Lossless)
        .snapshot_first(false);
    let started = launch(tmux, server_opts, client_opts, lossless);
    let Parts {
        server,
        client,
        pane,
        output: mut stream,
        ..
    } = tokio::select! {
        started = started => started?,
        // Dropping the start future kills whatever it had started.
        signal = interrupts.recv() => return Ok(RunEnd::Interrupted(128 + signal)),
    };
    // The second line behind exit-unattached: a server tmux keeps after a
    // SIGKILL of this process (its control client's output still queued)
    // is SIGKILLed by the watch.
    let watch = Watch::start(Some((server.pid(), server.dir())), &[])?;
    let marker = ExitMarker::new(&nonce);
    let result = pump(
        &client,
        pane,
        &mut stream,
        marker,
        &mut interrupts,
        &mut out,
    )
    .await;
    drop(stream);
    // Kill first: detaching first would make tmux tear down the client
    // while output may still be queued, which is wasted work.
    let killed = server.kill().await;
    // Then let go of the connection as a value: no task of it outlives
    // `run` (the stream is dropped, so no lossless wait holds it up).
    client.detach().await;
    watch.stop();
    killed?;
    result
}

/// `sh -c SCRIPT tmux-engine-run CMD ARGS...`: runs the command (no
/// shell parsing of its words), then prints the marker with its status and
/// waits for a line before exiting with that status. The trap keeps the
/// shell alive through a Ctrl-C aimed at the command (it resets on exec, so
/// the command gets the default action).
fn wrapped(nonce: &str, command: Vec<OsString>) -> Vec<OsString> {
    let script = format!(
        "trap : INT QUIT; \"$@\"; s=$?; trap - INT QUIT; \
         printf '\\033]{MARKER_CODE};{nonce};%d\\007' \"$s\"; IFS= read -r _; exit \"$s\""
    );
    let mut argv: Vec<OsString> = vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
        "tmux-engine-run".into(),
    ];
    argv.extend(command);
    argv
}

/// The OSC code of the exit marker; private, never meaningful to a terminal.
const MARKER_CODE: &str = "8765;tmux-engine-exit";

/// Finds the wrapper's exit marker in the output stream, holding back a
/// possible partial marker at the end of each chunk.
struct ExitMarker {
    prefix: Vec<u8>,
    carry: Vec<u8>,
}

impl ExitMarker {
    fn new(nonce: &str) -> ExitMarker {
        ExitMarker {
            prefix: format!("\x1b]{MARKER_CODE};{nonce};").into_bytes(),
            carry: Vec::new(),
        }
    }

    /// Feeds a chunk; returns the bytes that are certainly output, and the
    /// status once the whole marker has been seen.
    fn feed(&mut self, chunk: &[u8]) -> (Vec<u8>, Option<i32>) {
        self.carry.extend_from_slice(chunk);
        if let Some(at) = memchr::memmem::find(&self.carry, &self.prefix) {
            let rest = &self.carry[at + self.prefix.len()..];
            if let Some(end) = memchr::memchr(0x07, rest) {
                let status = std::str::from_utf8(&rest[..end])
                    .ok()
                    .and_then(|s| s.parse().ok());
                let out = self.carry[..at].to_vec();
                self.carry.clear();
                return (out, Some(status.unwrap_or(255)));
            }
            // Marker started, status not complete yet: keep it all.
            let out = self.carry[..at].to_vec();
            self.carry.drain(..at);
            return (out, None);
        }
        // Keep the longest tail that could begin the marker.
        let keep = (1..self.prefix.len())
            .rev()
            .find(|&n| self.carry.ends_with(&self.prefix[..n]))
            .unwrap_or(0);
        let out = self.carry[..self.carry.len() - keep].to_vec();
        self.carry.drain(..self.carry.len() - keep);
        (out, None)
    }

    /// What is left when the stream ends without a marker.
    fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }
}

async fn pump(
    client: &ControlClient,
    pane: PaneId,
    stream: &mut PaneStream,
    mut marker: ExitMarker,
    interrupts: &mut Interrupts,
    out: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> Result<RunEnd> {
    // Only matters when the wrapper dies before printing its marker (a
    // signal that is not INT or QUIT): then the pane's status is the answer.
    let exit = wait_pane_exit(client, pane);
    tokio::pin!(exit);
    loop {
        tokio::select! {
            event = stream.recv() => {
                let Some(event) = event else {
                    return Err(Error::ServerGone {
                        reason: stream.close_reason().unwrap_or_else(|| "stream ended".into()),
                    });
                };
                let mut status = write_event(out, &mut marker, event).await?;
                // Flush only when nothing more is queued: fewer syscalls
                // under load, no delay when idle.
                while status.is_none() {
                    let Some(event) = stream.try_recv() else { break };
                    status = write_event(out, &mut marker, event).await?;
                }
                out.flush().await.map_err(|e| Error::io("writing stdout", e))?;
                if let Some(status) = status {
                    // Let the wrapper exit; it passes the status on.
                    client.send_bytes(pane, b"\n").await?;
                    return Ok(RunEnd::Exited(status));
                }
            }
            status = &mut exit => {
                let status = status?;
                while let Some(event) = stream.try_recv() {
                    write_event(out, &mut marker, event).await?;
                }
                write_all(out, &marker.rest()).await?;
                out.flush().await.map_err(|e| Error::io("writing stdout", e))?;
                return Ok(RunEnd::Exited(status.shell_status()));
            }
            signal = interrupts.recv() => return Ok(RunEnd::Interrupted(128 + signal)),
        }
    }
}

async fn write_all(out: &mut (impl tokio::io::AsyncWrite + Unpin), bytes: &[u8]) -> Result<()> {
    out.write_all(bytes)
        .await
        .map_err(|e| Error::io("writing stdout", e))
}

async fn write_event(
    out: &mut (impl tokio::io::AsyncWrite + Unpin),
    marker: &mut ExitMarker,
    event: PaneEvent,
) -> Result<Option<i32>> {
    let (bytes, status) = match event {
        PaneEvent::Output(bytes) => marker.feed(&bytes),
        // Lossless delivery never skips, but a redraw is the honest fallback.
        PaneEvent::Resync(snapshot) => (snapshot.to_ansi(), None),
    };
    write_all(out, &bytes).await?;
    Ok(status)
}

/// SIGINT, SIGTERM and SIGHUP, registered up front so that a Ctrl-C (or a
/// closed SSH session) at any point, even while tmux starts, ends the run
/// cleanly instead of killing the process before it removes the server.
pub(super) struct Interrupts {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Interrupts {
    pub(super) fn register() -> Result<Interrupts> {
        use tokio::signal::unix::{SignalKind, signal};
        let register = |kind| signal(kind).map_err(|e| Error::io("installing a signal handler", e));
        Ok(Interrupts {
            int: register(SignalKind::interrupt())?,
            term: register(SignalKind::terminate())?,
            hup: register(SignalKind::hangup())?,
        })
    }

    /// Resolves with the signal number of the next SIGINT, SIGTERM or
    /// SIGHUP.
    pub(super) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => 2,
            _ = self.term.recv() => 15,
            _ = self.hup.recv() => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_marker_is_found_across_any_split() {
        let nonce = "00ff00ff00ff00ff";
        let stream = format!("hello\r\nworld\x1b]{MARKER_CODE};{nonce};42\x07\r\n").into_bytes();
        for split in 0..stream.len() {
            for split2 in split..stream.len() {
                let mut marker = ExitMarker::new(nonce);
                let mut out = Vec::new();
                let mut status = None;
                for chunk in [&stream[..split], &stream[split..split2], &stream[split2..]] {
                    if status.is_some() {
                        break;
                    }
                    let (bytes, s) = marker.feed(chunk);
                    out.extend_from_slice(&bytes);
                    status = s;
                }
                assert_eq!(status, Some(42), "splits {split} {split2}");
                assert_eq!(out, b"hello\r\nworld", "splits {split} {split2}");
            }
        }
    }

    #[test]
    fn a_stream_without_marker_passes_through() {
        let mut marker = ExitMarker::new("0123456789abcdef");
        let (out, status) = marker.feed(b"abc\x1b]87");
        assert_eq!((out.as_slice(), status), (&b"abc"[..], None));
        let (out, status) = marker.feed(b"x");
        assert_eq!((out.as_slice(), status), (&b"\x1b]87x"[..], None));
        assert!(marker.rest().is_empty());
    }

    #[test]
    fn the_wrapper_passes_words_untouched() {
        let argv = wrapped("ab", vec!["printf".into(), "%s;$(x)".into()]);
        assert_eq!(argv[0], "/bin/sh");
        assert_eq!(argv[3], "tmux-engine-run");
        assert_eq!(
            &argv[4..],
            &[OsString::from("printf"), OsString::from("%s;$(x)")]
        );
    }
}
