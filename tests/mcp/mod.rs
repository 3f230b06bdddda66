//! `tmux-engine mcp` driven the way an agent harness drives it: the SDK's
//! own client (rmcp) over a child process running the built binary, never
//! hand-built JSON. Each test has its own state and runtime directory
//! ([`Cli`]), whose servers are killed on drop, so a panic leaves nothing
//! running; the `mcp` child is killed when its transport drops.
//!
//! This file is the harness ([`Mcp`] and its helpers, also used by
//! `tests/verbs/faces.rs`); `contract.rs` checks what a client is promised before
//! any terminal runs (tools, schemas, invalid arguments and names),
//! `sessions.rs` drives terminals through whole sessions (a shell end to
//! end, cancels, progress, a restart of the server).
#![allow(clippy::unwrap_used)]

mod agent;
mod commands;
mod contract;
mod cursors;
mod guard;
mod integration;
mod scenario;
mod schemas;
mod search;
mod send_path;
mod sessions;
mod shared;
mod shells;
mod tracker;
mod transport;

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

/// The tools of issues 11, 17 and 18, as named there.
pub(crate) const TOOLS: [&str; 12] = [
    "terminal_commands",
    "terminal_kill",
    "terminal_list",
    "terminal_read",
    "terminal_rename",
    "terminal_screen",
    "terminal_search",
    "terminal_send",
    "terminal_show",
    "terminal_signal",
    "terminal_spawn",
    "terminal_wait",
];

/// How long a log line or a cancel may take: far below every wait's own
/// timeout in these tests, so meeting it means "promptly".
pub(crate) const PROMPTLY: Duration = Duration::from_secs(10);

/// The client side: collects progress notifications.
#[derive(Clone, Default)]
pub(crate) struct Harness {
    pub(crate) progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
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
pub(crate) struct Mcp {
    pub(crate) client: RunningService<RoleClient, Harness>,
    /// Everything the server wrote to stderr so far.
    log: watch::Receiver<String>,
    /// The server's pid.
    pid: Option<u32>,
}

impl Mcp {
    /// Starts `tmux-engine mcp` on `cli`'s directories and initializes.
    pub(crate) async fn start(cli: &Cli) -> Mcp {
        Mcp::start_with(cli, &[]).await
    }

    /// [`Mcp::start`] with `mcp`'s own flags (`--read-only`, `--tools`).
    pub(crate) async fn start_with(cli: &Cli, flags: &[&str]) -> Mcp {
        Mcp::start_in(cli, flags, "/bin/sh").await
    }

    /// [`Mcp::start_with`] with `shell` as the engine's shell.
    pub(crate) async fn start_in(cli: &Cli, flags: &[&str], shell: &str) -> Mcp {
        Mcp::start_env(cli, flags, shell, &[]).await
    }

    /// [`Mcp::start_in`] with more of the server's environment.
    pub(crate) async fn start_env(
        cli: &Cli,
        flags: &[&str],
        shell: &str,
        env: &[(&str, &std::path::Path)],
    ) -> Mcp {
        let argv: Vec<&str> = std::iter::once("mcp")
            .chain(flags.iter().copied())
            .collect();
        let mut command = tokio::process::Command::from(cli.command(&argv));
        command.envs(env.iter().copied());
        command
            .env("TMUX_ENGINE_SHELL", shell)
            .env("TMUX_ENGINE_LOG", "tmux_engine::mcp=info")
            .env("NO_COLOR", "1");
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = transport.id();
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
        Mcp { client, log, pid }
    }

    /// The server's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.pid.expect("a spawned mcp has a pid")
    }

    /// Calls `tool` and returns its result, error or not.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.client.call_tool(params(tool, args)).await.unwrap()
    }

    /// Calls `tool` and returns its structured result; panics on a tool error.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
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
    pub(crate) async fn error(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {}", text(&result));
        text(&result)
    }

    /// Starts a call that can be cancelled.
    pub(crate) async fn start_call(&self, tool: &str, args: Value) -> RequestHandle<RoleClient> {
        let request = ClientRequest::CallToolRequest(Request::new(params(tool, args)));
        self.client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .unwrap()
    }

    /// Waits until the server logged a line containing every one of `parts`.
    pub(crate) async fn logged(&mut self, parts: &[&str]) {
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

    /// SIGKILLs the server (no chance to clean up) and drops the client.
    pub(crate) fn kill(self) {
        let pid = self.pid.unwrap();
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        drop(self);
    }

    /// Ends the session the way a client does: closes the server's stdin.
    pub(crate) async fn stop(self) {
        self.client.cancel().await.unwrap();
    }
}

pub(crate) fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object: {args}")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
}

/// The first text content of a result.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// The result of a cancellable call.
pub(crate) async fn response(handle: RequestHandle<RoleClient>) -> CallToolResult {
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(result) => result,
        other => panic!("not a tool result: {other:?}"),
    }
}

pub(crate) fn lines(value: &Value) -> String {
    value["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spawns a shell named `name` and waits until it is at its prompt.
pub(crate) async fn shell(mcp: &Mcp, name: &str) -> Value {
    let snapshot = mcp.ok("terminal_spawn", json!({ "name": name })).await;
    assert_eq!(snapshot["name"], name);
    assert_eq!(snapshot["status"]["kind"], "running");
    mcp.ok("terminal_send", json!({"terminal": name, "text": ""}))
        .await;
    snapshot
}

/// Waits until a process group other than the shell's (`shell_pid`) is in
/// the terminal's foreground, its leader past its exec, and returns it.
/// Probes with WINCH, which neither the shell nor a `sleep` acts on, so
/// the probing never races the shell's fork. Past the exec: the shell's
/// fork gives itself the terminal before it execs the program, and a
/// signal or key in between is the fork's, under the shell's own handlers,
/// never the program's (a loaded run's C-c left `tail -f` running).
pub(crate) async fn foreground(mcp: &Mcp, terminal: &str, shell_pid: i64) -> Value {
    let comm = |pid: i64| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    let shell = comm(shell_pid).expect("the shell's name");
    crate::support::poll("a program in the foreground", PROMPTLY, || async {
        let delivery = mcp
            .ok(
                "terminal_signal",
                json!({"terminal": terminal, "signal": "WINCH"}),
            )
            .await;
        let pgid = delivery["pgid"]
            .as_i64()
            .filter(|&pgid| pgid != shell_pid)?;
        // Still the shell's name: not exec'd yet.
        comm(pgid)
            .filter(|name| *name != shell)
            .map(|_| delivery["pgid"].clone())
    })
    .await
}
