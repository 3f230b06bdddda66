//! `tmux-engine mcp` driven the way an agent harness drives it: the SDK's
//! own client (rmcp) over a child process running the built binary, never
//! hand-built JSON. Each test has its own state and runtime directory
//! ([`Cli`]), whose servers are killed on drop, so a panic leaves nothing
//! running; the `mcp` child is killed when its transport drops.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestHandle, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use crate::cli::Cli;
use crate::support::within;

/// The tools of issue 11, as named there.
const TOOLS: [&str; 8] = [
    "terminal_kill",
    "terminal_list",
    "terminal_read",
    "terminal_screen",
    "terminal_send",
    "terminal_signal",
    "terminal_spawn",
    "terminal_wait",
];

/// How long a log line or a cancel may take: far below every wait's own
/// timeout in these tests, so meeting it means "promptly".
const PROMPTLY: Duration = Duration::from_secs(10);

/// The client side: collects progress notifications.
#[derive(Clone, Default)]
struct Harness {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Harness {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// One `mcp` process and the client connected to it.
struct Mcp {
    client: RunningService<RoleClient, Harness>,
    /// Everything the server wrote to stderr so far.
    log: watch::Receiver<String>,
}

impl Mcp {
    /// Starts `tmux-engine mcp` on `cli`'s directories and initializes.
    async fn start(cli: &Cli) -> Mcp {
        let mut command = tokio::process::Command::from(cli.command(&["mcp"]));
        command
            .env("TMUX_ENGINE_LOG", "tmux_engine::mcp=info")
            .env("NO_COLOR", "1");
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, log) = watch::channel(String::new());
        let mut lines = BufReader::new(stderr.unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sender.send_modify(|log| {
                    log.push_str(&line);
                    log.push('\n');
                });
            }
        });
        let client = Harness::default().serve(transport).await.unwrap();
        Mcp { client, log }
    }

    /// Calls `tool` and returns its result, error or not.
    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.client.call_tool(params(tool, args)).await.unwrap()
    }

    /// Calls `tool` and returns its structured result; panics on a tool error.
    async fn ok(&self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args).await;
        assert_eq!(result.is_error, Some(false), "{tool}: {}", text(&result));
        // The JSON is there as text, for clients that show only text, and
        // as structured content, except an array (terminal_list) for a
        // client of a protocol older than 2026-07-28, where structured
        // content must be an object (the SDK strips it then).
        let value: Value = serde_json::from_str(&text(&result)).unwrap();
        match &result.structured_content {
            Some(structured) => assert_eq!(structured, &value, "{tool}"),
            None => assert!(
                value.is_array(),
                "{tool}: no structured content: {result:?}"
            ),
        }
        value
    }

    /// Calls `tool` and returns its error text; panics when it succeeds.
    async fn error(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {}", text(&result));
        text(&result)
    }

    /// Starts a call that can be cancelled.
    async fn start_call(&self, tool: &str, args: Value) -> RequestHandle<RoleClient> {
        let request = ClientRequest::CallToolRequest(Request::new(params(tool, args)));
        self.client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .unwrap()
    }

    /// Waits until the server logged a line containing every one of `parts`.
    async fn logged(&mut self, parts: &[&str]) {
        let found = self.log.wait_for(|log| {
            log.lines()
                .any(|line| parts.iter().all(|part| line.contains(part)))
        });
        let waited = tokio::time::timeout(PROMPTLY, found)
            .await
            .map(|found| found.map(|_| ()));
        assert!(
            matches!(waited, Ok(Ok(_))),
            "no log line with {parts:?}:\n{}",
            *self.log.borrow()
        );
    }

    /// Ends the session the way a client does: closes the server's stdin.
    async fn stop(self) {
        self.client.cancel().await.unwrap();
    }
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object: {args}")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
}

/// The first text content of a result.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// The result of a cancellable call.
async fn response(handle: RequestHandle<RoleClient>) -> CallToolResult {
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(result) => result,
        other => panic!("not a tool result: {other:?}"),
    }
}

