//! Reads of a terminal's output beyond its stream's ring: the bytes a
//! search reads (the stream, then the kept history where the ring ends),
//! what `logs` prints, and a page of a gone terminal's scrollback.

use std::sync::Arc;

use bytes::Bytes;
use tracing::warn;

use super::seam::{ReadPage, ReadRequest};
use super::service::Owned;
use crate::history::{Kept, WRITER_WAIT};
use crate::stream::{OutputCursor, OutputSince};
use crate::{Error, Result};

/// The output a search reads: its bytes from `from` on, and whether
/// older output existed that it does not hold (evicted, or printed before
/// the engine's stream of the terminal began).
#[derive(Debug, Clone)]
pub struct Searchable {
    /// The output, from `from` to the newest byte.
    pub bytes: Bytes,
    /// Where it starts: a cursor of the terminal's stream (or, for a gone
    /// terminal, of its kept history, which `logs --since` reads).
    pub from: OutputCursor,
    /// Whether output older than `from` existed.
    pub older: bool,
    /// Whether bytes inside it were lost on their way to the kept
    /// history (a write the disk refused, a writer that fell behind:
    /// `meta.gaps`), so the bytes read skip them.
    pub lost: bool,
}

/// A page of a gone terminal's scrollback from its kept bytes, rendered
/// (`\r`, erases and cursor moves applied) and counted back from the
/// newest line, as a live terminal's `read` counts.
pub(crate) fn page_of(bytes: &[u8], request: &ReadRequest) -> ReadPage {
    let text = crate::screen::render::render(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let end = total.saturating_sub(request.offset);
    let start = request.count.map_or(0, |count| end.saturating_sub(count));
    ReadPage {
        lines: lines[start..end]
            .iter()
            .map(|line| (*line).to_owned())
            .collect(),
        total_lines: total,
        range: start..end,
        truncated: false,
    }
}

/// The kept bytes of the stream whose byte 0 is `first`, from as far
/// back as the history holds them up to the ring's oldest byte
/// (`ring_from`): `(base, from, bytes)` in the stream's offsets, `base`
/// the history offset of its byte 0. Waits for the history's writer to
/// reach the ring first (it writes behind the stream: right after a flood
/// the files can end short of it, and the search would miss what lies
/// between). `None` when this stream is not kept, or the writer does not
/// get there in time (logged: the search then reads the ring alone and
/// says older output existed). Blocking.
fn older(kept: &Kept, first: OutputCursor, ring_from: u64) -> Option<(u64, u64, Bytes)> {
    let base = kept.offset_of(first)?;
    if let Err(error) = kept.wait_written(base + ring_from, WRITER_WAIT) {
        warn!(%error, "search reads the stream's ring alone");
        return None;
    }
    let read = kept.read(Some(first)).ok()?;
    // The history's offsets, moved to the stream's.
    let from = read.from.offset.checked_sub(base)?;
    let upto = usize::try_from(ring_from.checked_sub(from)?).ok()?;
    (read.bytes.len() >= upto).then(|| (base, from, read.bytes.slice(..upto)))
}

impl Owned<'_> {
    /// The output a search reads (see [`Searchable`]): a live terminal's
    /// stream from its first byte, from the kept history as far as the
    /// stream's ring no longer holds it; a gone terminal's kept history.
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`; `TERMINAL_DEAD` for a gone
    /// terminal that kept no history; `UNSUPPORTED` from a backend with no
    /// stream; [`Error::Io`] when the history cannot be read.
    pub async fn searchable(self, target: &str) -> Result<Searchable> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        let terminal = match registry.terminal(owner, target).await {
            Ok(terminal) => terminal,
            Err(error @ Error::TerminalDead { .. }) => {
                let lost = registry.kept(&id).is_some_and(|kept| kept.meta().gaps > 0);
                let kept = registry.read_kept(&id, None)?.ok_or(error)?;
                return Ok(Searchable {
                    lost,
                    older: kept.from.offset > 0,
                    from: kept.from,
                    bytes: kept.bytes,
                });
            }
            Err(error) => return Err(error),
        };
        let stream = super::seam::stream_of(terminal.as_ref())?;
        let held = stream.read(None);
        let joined = stream.joined();
        let first = OutputCursor {
            epoch: stream.epoch(),
            offset: 0,
        };
        let kept = registry.kept(&id);
        let ring_from = held.from.offset;
        let older_kept = match &kept {
            Some(kept) if ring_from > 0 => {
                let kept = Arc::clone(kept);
                tokio::task::spawn_blocking(move || older(&kept, first, ring_from))
                    .await
                    .ok()
                    .flatten()
            }
            _ => None,
        };
        Ok(match older_kept {
            Some((base, from, older)) => {
                let mut bytes = older.to_vec();
                bytes.extend_from_slice(&held.bytes);
                Searchable {
                    lost: kept.as_ref().is_some_and(|kept| kept.meta().gaps > 0),
                    bytes: Bytes::from(bytes),
                    from: OutputCursor {
                        epoch: stream.epoch(),
                        offset: from,
                    },
                    older: from > 0 || base > 0 || joined,
                }
            }
            None => Searchable {
                lost: false,
                older: held.from.offset > 0 || joined,
                from: held.from,
                bytes: held.bytes,
            },
        })
    }

    /// The terminal's kept history from `since` (`None`: the oldest byte
    /// kept), read from its files, whether it runs or not: what
    /// `tmux-engine logs` prints. A cursor a live terminal gave reads the
    /// same bytes here (those written so far: at most the loss window
    /// behind).
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`; `UNSUPPORTED` when it keeps no
    /// history; [`Error::Io`] when its files cannot be read.
    pub async fn kept_history(
        self,
        target: &str,
        since: Option<OutputCursor>,
    ) -> Result<OutputSince> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        registry.read_kept(&id, since)?.ok_or_else(|| {
            Error::Unsupported(format!(
                "terminal {id} keeps no history (spawn it with keep_history)"
            ))
        })
    }
}
