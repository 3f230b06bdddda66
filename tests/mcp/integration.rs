//! Issue 25 item 9: `show` says whether a terminal's shell integration
//! works (`shell_integration`), on every face: MCP, HTTP and the CLI. A
//! bash that marks its prompts is `active`; one whose rc replaces
//! `PROMPT_COMMAND` once the shell runs (as prompt frameworks do) has
//! marked, then stopped: `lost`; a program started without a shell
//! `never_started`; a one-shot CLI, which saw no prompt since it linked to
//! the terminal, `unknown` (never a guess).

use serde_json::json;

use super::Mcp;
use crate::bridge::Served;
use crate::cli::Cli;
use crate::support::within;

/// A `HOME` whose `.bashrc` replaces `PROMPT_COMMAND` at the first prompt:
/// the engine's mark function runs once, then is gone.
fn home_replacing_prompt_command() -> tempfile::TempDir {
    let home = crate::support::test_dir();
    std::fs::write(
        home.path().join(".bashrc"),
        "PROMPT_COMMAND='PROMPT_COMMAND=:'\n",
    )
    .unwrap();
    home
}

#[tokio::test]
async fn show_says_active_lost_or_never_started_through_mcp() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let show = |name: &str| json!({"terminal": name});
        let send = |name: &str, text: &str| json!({"terminal": name, "text": text, "submit": true});

        mcp.ok("terminal_spawn", json!({"name": "plain"})).await;
        let answer = mcp.ok("terminal_send", send("plain", "echo one")).await;
        assert_eq!(answer["exit_code"], 0, "{answer}");
        let shown = mcp.ok("terminal_show", show("plain")).await;
        assert_eq!(shown["shell_integration"], "active", "{shown}");

        let home = home_replacing_prompt_command();
        let spawn = json!({"name": "lost", "env": {"HOME": home.path()}});
        mcp.ok("terminal_spawn", spawn).await;
        // Its first prompt is marked: the send types there. The command's
        // end is not marked any more, so no exit code comes.
        let answer = mcp.ok("terminal_send", send("lost", "echo two")).await;
        assert!(answer.get("exit_code").is_none(), "{answer}");
        assert_eq!(answer["exit_code_source"], "none", "{answer}");
        let shown = mcp.ok("terminal_show", show("lost")).await;
        assert_eq!(shown["shell_integration"], "lost", "{shown}");

        let program = json!({"name": "prog", "command": ["sh", "-c", "echo hi; exec sleep 300"]});
        mcp.ok("terminal_spawn", program).await;
        let shown = mcp.ok("terminal_show", show("prog")).await;
        assert_eq!(shown["shell_integration"], "never_started", "{shown}");
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn show_says_it_over_http_and_the_cli() {
    within(async {
        let served =
            Served::start_with(Cli::new(), &[], &[("TMUX_ENGINE_SHELL", "/bin/bash")]).await;
        served.spawn(r#"{"name": "plain"}"#).await;
        let (status, answer) = served
            .post(
                "/api/terminals/plain/send",
                r#"{"text": "echo one", "submit": true}"#,
            )
            .await;
        assert_eq!((status, &answer["exit_code"]), (200, &json!(0)), "{answer}");
        let (status, shown) = served.get("/api/terminals/plain").await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(shown["shell_integration"], "active", "{shown}");
        served
            .spawn(r#"{"name": "prog", "command": ["sh", "-c", "exec sleep 300"]}"#)
            .await;
        let (_, shown) = served.get("/api/terminals/prog").await;
        assert_eq!(shown["shell_integration"], "never_started", "{shown}");

        // The CLI is a new engine per call, but it reads the terminal's
        // one stream from the relay: the shell's marks serve's link saw
        // are there for it too; a program with no shell it knows at once.
        let cli = &served.cli;
        let shown: serde_json::Value =
            serde_json::from_str(&cli.ok(&["--json", "show", "plain"])).unwrap();
        assert_eq!(shown["shell_integration"], "active", "{shown}");
        let line = cli.ok(&["show", "prog"]);
        assert!(line.contains("shell_integration=never_started"), "{line}");
    })
    .await;
}