fn lines(value: &Value) -> String {
    value["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spawns a shell named `name` and waits until it is at its prompt.
async fn shell(mcp: &Mcp, name: &str) -> Value {
    let snapshot = mcp.ok("terminal_spawn", json!({ "name": name })).await;
    assert_eq!(snapshot["name"], name);
    assert_eq!(snapshot["status"]["kind"], "running");
    mcp.ok("terminal_send", json!({"terminal": name, "text": ""}))
        .await;
    snapshot
}

/// Waits until a process group other than the shell's (`shell_pid`) is in
/// the terminal's foreground and returns it. Probes with WINCH, which
/// neither the shell nor a `sleep` acts on, so the probing never races
/// the shell's fork.
async fn foreground(mcp: &Mcp, terminal: &str, shell_pid: i64) -> Value {
    crate::support::poll("a program in the foreground", PROMPTLY, || async {
        let delivery = mcp
            .ok(
                "terminal_signal",
                json!({"terminal": terminal, "signal": "WINCH"}),
            )
            .await;
        (delivery["pgid"].as_i64() != Some(shell_pid)).then(|| delivery["pgid"].clone())
    })
    .await
}

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
        let cases: [(&str, &[&str], &[&str]); 8] = [
            (
                "terminal_spawn",
                &["cols", "command", "cwd", "env", "name", "restart", "rows"],
                &[],
            ),
            ("terminal_list", &[], &[]),
            (
                "terminal_send",
                &["submit", "terminal", "text", "timeout_secs", "wait"],
                &["terminal", "text"],
            ),
            (
                "terminal_read",
                &["count", "offset", "terminal"],
                &["terminal"],
            ),
            ("terminal_screen", &["terminal"], &["terminal"]),
            (
                "terminal_wait",
                &["exit", "regex", "terminal", "text", "timeout_secs"],
                &["terminal"],
            ),
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
        for word in ["idle", "stdin", "exit", "none", "64 KiB"] {
            assert!(
                send.contains(word)
                    || tools.iter().any(|t| t.name == "terminal_send"
                        && t.description.as_ref().unwrap().contains(word)),
                "{word} in terminal_send"
            );
        }
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_shell_is_driven_end_to_end() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let snapshot = shell(&mcp, "main").await;
        let id = snapshot["id"].as_str().unwrap().to_owned();

        let duplicate = mcp.error("terminal_spawn", json!({"name": "main"})).await;
        assert!(duplicate.starts_with("DUPLICATE_NAME: "), "{duplicate}");
        let unknown = mcp.error("terminal_screen", json!({"terminal": "nope"})).await;
        assert!(unknown.starts_with("NO_TERMINAL: "), "{unknown}");

        let sent = mcp
            .ok(
                "terminal_send",
                json!({"terminal": "main", "text": "echo $((6*7))", "submit": true, "wait": "stdin"}),
            )
            .await;
        assert!(sent["output"].as_str().unwrap().contains("42"), "{sent}");
        assert_eq!(sent["wait_reason"], "stdin_read");
        assert_eq!(sent["status"]["kind"], "running");
        assert_eq!(sent["truncated"], false);

        let page = mcp.ok("terminal_read", json!({"terminal": id, "count": 50})).await;
        assert!(lines(&page).contains("42"), "{page}");
        assert!(page["total_lines"].as_u64().unwrap() >= 1);
        let screen = mcp.ok("terminal_screen", json!({"terminal": "main"})).await;
        assert!(lines(&screen).contains("42"), "{screen}");
        assert_eq!(screen["cols"], 80);

        let matched = mcp
            .ok("terminal_wait", json!({"terminal": "main", "regex": "^4[0-9]$"}))
            .await;
        assert_eq!(matched["matched"], "42");
        let timeout = mcp
            .error(
                "terminal_wait",
                json!({"terminal": "main", "text": "never printed", "timeout_secs": 0.2}),
            )
            .await;
        assert!(timeout.starts_with("TIMEOUT: "), "{timeout}");
        let two = mcp
            .error(
                "terminal_wait",
                json!({"terminal": "main", "text": "a", "exit": true}),
            )
            .await;
        assert!(two.starts_with("INVALID_INPUT: "), "{two}");

        // A `sleep` in the foreground takes INT; the shell's prompt returns.
        mcp.ok(
            "terminal_send",
            json!({"terminal": "main", "text": "sleep 30", "submit": true, "wait": "none"}),
        )
        .await;
        let shell_pid = snapshot["pid"].as_i64().unwrap();
        let sleep = foreground(&mcp, "main", shell_pid).await;
        let delivery = mcp
            .ok("terminal_signal", json!({"terminal": "main", "signal": "INT"}))
            .await;
        assert_eq!(delivery["pgid"], sleep, "{delivery}");
        assert_eq!(delivery["signal"], "INT");
        let back = mcp
            .ok(
                "terminal_send",
                json!({"terminal": "main", "text": "echo back-$((1+1))", "submit": true}),
            )
            .await;
        assert!(back["output"].as_str().unwrap().contains("back-2"), "{back}");
        let bad = mcp
            .error("terminal_signal", json!({"terminal": "main", "signal": "NOPE"}))
            .await;
        assert!(bad.starts_with("INVALID_INPUT: "), "{bad}");

        let killed = mcp.ok("terminal_kill", json!({"terminal": "main"})).await;
        assert_eq!(killed, json!({"killed": true}));
        assert_eq!(mcp.ok("terminal_list", json!({})).await, json!([]));
        let gone = mcp.error("terminal_kill", json!({"terminal": id})).await;
        assert!(gone.starts_with("NO_TERMINAL: "), "{gone}");
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn cancelled_calls_return_promptly_and_the_program_keeps_running() {
    let cli = Cli::new();
    within(async {
        let mut mcp = Mcp::start(&cli).await;
        shell(&mcp, "main").await;

        let wait = mcp
            .start_call(
                "terminal_wait",
                json!({"terminal": "main", "text": "never printed", "timeout_secs": 300}),
            )
            .await;
        wait.cancel(Some("test".to_owned())).await.unwrap();
        mcp.logged(&["cancelled by the client", "terminal_wait"])
            .await;

        // A send waiting for a program that runs for minutes.
        let send = mcp
            .start_call(
                "terminal_send",
                json!({"terminal": "main", "text": "sleep 300", "submit": true,
                       "wait": "exit", "timeout_secs": 300}),
            )
            .await;
        // Cancel once the shell has the line, so it is the sleep that must
        // survive the cancel.
        crate::support::poll("the command typed", PROMPTLY, || async {
            let screen = mcp.ok("terminal_screen", json!({"terminal": "main"})).await;
            lines(&screen).contains("sleep 300").then_some(())
        })
        .await;
        send.cancel(Some("test".to_owned())).await.unwrap();
        mcp.logged(&["cancelled by the client", "terminal_send"])
            .await;

        // The cancel stopped the wait, not the program: the terminal runs,
        // and a sleep is (or comes) in the foreground to take INT. Had the
        // cancel ended it, the shell's own group would stay in front.
        let listed = mcp.ok("terminal_list", json!({})).await;
        assert_eq!(listed[0]["status"]["kind"], "running");
        let shell_pid = listed[0]["pid"].as_i64().unwrap();
        let sleep = foreground(&mcp, "main", shell_pid).await;
        let delivery = mcp
            .ok(
                "terminal_signal",
                json!({"terminal": "main", "signal": "INT"}),
            )
            .await;
        assert_eq!(delivery["pgid"], sleep, "{delivery}");
        let back = mcp
            .ok(
                "terminal_send",
                json!({"terminal": "main", "text": "echo after-$((2+3))", "submit": true}),
            )
            .await;
        assert!(
            back["output"].as_str().unwrap().contains("after-5"),
            "{back}"
        );
        mcp.ok("terminal_kill", json!({"terminal": "main"})).await;
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_long_send_reports_progress() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        shell(&mcp, "main").await;
        let progress = Arc::clone(&mcp.client.service().progress);
        progress.lock().unwrap().clear();
        let handle = mcp
            .start_call(
                "terminal_send",
                json!({"terminal": "main", "submit": true,
                       "text": "for i in 1 2 3 4; do echo tick$i; sleep 0.3; done"}),
            )
            .await;
        let token = handle.progress_token.clone();
        let result = response(handle).await;
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        assert!(text(&result).contains("tick4"));
        let reports: Vec<ProgressNotificationParam> = progress
            .lock()
            .unwrap()
            .iter()
            .filter(|report| report.progress_token == token)
            .cloned()
            .collect();
        // The output came over more than a second in four bursts; the
        // reports are at least 100 ms apart.
        assert!(reports.len() >= 2, "{reports:?}");
        assert!(
            reports.windows(2).all(|w| w[0].progress < w[1].progress),
            "{reports:?}"
        );
        assert!(
            reports
                .iter()
                .any(|r| r.message.as_deref().is_some_and(|m| m.contains("tick"))),
            "{reports:?}"
        );
        mcp.ok("terminal_kill", json!({"terminal": "main"})).await;
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn terminals_survive_a_restart_of_the_server() {
    let cli = Cli::new();
    within(async {
        let first = Mcp::start(&cli).await;
        let snapshot = shell(&first, "keep").await;
        first
            .ok(
                "terminal_send",
                json!({"terminal": "keep", "text": "echo survived-$((1+1))", "submit": true}),
            )
            .await;
        first.stop().await;

        let second = Mcp::start(&cli).await;
        let listed = second.ok("terminal_list", json!({})).await;
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed[0]["id"], snapshot["id"]);
        assert_eq!(listed[0]["status"]["kind"], "running");
        let page = second
            .ok("terminal_read", json!({"terminal": "keep"}))
            .await;
        assert!(lines(&page).contains("survived-2"), "{page}");
        second
            .ok("terminal_kill", json!({"terminal": "keep"}))
            .await;
        second.stop().await;
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
            ("terminal_send", json!({"terminal": "x"})),
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
