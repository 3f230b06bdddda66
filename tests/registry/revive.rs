//! Issue 44 item 9: a send, read or wait brings a dead `on-attach`
//! terminal back, as an attach does (its kept history restored, its
//! `resume_command` typed first), through MCP, and says so; a read-only
//! principal's read or wait never does (it would start the program).
//! Before, the send answered `TERMINAL_DEAD: gone: host_restarted` and
//! only `attach` and `probe`, which MCP lacks, recreated.

use serde_json::json;

use super::WAIT;
use super::reboot::sigkill_servers;
use crate::mcp::Mcp;
use crate::support::poll;

#[tokio::test]
async fn use_brings_an_on_attach_terminal_back_after_a_reboot() {
    crate::support::within(async {
        let cli = crate::cli::Cli::new();
        let dir = cli.state().parent().unwrap().to_owned();
        let boot = dir.join("boot_id");
        std::fs::write(&boot, "a-boot-before\n").unwrap();
        let env = [("TMUX_ENGINE_BOOT_ID_FILE", boot.as_path())];
        let one = Mcp::start_env(&cli, &["--keep-history"], "/bin/sh", &env).await;
        for name in ["s", "r", "w"] {
            let spawn = json!({"name": name, "restart": "on-attach",
                               "resume_command": "echo resumed-$((6*7))"});
            one.ok("terminal_spawn", spawn).await;
            let args = json!({"terminal": name, "text": "echo before-$((1+1))",
                              "submit": true, "wait": "command"});
            let before = one.ok("terminal_send", args).await;
            assert_eq!(before["output"], "before-2\n", "{before}");
        }
        // On disk (the writer's loss window), as the restore reads it.
        for name in ["s", "r", "w"] {
            poll("the kept history", WAIT, || async {
                let logs = cli.run(&["logs", name]);
                String::from_utf8_lossy(&logs.stdout)
                    .contains("before-2")
                    .then_some(())
            })
            .await;
        }
        one.kill();
        sigkill_servers(&cli.runtime()).await;
        std::fs::remove_dir_all(cli.runtime()).unwrap();
        std::fs::write(&boot, "a-boot-after\n").unwrap();

        // Read-only: a read answers the kept history, a wait fails; neither
        // starts the program.
        let watcher = Mcp::start_env(&cli, &["--read-only"], "/bin/sh", &env).await;
        let page = watcher.ok("terminal_read", json!({"terminal": "r"})).await;
        assert!(page.get("recreated").is_none(), "{page}");
        assert!(crate::mcp::lines(&page).contains("before-2"), "{page}");
        let waited = watcher
            .error(
                "terminal_wait",
                json!({"terminal": "w", "text": "x", "timeout_secs": 1}),
            )
            .await;
        assert!(waited.starts_with("TERMINAL_DEAD: "), "{waited}");
        for name in ["r", "w"] {
            let shown = watcher.ok("terminal_show", json!({"terminal": name})).await;
            assert_eq!(shown["status"]["kind"], "gone", "{shown}");
            assert_eq!(shown["status"]["reason"], "host_restarted", "{shown}");
        }
        watcher.stop().await;

        let two = Mcp::start_env(&cli, &[], "/bin/sh", &env).await;
        // A send: recreated, the resume command typed first, then the text.
        let args = json!({"terminal": "s", "text": "echo after-$((2+3))",
                          "submit": true, "wait": "command"});
        let sent = two.ok("terminal_send", args).await;
        assert_eq!(sent["recreated"], true, "{sent}");
        assert_eq!(sent["output"], "after-5\n", "{sent}");
        assert_eq!(sent["exit_code"], 0, "{sent}");
        let page = two
            .ok("terminal_read", json!({"terminal": "s", "count": 100}))
            .await;
        assert!(page.get("recreated").is_none(), "{page}");
        let text = crate::mcp::lines(&page);
        let (old, marked) = (text.find("before-2"), text.find("── restored from "));
        let (resumed, after) = (text.rfind("resumed-42"), text.rfind("after-5"));
        assert!(
            old < marked && marked < resumed && resumed < after && old.is_some(),
            "{text}"
        );
        // A read: recreated, the kept history in its page.
        let page = two
            .ok("terminal_read", json!({"terminal": "r", "count": 100}))
            .await;
        assert_eq!(page["recreated"], true, "{page}");
        assert!(crate::mcp::lines(&page).contains("before-2"), "{page}");
        // A wait: recreated, and it sees the resume command's output.
        let waited = two
            .ok(
                "terminal_wait",
                json!({"terminal": "w", "text": "resumed-42", "timeout_secs": 10}),
            )
            .await;
        assert_eq!(waited["recreated"], true, "{waited}");
        assert_eq!(waited["matched"], "resumed-42", "{waited}");
        for name in ["s", "r", "w"] {
            two.ok("terminal_kill", json!({"terminal": name})).await;
        }
        two.stop().await;
    })
    .await;
}
