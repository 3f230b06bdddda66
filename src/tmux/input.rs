//! Pane input as tmux commands: how one write of arbitrary bytes becomes a
//! sequence of commands, piece by piece, so that nobody has to build them
//! all at once. This module builds text; it runs nothing and writes no
//! file (the control client does, see
//! [`ControlClient::send_bytes`](crate::control::client::ControlClient::send_bytes)).
//!
//! tmux 3.3a has three ways to put bytes into a pane's input, measured
//! against each other by `cargo bench --bench paste`:
//!
//! - `send-keys -H 68 69 ...`: one argument per byte, exact, but tmux's
//!   parser pays per argument (0.2-0.4 MB/s whatever the chunk size, slower
//!   with bigger chunks) and fails at 10 000 arguments;
//! - `set-buffer DATA` + `paste-buffer`: DATA is a C string, so NUL cannot
//!   be carried, and quoting triples binary input;
//! - `load-buffer FILE` + `paste-buffer -r`: the file's bytes as they are,
//!   NUL included, tens of MB/s: what a paste uses.
//!
//! So a short write (a keystroke) is one `send-keys -H` line and anything
//! longer goes in [`PASTE_CHUNK`] pieces through a named buffer:
//! `load-buffer -b NAME FILE`, then `paste-buffer -r -d -b NAME -t PANE`.
//! `-r` keeps LF as LF (without it tmux turns every LF into CR); no `-p`,
//! because bracketed-paste markers would be bytes the caller did not send;
//! `-d` deletes the buffer once pasted.
//!
//! tmux 3.3a's `paste-buffer` into a dead pane (`remain-on-exit`) writes to
//! the pane's freed event and crashes the server, and a program may exit
//! between any two commands. So the paste runs under
//! `if-shell -F -t PANE '#{pane_dead}'`, whose branch tmux runs in the same
//! command-queue pass as the test, with no event (no pane exit) in between:
//! a dead pane gets `delete-buffer` instead. In control mode the `if-shell`
//! answers with its own block and then, only when it succeeded, the branch
//! answers with a second one ([`paste_buffer_exact`]).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[cfg(doc)]
use super::command::send_keys_hex_chunk;
use super::command::{MAX_HEX_CHUNK, TmuxCommand, send_keys_hex_line};
use crate::vocab::PaneId;

/// Writes of at most this many bytes are typed as one `send-keys -H`
/// command (no file, one reply): keystrokes cost what they always did.
pub(crate) const KEYS_MAX: usize = 64;

/// Bytes per buffer of a paste: big enough that the per-command cost
/// vanishes, small enough that another command of the same client waits
/// for only a few of them (see `MAX_PIECES_IN_FLIGHT` in the control client).
pub const PASTE_CHUNK: usize = 64 * 1024;

/// One piece of a write, in the order the pane receives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Typed with one `send-keys -H` ([`send_keys_hex_chunk`]).
    Keys(&'a [u8]),
    /// Loaded into a buffer from a file and pasted ([`load_buffer`],
    /// [`paste_buffer_exact`]).
    Paste(&'a [u8]),
}

/// The pieces of one write, lazily: one [`Piece::Keys`] for a write of up
/// to [`KEYS_MAX`] bytes, otherwise [`Piece::Paste`] pieces of at most
/// `chunk` bytes ([`PASTE_CHUNK`] when 0). No bytes, no pieces.
pub(crate) fn pieces(bytes: &[u8], chunk: usize) -> impl Iterator<Item = Piece<'_>> {
    let chunk = if chunk == 0 { PASTE_CHUNK } else { chunk };
    let keys = bytes.len() <= KEYS_MAX.min(MAX_HEX_CHUNK);
    // `chunks` refuses 0, and an empty write has no pieces at all.
    let size = if keys { bytes.len().max(1) } else { chunk };
    bytes.chunks(size).map(move |part| {
        if keys {
            Piece::Keys(part)
        } else {
            Piece::Paste(part)
        }
    })
}

/// The command line typing a [`Piece::Keys`] into `pane` (a
/// [`send_keys_hex_chunk`], built straight as its line).
pub(crate) fn keys_line(pane: PaneId, bytes: &[u8]) -> String {
    send_keys_hex_line(pane, bytes)
}

/// `load-buffer -b BUFFER -- PATH`: the file's bytes, exactly, into the
/// named buffer. tmux format-expands the path, so `#` is doubled.
pub fn load_buffer(buffer: &str, path: &Path) -> TmuxCommand {
    TmuxCommand::new("load-buffer")
        .opt("-b", buffer)
        .format_arg(path.as_os_str().as_bytes())
}

