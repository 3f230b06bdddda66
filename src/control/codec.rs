//! Frames the `tmux -C` byte stream into lines and folds reply blocks.
//!
//! [`ControlCodec`] is a `tokio_util` [`Decoder`]: it finds line ends with
//! `memchr`, enforces a maximum line length, hands each line to
//! [`parse_line`](super::parse_line) and folds `%begin`..`%end`/`%error` into
//! one [`Reply`]. It is sans-IO: bytes in, [`Event`]s out. It never fails the
//! stream: a line it cannot read becomes [`Event::Malformed`] and decoding
//! goes on, because one odd line must not take a whole terminal down.

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

use super::parse::{parse_guard, parse_line_into};
use super::{Event, Guard, GuardKind, Line, Notification, ParseError, ParseErrorKind, Reply};

/// The default longest line: far above anything tmux writes (an `%output`
/// line holds at most a few KiB), low enough to bound memory.
pub const DEFAULT_MAX_LINE_LENGTH: usize = 4 << 20;

/// The default most body lines of one reply block: far above a whole
/// default scrollback (`capture-pane -S -` of 10 000 lines), low enough that
/// a block that never ends cannot exhaust memory.
pub(crate) const DEFAULT_MAX_BLOCK_LINES: usize = 1 << 18;
/// The default most bytes of one reply block, each line counted with its
/// bookkeeping (see [`ControlCodec::with_block_limits`]).
pub(crate) const DEFAULT_MAX_BLOCK_BYTES: usize = 32 << 20;
/// What one kept line costs beyond its bytes: its `Bytes` handle in the
/// block's `Vec`. Counted so that many tiny lines are bounded too.
const LINE_OVERHEAD: usize = std::mem::size_of::<Bytes>();

/// `tmux -CC` starts its output with this DCS (docs/control-mode.md, "Starting").
const DCS_START: &[u8] = b"\x1bP1000p";
/// ...and ends it with ST, after the `%exit` line.
const DCS_END: &[u8] = b"\x1b\\";
/// How much of an over-long line is kept to show in its error.
const TOO_LONG_PREFIX: usize = 128;

/// The control-mode decoder: bytes from `tmux -C` (or `-CC`) to [`Event`]s.
///
/// - Lines end at `\n`; a `\r` before it is kept in `-C` streams (tmux keeps
///   it too) and dropped in `-CC` streams.
/// - A `-CC` stream is recognised by its leading `ESC P 1000p`, which is
///   stripped, as is the `ESC \` that ends it.
/// - Inside a reply block only a guard with the block's own
///   `TIME NUMBER FLAGS` closes it; every other line is body, even one that
///   starts with `%` (`capture-pane` output can). `%pause`, `%continue` and
///   `%message` lines inside a block are also yielded as notifications, as
///   tmux writes them synchronously inside `refresh-client` blocks.
/// - A line longer than the limit is dropped and reported once as
///   [`ParseErrorKind::LineTooLong`]; memory stays bounded by the limit.
/// - A reply block over its limit in lines or bytes (see
///   [`with_block_limits`](Self::with_block_limits)) keeps none of its lines:
///   when its closing guard comes, it yields one
///   [`ParseErrorKind::BlockTooLarge`] instead of the [`Reply`] (so a client
///   can fail the command it answers and stay in step), and decoding goes on
///   with the next line. Memory stays bounded by the two limits.
///
/// Output data and reply lines are `Bytes` that share the read buffer (or,
/// for unescaped output, a 16 KiB chunk shared by several lines): holding
/// one keeps its buffer alive. Copy what you keep for long.
#[derive(Debug)]
pub struct ControlCodec {
    max_line: usize,
    max_block_lines: usize,
    max_block_bytes: usize,
    /// Bytes at the front of the buffer already searched for `\n`, so a
    /// partial line is not searched again when more data arrives.
    scanned: usize,
    /// Set while the rest of an over-long line is being thrown away.
    skipping: Option<Skipping>,
    framing: Framing,
    block: Option<OpenBlock>,
    /// Where unescaped `%output` data is written; see `parse_line_into`.
    scratch: BytesMut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// At the start of the stream (or after a `-CC` ST): not yet known.
    Detect,
    /// `tmux -C`: plain `\n` lines.
    Plain,
    /// `tmux -CC`: `\r\n` lines inside a DCS.
    Dcs,
}

#[derive(Debug)]
struct Skipping {
    /// Bytes of the line seen so far.
    len: usize,
    /// Its start, for the error.
    prefix: Bytes,
}

#[derive(Debug)]
struct OpenBlock {
    begin: Guard,
    begin_line: Bytes,
    /// The body; once `over` is set, only the last line (so a `%exit` that
    /// cut the block short is still seen).
    lines: Vec<Bytes>,
    /// Body lines and their cost so far, kept or not.
    count: usize,
    bytes: usize,
    /// Set once the block went over a limit: its lines are being dropped.
    over: bool,
}

