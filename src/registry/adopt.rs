//! Adoption, restart survival and sharing: opening a registry on a state
//! directory, rescanning it, attaching a recorded terminal when a command
//! first needs it, and reaping orphans.
//!
//! Decision: the state directory is the source of truth shared between
//! processes. [`Registry::refresh`] rescans it: records this process does
//! not know are adopted (live through [`Backend::adopt`], else kept as
//! `gone`), and terminals whose record vanished (killed by another process)
//! are dropped without closing. `list` refreshes first, and a lookup that
//! misses refreshes once before answering `NO_TERMINAL`, so two processes on
//! one directory see the same terminals. Disposed owners are per process.
//!
//! Reaping is explicit ([`Registry::reap`]: the CLI's `reap`, or a
//! long-lived process such as `serve` on its own schedule), never a side
//! effect of opening or listing, and refuses to run on an incomplete load:
//! a record it could not read may name a live server.
//!
//! [`Backend::adopt`]: super::Backend::adopt

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::join_all;
use futures_util::{StreamExt, stream};
use tracing::warn;

use super::seam::{Backend, BackendTerminal, ReapReport, RecordCheck};
use super::service::RegistryConfig;
use super::state::Entry;
use super::state::Presence;
use super::{Registry, TerminalId};
use crate::statedir::{CorruptRecord, LoadedRecords, TerminalRecord};
use crate::vocab::RestartPolicy;
use crate::{Error, Result};

/// How many record checks a scan runs at once.
const CHECKS_AT_ONCE: usize = 16;

/// Terminals a scan lets go of without closing them.
type Released = Vec<Arc<dyn BackendTerminal>>;

/// What [`Registry::take_in`] did with a record found on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// Published here.
    Kept,
    /// Already published or reserved by this process.
    Skipped,
    /// The registry is disposing: the scan stops.
    Disposing,
}

/// What a scan of the state directory found and did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ScanReport {
    /// Records adopted with a live backend terminal.
    pub adopted: Vec<TerminalId>,
    /// Records kept as `gone` (dead, or adoption failed), with the reason.
    pub gone: Vec<(TerminalId, String)>,
    /// Terminals dropped because their record vanished.
    pub dropped: Vec<TerminalId>,
    /// Records moved aside as corrupt (or of an unknown version); their
    /// terminals are left alone.
    pub corrupt: Vec<CorruptRecord>,
    /// Record files that could not be read this time (an I/O error); their
    /// terminals are kept as they were.
    pub unreadable: Vec<CorruptRecord>,
    /// Adoption failures; none of them stopped the scan.
    pub failures: Vec<Error>,
}

impl Registry {
    /// Opens a registry on `config`'s state directory whose terminals
    /// `backend` runs: adopts every recorded terminal (live
    /// ones with their metadata, dead ones as `gone`, recreatable by their
    /// policy; `always` ones start recreating). Reaps nothing: call
    /// [`reap`](Registry::reap) for that.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the state directory cannot be created or listed.
    /// Corrupt records and failed adoptions are reported in the [`ScanReport`], not
    /// as errors.
    pub async fn open_with(
        config: RegistryConfig,
        backend: Arc<dyn Backend>,
    ) -> Result<(Registry, ScanReport)> {
        let registry = Registry::new(config, backend)?;
        let report = registry.refresh().await?;
        for corrupt in &report.corrupt {
            warn!(path = %corrupt.path.display(), error = %corrupt.error, "skipped a corrupt terminal record");
        }
        for failure in &report.failures {
            warn!(error = %failure, "state directory scan");
        }
        Ok((registry, report))
    }

