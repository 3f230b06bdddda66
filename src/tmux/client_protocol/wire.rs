//! The bytes of tmux's client protocol, with no I/O: the imsg header, the
//! message numbers and payloads a control client sends (identify, command,
//! exiting) and reads (exit, shutdown, detach, version, file requests).
//!
//! Read from tmux's source, the same in 3.2 through 3.5a (protocol 8):
//! `compat/imsg.h` (`struct imsg_hdr`: type u32, len u16, flags u16,
//! peerid u32, pid u32, native byte order; `len` counts the header;
//! `IMSGF_HASFD` in `flags` when a descriptor rides with the message;
//! `MAX_IMSGSIZE` 16384), `tmux-protocol.h` (`PROTOCOL_VERSION` 8 carried
//! in `peerid`; `enum msgtype`; `struct msg_command` is an `int argc`
//! followed by the packed argv), `tmux.h` (the `CLIENT_*` flags) and
//! `client.c` (`client_send_identify`, `client_dispatch_wait`,
//! `client_exit_message`). `proc_send` composes with pid -1, so the header
//! pid is all ones.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// `PROTOCOL_VERSION` of tmux 3.2 to 3.5a (`tmux-protocol.h`).
pub(crate) const PROTOCOL_VERSION: u32 = 8;
/// `sizeof(struct imsg_hdr)`.
pub(crate) const HEADER_LEN: usize = 16;
/// `MAX_IMSGSIZE`: the largest message, header included.
pub(crate) const MAX_MESSAGE: usize = 16384;
/// `IMSGF_HASFD`.
const HAS_FD: u16 = 1;

/// Message numbers (`enum msgtype` in `tmux-protocol.h`).
#[allow(missing_docs)]
pub(crate) mod msg {
    pub const VERSION: u32 = 12;
    pub const IDENTIFY_FLAGS: u32 = 100;
    pub const IDENTIFY_TERM: u32 = 101;
    pub const IDENTIFY_TTYNAME: u32 = 102;
    pub const IDENTIFY_STDIN: u32 = 104;
    pub const IDENTIFY_ENVIRON: u32 = 105;
    pub const IDENTIFY_DONE: u32 = 106;
    pub const IDENTIFY_CLIENTPID: u32 = 107;
    pub const IDENTIFY_CWD: u32 = 108;
    pub const IDENTIFY_FEATURES: u32 = 109;
    pub const IDENTIFY_STDOUT: u32 = 110;
    pub const IDENTIFY_LONGFLAGS: u32 = 111;
    pub const COMMAND: u32 = 200;
    pub const DETACH: u32 = 201;
    pub const DETACHKILL: u32 = 202;
    pub const EXIT: u32 = 203;
    pub const EXITED: u32 = 204;
    pub const EXITING: u32 = 205;
    pub const READY: u32 = 207;
    pub const SHUTDOWN: u32 = 210;
    pub const OLDSTDERR: u32 = 211;
    pub const OLDSTDIN: u32 = 212;
    pub const OLDSTDOUT: u32 = 213;
    pub const FLAGS: u32 = 218;
    pub const READ_OPEN: u32 = 300;
    pub const READ_DONE: u32 = 302;
    pub const WRITE_OPEN: u32 = 303;
    pub const WRITE_READY: u32 = 305;
}

/// `CLIENT_*` flags (`tmux.h`) that `tmux -u -N -C attach-session` sends.
pub(crate) mod flags {
    /// `-N`.
    pub const NOSTARTSERVER: u64 = 0x1000;
    /// `-C`.
    pub const CONTROL: u64 = 0x2000;
    /// `-u`.
    pub const UTF8: u64 = 0x10000;
    /// Added by `client_main` for a command flagged `CMD_STARTSERVER`
    /// (`attach-session` and `new-session` are).
    pub const STARTSERVER: u64 = 0x1000_0000;
}

/// The flags of `tmux -u -N -C attach-session ...` (and of
/// `tmux -u -N -C new-session ...`): what the server is told.
pub(crate) const CONTROL_FLAGS: u64 =
    flags::UTF8 | flags::NOSTARTSERVER | flags::CONTROL | flags::STARTSERVER;

