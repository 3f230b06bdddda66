//! [`Terminal`]: one program in a private tmux server, driven through
//! control mode, with a screen model that follows its output.
//!
//! ```no_run
//! use tmux_engine::Terminal;
//!
//! # async fn demo() -> tmux_engine::Result<()> {
//! let t = Terminal::builder().command(["python3", "-q"]).start().await?;
//! t.wait_for_text(">>> ").await?;
//! t.send_text("6*7\r").await?;
//! t.wait_for_regex(r"(?m)^42$").await?;
//! t.kill().await?;
//! # Ok(()) }
//! ```
//!
//! The server lives in its own `0700` directory with the engine's hermetic
//! tmux config. A task feeds the pane's control-mode output events into a
//! terminal emulator (`screen`'s model); waits sleep on that model and wake on each output
//! event, so they resolve within microseconds of the output arriving and
//! never poll `capture-pane`.
//!
//! Layout: `builder` (what to run), `launch` (server + control client +
//! subscribed pane, also used by the registry and `run`), this file (the
//! verbs).

mod builder;
mod launch;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub(crate) use builder::discover;
pub use builder::{DEFAULT_TIMEOUT, TerminalBuilder};
pub use launch::{Parts, launch};
pub(crate) use launch::{Starter, launch_as};

use crate::control::PaneId;
use crate::control::client::{ControlClient, OutputPath, PaneEvent, PaneStream};
use crate::control::snapshot::capture_snapshot;
use crate::control::subscribe::SubscribeOptions;
use crate::screen::model::{self, SharedModel};
use crate::screen::{IntoRegex, Screen, Within};
use crate::tmux::ServerHandle;
use crate::tmux::command::{TmuxCommand, resize_window};
use crate::tmux::server::Server;
use crate::vocab::{ExitStatus, Size};
use crate::{Error, Result};

/// A program running in a private tmux server. See the [module docs](self).
///
/// Dropping it kills the program's whole process tree and the server and
/// removes its directory (blocking the thread briefly);
/// [`kill`](Terminal::kill) does the same without blocking.
pub struct Terminal {
    /// Held until `kill` or drop.
    server: Option<Server>,
    /// The same server's address and pid, for reads after `server` is
    /// taken (a handle never kills).
    address: ServerHandle,
    client: ControlClient,
    pane: PaneId,
    pane_pid: u32,
    model: Arc<SharedModel>,
    feeder: tokio::task::JoinHandle<()>,
    timeout: Duration,
}

impl Terminal {
    /// Configures a terminal: `Terminal::builder().command([...]).start()`.
    pub fn builder() -> TerminalBuilder {
        TerminalBuilder::default()
    }

    /// Wraps launched parts: starts the screen model on their output.
    pub(crate) fn from_parts(
        parts: Parts,
        size: Size,
        scrollback: usize,
        timeout: Duration,
    ) -> Terminal {
        let Parts {
            server,
            client,
            pane,
            output,
            ..
        } = parts;
        let model = SharedModel::new(size, scrollback);
        let feeder = tokio::spawn(model::feed(model.clone(), client.clone(), pane, output));
        Terminal {
            pane_pid: server.first_pane().pid,
            address: server.handle().clone(),
            server: Some(server),
            client,
            pane,
            model,
            feeder,
            timeout,
        }
    }

    /// Writes `bytes` to the program exactly (any bytes, NUL included), as
    /// if typed: `"ls\r"` runs `ls` in a shell.
    ///
    /// # Errors
    /// `SERVER_GONE` when the server is gone, `COMMAND_FAILED` for a dead
    /// pane, `UNRESPONSIVE`.
    pub async fn send_text(&self, bytes: impl AsRef<[u8]>) -> Result<()> {
        self.client.send_bytes(self.pane, bytes.as_ref()).await
    }

    /// Sends keys by tmux key name (`Enter`, `C-c`, `Up`, `F5`, `M-x`), one
    /// `send-keys` argument each. A word that is no key name is typed as
    /// text.
    ///
    /// # Errors
    /// `INVALID_INPUT` for an empty key or one with NUL; as
    /// [`send_text`](Self::send_text).
    pub async fn send_keys(&self, keys: &[&str]) -> Result<()> {
        let mut command = TmuxCommand::new("send-keys").target(self.pane);
        for key in keys {
            if key.is_empty() {
                return Err(Error::InvalidInput("an empty key name".into()));
            }
            command = command.arg(key);
        }
        self.client.command(&command).await?;
        Ok(())
    }

