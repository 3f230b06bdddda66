//! Collect later through the built binary's MCP face: a command that
//! outlived its send, collected by `terminal_wait {command: "last"}`; a
//! text wait that skips the echoed command line; `terminal_commands`.

use serde_json::json;

use super::Mcp;
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn a_command_outliving_its_send_is_collected_and_listed() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "b"})).await;
        // The shell at its first prompt first: the 1 s below is the
        // command's, not a fresh bash's start on a loaded machine.
        let ready = mcp
            .ok(
                "terminal_send",
                json!({"terminal": "b", "text": "true", "submit": true}),
            )
            .await;
        assert_eq!(ready["exit_code"], 0, "{ready}");
        let send = json!({"terminal": "b", "text": "sleep 2; echo done", "submit": true,
                          "timeout_secs": 1});
        let sent = mcp.ok("terminal_send", send).await;
        assert_eq!(sent["wait_reason"], "timeout", "{sent}");
        assert_eq!(sent["typed"], true, "{sent}");
        let matched = mcp
            .ok("terminal_wait", json!({"terminal": "b", "text": "done"}))
            .await;
        assert_eq!(matched["matched"], "done", "not the echo: {matched}");
        let waited = mcp
            .ok("terminal_wait", json!({"terminal": "b", "command": "last"}))
            .await;
        assert_eq!(waited["exit_code"], 0, "{waited}");
        assert_eq!(waited["output"], "done\n", "{waited}");
        assert!(waited["duration_secs"].as_f64().unwrap() >= 1.5, "{waited}");
        let listed = mcp.ok("terminal_commands", json!({"terminal": "b"})).await;
        let last = listed["commands"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["id"], waited["command"], "{listed}");
        assert_eq!(last["text"], "sleep 2; echo done", "{listed}");
        assert_eq!(last["exit_code"], 0, "{listed}");
        assert_eq!(last["running"], false, "{listed}");
    })
    .await;
}
