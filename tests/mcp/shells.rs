//! Issue 44 item 8: the shell per terminal, through the built binary's
//! MCP face. A spawn's `SHELL` in its `env` picks its interactive shell
//! (before, every terminal ran the engine's pinned shell, and fish was
//! never integrated); bash, zsh, POSIX sh and fish are integrated, so each
//! answers exact output and exit codes, and `show` names the shell and
//! says its integration is active.

use serde_json::json;

use super::Mcp;
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn each_spawn_picks_its_shell_and_each_answers_exactly() {
    let cli = Cli::new();
    within(async {
        // The engine's own shell is bash: each spawn's SHELL wins over it.
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let shells = [
            ("fish", "/usr/bin/fish"),
            ("zsh", "/usr/bin/zsh"),
            ("sh", "/bin/sh"),
            // A name, found in PATH.
            ("named", "zsh"),
        ];
        for (name, shell) in shells {
            let spawn = json!({"name": name, "env": {"SHELL": shell}});
            mcp.ok("terminal_spawn", spawn).await;
            let send = |text: &str| json!({"terminal": name, "text": text, "submit": true});
            let printed = mcp
                .ok("terminal_send", send("printf 'out-%s\\n' a b"))
                .await;
            assert_eq!(printed["wait_reason"], "command", "{name}: {printed}");
            assert_eq!(printed["output"], "out-a\nout-b\n", "{name}: {printed}");
            assert_eq!(printed["exit_code"], 0, "{name}: {printed}");
            let failed = mcp
                .ok("terminal_send", send("sh -c 'echo err >&2; exit 3'"))
                .await;
            assert_eq!(failed["output"], "err\n", "{name}: {failed}");
            assert_eq!(failed["exit_code"], 3, "{name}: {failed}");
            let silent = mcp.ok("terminal_send", send("true")).await;
            assert_eq!(silent["output"], "", "{name}: {silent}");
            assert_eq!(silent["exit_code"], 0, "{name}: {silent}");

            let shown = mcp.ok("terminal_show", json!({"terminal": name})).await;
            assert_eq!(shown["shell_integration"], "active", "{name}: {shown}");
            let named = shown["shell"].as_str().unwrap();
            if shell.starts_with('/') {
                assert_eq!(named, shell, "{name}: {shown}");
            } else {
                assert!(named.ends_with("/zsh"), "{name}: {shown}");
            }
            // The shell running is the one named: its process's executable.
            let pid = shown["pid"].as_u64().unwrap();
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
            assert_eq!(
                exe,
                std::fs::canonicalize(named).unwrap(),
                "{name}: {shown}"
            );
        }
        // A command runs as given: no shell to name.
        let command = json!({"name": "cmd", "command": ["sleep", "100"]});
        mcp.ok("terminal_spawn", command).await;
        let shown = mcp.ok("terminal_show", json!({"terminal": "cmd"})).await;
        assert!(shown.get("shell").is_none(), "{shown}");
        // A SHELL that names nothing is refused at spawn, not ignored.
        for bad in ["/nonexistent/zsh", "no-such-shell-here"] {
            let refused = mcp
                .error("terminal_spawn", json!({"env": {"SHELL": bad}}))
                .await;
            assert!(refused.starts_with("INVALID_INPUT: "), "{refused}");
        }
        mcp.stop().await;
    })
    .await;
}
