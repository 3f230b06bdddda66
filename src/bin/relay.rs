//! `tmux-engine-relay`: a terminal's resident output relay on its own
//! (see `tmux_engine::tmux::relay`), which tmux's `pipe-pane` runs for as
//! long as the pane lives, one per terminal. A binary of its own because
//! it is resident: it links only the relay, so each costs a few pages,
//! not the engine's whole relocated image (measured in docs/benchmarks.md).
//!
//! It is also the exit handshake's wrapper (`tmux_engine::tmux::exit_wrapper`),
//! one per terminal too, which the pane runs in front of its program: the
//! same small image, so no second binary to carry; and what binds the
//! warm pool's starting `tmux -C` to the engine's life
//! (`tmux_engine::tmux::with_parent`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    let mut args = tmux_engine::tmux::helper_mode(first.as_deref(), args);
    if first.is_none_or(|a| a != tmux_engine::tmux::RELAY_ARG) {
        eprintln!(
            "tmux-engine-relay: run by tmux's pipe-pane as `tmux-engine-relay {} DIR [joined]`",
            tmux_engine::tmux::RELAY_ARG
        );
        return ExitCode::from(2);
    }
    let dir = args.next().unwrap_or_default();
    let joined = args.next().is_some_and(|a| a == "joined");
    match tmux_engine::tmux::relay(
        std::path::Path::new(&dir),
        joined,
        &mut tmux_engine::RelayKeeper::default(),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
