//! The bytes a stream still holds: the newest output as the chunks it
//! arrived in (shared `Bytes`, never copied in), at most a limit in all.
//!
//! One contiguous buffer of the limit (4 MiB by default) would be
//! allocated whole per terminal and, once freed, kept by the allocator;
//! chunks cost only what was output, so an idle terminal holds nothing.
//!
//! Short output is the exception: it is copied, appended to the newest
//! chunk the ring made itself. A chunk as it came is a slice of its
//! reader's buffer, and holding a keystroke's echo that way held the
//! reader's whole block: serve grew by 3.9 KB per one-byte write (20,000
//! of them, measured), so a window of echoes could pin thousands of times
//! its size. Copied, short output costs its bytes, in chunks of
//! [`OWN_CHUNK`].

use std::collections::VecDeque;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};

/// Output shorter than this is copied into the ring's own chunks; longer
/// output is held as it came (its reader's block is mostly its own).
const COPY_BELOW: usize = 1024;
/// The size the ring's own chunks grow to by appending short output.
const OWN_CHUNK: usize = 4096;
/// Arrival times kept at most (24 bytes each): one is kept per push, and a
/// window of keystroke echoes is millions of pushes. The oldest go first;
/// a byte older than them has no known time.
const MAX_TIMES: usize = 16 * 1024;

/// The held window of one stream, by absolute offset.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    chunks: VecDeque<Bytes>,
    /// Bytes held in `chunks`.
    len: usize,
    /// Bytes of output seen in all; the ring ends at this offset.
    pub(crate) total: u64,
    /// When each held chunk arrived, by the offset it starts at: what a
    /// command's duration is measured from after its send has gone.
    times: VecDeque<(u64, SystemTime)>,
    /// Times output was skipped (the reader's subscription resynced, as
    /// it does after every respawn): bytes across a skip do not lead one to
    /// the other.
    pub(crate) gaps: u64,
    /// The stream's end at the latest skip: a replay starts no earlier.
    pub(crate) skipped_at: u64,
    /// Whether the newest chunk is one the ring made (short output copied),
    /// so more short output may be appended to it.
    own_tail: bool,
}

impl Ring {
    /// Appends `bytes`, then drops the oldest bytes beyond `limit`.
    pub(crate) fn push(&mut self, mut bytes: Bytes, limit: usize) {
        self.times.push_back((self.total, SystemTime::now()));
        if self.times.len() > MAX_TIMES {
            self.times.pop_front();
        }
        self.total += bytes.len() as u64;
        if bytes.len() >= limit {
            self.chunks.clear();
            self.len = 0;
            bytes = bytes.slice(bytes.len() - limit..);
        }
        self.len += bytes.len();
        if bytes.len() < COPY_BELOW {
            self.append_copy(&bytes);
        } else {
            self.chunks.push_back(bytes);
            self.own_tail = false;
        }
        while self.len > limit {
            let excess = self.len - limit;
            let front = self
                .chunks
                .front_mut()
                .expect("a ring over its limit holds a chunk");
            if front.len() <= excess {
                self.len -= front.len();
                self.chunks.pop_front();
            } else {
                *front = front.slice(excess..);
                self.len -= excess;
            }
        }
        let start = self.start();
        while self
            .times
            .get(1)
            .is_some_and(|&(offset, _)| offset <= start)
        {
            self.times.pop_front();
        }
    }

    /// Output up to `to` was skipped here (see `Stream::skip_to`): nothing
    /// held leads up to what follows, which starts at `to`.
    pub(crate) fn jump(&mut self, to: u64) {
        self.chunks.clear();
        self.times.clear();
        self.len = 0;
        self.own_tail = false;
        self.total = self.total.max(to);
        self.gaps += 1;
        self.skipped_at = self.total;
    }

    /// A new stream begins at its offset `start`: nothing held belongs to
    /// it (see `Stream::restart`).
    pub(crate) fn restart(&mut self, start: u64) {
        self.chunks.clear();
        self.times.clear();
        self.len = 0;
        self.own_tail = false;
        self.total = start;
        self.gaps += 1;
        self.skipped_at = start;
    }

