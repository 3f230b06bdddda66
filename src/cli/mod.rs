//! The CLI's commands, as library functions so tests can call them.

pub mod run;
