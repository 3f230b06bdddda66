//! A control client's tunables and which path a pane's output takes.

use std::path::PathBuf;
use std::time::Duration;

/// Tunables of a control client. `Default` gives sane values; change one
/// with its setter: `ClientOptions::default().pause_after(None)`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// A command unanswered for this long fails with `UNRESPONSIVE` (told
    /// up to 1/16 of it later: the client's reply watchdog wakes on a
    /// grid that every client shares, so many wake together).
    pub command_timeout: Duration,
    /// How long to wait for tmux's first block (the attach) to close.
    pub ready_timeout: Duration,
    /// Turn on tmux's `pause-after=N` (seconds, tmux 3.2+): if the engine
    /// itself falls N seconds behind, tmux pauses the pane instead of
    /// buffering without bound, and the engine resyncs it. `None` leaves it
    /// off (needed for [`Delivery::Lossless`](super::Delivery::Lossless)).
    pub pause_after: Option<u32>,
    /// Whether `refresh-client -A '%N:pause'` may be used to quiet a pane
    /// nobody keeps up with (tmux 3.2+).
    pub pane_pause: bool,
    /// At most this many caller commands in flight; more wait their turn.
    pub max_in_flight: usize,
    /// Queue length of each pane subscriber, in events.
    pub subscriber_capacity: usize,
    /// Queue length of the notification broadcast (slow receivers skip).
    pub event_capacity: usize,
    /// Lines of history a resync captures above the screen.
    pub resync_history: u32,
    /// The codec's line limit in bytes.
    pub max_line_length: usize,
    /// A lock (a file, or a directory) shared by every engine client of
    /// the same server (the server's directory itself, see
    /// [`ServerHandle::control_lock`](crate::tmux::ServerHandle::control_lock)):
    /// held while this client connects (until tmux answered its attach)
    /// and while it detaches (until `tmux -C` exited), so that one client
    /// never leaves while another is still identifying, which crashes tmux
    /// 3.3a. `None` takes no lock.
    pub handshake_lock: Option<PathBuf>,
    /// Where [`ControlClient::send_bytes`](super::ControlClient::send_bytes) writes a paste's pieces for
    /// tmux to `load-buffer` (each file lives until tmux has read it):
    /// a directory only this user can enter, such as the server's own
    /// (which [`ControlClient::attach`](super::ControlClient::attach) uses). `None`: a private temporary
    /// directory of the client's, made on its first paste.
    pub input_dir: Option<PathBuf>,
    /// The server directory of a pane whose program runs under the exit
    /// handshake ([`ServerOptions::exit_handshake`]): the reader scans every
    /// pane's output for the wrapper's marker and acknowledges it once the
    /// bytes before it are routed, so the pane dies only after its last
    /// bytes reached every subscriber. [`launch`] sets it.
    ///
    /// [`ServerOptions::exit_handshake`]: crate::tmux::ServerOptions::exit_handshake
    /// [`launch`]: crate::terminal::launch
    pub exit_handshake: Option<PathBuf>,
    /// A `tmux -C` process that another client replaces as soon as it is
    /// attached ([`launch`](crate::terminal::launch)'s starting client on
    /// the raw path): its stderr goes to a pipe a task drains, not to a
    /// file in the server's directory. The file spares a long-lived client
    /// a descriptor and a task, but is an inode allocated per spawn (the
    /// dearest file operation of a spawn churn on ext4); a client that lives
    /// a few milliseconds holds the pipe no longer.
    pub(crate) short_lived: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            command_timeout: Duration::from_secs(10),
            ready_timeout: Duration::from_secs(10),
            pause_after: Some(5),
            pane_pause: true,
            max_in_flight: 1024,
            subscriber_capacity: 1024,
            event_capacity: 4096,
            resync_history: 1000,
            max_line_length: crate::control::codec::DEFAULT_MAX_LINE_LENGTH,
            handshake_lock: None,
            input_dir: None,
            exit_handshake: None,
            short_lived: false,
        }
    }
}

setters!(ClientOptions {
    command_timeout: Duration,
    ready_timeout: Duration,
    pause_after: Option<u32>,
    pane_pause: bool,
    max_in_flight: usize,
    subscriber_capacity: usize,
    event_capacity: usize,
    resync_history: u32,
    max_line_length: usize,
    handshake_lock: Option<PathBuf>,
    input_dir: Option<PathBuf>,
    exit_handshake: Option<PathBuf>,
});

/// Which way a pane's output reaches the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputPath {
    /// `%output` lines of control mode, `\ooo`-escaped by tmux.
    Control,
    /// The pane's raw bytes from its `pipe-pane` socket.
    Raw,
}

impl OutputPath {
    /// `"control"` or `"raw"`: the name snapshots and JSON use.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputPath::Control => "control",
            OutputPath::Raw => "raw",
        }
    }
}

impl std::fmt::Display for OutputPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
