//! Kept histories in the registry (a terminal's output outlives a
//! reboot): which terminals write their
//! stream to disk, the writer of each live one, reads of a gone one's
//! kept bytes, the boot id that tells a reboot from a crash, and the
//! restore of a terminal the machine's restart took.
//!
//! A terminal keeps its history when its spec says so (or the registry's
//! default, [`RegistryConfig::keep_history`], when it does not). One
//! writer task follows each live terminal's stream (`crate::history`);
//! a rebuilt terminal's new stream gets a new one, mapped to the same
//! files. Of the processes sharing the state directory, one writes a
//! given history (its `history` flock); another holding the same terminal
//! does not, so no byte is kept twice. Its files go when the terminal is killed; to keep them, copy
//! them first (`tmux-engine logs T > file`).
//!
//! A restore (a dead `on-attach` or `always` terminal whose record names
//! another boot) starts the new terminal in the last known working
//! directory with its whole kept history printed first, byte for byte
//! (from its last hole on, when bytes were lost: a stream maps onto one
//! stretch of offsets),
//! then one dim marked line (`── restored from <time> ──`), then its own
//! program (the shell and its prompt), then types `resume_command`. The
//! printed history is what the new stream begins with, so it is mapped
//! onto the offsets it already has on disk and not written twice.
//!
//! [`RegistryConfig::keep_history`]: super::RegistryConfig::keep_history

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::seam::{BackendTerminal, Restore, SendRequest, WaitFor};
use super::state::Keeping;
use super::{Registry, TerminalId};
use crate::history::keeper::KeepOrder;
use crate::history::{Kept, history_dir, now_ms};
use crate::statedir::StateDir;
use crate::statedir::{FileLock, Purpose};
use crate::stream::{OutputCursor, OutputSince, Stream};
use crate::{Error, Result};

/// The reason of a terminal whose server the machine's restart took.
pub const HOST_RESTARTED: &str = "host_restarted";

/// Where the kernel tells this boot's id.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The marked line, dim, on a line of its own.
fn marker(after: &[u8], at_ms: u64) -> Vec<u8> {
    let time = utc_text(at_ms);
    let mut line = Vec::new();
    if !after.is_empty() && !after.ends_with(b"\n") {
        line.extend_from_slice(b"\r\n");
    }
    line.extend_from_slice(
        format!("\x1b[0m\x1b[2m── restored from {time} ──\x1b[0m\r\n").as_bytes(),
    );
    line
}

