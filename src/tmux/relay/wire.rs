//! The relay's wire format, sans-IO: what a terminal's resident relay
//! (see [`super::resident`]) and the engine processes linked to it say to
//! each other over a Unix stream socket.
//!
//! Relay to process: frames of one kind byte, a little-endian `u32`
//! length and that many bytes. The first of a data link is always a
//! [`Frame::Hello`] (a link that only asks [`Request::Keep`] gets one
//! [`Frame::Kept`] instead);
//! output follows as [`Frame::Data`], whose bytes continue the stream
//! exactly where the previous frame ended, so only the hello and a gap
//! carry an offset.
//!
//! Process to relay: fixed requests of [`REQUEST_LEN`] bytes, a kind byte
//! and two little-endian `u64`s, so a reader never needs a length.
//!
//! The hello's [`VERSION`] is still 1, which every process refuses to
//! differ from: the program's end ([`Request::Watch`], [`Frame::Watching`],
//! [`Frame::Ended`]) was added so that neither side of another age breaks.
//! A watch is a [`Request::Sync`] whose words name the pid, which a relay
//! that predates it (it ignores a sync's words) answers with a plain
//! [`Frame::Synced`], and a relay sends the two new frames only to a link
//! that asked: a process learns from the answer whether its relay reports
//! the end, and keeps a pidfd of its own where it does not.

use bytes::{Buf, Bytes, BytesMut};

/// A frame's head: kind and length.
pub(crate) const HEAD_LEN: usize = 5;
/// Every request's length.
pub(crate) const REQUEST_LEN: usize = 17;
/// The most bytes one data frame carries (what the relay reads at once).
pub(crate) const MAX_DATA: usize = 64 * 1024;
/// The wire's version, in the hello: a process refuses a relay of
/// another (the binary was replaced under a running terminal). Additions
/// that both ages read safely keep it (see the module's docs).
pub(crate) const VERSION: u64 = 1;
/// The first word of a [`Request::Watch`] (a sync's, which a version 1
/// relay ignores): no pid has it, so a plain sync is never read as one.
const WATCH_TAG: u64 = u64::from_le_bytes(*b"watchpid");
/// `from` in [`Request::From`]: the oldest byte the relay holds.
pub(crate) const OLDEST: u64 = u64::MAX;
/// `from` in [`Frame::Kept`]: the relay does not keep the stream (its
/// order could not be read, the history is written by another, or the
/// epoch asked for is not its own).
pub(crate) const NOT_KEPT: u64 = u64::MAX;

const HELLO: u8 = b'H';
const DATA: u8 = b'D';
const GAP: u8 = b'G';
const SYNCED: u8 = b'S';
const END: u8 = b'E';
const KEPT: u8 = b'K';
const WATCHING: u8 = b'W';
const ENDED: u8 = b'X';

const FROM: u8 = b'F';
const SYNC: u8 = b'Y';
const KEEP: u8 = b'K';

/// One frame from the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// First of every link: the stream's epoch (drawn once by the relay:
    /// every process reading this pane's stream counts in it), where this
    /// link's data starts, and the relay's end now.
    Hello {
        /// The wire version ([`VERSION`]).
        version: u64,
        /// The stream's epoch.
        epoch: u64,
        /// The offset of the first data byte this link gets.
        start: u64,
        /// Whether the stream's byte 0 is its program's first (the relay
        /// started with the server), not a later one (a relay started on a
        /// running pane).
        first: bool,
    },
    /// The pane's bytes, continuing the link's stream.
    Data(Bytes),
    /// The link fell further behind than the relay holds: the bytes up
    /// to `to` are lost to it, and data continues at `to`.
    Gap {
        /// Where data continues.
        to: u64,
    },
    /// Answers [`Request::Sync`]: every byte the relay had read from the
    /// pane when it was asked (`total` of them) came before this frame.
    Synced {
        /// The relay's end when it answered.
        total: u64,
    },
    /// The pane's pipe closed (the pane or its server is gone, or someone
    /// replaced the pipe): nothing follows.
    End {
        /// The stream's last offset.
        total: u64,
    },
    /// Answers [`Request::Keep`]: the relay writes the stream to the kept
    /// history from stream offset `from` on ([`NOT_KEPT`]: it does not).
    /// A relay of an older engine closes the link instead.
    Kept {
        /// The first stream offset kept, or [`NOT_KEPT`].
        from: u64,
    },
    /// Answers [`Request::Watch`], before its [`Frame::Synced`]: the relay
    /// holds a pidfd on `pid` and will send [`Frame::Ended`] once it ended
    /// (at once, if it had). A relay that cannot (an older one, or no
    /// pidfd) sends only the `Synced`.
    Watching {
        /// The process watched.
        pid: u32,
    },
    /// The process `pid`, watched for this link, ended: the pane's program
    /// (its wrapper) is gone, though the pane and its pipe may stay
    /// (`remain-on-exit`).
    Ended {
        /// The process that ended.
        pid: u32,
    },
}

