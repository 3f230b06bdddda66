//! Reading the source tree for `layers`: each file as tokens (comments
//! dropped, the items under `#[cfg(test)]` skipped: the one tokenizer of
//! both checks, whose string literals `verb_names` reads), every `use`
//! tree expanded item by item (`use crate::a::{b, c::D}` is two
//! imports), and every path in code that starts at `crate`, `super`,
//! `self` or a name a `use` brought in. A path is resolved to the file that
//! *defines* the name, through the imports and re-exports of the modules on
//! its way: `use super::Registry` in `registry/ops.rs` is an arrow to
//! `registry/service.rs`, not to the `registry/mod.rs` that re-exports it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module -> the modules it imports from -> the names taken from each.
pub(super) type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One source file: its module path (`control::client::reader`), the
/// module of its crate's root (`""` for the library, `main` for the
/// binary, whose `cli/` modules are `cli::...`) and its text.
pub(super) struct Source {
    pub(super) module: String,
    pub(super) root: String,
    pub(super) file: PathBuf,
    pub(super) text: String,
}

pub(super) fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
                let text = std::fs::read_to_string(&path).expect("a source file");
                found.push((rel, text));
            }
        }
    }
    // Files that only a `#[cfg(test)] #[path = "..."] mod tests;` names
    // are test code, like an inline `mod tests`.
    let mut test_files = BTreeSet::new();
    for (rel, text) in &found {
        let mut after_cfg_test = false;
        for line in text.lines().map(str::trim) {
            if line == "#[cfg(test)]" {
                after_cfg_test = true;
            } else if let Some(name) = line
                .strip_prefix("#[path = \"")
                .and_then(|rest| rest.strip_suffix("\"]"))
            {
                if after_cfg_test {
                    test_files.insert(rel.with_file_name(name));
                }
            } else {
                after_cfg_test = false;
            }
        }
    }
    found
        .into_iter()
        .filter(|(rel, _)| !test_files.contains(rel))
        .map(|(rel, text)| {
            let mut parts: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let module = parts.join("::");
            let root = if module == "main" || module == "cli" || module.starts_with("cli::") {
                "main".to_owned()
            } else if module.starts_with("bin::") {
                module.clone()
            } else {
                String::new()
            };
            Source {
                module,
                root,
                file: rel,
                text,
            }
        })
        .collect()
}

/// A token of Rust source, as far as the layers' checks need one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
    /// A string literal (plain, raw or byte): its text as written, between
    /// its quotes, and the line it starts on.
    Str {
        text: String,
        line: usize,
    },
}

/// The tokens of `text`: comments and char literals dropped (a path
/// inside a doc comment is no import, nor a word in it a verb's name), and
/// every item under `#[cfg(test)]` skipped (a test module may reach
/// anywhere, and name any verb).
pub(super) fn tokens(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    // The line at index `counted`, advanced as literals are found.
    let (mut line, mut counted) = (1, 0);
    let mut string = |start: usize, open: usize, end: usize, hashes: usize| {
        line += chars[counted..start].iter().filter(|&&c| c == '\n').count();
        counted = start;
        let close = end.saturating_sub(1 + hashes).max(open);
        Tok::Str {
            text: chars[open..close.min(chars.len())].iter().collect(),
            line,
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            let start = i;
            i = skip_string(&chars, i + 1, usize::MAX);
            out.push(string(start, start + 1, i, 0));
        } else if c == '\'' {
            i = skip_quote(&chars, i);
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw = word == "r" || word == "br";
            if (raw || word == "b") && at(i) == '"' {
                let open = i + 1;
                i = skip_string(&chars, open, usize::from(!raw) * usize::MAX);
                out.push(string(start, open, i, 0));
            } else if raw && at(i) == '#' {
                let mut end = i;
                while at(end) == '#' {
                    end += 1;
                }
                if at(end) == '"' {
                    let hashes = end - i;
                    i = skip_string(&chars, end + 1, hashes);
                    out.push(string(start, end + 1, i, hashes));
                } else {
                    // A raw identifier (`r#type`): the name follows.
                    i += 1;
                }
            } else if word == "b" && at(i) == '\'' {
                // A byte literal: `b'x'`, `b'\n'`, `b'\''`.
                i += if at(i + 1) == '\\' { 3 } else { 2 };
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push(Tok::Ident(word));
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    without_test_items(out)
}

/// Past the `'` at `i`: a char literal whole (`'x'`, `'"'`, and escapes:
/// `'\n'`, `'\''`, `'\u{1F}'`), or only the quote of a lifetime, whose
/// name follows as an identifier.
fn skip_quote(chars: &[char], i: usize) -> usize {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    if at(i + 1) == '\\' {
        // The escaped character may be a quote itself: look past it.
        let mut end = i + 3;
        while end < chars.len() && chars[end] != '\'' {
            end += 1;
        }
        end + 1
    } else if at(i + 2) == '\'' {
        i + 3
    } else {
        i + 1
    }
}

/// The index after the string that starts at `i` (just past its opening
/// quote): `hashes` is a raw string's count of `#`, `usize::MAX` an
/// ordinary string with escapes.
fn skip_string(chars: &[char], mut i: usize, hashes: usize) -> usize {
    while i < chars.len() {
        if hashes == usize::MAX && chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == '"' {
            let end = if hashes == usize::MAX { 0 } else { hashes };
            if (1..=end).all(|k| chars.get(i + k) == Some(&'#')) {
                return i + 1 + end;
            }
        }
        i += 1;
    }
    i
}

/// `tokens` without the items that `#[cfg(test)]` marks: the attribute,
/// any attributes after it, and the item up to its `;` or its closing
/// brace.
fn without_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let cfg_test = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if !toks[i..].starts_with(&cfg_test) {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        i += cfg_test.len();
        let mut depth = 0usize;
        while i < toks.len() {
            let tok = &toks[i];
            i += 1;
            match tok {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        if toks.get(i) == Some(&Tok::Punct(';')) {
                            i += 1;
                        }
                        break;
                    }
                }
                Tok::Punct(';') if depth == 0 => break,
                _ => {}
            }
        }
    }
    out
}

