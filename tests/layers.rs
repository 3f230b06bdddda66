//! The layering rules of `docs/architecture.md`, checked over the source:
//! no module imports from a layer above its own, and no two files import
//! each other. Run alone with `cargo test --test tests layers`.
//!
//! Every code line (comments skipped) is scanned for `crate::a::b` paths
//! and `use super::...` / `super::x` paths, resolved to the module they
//! name, and then to the file that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers from the bottom; a module may use its own layer's modules only
/// where the layer's components allow it (see `same_layer_ok`), and any
/// module of a lower layer. Longest prefix wins.
const LAYERS: &[(&str, u8)] = &[
    ("vocab", 0),
    ("error", 0),
    ("hops", 0),
    ("", 0), // lib.rs itself: re-exports only
    ("control::parse", 1),
    ("control::codec", 1),
    ("control::escape", 1),
    ("control::layout", 1),
    ("control", 1),
    ("tmux", 1),
    ("control::client", 2),
    ("control::subscribe", 2),
    ("control::pane_exit", 2),
    ("control::snapshot", 2),
    // The state directory's records and flocks: files, never policy.
    ("statedir", 2),
    // The audit log's file and hash chain: no policy of what is an act.
    ("audit", 2),
    ("screen", 3),
    ("shell", 2),
    ("stream", 3),
    ("terminal", 4),
    // Pictures of a screen (PNG, GIF): the screen model only.
    ("picture", 4),
    ("history", 4),
    ("registry", 5),
    ("fixture", 5),
    // The tmux backend implements the registry's seam from above, as the
    // registry-logic tests' stub does from outside the crate.
    ("backend", 6),
    // Tape files: each runs in a fixture and draws with picture.
    ("tape", 6),
    ("attach", 7),
    ("verbs", 8),
    ("bridge", 9),
    ("mcp", 9),
    // The binary's modules (main.rs and cli/) sit above the library.
    ("cli", 10),
    ("main", 10),
];

/// The component a module belongs to: its first path segment, except that
/// `control`'s sans-IO protocol and its client are told apart.
fn component(module: &str) -> &str {
    let first = module.split("::").next().unwrap_or("");
    if first == "control" {
        let client = [
            "control::client",
            "control::subscribe",
            "control::pane_exit",
            "control::snapshot",
        ];
        if client
            .iter()
            .any(|c| module == *c || module.starts_with(&format!("{c}::")))
        {
            return "control-client";
        }
        return "control-protocol";
    }
    first
}

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .filter(|(prefix, _)| {
            prefix.is_empty() || module == *prefix || module.starts_with(&format!("{prefix}::"))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map_or(0, |&(_, rank)| rank)
}

/// Within one layer only the same component may be used, except in the
/// foundation (`vocab` and `error` use each other's values).
fn same_layer_ok(from: &str, to: &str) -> bool {
    layer(from) == 0 || component(from) == component(to)
}

/// One source file: its module path (`control::client::reader`) and text.
struct Source {
    module: String,
    file: PathBuf,
    text: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&src).expect("under src");
                let mut parts: Vec<String> = rel
                    .with_extension("")
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                    parts.pop();
                }
                let text = std::fs::read_to_string(&path).expect("a source file");
                out.push(Source {
                    module: parts.join("::"),
                    file: rel.to_path_buf(),
                    text,
                });
            }
        }
    }
    out
}

/// Code lines only: comments and doc comments say nothing about imports,
/// and `#[cfg(test)]` modules at a file's end may reach anywhere.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
        .filter(|line| {
            let t = line.trim_start();
            !(t.starts_with("//") || t.starts_with("*"))
        })
}

/// The module paths a line names: `crate::a::b::C` gives `a::b::C`, and
/// `super::x` is resolved against the file's own module (a `mod.rs` is its
/// module; any other file is a child of its parent).
fn targets(source: &Source, line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for (start, prefix) in line
        .match_indices("crate::")
        .map(|(i, _)| (i, "crate::"))
        .chain(line.match_indices("super::").map(|(i, _)| (i, "super::")))
    {
        if start > 0
            && line[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let rest: String = line[start + prefix.len()..]
            .chars()
            .take_while(|&c| word(c))
            .collect();
        let path = if prefix == "crate::" {
            rest
        } else {
            let mut base: Vec<&str> = source
                .module
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            let is_mod = source.file.file_name().is_some_and(|f| f == "mod.rs");
            if !is_mod {
                base.pop();
            }
            let mut rest = rest.as_str();
            while let Some(more) = rest.strip_prefix("super::") {
                base.pop();
                rest = more;
            }
            let mut joined = base.join("::");
            if !joined.is_empty() && !rest.is_empty() {
                joined.push_str("::");
            }
            joined.push_str(rest);
            joined
        };
        // `crate::cli::` from the binary, `crate::x` from the library.
        found.push(path.trim_end_matches("::").to_owned());
    }
    found
}

/// The defining module of `path`: its longest prefix that is a file's
/// module.
fn owner<'a>(path: &str, modules: &'a BTreeSet<String>) -> Option<&'a String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find_map(|prefix| modules.get(&prefix))
}

#[test]
fn no_module_imports_from_a_layer_above_and_no_two_files_import_each_other() {
    let sources = sources();
    assert!(
        sources.len() > 50,
        "found only {} source files",
        sources.len()
    );
    let modules: BTreeSet<String> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut violations = Vec::new();
    for source in &sources {
        for line in code_lines(&source.text) {
            for path in targets(source, line) {
                let Some(target) = owner(&path, &modules) else {
                    continue;
                };
                if *target == source.module || target.is_empty() {
                    continue;
                }
                // A parent declaring or re-exporting its children is not a
                // dependency on them in the layering sense.
                if source.module.is_empty() || target.starts_with(&format!("{}::", source.module)) {
                    continue;
                }
                let (from, to) = (layer(&source.module), layer(target));
                if to > from || (to == from && !same_layer_ok(&source.module, target)) {
                    violations.push(format!(
                        "{} (layer {from}) uses {target} (layer {to}): {}",
                        source.file.display(),
                        line.trim()
                    ));
                }
                edges
                    .entry(source.module.clone())
                    .or_default()
                    .insert(target.clone());
            }
        }
    }
    for (from, tos) in &edges {
        for to in tos {
            if from < to && edges.get(to).is_some_and(|back| back.contains(from)) {
                violations.push(format!("{from} and {to} import each other"));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_layer_rules_catch_what_they_must() {
    // The checker itself: a reach up and a circle are both reported.
    assert!(layer("tmux::server") < layer("control::client"));
    assert!(!same_layer_ok("tmux::handle", "control::parse"));
    assert!(same_layer_ok(
        "control::client::reader",
        "control::subscribe"
    ));
    let source = Source {
        module: "control::client::reader".to_owned(),
        file: PathBuf::from("control/client/reader.rs"),
        text: String::new(),
    };
    assert_eq!(
        targets(&source, "use super::{Shared, State};"),
        ["control::client"]
    );
    assert_eq!(
        targets(&source, "use crate::tmux::ServerHandle;"),
        ["tmux::ServerHandle"]
    );
    let modules: BTreeSet<String> = ["control", "control::client", "tmux", "tmux::handle"]
        .map(String::from)
        .into();
    assert_eq!(
        owner("tmux::handle::ServerHandle", &modules).map(String::as_str),
        Some("tmux::handle")
    );
    assert_eq!(
        owner("control::client", &modules).map(String::as_str),
        Some("control::client")
    );
}