    /// Rescans the state directory: adopts records this registry does not
    /// know, drops terminals whose record vanished. Does not reap. Without
    /// a state directory it does nothing.
    ///
    /// # Errors
    ///
    /// `REGISTRY_DISPOSING`, or [`Error::Io`] when the directory cannot be
    /// listed.
    pub async fn refresh(&self) -> Result<ScanReport> {
        self.inner.lock().check_active()?;
        if !self.inner.store.is_shared() {
            return Ok(ScanReport::default());
        }
        let mut last = self.inner.scan.lock().await;
        // Entries published from now on wrote their records after the scan
        // may have looked: never taken for vanished by it.
        let horizon = self.inner.lock().horizon();
        // Shared with the state directory's cache: an unchanged directory
        // (every `list` between changes) costs no copy of its records.
        let loaded = self.inner.store.load_all().await?;
        let mut report = ScanReport {
            corrupt: loaded.corrupt.clone(),
            unreadable: loaded.unreadable.clone(),
            ..ScanReport::default()
        };
        // The very scan the entries were last brought in line with: every
        // change since (a spawn's record, a kill's removal, a rename,
        // another process's) would have changed the directory, so there is
        // nothing to drop, adopt or rename (a hash look-up per terminal per
        // `list` otherwise), unless an entry came or went here without one
        // (a record whose removal failed).
        {
            let state = self.inner.lock();
            state.check_active()?;
            if last.as_ref().is_some_and(|(scan, changes)| {
                Arc::ptr_eq(scan, &loaded) && *changes == state.changes
            }) {
                return Ok(report);
            }
        }
        let (released, unknown) = self.reconcile(&loaded, horizon, &mut report)?;
        // Dropped, not closed: another process killed them (or will).
        join_all(released.iter().map(|terminal| terminal.shutdown())).await;
        let checks = self.check_all(&unknown).await;
        for (record, checked) in unknown.into_iter().zip(checks) {
            if self.take_in(record, checked, &mut report).await == Taken::Disposing {
                return Ok(report);
            }
        }
        let changes = self.inner.lock().changes;
        *last = Some((loaded, changes));
        Ok(report)
    }

    /// Brings the entries in line with `loaded` in one pass under the
    /// lock: forgets those whose record vanished from disk (in
    /// `report.dropped`), returning their terminals to let go of, takes
    /// other processes' renames, and returns the records this process
    /// neither holds nor reserves (copied: only those).
    ///
    /// Only entries published by `horizon` (their `seq`) can have vanished:
    /// a spawn of this process that wrote its record after the scan looked
    /// and published before this pass is in no scan yet. Dropping it let go
    /// of its live terminal (a serve spawning 8 at once held 408 of 1,000
    /// terminals unadopted, their control clients closed).
    fn reconcile(
        &self,
        loaded: &LoadedRecords,
        horizon: u64,
        report: &mut ScanReport,
    ) -> Result<(Released, Vec<TerminalRecord>)> {
        // An unreadable record's terminal has not vanished: keep it.
        let on_disk: HashSet<&TerminalId> = loaded.claimed().collect();
        let mut state = self.inner.lock();
        state.check_active()?;
        state.corrupt.clone_from(&loaded.corrupt);
        let vanished: Vec<TerminalId> = state
            .entries
            .values()
            .filter(|entry| {
                entry.seq <= horizon
                    && entry.closing.is_none()
                    && !on_disk.contains(&entry.record.id)
            })
            .map(|entry| entry.record.id.clone())
            .collect();
        let mut released = Vec::new();
        for id in vanished {
            if let Some(terminal) = state
                .remove_entry(&id)
                .and_then(|entry| entry.presence.into_terminal())
            {
                released.push(terminal);
            }
            report.dropped.push(id);
        }
        // One look-up per record.
        let mut unknown = Vec::new();
        for record in &loaded.records {
            if let Some(entry) = state.entries.get_mut(&record.id) {
                super::rename::adopt_name(entry, record);
            } else if !state.is_pending(&record.id) {
                unknown.push(TerminalRecord::clone(record));
            }
        }
        Ok((released, unknown))
    }

