//! The working directory a program reports in its output: OSC 7,
//! `ESC ] 7 ; file://HOST/PATH` ended by BEL or ST, which the engine's
//! shell integration prints at every prompt (as VTE, iTerm2 and WezTerm
//! read it).
//!
//! It is scanned as the stream is written, so the newest report is known
//! without a round trip and survives the terminal's process (a restart
//! after a reboot starts in it). A sequence cut between two chunks is
//! carried over; one longer than [`MAX_REPORT`] is not a report.

use std::path::PathBuf;

use memchr::memmem;

const INTRO: &[u8] = b"\x1b]7;";

/// The longest report read: `PATH_MAX` and a host name.
pub const MAX_REPORT: usize = 4096 + 256;

/// The newest directory reported, and what is carried between chunks.
#[derive(Debug, Default)]
pub(crate) struct Osc7 {
    /// The newest directory reported by a local host.
    pub(crate) latest: Option<PathBuf>,
    /// A report whose end has not arrived yet (from its intro on), or
    /// the last bytes of a chunk that may start one.
    carry: Vec<u8>,
}

impl Osc7 {
    /// Scans the next chunk of the stream.
    pub(crate) fn scan(&mut self, chunk: &[u8]) {
        if self.carry.is_empty() && memchr::memchr(0x1b, chunk).is_none() {
            return;
        }
        let joined;
        let bytes = if self.carry.is_empty() {
            chunk
        } else {
            self.carry.extend_from_slice(chunk);
            joined = std::mem::take(&mut self.carry);
            &joined[..]
        };
        let mut at = 0;
        while let Some(found) = memmem::find(&bytes[at..], INTRO) {
            let body_start = at + found + INTRO.len();
            let window = &bytes[body_start..bytes.len().min(body_start + MAX_REPORT)];
            match terminator(window) {
                Some((length, terminator_len)) => {
                    if let Some(path) = parse(&window[..length]) {
                        self.latest = Some(path);
                    }
                    at = body_start + length + terminator_len;
                }
                None if window.len() < MAX_REPORT => {
                    self.carry = bytes[at + found..].to_vec();
                    return;
                }
                None => at = body_start,
            }
        }
        // A chunk that ends inside the intro: keep that prefix.
        let tail = &bytes[at..];
        let keep = (1..INTRO.len())
            .rev()
            .find(|&n| tail.len() >= n && INTRO.starts_with(&tail[tail.len() - n..]))
            .unwrap_or(0);
        self.carry = tail[tail.len() - keep..].to_vec();
    }
}

/// Where a report's body ends: its length and its terminator's.
fn terminator(window: &[u8]) -> Option<(usize, usize)> {
    window.iter().enumerate().find_map(|(i, &b)| match b {
        0x07 => Some((i, 1)),
        0x1b if window.get(i + 1) == Some(&b'\\') => Some((i, 2)),
        _ => None,
    })
}

/// The directory of a `file://HOST/PATH` body, percent-decoded, when its
/// host is this machine (empty, `localhost` or the host name): a shell
/// on another machine (over ssh) reports a path that means nothing here.
fn parse(body: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = body.strip_prefix(b"file://")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let host = std::str::from_utf8(&rest[..slash]).ok()?;
    if !is_local(host) {
        return None;
    }
    let path = decode(&rest[slash..]);
    (!path.contains(&0)).then(|| PathBuf::from(std::ffi::OsString::from_vec(path)))
}

fn is_local(host: &str) -> bool {
    if host.is_empty() || host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    rustix::system::uname()
        .nodename()
        .to_str()
        .is_ok_and(|ours| ours.eq_ignore_ascii_case(host))
}

/// `%XX` escapes decoded; a `%` not followed by two hex digits is kept
/// (the engine's own integration prints the path as it is).
fn decode(path: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%'
            && let (Some(high), Some(low)) = (
                path.get(i + 1).copied().and_then(hex),
                path.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(high << 4 | low);
            i += 3;
            continue;
        }
        out.push(path[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scanned(chunks: &[&[u8]]) -> Option<PathBuf> {
        let mut osc7 = Osc7::default();
        for chunk in chunks {
            osc7.scan(chunk);
        }
        osc7.latest
    }

    #[test]
    fn the_newest_local_report_wins_with_either_terminator() {
        let stream: &[u8] = b"a\x1b]7;file:///tmp\x07b\x1b]7;file://localhost/srv/my%20dir\x1b\\c";
        assert_eq!(scanned(&[stream]), Some(PathBuf::from("/srv/my dir")));
    }

    #[test]
    fn a_report_cut_anywhere_between_chunks_is_read() {
        let stream: &[u8] = b"xx\x1b]7;file:///var/log\x07yy";
        for cut in 0..=stream.len() {
            let (head, tail) = stream.split_at(cut);
            assert_eq!(
                scanned(&[head, tail]),
                Some(PathBuf::from("/var/log")),
                "{cut}"
            );
        }
    }

    #[test]
    fn remote_hosts_unterminated_and_malformed_reports_are_not_directories() {
        assert_eq!(scanned(&[b"\x1b]7;file://elsewhere.example/etc\x07"]), None);
        assert_eq!(scanned(&[b"\x1b]7;/no/scheme\x07"]), None);
        assert_eq!(scanned(&[b"\x1b]7;file:///a%00b\x07"]), None);
        let long = [b"\x1b]7;file:///".as_slice(), &[b'a'; MAX_REPORT + 10]].concat();
        assert_eq!(scanned(&[&long, b"\x07"]), None);
        // A lone `%` is kept as it is.
        assert_eq!(
            scanned(&[b"\x1b]7;file:///100%\x07"]),
            Some(PathBuf::from("/100%"))
        );
    }

    #[test]
    fn the_carry_is_bounded_by_the_longest_report() {
        let mut osc7 = Osc7::default();
        osc7.scan(b"\x1b]7;file:///");
        for _ in 0..100 {
            osc7.scan(&[b'a'; 1000]);
            assert!(osc7.carry.len() <= MAX_REPORT + 1000 + INTRO.len());
        }
        assert_eq!(osc7.latest, None);
    }
}
