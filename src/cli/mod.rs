//! The CLI's commands, as library functions so tests can call them:
//! `main.rs` only parses arguments and calls these; each command takes its
//! input and output as parameters instead of touching stdin/stdout itself.

pub mod decode;
pub mod run;
