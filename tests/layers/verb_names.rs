//! No face tells a verb by its name: outside `src/verbs/`, no string
//! literal of the code (comments and `#[cfg(test)]` items aside) is a
//! verb's name, CLI word or MCP tool, so what a verb does differently is
//! a field of its entry in the verb table (`verbs/table.rs`), never a
//! `match verb.name` in a face. The few words that are a verb's name by
//! coincidence are listed in [`NOT_VERBS`] with what they are.

use std::collections::BTreeSet;
use std::path::Path;

use tmux_engine::verbs::VERBS;

use super::imports::{Source, skip_quote, sources};

/// Literals that spell a verb's name but are something else: (file under
/// `src/`, literal, what it is).
const NOT_VERBS: &[(&str, &str, &str)] = &[
    (
        "fixture/mod.rs",
        "screen",
        "the fixture's TERM, a terminfo name",
    ),
    (
        "statedir/locks.rs",
        "send",
        "a flock's purpose, in its file name",
    ),
    (
        "statedir/locks.rs",
        "spawn",
        "a flock's purpose, in its file name",
    ),
    ("registry/io.rs", "screen", "a wait's `since: screen`"),
    (
        "picture/animate.rs",
        "show",
        "a tape's `Show` marker in a recording",
    ),
];

/// The string literals of `text` (plain and raw), comments and every item
/// under `#[cfg(test)]` left out, each with its line.
fn literals(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Brace depth, and the depth at which a `#[cfg(test)]` item began
    // (its body is skipped until the depth falls back).
    let mut depth = 0usize;
    let mut skip_from: Option<usize> = None;
    let mut pending_test = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if text_at(&chars, i, "#[cfg(test)]") {
            pending_test = true;
            i += "#[cfg(test)]".len();
        } else if c == '{' {
            if pending_test && skip_from.is_none() {
                skip_from = Some(depth);
                pending_test = false;
            }
            depth += 1;
            i += 1;
        } else if c == '}' {
            depth = depth.saturating_sub(1);
            if skip_from == Some(depth) {
                skip_from = None;
            }
            i += 1;
        } else if c == ';' && pending_test && skip_from.is_none() {
            // `#[cfg(test)] mod tests;` or `use ...;`: the item ends here.
            pending_test = false;
            i += 1;
        } else if c == '"'
            || (c == 'r' && matches!(at(i + 1), '"' | '#') && !ident(at_prev(&chars, i)))
        {
            let start_line = line;
            let (value, next) = string(&chars, i);
            line += value.matches('\n').count();
            if skip_from.is_none() && !pending_test {
                found.push((start_line, value));
            }
            i = next;
        } else if c == '\'' {
            // A char literal ('"' included), or a lifetime.
            i = skip_quote(&chars, i);
        } else {
            i += 1;
        }
    }
    found
}

fn text_at(chars: &[char], i: usize, word: &str) -> bool {
    word.chars()
        .enumerate()
        .all(|(k, w)| chars.get(i + k) == Some(&w))
}

fn at_prev(chars: &[char], i: usize) -> char {
    if i == 0 { ' ' } else { chars[i - 1] }
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The string literal starting at `i` (`"..."`, `r"..."`, `r#"..."#`): its
/// text as written and the index after it.
fn string(chars: &[char], mut i: usize) -> (String, usize) {
    let mut value = String::new();
    if chars[i] == 'r' {
        i += 1;
        let mut hashes = 0;
        while chars.get(i) == Some(&'#') {
            hashes += 1;
            i += 1;
        }
        i += 1; // the opening quote
        while i < chars.len() {
            if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                return (value, i + 1 + hashes);
            }
            value.push(chars[i]);
            i += 1;
        }
        return (value, i);
    }
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                value.push(chars[i]);
                if let Some(&next) = chars.get(i + 1) {
                    value.push(next);
                }
                i += 2;
            }
            '"' => return (value, i + 1),
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    (value, i)
}

/// Every literal outside `src/verbs/` that spells a verb, as `file:line:
/// "literal"`, the listed coincidences excepted.
fn verb_names_in(sources: &[Source]) -> Vec<String> {
    let names: BTreeSet<&str> = VERBS
        .iter()
        .flat_map(|verb| [verb.name, verb.cli, verb.tool])
        .collect();
    let mut found = Vec::new();
    for source in sources {
        if source.file.starts_with(Path::new("verbs")) {
            continue;
        }
        let file = source.file.to_string_lossy();
        for (line, literal) in literals(&source.text) {
            let excused = NOT_VERBS
                .iter()
                .any(|(f, word, _)| *f == file && *word == literal);
            if names.contains(literal.as_str()) && !excused {
                found.push(format!("src/{file}:{line}: {literal:?}"));
            }
        }
    }
    found
}

#[test]
fn no_face_tells_a_verb_by_its_name() {
    let found = verb_names_in(&sources());
    assert!(
        found.is_empty(),
        "a verb told by its name outside src/verbs/ (give the verb a field in \
         verbs/table.rs instead, or list a coincidence in NOT_VERBS):\n{}",
        found.join("\n")
    );
}

/// The check finds a verb matched by name in a face, through a `match`
/// and a raw string, and passes over comments, test items and the listed
/// coincidences.
#[test]
fn a_verb_matched_by_name_is_found() {
    let planted = |file: &str, text: &str| Source {
        module: String::new(),
        root: String::new(),
        file: file.into(),
        text: text.to_owned(),
    };
    let sources = [
        planted(
            "mcp/planted.rs",
            "// \"send\" in a comment\n\
             fn f(verb: &Verb) -> bool {\n    match verb.name {\n        \"send\" => true,\n        \
             _ => verb.tool == r#\"terminal_wait\"#,\n    }\n}\n\
             #[cfg(test)]\nmod tests {\n    const A: &str = \"kill\";\n}\n\
             const C: char = '\"';\nconst T: &str = \"list\";\n",
        ),
        planted("fixture/mod.rs", "const TERM: &str = \"screen\";\n"),
        planted("verbs/table.rs", "const NAME: &str = \"spawn\";\n"),
    ];
    let found = verb_names_in(&sources);
    assert_eq!(
        found,
        [
            "src/mcp/planted.rs:4: \"send\"",
            "src/mcp/planted.rs:5: \"terminal_wait\"",
            "src/mcp/planted.rs:13: \"list\"",
        ]
    );
}