impl Default for ControlCodec {
    fn default() -> Self {
        Self::with_max_line_length(DEFAULT_MAX_LINE_LENGTH)
    }
}

impl ControlCodec {
    /// A codec with the default line limit ([`DEFAULT_MAX_LINE_LENGTH`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A codec that rejects lines longer than `max` bytes (before their `\n`;
    /// a `-CC` line's `\r` counts).
    pub fn with_max_line_length(max: usize) -> Self {
        ControlCodec {
            max_line: max,
            max_block_lines: DEFAULT_MAX_BLOCK_LINES,
            max_block_bytes: DEFAULT_MAX_BLOCK_BYTES,
            scanned: 0,
            skipping: None,
            framing: Framing::Detect,
            block: None,
            scratch: BytesMut::new(),
        }
    }

    /// Lets go of the buffer `%output` data is unescaped into, when the
    /// reader has nothing left to decode: an idle connection then holds no
    /// chunk of it (the next escaped line makes a new one). The data
    /// already handed out keeps its own part.
    pub fn release_scratch(&mut self) {
        if self.scratch.is_empty() {
            self.scratch = BytesMut::new();
        }
    }

    /// Sets the largest reply block kept: at most `lines` body lines and
    /// `bytes` bytes, each line counted as its length plus the size of its
    /// `Bytes` handle (defaults `DEFAULT_MAX_BLOCK_LINES`,
    /// `DEFAULT_MAX_BLOCK_BYTES`). A larger block is reported as
    /// [`ParseErrorKind::BlockTooLarge`].
    #[must_use]
    pub fn with_block_limits(mut self, lines: usize, bytes: usize) -> Self {
        self.max_block_lines = lines;
        self.max_block_bytes = bytes;
        self
    }

    /// The longest line accepted, in bytes.
    pub fn max_line_length(&self) -> usize {
        self.max_line
    }

    /// True while a `%begin` has been read and its `%end`/`%error` not yet.
    pub fn in_block(&self) -> bool {
        self.block.is_some()
    }

    /// Handles the stream's framing prefix and suffix. Returns false when
    /// more bytes are needed to tell.
    fn frame_markers(&mut self, src: &mut BytesMut) -> bool {
        // A loop, not recursion: a hostile stream may repeat DCS/ST pairs.
        loop {
            if self.framing == Framing::Detect {
                if src.len() < DCS_START.len() && DCS_START.starts_with(src) {
                    return false;
                }
                if src.starts_with(DCS_START) {
                    src.advance(DCS_START.len());
                    self.framing = Framing::Dcs;
                } else {
                    self.framing = Framing::Plain;
                }
            }
            // ST only ever comes at the start of a line, after `%exit\r\n`;
            // inside a reply block a line starting with ST is body text
            // (`capture-pane -e`), unless `%exit` cut the block short.
            let st_allowed = self
                .block
                .as_ref()
                .is_none_or(|b| b.lines.last().is_some_and(|l| l.starts_with(b"%exit")));
            if self.framing != Framing::Dcs || self.skipping.is_some() || !st_allowed {
                return true;
            }
            if src.as_ref() == &DCS_END[..1] {
                return false;
            }
            if !src.starts_with(DCS_END) {
                return true;
            }
            src.advance(DCS_END.len());
            self.scanned = 0;
            // Whatever follows is no longer tmux; a new DCS may start.
            self.framing = Framing::Detect;
        }
    }

    /// One whole line (without `\n`, `\r` already stripped for `-CC`).
    fn line(&mut self, line: Bytes) -> Option<Event> {
        if let Some(block) = &mut self.block {
            let b: &[u8] = &line;
            if (b.starts_with(b"%end ") || b.starts_with(b"%error "))
                && let Some(end) = parse_guard(b).filter(|g| block.begin.closes(g))
            {
                let block = self.block.take()?;
                if block.over {
                    return Some(Event::Malformed(ParseError::new(
                        ParseErrorKind::BlockTooLarge {
                            lines: block.count,
                            bytes: block.bytes,
                        },
                        block.begin_line,
                    )));
                }
                return Some(Event::Reply(Reply {
                    time: block.begin.time,
                    number: block.begin.number,
                    flags: block.begin.flags,
                    ok: end.kind == GuardKind::End,
                    lines: block.lines,
                }));
            }
            // tmux writes these synchronously inside the block of the
            // command that caused them (docs/control-mode.md, "Notifications
            // inside a block"); the client needs them as events, and the
            // body keeps them too.
            let surfaced = if b.starts_with(b"%pause ")
                || b.starts_with(b"%continue ")
                || b.starts_with(b"%message ")
            {
                match parse_line_into(&line, &mut self.scratch) {
                    Ok(Line::Notification(n)) => Some(Event::Notification(n)),
                    _ => None,
                }
            } else {
                None
            };
            block.count += 1;
            block.bytes = block.bytes.saturating_add(line.len() + LINE_OVERHEAD);
            if block.over {
                block.lines.clear();
            } else if block.count > self.max_block_lines || block.bytes > self.max_block_bytes {
                // Free the body at once; from here keep only the newest line.
                block.over = true;
                block.lines = Vec::new();
            }
            block.lines.push(line);
            return surfaced;
        }
        match parse_line_into(&line, &mut self.scratch) {
            Ok(Line::Notification(n)) => Some(Event::Notification(n)),
            Ok(Line::Text(t)) => Some(Event::Text(t)),
            Ok(Line::Guard(g)) if g.kind == GuardKind::Begin => {
                self.block = Some(OpenBlock {
                    begin: g,
                    begin_line: line,
                    lines: Vec::new(),
                    count: 0,
                    bytes: 0,
                    over: false,
                });
                None
            }
            Ok(Line::Guard(_)) => Some(Event::Malformed(ParseError::new(
                ParseErrorKind::UnmatchedGuard,
                line,
            ))),
            Err(e) => Some(Event::Malformed(e)),
        }
    }

