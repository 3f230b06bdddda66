//! tmux itself: finding the binary, its version and quirks, private servers,
//! and building command lines that no user text can break out of.
//!
//! - `version`: [`Tmux`] (a discovered binary) and its [`Version`];
//! - `command`: [`quote`], [`TmuxCommand`], [`send_keys_hex`];
//! - [`input`]: a write to a pane as commands, piece by piece (keys for
//!   a keystroke, `load-buffer` + an exact paste beyond);
//! - `options`: [`ServerOptions`], validated (names by
//!   `check_name`) and turned into the config
//!   file and start command;
//! - `server`: [`Server`], one tmux server on a private socket, started
//!   with `allocator`'s settings for glibc (tmux's heap is most of an idle
//!   terminal's memory);
//!   `first_reply` reads its start command's one reply block;
//! - `handle`: [`ServerHandle`], a server that outlives the engine
//!   (never killed on drop); owns a server directory's layout and the
//!   one-shot `tmux` runner;
//! - `kill`: the one kill path for a server, its panes' process trees and
//!   its directory ([`ServerHandle::kill_with`], and its blocking form for
//!   `Drop`);
//! - [`process`]: liveness and killing of processes we did not spawn
//!   directly (the daemonised tmux server, a pane's session);
//! - [`procfs`]: what `/proc` says about them (the one `/proc/PID/stat`
//!   parser, a pane's foreground group, session members);
//! - `reading`: how a pane's foreground waits for input (one look);
//! - `probe`: the one sans-IO judgement over those input waits ("reads
//!   its terminal": seen twice with no output between, checks backing off)
//!   that every send and wait uses.
//!
//! - `exit_handshake`: the wrapper that keeps a pane until the engine
//!   has its program's last bytes (the marker, the fifo, the scan);
//! - `exit_wrapper`: that wrapper as a process of the relay executable
//!   ([`exit_wrapper()`], run by [`WRAPPER_ARG`]), which keeps the
//!   program's exact status;
//! - [`relay`]: the raw output path: one resident relay per pane (`pipe-pane`
//!   -> the relay -> every engine process), its wire, its listener and its
//!   default executable;
//! - `client_protocol`: tmux's client protocol spoken by the engine itself
//!   (connect, identify, the command, the server's messages): a control
//!   client with no `tmux -C` process;
//! - `dirs`: private directories checked like tmux checks its socket
//!   directory (`UNSAFE_DIRECTORY` otherwise).
//!
//! Nothing here knows about the control client; `control::client` uses
//! [`Server::control_command`] and [`TmuxCommand::line`].

mod allocator;
pub(crate) mod client_protocol;
pub(crate) mod command;
pub(crate) mod dirs;
pub(crate) mod exit_handshake;
mod exit_wrapper;
mod first_reply;
pub(crate) mod handle;
pub mod input;
pub(crate) mod kill;
pub(crate) mod launcher;
pub(crate) mod options;
// Process and /proc plumbing: public only so the crate's own tests can
// check what is left running; not part of the API.
pub(crate) mod probe;
#[doc(hidden)]
pub mod process;
#[doc(hidden)]
pub mod procfs;
pub(crate) mod reading;
pub(crate) mod relay;
pub(crate) mod server;
pub(crate) mod version;
pub(crate) mod watch;
pub(crate) mod with_parent;

pub use allocator::{ENGINE_TUNABLES, VARIABLE as TUNABLES_VARIABLE};
pub use command::{TmuxCommand, quote, send_keys_hex, send_keys_hex_chunk};
pub use exit_handshake::WRAPPER_ARG;
pub use exit_wrapper::exit_wrapper;
pub use handle::ServerHandle;
pub use kill::KillRequest;
pub use options::{MARK_OPTION, ServerOptions};
pub use procfs::ProcessId;
pub use relay::{KeepNothing, Keeper, RELAY_ARG, RELAY_BINARY, relay};
pub use server::{DIR_PREFIX, FirstPane, MAX_SOCKET_PATH, Server};
pub use version::{MIN_VERSION, TMUX_ENV, Tmux, Version};
pub use watch::Watch;
pub use with_parent::{WITH_PARENT_ARG, with_parent};

/// Runs the helper mode the relay executable's first argument `first`
/// names, and never returns then: the exit handshake's wrapper
/// ([`WRAPPER_ARG`]) or a process bound to its parent
/// ([`WITH_PARENT_ARG`]). Gives `args` (the rest) back for any other.
/// Both binaries that can be the relay executable call it first.
pub fn helper_mode<I: Iterator<Item = std::ffi::OsString>>(
    first: Option<&std::ffi::OsStr>,
    args: I,
) -> I {
    match first.and_then(std::ffi::OsStr::to_str) {
        Some(WRAPPER_ARG) => exit_wrapper(args),
        Some(WITH_PARENT_ARG) => with_parent(args),
        _ => args,
    }
}
