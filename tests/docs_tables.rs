//! The docs' tables against the code: the MCP tool table of
//! `docs/agents.md` against the verb table (each tool, its arguments and
//! its answer's fields) and its annotations' table (each hint), the
//! README's list of tools, and the HTTP route
//! table of `docs/serve.md` against the routes a real `serve` serves (its
//! OpenAPI document, and the page's and probes' routes answering). A tool,
//! an argument, a field or a route missing from a table, or named there
//! but not served, fails with its name. The README and the architecture
//! page keep their length bounds.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use regex::Regex;
use schemars::generate::SchemaSettings;
use serde_json::Value;
use tmux_engine::verbs::VERBS;

use crate::bridge::Served;
use crate::support::within;

fn doc(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows of the first table whose header starts with the cells `head`,
/// each split into its cells (a `\|` inside a cell is not a separator).
fn table(text: &str, head: &[&str]) -> Vec<Vec<String>> {
    let split = |line: &str| -> Vec<String> {
        let mut cells = Vec::new();
        let mut cell = String::new();
        let mut chars = line.trim().trim_start_matches('|').chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'|') => {
                    cell.push('|');
                    chars.next();
                }
                '|' => cells.push(std::mem::take(&mut cell).trim().to_owned()),
                _ => cell.push(c),
            }
        }
        cells
    };
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|line| {
            line.starts_with('|')
                && split(line)
                    .iter()
                    .map(String::as_str)
                    .take(head.len())
                    .eq(head.iter().copied())
        })
        .unwrap_or_else(|| panic!("no table headed {head:?}"));
    lines[start + 2..]
        .iter()
        .take_while(|line| line.starts_with('|'))
        .map(|line| split(line))
        .collect()
}

/// `text` without what parentheses enclose (the explanations).
fn outside_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

/// The top-level field names a `{a, b: [...], c}` list names, for every
/// such list in `text` outside parentheses.
fn braced_fields(text: &str) -> BTreeSet<String> {
    // What each outermost list holds at its own depth, lists joined by commas.
    let mut top = String::new();
    let mut depth = 0usize;
    for c in outside_parentheses(text).chars() {
        match c {
            '{' | '[' => {
                depth += 1;
                if depth == 1 {
                    top.push(',');
                }
            }
            '}' | ']' => depth = depth.saturating_sub(1),
            c if depth == 1 => top.push(c),
            _ => {}
        }
    }
    top.split(',')
        .filter_map(|item| {
            let name: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// A schema's top-level property names, through `$ref`, `allOf`, `anyOf`
/// and `oneOf` (a flattened or optional part).
fn properties(schema: &Value, root: &Value, into: &mut BTreeSet<String>) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap();
        properties(&root["$defs"][name], root, into);
    }
    if let Some(map) = schema.get("properties").and_then(Value::as_object) {
        into.extend(map.keys().cloned());
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for part in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            properties(part, root, into);
        }
    }
}

fn schema_properties(schema: Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    properties(&schema, &schema, &mut names);
    let required = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_owned))
        .collect();
    (names, required)
}

fn differ(what: &str, documented: &BTreeSet<String>, real: &BTreeSet<String>) -> Vec<String> {
    let mut errors = Vec::new();
    for name in real.difference(documented) {
        errors.push(format!("{what}: `{name}` is missing from the docs"));
    }
    for name in documented.difference(real) {
        errors.push(format!("{what}: `{name}` is documented but not there"));
    }
    errors
}

