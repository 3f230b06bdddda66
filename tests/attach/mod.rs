//! `src/attach/` tested against real tmux: fan-out to many viewers, a
//! stalled viewer, resume, exit and restart policies, and the PTY
//! transport.
#![allow(clippy::unwrap_used)]

mod lifecycle;
mod transports;

use crate::support::tmux_registry::*;