/// One request from a linked process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Where the link's data should start: `offset` of stream `epoch`
    /// (another epoch, or an offset the relay no longer or not yet holds,
    /// starts at the oldest byte held; [`OLDEST`] asks for that).
    From {
        /// The epoch `offset` counts in (0: none known).
        epoch: u64,
        /// The first byte wanted.
        offset: u64,
    },
    /// Asks for a [`Frame::Synced`] once everything read so far is sent.
    Sync,
    /// A [`Request::Sync`] that also asks the relay to watch the pane's
    /// process `pid` and tell this link its end ([`Frame::Watching`], then
    /// [`Frame::Ended`]): the process need not hold a pidfd of its own.
    Watch {
        /// The pane's process (`#{pane_pid}`).
        pid: u32,
    },
    /// Asks the relay to write its stream to the kept history its order
    /// file names (`keep.json` in the server directory), from `from` on;
    /// answered by one [`Frame::Kept`]. A relay that keeps already
    /// answers where it began.
    Keep {
        /// The epoch `from` counts in: the relay's own, else not kept.
        epoch: u64,
        /// The first stream offset to keep.
        from: u64,
    },
}

/// The head of a data frame carrying `len` bytes (the bytes follow,
/// written beside it without a copy).
pub(crate) fn data_head(len: usize) -> [u8; HEAD_LEN] {
    head(DATA, len)
}

fn head(kind: u8, len: usize) -> [u8; HEAD_LEN] {
    let len = u32::try_from(len).expect("a frame is at most MAX_DATA bytes");
    let mut out = [0; HEAD_LEN];
    out[0] = kind;
    out[1..].copy_from_slice(&len.to_le_bytes());
    out
}

/// A whole frame other than data (whose bytes are written as they are
/// held), ready to write.
pub(crate) fn encode(frame: &Frame) -> Vec<u8> {
    let words: &[u64] = match frame {
        Frame::Hello {
            version,
            epoch,
            start,
            first,
        } => &[*version, *epoch, *start, u64::from(*first)],
        Frame::Gap { to } => &[*to],
        Frame::Synced { total } | Frame::End { total } => &[*total],
        Frame::Kept { from } => &[*from],
        Frame::Watching { pid } | Frame::Ended { pid } => &[u64::from(*pid)],
        Frame::Data(bytes) => {
            let mut out = data_head(bytes.len()).to_vec();
            out.extend_from_slice(bytes);
            return out;
        }
    };
    let kind = match frame {
        Frame::Hello { .. } => HELLO,
        Frame::Gap { .. } => GAP,
        Frame::Synced { .. } => SYNCED,
        Frame::Kept { .. } => KEPT,
        Frame::Watching { .. } => WATCHING,
        Frame::Ended { .. } => ENDED,
        _ => END,
    };
    let mut out = head(kind, words.len() * 8).to_vec();
    for word in words {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out
}

/// What a frame could not be read as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadFrame(pub(crate) String);

/// Takes the next whole frame off the front of `buf` (bytes read from
/// the relay), leaving a partial one for the next read: `Ok(None)` then.
/// Data is split off `buf` without a copy.
///
/// # Errors
/// A kind this version does not know, a length past [`MAX_DATA`], or a
/// control frame of the wrong size: the link is broken.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, BadFrame> {
    if buf.len() < HEAD_LEN {
        return Ok(None);
    }
    let kind = buf[0];
    let len = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > MAX_DATA {
        return Err(BadFrame(format!("a frame of {len} bytes")));
    }
    if buf.len() < HEAD_LEN + len {
        return Ok(None);
    }
    let want = match kind {
        DATA => None,
        HELLO => Some(32),
        GAP | SYNCED | END | KEPT | WATCHING | ENDED => Some(8),
        other => return Err(BadFrame(format!("an unknown frame kind {other:#04x}"))),
    };
    if want.is_some_and(|want| want != len) {
        return Err(BadFrame(format!(
            "a frame {:?} of {len} bytes",
            char::from(kind)
        )));
    }
    buf.advance(HEAD_LEN);
    let mut body = buf.split_to(len);
    Ok(Some(match kind {
        DATA => Frame::Data(body.freeze()),
        HELLO => Frame::Hello {
            version: body.get_u64_le(),
            epoch: body.get_u64_le(),
            start: body.get_u64_le(),
            first: body.get_u64_le() != 0,
        },
        GAP => Frame::Gap {
            to: body.get_u64_le(),
        },
        SYNCED => Frame::Synced {
            total: body.get_u64_le(),
        },
        KEPT => Frame::Kept {
            from: body.get_u64_le(),
        },
        WATCHING | ENDED => {
            let pid = u32::try_from(body.get_u64_le())
                .map_err(|_| BadFrame(format!("a frame {:?} past any pid", char::from(kind))))?;
            if kind == WATCHING {
                Frame::Watching { pid }
            } else {
                Frame::Ended { pid }
            }
        }
        _ => Frame::End {
            total: body.get_u64_le(),
        },
    }))
}

