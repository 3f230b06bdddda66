//! The OpenAPI 3.1 document of the route table (`mod.rs`): operations,
//! parameters, bodies and answers from the verb layer's schemas, and the
//! reshaping those schemas need for client generators (string enums, the
//! rules JSON Schema cannot state). Apart from the table because it only
//! reads it: a route is added there, never here.

use axum::http::Method;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::{routes, schema};
use crate::bridge::api::ErrorBody;
use crate::verbs::SchemaFn;
use crate::vocab::MAX_CELLS;

/// The OpenAPI 3.1 document of [`routes`], served under `base_path`.
pub(super) fn document(base_path: &str) -> Value {
    let settings = SchemaSettings::draft2020_12().with(|settings| {
        settings.inline_subschemas = true;
        settings.meta_schema = None;
    });
    let generate = |schema: SchemaFn| {
        let mut value = schema(settings.clone()).to_value();
        if let Some(object) = value.as_object_mut() {
            object.remove("title");
        }
        string_enums(&mut value);
        value
    };
    let error = json!({
        "description": "An error: its stable code and a message.",
        "content": {"application/json": {"schema": generate(schema::<ErrorBody>)}}
    });
    let mut paths = Map::new();
    for route in routes() {
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(route.operation));
        operation.insert("summary".into(), json!(route.summary));
        if route.public {
            operation.insert("security".into(), json!([]));
        }
        if let Some(description) = route.description {
            operation.insert("description".into(), json!(description));
        }
        let targeted = route.path.contains("{t}");
        let mut parameters = Vec::new();
        if targeted {
            parameters.push(json!({
                "name": "t", "in": "path", "required": true,
                "description": "Terminal id or name.", "schema": {"type": "string"}
            }));
        }
        if route.path.contains("{id}") {
            parameters.push(json!({
                "name": "id", "in": "path", "required": true,
                "description": "The link's id, as `GET /api/links` lists it.",
                "schema": {"type": "string"}
            }));
        }
        // Rules a 400 (INVALID_INPUT) enforces that JSON Schema cannot
        // state; each is named in that operation's documented 400.
        let mut unstated = Vec::new();
        if let Some(query) = route.query {
            for (name, property, required) in properties(&generate(query)) {
                if name == "regex" {
                    unstated
                        .push("a regex that does not compile in Rust `regex` syntax".to_string());
                }
                if name != "terminal" {
                    parameters.push(json!({
                        "name": name, "in": "query", "required": required, "schema": property
                    }));
                }
            }
        }
        if !parameters.is_empty() {
            operation.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some(body) = route.body {
            let mut body = generate(body);
            if body["properties"]["cols"].is_object() {
                unstated.push(format!(
                    "a size whose cols x rows exceeds {MAX_CELLS} cells (each side is \
                     at most 1000 in the schema, which cannot state their product)"
                ));
            }
            if targeted {
                without_terminal(&mut body);
            }
            operation.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": body}}}),
            );
        }
        let bytes = json!({"application/octet-stream": {
            "schema": {"type": "string", "contentMediaType": "application/octet-stream"}
        }});
        if route.bytes && route.method == Method::PUT {
            // No body is a body of no bytes: an empty file.
            operation.insert(
                "requestBody".into(),
                json!({"required": false, "description": "The file's bytes (none: an empty file).",
                       "content": bytes}),
            );
        }
        let (status, answer) = route.answer;
        let mut success = json!({"description": route.summary});
        if let Some(answer) = answer {
            success["content"] = json!({"application/json": {"schema": generate(answer)}});
        } else if route.bytes {
            success["content"] = bytes;
        }
        let mut responses = json!({ status.to_string(): success, "default": error.clone() });
        if status == 101 {
            // A request that is no WebSocket upgrade is refused before the
            // route runs, by axum's extractor, in plain text.
            responses["400"] = json!({
                "description": "Not a WebSocket upgrade.",
                "content": {"text/plain": {"schema": {"type": "string"}}}
            });
        }
        if !unstated.is_empty() {
            responses["400"] = json!({
                "description": format!(
                    "INVALID_INPUT, among others for what JSON Schema cannot state: {}.",
                    unstated.join("; ")
                ),
                "content": error["content"].clone()
            });
        }
        operation.insert("responses".into(), responses);
        let methods = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        methods[route.method.as_str().to_ascii_lowercase()] = Value::Object(operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "tmux-engine serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Persistent terminals over HTTP: the same verbs, rules and JSON as \
                            the CLI's --json and the MCP tools."
        },
        "servers": [{"url": if base_path.is_empty() { "/" } else { base_path }}],
        "security": [{"bearer": []}],
        "components": {"securitySchemes": {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "A token, or a session from POST /api/session; never a query \
                            parameter or a cookie."
        }}},
        "paths": paths,
    })
}

