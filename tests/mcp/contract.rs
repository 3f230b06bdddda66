//! What an MCP client is promised before any terminal runs: the tools and
//! their schemas (the verb layer's requests), invalid arguments as the
//! protocol's invalid params, and names refused like every other face.

use serde_json::{Value, json};

use super::{Mcp, TOOLS, params};
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn tools_are_listed_with_their_schemas() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let info = mcp.client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "tmux-engine");
        assert!(info.capabilities.tools.is_some());
        let tools = mcp.client.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(names, TOOLS);
        let schema = |name: &str| {
            let tool = tools.iter().find(|tool| tool.name == name).unwrap();
            assert!(tool.description.as_ref().is_some_and(|d| !d.is_empty()));
            Value::Object((*tool.input_schema).clone())
        };
        let keys = |schema: &Value| {
            let mut keys: Vec<String> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            keys.sort_unstable();
            keys
        };
        let cases: [(&str, &[&str], &[&str]); 11] = [
            (
                "terminal_spawn",
                &[
                    "agent",
                    "cols",
                    "command",
                    "cwd",
                    "env",
                    "history_limit",
                    "keep_history",
                    "name",
                    "record",
                    "restart",
                    "resume_command",
                    "role",
                    "rows",
                    "shell",
                    "shell_integration",
                ],
                &[],
            ),
            ("terminal_list", &[], &[]),
            (
                "terminal_send",
                &[
                    "history",
                    "include_screen",
                    "keys",
                    "max_bytes",
                    "max_lines",
                    "submit",
                    "terminal",
                    "text",
                    "timeout_secs",
                    "wait",
                ],
                &["terminal"],
            ),
            (
                "terminal_read",
                &[
                    "count",
                    "format",
                    "max_bytes",
                    "max_lines",
                    "offset",
                    "since",
                    "terminal",
                ],
                &["terminal"],
            ),
            ("terminal_screen", &["terminal"], &["terminal"]),
            ("terminal_show", &["terminal"], &["terminal"]),
            (
                "terminal_search",
                &["context", "max_bytes", "max_matches", "regex", "terminal"],
                &["regex"],
            ),
            (
                "terminal_wait",
                &[
                    "command",
                    "exit",
                    "regex",
                    "since",
                    "terminal",
                    "text",
                    "timeout_secs",
                ],
                &["terminal"],
            ),
            ("terminal_commands", &["limit", "terminal"], &["terminal"]),
            (
                "terminal_signal",
                &["signal", "terminal"],
                &["signal", "terminal"],
            ),
            ("terminal_kill", &["terminal"], &["terminal"]),
        ];
        for (name, properties, required) in cases {
            let schema = schema(name);
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(keys(&schema), properties, "{name}");
            let mut got: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
                .unwrap_or_default();
            got.sort_unstable();
            assert_eq!(got, required, "{name}");
        }
        // The enums and the argv array are spelled out for the model.
        let spawn = schema("terminal_spawn").to_string();
        for word in ["never", "on-attach", "always", "array"] {
            assert!(spawn.contains(word), "{word} in {spawn}");
        }
        let send = schema("terminal_send").to_string();
        for word in ["idle", "stdin", "exit", "none"] {
            assert!(
                send.contains(word)
                    || tools.iter().any(|t| t.name == "terminal_send"
                        && t.description.as_ref().unwrap().contains(word)),
                "{word} in terminal_send"
            );
        }
        // What many tools share is said once, in the instructions.
        let instructions = info.instructions.as_deref().unwrap_or_default();
        assert!(send.contains("max_bytes"), "{send}");
        assert!(instructions.contains("`max_bytes`") && instructions.contains("64 KiB"));
        mcp.stop().await;
    })
    .await;
}