/// One message to send: its bytes, and whether the data socket's
/// descriptor rides with it (`MSG_IDENTIFY_STDIN`, `MSG_IDENTIFY_STDOUT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub(crate) bytes: Vec<u8>,
    pub(crate) with_fd: bool,
}

/// Encodes one message as `proc_send` does: the header (peerid the
/// protocol version, pid -1) and the payload. `None` when it would pass
/// [`MAX_MESSAGE`].
pub(crate) fn encode(kind: u32, payload: &[u8], with_fd: bool) -> Option<Outgoing> {
    let len = HEADER_LEN + payload.len();
    let len16 = u16::try_from(len)
        .ok()
        .filter(|&l| usize::from(l) <= MAX_MESSAGE)?;
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&kind.to_ne_bytes());
    bytes.extend_from_slice(&len16.to_ne_bytes());
    bytes.extend_from_slice(&(if with_fd { HAS_FD } else { 0 }).to_ne_bytes());
    bytes.extend_from_slice(&PROTOCOL_VERSION.to_ne_bytes());
    bytes.extend_from_slice(&u32::MAX.to_ne_bytes());
    bytes.extend_from_slice(payload);
    Some(Outgoing { bytes, with_fd })
}

/// What the identify sequence tells the server about the client.
#[derive(Debug, Clone)]
pub(crate) struct Identity<'a> {
    /// `$TERM`, or empty (the server reads that as `unknown`).
    pub(crate) term: &'a [u8],
    /// The working directory.
    pub(crate) cwd: &'a [u8],
    /// The client's pid (`#{client_pid}`, its name `client-PID`).
    pub(crate) pid: i32,
    /// `NAME=VALUE` strings, as `environ` holds them.
    pub(crate) environ: Vec<&'a [u8]>,
}

/// A string payload: the bytes and their terminating NUL.
fn cstr(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.extend_from_slice(bytes);
    out.push(0);
    out
}

/// The identify sequence `client_send_identify` sends for a control client
/// whose stdin is not a terminal (no ttyname, no terminfo); the two
/// descriptor messages carry the data socket. A string with a NUL inside is
/// cut there, as C reads it; an environment string past the message limit
/// is skipped, as tmux skips it.
///
/// Not in tmux's order: the flags come last, beside `MSG_IDENTIFY_DONE`,
/// after both descriptors. The server reads a client's socket once an
/// event-loop turn, and a read ends after a descriptor's message (the
/// kernel never reads past a message carrying descriptors), so tmux's
/// order (flags first) leaves a client flagged `CLIENT_CONTROL` for two
/// turns before `MSG_IDENTIFY_DONE` gives it its control state
/// (`control_start`). A notification in between (`%sessions-changed`,
/// `%client-detached`: control-notify.c writes to every `CLIENT_CONTROL`
/// client) is `control_write` on a NULL state, and tmux before 3.7
/// segfaults (fixed by tmux e5a2a25f, GitHub issue 4980).
/// It took a server that was stopped while a client connected and went
/// away: on `SIGCONT` it read that client's identify beside another
/// client's attach, and died. Here the flags and `MSG_IDENTIFY_DONE` are
/// one small write read whole in one turn (the read before it ended at the
/// second descriptor); the server accepts identify messages in any order
/// before `MSG_IDENTIFY_DONE` (`server_client_dispatch_identify`).
pub(crate) fn identify(who: &Identity<'_>) -> Vec<Outgoing> {
    let until_nul =
        |s: &'_ [u8]| -> Vec<u8> { cstr(s.split(|&b| b == 0).next().unwrap_or_default()) };
    // Every fixed-size payload fits; only environ strings can be too long.
    let fixed = |kind, payload: &[u8], fd| encode(kind, payload, fd).into_iter();
    let flags32 = (CONTROL_FLAGS as u32 as i32).to_ne_bytes();
    let mut out: Vec<Outgoing> = Vec::new();
    out.extend(fixed(msg::IDENTIFY_TERM, &until_nul(who.term), false));
    out.extend(fixed(msg::IDENTIFY_FEATURES, &0i32.to_ne_bytes(), false));
    out.extend(fixed(msg::IDENTIFY_TTYNAME, b"\0", false));
    out.extend(fixed(msg::IDENTIFY_CWD, &until_nul(who.cwd), false));
    out.extend(fixed(
        msg::IDENTIFY_CLIENTPID,
        &who.pid.to_ne_bytes(),
        false,
    ));
    for var in &who.environ {
        out.extend(encode(msg::IDENTIFY_ENVIRON, &until_nul(var), false));
    }
    out.extend(fixed(msg::IDENTIFY_STDIN, &[], true));
    out.extend(fixed(msg::IDENTIFY_STDOUT, &[], true));
    // From here on one write: a control client's flags and its control
    // state in the same read of the server (see above).
    out.extend(fixed(msg::IDENTIFY_FLAGS, &flags32, false));
    out.extend(fixed(
        msg::IDENTIFY_LONGFLAGS,
        &CONTROL_FLAGS.to_ne_bytes(),
        false,
    ));
    out.extend(fixed(msg::IDENTIFY_DONE, &[], false));
    out
}

