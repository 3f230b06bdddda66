//! Sends against real tmux: exact delivery of any bytes, nothing injected,
//! and every wait reason.

use std::time::Duration;

use tmux_engine::registry::{ReadRequest, SendRequest, SpawnSpec, WaitFor, WaitReason};

use super::{WAIT, sh, with_env};
use crate::support::poll;

/// A program that puts its terminal in raw mode (no line discipline edits,
/// no signals from ^C) and copies exactly `n` bytes of input to `out`.
fn raw_copy(n: usize, out: &std::path::Path) -> SpawnSpec {
    sh(&format!(
        "stty raw -echo; exec head -c {n} > '{}'",
        out.display()
    ))
}

#[tokio::test]
async fn every_byte_value_arrives_exactly() {
    with_env(async |env| {
        let out = env.dir.path().join("out.bin");
        let mut text: Vec<u8> = (0..=255u8).collect();
        text.extend((0..=255u8).rev());
        env.spawn(raw_copy(text.len(), &out).name("raw")).await;
        // Reading means stty ran: no byte meets the cooked line discipline.
        let ready = env.send("raw", b"", false, WaitFor::StdinRead).await;
        assert_eq!(ready.wait_reason, WaitReason::StdinRead);
        env.send("raw", &text, false, WaitFor::None).await;
        poll("copied bytes", WAIT, || async {
            std::fs::read(&out)
                .ok()
                .filter(|got| got.len() == text.len())
        })
        .await;
        assert_eq!(std::fs::read(&out).unwrap(), text);
    })
    .await;
}

#[tokio::test]
async fn one_mebibyte_arrives_exactly() {
    with_env(async |env| {
        let out = env.dir.path().join("big.bin");
        let text: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        env.spawn(raw_copy(text.len(), &out).name("big")).await;
        env.send("big", b"", false, WaitFor::StdinRead).await;
        env.send("big", &text, false, WaitFor::None).await;
        poll("copied bytes", Duration::from_secs(40), || async {
            std::fs::metadata(&out)
                .ok()
                .filter(|meta| meta.len() == text.len() as u64)
        })
        .await;
        assert!(std::fs::read(&out).unwrap() == text);
    })
    .await;
}

#[tokio::test]
async fn shell_metacharacters_are_typed_not_run() {
    with_env(async |env| {
        let canary = env.dir.path().join("CANARY");
        env.spawn(SpawnSpec::new().name("shell").cwd(env.dir.path()))
            .await;
        // Typed into `cat`, which only echoes: nothing may run.
        env.send("shell", b"cat > /dev/null", true, WaitFor::StdinRead)
            .await;
        let text = format!(
            "'\"; touch {c}; $(touch {c}) `touch {c}` \\; kill-server ; run-shell 'touch {c}'\n\x00\n",
            c = canary.display()
        );
        env.send("shell", text.as_bytes(), false, WaitFor::Idle).await;
        env.send("shell", b"\x04", false, WaitFor::StdinRead).await;
        let done = env
            .send("shell", b"echo alive-$((6*7))", true, WaitFor::Idle)
            .await;
        assert!(done.viewport.as_deref().unwrap_or_default().contains("alive-42"), "{}", done.viewport.as_deref().unwrap_or_default());
        assert!(!canary.exists(), "the canary was created: text was injected");
    })
    .await;
}

#[tokio::test]
async fn wait_reasons_idle_stdin_exit_timeout_cancel() {
    with_env(async |env| {
        env.spawn(SpawnSpec::new().name("sh")).await;
        // A shell at its prompt blocks reading the terminal.
        let prompt = env.send("sh", b"echo hi", true, WaitFor::StdinRead).await;
        assert_eq!(prompt.wait_reason, WaitReason::StdinRead);
        assert!(
            prompt
                .viewport
                .as_deref()
                .unwrap_or_default()
                .contains("hi")
        );
        // Quiet but not reading: idle.
        let sleeping = env.send("sh", b"sleep 1", true, WaitFor::Idle).await;
        assert_eq!(sleeping.wait_reason, WaitReason::Idle);
        let back = env.send("sh", b"", false, WaitFor::StdinRead).await;
        assert_eq!(back.wait_reason, WaitReason::StdinRead);
        // Output keeps coming: timeout. One process ticks (perl-base is
        // essential in Debian): a `sleep` forked per tick could, on a
        // loaded machine, leave a gap longer than the quiet period. The
        // ticks flow before the wait begins: perl's start on a loaded
        // machine once outlasted the quiet period after the typed line's
        // echo, and the wait rightly answered idle.
        env.send(
            "sh",
            br#"perl -e '$|=1; while (1) { print "tick\n"; select(undef, undef, undef, 0.02) }'"#,
            true,
            WaitFor::None,
        )
        .await;
        poll("ticks", WAIT, || async {
            env.registry
                .owner(&env.owner)
                .read("sh", ReadRequest::default())
                .await
                .ok()
                // A line of its own: the typed command line holds "tick" too.
                .filter(|page| page.lines.iter().any(|line| line == "tick"))
        })
        .await;
        let handle = env
            .registry
            .owner(&env.owner)
            .send(
                "sh",
                SendRequest {
                    wait: WaitFor::Idle,
                    timeout: Some(Duration::from_millis(800)),
                    ..SendRequest::default()
                },
            )
            .await
            .unwrap();
        let ticking = handle.result().await.unwrap();
        assert_eq!(ticking.wait_reason, WaitReason::Timeout);
        // Cancelled while waiting; output so far is readable.
        let handle = env
            .registry
            .owner(&env.owner)
            .send(
                "sh",
                SendRequest {
                    wait: WaitFor::Exit,
                    timeout: Some(WAIT),
                    ..SendRequest::default()
                },
            )
            .await
            .unwrap();
        poll("ticks", WAIT, || async {
            handle.read_output().text.contains("tick").then_some(())
        })
        .await;
        let output = handle.read_output();
        assert!(!output.bytes.is_empty());
        assert!(!output.text.contains('\x1b'));
        assert!(handle.cancel());
        assert!(!handle.cancel());
        assert_eq!(
            handle.result().await.unwrap().wait_reason,
            WaitReason::Cancelled
        );
        // Ctrl-C typed as text stops the loop; then the shell exits.
        env.send("sh", b"\x03", false, WaitFor::StdinRead).await;
        let exited = env.send("sh", b"exit 3", true, WaitFor::Exit).await;
        assert_eq!(exited.wait_reason, WaitReason::Exited);
    })
    .await;
}

