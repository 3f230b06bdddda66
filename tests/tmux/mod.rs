//! `src/tmux/` tested against real tmux and fake binaries: discovery,
//! servers, the one quoting path (no injection), input bytes, the one kill
//! path, private directories and pid reuse.

mod dirs;
mod discovery;
mod injection;
mod kill;
mod pid_reuse;
mod send_keys;
mod server;
