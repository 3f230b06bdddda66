//! The control client: one task owns a `tmux -C` process.
//!
//! STUB: being written.