#[tokio::test]
async fn read_pages_scrollback_and_clamps() {
    with_env(async |env| {
        env.spawn(sh("seq 1 500; exec sleep 60").name("seq").size(80, 24))
            .await;
        let page = poll("output", WAIT, || async {
            let page = env
                .registry
                .owner(&env.owner)
                .read(
                    "seq",
                    ReadRequest {
                        offset: 0,
                        count: Some(3),
                    },
                )
                .await
                .unwrap();
            // Settled: the last line is there and the history is counted
            // (a page read while output still arrives may pair a newer
            // screen with an older history size).
            (page.lines.last().map(String::as_str) == Some("500") && page.total_lines == 500)
                .then_some(page)
        })
        .await;
        assert_eq!(page.lines, ["498", "499", "500"]);
        assert_eq!(page.total_lines, 500);
        assert_eq!(page.range, 497..500);
        let older = env
            .registry
            .owner(&env.owner)
            .read(
                "seq",
                ReadRequest {
                    offset: 490,
                    count: Some(5),
                },
            )
            .await
            .unwrap();
        assert_eq!(older.lines, ["6", "7", "8", "9", "10"]);
        let huge = env
            .registry
            .owner(&env.owner)
            .read(
                "seq",
                ReadRequest {
                    offset: usize::MAX,
                    count: Some(usize::MAX),
                },
            )
            .await
            .unwrap();
        assert!(huge.lines.is_empty());
        assert_eq!(huge.range, 0..0);
        let all = env
            .registry
            .owner(&env.owner)
            .read(
                "seq",
                ReadRequest {
                    offset: 0,
                    count: Some(usize::MAX),
                },
            )
            .await
            .unwrap();
        assert_eq!(all.lines.len(), 500);
        assert_eq!(all.lines[0], "1");
        let screen = env.registry.owner(&env.owner).screen("seq").await.unwrap();
        assert_eq!((screen.size().cols, screen.size().rows), (80, 24));
        assert_eq!(screen.rows().count(), 24);
        let json = serde_json::to_value(&screen).unwrap();
        assert_eq!(json["lines"].as_array().unwrap().len(), 24);
        assert_eq!(
            (json["cols"].as_u64(), json["rows"].as_u64()),
            (Some(80), Some(24))
        );
    })
    .await;
}

/// A send with `keys` and no text, through the registry.
async fn send_keys(env: &super::Env, target: &str, keys: &[&str], wait: WaitFor) -> String {
    let keys: Vec<String> = keys.iter().map(|&key| key.to_owned()).collect();
    let request = SendRequest {
        wait,
        timeout: Some(WAIT),
        keys: tmux_engine::screen::keys::parse_keys(&keys).unwrap(),
        ..SendRequest::default()
    };
    let sending = env.registry.owner(&env.owner).send(target, request);
    let result = sending.await.unwrap().result().await.unwrap();
    result.viewport.unwrap_or_default()
}

#[tokio::test]
async fn keys_arrive_as_tmux_would_write_them_in_either_cursor_mode() {
    with_env(async |env| {
        // `cat -v` shows what arrived; the line discipline echoes it.
        env.spawn(sh("stty -icanon -echo; exec cat -v").name("plain"))
            .await;
        env.send("plain", b"", false, WaitFor::StdinRead).await;
        let shown = send_keys(
            env,
            "plain",
            &["Escape", ":wq", "C-a", "Up", "F5", "Enter"],
            WaitFor::StdinRead,
        )
        .await;
        assert!(shown.contains("^[:wq^A^[[A^[[15~"), "{shown}");
        // Application cursor mode (DECCKM), as `less` and `vim` set it:
        // tmux writes `ESC O A` for Up, and so does the send.
        env.spawn(sh("printf '\\033[?1h'; stty -icanon -echo; exec cat -v").name("app"))
            .await;
        env.send("app", b"", false, WaitFor::StdinRead).await;
        let shown = send_keys(env, "app", &["Up", "Down", "Enter"], WaitFor::StdinRead).await;
        assert!(shown.contains("^[OA^[OB"), "{shown}");
    })
    .await;
}
