//! Issue 44, the send path, through the built binary's MCP face: text is
//! typed literally (a TAB never completes), a key that ends a command
//! answers its exit code, a program sleeping on a timer is not `busy` for
//! ever, keys in a full-screen program take any word, and a command's
//! `text` is bounded.

use serde_json::{Value, json};

use super::Mcp;
use crate::cli::Cli;
use crate::support::within;

fn send(terminal: &str, text: &str) -> Value {
    json!({"terminal": terminal, "text": text, "submit": true, "timeout_secs": 30})
}

/// A 23 KB heredoc with no output answers in about its output's size:
/// its command's `text` is its first and last line and its byte count,
/// not the paste again (before: the first 4 KiB of the echo, `> ` and all).
#[tokio::test]
async fn a_pasted_heredocs_answer_costs_its_output_only() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "h"})).await;
        let mut text = String::from("cat > big.txt <<'EOF'\n");
        for line in 0..400 {
            text.push_str(&format!("line {line:04} of a pasted heredoc, padded to its size .........\n"));
        }
        text.push_str("EOF");
        assert!(text.len() > 23_000, "{}", text.len());
        let sent = mcp.ok("terminal_send", send("h", &text)).await;
        assert_eq!(sent["exit_code"], 0, "{sent}");
        assert_eq!(sent["output"], "", "{sent}");
        let command = sent["commands"][0]["text"].as_str().unwrap();
        assert!(command.starts_with("cat > big.txt <<'EOF'\n"), "{command}");
        assert!(command.ends_with("\n> EOF"), "{command}");
        assert!(command.contains(" bytes in all ...]"), "{command}");
        let size = serde_json::to_string(&sent).unwrap().len();
        assert!(size < 2048, "{size} bytes: {sent}");
        // The file has every line: only the answer was cut.
        let counted = mcp.ok("terminal_send", send("h", "wc -l < big.txt")).await;
        assert_eq!(counted["output"], "400\n", "{counted}");
        let listed = mcp.ok("terminal_commands", json!({"terminal": "h"})).await;
        assert_eq!(listed["commands"][0]["text"], command, "{listed}");
        mcp.stop().await;
    })
    .await;
}
