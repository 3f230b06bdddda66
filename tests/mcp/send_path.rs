//! Issue 44, the send path, through the built binary's MCP face: text is
//! typed literally (a TAB never completes), a key that ends a command
//! answers its exit code, a program sleeping on a timer is not `busy` for
//! ever, keys in a full-screen program take any word, and a command's
//! `text` is bounded.

use serde_json::{Value, json};

use super::{Mcp, PROMPTLY};
use crate::cli::Cli;
use crate::support::within;

/// Spawns a shell named `name` working in `dir`.
async fn spawn(mcp: &Mcp, name: &str, dir: &tempfile::TempDir) -> Value {
    let spawn = json!({"name": name, "cwd": dir.path()});
    mcp.ok("terminal_spawn", spawn).await
}

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
        let dir = tempfile::tempdir().unwrap();
        spawn(&mcp, "h", &dir).await;
        let mut text = String::from("cat > big.txt <<'EOF'\n");
        for line in 0..400 {
            text.push_str(&format!(
                "line {line:04} of a pasted heredoc, padded to its size .........\n"
            ));
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

/// Item 6: while a full-screen program is in front, a `keys` element that
/// names no key is typed as text (vim's `README`, `TODO`, `ZZ`); at a
/// shell a misspelt key is still refused by name, and nothing is typed.
/// Before, every such word was refused, in vim too.
#[tokio::test]
async fn keys_in_a_full_screen_program_take_any_word() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let dir = tempfile::tempdir().unwrap();
        spawn(&mcp, "v", &dir).await;
        let vim = "vim -u NONE -N -i NONE notes.txt";
        let keys = |keys: Value| json!({"terminal": "v", "keys": keys, "timeout_secs": 30});
        let opened = mcp.ok("terminal_send", send("v", vim)).await;
        assert_eq!(opened["wait_reason"], "full_screen", "{opened}");
        // Text is refused there, and its advice names keys that work.
        let refused = mcp.ok("terminal_send", send("v", "hello")).await;
        assert_eq!(refused["typed"], false, "{refused}");
        let why = refused["not_typed_reason"].as_str().unwrap();
        assert!(why.contains("\"README\""), "{refused}");
        let saved = json!(["o", "README", "Escape", ":wq", "Enter"]);
        let saved = mcp.ok("terminal_send", keys(saved)).await;
        assert_eq!(saved["typed"], true, "{saved}");
        // The send may end while vim, its file written, is still on its way
        // out (quiet, in front: full_screen on a loaded machine); the
        // command's end is vim's exit, as the tracker follows it.
        let ended = json!({"terminal": "v", "command": "last", "timeout_secs": 30});
        let exited = mcp.ok("terminal_wait", ended.clone()).await;
        assert_eq!(exited["exit_code"], 0, "{exited}");
        let shown = mcp.ok("terminal_send", send("v", "cat notes.txt")).await;
        assert_eq!(shown["output"], "\nREADME\n", "{shown}");
        let opened = mcp.ok("terminal_send", send("v", vim)).await;
        assert_eq!(opened["wait_reason"], "full_screen", "{opened}");
        let quit = json!(["G", "o", "TODO", "Escape", "ZZ"]);
        let quit = mcp.ok("terminal_send", keys(quit)).await;
        assert_eq!(quit["typed"], true, "{quit}");
        let exited = mcp.ok("terminal_wait", ended).await;
        assert_eq!(exited["exit_code"], 0, "{exited}");
        let shown = mcp.ok("terminal_send", send("v", "cat notes.txt")).await;
        assert_eq!(shown["output"], "\nREADME\nTODO\n", "{shown}");
        // At the shell: refused by name, its advice (text) works.
        let error = mcp
            .error("terminal_send", keys(json!(["x", "README"])))
            .await;
        assert!(error.starts_with("INVALID_INPUT"), "{error}");
        assert!(
            error.contains("\"README\"") && error.contains("put it in text"),
            "{error}"
        );
        let typed = mcp.ok("terminal_send", send("v", "echo README")).await;
        assert_eq!(typed["output"], "README\n", "{typed}");
        mcp.stop().await;
    })
    .await;
}

