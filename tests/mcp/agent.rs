//! Issue 25 items 3, 4 and 5 through the built binary's MCP face: an
//! agent's terminal has no pager or editor that waits for keys
//! (overridable), a pager opened anyway or any program on the alternate
//! screen answers `full_screen`, keys reach it, and output reads as the
//! terminal shows it.

use base64::Engine as _;
use serde_json::json;

use super::Mcp;
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn an_agents_terminal_has_no_pager_or_editor_and_overrides_win() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "a"})).await;
        let send = |text: &str| json!({"terminal": "a", "text": text, "submit": true});
        let pagers = mcp
            .ok(
                "terminal_send",
                send("echo \"$PAGER $GIT_PAGER $MANPAGER\""),
            )
            .await;
        assert_eq!(pagers["output"], "cat cat cat\n", "{pagers}");
        // As git runs it: through the shell, the file as an argument.
        let edit = r#"sh -c "$GIT_EDITOR \"\$@\"" editor notes.txt"#;
        let edited = mcp.ok("terminal_send", send(edit)).await;
        assert_eq!(edited["exit_code"], 1, "{edited}");
        assert!(
            edited["output"]
                .as_str()
                .unwrap()
                .contains("tmux-engine: no interactive editor for agents"),
            "{edited}"
        );
        let spawn = json!({"name": "b", "env": {"PAGER": "less"}});
        mcp.ok("terminal_spawn", spawn).await;
        let own = json!({"terminal": "b", "text": "echo \"$PAGER $GIT_PAGER\"", "submit": true});
        let own = mcp.ok("terminal_send", own).await;
        assert_eq!(own["output"], "less cat\n", "{own}");
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_pager_answers_full_screen_and_keys_quit_it() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "p"})).await;
        let send = |text: &str| json!({"terminal": "p", "text": text, "submit": true});
        let paged = mcp.ok("terminal_send", send("seq 1 500 | less")).await;
        assert_eq!(paged["wait_reason"], "full_screen", "{paged}");
        assert_eq!(paged["foreground_command"], "less", "{paged}");
        assert!(
            paged["screen"].as_str().unwrap().starts_with("1\n2\n"),
            "{paged}"
        );
        let refused = mcp.ok("terminal_send", send("echo next")).await;
        assert_eq!(refused["typed"], false, "{refused}");
        assert_eq!(refused["wait_reason"], "full_screen", "{refused}");
        let keys = json!({"terminal": "p", "keys": ["G", "q"]});
        // The key that quits the pager ends the command: its exit code.
        let quit = mcp.ok("terminal_send", keys).await;
        assert_eq!(quit["wait_reason"], "command", "{quit}");
        assert_eq!(quit["exit_code"], 0, "{quit}");
        assert_eq!(quit["commands"][0]["text"], "seq 1 500 | less", "{quit}");
        let back = mcp.ok("terminal_send", send("echo back")).await;
        assert_eq!(back["output"], "back\n", "{back}");
        // Refused naming the bad key, nothing typed.
        let error = mcp
            .error(
                "terminal_send",
                json!({"terminal": "p", "keys": ["q", "Esc"]}),
            )
            .await;
        assert!(error.starts_with("INVALID_INPUT"), "{error}");
        assert!(error.contains("\"Esc\""), "{error}");
        let after = mcp.ok("terminal_send", send("echo still")).await;
        assert_eq!(after["output"], "still\n", "{after}");
        mcp.stop().await;
    })
    .await;
}

/// Not a known pager or editor: the alternate screen alone makes it
/// full screen (vim's and top's way), and keys reach it.
#[tokio::test]
async fn an_unknown_program_on_the_alternate_screen_is_full_screen() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "alt"})).await;
        let send = |text: &str| json!({"terminal": "alt", "text": text, "submit": true});
        let program = r#"python3 -c 'print("\x1b[?1049hALT", flush=True); input(); print("\x1b[?1049l", end="")'"#;
        let full = mcp.ok("terminal_send", send(program)).await;
        assert_eq!(full["wait_reason"], "full_screen", "{full}");
        assert_eq!(full["foreground_command"], "python3", "{full}");
        // The alternate screen: the program's text, not the shell's line.
        let screen = full["screen"].as_str().unwrap();
        assert!(screen.contains("ALT") && !screen.contains("python3"), "{full}");
        let refused = mcp.ok("terminal_send", send("echo next")).await;
        assert_eq!(refused["typed"], false, "{refused}");
        let keys = json!({"terminal": "alt", "keys": ["Enter"]});
        mcp.ok("terminal_send", keys).await;
        let back = mcp.ok("terminal_send", send("echo back")).await;
        assert_eq!(back["output"], "back\n", "{back}");
        assert_eq!(back["exit_code"], 0, "{back}");
        mcp.stop().await;
    })
    .await;
}

#[tokio::test]
async fn output_reads_as_the_terminal_shows_it() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        mcp.ok("terminal_spawn", json!({"name": "r"})).await;
        let progress = r"printf '5%%\r10%%\r100%%\n'; printf 'abc\b\bX\n'";
        let send = json!({"terminal": "r", "text": progress, "submit": true});
        let sent = mcp.ok("terminal_send", send).await;
        assert_eq!(sent["exit_code"], 0, "{sent}");
        assert_eq!(sent["output"], "100%\naXc\n", "{sent}");
        // `read since` renders too; `bytes` keeps every byte.
        let since = sent["start_cursor"].clone();
        let read = json!({"terminal": "r", "since": since, "format": "text"});
        let text = mcp.ok("terminal_read", read).await;
        assert!(
            text["text"].as_str().unwrap().contains("\n100%\n"),
            "{text}"
        );
        let read = json!({"terminal": "r", "since": since, "format": "bytes"});
        let raw = mcp.ok("terminal_read", read).await;
        let encoded = raw["bytes"].as_str().unwrap_or_else(|| panic!("{raw}"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        let exact = b"5%\r10%\r100%\r\n";
        assert!(bytes.windows(exact.len()).any(|w| w == exact), "{raw}");
        mcp.stop().await;
    })
    .await;
}
