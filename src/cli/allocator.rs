//! The long-lived faces' (`serve`, `mcp`) allocator settings: the binary
//! restarts itself once, with glibc's tunables
//! ([`ENGINE_TUNABLES`](tmux_engine::tmux::ENGINE_TUNABLES): one malloc
//! arena) in its environment, before it starts a thread.
//!
//! glibc reads its tunables only from the environment a process starts
//! with, and its `mallopt` is reachable only through `unsafe` FFI (the
//! crate denies `unsafe`); a library user's program keeps its own
//! allocator either way (this is the binary's, not the library's). The
//! restart is an `execve` of the same executable (its path as the kernel
//! resolved it, not `/proc/self/exe`, whose name `ps` and `pgrep` would
//! show as `exe`) with the same arguments and descriptors: the pid, the
//! terminal, systemd's sockets (`LISTEN_PID` names the same pid) and an
//! `mcp` client's pipes are unchanged, and nothing has run yet that the
//! restart would repeat.
//!
//! Not restarted when the variable is already set, to anything, empty
//! included: the caller's own choice (the way to opt out), or this
//! restart's. If the executable's path is unknown or gone (no `/proc`, the
//! binary deleted since it started), the process goes on with glibc's
//! defaults.
//!
//! Children inherit the variable: a tmux server the engine starts gets its
//! own settings all the same (the engine's value is not a caller's, see
//! `tmux::allocator`), its panes none; other children (`tmux attach` of
//! the PTY transport, `systemctl`) run with one arena, which a
//! single-threaded program does not notice.

use std::os::unix::process::CommandExt;

use tmux_engine::tmux::{ENGINE_TUNABLES, TUNABLES_VARIABLE};

/// Restarts this process with [`ENGINE_TUNABLES`] unless its environment
/// names [`TUNABLES_VARIABLE`] already; returns only if it does, or if the
/// restart failed. Call before any thread starts (an `execve` ends the
/// others without a word).
pub(crate) fn restart_tuned() {
    if std::env::var_os(TUNABLES_VARIABLE).is_some() {
        return;
    }
    let Ok(executable) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(executable);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    // Returns only on failure; the process then runs untuned.
    let _ = command
        .args(args)
        .env(TUNABLES_VARIABLE, ENGINE_TUNABLES)
        .exec();
}
