//! The working directory a program reports in its output: OSC 7,
//! `ESC ] 7 ; file://HOST/PATH` ended by BEL or ST, which the engine's
//! shell integration prints at every prompt (as VTE, iTerm2 and WezTerm
//! read it).
//!
//! It is scanned as the stream is written, so the newest report is known
//! without a round trip and survives the terminal's process (a restart
//! after a reboot starts in it). The scanner is a state machine that
//! looks at each byte once, whatever the chunks: it sits on the reader's
//! path, so a program printing a flood of intros (`ESC ] 7 ;` without
//! end) must cost what plain text of the same size costs, not
//! a look-ahead per intro. A sequence cut between two chunks is
//! continued; one longer than [`MAX_REPORT`] is not a report, and an ESC
//! inside a report that does not start ST abandons it (as a terminal's
//! parser does) and may start the next.

use std::path::PathBuf;

const INTRO: &[u8] = b"\x1b]7;";

/// The longest report read: `PATH_MAX` and a host name.
pub const MAX_REPORT: usize = 4096 + 256;

/// The newest directory reported, and where the scan is.
#[derive(Debug, Default)]
pub(crate) struct Osc7 {
    /// The newest directory reported by a local host.
    pub(crate) latest: Option<PathBuf>,
    state: State,
    /// The report's body so far (in [`State::Body`]), at most
    /// [`MAX_REPORT`] bytes.
    body: Vec<u8>,
}

/// Where the scanner is in the grammar.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside a report, looking for an ESC.
    #[default]
    Ground,
    /// This many bytes (1..=3) of [`INTRO`] seen.
    Intro(usize),
    /// Inside a report's body.
    Body,
    /// Inside a body, just after an ESC (ST's first byte?).
    BodyEsc,
}

impl Osc7 {
    /// Scans the next chunk of the stream: every byte once, the runs
    /// between the bytes that matter skipped with `memchr`.
    pub(crate) fn scan(&mut self, chunk: &[u8]) {
        let mut at = 0;
        while at < chunk.len() {
            match self.state {
                State::Ground => match memchr::memchr(0x1b, &chunk[at..]) {
                    Some(found) => {
                        self.state = State::Intro(1);
                        at += found + 1;
                    }
                    None => return,
                },
                State::Intro(seen) => {
                    let byte = chunk[at];
                    at += 1;
                    self.state = if byte == INTRO[seen] {
                        if seen + 1 == INTRO.len() {
                            self.body.clear();
                            State::Body
                        } else {
                            State::Intro(seen + 1)
                        }
                    } else if byte == 0x1b {
                        State::Intro(1)
                    } else {
                        State::Ground
                    };
                }
                State::Body => {
                    let rest = &chunk[at..];
                    let run = memchr::memchr2(0x07, 0x1b, rest).unwrap_or(rest.len());
                    if self.body.len() + run > MAX_REPORT {
                        // Too long to be a report: drop it, and look for
                        // the next intro from here on.
                        // The run holds no ESC, so no intro is skipped.
                        self.body.clear();
                        self.state = State::Ground;
                        at += run;
                        continue;
                    }
                    self.body.extend_from_slice(&rest[..run]);
                    at += run;
                    match rest.get(run) {
                        Some(0x07) => {
                            at += 1;
                            self.end();
                        }
                        Some(_) => {
                            at += 1;
                            self.state = State::BodyEsc;
                        }
                        None => {}
                    }
                }
                State::BodyEsc => {
                    if chunk[at] == b'\\' {
                        at += 1;
                        self.end();
                    } else {
                        // Not ST: the report is abandoned and the ESC
                        // starts whatever follows (maybe the next intro).
                        self.body.clear();
                        self.state = State::Intro(1);
                    }
                }
            }
        }
    }

    /// A report's terminator arrived: read its body.
    fn end(&mut self) {
        if let Some(path) = parse(&self.body) {
            self.latest = Some(path);
        }
        self.body.clear();
        self.state = State::Ground;
    }
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
    fn the_body_kept_is_bounded_by_the_longest_report() {
        let mut osc7 = Osc7::default();
        osc7.scan(b"\x1b]7;file:///");
        for _ in 0..100 {
            osc7.scan(&[b'a'; 1000]);
            assert!(osc7.body.len() <= MAX_REPORT);
            assert!(osc7.body.capacity() <= 2 * MAX_REPORT);
        }
        assert_eq!(osc7.latest, None);
        // After the overlong one, the next report is read.
        osc7.scan(b"\x07\x1b]7;file:///ok\x07");
        assert_eq!(osc7.latest, Some(PathBuf::from("/ok")));
    }

    /// Hostile output: a flood of intros without an end, and an ESC that is not
    /// ST inside a report, neither hide the next report nor cost a
    /// look-ahead per intro.
    #[test]
    fn a_flood_of_intros_ends_at_the_next_report() {
        let mut flood = b"\x1b]7;".repeat(50_000);
        flood.extend_from_slice(b"\x1b]7;file:///after\x1b\\");
        assert_eq!(scanned(&[&flood]), Some(PathBuf::from("/after")));
        let mut osc7 = Osc7::default();
        for byte in &flood {
            osc7.scan(std::slice::from_ref(byte));
        }
        assert_eq!(osc7.latest, Some(PathBuf::from("/after")));
        assert_eq!(
            scanned(&[b"\x1b]7;file:///a\x1b[0m\x1b]7;file:///b\x07"]),
            Some(PathBuf::from("/b"))
        );
        // A body exactly at the limit is a report; one byte more is not.
        let at_limit = [
            b"\x1b]7;file:///".as_slice(),
            &[b'a'; MAX_REPORT - 8],
            b"\x07",
        ]
        .concat();
        assert!(scanned(&[&at_limit]).is_some());
        let over = [
            b"\x1b]7;file:///".as_slice(),
            &[b'a'; MAX_REPORT - 7],
            b"\x07",
        ]
        .concat();
        assert_eq!(scanned(&[&over]), None);
    }

    /// Every way of cutting a stream of reports, intros and noise into
    /// chunks reads the same directory.
    #[test]
    fn chunking_never_changes_the_answer() {
        let stream: &[u8] =
            b"\x1b\x1b]7\x1b]7;file:///x\x1b\x1b]7;junk\x1b]7;file:///y%2Fz\x1b\\tail\x1b]";
        let whole = scanned(&[stream]);
        assert_eq!(whole, Some(PathBuf::from("/y/z")));
        for size in 1..stream.len() {
            let chunks: Vec<&[u8]> = stream.chunks(size).collect();
            assert_eq!(scanned(&chunks), whole, "{size}");
        }
    }
}
