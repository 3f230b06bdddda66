//! Full-screen programs in front of a send (issue 25 item 4), against real
//! tmux: a send that opens a pager answers `full_screen` with the program
//! and its screen, text for the shell is never typed into it, keys are.

use tmux_engine::registry::{
    RegistryConfig, SendRequest, SendResult, SpawnSpec, WaitFor, WaitReason,
};

use super::{Env, WAIT};

/// A send of `text`, then `keys`, Enter pressed when `submit`.
async fn send(env: &Env, text: &str, keys: &[&str], submit: bool) -> SendResult {
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
        assert_eq!(paged.foreground.as_deref(), Some("less"));
        assert!(paged.viewport.contains("line-1\n"), "{}", paged.viewport);
        // The next command is for the shell: not typed into the pager.
        let refused = send(&env, "echo typed-into-less", &[], true).await;
        assert_eq!(refused.wait_reason, WaitReason::FullScreen);
        assert!(
            refused.not_typed.as_deref().unwrap().contains("less"),
            "{refused:?}"
        );
        assert!(
            !refused.viewport.contains("typed-into-less"),
            "{}",
            refused.viewport
        );
        // Keys reach it: `q` quits, and the shell is back.
        let quit = send(&env, "", &["q"], false).await;
        assert_eq!(quit.wait_reason, WaitReason::StdinRead, "{quit:?}");
        assert_eq!(quit.foreground, None);
        let back = send(&env, "echo back-$((6*7))", &[], true).await;
        assert_eq!(back.wait_reason, WaitReason::Command, "{back:?}");
        assert_eq!(back.command.unwrap().output.trim(), "back-42");
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
        assert_eq!(top.foreground.as_deref(), Some("top"));
        assert!(started.elapsed() < WAIT, "{:?}", started.elapsed());
        let quit = send(&env, "", &["q"], false).await;
        assert_ne!(quit.wait_reason, WaitReason::FullScreen, "{quit:?}");
        env.finish().await;
    })
    .await;
}
