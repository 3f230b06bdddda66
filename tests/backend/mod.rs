//! `src/backend/` tested against real tmux through the registry: sends
//! (exact output, wait reasons, the shells' marks), full-screen programs in
//! front, the pool of servers started ahead; and directly, what a
//! terminal vouches for to `list`.
#![allow(clippy::unwrap_used)]

mod exit_watch;
mod full_screen;
mod idle_link;
mod listing;
mod pool;
mod send;
pub(crate) mod shell_sends;

use crate::support::tmux_registry::*;

/// A registry on `dir/state` whose terminals read their output through the
/// relay, with `config` added (sockets under `dir/rt`, `/bin/sh` pinned).
async fn open_relayed(dir: &Path, config: impl FnOnce(TmuxConfig) -> TmuxConfig) -> Registry {
    let relayed = TmuxConfig::new(runtime(dir))
        .shell("/bin/sh")
        .quiet(Duration::from_millis(200))
        .reap_grace(Duration::ZERO)
        .with_state_dir(dir.join("state"))
        .relay(env!("CARGO_BIN_EXE_tmux-engine-relay"));
    let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::with_tmux(tmux(), config(relayed)));
    let state = RegistryConfig::default().state_dir(dir.join("state"));
    Registry::open_with(state, backend).await.unwrap().0
}