/// docs/agents.md's tool table: every tool of the verb table, each
/// argument with `?` exactly when optional, and each answer's fields.
#[test]
fn the_tool_table_is_the_verb_table() {
    let rows = table(&doc("docs/agents.md"), &["tool", "arguments"]);
    let ticked = Regex::new(r"`([a-z_]+)(\?)?`").unwrap();
    let mut errors = Vec::new();
    let documented: BTreeSet<String> = rows
        .iter()
        .filter_map(|row| ticked.captures(&row[0]).map(|c| c[1].to_owned()))
        .collect();
    let tools: BTreeSet<String> = VERBS.iter().map(|verb| verb.tool.to_owned()).collect();
    errors.extend(differ("tools", &documented, &tools));
    for row in &rows {
        let Some(verb) = ticked
            .captures(&row[0])
            .and_then(|c| VERBS.iter().find(|verb| verb.tool == &c[1]))
        else {
            continue;
        };
        assert_eq!(
            row.len(),
            3,
            "{}: a row is tool | arguments | result",
            verb.tool
        );
        let (arguments, required) =
            schema_properties((verb.request)(SchemaSettings::draft2020_12()).to_value());
        let mut named = BTreeSet::new();
        for c in ticked.captures_iter(&outside_parentheses(&row[1])) {
            let name = c[1].to_owned();
            let optional = c.get(2).is_some();
            if arguments.contains(&name) && optional == required.contains(&name) {
                errors.push(format!(
                    "{}: `{name}` is {} but documented {}",
                    verb.tool,
                    if optional { "required" } else { "optional" },
                    if optional { "with `?`" } else { "without `?`" },
                ));
            }
            named.insert(name);
        }
        errors.extend(differ(
            &format!("{} arguments", verb.tool),
            &named,
            &arguments,
        ));
        let answer = (verb.answer)(SchemaSettings::draft2020_12().for_serialize()).to_value();
        if answer["type"] == "array" || !row[2].contains('{') {
            // An array of snapshots, or "the snapshot, as terminal_show".
            assert!(
                row[2].contains("`terminal_show`"),
                "{}: a result without its fields names terminal_show's",
                verb.tool
            );
            continue;
        }
        let (fields, _) = schema_properties(answer);
        errors.extend(differ(
            &format!("{} result", verb.tool),
            &braced_fields(&row[2]),
            &fields,
        ));
    }
    // The annotations' table: every tool, each hint as the verb's.
    let hints = table(&doc("docs/agents.md"), &["tool", "readOnly"]);
    let listed: BTreeSet<String> = hints
        .iter()
        .filter_map(|row| ticked.captures(&row[0]).map(|c| c[1].to_owned()))
        .collect();
    errors.extend(differ("annotations", &listed, &tools));
    for row in &hints {
        let Some(verb) = ticked
            .captures(&row[0])
            .and_then(|c| VERBS.iter().find(|verb| verb.tool == &c[1]))
        else {
            continue;
        };
        let real = [
            verb.read_only,
            verb.destructive,
            verb.idempotent,
            verb.open_world,
        ];
        for ((name, cell), real) in ["readOnly", "destructive", "idempotent", "openWorld"]
            .iter()
            .zip(&row[1..])
            .zip(real)
        {
            if (cell == "yes") != real {
                errors.push(format!(
                    "{}: {name} is {real}, documented {cell}",
                    verb.tool
                ));
            }
        }
    }
    // The README names every tool, and no other.
    let readme = doc("README.md");
    let named: BTreeSet<String> = Regex::new(r"\bterminal_[a-z]+\b")
        .unwrap()
        .find_iter(&readme)
        .map(|m| m.as_str().to_owned())
        .collect();
    errors.extend(differ("README's tools", &named, &tools));
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// docs/serve.md's route table: every route of a real serve's OpenAPI
/// document and no other under `/api/`; the page's and the probes' routes
/// answer.
#[tokio::test]
async fn the_route_table_is_what_serve_serves() {
    within(async {
        let rows = table(&doc("docs/serve.md"), &["route"]);
        let route = Regex::new(r"\b(GET|POST|PUT|DELETE|PATCH) (/[^\s?`]*)").unwrap();
        let documented: BTreeSet<String> = rows
            .iter()
            .flat_map(|row| {
                route
                    .captures_iter(&row[0])
                    .map(|c| format!("{} {}", &c[1], &c[2]))
                    .collect::<Vec<_>>()
            })
            .collect();
        let served = Served::start(&[]).await;
        let (status, document) = served.get("/api/openapi.json").await;
        assert_eq!(status, 200, "{document}");
        let mut api = BTreeSet::new();
        for (path, operations) in document["paths"].as_object().unwrap() {
            for method in operations.as_object().unwrap().keys() {
                api.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
        for verb in VERBS {
            if let Some(route) = verb.route {
                let name = format!("{} {}", route.method, route.path);
                assert!(
                    api.contains(&name),
                    "the verb {}'s {name} is not served",
                    verb.name
                );
            }
        }
        let documented_api: BTreeSet<String> = documented
            .iter()
            .filter(|name| name.split(' ').nth(1).unwrap().starts_with("/api/"))
            .cloned()
            .collect();
        let mut errors = differ("routes", &documented_api, &api);
        // The rest: the page, its assets and the probes, each answering
        // where a path that is no route does not.
        let (status, _) = served.get("/no-such-route").await;
        assert_eq!(
            status, 404,
            "an unknown path must answer 404 for this check to mean anything"
        );
        let (_, page) = served.get("/").await;
        let page = page.as_str().map(str::to_owned).unwrap_or_default();
        let asset = Regex::new(r"assets/([A-Za-z0-9._-]+)").unwrap();
        for name in documented.difference(&documented_api) {
            let (method, path) = name.split_once(' ').unwrap();
            let path = if path == "/assets/{name}" {
                let Some(found) = asset.captures(&page) else {
                    errors.push(format!("routes: the page names no asset for `{name}`"));
                    continue;
                };
                format!("/assets/{}", &found[1])
            } else {
                path.to_owned()
            };
            let request = served.request(method.parse().unwrap(), &path);
            let (status, body) = served.call(request).await;
            if status == 404 || status == 405 {
                errors.push(format!(
                    "routes: `{name}` is documented but answers {status}: {body}"
                ));
            }
        }
        assert!(errors.is_empty(), "{}", errors.join("\n"));
    })
    .await;
}

/// The two pages a newcomer reads first stay short enough to read in one
/// sitting: the README a guide (≤ 400 lines, details in `docs/`), the
/// architecture page the layers as they are (≤ 300). Both drifted past
/// their bound unnoticed when several changes each added a few lines.
#[test]
fn the_readme_and_the_architecture_page_stay_short() {
    for (path, most) in [("README.md", 400), ("docs/architecture.md", 300)] {
        let lines = doc(path).lines().count();
        assert!(
            lines <= most,
            "{path} is {lines} lines, more than {most}: move detail to docs/"
        );
    }
}