/// Item 2: a key that ends the command that runs answers that command's
/// exit code from the tracker, as a typed line would. Before, `C-c` to
/// `tail -f` answered `stdin_read` with `^C` and no `exit_code`.
#[tokio::test]
async fn a_key_that_ends_a_command_answers_its_exit_code() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let dir = tempfile::tempdir().unwrap();
        let shell_pid = spawn(&mcp, "k", &dir).await["pid"].as_i64().unwrap();
        let keys = |keys: Value| json!({"terminal": "k", "keys": keys, "timeout_secs": 30});
        // No core file for the `C-\` below: where the host pipes cores
        // to a handler, the shell would wait on the dump.
        mcp.ok("terminal_send", send("k", "ulimit -c 0")).await;
        for (program, key, code) in [
            ("tail -f /dev/null", "C-c", 130),
            ("sleep 100", "C-\\", 131),
        ] {
            // Typed, not waited for: the key goes once the program is in
            // the terminal's foreground (before that it would signal the
            // shell).
            let start = json!({"terminal": "k", "text": program, "submit": true, "wait": "none"});
            let started = mcp.ok("terminal_send", start).await;
            assert_eq!(started["typed"], true, "{started}");
            super::foreground(&mcp, "k", shell_pid).await;
            // The shell prints the command's start mark before it forks,
            // but that mark may still be on its way through tmux when the
            // program is seen in front: the list catches up to it.
            let listed =
                crate::support::poll("the command listed as running", PROMPTLY, || async {
                    let listed = mcp
                        .ok("terminal_commands", json!({"terminal": "k", "limit": 1}))
                        .await;
                    let newest = &listed["commands"][0];
                    (newest["text"] == program && newest["running"] == true).then_some(listed)
                })
                .await;
            let running = &listed["commands"][0];
            let ended = mcp.ok("terminal_send", keys(json!([key]))).await;
            assert_eq!(ended["wait_reason"], "command", "{program}: {ended}");
            assert_eq!(ended["exit_code"], code, "{program}: {ended}");
            assert_eq!(ended["exit_code_source"], "shell_integration", "{ended}");
            assert_eq!(
                ended["commands"][0]["id"], running["id"],
                "{listed} {ended}"
            );
        }
        // A REPL ended by C-d, and `cat` by C-d after a text reply.
        let repl = mcp.ok("terminal_send", send("k", "python3 -q")).await;
        assert_eq!(repl["wait_reason"], "stdin_read", "{repl}");
        let ended = mcp.ok("terminal_send", keys(json!(["C-d"]))).await;
        assert_eq!(ended["wait_reason"], "command", "{ended}");
        assert_eq!(ended["exit_code"], 0, "{ended}");
        let cat = mcp.ok("terminal_send", send("k", "cat; (exit 3)")).await;
        assert_eq!(cat["wait_reason"], "stdin_read", "{cat}");
        let line = mcp.ok("terminal_send", send("k", "a line")).await;
        assert_eq!(line["wait_reason"], "stdin_read", "{line}");
        let ended = mcp.ok("terminal_send", keys(json!(["C-d"]))).await;
        assert_eq!(ended["exit_code"], 3, "{ended}");
        // At the prompt a key is still just typed: no command, no code.
        let idle = mcp.ok("terminal_send", keys(json!(["C-c"]))).await;
        assert!(idle["exit_code"].is_null(), "{idle}");
        let after = mcp.ok("terminal_send", send("k", "echo after")).await;
        assert_eq!(after["output"], "after\n", "{after}");
        mcp.stop().await;
    })
    .await;
}

/// Item 5: a program asleep on a timer with no file (`su`'s PAM delay
/// after a wrong password: `select(0, NULL, NULL, NULL, &tv)`; here the
/// same calls, hermetic) is not `busy`: the reply's send waits through
/// the sleep and answers the command's end, the failure in its output.
/// Before, it answered `busy` after half a second and the message fell
/// between two answers.
#[tokio::test]
async fn a_program_sleeping_on_a_timer_is_not_busy() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let dir = tempfile::tempdir().unwrap();
        spawn(&mcp, "s", &dir).await;
        for sleep in ["select.select([], [], [], 2)", "select.poll().poll(2000)"] {
            let program = format!(
                "python3 -c 'import getpass, select, sys; getpass.getpass(\"Password: \"); \
                 {sleep}; sys.exit(\"su: Authentication failure\")'"
            );
            let asked = mcp.ok("terminal_send", send("s", &program)).await;
            assert_eq!(asked["wait_reason"], "stdin_read", "{asked}");
            assert!(
                asked["output"].as_str().unwrap().contains("Password: "),
                "{asked}"
            );
            let failed = mcp.ok("terminal_send", send("s", "wrong")).await;
            assert_eq!(failed["wait_reason"], "command", "{sleep}: {failed}");
            assert_eq!(failed["exit_code"], 1, "{failed}");
            let output = failed["output"].as_str().unwrap();
            assert!(output.contains("su: Authentication failure"), "{failed}");
            assert!(!output.contains("wrong"), "{failed}");
        }
        mcp.stop().await;
    })
    .await;
}

