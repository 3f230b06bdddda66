//! Full-screen programs in front of a send (issue 25 item 4), against real
//! tmux: a send that opens a pager answers `full_screen` with the program
//! and its screen, text for the shell is never typed into it, keys are.

use tmux_engine::registry::{
    RegistryConfig, SendAnswer, SendRequest, SpawnSpec, WaitFor, WaitReason,
};

use super::{Env, WAIT};

/// A send of `text`, then `keys`, Enter pressed when `submit`.
async fn send(env: &Env, text: &str, keys: &[&str], submit: bool) -> SendAnswer {
    let keys: Vec<String> = keys.iter().map(|&key| key.to_owned()).collect();
    let request = SendRequest {
        text: bytes::Bytes::copy_from_slice(text.as_bytes()),
        submit,
        wait: WaitFor::Command,
        timeout: Some(WAIT),
        keys: tmux_engine::screen::keys::parse_keys(&keys).unwrap(),
        ..SendRequest::default()
    };
    let sending = env.registry.owner(&env.owner).send("t", request);
    sending.await.unwrap().result().await.unwrap()
}

#[tokio::test]
async fn a_pager_in_front_is_full_screen_and_takes_keys_not_text() {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), "/bin/bash").await;
        let file = env.dir.path().join("long.txt");
        let lines: Vec<String> = (1..=300).map(|n| format!("line-{n}")).collect();
        std::fs::write(&file, lines.join("\n")).unwrap();
        env.spawn(SpawnSpec::new().name("t")).await;
        // Both signs: `less` switches to the alternate screen (and is a
        // known pager besides).
        let paged = send(&env, &format!("less {}", file.display()), &[], true).await;
        assert_eq!(paged.wait_reason, WaitReason::FullScreen, "{paged:?}");
        assert_eq!(paged.foreground_command.as_deref(), Some("less"));
        assert!(
            paged
                .viewport
                .as_deref()
                .unwrap_or_default()
                .contains("line-1\n"),
            "{}",
            paged.viewport.as_deref().unwrap_or_default()
        );
        // The next command is for the shell: not typed into the pager.
        let refused = send(&env, "echo typed-into-less", &[], true).await;
        assert_eq!(refused.wait_reason, WaitReason::FullScreen);
        assert!(
            refused
                .not_typed_reason
                .as_deref()
                .unwrap()
                .contains("less"),
            "{refused:?}"
        );
        assert!(
            !refused
                .viewport
                .as_deref()
                .unwrap_or_default()
                .contains("typed-into-less"),
            "{}",
            refused.viewport.as_deref().unwrap_or_default()
        );
        // A key that is not the end stays with it: still full screen.
        let down = send(&env, "", &["j"], false).await;
        assert_eq!(down.wait_reason, WaitReason::FullScreen, "{down:?}");
        assert_eq!(down.foreground_command.as_deref(), Some("less"));
        // Keys reach it: `q` quits, and the shell is back: the key ended
        // the command, answered with its exit code as a typed line would.
        let quit = send(&env, "", &["q"], false).await;
        assert_eq!(quit.wait_reason, WaitReason::Command, "{quit:?}");
        assert_eq!(quit.foreground_command, None);
        assert_eq!(quit.exit_code, Some(0), "the command q ended: {quit:?}");
        let listed = quit.commands.last().expect("the command q ended, listed");
        let text = listed.text.as_deref().unwrap_or_default();
        assert!(text.starts_with("less "), "{listed:?}");
        let back = send(&env, "echo back-$((6*7))", &[], true).await;
        assert_eq!(back.wait_reason, WaitReason::Command, "{back:?}");
        assert_eq!(back.output.trim(), "back-42");
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn a_program_that_never_goes_quiet_answers_full_screen_before_the_timeout() {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), "/bin/bash").await;
        env.spawn(SpawnSpec::new().name("t")).await;
        let started = std::time::Instant::now();
        let top = send(&env, "top -d 0.1", &[], true).await;
        assert_eq!(top.wait_reason, WaitReason::FullScreen, "{top:?}");
        assert_eq!(top.foreground_command.as_deref(), Some("top"));
        assert!(started.elapsed() < WAIT, "{:?}", started.elapsed());
        let quit = send(&env, "", &["q"], false).await;
        assert_ne!(quit.wait_reason, WaitReason::FullScreen, "{quit:?}");
        env.finish().await;
    })
    .await;
}

