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
pub(crate) mod relink;
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
    let backend: Arc<dyn Backend> =
        Arc::new(TmuxBackend::with_tmux(tmux(), config(relayed)).unwrap());
    let state = RegistryConfig::default().state_dir(dir.join("state"));
    Registry::open_with(state, backend).await.unwrap().0
}

/// Runs `body` on a registry of [`open_relayed`] with `config` added and
/// one terminal, `cat`, running `cat` (its runtime directory beside), then
/// kills it; the guard kills any server left.
async fn with_cat(
    config: impl FnOnce(TmuxConfig) -> TmuxConfig,
    body: impl AsyncFnOnce(&Registry, &OwnerId, &Path),
) {
    crate::support::within(async {
        let dir = crate::support::test_dir();
        let rt = runtime(dir.path());
        let _guard = Cleanup(rt.clone());
        let registry = open_relayed(dir.path(), config).await;
        let owner = OwnerId::new("alice").unwrap();
        registry
            .owner(&owner)
            .spawn(sh("exec cat").name("cat"))
            .await
            .unwrap();
        body(&registry, &owner, &rt).await;
        let _ = registry.owner(&owner).kill("cat").await;
    })
    .await;
}