    /// Copies short output onto the newest chunk when the ring made it and
    /// it has room, else into a new chunk of its own (exactly its size: the
    /// next append replaces it, so room reserved ahead would be copied for
    /// nothing).
    fn append_copy(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.chunks.back_mut() {
            Some(last) if self.own_tail && last.len() + bytes.len() <= OWN_CHUNK => {
                let mut joined = BytesMut::with_capacity(last.len() + bytes.len());
                joined.extend_from_slice(last);
                joined.extend_from_slice(bytes);
                *last = joined.freeze();
            }
            _ => {
                self.chunks.push_back(Bytes::copy_from_slice(bytes));
                self.own_tail = true;
            }
        }
    }

    /// When the byte at `offset` arrived, while the ring holds it and its
    /// time is among the newest [`MAX_TIMES`].
    pub(crate) fn time_at(&self, offset: u64) -> Option<SystemTime> {
        if offset < self.start() || offset >= self.total {
            return None;
        }
        let after = self.times.partition_point(|&(start, _)| start <= offset);
        self.times.get(after.checked_sub(1)?).map(|&(_, time)| time)
    }

    /// The offset of the oldest byte held.
    pub(crate) fn start(&self) -> u64 {
        self.total - self.len as u64
    }

    /// The held bytes `from..to` as shared slices of the chunks (no copy);
    /// `None` when the ring no longer (or not yet) holds all of them.
    pub(crate) fn chunks(&self, from: u64, to: u64) -> Option<Vec<Bytes>> {
        if from < self.start() || from > to || to > self.total {
            return None;
        }
        let mut out = Vec::new();
        let mut at = self.start();
        for chunk in &self.chunks {
            let next = at + chunk.len() as u64;
            if next > from && at < to {
                let begin = usize::try_from(from.saturating_sub(at)).unwrap_or(usize::MAX);
                let end = usize::try_from(to.min(next) - at).unwrap_or(usize::MAX);
                out.push(chunk.slice(begin..end));
            }
            at = next;
        }
        Some(out)
    }

    /// The held bytes `from..to` in one buffer (one copy when they span
    /// chunks; a replay then takes one queue place); `None` as for
    /// [`chunks`](Self::chunks).
    pub(crate) fn between(&self, from: u64, to: u64) -> Option<Bytes> {
        let mut chunks = self.chunks(from, to)?;
        if chunks.len() <= 1 {
            return Some(chunks.pop().unwrap_or_default());
        }
        let mut out = BytesMut::with_capacity(usize::try_from(to - from).unwrap_or(0));
        for chunk in &chunks {
            out.extend_from_slice(chunk);
        }
        Some(out.freeze())
    }