/// Issue 44 item 3: a pager behind a live parent. `git log` with
/// `GIT_PAGER=less` (git's `LESS=FRX`: no alternate screen) leaves `git`
/// as the foreground group's leader, alive while it waits for its pager;
/// the pager is a member of the group. The send names `less`, the next
/// text is not typed into it, and keys reach it (before, only the leader
/// was looked at: `stdin_read`, and the text opened less's help).
#[tokio::test]
async fn a_pager_behind_a_live_parent_is_full_screen() {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), "/bin/bash").await;
        let repo = env.dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        // A message longer than the screen, so `less -F` stays.
        let message: Vec<String> = (1..=100).map(|n| format!("body line {n}")).collect();
        git(&["commit", "-q", "--allow-empty", "-m", &message.join("\n")]);
        let spec = SpawnSpec::new()
            .name("t")
            .cwd(&repo)
            .env("GIT_PAGER", "less")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .size(80, 24);
        env.spawn(spec).await;
        let paged = send(&env, "git log", &[], true).await;
        assert_eq!(paged.wait_reason, WaitReason::FullScreen, "{paged:?}");
        assert_eq!(
            paged.foreground_command.as_deref(),
            Some("less"),
            "{paged:?}"
        );
        let refused = send(&env, "echo after-pager", &[], true).await;
        assert_eq!(refused.wait_reason, WaitReason::FullScreen, "{refused:?}");
        assert!(
            refused
                .not_typed_reason
                .as_deref()
                .unwrap()
                .contains("less"),
            "{refused:?}"
        );
        let quit = send(&env, "", &["q"], false).await;
        assert_ne!(quit.wait_reason, WaitReason::FullScreen, "{quit:?}");
        let back = send(&env, "echo back-$((6*7))", &[], true).await;
        assert_eq!(back.wait_reason, WaitReason::Command, "{back:?}");
        assert_eq!(back.output.trim(), "back-42");
        env.finish().await;
    })
    .await;
}

/// A known name in the foreground group whose output is not the terminal
/// is a shell's own background work, not a pager: fish at its first start
/// runs `man` into a pipe so (`fish_update_completions`, in its group),
/// and text for the shell was refused as typed into `man`. The same name
/// writing to the terminal is still in front.
#[tokio::test]
async fn a_known_name_in_front_counts_only_where_it_writes_to_the_terminal() {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), "/bin/bash").await;
        // `sleep` under a pager's name.
        let man = env.dir.path().join("man");
        std::fs::copy("/bin/sleep", &man).unwrap();
        env.spawn(SpawnSpec::new().name("t")).await;
        // No job control: the background job stays in the shell's group,
        // the terminal's foreground group.
        let quiet = send(
            &env,
            &format!("set +m; {} 300 >/dev/null & echo started", man.display()),
            &[],
            true,
        )
        .await;
        assert_eq!(quiet.wait_reason, WaitReason::Command, "{quiet:?}");
        let typed = send(&env, "echo fine-$((40+2))", &[], true).await;
        assert_eq!(typed.wait_reason, WaitReason::Command, "{typed:?}");
        assert!(typed.not_typed_reason.is_none(), "{typed:?}");
        assert!(typed.output.contains("fine-42"), "{typed:?}");
        // In front and on the terminal: refused as before. Started with
        // no wait (it never goes quiet), then looked for as it runs.
        let start = SendRequest {
            text: bytes::Bytes::from(format!("{} 300", man.display())),
            submit: true,
            wait: WaitFor::None,
            timeout: Some(WAIT),
            ..SendRequest::default()
        };
        let sending = env.registry.owner(&env.owner).send("t", start);
        sending.await.unwrap().result().await.unwrap();
        crate::support::poll("man on the terminal", WAIT, || async {
            std::fs::read_dir("/proc")
                .ok()?
                .flatten()
                .find_map(|entry| {
                    let dir = entry.path();
                    let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
                    let out = std::fs::read_link(dir.join("fd/1")).ok()?;
                    (comm.trim() == "man" && out.starts_with("/dev/pts")).then_some(())
                })
        })
        .await;
        let refused = send(&env, "echo not-typed", &[], true).await;
        assert_eq!(refused.wait_reason, WaitReason::FullScreen, "{refused:?}");
        assert_eq!(refused.foreground_command.as_deref(), Some("man"));
        let _ = send(&env, "", &["C-c"], false).await;
        let _ = send(&env, "kill %1", &[], true).await;
        env.finish().await;
    })
    .await;
}
