//! Sends to an integrated bash (and sh) against real tmux: several
//! commands in one send answered whole, nothing leaking into the next;
//! text typed only at a drawn prompt (never echoed twice) or into a
//! reader at once; text that could not be typed by its deadline reported
//! and never typed later; a program waiting on a socket told apart from
//! one reading its terminal.

use std::time::Duration;

use tmux_engine::registry::{
    ReadRequest, RegistryConfig, SendAnswer, SendRequest, SpawnSpec, WaitFor, WaitReason,
};

use super::{Env, WAIT};

/// Runs `body` with a registry whose shell is `shell` (integrated).
async fn with_shell(shell: &str, body: impl AsyncFnOnce(&Env)) {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), shell).await;
        body(&env).await;
        env.finish().await;
    })
    .await;
}

/// One `wait: command` send of `text` (Enter pressed) with `timeout`.
pub(crate) async fn run(env: &Env, text: &str, timeout: Duration) -> SendAnswer {
    submit(env, text, WaitFor::Command, true, timeout).await
}

/// One send of `text` with Enter pressed, waiting `wait` at most
/// `timeout`, kept in the shell's history or not.
async fn submit(
    env: &Env,
    text: &str,
    wait: WaitFor,
    history: bool,
    timeout: Duration,
) -> SendAnswer {
    let request = SendRequest {
        text: bytes::Bytes::copy_from_slice(text.as_bytes()),
        submit: true,
        wait,
        timeout: Some(timeout),
        history,
        keys: Vec::new(),
    };
    env.registry
        .owner(&env.owner)
        .send("t", request)
        .await
        .unwrap()
        .result()
        .await
        .unwrap()
}

/// The command's output, `None` unless the marks gave one.
fn output(result: &SendAnswer) -> &str {
    result
        .duration_secs
        .map_or("<none>", |_| result.output.as_str())
}

/// The whole scrollback of `t`.
async fn scrollback(env: &Env) -> Vec<String> {
    let request = ReadRequest {
        offset: 0,
        count: Some(usize::MAX),
    };
    let page = env.registry.owner(&env.owner).read("t", request).await;
    page.unwrap().lines
}

#[tokio::test]
async fn several_commands_in_one_send_answer_whole() {
    for shell in ["/bin/bash", "/bin/sh"] {
        with_shell(shell, async |env| {
            env.spawn(SpawnSpec::new().name("t").cwd(env.dir.path()))
                .await;
            let two = run(env, "echo one\necho two", WAIT).await;
            assert_eq!(two.wait_reason, WaitReason::Command, "{shell}: {two:?}");
            assert_eq!(output(&two), "one\ntwo\n", "{shell}: {two:?}");
            assert_eq!(two.commands.len(), 2, "{shell}: {two:?}");
            // `;` and `&&` on one line: one command, the last status.
            let line = run(env, "echo a; echo b && false", WAIT).await;
            assert_eq!(output(&line), "a\nb\n", "{shell}: {line:?}");
            assert_eq!(line.exit_code, Some(1));
            // A heredoc, then a loop spanning lines.
            let script =
                "cat <<'EOF' > list\nx\ny\nz\nEOF\nfor w in $(cat list); do\n  echo \"<$w>\"\ndone";
            let loop_ = run(env, script, WAIT).await;
            assert_eq!(loop_.wait_reason, WaitReason::Command, "{shell}: {loop_:?}");
            assert_eq!(output(&loop_), "<x>\n<y>\n<z>\n", "{shell}: {loop_:?}");
            assert_eq!(loop_.exit_code, Some(0));
            assert_eq!(loop_.commands.len(), 2, "{shell}: {loop_:?}");
            if shell.ends_with("bash") {
                let text = loop_.commands[1].text.as_deref().unwrap_or_default();
                assert!(text.starts_with("for w in"), "{text:?}");
            }
            let offset =
                |cursor: &str| -> u64 { cursor.split(':').nth(1).unwrap().parse().unwrap() };
            assert!(
                loop_.commands.iter().all(|c| {
                    offset(&c.start_cursor) <= offset(c.end_cursor.as_deref().unwrap())
                })
            );
            // Nothing leaked: the next send is its own.
            let next = run(env, "echo next", WAIT).await;
            assert_eq!(output(&next), "next\n", "{shell}: {next:?}");
            assert_eq!(next.commands.len(), 1);
        })
        .await;
    }
}

#[tokio::test]
async fn a_reply_to_the_shells_own_read_is_typed_at_once() {
    with_shell("/bin/bash", async |env| {
        env.spawn(SpawnSpec::new().name("t")).await;
        for (flags, echo) in [("-p 'Name? '", true), ("-s -p 'Secret? '", false)] {
            let asked = run(env, &format!("read {flags} n; echo \"hi $n\""), WAIT).await;
            assert_eq!(asked.wait_reason, WaitReason::StdinRead, "{asked:?}");
            // Typed into the read, not held for a prompt that the read
            // keeps from coming: a send waits for one only until its
            // deadline, and then types nothing (`not_typed_reason`), so
            // no bound on the time is needed to tell the two apart.
            let reply = run(env, "bob", WAIT).await;
            assert_eq!(reply.wait_reason, WaitReason::Command, "{reply:?}");
            assert!(reply.not_typed_reason.is_none(), "{reply:?}");
            let said = output(&reply);
            assert!(said.ends_with("hi bob\n"), "{said:?}");
            assert_eq!(said.contains("bob\r\n") || said.starts_with("bob"), echo);
            assert_eq!(reply.exit_code, Some(0));
        }
    })
    .await;
}

