//! The resident relay: the one reader of a pane's `pipe-pane`, for as
//! long as the pane lives, that numbers its bytes once and hands them to
//! every engine process linked to the terminal.
//!
//! tmux gives a pane one pipe, and a second `pipe-pane` closes the first
//! (`cmd-pipe-pane.c`), so the process that piped a pane last was the only
//! one that heard it. The relay is that pipe's reader for everyone: each
//! process links to its socket ([`super::STREAM_SOCKET`]) and gets every
//! byte in order, counted in one epoch the relay draws at its start, so a
//! cursor one process hands out means the same bytes in any other.
//!
//! It is a plain poll loop (no runtime, no threads): one idle terminal
//! costs one sleeping process. It never blocks on a link: a link that does
//! not read keeps its place in the held window ([`HELD`]) and, once it
//! falls behind the window, gets a [`Frame::Gap`] and continues at the
//! oldest byte held; tmux's pipe, whose buffer has no bound, is always
//! drained. It also answers the exit handshake (`exit_handshake`): it sees
//! the wrapper's marker after every earlier byte of the program, held here
//! for every link by then.
//!
//! It also keeps the stream on disk when a process asks ([`Request::Keep`]
//! and the [`Keeper`] it was started with): it reads every byte, so the
//! kept history misses none however slow or absent the engine processes
//! are, and is written while no engine process runs at all.
//!
//! It also watches the pane's process for the links that ask
//! ([`Request::Watch`], see [`super::ends`]), so they need no pidfd.
//!
//! It exits when the pipe closes (the pane or its server is gone, or the
//! pipe was replaced) once every link has been sent the end, or after
//! [`LINGER`] for links that stopped reading.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::SendFlags;

use super::Keeper;
use super::ends::{Ends, Watch};
use super::wire::{self, Frame, NOT_KEPT, REQUEST_LEN, Request};
use crate::tmux::exit_handshake::{MarkerScan, acknowledge};

/// The most output held for links that fall behind or join later (a new
/// process replays from the oldest byte held): as much as an engine
/// process keeps of a stream by default. Held in chunks as output
/// arrives, so an idle terminal's relay holds only what it printed.
pub(crate) const HELD: usize = 4 << 20;
/// Reads shorter than this are appended to the newest chunk while it has
/// room, so a window of keystroke echoes is not a million allocations.
const SMALL: usize = 4096;
/// Links at most: engine processes of one host on one terminal.
const MAX_LINKS: usize = 64;
/// How long an ended relay waits for links that stopped reading.
const LINGER: Duration = Duration::from_secs(2);

/// The window of the stream still held, by absolute offset.
#[derive(Default)]
struct Held {
    chunks: VecDeque<(u64, Vec<u8>)>,
    len: usize,
    total: u64,
}

impl Held {
    fn start(&self) -> u64 {
        self.total - self.len as u64
    }

    fn push(&mut self, bytes: &[u8]) {
        match self.chunks.back_mut() {
            Some((_, last)) if last.len() + bytes.len() <= SMALL => last.extend_from_slice(bytes),
            _ => self.chunks.push_back((self.total, bytes.to_vec())),
        }
        self.total += bytes.len() as u64;
        self.len += bytes.len();
        while self.len > HELD {
            let (_, front) = self.chunks.pop_front().expect("held bytes are in chunks");
            self.len -= front.len();
        }
    }

    /// The held bytes from `at` to the end of the chunk holding it.
    fn from(&self, at: u64) -> &[u8] {
        let after = self.chunks.partition_point(|(start, _)| *start <= at);
        let (start, chunk) = &self.chunks[after - 1];
        &chunk[usize::try_from(at - start).expect("inside a chunk")..]
    }
}

/// The relay's keeping of its stream on disk, once a process asked.
struct Keeping<'k> {
    keeper: &'k mut dyn Keeper,
    /// The first stream offset kept, once keeping.
    from: Option<u64>,
    /// The next offset to keep: the keeper is written after the links,
    /// off the echo's path, and never lapped by the held window.
    at: u64,
}

