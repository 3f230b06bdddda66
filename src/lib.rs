//! tmux-engine: run terminals inside private tmux servers and drive them
//! through tmux control mode.
//!
//! # Architecture
//!
//! ```text
//!  CLI (main.rs, cli::)               fixture   test terminals: waits on a screen model
//!        |                                |
//!  registry          owners, terminals, policy, persistence; backends behind
//!    |               a trait (registry::tmux is the built-in one)
//!  terminal          a server whose session the control client creates
//!    |
//!  control::client   one task per tmux server: pipelined commands, routed events,
//!    |          \     a handshake lock per server (control::subscribe: lag,
//!    |                pause, resync; control::exit)
//!  control::codec    frames lines, folds %begin..%end into Reply (sans-IO)
//!  control::parse    one line -> Notification / Guard (nom, sans-IO)
//!  tmux::server      private socket, hermetic config, kill on drop
//!  tmux::handle      a server not owned: never killed on drop
//!  tmux::options     what a server starts with: validation, config, argv
//!  tmux::process     pidfd waits, liveness and signals for the daemonised server
//!  tmux::procfs      /proc: stat fields, foreground group, session members
//!  tmux::command     the one quoting function; send-keys -H chunks
//!  tmux::version     discovery, version, capability flags
//! ```
//!
//! Lower layers never call upward: `parse` and `codec` know nothing of
//! processes, `tmux` knows nothing of the control client.
#![warn(missing_docs)]

pub mod control;
pub mod error;
pub mod fixture;
pub mod registry;
pub mod screen;
pub mod terminal;
pub mod tmux;
pub mod vocab;

pub use error::{Error, Result};
pub use terminal::Terminal;
