//! Pages of a terminal's past output for a viewer: the raw bytes before
//! an offset of its stream, from the stream's ring and, older than the
//! ring holds, from the terminal's kept history on disk. Never
//! `capture-pane`: a viewer that scrolls up reads what the program
//! printed, exactly, a page at a time.
//!
//! A page is bounded ([`MAX_PAGE`]) however much is asked: what one
//! request can make serve read into memory is one page, and a client asks
//! for the next only once it has the last (the WebSocket's write budget
//! bounds one that asks without reading).

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::Result;
use crate::history::Kept;
use crate::stream::Stream;

/// The most bytes one page holds: ~150,000 lines of a log's 28-byte
/// lines, which xterm.js parses in ~100 ms on the 2-core machine; a
/// longer history comes in more pages.
pub const MAX_PAGE: u64 = 4 << 20;

/// Bytes of past output, `from..to` of the viewer's stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryPage {
    /// The stream's epoch the offsets count in.
    pub epoch: u64,
    /// The offset of `bytes[0]`: just after a line feed when the page was
    /// cut short (so it starts at a line's start), else the oldest byte
    /// there is, or the first byte after a hole in the kept history.
    pub from: u64,
    /// The offset just past the page's last byte: the `before` asked for,
    /// or less when that was past the stream's end, or when it lay in (or
    /// just past) a hole in the kept history: then the start of that hole,
    /// whose bytes were lost (a page never spans one).
    pub to: u64,
    /// The oldest offset any page can start at now (the stream's first
    /// byte, or the oldest one the ring or the kept history still hold):
    /// `from == first` means nothing older exists.
    pub first: u64,
    /// The bytes, exactly as the program printed them.
    pub bytes: Bytes,
}

/// The page of `stream` ending at `before` (clamped to the stream's end),
/// at most `max` bytes (clamped to [`MAX_PAGE`]), from the ring and,
/// before the ring's oldest byte, from `kept` (a history fed by this
/// stream). A page cut short starts after its first line feed.
///
/// The kept history is written behind the stream (by the relay after it
/// served its links, or batched by this process's writer), so right after
/// a flood it can still end short of the ring's start: a page that needs
/// those bytes waits for its writer, up to `wait`, rather than come back
/// empty while older bytes exist.
///
/// A hole in the kept history (bytes lost on their way to its files) is
/// never spanned: a page holds the bytes after the hole it meets, whole
/// (not cut to a line: the page before ends at the hole), and a page
/// asked for before a hole's end ends at the hole's start, so a viewer
/// paging back goes on past it.
///
/// Blocking file I/O when it reads `kept`: run it from `spawn_blocking`.
///
/// # Errors
///
/// [`Error::Io`](crate::Error::Io) when the page needs kept bytes the writer did not reach
/// within `wait` (or the history cannot be listed): never a page that
/// silently stops short of bytes that exist.
pub(crate) fn page(
    stream: &Stream,
    kept: Option<&Kept>,
    before: u64,
    max: u64,
    wait: Duration,
) -> Result<HistoryPage> {
    let epoch = stream.epoch();
    let max = max.clamp(1, MAX_PAGE);
    let (ring_start, mut to, mut held) = {
        let ring = stream.held();
        let to = before.min(ring.total);
        let ring_start = ring.start();
        let from = to.saturating_sub(max).max(ring_start);
        let held = if to > ring_start {
            ring.between(from, to).unwrap_or_default()
        } else {
            Bytes::new()
        };
        (ring_start, to, held)
    };
    let mut want = to.saturating_sub(max);
    let mut from = want.max(ring_start).min(to);
    let mut first = ring_start;
    let mut older = Bytes::new();
    let mut after_hole = false;
    // The kept history holds the stream's bytes at `base + offset`, as
    // far back as its files go (its oldest segment may be gone; bytes
    // before `base` are an earlier stream's).
    if let Some(kept) = kept
        && ring_start > 0
        && let Some(base) = kept.stream_base(epoch)
    {
        if let Ok((oldest, _)) = kept.span() {
            first = first.min(oldest.saturating_sub(base));
        }
        let upto = ring_start.min(to);
        if want < upto {
            kept.wait_written(base + upto, wait)?;
            // The kept bytes this page can end with: up to the ring's
            // start (or `to`), unless a hole lies there.
            let until = kept.kept_until(base + upto)?.max(base) - base;
            if until < upto {
                if to > ring_start {
                    // The ring's bytes alone, after the hole.
                    from = ring_start;
                    after_hole = true;
                } else {
                    // The page ends where the hole starts.
                    to = until;
                    want = to.saturating_sub(max);
                    from = to;
                    held = Bytes::new();
                }
            }
            let upto = upto.min(until);
            if want < upto {
                match kept.read_range(base + want, base + upto) {
                    // Only bytes that meet the ring's (or `to`) exactly count.
                    Ok((start, bytes)) if start + bytes.len() as u64 == base + upto => {
                        from = start - base;
                        older = bytes;
                    }
                    Ok(_) => {}
                    Err(error) => tracing::debug!(%error, "kept history not read for a viewer"),
                }
            }
        }
    }
    let bytes = if older.is_empty() {
        held
    } else if held.is_empty() {
        older
    } else {
        let mut joined = BytesMut::with_capacity(older.len() + held.len());
        joined.extend_from_slice(&older);
        joined.extend_from_slice(&held);
        joined.freeze()
    };
    // Cut to a line only where `max` cut the page: at the oldest byte or
    // after a hole, the bytes before are no other page's.
    let (from, bytes) = if from == want && from > first && !after_hole {
        line_start(from, bytes)
    } else {
        (from, bytes)
    };
    Ok(HistoryPage {
        epoch,
        from,
        to,
        first: first.min(from),
        bytes,
    })
}