    /// The backend's cheap check of each record, in order: the terminal is
    /// adopted only when a command needs it (see `Backend::check`). Several
    /// at once, each a task of its own: a check may wait on tmux (an exited
    /// pane's status), and its `/proc` reads then run on every worker
    /// thread. Owned futures, collected before the first await: a closure
    /// or a borrow held across it trips the compiler's `Send` inference in
    /// callers that spawn this future.
    async fn check_all(&self, records: &[TerminalRecord]) -> Vec<Option<RecordCheck>> {
        let checks: Vec<_> = records
            .iter()
            .map(|record| {
                let backend = Arc::clone(&self.inner.backend);
                let record = record.clone();
                async move {
                    tokio::spawn(async move { backend.check(&record).await })
                        .await
                        .ok()
                        .flatten()
                }
            })
            .collect();
        stream::iter(checks)
            .buffered(CHECKS_AT_ONCE)
            .collect()
            .await
    }

    /// Publishes the entry of one record found on disk, adopting its
    /// terminal unless the cheap check already told its status, and starts
    /// its `always` loop; notes it in `report`.
    async fn take_in(
        &self,
        record: TerminalRecord,
        checked: Option<RecordCheck>,
        report: &mut ScanReport,
    ) -> Taken {
        let adopted = match checked {
            Some(_) => Ok(None),
            None => self.inner.backend.adopt(&record).await,
        };
        // An adoption that failed proves nothing (a timeout on a busy
        // server): the terminal stays unadopted, tried again on use.
        let adopted = adopted.map_err(|error| {
            let reason = format!("adoption failed: {error}");
            report.failures.push(error);
            reason
        });
        let mut presence = Presence::scanned(checked, adopted);
        // Gone because the machine restarted, not a crash: its record
        // names another boot (told apart by the boot id).
        if !presence.status().is_running()
            && matches!(presence.status(), super::TerminalStatus::Gone { .. })
            && self.booted_since(record.boot_id.as_deref())
        {
            presence = Presence::Gone {
                reason: super::HOST_RESTARTED.to_owned(),
            };
        }
        let keeps = record.spec.keeps_history();
        let terminal = presence.terminal();
        let gone = match &presence {
            Presence::Gone { reason } => Some(reason.clone()),
            _ => None,
        };
        let id = record.id.clone();
        let always = record.spec.restart == RestartPolicy::Always;
        let (cancel, taken) = {
            let mut state = self.inner.lock();
            if state.disposing {
                (None, Taken::Disposing)
            } else if state.entries.contains_key(&id) || state.is_pending(&id) {
                // Published or reserved by this process meanwhile.
                (None, Taken::Skipped)
            } else {
                let seq = state.next();
                let cancel = self.inner.shutdown.child_token();
                let entry = Entry::new(record, seq, presence, cancel.clone());
                state.insert_entry(entry);
                (Some(cancel), Taken::Kept)
            }
        };
        let Some(cancel) = cancel else {
            // Not kept: let go of what was just attached, leaving the
            // terminal running.
            if let Some(terminal) = terminal {
                terminal.shutdown().await;
            }
            return taken;
        };
        if keeps && self.inner.config.supervise {
            // Its history is written only while an engine holds it: a
            // long-lived one adopts it now, not at its first use.
            if terminal.is_some() {
                self.follow_history(&id, 0);
            } else if gone.is_none() {
                let registry = self.clone();
                let id = id.clone();
                self.inner.tasks.spawn(async move {
                    if registry.adopt_if_needed(&id).await.is_ok() {
                        registry.follow_history(&id, 0);
                    }
                });
            }
        }
        if terminal.is_some() {
            report.adopted.push(id.clone());
        } else if let Some(reason) = gone {
            report.gone.push((id.clone(), reason));
        }
        if always && self.inner.config.supervise {
            self.start_restart_loop(id, cancel);
        }
        taken
    }

