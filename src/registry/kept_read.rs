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
/// older output existed that it does not hold (evicted, printed before
/// the engine's stream of the terminal began, or before a hole in the
/// kept history: the bytes searched follow one another, so each line's
/// cursor is its own).
#[derive(Debug, Clone)]
pub struct Searchable {
    /// The output, from `from` to the newest byte.
    pub bytes: Bytes,
    /// Where it starts: a cursor of the terminal's stream (or, for a gone
    /// terminal, of its kept history, which `logs --since` reads).
    pub from: OutputCursor,
    /// Whether output older than `from` existed.
    pub older: bool,
    /// Whether bytes were lost on their way to the kept history (a write
    /// the disk refused, a writer that fell behind: `meta.gaps`): a hole,
    /// which the bytes read never span, so output before it is not
    /// searched.
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
/// back as the history holds them with no hole up to the ring's oldest
/// byte (`ring_from`): `(base, from, bytes)` in the stream's offsets,
/// `base` the history offset of its byte 0. Waits for the history's
/// writer to reach the ring first (it writes behind the stream: right
/// after a flood the files can end short of it, and the search would miss
/// what lies between). `None` when this stream is not kept, a hole lies
/// just before the ring, or the writer does not get there in time
/// (logged: the search then reads the ring alone and says older output
/// existed). Blocking.
fn older(kept: &Kept, first: OutputCursor, ring_from: u64) -> Option<(u64, u64, Bytes)> {
    let base = kept.offset_of(first)?;
    if let Err(error) = kept.wait_written(base + ring_from, WRITER_WAIT) {
        warn!(%error, "search reads the stream's ring alone");
        return None;
    }
    let (start, bytes) = kept.read_range(base, base + ring_from).ok()?;
    // The history's offsets, moved to the stream's.
    let from = start.checked_sub(base)?;
    (from + bytes.len() as u64 == ring_from).then_some((base, from, bytes))
}

/// A gone terminal's kept output a search reads: the newest bytes that
/// follow one another (see [`Kept::read`]). Blocking.
fn gone(kept: &Kept) -> Result<Searchable> {
    let read = kept.read(None)?;
    Ok(Searchable {
        lost: kept.meta().gaps > 0,
        older: read.from.offset > 0,
        from: read.from,
        bytes: read.bytes,
    })
}

/// A gone terminal's kept output as a page of scrollback renders it:
/// every stretch of it, oldest first, a line break where a hole lies
/// between two (so no line is made of both sides of one). Blocking.
///
/// # Errors
///
/// [`Error::Io`] when the history cannot be read.
pub(crate) fn scrollback(kept: &Kept) -> Result<Bytes> {
    let (oldest, _) = kept.span()?;
    let mut since = OutputCursor {
        epoch: kept.meta().epoch,
        offset: oldest,
    };
    let mut bytes = Vec::new();
    loop {
        let read = kept.read(Some(since))?;
        if read.bytes.is_empty() {
            return Ok(Bytes::from(bytes));
        }
        if read.gap.is_some() && !bytes.is_empty() && !bytes.ends_with(b"\n") {
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(&read.bytes);
        since = read.end();
    }
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
                let kept = registry.kept_or_error(&id)?.ok_or(error)?;
                return gone(&kept);
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
    /// kept) up to the next hole or its end, read from its files, whether
    /// it runs or not: what `tmux-engine logs` prints, going on from each
    /// answer's end until one is empty (a hole is crossed by the read
    /// after it, with its gap). A cursor a live terminal gave reads the
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
        let kept = registry.kept_or_error(&id)?.ok_or_else(|| {
            Error::Unsupported(format!(
                "terminal {id} keeps no history (spawn it with keep_history)"
            ))
        })?;
        let since = match since {
            Some(since) => since,
            None => OutputCursor {
                epoch: kept.meta().epoch,
                offset: kept.span()?.0,
            },
        };
        kept.read(Some(since))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::stream::CursorGap;

    /// A history of one stream mapped at 0: `one\n`, a hole of 6 bytes,
    /// `three\n` and `four` (the ring would start at 20).
    fn holed() -> (tempfile::TempDir, Kept, u64) {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::open(dir.path().join("t"), 1 << 20).unwrap();
        let epoch = OutputCursor::new_epoch();
        kept.map_stream(epoch, 0);
        kept.append_at(0, b"one\n").unwrap();
        kept.append_at(10, b"three\nfour").unwrap();
        (dir, kept, epoch)
    }

    /// A search's cursors are its bytes' own: the kept bytes it reads
    /// meet the ring with no hole between (they were joined across it,
    /// and a match's cursor after the hole named bytes 6 further on).
    #[test]
    fn a_search_reads_kept_bytes_only_up_to_a_hole() {
        let (_dir, kept, epoch) = holed();
        let first = OutputCursor { epoch, offset: 0 };
        let (base, from, bytes) = older(&kept, first, 20).unwrap();
        assert_eq!((base, from, &bytes[..]), (0, 10, &b"three\nfour"[..]));
        // A hole just before the ring: the ring alone.
        assert!(older(&kept, first, 8).is_none());
        let gone = gone(&kept).unwrap();
        assert_eq!(
            (gone.from.offset, &gone.bytes[..]),
            (10, &b"three\nfour"[..])
        );
        assert!(gone.older && gone.lost);
    }

    /// A gone terminal's scrollback holds every stretch, a line break
    /// where a hole lies, never one line of both sides.
    #[test]
    fn a_gone_terminals_scrollback_breaks_the_line_at_a_hole() {
        let (_dir, kept, _) = holed();
        kept.append_at(30, b"five\n").unwrap();
        assert_eq!(
            &scrollback(&kept).unwrap()[..],
            b"one\nthree\nfour\r\nfive\n"
        );
        let page = page_of(&scrollback(&kept).unwrap(), &ReadRequest::default());
        assert_eq!(page.lines, ["one", "three", "four", "five"]);
        let read = kept
            .read(Some(OutputCursor {
                epoch: kept.meta().epoch,
                offset: 4,
            }))
            .unwrap();
        assert_eq!((read.gap, read.from.offset), (Some(CursorGap::Evicted), 10));
    }
}