/// Issue 14, item 8: a name with a terminal id's shape, or with bidi or
/// zero-width characters, is refused like every other bad name.
#[tokio::test]
async fn id_shaped_and_invisible_names_are_invalid_input() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let real = mcp
            .ok(
                "terminal_spawn",
                json!({"name": "real", "command": ["sleep", "60"]}),
            )
            .await;
        let id = real["id"].as_str().unwrap();
        for name in [
            id,
            "t-1a2308edac7-b10a309c95b89d50",
            "evil\u{202E}txt",
            "a\u{200B}b",
            "\u{2067}x",
        ] {
            let error = mcp
                .error(
                    "terminal_spawn",
                    json!({"name": name, "command": ["sleep", "60"]}),
                )
                .await;
            assert!(error.starts_with("INVALID_INPUT: "), "{name:?}: {error}");
        }
        let list = mcp.ok("terminal_list", json!({})).await;
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        mcp.ok("terminal_kill", json!({"terminal": id})).await;
        mcp.stop().await;
    })
    .await;
}

/// Issue 14, item 11: arguments of the wrong type, unknown ones and
/// missing required ones are the protocol's invalid params (-32602), for
/// every tool, never a tool result.
#[tokio::test]
async fn invalid_arguments_are_json_rpc_invalid_params() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let cases = [
            ("terminal_spawn", json!({"name": 7})),
            ("terminal_spawn", json!({"command": "sh"})),
            ("terminal_spawn", json!({"cols": -1})),
            ("terminal_spawn", json!({"restart": "sometimes"})),
            ("terminal_spawn", json!({"bogus": true})),
            ("terminal_list", json!({"bogus": true})),
            ("terminal_send", json!({"terminal": "x", "keys": "Enter"})),
            ("terminal_send", json!({"terminal": "x", "text": 1})),
            (
                "terminal_send",
                json!({"terminal": "x", "text": "", "wait": "soon"}),
            ),
            ("terminal_read", json!({"terminal": "x", "count": "ten"})),
            ("terminal_read", json!({})),
            ("terminal_screen", json!({"terminal": ["x"]})),
            ("terminal_screen", json!({"terminal": "x", "extra": 1})),
            ("terminal_wait", json!({"terminal": "x", "exit": "yes"})),
            ("terminal_signal", json!({"terminal": "x"})),
            ("terminal_kill", json!({})),
        ];
        for (tool, args) in cases {
            let answer = mcp.client.call_tool(params(tool, args.clone())).await;
            match answer {
                Err(rmcp::ServiceError::McpError(error)) => {
                    assert_eq!(error.code.0, -32602, "{tool} {args}: {error:?}");
                }
                other => panic!("{tool} {args}: not invalid params: {other:?}"),
            }
        }
        // Still serving.
        mcp.ok("terminal_list", json!({})).await;
        mcp.stop().await;
    })
    .await;
}

/// Issue 17: every tool says what it may do (the four hints, so a harness
/// can auto-approve the read-only ones and ask before kill or signal) and
/// what it answers (an output schema from the verb layer's types).
#[tokio::test]
async fn every_tool_is_annotated_with_an_output_schema() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let tools = mcp.client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), TOOLS.len());
        let read_only = [
            "terminal_commands",
            "terminal_list",
            "terminal_read",
            "terminal_screen",
            "terminal_search",
            "terminal_show",
            "terminal_wait",
        ];
        for tool in &tools {
            let name = tool.name.as_ref();
            let hints = tool
                .annotations
                .as_ref()
                .unwrap_or_else(|| panic!("{name}"));
            let all = [
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
                hints.open_world_hint,
            ];
            assert!(all.iter().all(Option::is_some), "{name}: {hints:?}");
            assert_eq!(
                hints.read_only_hint,
                Some(read_only.contains(&name)),
                "{name}"
            );
            let destructive = ["terminal_kill", "terminal_send", "terminal_signal"];
            assert_eq!(
                hints.destructive_hint,
                Some(destructive.contains(&name)),
                "{name}"
            );
            // The client negotiated an older protocol than SEP-2106's, so
            // only object schemas survive: every tool but the list's array.
            if name != "terminal_list" {
                let schema = tool
                    .output_schema
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}"));
                assert_eq!(schema["type"], "object", "{name}");
                // A snapshot's shape is said once, by terminal_show; spawn
                // and rename still require its fields.
                let shaped = !schema["properties"].as_object().unwrap().is_empty();
                let required = schema["required"].as_array().is_some_and(|r| !r.is_empty());
                assert!(shaped || required, "{name}");
            }
        }
        // The schema has the fields always there; the description names
        // every field (issue 25, item 2).
        let send = tools.iter().find(|t| t.name == "terminal_send").unwrap();
        let properties = &send.output_schema.as_ref().unwrap()["properties"];
        for key in ["output", "wait_reason", "status", "truncated", "typed"] {
            assert!(properties.get(key).is_some(), "{key}: {properties}");
        }
        let description = send.description.as_deref().unwrap();
        for key in [
            "exit_code",
            "viewport",
            "commands",
            "cursor",
            "not_typed_reason",
        ] {
            assert!(description.contains(key), "{key}: {description}");
        }
        mcp.stop().await;
    })
    .await;
}