    /// Waits until the program is blocked reading its terminal (its
    /// foreground process group asleep in a terminal read, or in the
    /// `poll`/`select` a line editor waits in; see
    /// `tmux::reading`), seen twice with no output between,
    /// so that what is sent next is read by the program's next read rather
    /// than typed ahead (a canonical-mode `C-d` typed ahead of a raw-mode
    /// line editor is lost). Returns at once when the program has exited.
    ///
    /// # Errors
    /// `TIMEOUT` past the terminal's timeout: the program never read (or
    /// reads in a way the detection does not see, e.g. `epoll`, or a reader
    /// deep in a pipeline).
    pub async fn wait_for_input_ready(&self) -> Result<()> {
        let pane = self.pane_pid;
        self.within(self.timeout)
            .until_ready("the program to read its terminal", || {
                crate::tmux::reading::blocked_on_input(pane)
            })
            .await
    }

    /// The screen model, for the fixture's recorder and artifacts.
    pub(crate) fn model(&self) -> &Arc<SharedModel> {
        &self.model
    }

    /// Waits with deadline `timeout` instead of the default:
    /// `t.within(Duration::from_secs(1)).wait_for_text("x")`.
    pub fn within(&self, timeout: Duration) -> Within<'_> {
        Within {
            model: &self.model,
            timeout,
        }
    }

    /// Waits until `text` is on the screen; returns that screen.
    ///
    /// # Errors
    /// `TIMEOUT` (the message shows the screen and the last output),
    /// `WAIT_ENDED` when the program exited without showing it.
    pub async fn wait_for_text(&self, text: &str) -> Result<Screen> {
        self.within(self.timeout).wait_for_text(text).await
    }

    /// Waits until `regex` matches the screen text ([`Screen::text`]);
    /// returns the matched text.
    ///
    /// # Errors
    /// As [`wait_for_text`](Self::wait_for_text), and `INVALID_INPUT` for a
    /// bad pattern.
    pub async fn wait_for_regex(&self, regex: impl IntoRegex) -> Result<String> {
        self.within(self.timeout).wait_for_regex(regex).await
    }

    /// Waits until `check` holds for the screen; returns that screen.
    ///
    /// # Errors
    /// As [`wait_for_text`](Self::wait_for_text).
    pub async fn wait_for(&self, check: impl FnMut(&Screen) -> bool) -> Result<Screen> {
        self.within(self.timeout).wait_for(check).await
    }

    /// Waits until no output came for `quiet`; returns the screen.
    ///
    /// # Errors
    /// `TIMEOUT` when output never pauses that long.
    pub async fn wait_for_stable(&self, quiet: Duration) -> Result<Screen> {
        self.within(self.timeout).wait_for_stable(quiet).await
    }

    /// Waits until the program exited and its final screen is in the
    /// model; returns how it ended.
    ///
    /// # Errors
    /// `TIMEOUT`, or `WAIT_ENDED` when the server vanished first.
    pub async fn wait_for_exit(&self) -> Result<ExitStatus> {
        self.within(self.timeout).wait_for_exit().await
    }

    /// The screen now: text, cells with attributes, cursor. What the
    /// program has drawn so far, as of the last output event received.
    ///
    /// # Errors
    /// None today; a `Result` so that a terminal whose model is rebuilt
    /// from tmux can report failure without an API change.
    pub async fn screen(&self) -> Result<Screen> {
        Ok(self.model.screen())
    }

    /// What tmux itself shows in the pane now (`capture-pane -e` with the
    /// pane's size, cursor and mode), not the model: the reference the
    /// model is checked against.
    ///
    /// # Errors
    /// `SERVER_GONE`, `COMMAND_FAILED` when the pane is gone.
    pub async fn tmux_screen(&self) -> Result<Screen> {
        let snapshot = capture_snapshot(&self.client, self.pane, 0).await?;
        Ok(Screen::from_snapshot(&snapshot))
    }

    /// The lines that scrolled off the top, oldest first (at most the
    /// builder's `scrollback`), trailing blanks trimmed.
    ///
    /// # Errors
    /// As [`screen`](Self::screen).
    pub async fn scrollback(&self) -> Result<Vec<String>> {
        Ok(self.scrollback_now())
    }

    /// Resizes the terminal (it stays pinned at the new size); the program
    /// gets SIGWINCH and the model takes the new size at once.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a size out of range ([`Size::check`](crate::vocab::Size::check));
    /// tmux errors.
    pub async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        let size = Size::new(cols, rows)?;
        self.client.command(&resize_window(self.pane, size)).await?;
        self.model.lock().set_size(size);
        self.model.bump();
        Ok(())
    }

    /// The screen now, without awaiting (the fixture's sync view).
    pub(crate) fn screen_now(&self) -> Screen {
        self.model.screen()
    }

    /// The screen in escape form (text with SGR and cursor escapes that
    /// redraw it on a blank terminal), without awaiting.
    pub(crate) fn formatted_now(&self) -> String {
        self.model.lock().emulator.formatted()
    }

    /// The scrollback now, without awaiting.
    pub(crate) fn scrollback_now(&self) -> Vec<String> {
        self.model.lock().emulator.scrollback_lines()
    }

    /// The size of the screen model.
    pub fn size(&self) -> Size {
        self.model.lock().size()
    }

    /// How the program ended, once it has (and its final screen is in the
    /// model); `None` while it runs.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.model.lock().exit
    }

    /// A live stream of the program's output from now on, for a viewer of
    /// its own (the screen model has one already). See [`Output`].
    pub fn output(&self) -> Output {
        Output {
            stream: self
                .client
                .subscribe_pane(self.pane, SubscribeOptions::default()),
        }
    }

    /// The pid of the pane's process, the leader of its session: the exit
    /// handshake's wrapper (`/bin/sh`, see docs/tmux-quirks.md), whose one
    /// child is the program; the program itself when it was started
    /// without a command (the default shell).
    pub fn pid(&self) -> u32 {
        self.pane_pid
    }

    /// The tmux server's pid.
    pub fn server_pid(&self) -> u32 {
        self.address.pid()
    }

    /// The server's private directory (socket, config).
    pub fn dir(&self) -> &Path {
        self.address.dir()
    }

    /// The pane the program runs in.
    pub fn pane(&self) -> PaneId {
        self.pane
    }

    /// Which way the program's output reaches the screen model: raw
    /// through the pane's pipe, or tmux's `%output` (see
    /// [`ServerOptions::raw_relay`](crate::tmux::ServerOptions::raw_relay)).
    pub fn output_path(&self) -> OutputPath {
        self.client.output_path(self.pane)
    }

    /// The control client, for tmux commands the terminal does not wrap:
    /// `t.client().command(&TmuxCommand::new("list-panes"))`.
    pub fn client(&self) -> &ControlClient {
        &self.client
    }

    /// Kills the program's whole process tree and the server, removes the
    /// server's directory, and resolves once all of it is gone.
    ///
    /// # Errors
    /// `UNRESPONSIVE` when the server survives SIGKILL; `IO` when the
    /// directory cannot be removed.
    pub async fn kill(mut self) -> Result<()> {
        self.feeder.abort();
        // The model's task ends before the connection does: nothing of
        // this terminal outlives `kill`.
        let _ = (&mut self.feeder).await;
        let Some(server) = self.server.take() else {
            return Ok(());
        };
        // The one kill path, asking over the open connection rather than
        // through a new tmux client: the server exits at once.
        let result = server.kill_with(self.client.kill_request()).await;
        self.client.detach().await;
        result
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.feeder.abort();
        // The server's own Drop takes the one kill path (blocking): the
        // pane's process tree, the server, its directory.
    }
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("pane", &self.pane)
            .field("pid", &self.pane_pid)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// A live stream of a terminal's output.
