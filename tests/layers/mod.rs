//! The layering rules of `docs/architecture.md`, checked over the source:
//! no module imports from a layer above its own, and no files import each
//! other in a circle of any length. Run alone with
//! `cargo test --test tests layers`.
//!
//! The arrows come from `imports.rs`: every name a file imports, resolved
//! to the file that defines it (grouped `use` trees item by item, through
//! re-exports). A module's own descendants are not its dependencies: a
//! `mod.rs` declares, re-exports and composes its parts, which use what it
//! defines.

mod imports;
mod verb_names;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use imports::{Crates, Edges, Source, sources};

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

/// Circles known on `main` and being broken elsewhere; each is tolerated
/// only as exactly this set of files (a circle that grows, or any other,
/// fails). Remove an entry as soon as its circle is gone.
const KNOWN_CIRCLES: &[&[&str]] = &[];

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

/// The strongly connected groups of more than one module (Tarjan's).
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.edges.get(node).into_iter().flat_map(|t| t.keys()) {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut group = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    group.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found.sort();
    walk.found
}

/// One shortest loop through `group`'s first module, inside the group:
/// `[a, b, c, a]`.
fn a_loop(group: &[String], edges: &Edges) -> Vec<String> {
    let start = &group[0];
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in edges.get(node).into_iter().flat_map(|t| t.keys()) {
            if !group.contains(next) {
                continue;
            }
            if next == start {
                let mut path = vec![start.clone(), node.clone()];
                let mut at = node;
                while let Some(&before) = came_from.get(at) {
                    path.push(before.clone());
                    at = before;
                }
                path.reverse();
                return path;
            }
            if next != start && !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    group.to_vec()
}

/// Every breach of the rules in `sources`: reaches up, and circles not in
/// `known`.
fn violations(sources: &[Source], known: &[&[&str]]) -> Vec<String> {
    let crates = Crates::new(sources);
    let files: BTreeMap<&str, &Path> = sources
        .iter()
        .map(|s| (s.module.as_str(), s.file.as_path()))
        .collect();
    let file = |module: &str| {
        files
            .get(module)
            .map_or(module.to_owned(), |f| f.display().to_string())
    };
    let edges = crates.edges();
    let mut found = Vec::new();
    for (from, targets) in &edges {
        for (to, names) in targets {
            let (up, down) = (layer(from), layer(to));
            if down > up || (down == up && !same_layer_ok(from, to)) {
                found.push(format!(
                    "{} (layer {up}) uses {} (layer {down}): {}",
                    file(from),
                    file(to),
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    for group in circles(&edges) {
        if known
            .iter()
            .any(|k| k.iter().copied().eq(group.iter().map(String::as_str)))
        {
            continue;
        }
        let path = a_loop(&group, &edges);
        let mut text = format!(
            "a circle among {} files ({}); one loop: {}",
            group.len(),
            group.iter().map(|m| file(m)).collect::<Vec<_>>().join(", "),
            file(&path[0])
        );
        for pair in path.windows(2) {
            let names = &edges[&pair[0]][&pair[1]];
            text.push_str(&format!(
                " -> {} ({})",
                file(&pair[1]),
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        found.push(text);
    }
    found
}

#[test]
fn no_module_imports_from_a_layer_above_and_no_files_import_each_other_in_a_circle() {
    let sources = sources();
    assert!(
        sources.len() > 50,
        "found only {} source files",
        sources.len()
    );
    let found = violations(&sources, KNOWN_CIRCLES);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

/// A source of the planted trees below, in the library.
fn planted(module: &str, file: &str, text: &str) -> Source {
    Source {
        module: module.to_owned(),
        root: String::new(),
        file: PathBuf::from(file),
        text: text.to_owned(),
    }
}

#[test]
fn a_circle_of_three_files_is_found_through_groups_and_re_exports() {
    // a -> b through a grouped, multi-line import; b -> c through the
    // parent's re-export; c -> a through a path in code. No two of them
    // import each other.
    let tree = || {
        vec![
            planted(
                "registry",
                "registry/mod.rs",
                "mod a;\nmod b;\nmod c;\npub use c::Gamma;\n",
            ),
            planted(
                "registry::a",
                "registry/a.rs",
                "use super::{\n    b::{Beta, other},\n};\npub struct Alpha;\n",
            ),
            planted(
                "registry::b",
                "registry/b.rs",
                "use super::Gamma;\npub struct Beta;\npub fn other() {}\n",
            ),
            planted(
                "registry::c",
                "registry/c.rs",
                "// use super::a::Alpha; (a comment is no import)\n\
                 pub struct Gamma;\n\
                 fn make() -> crate::registry::a::Alpha { todo!() }\n",
            ),
        ]
    };
    let found = violations(&tree(), &[]);
    assert_eq!(
        found,
        [
            "a circle among 3 files (registry/a.rs, registry/b.rs, registry/c.rs); one loop: \
             registry/a.rs -> registry/b.rs (Beta, other) -> registry/c.rs (Gamma) -> \
             registry/a.rs (Alpha)"
        ]
    );
    // Named as known, exactly this circle passes; any other set does not.
    let known: &[&[&str]] = &[&["registry::a", "registry::b", "registry::c"]];
    assert!(violations(&tree(), known).is_empty());
    let smaller: &[&[&str]] = &[&["registry::a", "registry::b"]];
    assert_eq!(violations(&tree(), smaller).len(), 1);
    // Without the back edge there is no circle: only code, not a comment
    // or a test module, makes an arrow.
    let mut open = tree();
    open[3].text = "// crate::registry::a::Alpha\npub struct Gamma;\n\
                    #[cfg(test)]\nmod tests { use crate::registry::a::Alpha; }\n\
                    const S: &str = \"crate::registry::a::Alpha\";\n"
        .to_owned();
    assert_eq!(violations(&open, &[]), Vec::<String>::new());
}

#[test]
fn the_layer_rules_catch_a_reach_up() {
    assert!(layer("tmux::server") < layer("control::client"));
    assert!(!same_layer_ok("tmux::handle", "control::parse"));
    assert!(same_layer_ok(
        "control::client::reader",
        "control::subscribe"
    ));
    // tmux (layer 1) reaching the registry (layer 5) through a re-export.
    let tree = [
        planted(
            "registry",
            "registry/mod.rs",
            "mod ops;\npub use ops::Snapshot;\n",
        ),
        planted("registry::ops", "registry/ops.rs", "pub struct Snapshot;\n"),
        planted("tmux", "tmux/mod.rs", "use crate::registry::Snapshot;\n"),
    ];
    assert_eq!(
        violations(&tree, &[]),
        ["tmux/mod.rs (layer 1) uses registry/ops.rs (layer 5): Snapshot"]
    );
}

#[test]
fn a_grouped_import_is_resolved_per_name_to_its_file() {
    let tree = [
        planted(
            "control",
            "control/mod.rs",
            "pub mod client;\npub mod parse;\npub use parse::Reply;\n",
        ),
        planted("control::parse", "control/parse.rs", "pub struct Reply;\n"),
        planted(
            "control::client",
            "control/client/mod.rs",
            "mod shared;\nmod write;\npub struct Client;\n",
        ),
        planted(
            "control::client::shared",
            "control/client/shared.rs",
            "pub(super) struct State;\npub(super) struct Answer;\n",
        ),
        planted(
            "control::client::write",
            "control/client/write.rs",
            "use super::{Client, shared::{self, Answer as A}};\n\
             use crate::control::{Reply, parse};\n\
             fn f(_: shared::State) {}\n",
        ),
    ];
    let crates = Crates::new(&tree);
    let edges = crates.edges();
    let from_write: Vec<(&str, Vec<&str>)> = edges["control::client::write"]
        .iter()
        .map(|(to, names)| (to.as_str(), names.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        from_write,
        [
            ("control::client", vec!["Client"]),
            ("control::client::shared", vec!["Answer", "State", "shared"]),
            ("control::parse", vec!["Reply", "parse"]),
        ]
    );
}
