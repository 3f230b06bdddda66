//! `list_json` (`GET /api/terminals`'s answer) against real tmux: each
//! terminal's answer is kept between lists, and the tmux backend vouches
//! for a running one's status, pid and output path instead of their being
//! read per list; every change must show in the very next list.

use tmux_engine::registry::RestartPolicy;

use super::*;

/// The next `list_json` of `env`'s owner, parsed, after checking it is
/// `list`'s answer encoded (`None` when it is not).
async fn listed(env: &Env) -> Option<Vec<TerminalSnapshot>> {
    let owned = || env.registry.owner(&env.owner);
    let json = owned().list_json().await.unwrap();
    let list = owned().list().await.unwrap();
    (String::from_utf8(json).unwrap() == serde_json::to_string(&list).unwrap()).then_some(list)
}

/// [`listed`], which must be `list`'s answer.
async fn next_list(env: &Env) -> Vec<TerminalSnapshot> {
    listed(env).await.expect("list_json differs from list")
}

/// Polls until `list_json` is `list`'s answer: until a new program is
/// found behind its wrapper, a pid may move between the two.
async fn settled(env: &Env) -> Vec<TerminalSnapshot> {
    poll("list_json to be list's answer", WAIT, || listed(env)).await
}

fn named<'a>(list: &'a [TerminalSnapshot], name: &str) -> &'a TerminalSnapshot {
    list.iter()
        .find(|t| t.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{name} not listed: {list:?}"))
}

/// An exit shows in the next list, as do a revived program (running, its
/// new pid), a new terminal and a killed one's absence; unchanged lists
/// answer the same bytes.
#[tokio::test]
async fn the_kept_list_shows_each_change_in_the_next_list() {
    with_env(async |env| {
        env.spawn(
            sh("read line; exit 7")
                .name("ends")
                .restart(RestartPolicy::OnAttach),
        )
        .await;
        env.spawn(SpawnSpec::new().name("stays")).await;
        let first = settled(env).await;
        assert_eq!(first.len(), 2);
        let owned = || env.registry.owner(&env.owner);
        let json = owned().list_json().await.unwrap();
        assert_eq!(
            owned().list_json().await.unwrap(),
            json,
            "unchanged, yet answered otherwise"
        );

        env.send("ends", b"", true, WaitFor::None).await;
        let dead = wait_exited(env, "ends", 7).await;
        assert_eq!(named(&next_list(env).await, "ends").status, dead.status);

        assert!(owned().probe("ends").await.unwrap().recreated);
        let list = next_list(env).await;
        let revived = named(&list, "ends");
        assert!(revived.status.is_running(), "{revived:?}");
        assert_eq!(revived.restarts, 1);
        let revived = named(&settled(env).await, "ends").clone();
        assert_ne!(revived.pid, named(&first, "ends").pid);
        assert_eq!(revived.pid, owned().show("ends").await.unwrap().pid);

        env.spawn(SpawnSpec::new().name("new")).await;
        assert_eq!(next_list(env).await.len(), 3);
        owned().kill("stays").await.unwrap();
        let list = next_list(env).await;
        let names: Vec<_> = list.iter().filter_map(|t| t.name.as_deref()).collect();
        assert_eq!(names, ["ends", "new"]);
    })
    .await;
}