/// Item 1 in one shell: in a directory where completion would change the
/// command (it holds `apple.txt`: `a<TAB>` completes to it), a TAB, an ESC
/// and other control bytes in `text` reach the command as those bytes, a
/// heredoc's TAB-indented Makefile recipe too. Before, readline completed
/// the TAB (`printf '%s' "apple.txt" b" | wc -c`, hung at `> `) and `make`
/// failed.
async fn text_is_typed_literally(shell: &str) {
    let cli = Cli::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("apple.txt"), "").unwrap();
    let mcp = Mcp::start_in(&cli, &[], shell).await;
    spawn(&mcp, "l", &dir).await;
    let tab = mcp
        .ok("terminal_send", send("l", "printf '%s' \"a\tb\" | wc -c"))
        .await;
    assert_eq!(tab["wait_reason"], "command", "{shell}: {tab}");
    assert_eq!(tab["output"], "3\n", "{shell}: {tab}");
    let makefile = "cat > Makefile <<'EOF'\nall:\n\t@echo built-ok\nEOF";
    let written = mcp.ok("terminal_send", send("l", makefile)).await;
    assert_eq!(written["exit_code"], 0, "{shell}: {written}");
    let made = std::fs::read_to_string(dir.path().join("Makefile")).unwrap();
    assert_eq!(made, "all:\n\t@echo built-ok\n", "{shell}");
    let built = mcp.ok("terminal_send", send("l", "make")).await;
    assert_eq!(built["output"], "built-ok\n", "{shell}: {built}");
    assert_eq!(built["exit_code"], 0, "{shell}: {built}");
    // ESC, C-a (line start), C-u (erase the line), DEL (erase a
    // character): bytes, not editing.
    let bytes = "printf '%s' 'x\x1by\x01\x15\x7fz' | od -An -tx1";
    let dumped = mcp.ok("terminal_send", send("l", bytes)).await;
    assert_eq!(
        dumped["output"], " 78 1b 79 01 15 7f 7a\n",
        "{shell}: {dumped}"
    );
    // Several lines still run line by line, each its own command.
    let lines = mcp
        .ok(
            "terminal_send",
            send("l", "printf 'a\\tb\\n'\n\techo\tindented\n(exit 4)"),
        )
        .await;
    let codes: Vec<&Value> = lines["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["exit_code"])
        .collect();
    assert_eq!(codes, [&json!(0), &json!(0), &json!(4)], "{shell}: {lines}");
    // (zsh pads its next prompt with a row of blanks: PROMPT_SP.)
    let output = lines["output"].as_str().unwrap().trim_end_matches(' ');
    assert_eq!(output, "a\tb\nindented\n", "{shell}: {lines}");
    mcp.stop().await;
}

#[tokio::test]
async fn text_is_typed_literally_in_bash() {
    within(text_is_typed_literally("/bin/bash")).await;
}

#[tokio::test]
async fn text_is_typed_literally_in_zsh() {
    let zsh = crate::support::installed("zsh").expect("zsh (.ci/run installs it)");
    within(text_is_typed_literally(&zsh)).await;
}

#[tokio::test]
async fn text_is_typed_literally_in_posix_sh() {
    within(text_is_typed_literally("/bin/sh")).await;
}

/// Item 1 for a reply: text typed into a program that reads in the
/// terminal's own line mode (`od`) reaches it byte for byte: `C-u` erases
/// nothing, `C-c` interrupts nothing, a TAB is a TAB. Before, the `C-c`
/// in the text ended `od` (130) and the `C-u` erased the line.
#[tokio::test]
async fn a_reply_to_a_line_mode_reader_is_typed_literally() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start_in(&cli, &[], "/bin/bash").await;
        let dir = tempfile::tempdir().unwrap();
        spawn(&mcp, "r", &dir).await;
        let reading = mcp.ok("terminal_send", send("r", "od -An -tx1")).await;
        assert_eq!(reading["wait_reason"], "stdin_read", "{reading}");
        let replied = mcp
            .ok("terminal_send", send("r", "x\u{15}y\u{3}z\tw"))
            .await;
        assert_eq!(replied["wait_reason"], "stdin_read", "{replied}");
        let keys = json!({"terminal": "r", "keys": ["C-d"], "timeout_secs": 30});
        let ended = mcp.ok("terminal_send", keys).await;
        assert_eq!(ended["exit_code"], 0, "{ended}");
        let output = ended["output"].as_str().unwrap();
        assert!(output.contains(" 78 15 79 03 7a 09 77 0a"), "{ended}");
        mcp.stop().await;
    })
    .await;
}