#[tokio::test]
async fn text_not_typed_by_its_deadline_is_never_typed() {
    with_shell("/bin/bash", async |env| {
        env.spawn(SpawnSpec::new().name("t")).await;
        run(env, "true", WAIT).await;
        let sleeping = run(env, "sleep 5", Duration::from_millis(300)).await;
        assert_eq!(sleeping.wait_reason, WaitReason::Timeout);
        assert!(sleeping.not_typed_reason.is_none(), "{sleeping:?}");
        let late = run(env, "echo late-$((40+2))", Duration::from_millis(300)).await;
        assert_eq!(late.wait_reason, WaitReason::Timeout, "{late:?}");
        let why = late.not_typed_reason.as_deref().unwrap_or_default();
        assert!(why.contains("deadline"), "{late:?}");
        // Cancelled while it waits for the prompt: never typed either.
        let request = SendRequest {
            text: "echo cancelled-$((40+2))".into(),
            submit: true,
            wait: WaitFor::Command,
            timeout: Some(WAIT),
            history: true,
            keys: Vec::new(),
        };
        let handle = env.registry.owner(&env.owner).send("t", request).await;
        let handle = handle.unwrap();
        assert!(handle.cancel());
        let cancelled = handle.result().await.unwrap();
        assert_eq!(cancelled.wait_reason, WaitReason::Cancelled);
        assert!(cancelled.not_typed_reason.is_some(), "{cancelled:?}");
        // Once the sleep ends, the next send waits for the prompt; the
        // late text never reached the shell.
        let back = run(env, "echo back", WAIT).await;
        assert_eq!(output(&back), "back\n", "{back:?}");
        let lines = scrollback(env).await.join("\n");
        assert!(!lines.contains("late-"), "{lines}");
        assert!(!lines.contains("cancelled-"), "{lines}");
    })
    .await;
}

#[tokio::test]
async fn a_hundred_sends_into_a_fresh_bash_echo_each_command_once() {
    with_shell("/bin/bash", async |env| {
        env.spawn(SpawnSpec::new().name("t").history_limit(10_000))
            .await;
        for n in 0..100 {
            let sent = run(env, &format!("echo x{n}y"), WAIT).await;
            assert_eq!(output(&sent), format!("x{n}y\n"), "{sent:?}");
        }
        let lines = scrollback(env).await;
        let doubled: Vec<usize> = (0..100)
            .filter(|n| {
                let command = format!("echo x{n}y");
                lines.iter().filter(|line| line.contains(&command)).count() != 1
            })
            .collect();
        assert!(
            doubled.is_empty(),
            "doubled: {doubled:?}\n{}",
            lines.join("\n")
        );
    })
    .await;
}

/// A line submitted with any wait to a bash still reading its rc (here a
/// `.bashrc` that takes a while) is typed once its prompt is drawn, as
/// `command` types it: typed at once, the terminal echoed it before
/// readline started and readline again, so it stood twice in the
/// scrollback. The history's leading space is added too.
#[tokio::test]
async fn a_line_for_a_starting_shell_waits_for_its_first_prompt_whatever_the_wait() {
    for wait in [WaitFor::None, WaitFor::StdinRead, WaitFor::Idle] {
        with_shell("/bin/bash", async |env| {
            let home = env.dir.path().join("home");
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(home.join(".bashrc"), "sleep 0.5\n").unwrap();
            env.spawn(
                SpawnSpec::new()
                    .name("t")
                    .cwd(env.dir.path())
                    .env("HOME", home.to_str().unwrap()),
            )
            .await;
            let sent = submit(env, "echo x-$((6*7))", wait, false, WAIT).await;
            assert!(sent.typed, "{wait:?}: {sent:?}");
            let deadline = tokio::time::Instant::now() + WAIT;
            let lines = loop {
                let lines = scrollback(env).await;
                if lines.iter().any(|line| line == "x-42") {
                    break lines;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{wait:?}: no output\n{}",
                    lines.join("\n")
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let echoed = lines
                .iter()
                .filter(|line| line.contains("echo x-$((6*7))"))
                .count();
            assert_eq!(echoed, 1, "{wait:?}:\n{}", lines.join("\n"));
            // At the prompt, with the leading space `history: false` asks.
            assert!(
                lines.iter().any(|line| line.contains("  echo x-$((6*7))")),
                "{wait:?}:\n{}",
                lines.join("\n")
            );
        })
        .await;
    }
}

#[tokio::test]
async fn a_server_waiting_on_a_socket_is_busy_not_reading() {
    with_shell("/bin/bash", async |env| {
        env.spawn(SpawnSpec::new().name("t").cwd(env.dir.path()))
            .await;
        let server = run(env, "python3 -m http.server 0 --bind 127.0.0.1", WAIT).await;
        assert_eq!(server.wait_reason, WaitReason::Busy, "{server:?}");
        // Nothing reads the terminal: a command is not typed.
        let next = run(env, "echo never", Duration::from_millis(500)).await;
        assert!(
            next.not_typed_reason
                .as_deref()
                .unwrap_or_default()
                .contains("busy"),
            "{next:?}"
        );
        // A REPL reads it.
        env.registry
            .owner(&env.owner)
            .signal("t", tmux_engine::registry::Signal::Int)
            .await
            .unwrap();
        let repl = run(env, "python3 -q", WAIT).await;
        assert_eq!(repl.wait_reason, WaitReason::StdinRead, "{repl:?}");
        let two = run(env, "1+1", WAIT).await;
        assert_eq!(two.wait_reason, WaitReason::StdinRead, "{two:?}");
    })
    .await;
}