/// Every `oneOf` of single strings made a string `enum`, in place: the
/// form code generators read. schemars writes an enum whose variants have
/// docs as a `oneOf` of `{"const": "idle", "description": ...}` (valid
/// JSON Schema), which openapi-python-client 0.29 turned into a literal
/// type that refused every value but the first. The variants' docs are
/// kept: one line each in the schema's description, and in order in
/// `x-enum-descriptions` (openapi-generator's extension).
fn string_enums(schema: &mut Value) {
    match schema {
        Value::Array(items) => items.iter_mut().for_each(string_enums),
        Value::Object(object) => {
            object.values_mut().for_each(string_enums);
            let Some(Value::Array(members)) = object.get("oneOf") else {
                return;
            };
            let Some(variants) = members.iter().map(one_string).collect::<Option<Vec<_>>>() else {
                return;
            };
            let mut lines: Vec<String> = object
                .get("description")
                .and_then(Value::as_str)
                .map(|text| vec![text.to_owned(), String::new()])
                .unwrap_or_default();
            lines.extend(
                variants
                    .iter()
                    .filter(|(_, doc)| !doc.is_empty())
                    .map(|(value, doc)| format!("- `{value}`: {doc}")),
            );
            let docs: Vec<&str> = variants.iter().map(|(_, doc)| doc.as_str()).collect();
            let values: Vec<&str> = variants.iter().map(|(value, _)| value.as_str()).collect();
            let (values, docs) = (json!(values), json!(docs));
            object.remove("oneOf");
            object.insert("type".into(), json!("string"));
            object.insert("enum".into(), values);
            if docs.as_array().is_some_and(|d| d.iter().any(|d| d != "")) {
                object.insert("description".into(), json!(lines.join("\n")));
                object.insert("x-enum-descriptions".into(), docs);
            }
        }
        _ => {}
    }
}

/// `(value, its description)` of a `oneOf` member that allows one string
/// and says nothing else (`{"const": "x"}` or `{"enum": ["x"]}`, with
/// `"type": "string"` and a description at most).
fn one_string(member: &Value) -> Option<(String, String)> {
    let object = member.as_object()?;
    let plain = object
        .keys()
        .all(|key| matches!(key.as_str(), "const" | "enum" | "type" | "description"));
    if !plain || object.get("type").is_some_and(|t| t != "string") {
        return None;
    }
    let value = match (object.get("const"), object.get("enum")) {
        (Some(Value::String(value)), None) => value.clone(),
        (None, Some(Value::Array(values))) if values.len() == 1 => values[0].as_str()?.to_owned(),
        _ => return None,
    };
    let doc = object
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    Some((value, doc.to_owned()))
}

