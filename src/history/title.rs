//! The title a program sets (OSC 0 or OSC 2, ended by BEL or ST), found
//! in the bytes a kept history writes: what `meta.json` keeps beside the
//! history. Sans-IO; a title split across two writes is found once the
//! second arrives (the tail of the first is carried, bounded).

/// The longest title kept; and the most bytes carried between writes.
const MAX_TITLE: usize = 512;

/// The scanner's state: the unfinished tail of the last write.
#[derive(Debug, Default)]
pub(crate) struct Titles {
    carry: Vec<u8>,
}

impl Titles {
    /// The last title set in `bytes` (with what an earlier write left
    /// unfinished), if any.
    pub(crate) fn scan(&mut self, bytes: &[u8]) -> Option<String> {
        let mut joined = std::mem::take(&mut self.carry);
        joined.extend_from_slice(bytes);
        let mut latest = None;
        let mut at = 0;
        while let Some(found) = find(&joined[at..], b"\x1b]") {
            let start = at + found + 2;
            let rest = &joined[start..];
            let Some(body) = rest
                .strip_prefix(b"0;")
                .or_else(|| rest.strip_prefix(b"2;"))
            else {
                at = start;
                continue;
            };
            let end = body.iter().position(|&b| b == 0x07 || b == 0x1b);
            match end {
                Some(end) => {
                    let text = &body[..end.min(MAX_TITLE)];
                    latest = Some(String::from_utf8_lossy(text).into_owned());
                    at = start + 2 + end;
                }
                None => {
                    if joined.len() - at <= MAX_TITLE + 8 {
                        self.carry = joined[at + found..].to_vec();
                    }
                    return latest;
                }
            }
        }
        // An ESC at the very end may begin the next title.
        if joined.last() == Some(&0x1b) {
            self.carry = vec![0x1b];
        }
        latest
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_title_across_writes() {
        let mut titles = Titles::default();
        assert_eq!(titles.scan(b"plain\r\n"), None);
        assert_eq!(
            titles.scan(b"\x1b]0;one\x07x\x1b]2;two\x1b\\"),
            Some("two".to_owned())
        );
        assert_eq!(titles.scan(b"a\x1b]2;spl"), None);
        assert_eq!(titles.scan(b"it\x07"), Some("split".to_owned()));
        assert_eq!(titles.scan(b"\x1b]7;file://h/tmp\x07"), None);
    }
}
