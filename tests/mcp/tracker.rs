//! Issue 43 item 3: one command tracker per stream, so the send, the
//! `commands` list, the command wait and `show` agree, in bash, zsh and
//! POSIX sh, through the SDK's own client. Before it, a POSIX sh send of
//! `echo a; echo b` answered a command whose `start_cursor` the list did
//! not hold and the wait refused (`INVALID_INPUT`), and after `exec bash`
//! the sends answered no exit code while `show` said `active`.

use serde_json::{Value, json};

use super::Mcp;
use crate::cli::Cli;
use crate::support::within;

fn send(text: &str) -> Value {
    json!({"terminal": "t", "text": text, "submit": true, "timeout_secs": 20})
}

/// The send's commands and the list's entries for them, field for field;
/// and a wait for each collects it.
async fn agrees(mcp: &Mcp, shell: &str, sent: &Value) {
    let commands = sent["commands"].as_array().expect("commands");
    assert!(!commands.is_empty(), "{shell}: {sent}");
    let listed = mcp
        .ok("terminal_commands", json!({"terminal": "t", "limit": 1000}))
        .await;
    let entries = listed["commands"].as_array().unwrap();
    for command in commands {
        let found = entries.iter().find(|entry| entry["id"] == command["id"]);
        assert_eq!(found, Some(command), "{shell}: {command} in {listed}");
        let waited = mcp
            .ok(
                "terminal_wait",
                json!({"terminal": "t", "command": command["id"], "timeout_secs": 10}),
            )
            .await;
        assert_eq!(waited["command"], command["id"], "{shell}: {waited}");
        assert_eq!(
            waited["exit_code"], command["exit_code"],
            "{shell}: {waited}"
        );
    }
}

async fn one_shell(shell: &str) {
    let cli = Cli::new();
    let mcp = Mcp::start_in(&cli, &[], shell).await;
    mcp.ok("terminal_spawn", json!({"name": "t"})).await;
    // One line of two commands: one command to the shell.
    let sent = mcp.ok("terminal_send", send("echo a; echo b")).await;
    assert_eq!(sent["output"], "a\nb\n", "{shell}: {sent}");
    assert_eq!(sent["exit_code"], 0, "{shell}: {sent}");
    assert_eq!(
        sent["commands"].as_array().unwrap().len(),
        1,
        "{shell}: {sent}"
    );
    assert!(
        sent["commands"][0]["start_cursor"].is_string(),
        "{shell}: {sent}"
    );
    agrees(&mcp, shell, &sent).await;
    // Three lines in one send: three commands, the last one's code.
    let sent = mcp
        .ok("terminal_send", send("echo one\nfalse\n(exit 7)"))
        .await;
    assert_eq!(sent["exit_code"], 7, "{shell}: {sent}");
    let codes: Vec<&Value> = sent["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["exit_code"])
        .collect();
    assert_eq!(codes, [&json!(0), &json!(1), &json!(7)], "{shell}: {sent}");
    agrees(&mcp, shell, &sent).await;
    let shown = mcp.ok("terminal_show", json!({"terminal": "t"})).await;
    assert_eq!(shown["shell_integration"], "active", "{shell}: {shown}");
    mcp.ok("terminal_kill", json!({"terminal": "t"})).await;
    mcp.stop().await;
}

#[tokio::test]
async fn the_command_list_agrees_with_the_send_in_posix_sh() {
    within(one_shell("/bin/sh")).await;
}

#[tokio::test]
async fn the_command_list_agrees_with_the_send_in_bash() {
    within(one_shell("/bin/bash")).await;
}

#[tokio::test]
async fn the_command_list_agrees_with_the_send_in_zsh() {
    let zsh = crate::support::installed("zsh").expect("zsh (.ci/run installs it)");
    within(one_shell(&zsh)).await;
}

#[tokio::test]
async fn after_exec_bash_show_says_lost() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "t"})).await;
        let sent = mcp.ok("terminal_send", send("echo before")).await;
        assert_eq!(sent["exit_code_source"], "shell_integration", "{sent}");
        // The new bash reads no engine rc: no mark ever comes again.
        let mut exec = send("exec bash --norc");
        exec["timeout_secs"] = json!(10);
        let sent = mcp.ok("terminal_send", exec).await;
        assert_eq!(sent["exit_code_source"], "none", "{sent}");
        let sent = mcp.ok("terminal_send", send("echo after")).await;
        assert_eq!(sent["exit_code_source"], "none", "{sent}");
        let shown = mcp.ok("terminal_show", json!({"terminal": "t"})).await;
        assert_eq!(shown["shell_integration"], "lost", "{shown}");
        mcp.ok("terminal_kill", json!({"terminal": "t"})).await;
        mcp.stop().await;
    })
    .await;
}
