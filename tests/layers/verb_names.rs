//! No face tells a verb by its name: outside `src/verbs/`, no string
//! literal of the code (comments and `#[cfg(test)]` items aside) is a
//! verb's name, CLI word or MCP tool, so what a verb does differently is
//! a field of its entry in the verb table (`verbs/table.rs`), never a
//! `match verb.name` in a face. The few words that are a verb's name by
//! coincidence are listed in [`NOT_VERBS`] with what they are.

use std::collections::BTreeSet;
use std::path::Path;

use tmux_engine::verbs::VERBS;

use super::imports::{Source, Tok, sources, tokens};

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

/// The string literals of `text` (plain, raw and byte), comments and every
/// item under `#[cfg(test)]` left out, each with its line.
fn literals(text: &str) -> Vec<(usize, String)> {
    tokens(text)
        .into_iter()
        .filter_map(|tok| match tok {
            Tok::Str { text, line } => Some((line, text)),
            _ => None,
        })
        .collect()
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