/// One name a `use` brings in: the path as written, and the name it binds
/// (`None` for `as _`; a glob binds every name of its module).
#[derive(Debug, Clone, PartialEq, Eq)]
struct UseItem {
    path: Vec<String>,
    name: Option<String>,
    glob: bool,
}

/// Expands the use tree at `toks[*i..]` under `prefix`, leaving `*i` past
/// it.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<UseItem>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i) {
            Some(Tok::Path) => *i += 1,
            Some(Tok::Ident(word)) => {
                path.push(word.clone());
                *i += 1;
                if toks.get(*i) != Some(&Tok::Path) {
                    break;
                }
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(UseItem {
                    path,
                    name: None,
                    glob: true,
                });
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                while let Some(tok) = toks.get(*i) {
                    match tok {
                        Tok::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => {
                            let before = *i;
                            use_tree(toks, i, &path, out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                return;
            }
            _ => return,
        }
    }
    if path.last().is_some_and(|last| last == "self") {
        path.pop();
    }
    let mut name = path.last().cloned();
    if toks.get(*i) == Some(&Tok::Ident("as".into())) {
        name = match toks.get(*i + 1) {
            Some(Tok::Ident(alias)) if alias != "_" => Some(alias.clone()),
            _ => None,
        };
        *i += 2;
    }
    if !path.is_empty() {
        out.push(UseItem {
            path,
            name,
            glob: false,
        });
    }
}

/// What one file says about names: what its `use`s bring in, what it
/// defines, and the paths its code names (each as written).
#[derive(Default)]
struct Scope {
    uses: Vec<UseItem>,
    defines: BTreeSet<String>,
    paths: Vec<Vec<String>>,
}

fn scope(text: &str) -> Scope {
    // A string is no path.
    let toks: Vec<Tok> = tokens(text)
        .into_iter()
        .filter(|tok| !matches!(tok, Tok::Str { .. }))
        .collect();
    let mut scope = Scope::default();
    let items = [
        "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
    ];
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            Tok::Ident(word) if word == "use" => {
                i += 1;
                use_tree(&toks, &mut i, &[], &mut scope.uses);
                continue;
            }
            Tok::Ident(word) if items.contains(&word.as_str()) => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1)
                    && (depth == 0 || word == "mod")
                {
                    scope.defines.insert(name.clone());
                }
            }
            Tok::Ident(word) if word == "macro_rules" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 2) {
                    scope.defines.insert(name.clone());
                }
            }
            Tok::Ident(first)
                if toks.get(i + 1) == Some(&Tok::Path) && (i == 0 || toks[i - 1] != Tok::Path) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Path)
                    && let Some(Tok::Ident(next)) = toks.get(j + 1)
                {
                    path.push(next.clone());
                    j += 2;
                }
                scope.paths.push(path);
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scope
}

/// Every file's module and scope, and how a path resolves among them.
pub(super) struct Crates {
    /// Module -> its crate's root module.
    roots: BTreeMap<String, String>,
    scopes: BTreeMap<String, Scope>,
}