impl Keeping<'_> {
    /// Starts keeping from `from` (or the oldest byte held, when it was
    /// evicted already) and writes what is held from there; the first
    /// offset kept, or [`NOT_KEPT`].
    fn begin(&mut self, dir: &Path, epoch: u64, from: u64, held: &Held) -> u64 {
        if let Some(from) = self.from {
            return from;
        }
        let asked = from.clamp(held.start(), held.total);
        let Ok(first) = self.keeper.start(dir, epoch, from.min(asked), asked) else {
            return NOT_KEPT;
        };
        let first = first.clamp(asked, held.total);
        self.from = Some(first);
        self.at = first;
        self.catch_up(held);
        first
    }

    /// Keeps what is held past the last byte kept.
    fn catch_up(&mut self, held: &Held) {
        if self.from.is_none() {
            return;
        }
        while self.at < held.total {
            let bytes = held.from(self.at);
            self.keeper.write(bytes);
            self.at += bytes.len() as u64;
        }
    }

    /// Keeps what is held, now, if waiting longer could let the held
    /// window pass it.
    fn keep_pace(&mut self, held: &Held) {
        if held.total - self.at > (HELD / 2) as u64 {
            self.catch_up(held);
        }
    }

    fn finish(&mut self, held: &Held) {
        if self.from.is_some() {
            self.catch_up(held);
            self.keeper.finish();
        }
    }
}

/// One linked process.
struct Link {
    socket: UnixStream,
    /// Whether it said where to start (the spawner's link starts at 0).
    started: bool,
    /// The next offset to send.
    at: u64,
    /// Frame bytes written in part (or control frames waiting).
    pending: Vec<u8>,
    request: [u8; REQUEST_LEN],
    request_len: usize,
    sync: bool,
    end_sent: bool,
    broken: bool,
    /// The process whose end it waits for (see [`Ends`]).
    watch: Option<u32>,
}

impl Link {
    fn new(socket: UnixStream) -> Link {
        Link {
            socket,
            started: false,
            at: 0,
            pending: Vec::new(),
            request: [0; REQUEST_LEN],
            request_len: 0,
            sync: false,
            end_sent: false,
            broken: false,
            watch: None,
        }
    }

    fn start(&mut self, epoch: u64, at: u64, first: bool) {
        self.started = true;
        self.at = at;
        self.pending.extend_from_slice(&wire::encode(&Frame::Hello {
            version: wire::VERSION,
            epoch,
            start: at,
            first,
        }));
    }

    /// Whether it has something to write.
    fn wants_out(&self, held: &Held, ended: bool) -> bool {
        !self.pending.is_empty()
            || (self.started && (self.at < held.total || self.sync || (ended && !self.end_sent)))
    }

