//! `search`: a regex over the scrollback of one terminal, or of all the
//! owner's terminals, with the same stripping as `read` (the lines
//! `capture-pane` gives, no escapes), answered as bounded matches with
//! their line numbers and context.

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

/// Lines of each terminal searched: its retained scrollback, as far as
/// one read reaches.
const SEARCHED_LINES: usize = super::MAX_READ_LINES;

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
    /// The line's index from the oldest retained line (as `read`'s
    /// `range` counts).
    pub line: usize,
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
    let mut searched = 0;
    for (id, name) in targets {
        let page = owned
            .read(
                &id,
                registry::ReadRequest {
                    offset: 0,
                    count: Some(SEARCHED_LINES),
                },
            )
            .await;
        let page = match page {
            Ok(page) => page,
            Err(error) if request.terminal.is_none() => {
                tracing::debug!(terminal = id, %error, "search: skipped");
                continue;
            }
            Err(error) => return Err(error),
        };
        searched += 1;
        let lines = &page.lines;
        for (index, text) in lines.iter().enumerate() {
            if !search.regex.is_match(text) {
                continue;
            }
            let before = lines[index.saturating_sub(search.context)..index].to_vec();
            let after = lines[index + 1..(index + 1 + search.context).min(lines.len())].to_vec();
            matches.push(SearchMatch {
                terminal: id.clone(),
                name: name.clone(),
                line: page.range.start + index,
                text: text.clone(),
                before,
                after,
            });
        }
    }
    let mut truncated = false;
    if matches.len() > search.max_matches {
        matches.drain(..matches.len() - search.max_matches);
        truncated = true;
    }
    let mut answer = SearchAnswer {
        matches,
        searched,
        truncated,
    };
    while json_len(&answer) > search.bound.max_bytes && !answer.matches.is_empty() {
        // The oldest go first, an eighth at a time: a few serializations.
        let drop = answer.matches.len().div_ceil(8);
        answer.matches.drain(..drop);
        answer.truncated = true;
    }
    Ok(answer)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
