//! Issue 25, items 2 and 8, as an agent meets them through the SDK's
//! client: each tool's description names every field of its answer (the
//! verb table's answer type) and the real defaults, and says how to type
//! keys; and every bound and enum of an input schema is what the validation
//! does, read off the schemas themselves: a value at a bound is taken, one
//! past it refused (invalid params or `INVALID_INPUT`), a word outside an
//! enum refused.

use rmcp::model::Tool;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::{Mcp, params, text};
use crate::cli::Cli;
use crate::support::within;

/// The fields of an answer schema's object (an array's items').
fn answer_fields(schema: &Value) -> Vec<String> {
    let object = if schema["type"] == "array" {
        &schema["items"]
    } else {
        schema
    };
    let object = match object["$ref"].as_str() {
        Some(reference) => &schema["$defs"][reference.trim_start_matches("#/$defs/")],
        None => object,
    };
    object["properties"]
        .as_object()
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn descriptions_name_every_answer_field_and_the_defaults() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let tools = mcp.client.list_all_tools().await.unwrap();
        let description = |name: &str| -> String {
            let tool = tools.iter().find(|tool| tool.name == name).unwrap();
            tool.description.as_deref().unwrap_or_default().to_owned()
        };
        for verb in tmux_engine::verbs::VERBS {
            let said = description(verb.tool);
            // A snapshot's fields are said once, by terminal_show.
            let said = if said.contains("snapshot") {
                description("terminal_show")
            } else {
                said
            };
            let answer = (verb.answer)(SchemaSettings::draft2020_12()).to_value();
            let fields = answer_fields(&answer);
            assert!(!fields.is_empty(), "{}: {answer}", verb.tool);
            for field in fields {
                assert!(
                    said.contains(&field),
                    "{}: {field} not in {said}",
                    verb.tool
                );
            }
        }
        // The real defaults, and keys in one line, where an agent types.
        let send = tools.iter().find(|t| t.name == "terminal_send").unwrap();
        let argument = |name: &str| {
            send.input_schema["properties"][name]["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert!(argument("wait").contains("`command` (the default"));
        assert!(argument("timeout_secs").contains("default 30 s"));
        let said = description("terminal_send");
        let keys = said
            .split(". ")
            .find(|sentence| sentence.starts_with("Keys by tmux name"))
            .unwrap_or_else(|| panic!("no keys line in {said}"));
        for key in ["\"Escape\"", "\"Enter\"", "\"C-c\""] {
            assert!(keys.contains(key), "{key} in {keys}");
        }
        let info = mcp.client.peer_info().unwrap();
        let instructions = info.instructions.as_deref().unwrap_or_default();
        assert!(instructions.contains(keys), "{instructions}");
        mcp.stop().await;
    })
    .await;
}

/// How a call came out, as far as its arguments go.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Refused for its arguments: invalid params or `INVALID_INPUT`.
    Refused(String),
    /// Anything else (a success, or another error such as `NO_TERMINAL`).
    Taken,
}

async fn outcome(mcp: &Mcp, tool: &str, args: &Map<String, Value>) -> Outcome {
    match mcp
        .client
        .call_tool(params(tool, Value::Object(args.clone())))
        .await
    {
        Err(rmcp::ServiceError::McpError(error)) if error.code.0 == -32602 => {
            Outcome::Refused(error.message.to_string())
        }
        Err(other) => panic!("{tool} {args:?}: {other:?}"),
        Ok(result) if text(&result).starts_with("INVALID_INPUT") => Outcome::Refused(text(&result)),
        Ok(result) => {
            // A terminal spawned at a bound is not kept.
            if tool == "terminal_spawn" && result.is_error == Some(false) {
                let snapshot: Value = serde_json::from_str(&text(&result)).unwrap();
                let kill = json!({"terminal": snapshot["id"]});
                mcp.ok("terminal_kill", kill).await;
            }
            Outcome::Taken
        }
    }
}

