//! How a process that did not start a terminal's server reads its pane:
//! through the pane's resident relay (`tmux::relay`), the one every engine
//! process on the host shares, or, where none can run, through its own
//! control client's `%output`.
//!
//! A relay normally runs from the server's start to the pane's end. One
//! is missing only when it was killed, or the server predates relays;
//! then the first process to adopt the terminal starts a new one (under
//! the server directory's [`LOCK`], so two adopters never replace each
//! other's), whose stream is a new epoch.

use std::path::Path;
use std::time::Duration;

use tracing::{debug, warn};

use super::TmuxConfig;
use crate::control::PaneId;
use crate::control::client::{ControlClient, hold_handshake_lock};
use crate::tmux::command::TmuxCommand;
use crate::tmux::relay::{self, Linked, RelayListener};

/// The lock file, in the server directory, held while a relay is checked
/// for and started.
const LOCK: &str = "stream.lock";

/// A link to the relay running for the server in `dir`, from the oldest
/// byte it holds; `None` when none runs (or it broke its protocol: logged,
/// and then `%output` serves).
pub(super) async fn existing(dir: &Path, timeout: Duration) -> Option<Linked> {
    match relay::link(dir, 0, relay::wire::OLDEST, timeout).await {
        Ok(linked) => linked,
        Err(error) => {
            warn!(dir = %dir.display(), %error, "the output relay answered badly; reading %output");
            None
        }
    }
}

/// Starts a relay on the live `pane` of `client`'s server in `dir` and
/// links to it, unless one runs by the time the lock is held (another
/// adopter started it: linked to that one). `None` when no relay
/// executable is known or it could not start (logged): `%output` serves.
pub(super) async fn install(
    client: &ControlClient,
    pane: PaneId,
    dir: &Path,
    config: &TmuxConfig,
) -> Option<Linked> {
    let timeout = config.probe_timeout;
    let executable = config.relay_executable()?;
    let _lock = hold_handshake_lock(&dir.join(LOCK), timeout).await;
    if let Some(linked) = existing(dir, timeout).await {
        return Some(linked);
    }
    let command = relay::pipe_command(&executable, dir, true)?;
    let started = async {
        // Listening before tmux runs the relay, which links here first.
        let listener = RelayListener::bind(&dir.join(relay::RAW_SOCKET))?;
        client
            .command(&TmuxCommand::new("pipe-pane").target(pane).arg(command))
            .await?;
        listener.accept(timeout).await
    };
    match started.await {
        Ok(linked) => {
            debug!(dir = %dir.display(), epoch = linked.epoch, "started an output relay");
            Some(linked)
        }
        Err(error) => {
            warn!(dir = %dir.display(), %error, "starting an output relay; reading %output");
            None
        }
    }
}
