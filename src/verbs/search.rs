//! `search`: a regex over the output of one terminal, or of all the
//! owner's terminals, as the engine's stream holds it (and the kept
//! history, as far back as the stream's ring no longer reaches; never
//! tmux's scrollback), answered as bounded matches with the cursor of
//! each line, and per terminal the range searched.
//!
//! A line is the output between two line feeds, escape sequences
//! stripped and only what follows its last carriage return kept (a
//! progress bar redrawn with `\r` is its last state).

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds::{Bound, json_len};
use crate::registry::{self, Owned};
use crate::{Error, Result};

/// Lines of context a match carries at most on each side.
const MAX_CONTEXT: usize = 10;

/// Matches one search returns at most.
const MAX_MATCHES: usize = 500;

/// `search`: lines matching a regex.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// Id or name; absent: all of yours.
    #[serde(default)]
    pub terminal: Option<String>,
    /// Rust `regex` syntax, matched against each line.
    pub regex: String,
    /// Lines around each match.
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub context: Option<usize>,
    /// Matches at most (default 50; the newest kept).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub max_matches: Option<usize>,
    /// Answer bytes at most: 512 to 65536 (64 KiB, the default).
    #[serde(default)]
    #[schemars(range(min = 512, max = 65536))]
    pub max_bytes: Option<usize>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SearchMatch {
    /// The terminal's id.
    pub terminal: String,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The line's index from the first line searched (`searched_from`).
    pub line: usize,
    /// The cursor where the line starts: `read {since: cursor}` reads on
    /// from it.
    pub cursor: String,
    /// The line.
    pub text: String,
    /// The lines before it (oldest first), as `context` asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    /// The lines after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// What `search` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SearchAnswer {
    /// The matches, by terminal in creation order, then by line.
    pub matches: Vec<SearchMatch>,
    /// How many terminals were searched.
    pub searched: usize,
    /// Whether matches were left out (`max_matches`, `max_bytes`).
    pub truncated: bool,
    /// What was searched of each terminal, in the order searched.
    pub ranges: Vec<SearchedRange>,
}

/// What was searched of one terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SearchedRange {
    /// The terminal's id.
    pub terminal: String,
    /// The cursor of the oldest byte searched.
    pub searched_from: String,
    /// Whether it printed output older than `searched_from` that is no
    /// longer held (evicted, or printed before the engine's stream of it
    /// began), so was not searched.
    pub older_output: bool,
    /// Whether bytes inside the searched range were lost on their way to
    /// the kept history (a write the disk refused), so were not searched.
    pub lost_output: bool,
}

/// The checked request.
struct Search {
    regex: Regex,
    context: usize,
    max_matches: usize,
    bound: Bound,
}

impl SearchRequest {
    fn validate(&self) -> Result<Search> {
        let regex = Regex::new(&self.regex)
            .map_err(|e| Error::InvalidInput(format!("regex {:?}: {e}", self.regex)))?;
        let context = self.context.unwrap_or(0);
        if context > MAX_CONTEXT {
            return Err(Error::InvalidInput(format!(
                "context {context} is over the limit of {MAX_CONTEXT} lines"
            )));
        }
        let max_matches = self.max_matches.unwrap_or(50);
        if max_matches == 0 || max_matches > MAX_MATCHES {
            return Err(Error::InvalidInput(format!(
                "max_matches {max_matches} is outside 1..={MAX_MATCHES}"
            )));
        }
        Ok(Search {
            regex,
            context,
            max_matches,
            bound: Bound::new(self.max_bytes, None)?,
        })
    }
}

