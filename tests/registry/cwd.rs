//! A terminal's working directory: its program's while it runs, and the
//! last one its integrated shell reported (OSC 7) once it has exited, for
//! bash and POSIX sh (whose report rides `PS1`'s expansion).

use tmux_engine::registry::{RegistryConfig, SpawnSpec};

use super::{Env, WAIT};
use crate::backend::shell_sends::run;

async fn follows_cd(shell: &str) {
    crate::support::within(async {
        let env = Env::with_shell(RegistryConfig::default(), shell).await;
        env.spawn(SpawnSpec::new().name("t").cwd(env.dir.path()))
            .await;
        let start = env.dir.path().canonicalize().unwrap();
        let owner = || env.registry.owner(&env.owner);
        assert_eq!(
            owner().working_directory("t").await.unwrap(),
            Some(start.clone())
        );
        let sent = run(&env, "mkdir -p 'a dir' && cd 'a dir'", WAIT).await;
        assert_eq!(sent.exit_code, Some(0), "{sent:?}");
        let moved = start.join("a dir");
        assert_eq!(
            owner().working_directory("t").await.unwrap(),
            Some(moved.clone())
        );
        // Once the shell is gone, its own last report (OSC 7) answers:
        // what a restored terminal starts in.
        let deadline = tokio::time::Instant::now() + WAIT;
        run(&env, "exit", std::time::Duration::from_millis(500)).await;
        while owner().show("t").await.unwrap().status.is_running() {
            assert!(tokio::time::Instant::now() < deadline, "the shell exited");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(owner().working_directory("t").await.unwrap(), Some(moved));
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn bash_reports_where_it_went() {
    follows_cd("/bin/bash").await;
}

#[tokio::test]
async fn sh_reports_where_it_went() {
    follows_cd("/bin/sh").await;
}
