//! glibc's allocator settings for the tmux servers the engine starts: one
//! tmux server per terminal makes tmux's own heap the largest cost of an
//! idle terminal, and most of it is memory glibc keeps, not memory tmux uses.
//!
//! An idle tmux 3.3a server holds ~960 KiB private, ~620 KiB of it heap.
//! Two of glibc's defaults keep freed memory resident in a process that
//! allocates a burst at start (the default key tables, the config, the
//! first pane) and then little: the per-thread cache (tcache) holds freed
//! chunks back from coalescing, and the mmap threshold, which glibc raises
//! after the first large free, then puts later large buffers on the heap,
//! where they stay dirty once freed. With the tcache off and the threshold
//! fixed at 64 KiB the same server holds ~760 KiB, and a server whose pane
//! printed 53 MB keeps ~240 KiB less; its CPU for that flood was the same
//! (within run-to-run noise). Figures: `docs/benchmarks.md`.
//!
//! The setting is [`VARIABLE`] in the server process's own environment:
//! the config removes it from tmux's global environment, which tmux builds
//! from its own before the first pane, so programs and hooks never see it.
//! A pane's pipe (the relay, the drain's `cat`) inherits the server's own
//! environment, setting included: harmless there, and a few KiB less. A caller whose server environment names the variable
//! (even empty: the way to opt out) keeps exactly its own, in the server
//! and the panes alike. A tmux not linked against glibc ignores it.
//!
//! The engine's own long-lived processes (`serve`, `mcp`: the binary
//! restarts itself with [`ENGINE_TUNABLES`] before anything else runs)
//! carry their setting in their environment too; a server started from
//! one gets [`SERVER_TUNABLES`] all the same, as from a process without
//! the variable: that inherited value is the engine's, not a caller's.

use std::ffi::OsString;

/// The variable glibc reads its tunables from at start.
pub const VARIABLE: &str = "GLIBC_TUNABLES";

/// The tunables a tmux server starts with: no tcache, a fixed 64 KiB mmap
/// threshold (which also turns glibc's dynamic threshold off).
pub(super) const SERVER_TUNABLES: &str =
    "glibc.malloc.tcache_count=0:glibc.malloc.mmap_threshold=65536";

/// The tunables the engine's long-lived processes (`serve`, `mcp`) run
/// with: one malloc arena. glibc gives each thread that meets a busy arena
/// one of its own (up to 8 per core), and an arena keeps what its threads
/// freed resident: the runtime's workers and the blocking threads that ran
/// a burst of spawns' file work each kept part of that burst. With one
/// arena serve's own memory per idle terminal at 1,000 terminals fell
/// from ~74 to ~57 KiB (`docs/benchmarks.md`). One tunable, no `:`:
/// glibc 2.36 cuts the process's own copy of the variable at the first
/// `:`, and `tunes` compares that copy.
pub const ENGINE_TUNABLES: &str = "glibc.malloc.arena_max=1";

/// The config line that keeps [`VARIABLE`] from the panes: tmux copied its
/// own environment into its global one, and every pane, pipe and job gets
/// the global one.
pub(super) const UNSET_LINE: &str = "set-environment -gu GLIBC_TUNABLES";

/// Whether a server starts with [`SERVER_TUNABLES`]: unless the
/// environment it would get (`server_env`, and the engine's own unless
/// `clear_env`) already names [`VARIABLE`] with a value of the caller's
/// (the engine's own [`ENGINE_TUNABLES`] is not).
pub(super) fn tunes(server_env: &[(OsString, OsString)], clear_env: bool) -> bool {
    let named = server_env.iter().any(|(k, _)| k == VARIABLE);
    let inherited = !clear_env && std::env::var_os(VARIABLE).is_some_and(|v| v != ENGINE_TUNABLES);
    !named && !inherited
}
