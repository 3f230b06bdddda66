//! A process bound to the engine's life: what the relay executable runs
//! when its first argument is `__with-parent`. It asks the kernel for
//! `SIGKILL` when its parent goes (`PR_SET_PDEATHSIG`, kept across
//! `exec`), checks that parent is still the engine, and then becomes the
//! program it was given.
//!
//! The warm pool starts its servers with a `tmux -C` process, which the
//! engine lets go once its own link is attached. A pooled server must die
//! with the engine (it is no terminal's yet), and does by
//! `exit-unattached` once its last client goes; but tmux 3.3a never lets
//! an exiting control client go while it holds output it cannot write
//! (docs/tmux-quirks.md), and an engine killed while tmux still had replies
//! or notifications for that process left it so: its reader dead, its
//! stdin at EOF, the process waiting forever for tmux's word to exit, and
//! the server with it. Killed by the kernel instead, the process's
//! connection closes, which tmux frees at once, output or not.
//!
//! The signal follows the *thread* that forked the process, not the whole
//! engine: the pool starts its servers from its runtime's worker threads,
//! which live as long as the runtime, and the process is let go within
//! the start anyway. It costs one `exec` of the small, static relay
//! executable per pooled start, not a `fork` of the engine (which a
//! `pre_exec` hook in the engine would force: tens of ms for a large
//! engine).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The first argument that makes the relay executable run [`with_parent`].
pub const WITH_PARENT_ARG: &str = "__with-parent";

/// `command` run through `relay`'s [`with_parent`]: killed when the thread
/// of this process that spawns it ends (see the module doc). Its
/// environment, removals included, and working directory are carried over.
pub(crate) fn wrap(command: &tokio::process::Command, relay: &Path) -> tokio::process::Command {
    let inner = command.as_std();
    let mut wrapped = tokio::process::Command::new(relay);
    wrapped
        .arg(WITH_PARENT_ARG)
        .arg(std::process::id().to_string())
        .arg(inner.get_program())
        .args(inner.get_args());
    super::process::copy_env(inner, &mut wrapped);
    if let Some(dir) = inner.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// Runs `PARENT_PID PROGRAM [ARGS...]`: asks for `SIGKILL` when the parent
/// ends, exits with 1 when `PARENT_PID` is no longer the parent (it ended
/// before the request could cover it), and execs the program (127 when it
/// cannot). Never returns.
pub fn with_parent(args: impl Iterator<Item = OsString>) -> ! {
    let mut args = args;
    let parent = args
        .next()
        .and_then(|pid| pid.to_str().and_then(|pid| pid.parse::<i32>().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("tmux-engine-relay: usage: {WITH_PARENT_ARG} PARENT_PID PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    if let Err(error) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("tmux-engine-relay: {WITH_PARENT_ARG}: {error}");
        std::process::exit(1);
    }
    // After the request: a parent that ended before it was made has
    // orphaned this process already, and the request will never fire.
    if rustix::process::Pid::as_raw(rustix::process::getppid()) != parent {
        std::process::exit(1);
    }
    let error = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "tmux-engine-relay: {WITH_PARENT_ARG}: running {}: {error}",
        program.to_string_lossy()
    );
    std::process::exit(127);
}