    /// Attaches a recorded terminal this process has not attached yet
    /// (lazily, see `Backend::check`), under its liveness lock.
    pub(crate) async fn adopt_if_needed(&self, id: &TerminalId) -> Result<()> {
        let liveness = {
            let state = self.inner.lock();
            let entry = state.entry(id)?;
            if !entry.presence.is_unadopted() {
                return Ok(());
            }
            Arc::clone(&entry.liveness)
        };
        let _serialized = liveness.lock().await;
        self.adopted(id).await.map(drop)
    }

    /// Attaches the terminal `id` if it is recorded but not attached here
    /// yet (see `Backend::check`), and returns the live backend terminal,
    /// or `None` when it is proven gone. The caller holds its liveness
    /// lock.
    ///
    /// # Errors
    ///
    /// The adoption's failure, e.g. `UNRESPONSIVE`: the terminal then stays
    /// unadopted (it may well live), never marked gone.
    pub(crate) async fn adopted(
        &self,
        id: &TerminalId,
    ) -> Result<Option<Arc<dyn BackendTerminal>>> {
        let (record, backend) = {
            let state = self.inner.lock();
            let entry = state.entry(id)?;
            if !entry.presence.is_unadopted() {
                return Ok(entry.presence.terminal());
            }
            (entry.record.clone(), Arc::clone(&self.inner.backend))
        };
        let adopted = backend.adopt(&record).await?;
        let kept = {
            let mut state = self.inner.lock();
            match state.entries.get_mut(id) {
                Some(entry) => {
                    entry.presence.adopted(adopted.clone());
                    true
                }
                None => false,
            }
        };
        if kept {
            if adopted.is_some() {
                self.follow_history(id, 0);
            }
            return Ok(adopted);
        }
        if let Some(terminal) = adopted {
            terminal.shutdown().await;
        }
        Err(Error::NoTerminal(id.to_string()))
    }

    /// The record files the last scan of the state directory (an
    /// [`open_with`](Registry::open_with), [`refresh`](Registry::refresh) or
    /// [`list`](super::Owned::list)) found corrupt and moved aside: what `list`
    /// reports beside the terminals. Their terminals are left alone.
    pub fn corrupt_records(&self) -> Vec<CorruptRecord> {
        self.inner.lock().corrupt.clone()
    }

    /// Asks the backend to remove what belongs to no record (socket files without a server, servers proven unclaimed).
    /// Reports the records moved aside as corrupt, whose terminals are left
    /// alone.
    ///
    /// # Errors
    ///
    /// `REGISTRY_DISPOSING`; [`Error::Io`] when the state directory cannot
    /// be listed, or when a record in it cannot be read (the claimed set is
    /// then unknown, so nothing is reaped). Per-item failures are in
    /// [`ReapReport::failures`].
    pub async fn reap(&self) -> Result<ReapReport> {
        self.inner.lock().check_active()?;
        let loaded = self.inner.store.load_all().await?;
        if let Some(unreadable) = loaded.unreadable.first() {
            return Err(Error::io(
                format!(
                    "reading terminal record {} (nothing reaped: it may name a live server)",
                    unreadable.path.display()
                ),
                std::io::Error::other(unreadable.error.clone()),
            ));
        }
        let claimed = loaded.claimed_ids();
        let mut report = ReapReport {
            corrupt: loaded.corrupt.clone(),
            ..ReapReport::default()
        };
        // A copy for the backend's seam (a reap is rare: at start and
        // when asked), which takes plain records.
        let records: Vec<TerminalRecord> = loaded.records.iter().map(|r| (**r).clone()).collect();
        match self.inner.backend.reap(&records, &claimed).await {
            Ok(reaped) => {
                report.removed.extend(reaped.removed);
                report.skipped.extend(reaped.skipped);
                report.failures.extend(reaped.failures);
                report.young = reaped.young;
            }
            Err(error) => report.failures.push(error),
        }
        Ok(report)
    }
}