/// The arguments every call of `tool` carries besides the one under test;
/// `cursor` is one of `terminal`'s (a read's `format` goes with `since`).
fn base(tool: &str, terminal: &str, cursor: &str, property: &str) -> Map<String, Value> {
    let args = match tool {
        "terminal_spawn" => {
            // `cols` and `rows` come together: the other one at 1, so a
            // side at its bound stays within the cells a screen may have.
            let partner = match property {
                "cols" => json!({"rows": 1}),
                "rows" => json!({"cols": 1}),
                _ => json!({}),
            };
            let mut args = json!({"command": ["sleep", "60"]});
            args.as_object_mut()
                .unwrap()
                .extend(partner.as_object().unwrap().clone());
            if property == "shell" || property == "command" {
                args.as_object_mut().unwrap().remove("command");
            }
            args
        }
        "terminal_list" => json!({}),
        "terminal_read" if property == "format" => json!({"terminal": terminal, "since": cursor}),
        "terminal_search" => json!({"regex": "x", "terminal": terminal}),
        "terminal_signal" => json!({"terminal": terminal, "signal": "WINCH"}),
        "terminal_rename" => json!({"terminal": terminal, "name": "renamed"}),
        "terminal_wait" => json!({"terminal": terminal, "exit": true, "timeout_secs": 0}),
        _ => json!({"terminal": terminal}),
    };
    let Value::Object(args) = args else {
        unreachable!()
    };
    args
}

/// The values at each bound of `schema` and just past it.
fn bounds(schema: &Value) -> Vec<(Value, Value)> {
    let mut cases = Vec::new();
    let number = |key: &str| schema[key].as_i64();
    if let Some(min) = number("minimum") {
        cases.push((json!(min), json!(min - 1)));
    }
    if let Some(max) = number("maximum") {
        cases.push((json!(max), json!(max + 1)));
    }
    let string = |n: u64| Value::from("a".repeat(usize::try_from(n).unwrap()));
    if let Some(min) = schema["minLength"].as_u64() {
        cases.push((string(min), string(min - 1)));
    }
    if let Some(max) = schema["maxLength"].as_u64() {
        cases.push((string(max), string(max + 1)));
    }
    if schema["minItems"] == 1 {
        cases.push((json!(["sleep", "60"]), json!([])));
    }
    if schema["items"]["minLength"] == 1 {
        cases.push((json!(["a"]), json!([""])));
    }
    if let Some(words) = schema["enum"].as_array() {
        cases.push((words[0].clone(), json!("no-such-word")));
    }
    cases
}

#[tokio::test]
async fn input_schema_bounds_and_enums_are_what_validation_does() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let spawned = json!({"name": "bounded", "command": ["cat"]});
        let spawned = mcp.ok("terminal_spawn", spawned).await;
        let terminal = spawned["id"].as_str().unwrap().to_owned();
        let sent = json!({"terminal": terminal, "text": "", "wait": "stdin"});
        let sent = mcp.ok("terminal_send", sent).await;
        let cursor = sent["cursor"].as_str().unwrap().to_owned();
        let tools: Vec<Tool> = mcp.client.list_all_tools().await.unwrap();
        let mut checked = 0;
        for tool in &tools {
            let name = tool.name.as_ref();
            if name == "terminal_kill" {
                continue;
            }
            let properties = tool.input_schema["properties"].as_object().unwrap();
            for (property, schema) in properties {
                for (at, past) in bounds(schema) {
                    let mut args = base(name, &terminal, &cursor, property);
                    args.insert(property.clone(), at.clone());
                    let taken = outcome(&mcp, name, &args).await;
                    assert_eq!(taken, Outcome::Taken, "{name} {property} = {at}");
                    args.insert(property.clone(), past.clone());
                    let refused = outcome(&mcp, name, &args).await;
                    assert!(
                        matches!(refused, Outcome::Refused(_)),
                        "{name} {property} = {past}: {refused:?}"
                    );
                    checked += 1;
                }
            }
        }
        // Every bound and enum the schemas state: 24 in today's tools/list.
        assert!(checked >= 24, "{checked}");
        mcp.stop().await;
    })
    .await;
}
