//! Issue 25, item 7: the operator's guard rails through the built binary's
//! MCP face: `--deny`, `--allow` and `--policy` refuse a command with
//! `FORBIDDEN_COMMAND`, a bash or sh line that does not parse is
//! `SYNTAX_ERROR` (unless `--no-syntax-check`), nothing is typed either
//! way, and a reply to a program is no command line.

use serde_json::json;

use super::{Mcp, shell};
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn a_forbidden_command_is_refused_and_never_typed() {
    let cli = Cli::new();
    within(async {
        let marker = cli.state().with_file_name("forbidden-marker");
        let policy = cli.state().with_file_name("policy");
        std::fs::write(
            &policy,
            "# the agent's commands\nallow:^(echo|touch|cat)\\b\n",
        )
        .unwrap();
        let flags = [
            "--deny",
            "forbidden-marker",
            "--policy",
            policy.to_str().unwrap(),
        ];
        let mcp = Mcp::start_with(&cli, &flags).await;
        shell(&mcp, "sh").await;
        let touch = format!("touch {}", marker.display());
        let error = mcp
            .error(
                "terminal_send",
                json!({"terminal": "sh", "text": touch, "submit": true}),
            )
            .await;
        assert!(error.starts_with("FORBIDDEN_COMMAND"), "{error}");
        let error = mcp
            .error(
                "terminal_send",
                json!({"terminal": "sh", "text": "ls /", "submit": true}),
            )
            .await;
        assert!(error.starts_with("FORBIDDEN_COMMAND"), "{error}");
        assert!(error.contains("--allow"), "{error}");
        // The same line typed through `keys` and run by its Enter.
        let error = mcp
            .error(
                "terminal_send",
                json!({"terminal": "sh", "keys": [touch, "Enter"]}),
            )
            .await;
        assert!(error.starts_with("FORBIDDEN_COMMAND"), "{error}");
        // Nothing was typed: the next command runs alone, and no file.
        let args = json!({"terminal": "sh", "text": "echo after", "submit": true});
        let sent = mcp.ok("terminal_send", args).await;
        assert_eq!(sent["output"], "after\n", "{sent}");
        assert!(!marker.exists());
        // A reply to a program reading the terminal is not a command line:
        // the allow rules do not apply to it, the deny rules do.
        let args = json!({"terminal": "sh", "text": "cat", "submit": true, "wait": "stdin"});
        mcp.ok("terminal_send", args).await;
        let args = json!({"terminal": "sh", "text": "ls it's", "submit": true, "wait": "none"});
        let sent = mcp.ok("terminal_send", args).await;
        assert_eq!(sent["typed"], true, "{sent}");
        let args = json!({"terminal": "sh", "text": "ls it's"});
        mcp.ok("terminal_wait", args).await;
        let args = json!({"terminal": "sh", "text": "a forbidden-marker", "submit": true});
        let error = mcp.error("terminal_send", args).await;
        assert!(error.starts_with("FORBIDDEN_COMMAND"), "{error}");
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_line_that_does_not_parse_is_a_syntax_error() {
    let cli = Cli::new();
    within(async {
        for shell_path in ["/bin/bash", "/bin/sh"] {
            let mcp = Mcp::start_in(&cli, &[], shell_path).await;
            let name = if shell_path.ends_with("bash") {
                "b"
            } else {
                "s"
            };
            shell(&mcp, name).await;
            let args = json!({"terminal": name, "text": "echo 'open", "submit": true});
            let error = mcp.error("terminal_send", args).await;
            assert!(error.starts_with("SYNTAX_ERROR"), "{shell_path}: {error}");
            assert!(error.contains(" -n: "), "{shell_path}: {error}");
            // Not typed: the shell is not left inside an open quote.
            let args = json!({"terminal": name, "text": "echo after", "submit": true});
            let sent = mcp.ok("terminal_send", args).await;
            assert_eq!(sent["output"], "after\n", "{shell_path}: {sent}");
            assert_eq!(sent["exit_code"], 0, "{shell_path}: {sent}");
            mcp.stop().await;
        }
        // Off with one flag: the line is typed, and the shell waits for
        // the rest of it.
        let mcp = Mcp::start_in(&cli, &["--no-syntax-check"], "/bin/bash").await;
        shell(&mcp, "off").await;
        let args = json!({"terminal": "off", "text": "echo 'open", "submit": true,
                          "wait": "stdin"});
        let sent = mcp.ok("terminal_send", args).await;
        assert_eq!(sent["typed"], true, "{sent}");
        mcp.stop().await;
    })
    .await;
}