/// A schema's properties: name, schema, required.
fn properties(value: &Value) -> Vec<(String, Value, bool)> {
    let required: Vec<&str> = value["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    value["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    (
                        name.clone(),
                        property.clone(),
                        required.contains(&name.as_str()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Drops `terminal` from a body's schema: the path names it.
fn without_terminal(schema: &mut Value) {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.remove("terminal");
    }
    if let Some(required) = schema["required"].as_array_mut() {
        required.retain(|name| name != "terminal");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::verbs::VERBS;

    #[test]
    fn every_route_is_in_the_document() {
        let document = document("");
        assert_eq!(document["openapi"], "3.1.0");
        let routes = routes();
        let mut operations = 0;
        for route in &routes {
            let method = route.method.as_str().to_ascii_lowercase();
            let operation = &document["paths"][route.path][&method];
            assert_eq!(
                operation["operationId"], route.operation,
                "{method} {}",
                route.path
            );
            operations += 1;
        }
        let documented: usize = document["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|methods| methods.as_object().unwrap().len())
            .sum();
        assert_eq!(documented, operations);
    }

    #[test]
    fn the_rules_a_schema_cannot_state_have_a_documented_400() {
        let document = document("");
        let spawn = &document["paths"]["/api/terminals"]["post"]["responses"]["400"];
        let text = spawn["description"].as_str().unwrap_or_default();
        assert!(text.contains(&MAX_CELLS.to_string()), "{spawn}");
        assert!(spawn["content"]["application/json"]["schema"].is_object());
        let search = &document["paths"]["/api/search"]["get"]["responses"]["400"];
        let text = search["description"].as_str().unwrap_or_default();
        assert!(text.contains("regex"), "{search}");
        // A body without a size gets no such 400.
        let send = &document["paths"]["/api/terminals/{t}/send"]["post"]["responses"];
        assert!(send["400"].is_null(), "{send}");
    }

    #[test]
    fn bodies_come_from_the_verb_types() {
        let document = document("/prefix");
        assert_eq!(document["servers"][0]["url"], "/prefix");
        let spawn = &document["paths"]["/api/terminals"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"];
        for field in [
            "name", "command", "cwd", "env", "cols", "rows", "restart", "role",
        ] {
            assert!(spawn["properties"].get(field).is_some(), "{field}: {spawn}");
        }
        let send = &document["paths"]["/api/terminals/{t}/send"]["post"];
        let body = &send["requestBody"]["content"]["application/json"]["schema"];
        assert!(body["properties"].get("terminal").is_none(), "{body}");
        // `text` or `keys` (or neither: a send that only waits).
        assert_eq!(body["required"], json!([]), "{body}");
        assert!(body["properties"].get("keys").is_some(), "{body}");
        let answer = &send["responses"]["200"]["content"]["application/json"]["schema"];
        assert!(
            answer["properties"].get("wait_reason").is_some(),
            "{answer}"
        );
        let read = &document["paths"]["/api/terminals/{t}/scrollback"]["get"]["parameters"];
        let names: Vec<&str> = read
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "t",
                "count",
                "format",
                "max_bytes",
                "max_lines",
                "offset",
                "since"
            ]
        );
    }

    /// A verb's route is described by its verb-table entry, the text its
    /// MCP tool carries, and states the real default: a send waits for
    /// `command` (the route said `idle`) and answers `exit_code`.
    #[test]
    fn routes_are_described_by_the_verb_table() {
        let document = document("");
        for verb in VERBS {
            let Some(route) = verb.route else { continue };
            let method = route.method.to_ascii_lowercase();
            let operation = &document["paths"][route.path][&method];
            assert_eq!(operation["summary"], verb.summary, "{}", verb.name);
            assert_eq!(operation["description"], verb.description, "{}", verb.name);
            assert!(
                operation["responses"][route.status.to_string()].is_object(),
                "{}",
                verb.name
            );
        }
        let send = &document["paths"]["/api/terminals/{t}/send"]["post"];
        let summary = send["summary"].as_str().unwrap();
        assert!(summary.contains("default `command`"), "{summary}");
        assert!(!summary.contains("idle"), "{summary}");
        for text in [summary, send["description"].as_str().unwrap()] {
            assert!(text.contains("exit_code"), "{text}");
        }
    }

    /// Every JSON answer has a real schema (not `true`, "any value"), and
    /// the registry's types show their fields.
    #[test]
    fn answers_have_schemas() {
        let document = document("");
        let answer = |path: &str, method: &str, status: &str| {
            let schema = &document["paths"][path][method]["responses"][status]["content"]["application/json"]
                ["schema"];
            assert!(schema.is_object(), "{method} {path}: {schema}");
            schema.clone()
        };
        let list = answer("/api/terminals", "get", "200");
        assert_eq!(list["type"], "array", "{list}");
        let snapshot = &list["items"];
        for field in ["id", "owner", "kind", "status", "restart", "restarts"] {
            assert!(
                snapshot["properties"].get(field).is_some(),
                "{field}: {snapshot}"
            );
        }
        let status = &snapshot["properties"]["status"];
        assert!(status.to_string().contains("exited"), "{status}");
        assert_eq!(answer("/api/terminals", "post", "201"), *snapshot);
        // `show` is the snapshot and whether its shell integration works.
        let shown = answer("/api/terminals/{t}", "get", "200");
        for (field, schema) in snapshot["properties"].as_object().unwrap() {
            assert_eq!(&shown["properties"][field], schema, "{field}");
        }
        assert_eq!(shown["required"], snapshot["required"]);
        assert!(shown["properties"]["shell_integration"].is_object());
        for (path, fields) in [
            ("/api/terminals/{t}/signal", &["signal", "pgid"][..]),
            (
                "/api/terminals/{t}/screen",
                &["lines", "cols", "rows", "cursor"][..],
            ),
            (
                "/api/terminals/{t}/scrollback",
                &["lines", "total_lines", "range", "truncated"][..],
            ),
            (
                "/api/terminals/{t}/commands",
                &["commands", "known_from", "unknown_ended", "total"][..],
            ),
        ] {
            let method = if path.ends_with("signal") {
                "post"
            } else {
                "get"
            };
            let schema = answer(path, method, "200");
            for field in fields {
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{path} {field}: {schema}"
                );
            }
        }
    }

    /// Enums are in the form client generators read: a string
    /// `enum` with the variants' descriptions kept, never a `oneOf` of
    /// single strings anywhere in the document.
    #[test]
    fn enums_are_string_enums_with_their_descriptions() {
        fn walk(value: &Value, path: &str) {
            match value {
                Value::Object(object) => {
                    if let Some(Value::Array(members)) = object.get("oneOf") {
                        assert!(
                            !members.iter().all(|m| one_string(m).is_some()),
                            "{path}: a oneOf of single strings: {value}"
                        );
                    }
                    for (key, inner) in object {
                        walk(inner, &format!("{path}/{key}"));
                    }
                }
                Value::Array(items) => {
                    for (i, inner) in items.iter().enumerate() {
                        walk(inner, &format!("{path}/{i}"));
                    }
                }
                _ => {}
            }
        }
        let document = document("");
        walk(&document, "");
        let send = &document["paths"]["/api/terminals/{t}/send"]["post"]["responses"]["200"]["content"]
            ["application/json"]["schema"]["properties"];
        let reason = &send["wait_reason"];
        assert_eq!(reason["type"], "string", "{reason}");
        let values = reason["enum"].as_array().expect("an enum");
        assert!(values.contains(&json!("command")), "{reason}");
        assert!(values.contains(&json!("stdin_read")), "{reason}");
        let docs = reason["x-enum-descriptions"].as_array().expect("its docs");
        assert_eq!(docs.len(), values.len(), "{reason}");
        let description = reason["description"].as_str().expect("a description");
        assert!(description.contains("- `stdin_read`: "), "{description}");
        // An optional enum: the enum, or null.
        let wait = &document["paths"]["/api/terminals/{t}/send"]["post"]["requestBody"]["content"]
            ["application/json"]["schema"]["properties"]["wait"];
        assert_eq!(wait["anyOf"][0]["type"], "string", "{wait}");
        assert_eq!(wait["anyOf"][0]["enum"][1], "stdin", "{wait}");
        assert_eq!(wait["anyOf"][1]["type"], "null", "{wait}");
    }

    /// A `oneOf` whose members are not all single strings (a tagged
    /// object, a number) stays as it is.
    #[test]
    fn only_single_string_unions_become_enums() {
        let mut mixed = json!({"oneOf": [{"const": "a"}, {"type": "object", "properties": {}}]});
        let before = mixed.clone();
        string_enums(&mut mixed);
        assert_eq!(mixed, before);
        let mut plain = json!({"oneOf": [{"const": "a", "type": "string"}, {"enum": ["b"]}]});
        string_enums(&mut plain);
        assert_eq!(plain, json!({"type": "string", "enum": ["a", "b"]}));
    }
}
