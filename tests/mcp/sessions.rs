//! Terminals driven through whole MCP sessions: a shell end to end,
//! cancelled calls, progress of a long send, and terminals outliving a
//! restart of the server.

use std::sync::Arc;

use rmcp::model::ProgressNotificationParam;
use serde_json::json;

use super::{Mcp, PROMPTLY, foreground, lines, response, shell, text};
use crate::cli::Cli;
use crate::support::within;

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

/// Issue 17: a huge output is bounded as a whole answer (the JSON, not
/// just its output field), the screen comes only when asked for, and a
/// read's page has no blank padding.
#[tokio::test]
async fn answers_are_bounded_as_a_whole() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        shell(&mcp, "big").await;
        let args = json!({"terminal": "big", "text": "seq 1 200000", "submit": true});
        let result = mcp.call("terminal_send", args).await;
        let answer = text(&result);
        assert!(answer.len() <= 64 * 1024, "{} bytes", answer.len());
        let sent: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(sent["truncated"], true);
        assert!(sent.get("viewport").is_none(), "{sent}");
        let output = sent["output"].as_str().unwrap();
        // The newest output is kept (with the head: issue 25, item 6).
        assert!(
            output.contains("\n200000"),
            "{}",
            &output[output.len() - 100..]
        );

        let small = json!({"terminal": "big", "text": "echo hi", "submit": true,
                           "include_screen": true, "max_bytes": 600});
        let result = mcp.call("terminal_send", small).await;
        let answer = text(&result);
        assert!(answer.len() <= 600, "{answer}");
        let sent: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert!(sent["output"].as_str().unwrap().contains("hi"), "{sent}");
        assert!(sent["viewport"].is_string(), "{sent}");

        let page = mcp
            .ok("terminal_read", json!({"terminal": "big", "count": 10_000}))
            .await;
        assert!(page.to_string().len() <= 64 * 1024);
        assert_eq!(page["truncated"], true);
        let rows = page["lines"].as_array().unwrap();
        assert!(
            !rows.last().unwrap().as_str().unwrap().trim().is_empty(),
            "{page}"
        );
        let few = mcp
            .ok("terminal_read", json!({"terminal": "big", "max_lines": 3}))
            .await;
        assert_eq!(few["lines"].as_array().unwrap().len(), 3, "{few}");
        let range = (few["range"]["start"].as_u64(), few["range"]["end"].as_u64());
        assert_eq!(range.1.unwrap() - range.0.unwrap(), 3, "{few}");
        let refused = mcp
            .error(
                "terminal_read",
                json!({"terminal": "big", "max_bytes": 70_000}),
            )
            .await;
        assert!(refused.starts_with("INVALID_INPUT: "), "{refused}");
        mcp.stop().await;
    })
    .await;
}
