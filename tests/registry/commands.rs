//! Collect later (issue 24, item 4) against real tmux and bash: a
//! command that outlives its send is collected by `wait {command}`,
//! `commands` lists a send's commands with their codes, a text wait does
//! not match the echoed command line, and after the registry is opened
//! again only what the new stream holds is listed, no code invented.

use std::time::Duration;

use tmux_engine::registry::{Registry, RegistryConfig, SpawnSpec};
use tmux_engine::verbs::{self, CommandsRequest, WaitRequest};

use super::{Env, WAIT};
use crate::backend::shell_sends::run;

/// Runs `body` with a registry whose shell is an integrated bash.
async fn with_bash(body: impl AsyncFnOnce(&mut Env)) {
    crate::support::within(async {
        let mut env = Env::with_shell(RegistryConfig::default(), "/bin/bash").await;
        env.spawn(SpawnSpec::new().name("t").cwd(env.dir.path()))
            .await;
        body(&mut env).await;
        env.finish().await;
    })
    .await;
}

/// A wait request on `t` with every condition absent.
fn wait_request() -> WaitRequest {
    WaitRequest {
        terminal: "t".to_owned(),
        text: None,
        regex: None,
        exit: None,
        command: None,
        since: None,
        timeout_secs: Some(WAIT.as_secs_f64()),
    }
}

/// `commands` of `t`, all of them.
async fn commands(env: &Env) -> tmux_engine::registry::CommandsAnswer {
    let request = CommandsRequest {
        terminal: "t".to_owned(),
        limit: Some(1000),
    };
    verbs::commands(env.registry.owner(&env.owner), &request)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_command_that_outlives_its_send_is_collected_by_its_wait() {
    with_bash(async |env| {
        // At the prompt first: a 1 s send into a bash still starting (a
        // loaded machine) would give up before typing, and nothing would run.
        run(env, "true", WAIT).await;
        let sent = run(env, "sleep 2; echo done", Duration::from_secs(1)).await;
        assert!(sent.not_typed_reason.is_none(), "{sent:?}");
        assert!(
            sent.duration_secs.is_none(),
            "the send gave up first: {sent:?}"
        );
        let request = WaitRequest {
            command: Some("last".to_owned()),
            ..wait_request()
        };
        let waited = verbs::wait(env.registry.owner(&env.owner), &request)
            .await
            .unwrap();
        assert_eq!(waited.exit_code, Some(0), "{waited:?}");
        assert_eq!(waited.output.as_deref(), Some("done\n"), "{waited:?}");
        assert_eq!(waited.matched, "sleep 2; echo done");
        let took = waited.duration_secs.unwrap();
        assert!((1.5..WAIT.as_secs_f64()).contains(&took), "{waited:?}");
        // Again by its id, at once: it ended.
        let request = WaitRequest {
            command: waited.command.clone(),
            ..wait_request()
        };
        let again = verbs::wait(env.registry.owner(&env.owner), &request)
            .await
            .unwrap();
        assert_eq!(again, waited);
    })
    .await;
}

#[tokio::test]
async fn a_text_wait_never_matches_the_echoed_command_line() {
    with_bash(async |env| {
        // At the prompt first (as above): a 1 s send into a bash still
        // starting gives up before typing on a loaded machine.
        run(env, "true", WAIT).await;
        let sent = run(env, "sleep 2; echo done", Duration::from_secs(1)).await;
        assert!(
            sent.not_typed_reason.is_none() && sent.duration_secs.is_none(),
            "{sent:?}"
        );
        let request = WaitRequest {
            text: Some("done".to_owned()),
            ..wait_request()
        };
        let waited = verbs::wait(env.registry.owner(&env.owner), &request)
            .await
            .unwrap();
        assert_eq!(waited.matched, "done", "the output, not the echo");
        // `since: screen` still looks at the screen as before.
        let request = WaitRequest {
            text: Some("sleep 2".to_owned()),
            since: Some("screen".to_owned()),
            ..wait_request()
        };
        let screen = verbs::wait(env.registry.owner(&env.owner), &request)
            .await
            .unwrap();
        assert!(screen.matched.contains("sleep 2; echo done"), "{screen:?}");
    })
    .await;
}

#[tokio::test]
async fn commands_lists_each_command_of_a_send_with_its_code() {
    with_bash(async |env| {
        let sent = run(env, "echo one\nfalse\n(exit 7)", WAIT).await;
        assert_eq!(sent.commands.len(), 3, "{sent:?}");
        let listed = commands(env).await;
        let summary: Vec<_> = listed
            .commands
            .iter()
            .map(|c| (c.text.as_deref(), c.exit_code, c.running))
            .collect();
        assert_eq!(
            summary,
            [
                (Some("echo one"), Some(0), false),
                (Some("false"), Some(1), false),
                (Some("(exit 7)"), Some(7), false),
            ],
            "{listed:?}"
        );
        // The ids are the send's own start cursors.
        let ids: Vec<_> = listed.commands.iter().map(|c| Some(c.id.clone())).collect();
        let starts: Vec<_> = sent
            .commands
            .iter()
            .map(|c| Some(c.start_cursor.clone()))
            .collect();
        assert_eq!(ids, starts);
        // One command type: a send's entries are the list's, field for field.
        assert_eq!(sent.commands, listed.commands[..sent.commands.len()]);
        assert_eq!(listed.unknown_ended, 0);
    })
    .await;
}

#[tokio::test]
async fn after_a_reopen_only_what_the_new_stream_holds_is_listed() {
    with_bash(async |env| {
        run(env, "echo before", WAIT).await;
        // (Typed at the prompt at once: the shell is up.)
        let before = commands(env).await;
        assert_eq!(before.commands.len(), 1, "{before:?}");
        // Still running when the registry lets go; it ends in the new
        // stream, whose start mark it does not hold.
        run(env, "sleep 2; echo late", Duration::from_millis(300)).await;
        env.registry.shutdown().await;
        let backend: std::sync::Arc<dyn tmux_engine::registry::Backend> =
            super::backend_with(env.dir.path(), "/bin/bash");
        let config = RegistryConfig::default().state_dir(env.dir.path().join("state"));
        env.registry = Registry::open_with(config, backend).await.unwrap().0;
        let deadline = tokio::time::Instant::now() + WAIT;
        let after = loop {
            let after = commands(env).await;
            if after.unknown_ended > 0 || tokio::time::Instant::now() > deadline {
                break after;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(after.unknown_ended, 1, "the late end is counted: {after:?}");
        assert!(after.commands.is_empty(), "nothing invented: {after:?}");
        assert_ne!(after.known_from, before.known_from, "a new stream");
        // The old id is of another stream: said so, not guessed.
        let request = WaitRequest {
            command: Some(before.commands[0].id.clone()),
            ..wait_request()
        };
        let error = verbs::wait(env.registry.owner(&env.owner), &request)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("another stream"), "{error}");
        run(env, "echo after; false", WAIT).await;
        let listed = commands(env).await;
        let codes: Vec<_> = listed.commands.iter().map(|c| c.exit_code).collect();
        assert_eq!(codes, [Some(1)], "{listed:?}");
    })
    .await;
}