/// A request, ready to write.
pub(crate) fn encode_request(request: Request) -> [u8; REQUEST_LEN] {
    let (kind, a, b) = match request {
        Request::From { epoch, offset } => (FROM, epoch, offset),
        Request::Sync => (SYNC, 0, 0),
        Request::Watch { pid } => (SYNC, WATCH_TAG, u64::from(pid)),
        Request::Keep { epoch, from } => (KEEP, epoch, from),
    };
    let mut out = [0; REQUEST_LEN];
    out[0] = kind;
    out[1..9].copy_from_slice(&a.to_le_bytes());
    out[9..].copy_from_slice(&b.to_le_bytes());
    out
}

/// Reads one request; `None` for a kind this version does not know.
pub(crate) fn decode_request(bytes: &[u8; REQUEST_LEN]) -> Option<Request> {
    let word = |at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    match bytes[0] {
        FROM => Some(Request::From {
            epoch: word(1),
            offset: word(9),
        }),
        SYNC => Some(match (word(1), u32::try_from(word(9))) {
            (WATCH_TAG, Ok(pid)) if pid > 0 => Request::Watch { pid },
            _ => Request::Sync,
        }),
        KEEP => Some(Request::Keep {
            epoch: word(1),
            from: word(9),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_any_split() {
        let frames = [
            Frame::Hello {
                version: VERSION,
                epoch: 0xdead_beef,
                start: 7,
                first: true,
            },
            Frame::Data(Bytes::from_static(b"hello\r\n")),
            Frame::Data(Bytes::new()),
            Frame::Gap { to: 1 << 40 },
            Frame::Synced { total: 99 },
            Frame::End { total: 100 },
            Frame::Kept { from: 5 },
            Frame::Kept { from: NOT_KEPT },
            Frame::Watching { pid: 42 },
            Frame::Ended { pid: u32::MAX },
        ];
        let wire: Vec<u8> = frames.iter().flat_map(encode).collect();
        for cut in 0..wire.len() {
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                buf.extend_from_slice(part);
                while let Some(frame) = decode(&mut buf).expect("well formed") {
                    got.push(frame);
                }
            }
            assert_eq!(got, frames, "cut at {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn a_broken_frame_is_an_error_not_a_wait() {
        let mut unknown = BytesMut::from(&[b'Z', 0, 0, 0, 0][..]);
        assert!(decode(&mut unknown).is_err());
        let mut huge = BytesMut::from(&head(DATA, MAX_DATA + 1)[..]);
        assert!(decode(&mut huge).is_err());
        let mut short_hello = BytesMut::from(&head(HELLO, 8)[..]);
        short_hello.extend_from_slice(&[0; 8]);
        assert!(decode(&mut short_hello).is_err());
    }

    #[test]
    fn requests_round_trip() {
        for request in [
            Request::From {
                epoch: 3,
                offset: OLDEST,
            },
            Request::Sync,
            Request::Keep { epoch: 9, from: 4 },
            Request::Watch { pid: 1234 },
        ] {
            assert_eq!(decode_request(&encode_request(request)), Some(request));
        }
        assert_eq!(decode_request(&[b'?'; REQUEST_LEN]), None);
    }

    /// A relay of version 1 read a sync by its kind alone, so a watch is a
    /// sync to it (it answers `Synced`, never the new frames); a pid of 0
    /// names nothing to watch.
    #[test]
    fn a_watch_is_a_sync_to_a_relay_that_predates_it() {
        let watch = encode_request(Request::Watch { pid: 77 });
        assert_eq!(watch[0], encode_request(Request::Sync)[0]);
        let mut nothing = watch;
        nothing[9..].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(decode_request(&nothing), Some(Request::Sync));
        let mut huge = BytesMut::from(&head(ENDED, 8)[..]);
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&mut huge).is_err());
    }
}
