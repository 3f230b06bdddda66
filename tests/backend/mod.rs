//! `src/backend/` tested against real tmux through the registry: sends
//! (exact output, wait reasons, the shells' marks), full-screen programs in
//! front, the pool of servers started ahead; and directly, what a
//! terminal vouches for to `list`.
#![allow(clippy::unwrap_used)]

mod exit_watch;
mod full_screen;
mod idle_link;
mod listing;
mod pool;
mod send;
pub(crate) mod shell_sends;

use crate::support::tmux_registry::*;