/// Pastes buffer `buffer` into `pane` byte for byte and deletes it; a dead
/// pane only gets the buffer deleted (see the module docs for why):
///
/// ```text
/// if-shell -F -t PANE '#{pane_dead}' 'delete-buffer -b B' 'paste-buffer -r -d -b B -t PANE'
/// ```
///
/// The reply comes in two blocks: the `if-shell`'s, then, if that one
/// succeeded, the branch's. If the `if-shell` fails (no such pane) no
/// branch runs and its block is the only one.
pub fn paste_buffer_exact(pane: PaneId, buffer: &str) -> TmuxCommand {
    let delete = TmuxCommand::new("delete-buffer").opt("-b", buffer);
    let paste = TmuxCommand::new("paste-buffer")
        .flag("-r")
        .flag("-d")
        .opt("-b", buffer)
        .target(pane);
    // Each branch is one command line that tmux parses again: quoting its
    // line once more (`arg`) hands it over exactly.
    TmuxCommand::new("if-shell")
        .flag("-F")
        .target(pane)
        .arg("#{pane_dead}")
        .arg(delete.line())
        .arg(paste.line())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(bytes: &[u8], chunk: usize) -> Vec<(bool, usize)> {
        pieces(bytes, chunk)
            .map(|piece| match piece {
                Piece::Keys(b) => (true, b.len()),
                Piece::Paste(b) => (false, b.len()),
            })
            .collect()
    }

    #[test]
    fn pieces_split_short_writes_into_keys_and_long_ones_into_pastes() {
        let data: Vec<u8> = (0..=255u8).cycle().take(3 * PASTE_CHUNK + 5).collect();
        assert!(sizes(&[], 0).is_empty());
        assert_eq!(sizes(b"a", 0), [(true, 1)]);
        assert_eq!(sizes(&data[..KEYS_MAX], 0), [(true, KEYS_MAX)]);
        assert_eq!(sizes(&data[..KEYS_MAX + 1], 0), [(false, KEYS_MAX + 1)]);
        assert_eq!(
            sizes(&data, 0),
            [
                (false, PASTE_CHUNK),
                (false, PASTE_CHUNK),
                (false, PASTE_CHUNK),
                (false, 5)
            ]
        );
        assert_eq!(
            sizes(&data[..1000], 300),
            [(false, 300), (false, 300), (false, 300), (false, 100)]
        );
        // The pieces are the write, in order.
        let joined: Vec<u8> = pieces(&data, 7000)
            .flat_map(|piece| match piece {
                Piece::Keys(b) | Piece::Paste(b) => b.to_vec(),
            })
            .collect();
        assert_eq!(joined, data);
    }

    #[test]
    fn keys_are_exact_hex() {
        let line = keys_line(PaneId(2), b"\0\r\n\x1b[Aq\xff");
        assert_eq!(line, r#"send-keys -t "%2" -H -- 00 0d 0a 1b 5b 41 71 ff"#);
        let all: Vec<u8> = (0..=255u8).collect();
        let line = keys_line(PaneId(0), &all);
        let hex: Vec<&str> = line
            .strip_prefix(r#"send-keys -t "%0" -H -- "#)
            .expect("prefix")
            .split(' ')
            .collect();
        assert_eq!(hex.len(), 256);
        for (byte, word) in all.iter().zip(&hex) {
            assert_eq!(u8::from_str_radix(word, 16).expect("hex"), *byte);
            assert_eq!(word.len(), 2);
        }
    }

    #[test]
    fn buffer_commands() {
        let load = load_buffer("tmux-engine-in-1", Path::new("/run/x#1/paste-2"));
        assert_eq!(
            load.line(),
            r#"load-buffer -b "tmux-engine-in-1" -- "/run/x\#\#1/paste-2""#
        );
        let paste = paste_buffer_exact(PaneId(4), "tmux-engine-in-1");
        assert_eq!(
            paste.line(),
            concat!(
                r#"if-shell -F -t "%4" -- "\#\{pane_dead\}" "#,
                r#""delete-buffer -b \"tmux-engine-in-1\"" "#,
                r#""paste-buffer -r -d -b \"tmux-engine-in-1\" -t \"%4\"""#
            )
        );
        assert!(paste.checked().is_ok());
    }
}