impl Registry {
    /// This machine's boot id now (the config's file, else the kernel's).
    pub(crate) fn boot_id(&self) -> Option<String> {
        let path = self
            .inner
            .config
            .boot_id_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(BOOT_ID));
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    }

    /// Whether a record's server was started on another boot of this
    /// machine.
    pub(crate) fn booted_since(&self, recorded: Option<&str>) -> bool {
        matches!((recorded, self.boot_id()), (Some(then), Some(now)) if then != now)
    }

    /// The history directory of `id`, with a state directory.
    fn history_path(&self, id: &TerminalId) -> Option<PathBuf> {
        let root = self.inner.store.dir()?.root().to_owned();
        Some(history_dir(&root, id.as_str()))
    }

    /// Creates the kept history of a terminal being spawned, before its
    /// record is written: a full disk fails the spawn here, clearly.
    pub(crate) async fn create_history(&self, id: &TerminalId) -> Result<Option<Arc<Kept>>> {
        let Some(dir) = self.history_path(id) else {
            return Ok(None);
        };
        let limit = self.inner.config.history_bytes;
        let boot = self.boot_id();
        let kept = tokio::task::spawn_blocking(move || {
            let kept = Kept::open(dir, limit)?;
            kept.update(|meta| meta.boot_id = boot);
            kept.save_meta()?;
            Ok::<_, Error>(kept)
        })
        .await
        .map_err(|error| Error::io("creating a kept history", std::io::Error::other(error)))??;
        Ok(Some(Arc::new(kept)))
    }

    /// The kept history of `id`, opened (and remembered) if it has one;
    /// one that cannot be read is logged and taken as none (see
    /// [`Registry::kept_or_error`] where the error must be told).
    pub(crate) fn kept(&self, id: &TerminalId) -> Option<Arc<Kept>> {
        self.kept_or_error(id).unwrap_or_else(|error| {
            warn!(terminal = %id, %error, "kept history cannot be read");
            None
        })
    }

    /// The kept history of `id`, opened (and remembered) if it has one.
    /// Opening reads only (nothing is written: a full disk does not stop
    /// it).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when its files cannot be read.
    pub(crate) fn kept_or_error(&self, id: &TerminalId) -> Result<Option<Arc<Kept>>> {
        let mut state = self.inner.lock();
        let Some(entry) = state.entries.get_mut(id) else {
            return Ok(None);
        };
        if let Some(keeping) = &entry.history {
            return Ok(Some(Arc::clone(&keeping.kept)));
        }
        if !entry.record.spec.keeps_history() {
            return Ok(None);
        }
        let Some(dir) = self.history_path(id) else {
            return Ok(None);
        };
        let Some(kept) = Kept::existing(dir, self.inner.config.history_bytes)? else {
            return Ok(None);
        };
        let kept = Arc::new(kept);
        entry.history = Some(Keeping {
            kept: Arc::clone(&kept),
            stream: None,
            _stop: None,
            finished: None,
            writing: None,
        });
        Ok(Some(kept))
    }

    /// Starts keeping the live terminal of `id` in its kept history, from
    /// its stream's offset `from`, unless that stream is kept already or
    /// the terminal keeps none. The pane's relay writes it when there is
    /// one (it reads every byte, with or without an engine process);
    /// else this process does, while it holds the terminal.
    pub(crate) fn follow_history(&self, id: &TerminalId, from: u64) {
        let kept = {
            let state = self.inner.lock();
            match state.entries.get(id) {
                Some(entry) if entry.record.spec.keeps_history() => {}
                _ => return,
            }
            drop(state);
            self.kept(id).or_else(|| {
                let dir = self.history_path(id)?;
                match Kept::open(dir, self.inner.config.history_bytes) {
                    Ok(kept) => Some(Arc::new(kept)),
                    Err(error) => {
                        warn!(terminal = %id, %error, "kept history cannot be opened");
                        None
                    }
                }
            })
        };
        let Some(kept) = kept else { return };
        let (terminal, stream, order) = {
            let mut state = self.inner.lock();
            let Some(entry) = state.entries.get_mut(id) else {
                return;
            };
            let Some(terminal) = entry.presence.terminal() else {
                return;
            };
            let Some(stream) = terminal.stream() else {
                return;
            };
            let same = entry
                .history
                .as_ref()
                .and_then(|keeping| keeping.stream.as_ref())
                .is_some_and(|followed| Arc::ptr_eq(followed, &stream));
            if same {
                return;
            }
            let order = self.inner.store.dir().map(|dir| KeepOrder {
                history: kept.dir().to_owned(),
                limit: kept.limit,
                record: entry.record.spec.record,
                lock: dir.lock_path(&StateDir::terminal_lock(id, Purpose::History)),
                boot_id: self.boot_id(),
                size: entry.record.spec.size,
            });
            // This stream is taken care of from here on (by the relay, or
            // by the writer the task below starts where none keeps it).
            let writing = entry
                .history
                .as_mut()
                .and_then(|keeping| keeping.writing.take());
            entry.history = Some(Keeping {
                kept: Arc::clone(&kept),
                stream: Some(Arc::clone(&stream)),
                _stop: None,
                finished: None,
                writing,
            });
            (terminal, stream, order)
        };
        let registry = self.clone();
        let id = id.clone();
        self.inner.tasks.spawn(async move {
            let relayed = match order {
                Some(order) => terminal.keep_history(order, from).await,
                None => Ok(None),
            };
            match relayed {
                Ok(Some(_)) => {}
                Ok(None) => registry.write_history_here(&id, &kept, &stream, from),
                Err(error) => {
                    warn!(terminal = %id, %error, "the relay does not keep the history; keeping it here");
                    registry.write_history_here(&id, &kept, &stream, from);
                }
            }
        });
    }

    /// Writes `stream` of the live terminal `id` to `kept` from this
    /// process (no relay keeps it), unless another process writes it (the
    /// `history` flock) or the terminal's stream changed meanwhile.
    fn write_history_here(
        &self,
        id: &TerminalId,
        kept: &Arc<Kept>,
        stream: &Arc<Stream>,
        from: u64,
    ) {
        let mut state = self.inner.lock();
        let Some(entry) = state.entries.get_mut(id) else {
            return;
        };
        let current = entry
            .history
            .as_ref()
            .and_then(|keeping| keeping.stream.as_ref())
            .is_some_and(|followed| Arc::ptr_eq(followed, stream));
        if !current {
            return;
        }
        // One writer across the processes sharing the state directory.
        let writing = match entry
            .history
            .as_mut()
            .and_then(|keeping| keeping.writing.take())
        {
            Some(lock) => Some(lock),
            None => match self.inner.store.dir() {
                Some(dir) => match dir.try_lock(&StateDir::terminal_lock(id, Purpose::History)) {
                    Ok(Some(lock)) => Some(lock),
                    Ok(None) => return,
                    Err(error) => {
                        warn!(terminal = %id, %error, "kept history's writer lock");
                        return;
                    }
                },
                None => None,
            },
        };
        kept.write_here();
        let held = stream.read(None).from.offset;
        let from = kept.resume(stream.epoch(), from, held, stream.end().offset);
        let boot = self.boot_id();
        kept.update(|meta| {
            meta.boot_id = boot;
            meta.size = meta.size.or(entry.record.spec.size);
        });
        let record = entry.record.spec.record;
        let cancel: CancellationToken = entry.cancel.child_token();
        let weak = match entry.presence.terminal() {
            Some(terminal) => Arc::downgrade(&terminal),
            None => return,
        };
        let cwd = Arc::new(move || weak.upgrade()?.working_directory());
        let finished = CancellationToken::new();
        let writer = crate::history::follow(
            Arc::clone(kept),
            Arc::clone(stream),
            from,
            record,
            cwd,
            cancel.clone(),
        );
        let ended = finished.clone();
        self.inner.tasks.spawn(async move {
            writer.await;
            ended.cancel();
        });
        entry.history = Some(Keeping {
            kept: Arc::clone(kept),
            stream: Some(Arc::clone(stream)),
            _stop: Some(cancel.drop_guard()),
            finished: Some(finished),
            writing,
        });
    }

    /// Removes `id`'s kept history (after its kill).
    pub(crate) async fn remove_history(&self, id: &TerminalId, writer: Option<CancellationToken>) {
        let Some(dir) = self.history_path(id) else {
            return;
        };
        // The last write first, bounded: a writer stuck on a dead disk
        // must not keep the kill from ending. This process's writer says
        // when it ended; the relay (or another process) lets go of the
        // writer lock once its pipe closed with the killed server.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        if let Some(writer) = writer {
            let _ = tokio::time::timeout_at(deadline, writer.cancelled()).await;
        }
        let _writer_lock = self.wait_for_history_writer(id, deadline).await;
        let removed = tokio::task::spawn_blocking(move || {
            // Once more if the writer's last flush raced the first.
            Kept::remove(&dir).or_else(|_| Kept::remove(&dir))
        })
        .await;
        if let Ok(Err(error)) = removed {
            warn!(terminal = %id, %error, "kept history of a killed terminal left behind");
        }
    }

    /// Takes `id`'s history writer lock once whoever writes the history
    /// let go of it, or `None` at `deadline` (or without a state
    /// directory). Polled: the holder is another process.
    async fn wait_for_history_writer(
        &self,
        id: &TerminalId,
        deadline: tokio::time::Instant,
    ) -> Option<FileLock> {
        let file = StateDir::terminal_lock(id, Purpose::History);
        loop {
            match self.inner.store.try_lock(file.clone()).await {
                Ok(Some(lock)) => return Some(lock),
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Ok(None) => {
                    warn!(terminal = %id, "the kept history's writer did not let go; removing it anyway");
                    return None;
                }
                Err(_) => return None,
            }
        }
    }

    /// Prepares the restore of `id`: its kept bytes and the marked line
    /// in a private file, and the directory to start in. `None` when it
    /// keeps no history.
    pub(crate) async fn prepare_restore(
        &self,
        id: &TerminalId,
    ) -> Result<Option<(Restore, Option<PathBuf>)>> {
        let Some(kept) = self.kept(id) else {
            return Ok(None);
        };
        let prepared = tokio::task::spawn_blocking(move || {
            let read = kept.read(None)?;
            let at = now_ms();
            let mut bytes = read.bytes.to_vec();
            let kept_bytes = bytes.len() as u64;
            bytes.extend_from_slice(&marker(&read.bytes, at));
            let replay = kept.dir().join("replay");
            write_private(&replay, &bytes)?;
            kept.update(|meta| meta.restored_ms = Some(at));
            // Saved now: the new terminal's relay writes the meta next.
            kept.save_meta()?;
            let cwd = kept.meta().cwd.filter(|dir| dir.is_dir());
            Ok::<_, Error>((Restore { replay, kept_bytes }, cwd))
        })
        .await
        .map_err(|error| Error::io("preparing a restore", std::io::Error::other(error)))??;
        Ok(Some(prepared))
    }

    /// After a restore: types the terminal's `resume_command` at its new
    /// prompt (a send that waits for the prompt), in the background.
    pub(crate) fn resume(&self, id: &TerminalId, terminal: Arc<dyn BackendTerminal>) {
        let line = {
            let state = self.inner.lock();
            state
                .entries
                .get(id)
                .and_then(|entry| entry.record.spec.resume_command.clone())
        };
        let Some(line) = line else { return };
        let id = id.clone();
        let resumed = CancellationToken::new();
        if let Some(entry) = self.inner.lock().entries.get_mut(&id) {
            entry.resuming = Some(resumed.clone());
        }
        self.inner.tasks.spawn(async move {
            let _resumed = resumed.drop_guard();
            let request = SendRequest {
                text: Bytes::from(line),
                submit: true,
                wait: WaitFor::Command,
                timeout: Some(std::time::Duration::from_secs(30)),
                ..SendRequest::default()
            };
            let result = match terminal.start_send(request) {
                Ok(started) => started.result.await.map(drop),
                Err(error) => Err(error),
            };
            match result {
                Ok(()) => info!(terminal = %id, "typed the resume command"),
                Err(error) => warn!(terminal = %id, %error, "typing the resume command"),
            }
        });
    }

    /// The kept bytes of `id` from `since`, when it keeps a history.
    pub(crate) fn read_kept(
        &self,
        id: &TerminalId,
        since: Option<OutputCursor>,
    ) -> Result<Option<OutputSince>> {
        match self.kept_or_error(id)? {
            Some(kept) => kept.read(since).map(Some),
            None => Ok(None),
        }
    }
}

/// `YYYY-MM-DD HH:MM UTC` for milliseconds since the Unix epoch (the
/// civil-from-days arithmetic of Howard Hinnant's date algorithms).
pub(crate) fn utc_text(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (i64::try_from(secs / 86_400).unwrap_or(0), secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// Writes `bytes` to a new `0600` file at `path`.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let context = |error| Error::io(format!("writing {}", path.display()), error);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(context)?;
    file.write_all(bytes).map_err(context)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_text_is_the_civil_date() {
        assert_eq!(super::utc_text(0), "1970-01-01 00:00 UTC");
        // 2024-02-29 12:34:56 UTC.
        assert_eq!(super::utc_text(1_709_210_096_000), "2024-02-29 12:34 UTC");
    }
}
