//! Issue 10 against real tmux: processes sharing one state directory keep
//! the invariants (names, one send), and an unresponsive server is never
//! taken for a dead one.

use tmux_engine::registry::{Liveness, RestartPolicy, SendRequest, SpawnSpec, WaitFor};

use super::{Env, WAIT, open, open_configured, server_dirs, sh};
use crate::support::{poll, within};

/// Item 3. Before, name reservation was per process: three registries on
/// one state directory (as three CLIs) each spawned an `x`.
#[tokio::test]
async fn registries_sharing_a_state_dir_keep_names_unique_and_one_send() {
    within(async {
        let env = Env::new().await;
        let (b, _) = open(env.dir.path()).await;
        let (c, _) = open(env.dir.path()).await;
        let spawns = [&env.registry, &b, &c].map(|registry| {
            let owner = env.owner.clone();
            async move {
                registry
                    .owner(&owner)
                    .spawn(SpawnSpec::new().name("x"))
                    .await
            }
        });
        let results = futures_util::future::join_all(spawns).await;
        let ok = results.iter().filter(|result| result.is_ok()).count();
        assert_eq!(ok, 1, "{results:?}");
        for result in &results {
            if let Err(error) = result {
                assert_eq!(error.code(), "DUPLICATE_NAME", "{error}");
            }
        }
        assert_eq!(
            env.registry.owner(&env.owner).list().await.unwrap().len(),
            1
        );
        assert_eq!(server_dirs(&env.runtime()).len(), 1);
        // One send at a time, across registries.
        let long = SendRequest {
            text: bytes::Bytes::from_static(b"sleep 1"),
            submit: true,
            wait: WaitFor::StdinRead,
            timeout: Some(WAIT),
            history: true,
            keys: Vec::new(),
        };
        let first = b.owner(&env.owner).send("x", long.clone()).await.unwrap();
        let second = c.owner(&env.owner).send("x", long).await.unwrap_err();
        assert_eq!(second.code(), "SEND_ACTIVE", "{second}");
        first.result().await.unwrap();
        b.shutdown().await;
        c.shutdown().await;
        env.finish().await;
    })
    .await;
}

/// Item 2. Before, an adoption that timed out marked the terminal gone,
/// and a probe of an `on-attach` terminal then started a second server
/// beside the stopped (living) first one.
#[tokio::test]
async fn an_unresponsive_server_is_not_recreated() {
    within(async {
        let env = Env::new().await;
        env.spawn(
            sh("exec sleep 300")
                .name("r")
                .restart(RestartPolicy::OnAttach),
        )
        .await;
        let dir = server_dirs(&env.runtime()).pop().unwrap();
        let pid = super::liveness::socket_server_pid(&dir);
        let server = rustix::process::Pid::from_raw(pid).unwrap();
        // tmux's silence told after STALL, not the default 10 s.
        let (other, _) = open_configured(env.dir.path(), |config| {
            config.control_timeout(crate::backend::relink::STALL)
        })
        .await;
        rustix::process::kill_process(server, rustix::process::Signal::STOP).unwrap();
        let probed = other.owner(&env.owner).probe("r").await;
        rustix::process::kill_process(server, rustix::process::Signal::CONT).unwrap();
        let probed = probed.unwrap();
        assert!(
            matches!(probed.observed, Liveness::Unresponsive { .. }),
            "{probed:?}"
        );
        assert!(!probed.recreated);
        assert_eq!(
            server_dirs(&env.runtime()).len(),
            1,
            "a second server started"
        );
        // Continued, it answers again: within `STALL` for each probe, which
        // a loaded machine's tmux can miss, so probed until it does (a
        // probe of a living server recreates nothing).
        poll("the continued server to answer a probe", WAIT, || async {
            let again = other.owner(&env.owner).probe("r").await.unwrap();
            assert!(!again.recreated, "{again:?}");
            (again.observed == Liveness::Alive).then_some(())
        })
        .await;
        other.shutdown().await;
        env.finish().await;
    })
    .await;
}
