//! Issue 44 item 4: `search` reads everything the engine holds of a
//! terminal, the stream's ring and, where the ring no longer reaches, the
//! kept history, and says what range it searched. A long build's log
//! (50,000 lines of 250 bytes, 12.5 MB) is three times the stream's 4 MiB
//! ring: its error at line 31,337 and its first line are only on disk.

use std::sync::Arc;
use std::time::Duration;

use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{OutputCursor, OwnerId, ReadRequest, Registry, RegistryConfig};
use tmux_engine::verbs::{SearchAnswer, SearchRequest, search};

use super::{Cleanup, WAIT, assert_clean, runtime, sh};

/// 25 MB through tmux and a flood of the kept history's writer, on a
/// loaded machine.
const LONG: Duration = Duration::from_secs(90);
use crate::support::{poll, tmux};

/// A build log: 50,000 lines padded to 250 bytes, an error at line
/// 31,337, a warning every 5,000th line (10), then `DONE`.
const BUILD: &str = "awk 'BEGIN { pad = sprintf(\"%240s\", \"\"); \
    for (i = 1; i <= 50000; i++) { \
    if (i == 31337) print \"error: failed at line \" i; \
    else if (i % 5000 == 0) print \"warning: \" i; \
    else print \"line \" i pad }; print \"DONE\" }'; exec sleep 1000";

async fn search_for(registry: &Registry, owner: &OwnerId, name: &str, regex: &str) -> SearchAnswer {
    let request = SearchRequest {
        terminal: Some(name.to_owned()),
        regex: regex.to_owned(),
        max_matches: Some(50),
        ..SearchRequest::default()
    };
    search(registry.owner(owner), &request).await.unwrap()
}

#[tokio::test]
async fn search_reads_the_kept_history_where_the_ring_ends() {
    crate::support::within(async {
        let dir = crate::support::test_dir();
        let _guard = Cleanup(runtime(dir.path()));
        let config = TmuxConfig::new(runtime(dir.path()))
            .shell("/bin/sh")
            .quiet(Duration::from_millis(200))
            .reap_grace(Duration::ZERO)
            .with_state_dir(dir.path().join("state"))
            // The relay writes the kept history, as for every binary of
            // the engine (a library without one writes it from its own
            // process).
            .relay(env!("CARGO_BIN_EXE_tmux-engine-relay"));
        let backend = Arc::new(TmuxBackend::with_tmux(tmux(), config).unwrap());
        let (registry, _) = Registry::open_with(
            RegistryConfig::default().state_dir(dir.path().join("state")),
            backend,
        )
        .await
        .unwrap();
        let owner = OwnerId::new("alice").unwrap();
        let owned = || registry.owner(&owner);
        for (name, keep) in [("kept", true), ("plain", false)] {
            owned()
                .spawn(sh(BUILD).name(name).keep_history(keep))
                .await
                .unwrap();
            poll("the build to end", LONG, || async {
                let request = ReadRequest {
                    offset: 0,
                    count: Some(1),
                };
                let page = owned().read(name, request).await.ok()?;
                (page.lines == ["DONE"]).then_some(())
            })
            .await;
            // `read` is tmux's scrollback: the engine's stream (what
            // `search` reads) may still be behind it on a loaded machine,
            // its ring then still holding what the end pushes out of it.
            poll("the stream to reach the build's end", LONG, || async {
                let done = search_for(&registry, &owner, name, "^DONE").await;
                (!done.matches.is_empty()).then_some(())
            })
            .await;
        }

        // Kept: the error is found once its bytes are on disk (the
        // writer's loss window), from the stream's first byte on.
        let found = poll("the error in the kept history", WAIT, || async {
            let found = search_for(&registry, &owner, "kept", "^error: ").await;
            (!found.matches.is_empty()).then_some(found)
        })
        .await;
        assert_eq!(found.matches.len(), 1, "{found:?}");
        assert_eq!(found.matches[0].text, "error: failed at line 31337");
        assert_eq!(found.matches[0].line, 31_336, "{found:?}");
        let range = &found.ranges[0];
        assert!(range.searched_from.ends_with(":0"), "{range:?}");
        assert!(!range.older_output, "{range:?}");
        // The match's cursor reads on from its line in the kept history.
        let cursor: OutputCursor = found.matches[0].cursor.parse().unwrap();
        let after = owned().kept_history("kept", Some(cursor)).await.unwrap();
        assert!(
            after
                .bytes
                .starts_with(b"error: failed at line 31337\r\nline 31338"),
            "{:?}",
            String::from_utf8_lossy(&after.bytes[..after.bytes.len().min(80)])
        );
        let first = search_for(&registry, &owner, "kept", r"^line 1\s*$").await;
        assert_eq!(first.matches.len(), 1, "{first:?}");
        assert_eq!(first.matches[0].line, 0, "{first:?}");
        let warnings = search_for(&registry, &owner, "kept", "^warning: ").await;
        assert_eq!(warnings.matches.len(), 10, "{warnings:?}");
        assert!(!warnings.truncated);

        // Not kept: the ring is all there is, and the answer says older
        // output existed (nothing pretends the search was whole).
        let missed = search_for(&registry, &owner, "plain", r"^error: |^line 1\s*$").await;
        assert!(missed.matches.is_empty(), "{missed:?}");
        let range = &missed.ranges[0];
        assert!(range.older_output, "{range:?}");
        let from: OutputCursor = range.searched_from.parse().unwrap();
        assert!(from.offset > 0, "{range:?}");

        for name in ["kept", "plain"] {
            owned().kill(name).await.unwrap();
        }
        registry.dispose().await.unwrap();
        assert_clean(&runtime(dir.path())).await;
    })
    .await;
}
