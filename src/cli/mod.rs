//! The CLI's commands, as library functions so tests can call them:
//! `main.rs` only parses arguments and calls these; each command takes its
//! input and output as parameters instead of touching stdin/stdout itself.
//!
//! - `decode`: a raw `tmux -C` stream to JSON lines;
//! - `run`: one command in a private server, output streamed;
//! - `terminals` (+ `verbs`): the registry commands over a state directory.

pub mod decode;
pub mod run;
pub mod terminals;
mod verbs;
