//! Issue 17's `terminal_search`: one terminal's scrollback or all of the
//! owner's, line numbers that `terminal_read` agrees with, context, and
//! the bounds.

use serde_json::json;

use super::{Mcp, shell};
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn search_finds_lines_in_one_terminal_or_all() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        for name in ["a", "b"] {
            shell(&mcp, name).await;
            let text = format!("printf 'x\\nneedle-{name}\\n\\033[1my\\033[0m\\n'");
            let args = json!({"terminal": name, "text": text, "submit": true});
            mcp.ok("terminal_send", args).await;
        }
        let all = mcp
            .ok(
                "terminal_search",
                json!({"regex": "^needle-[ab]$", "context": 1}),
            )
            .await;
        assert_eq!(all["searched"], 2, "{all}");
        let matches = all["matches"].as_array().unwrap();
        assert_eq!(matches.len(), 2, "{all}");
        assert_eq!(matches[0]["name"], "a");
        assert_eq!(matches[1]["text"], "needle-b");
        // Stripped as read strips: the bold `y` is plain after it.
        assert_eq!(matches[1]["after"], json!(["y"]), "{all}");
        assert_eq!(matches[1]["before"], json!(["x"]), "{all}");
        // Each match's cursor reads on from its line, in the stream.
        let cursor = matches[0]["cursor"].as_str().unwrap();
        let page = mcp
            .ok("terminal_read", json!({"terminal": "a", "since": cursor}))
            .await;
        assert_eq!(page["lines"][0], "needle-a", "{page}");
        // All of a terminal's output the engine saw was searched.
        let ranges = all["ranges"].as_array().unwrap();
        assert_eq!(ranges.len(), 2, "{all}");
        assert!(ranges.iter().all(|r| r["older_output"] == false), "{all}");

        let one = mcp
            .ok(
                "terminal_search",
                json!({"regex": "needle", "terminal": "b"}),
            )
            .await;
        assert_eq!(one["searched"], 1);
        let range = &one["ranges"][0];
        assert!(
            range["searched_from"].as_str().unwrap().ends_with(":0"),
            "{one}"
        );
        assert_eq!(range["older_output"], false, "{one}");
        assert!(
            one["matches"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["name"] == "b"),
            "{one}"
        );
        let few = mcp
            .ok(
                "terminal_search",
                json!({"regex": "needle", "max_matches": 1}),
            )
            .await;
        assert_eq!(few["matches"].as_array().unwrap().len(), 1);
        assert_eq!(few["truncated"], true);
        let bad = mcp.error("terminal_search", json!({"regex": "("})).await;
        assert!(bad.starts_with("INVALID_INPUT: "), "{bad}");
        let unknown = mcp
            .error("terminal_search", json!({"regex": "x", "terminal": "nope"}))
            .await;
        assert!(unknown.starts_with("NO_TERMINAL: "), "{unknown}");
        mcp.stop().await;
    })
    .await;
}

/// Issue 17: the scrollback a terminal keeps is set at spawn.
#[tokio::test]
async fn the_history_limit_is_set_at_spawn() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let spawn = json!({"name": "short", "history_limit": 50, "rows": 10, "cols": 80});
        mcp.ok("terminal_spawn", spawn).await;
        let args = json!({"terminal": "short", "text": "seq 1 500", "submit": true});
        mcp.ok("terminal_send", args).await;
        let page = mcp
            .ok(
                "terminal_read",
                json!({"terminal": "short", "count": 10_000}),
            )
            .await;
        let total = page["total_lines"].as_u64().unwrap();
        assert!(total <= 50 + 10, "{total} lines kept");
        assert!(total >= 50, "{total} lines kept");
        let over = mcp
            .error("terminal_spawn", json!({"history_limit": 1_000_001}))
            .await;
        assert!(over.starts_with("INVALID_INPUT: "), "{over}");
        mcp.stop().await;
    })
    .await;
}

/// Issue 43 item 4: search reads the engine's stream, not tmux's
/// scrollback: a line tmux dropped (a 50-line history) is still found,
/// with the range searched (before, a `capture-pane` of the scrollback
/// found nothing).
#[tokio::test]
async fn search_reads_the_stream_beyond_tmuxs_scrollback() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        let spawn = json!({"name": "short", "history_limit": 50, "rows": 10, "cols": 80});
        mcp.ok("terminal_spawn", spawn).await;
        let text = "echo needle-$((40+2)); seq 1 500";
        let args = json!({"terminal": "short", "text": text, "submit": true});
        mcp.ok("terminal_send", args).await;
        let found = mcp
            .ok(
                "terminal_search",
                json!({"terminal": "short", "regex": "^needle-42$", "context": 1}),
            )
            .await;
        let matches = found["matches"].as_array().unwrap();
        assert_eq!(matches.len(), 1, "{found}");
        assert_eq!(matches[0]["after"], json!(["1"]), "{found}");
        let range = &found["ranges"][0];
        assert!(range["searched_from"].as_str().unwrap().ends_with(":0"), "{found}");
        assert_eq!(range["older_output"], false, "{found}");
        // A wait for it from the start of the stream finds it too.
        let start = range["searched_from"].as_str().unwrap();
        let waited = mcp
            .ok(
                "terminal_wait",
                json!({"terminal": "short", "text": "needle-42", "since": start, "timeout_secs": 5}),
            )
            .await;
        assert_eq!(waited["matched"], "needle-42", "{waited}");
        mcp.stop().await;
    })
    .await;
}
