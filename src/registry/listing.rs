//! `list`'s JSON, each terminal's kept encoded between lists: a list of
//! terminals that did not change since the last one copies their bytes.
//!
//! Why: `GET /api/terminals` made, cloned, serialized and freed a whole
//! snapshot per terminal per request (six allocations and a JSON encoding
//! each: ~4.5 µs a terminal on the 2-core machine, ~47 ms at 10,000).
//! Here an entry keeps the snapshot it was last listed as with its JSON;
//! a list compares what could have changed in place (no clone, no
//! allocation for a running terminal) and encodes only entries that did.
//! The comparison reads every field the snapshot has, from the same
//! sources [`Entry::snapshot`] does, so the answer is the one a fresh
//! encoding would give, byte for byte; except that a running terminal's
//! status, pid and output path are taken on its backend's word (its
//! [`listing_stamp`](super::seam::BackendTerminal::listing_stamp)
//! unchanged), not read: reading them took a lock, a watch's lock and
//! a hash look-up in the control client per terminal (cold cache lines:
//! the top of a profile of lists at 1,000 terminals).

use std::sync::Arc;

use super::service::Owned;
use super::state::{Entry, Listed, Presence, Vouched};
use super::values::TerminalSnapshot;
use crate::{Error, Result};

impl Entry {
    /// Appends this entry's snapshot as JSON to `out`: the kept bytes
    /// while the snapshot is unchanged, else a fresh encoding, kept.
    fn list_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        if let Some(listed) = &self.listed
            && self.is_listed_as(listed)
        {
            out.extend_from_slice(&listed.json);
            return Ok(());
        }
        // The stamp before the snapshot: a change while it is made moves
        // the stamp, and the next list encodes again.
        let vouched = match &self.presence {
            Presence::Live { terminal, .. } => terminal.listing_stamp().map(|stamp| Vouched {
                terminal: Arc::downgrade(terminal),
                stamp,
            }),
            _ => None,
        };
        let snapshot = self.snapshot();
        // Encoded into the answer, then copied out once: no buffer of its
        // own grown and shrunk per terminal (the first list after a spawn
        // of many encodes them all).
        let start = out.len();
        serde_json::to_writer(&mut *out, &snapshot)
            .map_err(|e| Error::io("encoding a snapshot", std::io::Error::other(e)))?;
        self.listed = Some(Listed {
            snapshot,
            json: out[start..].into(),
            vouched,
        });
        Ok(())
    }

    /// Whether [`Entry::snapshot`] would now give `listed`'s snapshot,
    /// without making one. Destructured whole: a field added to the
    /// snapshot fails to build here until it is compared.
    fn is_listed_as(&self, listed: &Listed) -> bool {
        let TerminalSnapshot {
            id,
            owner,
            name,
            role,
            kind,
            pid,
            status,
            restart,
            restarts,
            created_ms,
            output_path,
            keep_history,
            restored_ms,
            history_error,
        } = &listed.snapshot;
        let record = &self.record;
        let live = match &self.presence {
            Presence::Live { terminal, .. } => Some(terminal),
            _ => None,
        };
        // Cheapest first. A running terminal's status clones nothing; a
        // dead one's reason is one small copy.
        *restarts == self.restarts
            && *created_ms == record.created_ms
            && *restart == record.spec.restart
            && *keep_history == record.spec.keeps_history()
            && *id == record.id
            && *owner == record.owner
            && *name == record.spec.name
            && *role == record.spec.role
            && *kind == record.kind
            && (self.vouches_for(listed)
                || (self.presence.status() == *status
                    && *pid == self.presence.pid()
                    && output_path.as_deref() == live.and_then(|t| t.output_path())))
            && match &self.history {
                None => restored_ms.is_none() && history_error.is_none(),
                Some(keeping) => {
                    *restored_ms == keeping.kept.meta().restored_ms
                        && *history_error == keeping.kept.error()
                }
            }
    }

    /// Whether the live terminal vouches for its part of `listed` (status,
    /// pid, output path) without their being read: the same terminal, with
    /// the same stamp, and it was running then with no death seen since
    /// (a death a probe saw is the registry's, shown over the backend's
    /// running status).
    fn vouches_for(&self, listed: &Listed) -> bool {
        let (
            Presence::Live {
                terminal,
                seen_dead: None,
            },
            Some(vouched),
        ) = (&self.presence, &listed.vouched)
        else {
            return false;
        };
        listed.snapshot.status.is_running()
            && std::ptr::addr_eq(vouched.terminal.as_ptr(), Arc::as_ptr(terminal))
            && terminal.listing_stamp() == Some(vouched.stamp)
    }
}

impl Owned<'_> {
    /// [`list`](Owned::list) as JSON text: the same bytes serde would
    /// write of its answer, each unchanged terminal's copied from the last
    /// list.
    ///
    /// # Errors
    ///
    /// As for [`list`](Owned::list).
    pub async fn list_json(self) -> Result<Vec<u8>> {
        let (registry, owner) = (self.registry, self.owner);
        registry.inner.lock().check_active()?;
        if registry.inner.store.is_shared() {
            registry.refresh().await?;
        }
        let mut state = registry.inner.lock();
        state.check_active()?;
        // Sorted by keys copied out: no look into an entry per comparison
        // (`seq` is unique, so the order is `list`'s).
        let mut entries: Vec<(u64, u64, &mut Entry)> = state
            .entries
            .values_mut()
            .filter(|entry| &entry.record.owner == owner)
            .map(|entry| (entry.record.created_ms, entry.seq, entry))
            .collect();
        entries.sort_unstable_by_key(|&(created_ms, seq, _)| (created_ms, seq));
        let mut out = Vec::with_capacity(2 + entries.len() * 256);
        out.push(b'[');
        for (i, (_, _, entry)) in entries.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            entry.list_into(&mut out)?;
        }
        out.push(b']');
        Ok(out)
    }
}
