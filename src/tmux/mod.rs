//! tmux itself: finding the binary, its version and quirks, private servers,
//! and building command lines that no user text can break out of.
//!
//! STUB: being written; see the issue brief.

pub mod command;
pub mod server;
pub mod version;