///
/// Output is exact bytes, in order, split anywhere (a UTF-8 character or an
/// escape sequence may straddle two chunks). A reader that falls behind is
/// never waited for: its output is skipped, and once it has drained it gets
/// one [`PaneEvent::Resync`], a snapshot of the screen and recent history
/// that replaces whatever it knew, then live output again. So a loop must
/// handle both events; [`recv_bytes`](Output::recv_bytes) does it for a
/// reader that only wants bytes to write to a terminal:
///
/// ```no_run
/// # async fn demo(t: &tmux_engine::Terminal) {
/// let mut output = t.output();
/// while let Some(bytes) = output.recv_bytes().await {
///     // write `bytes` to a terminal emulator
/// # let _ = bytes;
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Output {
    stream: PaneStream,
}

impl Output {
    /// The next event; `None` once the terminal is gone.
    pub async fn recv(&mut self) -> Option<PaneEvent> {
        self.stream.recv().await
    }

    /// The next bytes to write to a terminal emulator: output as it came,
    /// and after a lag the snapshot as a repaint (clear, redraw history and
    /// screen, restore the cursor). `None` once the terminal is gone.
    pub async fn recv_bytes(&mut self) -> Option<Bytes> {
        match self.stream.recv().await? {
            PaneEvent::Output(bytes) => Some(bytes),
            PaneEvent::Resync(snapshot) => Some(Bytes::from(snapshot.to_ansi())),
        }
    }

    /// Why the stream ended, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.stream.close_reason()
    }
}