/// A page cut short starts after its first line feed (a line cut in half
/// would show as a line of its own); one with no line feed at all is
/// kept whole.
fn line_start(from: u64, bytes: Bytes) -> (u64, Bytes) {
    match bytes.iter().position(|&byte| byte == b'\n') {
        Some(at) if at + 1 < bytes.len() => (from + at as u64 + 1, bytes.slice(at + 1..)),
        _ => (from, bytes),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::stream::stream_of;

    /// No wait for a kept history's writer: the tests' writer is done.
    const NOW: Duration = Duration::ZERO;

    /// A stream of a 16-byte ring mapped in `kept` at 0, fed 20 lines
    /// (`kept` gets none of them); the stream and its bytes.
    fn twenty_lines(kept: &Kept) -> (Stream, Vec<u8>) {
        let stream = Stream::new(16);
        kept.map_stream(stream.epoch(), 0);
        let mut all = Vec::new();
        for n in 0..20 {
            let line = format!("l{n:02}\n");
            stream.push(Bytes::from(line.clone()));
            all.extend_from_slice(line.as_bytes());
        }
        (stream, all)
    }

    #[test]
    fn a_page_comes_from_the_ring_and_starts_at_a_line() {
        let stream = stream_of(&[b"one\r\n", b"two\r\n", b"three\r\n"], 1 << 20);
        let whole = page(&stream, None, 100, 1 << 20, NOW).unwrap();
        assert_eq!((whole.from, whole.to, whole.first), (0, 17, 0));
        assert_eq!(&whole.bytes[..], b"one\r\ntwo\r\nthree\r\n");
        // Eight bytes back from 17 is inside "two": cut after its line feed.
        let cut = page(&stream, None, 17, 8, NOW).unwrap();
        assert_eq!((cut.from, cut.to, cut.first), (10, 17, 0));
        assert_eq!(&cut.bytes[..], b"three\r\n");
        let older = page(&stream, None, cut.from, 8, NOW).unwrap();
        assert_eq!((older.from, older.to), (5, 10));
        assert_eq!(&older.bytes[..], b"two\r\n");
        let oldest = page(&stream, None, older.from, 8, NOW).unwrap();
        assert_eq!((oldest.from, oldest.to), (0, 5));
        assert_eq!(&oldest.bytes[..], b"one\r\n");
    }

    #[test]
    fn a_page_is_bounded_and_older_bytes_than_the_ring_come_from_the_kept_history() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::open(dir.path().join("t"), 1 << 20).unwrap();
        let (stream, all) = twenty_lines(&kept);
        kept.append(&all).unwrap();
        assert!(stream.held().start() > 0, "the ring dropped its oldest");
        let end = all.len() as u64;
        let got = page(&stream, Some(&kept), end, 40, NOW).unwrap();
        assert_eq!(got.to, end);
        assert_eq!(got.first, 0);
        assert!(got.bytes.len() <= 40);
        assert_eq!(&got.bytes[..], &all[got.from as usize..]);
        // Page by page back to the first byte, each exact.
        let mut before = got.from;
        while before > 0 {
            let older = page(&stream, Some(&kept), before, 40, NOW).unwrap();
            assert_eq!(older.to, before);
            assert_eq!(&older.bytes[..], &all[older.from as usize..before as usize]);
            assert!(older.from < before);
            before = older.from;
        }
        // Without the kept history the ring is all there is.
        let ring_only = page(&stream, None, end, 1000, NOW).unwrap();
        assert_eq!(ring_only.first, stream.held().start());
        assert_eq!(ring_only.from, ring_only.first);
    }

    /// The kept history is written behind the stream: right after a
    /// flood its files can end short of the ring's oldest byte. A page
    /// that needs them waits for the writer (here a thread that writes
    /// the rest), and says so when it cannot, never an empty page at the
    /// ring's start while older bytes exist (`from == to` there with
    /// `first` 0: a viewer paging back stopped, "each page goes further
    /// back", under load).
    #[test]
    fn a_page_waits_for_the_kept_history_to_reach_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let kept = std::sync::Arc::new(Kept::open(dir.path().join("t"), 1 << 20).unwrap());
        let (stream, all) = twenty_lines(&kept);
        // The writer has the first 5 lines only; the ring starts later.
        kept.append(&all[..20]).unwrap();
        let ring_start = stream.held().start();
        assert!(ring_start > 20, "the ring is past what was written");
        let error = page(&stream, Some(&kept), ring_start, 40, NOW).unwrap_err();
        assert_eq!(error.code().as_str(), "IO");
        assert!(
            error.to_string().contains("its writer reached offset 20"),
            "{error}"
        );
        // The writer catches up while the page waits.
        let writer = {
            let (kept, rest) = (std::sync::Arc::clone(&kept), all[20..].to_vec());
            std::thread::spawn(move || {
                for line in rest.chunks(4) {
                    kept.append(line).unwrap();
                }
            })
        };
        let got = page(
            &stream,
            Some(&kept),
            ring_start,
            40,
            Duration::from_secs(60),
        )
        .unwrap();
        writer.join().unwrap();
        assert_eq!((got.to, got.first), (ring_start, 0));
        assert!(got.from < ring_start, "older bytes than the ring: {got:?}");
        assert_eq!(&got.bytes[..], &all[got.from as usize..ring_start as usize]);
    }

    /// A hole in the kept history (lines 5 to 9 lost on their way to
    /// its files): no page spans it, each page holds exactly the bytes
    /// its offsets name, and paging back goes on past it to the first
    /// byte. The bytes after the hole were joined to the ones before, so
    /// every page older than the hole named bytes 20 further on.
    #[test]
    fn pages_never_span_a_hole_in_the_kept_history() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::open(dir.path().join("t"), 1 << 20).unwrap();
        let (stream, all) = twenty_lines(&kept);
        kept.append_at(0, &all[..20]).unwrap();
        kept.append_at(40, &all[40..]).unwrap();
        let end = all.len() as u64;
        let mut pages = Vec::new();
        let mut before = end;
        while before > 0 {
            let got = page(&stream, Some(&kept), before, 12, NOW).unwrap();
            assert_eq!(got.first, 0);
            assert!(got.to <= before && got.from < got.to, "{got:?}");
            assert_eq!(
                &got.bytes[..],
                &all[got.from as usize..got.to as usize],
                "{got:?}"
            );
            assert!(got.to <= 20 || got.from >= 40, "spans the hole: {got:?}");
            before = got.from;
            pages.push((got.from, got.to));
        }
        // Up to the hole's end, then on from its start.
        assert!(pages.iter().any(|&(from, _)| from == 40), "{pages:?}");
        assert!(pages.iter().any(|&(_, to)| to == 20), "{pages:?}");
        assert_eq!(pages.last(), Some(&(0, 12)));
        // A hole just before the ring's oldest byte: the ring's bytes
        // alone, whole, then the page before the hole.
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::open(dir.path().join("t"), 1 << 20).unwrap();
        let (stream, all) = twenty_lines(&kept);
        kept.append_at(0, &all[..20]).unwrap();
        kept.append_at(64, &all[64..]).unwrap();
        let ring_start = stream.held().start();
        assert_eq!(ring_start, 64);
        let got = page(&stream, Some(&kept), end, 40, NOW).unwrap();
        assert_eq!((got.from, got.to, got.first), (64, 80, 0));
        assert_eq!(&got.bytes[..], &all[64..]);
        let got = page(&stream, Some(&kept), 64, 40, NOW).unwrap();
        assert_eq!((got.from, got.to, got.first), (0, 20, 0));
        assert_eq!(&got.bytes[..], &all[..20]);
        // Asked to end inside the hole: it ends at the hole's start.
        let inside = page(&stream, Some(&kept), 30, 12, NOW).unwrap();
        assert_eq!((inside.from, inside.to), (12, 20));
        assert_eq!(&inside.bytes[..], &all[12..20]);
    }

    #[test]
    fn the_ask_is_clamped() {
        let stream = stream_of(&[b"abc"], 1 << 20);
        let past = page(&stream, None, 1 << 40, u64::MAX, NOW).unwrap();
        assert_eq!((past.from, past.to), (0, 3));
        let nothing = page(&stream, None, 0, 0, NOW).unwrap();
        assert_eq!((nothing.from, nothing.to), (0, 0));
        assert!(nothing.bytes.is_empty());
    }
}