/// The longest prefix of `path` that is a file's module, and the rest.
fn split_module<'a>(
    path: &'a [String],
    modules: &BTreeMap<String, Scope>,
) -> (String, &'a [String]) {
    (0..=path.len())
        .rev()
        .map(|n| (path[..n].join("::"), &path[n..]))
        .find(|(module, _)| modules.contains_key(module))
        .unwrap_or_else(|| (String::new(), path))
}

fn segments(module: &str) -> Vec<String> {
    module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Crates {
    pub(super) fn new(sources: &[Source]) -> Crates {
        Crates {
            roots: sources
                .iter()
                .map(|s| (s.module.clone(), s.root.clone()))
                .collect(),
            scopes: sources
                .iter()
                .map(|s| (s.module.clone(), scope(&s.text)))
                .collect(),
        }
    }

    /// `path` as written in `module`, made absolute (module segments from
    /// the library's root; the binary's non-`cli` items under `main`);
    /// `None` for another crate's path (`std`, `tokio`, `tmux_engine`).
    fn absolute(&self, module: &str, path: &[String]) -> Option<Vec<String>> {
        let root = self.roots.get(module).map_or("", String::as_str);
        let first = path.first()?;
        let mut base = segments(module);
        let mut rest = path;
        match first.as_str() {
            "crate" => {
                rest = &path[1..];
                base = if root == "main" && rest.first().is_some_and(|s| s == "cli") {
                    Vec::new()
                } else {
                    segments(root)
                };
            }
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                if base.is_empty() && root == "main" {
                    base = segments("main");
                }
            }
            "self" => rest = &path[1..],
            name => {
                // A name in this module's own scope: a child module, an
                // item, or an import; anything else is another crate's.
                let child = format!("{module}::{name}");
                let own = self.scopes.get(module).is_some_and(|scope| {
                    scope.defines.contains(name)
                        || scope.uses.iter().any(|u| u.name.as_deref() == Some(name))
                });
                let child = self.scopes.contains_key(child.trim_start_matches("::"));
                if !(own || child) {
                    return None;
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module whose file defines what the absolute `path` names, and
    /// the name found defined there (`None`: not found; the module itself
    /// when `path` names a module); `None` for a name that is another
    /// crate's (re-exported `std` or `tokio` items).
    fn resolve(&self, path: &[String], depth: u8) -> Option<(String, Option<String>)> {
        let (module, rest) = split_module(path, &self.scopes);
        let scope = self.scopes.get(&module)?;
        let Some(name) = rest.first() else {
            let name = path.last().cloned();
            return Some((module, name));
        };
        if depth > 16 {
            return Some((module, None));
        }
        if scope.defines.contains(name) {
            return Some((module, Some(name.clone())));
        }
        if let Some(item) = scope
            .uses
            .iter()
            .find(|u| !u.glob && u.name.as_ref() == Some(name))
        {
            let mut target = self.absolute(&module, &item.path)?;
            target.extend(rest[1..].iter().cloned());
            return self.resolve(&target, depth + 1);
        }
        for glob in scope.uses.iter().filter(|u| u.glob) {
            if let Some(mut target) = self.absolute(&module, &glob.path) {
                target.extend(rest.iter().cloned());
                if let Some(found @ (_, Some(_))) = self.resolve(&target, depth + 1) {
                    return Some(found);
                }
            }
        }
        Some((module, None))
    }

    /// What each module imports: the defining module of every path it
    /// names, with the names taken from it.
    pub(super) fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (module, scope) in &self.scopes {
            let written = scope.uses.iter().map(|u| &u.path).chain(scope.paths.iter());
            for path in written {
                let first = path.first().map(String::as_str);
                let named_here = scope.uses.iter().any(|u| u.name.as_deref() == first);
                let from_root = matches!(first, Some("crate" | "super" | "self"));
                if !(from_root || named_here || scope.uses.iter().any(|u| &u.path == path)) {
                    continue;
                }
                let Some(absolute) = self.absolute(module, path) else {
                    continue;
                };
                let Some((target, found)) = self.resolve(&absolute, 0) else {
                    continue;
                };
                let root = self.roots.get(module).map_or("", String::as_str);
                if target == *module
                    || target.is_empty()
                    || target == root
                    || module.is_empty()
                    || target.starts_with(&format!("{module}::"))
                {
                    continue;
                }
                let name = found.or_else(|| path.last().cloned()).unwrap_or_default();
                edges
                    .entry(module.clone())
                    .or_default()
                    .entry(target)
                    .or_default()
                    .insert(name);
            }
        }
        edges
    }
}