    /// Writes what it can without blocking.
    fn flush(&mut self, held: &Held, ended: bool) {
        while !self.broken {
            if !self.pending.is_empty() {
                match send(&self.socket, &[IoSlice::new(&self.pending)]) {
                    Ok(n) => {
                        self.pending.drain(..n);
                        if !self.pending.is_empty() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(_) => self.broken = true,
                }
                continue;
            }
            if !self.started {
                return;
            }
            if self.at < held.start() {
                self.at = held.start();
                self.pending = wire::encode(&Frame::Gap { to: self.at });
                continue;
            }
            if self.at == held.total {
                if self.sync {
                    self.sync = false;
                    self.pending = wire::encode(&Frame::Synced { total: held.total });
                } else if ended && !self.end_sent {
                    self.end_sent = true;
                    self.pending = wire::encode(&Frame::End { total: held.total });
                } else {
                    return;
                }
                continue;
            }
            let bytes = held.from(self.at);
            let bytes = &bytes[..bytes.len().min(wire::MAX_DATA)];
            let head = wire::data_head(bytes.len());
            match send(&self.socket, &[IoSlice::new(&head), IoSlice::new(bytes)]) {
                Ok(n) => {
                    self.at += bytes.len() as u64;
                    if n < head.len() + bytes.len() {
                        // The rest of this frame goes first next time.
                        let mut rest = head.to_vec();
                        rest.extend_from_slice(bytes);
                        self.pending = rest.split_off(n);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => self.broken = true,
            }
        }
    }

    /// Reads its requests; `None` once it closed or broke the protocol.
    fn requests(&mut self) -> Option<Vec<Request>> {
        let mut got = Vec::new();
        loop {
            match (&self.socket).read(&mut self.request[self.request_len..]) {
                Ok(0) => return None,
                Ok(n) => {
                    self.request_len += n;
                    if self.request_len == REQUEST_LEN {
                        self.request_len = 0;
                        got.push(wire::decode_request(&self.request)?);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

fn send(socket: &UnixStream, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    loop {
        match rustix::net::sendmsg(
            socket,
            slices,
            &mut rustix::net::SendAncillaryBuffer::default(),
            flags,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Runs the relay of the pane whose pipe is this process's stdin, for
/// the server directory `dir`: binds [`super::STREAM_SOCKET`] there, links
/// the spawner waiting on [`super::RAW_SOCKET`] (if one is) from byte 0,
/// and serves until the pipe closes. `joined`: the pane's program ran
/// before it (its byte 0 is not the program's first).
///
/// # Errors
/// The I/O error that kept it from binding its socket or reading the pipe.
pub fn run(dir: &Path, joined: bool, keeper: &mut dyn Keeper) -> io::Result<()> {
    let pipe = io::stdin();
    let pipe = pipe.as_fd();
    rustix::io::ioctl_fionbio(pipe, true)?;
    let epoch = crate::vocab::stream_epoch();
    let path = dir.join(super::STREAM_SOCKET);
    let listener = bind(&path)?;
    let mine = std::fs::metadata(&path)?.ino();
    let mut held = Held::default();
    let mut keeping = Keeping {
        keeper,
        from: None,
        at: 0,
    };
    let mut links: Vec<Link> = Vec::new();
    let mut ends = Ends::default();
    // The spawner listens before tmux runs this relay: it links from the
    // first byte, before the program can print anything that matters.
    if let Ok(socket) = UnixStream::connect(dir.join(super::RAW_SOCKET)) {
        socket.set_nonblocking(true)?;
        let mut link = Link::new(socket);
        link.start(epoch, 0, !joined);
        links.push(link);
    }
    let mut marker = MarkerScan::default();
    let mut ended: Option<Instant> = None;
    // Read into its spare capacity: the kernel touches only the pages it
    // fills, so a relay that only ever carries echoes keeps one page of it.
    let mut buf: Vec<u8> = Vec::with_capacity(wire::MAX_DATA);
    loop {
        for link in &mut links {
            link.flush(&held, ended.is_some());
        }
        links.retain(|link| !link.broken);
        keeping.catch_up(&held);
        if let Some(since) = ended {
            let done = links.iter().all(|l| l.end_sent && l.pending.is_empty());
            if done || since.elapsed() >= LINGER {
                break;
            }
        }
        let mut fds = Vec::with_capacity(links.len() + 2);
        fds.push(PollFd::from_borrowed_fd(listener.as_fd(), PollFlags::IN));
        let pipe_at = fds.len();
        if ended.is_none() {
            fds.push(PollFd::from_borrowed_fd(pipe, PollFlags::IN));
        }
        let first_end = fds.len();
        fds.extend(
            ends.fds()
                .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
        );
        let first_link = fds.len();
        for link in &links {
            let mut flags = PollFlags::IN;
            if link.wants_out(&held, ended.is_some()) {
                flags |= PollFlags::OUT;
            }
            fds.push(PollFd::from_borrowed_fd(link.socket.as_fd(), flags));
        }
        let wake = ended
            .map(|since| since + LINGER)
            .into_iter()
            .chain(keeping.keeper.due())
            .min();
        let timeout = wake.map(|at| {
            let left = at.saturating_duration_since(Instant::now());
            Timespec::try_from(left).unwrap_or_default()
        });
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let listener_ready = !fds[0].revents().is_empty();
        let pipe_ready = ended.is_none() && !fds[pipe_at].revents().is_empty();
        let ended_pids: Vec<u32> = fds[first_end..first_link]
            .iter()
            .enumerate()
            .filter(|(_, fd)| !fd.revents().is_empty())
            .map(|(at, _)| ends.pid(at))
            .collect();
        let link_ready: Vec<bool> = fds[first_link..]
            .iter()
            .map(|fd| {
                fd.revents()
                    .intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)
            })
            .collect();
        drop(fds);
        for pid in ended_pids {
            for link in links.iter_mut().filter(|link| link.watch == Some(pid)) {
                link.watch = None;
                link.pending
                    .extend_from_slice(&wire::encode(&Frame::Ended { pid }));
            }
        }
        if pipe_ready && !read_pipe(pipe, &mut buf, &mut held, &mut marker, dir, &mut keeping)? {
            ended = Some(Instant::now());
            keeping.finish(&held);
        }
        if keeping
            .keeper
            .due()
            .is_some_and(|due| due <= Instant::now())
        {
            keeping.keeper.tick();
        }
        for (link, ready) in links.iter_mut().zip(link_ready) {
            if !ready {
                continue;
            }
            let Some(requests) = link.requests() else {
                link.broken = true;
                continue;
            };
            for request in requests {
                match request {
                    Request::From {
                        epoch: theirs,
                        offset,
                    } if !link.started => {
                        let inside =
                            theirs == epoch && offset >= held.start() && offset <= held.total;
                        link.start(epoch, if inside { offset } else { held.start() }, !joined);
                    }
                    Request::Sync | Request::Watch { .. } => {
                        // Everything tmux wrote to the pipe by now: whoever
                        // asks learned that the pane died, and tmux calls a
                        // piped pane dead only once its pipe has it all.
                        if let Request::Watch { pid } = request
                            && link.started
                        {
                            watch(&mut ends, link, pid);
                        }
                        if ended.is_none()
                            && !read_pipe(
                                pipe,
                                &mut buf,
                                &mut held,
                                &mut marker,
                                dir,
                                &mut keeping,
                            )?
                        {
                            ended = Some(Instant::now());
                            keeping.finish(&held);
                        }
                        link.sync = true;
                    }
                    Request::Keep {
                        epoch: theirs,
                        from,
                    } => {
                        let kept = if theirs == epoch {
                            let newly = keeping.from.is_none();
                            let kept = keeping.begin(dir, epoch, from, &held);
                            if newly && kept != NOT_KEPT && ended.is_some() {
                                keeping.finish(&held);
                            }
                            kept
                        } else {
                            NOT_KEPT
                        };
                        link.pending
                            .extend_from_slice(&wire::encode(&Frame::Kept { from: kept }));
                    }
                    Request::From { .. } => link.broken = true,
                }
            }
        }
        // A pidfd no link waits on any more (told, or its link gone).
        ends.retain(|pid| links.iter().any(|l| !l.broken && l.watch == Some(pid)));
        if listener_ready {
            while let Ok((socket, _)) = listener.accept() {
                if links.len() >= MAX_LINKS || socket.set_nonblocking(true).is_err() {
                    continue;
                }
                links.push(Link::new(socket));
            }
        }
    }
    // A newer relay (the pipe was replaced) may have bound the name since.
    if std::fs::metadata(&path).is_ok_and(|m| m.ino() == mine) {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// Starts watching `pid` for `link` (ahead of the `Synced` its request
/// also asks for): [`Frame::Watching`], then [`Frame::Ended`] once it ended,
/// at once if it had. A link that cannot be told gets only the `Synced`,
/// as from a relay that predates watches, and keeps its own watch.
fn watch(ends: &mut Ends, link: &mut Link, pid: u32) {
    let found = ends.watch(pid);
    if found == Watch::Unwatchable {
        return;
    }
    link.pending
        .extend_from_slice(&wire::encode(&Frame::Watching { pid }));
    if found == Watch::Gone {
        link.pending
            .extend_from_slice(&wire::encode(&Frame::Ended { pid }));
        link.watch = None;
    } else {
        link.watch = Some(pid);
    }
}

/// Reads what the pipe holds into `held` (and the kept history); false
/// once it closed. The exit marker is acknowledged once read: every
/// earlier byte is held (and kept) by then.
fn read_pipe(
    pipe: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    held: &mut Held,
    marker: &mut MarkerScan,
    dir: &Path,
    keeping: &mut Keeping<'_>,
) -> io::Result<bool> {
    loop {
        buf.clear();
        match rustix::io::read(pipe, rustix::buffer::spare_capacity(&mut *buf)) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                held.push(&buf[..n]);
                keeping.keep_pace(held);
                if marker.feed(&buf[..n]) {
                    *marker = MarkerScan::default();
                    acknowledge(dir);
                }
                if n < buf.capacity() {
                    // Most likely all there is: the links get it now, not
                    // after one more read that finds nothing.
                    return Ok(true);
                }
            }
            Err(rustix::io::Errno::AGAIN) => return Ok(true),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Binds `path` atomically: a temporary name renamed over it, so a
/// process linking never finds the name without a listener behind it.
fn bind(path: &Path) -> io::Result<UnixListener> {
    let mut temporary = PathBuf::from(path);
    temporary.set_extension(format!("{}.new", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary)?;
    listener.set_nonblocking(true)?;
    std::fs::rename(&temporary, path)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_keeps_the_newest_bytes_by_offset_and_merges_small_reads() {
        let mut held = Held::default();
        held.push(b"ab");
        held.push(b"cd");
        assert_eq!(held.chunks.len(), 1, "small reads share a chunk");
        assert_eq!(held.from(1), b"bcd");
        let big = vec![b'x'; SMALL];
        held.push(&big);
        assert_eq!(held.chunks.len(), 2);
        assert_eq!(held.from(4).len(), SMALL);
        assert_eq!(held.total, 4 + SMALL as u64);
        for _ in 0..(HELD / SMALL) {
            held.push(&big);
        }
        assert!(held.len <= HELD);
        assert_eq!(held.start() + held.len as u64, held.total);
        assert_eq!(held.from(held.start()).len(), SMALL);
    }
}