    /// The bytes from absolute offset `start` to the end, and whether some
    /// from `start` on are no longer held; an offset past the end (a
    /// caller's stale count) yields nothing.
    pub(crate) fn since(&self, start: u64) -> (Bytes, bool) {
        let from = start.clamp(self.start(), self.total);
        let bytes = self.between(from, self.total).unwrap_or_default();
        (bytes, start < self.start())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_of(chunks: &[&'static [u8]], limit: usize) -> Ring {
        let mut ring = Ring::default();
        for chunk in chunks {
            ring.push(Bytes::from_static(chunk), limit);
        }
        ring
    }

    #[test]
    fn keeps_the_newest_bytes_by_offset() {
        let ring = ring_of(&[b"abc", b"defg", b"hi"], 5);
        assert_eq!(ring.total, 9);
        assert_eq!(ring.since(0), (Bytes::from_static(b"efghi"), true));
        assert_eq!(ring.since(4), (Bytes::from_static(b"efghi"), false));
        assert_eq!(ring.since(6), (Bytes::from_static(b"ghi"), false));
        assert_eq!(ring.since(7), (Bytes::from_static(b"hi"), false));
        assert_eq!(ring.since(9), (Bytes::new(), false));
        assert_eq!(ring.since(12), (Bytes::new(), false));
    }

    #[test]
    fn a_chunk_larger_than_the_limit_keeps_its_tail_and_counts_whole() {
        let ring = ring_of(&[b"ab", b"0123456789"], 4);
        assert_eq!(ring.total, 12);
        assert_eq!(ring.len, 4);
        assert_eq!(ring.since(8), (Bytes::from_static(b"6789"), false));
        assert_eq!(ring.since(2), (Bytes::from_static(b"6789"), true));
    }

    #[test]
    fn exact_fits_drop_nothing() {
        let ring = ring_of(&[b"ab", b"cd"], 4);
        assert_eq!(ring.since(0), (Bytes::from_static(b"abcd"), false));
        assert_eq!(ring.len, 4);
    }

    #[test]
    fn short_output_is_copied_into_chunks_of_the_rings_own() {
        // A one-byte echo as a reader hands it over: a slice of a block.
        let block = Bytes::from(vec![b'x'; 64 * 1024]);
        let inside = |chunk: &Bytes| {
            let start = block.as_ptr() as usize;
            (start..start + block.len()).contains(&(chunk.as_ptr() as usize))
        };
        let mut ring = Ring::default();
        for _ in 0..OWN_CHUNK + 1 {
            ring.push(block.slice(..1), 1 << 20);
        }
        assert_eq!(ring.len, OWN_CHUNK + 1);
        assert_eq!(
            ring.chunks.len(),
            2,
            "appended up to a full chunk, then a new one"
        );
        assert_eq!(ring.chunks[0].len(), OWN_CHUNK);
        assert!(
            !ring.chunks.iter().any(inside),
            "no chunk holds the reader's block"
        );
        // Long output is held as it came, and short output after it starts
        // a chunk of its own rather than growing the reader's.
        ring.push(block.slice(..COPY_BELOW), 1 << 20);
        ring.push(block.slice(..1), 1 << 20);
        assert!(inside(&ring.chunks[2]));
        assert!(!inside(&ring.chunks[3]));
        assert_eq!(ring.since(0).0.len(), OWN_CHUNK + 1 + COPY_BELOW + 1);
    }

    #[test]
    fn arrival_times_are_bounded() {
        let mut ring = Ring::default();
        for _ in 0..MAX_TIMES + 10 {
            ring.push(Bytes::from_static(b"x"), 1 << 20);
        }
        assert_eq!(ring.times.len(), MAX_TIMES);
        assert!(ring.time_at(0).is_none(), "older than the times kept");
        assert!(ring.time_at(ring.total - 1).is_some());
    }

    #[test]
    fn ranges_are_shared_slices_inside_the_window_only() {
        let ring = ring_of(&[b"abc", b"defg", b"hi"], 7);
        // Held: "cdefghi" from offset 2.
        let slices = ring.chunks(3, 8).unwrap_or_default();
        assert_eq!(slices.concat(), b"defgh");
        assert_eq!(ring.between(2, 4).as_deref(), Some(&b"cd"[..]));
        assert_eq!(ring.between(9, 9).as_deref(), Some(&b""[..]));
        assert_eq!(ring.between(1, 4), None, "evicted");
        assert_eq!(ring.between(4, 10), None, "not yet output");
        assert_eq!(ring.between(5, 4), None, "backwards");
    }

    #[test]
    fn ranges_across_long_chunks_are_slices_of_each() {
        let long = |byte: u8| Bytes::from(vec![byte; COPY_BELOW]);
        let mut ring = Ring::default();
        for byte in [b'a', b'b', b'c'] {
            ring.push(long(byte), 2 * COPY_BELOW + 1);
        }
        let start = ring.start();
        assert_eq!(start, COPY_BELOW as u64 - 1);
        let slices = ring.chunks(start, start + 2).unwrap_or_default();
        assert_eq!(slices, [&b"a"[..], b"b"]);
        assert_eq!(ring.chunks.len(), 3, "held as they came");
    }

    #[test]
    fn knows_when_each_held_byte_arrived() {
        let ring = ring_of(&[b"abc", b"defg", b"hi"], 5);
        assert!(ring.time_at(3).is_none(), "evicted");
        assert!(ring.time_at(9).is_none(), "not yet output");
        assert!(
            ring.time_at(4)
                .is_some_and(|four| ring.time_at(8) >= Some(four))
        );
        assert_eq!(ring.times.len(), 2, "the first chunk's time went with it");
    }
}