    /// How much of an over-long line its error keeps. Every path that finds
    /// one holds more than `max_line` bytes of it, so the prefix does not
    /// depend on how the stream was chunked.
    fn prefix_len(&self) -> usize {
        TOO_LONG_PREFIX.min(self.max_line.saturating_add(1))
    }

    /// The error for an over-long line whose start was `prefix`.
    fn too_long(len: usize, prefix: Bytes) -> Event {
        Event::Malformed(ParseError::new(ParseErrorKind::LineTooLong { len }, prefix))
    }
}

impl Decoder for ControlCodec {
    type Item = Event;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Event>, std::io::Error> {
        loop {
            if !self.frame_markers(src) {
                return Ok(None);
            }
            let Some(pos) = memchr::memchr(b'\n', &src[self.scanned..]) else {
                if let Some(skip) = &mut self.skipping {
                    skip.len += src.len();
                    src.clear();
                    self.scanned = 0;
                } else if src.len() > self.max_line {
                    // Drop what we have now so memory stays bounded; the
                    // error is reported once, when the line ends.
                    self.skipping = Some(Skipping {
                        len: src.len(),
                        prefix: Bytes::copy_from_slice(&src[..self.prefix_len()]),
                    });
                    src.clear();
                    self.scanned = 0;
                } else {
                    self.scanned = src.len();
                }
                return Ok(None);
            };
            let end = self.scanned + pos;
            self.scanned = 0;
            if let Some(skip) = self.skipping.take() {
                src.advance(end + 1);
                return Ok(Some(Self::too_long(skip.len + end, skip.prefix)));
            }
            if end > self.max_line {
                let prefix = Bytes::copy_from_slice(&src[..self.prefix_len()]);
                src.advance(end + 1);
                return Ok(Some(Self::too_long(end, prefix)));
            }
            let mut line = src.split_to(end + 1).freeze();
            let mut len = end;
            if self.framing == Framing::Dcs && line[..len].ends_with(b"\r") {
                len -= 1;
            }
            line.truncate(len);
            if let Some(event) = self.line(line) {
                return Ok(Some(event));
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Event>, std::io::Error> {
        if let Some(event) = self.decode(src)? {
            return Ok(Some(event));
        }
        // No more input: a half-seen DCS prefix is just text.
        if self.framing == Framing::Detect {
            self.framing = Framing::Plain;
        }
        if let Some(skip) = self.skipping.take() {
            let len = skip.len + src.len();
            src.clear();
            return Ok(Some(Self::too_long(len, skip.prefix)));
        }
        self.scanned = 0;
        if !src.is_empty() {
            let len = src.len();
            if len > self.max_line {
                let prefix = Bytes::copy_from_slice(&src[..self.prefix_len()]);
                src.clear();
                return Ok(Some(Self::too_long(len, prefix)));
            }
            let mut line = src.split_to(len).freeze();
            if self.framing == Framing::Dcs && line.ends_with(b"\r") {
                line.truncate(len - 1);
            }
            if let Some(event) = self.line(line) {
                return Ok(Some(event));
            }
        }
        let Some(mut block) = self.block.take() else {
            return Ok(None);
        };
        // The tmux client prints `%exit` itself when the server dies in the
        // middle of a reply, so the block never closes; that last line is
        // the real news (docs/control-mode.md, "How a client ends").
        if let Some(last) = block.lines.last()
            && last.starts_with(b"%exit")
            && matches!(last.get(5), None | Some(b' '))
            && let Ok(Line::Notification(exit @ Notification::Exit { .. })) =
                parse_line_into(last, &mut self.scratch)
        {
            block.lines.pop();
            return Ok(Some(Event::Notification(exit)));
        }
        Ok(Some(Event::Malformed(ParseError::new(
            ParseErrorKind::UnterminatedBlock { lines: block.count },
            block.begin_line,
        ))))
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
