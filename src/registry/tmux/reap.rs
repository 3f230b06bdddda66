//! Reaping the backend's runtime directory: server directories that no
//! record names. A directory whose socket has a live engine server (marked
//! with `@tmux-engine`) goes through the kill path (its panes' process
//! trees, server and directory), and so does one with no server (the path
//! then only removes the directory). Directories younger than the grace period
//! are skipped (a spawn in another process may not have written its record
//! yet), and so are servers without the engine's mark.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use super::{SESSION, TmuxConfig};
use crate::registry::backend::ReapReport;
use crate::registry::persist::TerminalRecord;
use crate::tmux::server::DIR_PREFIX;
use crate::tmux::{ServerHandle, Tmux};
use crate::{Error, Result};

pub(super) async fn reap(
    tmux: &Arc<Tmux>,
    config: &TmuxConfig,
    records: &[TerminalRecord],
) -> Result<ReapReport> {
    let mut report = ReapReport::default();
    let known: HashSet<PathBuf> = records
        .iter()
        .filter_map(|record| record.locator.get("dir")?.as_str().map(PathBuf::from))
        .collect();
    let entries = match std::fs::read_dir(&config.runtime_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => {
            return Err(Error::io(
                format!("listing runtime directory {}", config.runtime_dir.display()),
                e,
            ));
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_server_dir = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(DIR_PREFIX))
            && entry.file_type().is_ok_and(|kind| kind.is_dir());
        if !is_server_dir || known.contains(&path) {
            continue;
        }
        let young = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_none_or(|age| age < config.reap_grace);
        if young {
            continue;
        }
        let mut handle = ServerHandle::open(Arc::clone(tmux), &path, SESSION);
        let what = match handle.marked().await {
            Some(true) => "server without a record",
            Some(false) => continue, // a live server that is not the engine's: leave it
            // None answers: a stale socket, or a hung server the kill path
            // finds by its socket's name.
            None => "socket directory without a server",
        };
        match handle.kill().await {
            Ok(()) => report.removed.push(format!("{what} at {}", path.display())),
            Err(error) => report.failures.push(error),
        }
    }
    Ok(report)
}
