//! `src/tmux/` tested against real tmux and fake binaries: discovery,
//! servers, the one quoting path (no injection), input bytes, the one kill
//! path, private directories, pid reuse and the exit handshake's wrappers.

mod dirs;
mod discovery;
mod exit_wrapper;
mod injection;
mod kill;
mod pid_reuse;
mod send_keys;
mod server;
mod with_parent;
