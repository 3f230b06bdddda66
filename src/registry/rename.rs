//! `rename`: a terminal's new name, in its record and the name lookup.
//!
//! In this process the check and the change happen under the state lock,
//! and under the terminal's liveness lock (a recreate swaps in a record
//! cloned before it started, which must not carry the old name back).
//! Across processes sharing the state directory, the new name's lock (the
//! one a spawn of that name takes) and the terminal's `live` lock are held
//! while the directory is rescanned, the name checked and the record
//! written; other processes pick the name up on their next scan
//! ([`adopt_name`], in each rescan), and a recreate elsewhere re-reads it.

use std::sync::Arc;

use super::service::Owned;
use super::state::Entry;
use super::values::TerminalSnapshot;
use crate::statedir::Purpose;
use crate::statedir::{StateDir, TerminalRecord};
use crate::vocab::validate_name;
use crate::{Error, Result};

impl Owned<'_> {
    /// Renames the terminal `target` (id or current name) to `name`;
    /// its snapshot. Renaming to its own name changes nothing.
    ///
    /// # Errors
    ///
    /// `INVALID_INPUT` for a name the name rules refuse (checked
    /// before the lookup); `DUPLICATE_NAME` when another of the owner's
    /// terminals (or a spawn in flight) has it; `NO_TERMINAL`,
    /// `FOREIGN_TERMINAL`, `TERMINAL_CLOSING`, `REGISTRY_DISPOSING`; `IO`
    /// when the record cannot be written (the old name then stays).
    pub async fn rename(self, target: &str, name: &str) -> Result<TerminalSnapshot> {
        validate_name(name)?;
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        let liveness = Arc::clone(&registry.inner.lock().entry(&id)?.liveness);
        let _serialized = liveness.lock().await;
        let store = &registry.inner.store;
        let _live = store
            .lock(StateDir::terminal_lock(&id, Purpose::Live))
            .await?;
        // Rescanned always: the terminal itself may have been killed or
        // renamed by another process.
        let _name = registry.lock_name(owner, name, true).await?;
        let (old, record) = {
            let mut state = registry.inner.lock();
            state.check_active()?;
            let entry = state.entry(&id)?;
            if entry.record.spec.name.as_deref() == Some(name) {
                return Ok(entry.snapshot());
            }
            if entry.closing.is_some() {
                return Err(Error::TerminalClosing(id.to_string()));
            }
            if state.name_taken(owner, name) {
                return Err(Error::DuplicateName(format!("{name} (owner {owner})")));
            }
            let entry = state.entry_mut(&id)?;
            let old = entry.record.spec.name.replace(name.to_owned());
            (old, entry.record.clone())
        };
        if let Err(error) = store.write(&record).await {
            let mut state = registry.inner.lock();
            if let Ok(entry) = state.entry_mut(&id)
                && entry.record.spec.name.as_deref() == Some(name)
            {
                entry.record.spec.name = old;
            }
            return Err(error);
        }
        Ok(registry.inner.lock().entry(&id)?.snapshot())
    }
}

/// Takes the name of `record` (read from the state directory) for
/// `entry`, the terminal this process already holds of it: another
/// process renamed it. An entry being closed keeps its own.
pub(super) fn adopt_name(entry: &mut Entry, record: &TerminalRecord) {
    if entry.closing.is_none() && entry.record.spec.name != record.spec.name {
        entry.record.spec.name.clone_from(&record.spec.name);
    }
}