/// `search`: the matching lines of one terminal or all of the owner's
/// (a terminal whose scrollback cannot be read, e.g. its server is gone,
/// is skipped when searching all).
///
/// # Errors
/// `INVALID_INPUT` for a bad regex or bound, or the registry's for the
/// one terminal named.
pub async fn search(owned: Owned<'_>, request: &SearchRequest) -> Result<SearchAnswer> {
    let search = request.validate()?;
    let targets: Vec<(String, Option<String>)> = match &request.terminal {
        Some(target) => {
            let snapshot = owned.show(target).await?;
            vec![(snapshot.id.to_string(), snapshot.name)]
        }
        None => owned
            .list()
            .await?
            .into_iter()
            .map(|snapshot| (snapshot.id.to_string(), snapshot.name))
            .collect(),
    };
    let mut matches = Vec::new();
    let mut ranges = Vec::new();
    for (id, name) in targets {
        let held = match owned.searchable(&id).await {
            Ok(held) => held,
            Err(error) if request.terminal.is_none() => {
                tracing::debug!(terminal = id, %error, "search: skipped");
                continue;
            }
            Err(error) => return Err(error),
        };
        let lines = lines_of(&held.bytes);
        for (index, (offset, text)) in lines.iter().enumerate() {
            if !search.regex.is_match(text) {
                continue;
            }
            let text_of = |range: &[(usize, String)]| -> Vec<String> {
                range.iter().map(|(_, text)| text.clone()).collect()
            };
            let before = text_of(&lines[index.saturating_sub(search.context)..index]);
            let after = text_of(&lines[index + 1..(index + 1 + search.context).min(lines.len())]);
            let cursor = registry::OutputCursor {
                epoch: held.from.epoch,
                offset: held.from.offset + *offset as u64,
            };
            matches.push(SearchMatch {
                terminal: id.clone(),
                name: name.clone(),
                line: index,
                cursor: cursor.to_string(),
                text: text.clone(),
                before,
                after,
            });
        }
        ranges.push(SearchedRange {
            terminal: id,
            searched_from: held.from.to_string(),
            older_output: held.older,
            lost_output: held.lost,
        });
    }
    let searched = ranges.len();
    let mut truncated = false;
    if matches.len() > search.max_matches {
        matches.drain(..matches.len() - search.max_matches);
        truncated = true;
    }
    let mut answer = SearchAnswer {
        matches,
        searched,
        truncated,
        ranges,
    };
    while json_len(&answer) > search.bound.max_bytes && !answer.matches.is_empty() {
        // The oldest go first, an eighth at a time: a few serializations.
        let drop = answer.matches.len().div_ceil(8);
        answer.matches.drain(..drop);
        answer.truncated = true;
    }
    Ok(answer)
}

/// The lines of `bytes` (see the module's notes), each with the offset
/// of its first byte. A last line with no line feed counts.
fn lines_of(bytes: &[u8]) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |at| start + at);
        let line = &bytes[start..end];
        // What follows the last carriage return with something after it.
        let shown = line
            .split(|&b| b == b'\r')
            .rfind(|part| !crate::registry::strip_escapes(part).is_empty())
            .unwrap_or_default();
        lines.push((start, crate::registry::strip_escapes(shown)));
        start = end + 1;
    }
    lines
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_offsets_and_a_redrawn_line_its_last_state() {
        let bytes = b"one\r\n\x1b[1mtwo\x1b[0m\r\n10%\r20%\r\npart";
        let lines = lines_of(bytes);
        let want = [(0, "one"), (5, "two"), (18, "20%"), (27, "part")];
        let got: Vec<(usize, &str)> = lines.iter().map(|(at, t)| (*at, t.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bad_searches_are_invalid_input() {
        let request = |regex: &str, context, max_matches| SearchRequest {
            regex: regex.to_owned(),
            context,
            max_matches,
            ..SearchRequest::default()
        };
        for bad in [
            request("(", None, None),
            request("a", Some(11), None),
            request("a", None, Some(0)),
            request("a", None, Some(501)),
        ] {
            let error = bad.validate().err().unwrap();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
        }
        assert!(request("a+", Some(10), Some(500)).validate().is_ok());
    }
}