/// Issue 25, item 1: the whole `tools/list` result, as the client got it,
/// fits the budget every agent pays in its context.
#[tokio::test]
async fn the_tool_list_is_small() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let tools = mcp.client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), TOOLS.len());
        let list = rmcp::model::ListToolsResult::with_all_items(tools);
        let bytes = serde_json::to_vec(&list).unwrap().len();
        assert!(bytes <= tmux_engine::mcp::TOOL_LIST_BUDGET, "{bytes} bytes");
        mcp.stop().await;
    })
    .await;
}

/// Issue 17: `--read-only` offers only the tools that change nothing;
/// `--tools` and `--exclude-tools` narrow further; a tool that is not
/// offered cannot be called either.
#[tokio::test]
async fn the_tool_set_can_be_narrowed() {
    let cli = Cli::new();
    within(async {
        let cases: [(&[&str], &[&str]); 4] = [
            (
                &["--read-only"],
                &[
                    "terminal_commands",
                    "terminal_list",
                    "terminal_read",
                    "terminal_screen",
                    "terminal_search",
                    "terminal_show",
                    "terminal_wait",
                ],
            ),
            (
                &["--tools", "list,terminal_read"],
                &["terminal_list", "terminal_read"],
            ),
            (
                &["--read-only", "--exclude-tools", "wait,screen"],
                &[
                    "terminal_commands",
                    "terminal_list",
                    "terminal_read",
                    "terminal_search",
                    "terminal_show",
                ],
            ),
            (
                &["--exclude-tools", "terminal_kill,signal,spawn,send"],
                &[
                    "terminal_commands",
                    "terminal_list",
                    "terminal_read",
                    "terminal_rename",
                    "terminal_screen",
                    "terminal_search",
                    "terminal_show",
                    "terminal_wait",
                ],
            ),
        ];
        for (flags, want) in cases {
            let mcp = Mcp::start_with(&cli, flags).await;
            let tools = mcp.client.list_all_tools().await.unwrap();
            let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
            names.sort_unstable();
            assert_eq!(names, want, "{flags:?}");
            if !want.contains(&"terminal_spawn") {
                let refused = mcp
                    .client
                    .call_tool(params("terminal_spawn", json!({})))
                    .await;
                assert!(
                    refused.is_err() || refused.as_ref().unwrap().is_error == Some(true),
                    "{flags:?}: {refused:?}"
                );
            }
            mcp.stop().await;
        }
        assert!(cli.ok(&["list"]).is_empty(), "nothing was spawned");
    })
    .await;
}

/// Issue 17: a tool name that is not one of the tools stops `mcp` at its
/// start with a clear error, before it opens anything.
#[test]
fn an_unknown_tool_name_is_refused_at_start() {
    let cli = Cli::new();
    for flags in [
        &["--tools", "list,nope"][..],
        &["--exclude-tools", "terminal_nope"],
        &["--read-only", "--tools", "kill"],
        &["--tools", "kill", "--exclude-tools", "kill"],
    ] {
        let argv: Vec<&str> = std::iter::once("mcp")
            .chain(flags.iter().copied())
            .collect();
        let output = cli.run(&argv);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?}");
        assert!(stderr.contains("INVALID_INPUT"), "{flags:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{flags:?}");
    }
    assert!(cli.run(&["mcp", "--tools", "list,nope"]).stderr.len() < 1000);
    let named = cli.run(&["mcp", "--tools", "nope"]);
    assert!(String::from_utf8_lossy(&named.stderr).contains("\"nope\""));
}