/// `MSG_COMMAND` with `argv` (`struct msg_command`, then each argument and
/// its NUL). `None` when it passes the message limit ("command too long").
pub(crate) fn command<S: AsRef<OsStr>>(argv: &[S]) -> Option<Outgoing> {
    let argc = i32::try_from(argv.len()).ok()?;
    let mut payload = argc.to_ne_bytes().to_vec();
    for arg in argv {
        payload.extend_from_slice(&cstr(arg.as_ref().as_bytes()));
    }
    encode(msg::COMMAND, &payload, false)
}

/// A message read from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub(crate) kind: u32,
    /// The low byte of `peerid`: the sender's protocol version.
    pub(crate) version: u32,
    pub(crate) payload: Vec<u8>,
}

/// Why a stream of messages is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) String);

/// Takes every whole message off the front of `buf`; the rest (a message
/// still arriving) stays.
///
/// # Errors
/// A header whose length is shorter than a header or past the limit.
pub(crate) fn decode(buf: &mut Vec<u8>) -> Result<Vec<Incoming>, Malformed> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(header) = buf.get(at..at + HEADER_LEN) {
        let word =
            |i: usize| u32::from_ne_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let len = usize::from(u16::from_ne_bytes([header[4], header[5]]));
        if !(HEADER_LEN..=MAX_MESSAGE).contains(&len) {
            return Err(Malformed(format!("a message of {len} bytes")));
        }
        let Some(payload) = buf.get(at + HEADER_LEN..at + len) else {
            break;
        };
        out.push(Incoming {
            kind: word(0),
            version: word(8) & 0xff,
            payload: payload.to_vec(),
        });
        at += len;
    }
    buf.drain(..at);
    Ok(out)
}

/// The reason part of an exit message (`MSG_EXIT`: an int return value,
/// then optionally the message and its NUL), as `client_dispatch_exit_message`
/// reads it: `None` for no message.
pub(crate) fn exit_message(payload: &[u8]) -> Option<String> {
    let text = payload.get(4..).filter(|t| !t.is_empty())?;
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    Some(String::from_utf8_lossy(text).into_owned())
}

/// The `int stream` that leads a file request's payload (`msg_read_open`,
/// `msg_write_open`).
pub(crate) fn stream_of(payload: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(payload.get(..4)?.try_into().ok()?))
}

/// `MSG_READ_DONE` or `MSG_WRITE_READY` (`struct msg_read_done`,
/// `struct msg_write_ready`: stream, error) refusing `stream` with `errno`.
pub(crate) fn refuse_file(kind: u32, stream: i32, errno: i32) -> Option<Outgoing> {
    let mut payload = stream.to_ne_bytes().to_vec();
    payload.extend_from_slice(&errno.to_ne_bytes());
    encode(kind, &payload, false)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
