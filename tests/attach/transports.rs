//! Attach transports against real tmux: fan-out to many viewers, a stalled
//! viewer, resume, exit and restart policies, and the PTY transport.

use bytes::Bytes;
use tmux_engine::attach::{
    AttachOptions, Attacher, AttacherConfig, Transport, Viewer, ViewerEvent,
};
use tmux_engine::registry::RestartPolicy;
use tmux_engine::vocab::{ExitStatus, Size};

use super::{Env, WAIT, sh};
use crate::support::within;

/// Reads events until the bytes received since the last snapshot contain
/// `needle`; returns every event read.
async fn until(viewer: &mut Viewer, needle: &str) -> Vec<ViewerEvent> {
    let mut events = Vec::new();
    let mut text = Vec::new();
    tokio::time::timeout(WAIT, async {
        while !String::from_utf8_lossy(&text).contains(needle) {
            let event = viewer.recv().await.expect("stream ended early");
            match &event {
                ViewerEvent::Output { bytes, .. } => text.extend_from_slice(bytes),
                ViewerEvent::Snapshot { repaint, .. } => text = repaint.to_vec(),
                _ => {}
            }
            events.push(event);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in {:?}", String::from_utf8_lossy(&text)));
    events
}

/// The output bytes among `events`, after the last snapshot.
fn output(events: &[ViewerEvent]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        match event {
            ViewerEvent::Output { bytes, .. } => out.extend_from_slice(bytes),
            ViewerEvent::Snapshot { .. } => out.clear(),
            _ => {}
        }
    }
    out
}

async fn first_snapshot(viewer: &mut Viewer) {
    let event = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
    assert!(
        matches!(event, Some(ViewerEvent::Snapshot { .. })),
        "{event:?}"
    );
}

#[tokio::test]
async fn twenty_viewers_see_identical_streams() {
    within(async {
        let env = Env::new().await;
        env.spawn(sh("read go; seq 1 20000; echo done-$((40+2)); read x").name("seq"))
            .await;
        let attacher = Attacher::new(env.registry.clone());
        let mut viewers = Vec::new();
        for _ in 0..20 {
            let mut viewer = attacher
                .attach(&env.owner, "seq", AttachOptions::default())
                .await
                .unwrap();
            first_snapshot(&mut viewer).await;
            viewers.push(viewer);
        }
        viewers[0].input(Bytes::from_static(b"\r")).await.unwrap();
        let mut streams = Vec::new();
        for viewer in &mut viewers {
            streams.push(output(&until(viewer, "done-42").await));
        }
        assert!(streams.iter().all(|s| *s == streams[0]), "streams differ");
        assert!(String::from_utf8_lossy(&streams[0]).contains("19999\r\n20000"));
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn a_stalled_viewer_gets_one_snapshot_then_live_bytes() {
    within(async {
        let env = Env::new().await;
        env.spawn(
            // The last `read` keeps the program alive after "live": its
            // exit could race the echo, which tmux drops when the pane dies
            // before it sent it (docs/tmux-quirks.md, the exit tail).
            // Enough output to overflow a queue of 8 whatever the chunking,
            // not so much that the hub's own subscription lags under load
            // (its pause and resync is another path, tested on its own).
            sh("read go; seq 1 60000; echo mid-$((1+1)); read x; echo end-$((2+2)); read y; read z")
                .name("seq"),
        )
        .await;
        let config = AttacherConfig::default().viewer_queue(8);
        let attacher = Attacher::with_config(env.registry.clone(), config);
        let open = AttachOptions::default;
        let mut fast = attacher.attach(&env.owner, "seq", open()).await.unwrap();
        let mut stalled = attacher.attach(&env.owner, "seq", open()).await.unwrap();
        first_snapshot(&mut fast).await;
        first_snapshot(&mut stalled).await;
        fast.input(Bytes::from_static(b"\r")).await.unwrap();
        // The fast viewer keeps pace while the other reads nothing.
        until(&mut fast, "mid-2").await;
        fast.input(Bytes::from_static(b"\r")).await.unwrap();
        until(&mut fast, "end-4").await;
        // The stalled one: what its queue held, one snapshot, then live.
        let events = until(&mut stalled, "end-4").await;
        let snapshots = events
            .iter()
            .filter(|e| matches!(e, ViewerEvent::Snapshot { .. }))
            .count();
        assert_eq!(snapshots, 1, "{events:?}");
        assert!(
            events.len() <= 8 + 1 + 8,
            "bounded: {} events",
            events.len()
        );
        fast.input(Bytes::from_static(b"live\r")).await.unwrap();
        until(&mut stalled, "live").await;
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn resume_replays_inside_the_ring_and_snapshots_outside() {
    use tmux_engine::registry::OutputCursor;
    within(async {
        let env = Env::new().await;
        env.spawn(sh("while read line; do echo got-$line; done").name("echo"))
            .await;
        let attacher = Attacher::new(env.registry.clone());
        let mut first = attacher
            .attach(&env.owner, "echo", AttachOptions::default())
            .await
            .unwrap();
        first_snapshot(&mut first).await;
        let joined = first.hello().cursor.unwrap();
        // Queued input (what the bridge sends): it arrives, and its answer
        // is looked at after the echo.
        let answer = first
            .input_queued(Bytes::from_static(b"one\r"))
            .await
            .unwrap();
        let events = until(&mut first, "got-one").await;
        answer.await.unwrap();
        let Some(ViewerEvent::Output {
            offset: Some(after_one),
            bytes,
        }) = events.last()
        else {
            panic!("{events:?}")
        };
        let resume_at = after_one + bytes.len() as u64;
        drop(first);
        // Missed while away: replayed exactly from `resume_at`.
        env.registry
            .owner(&env.owner)
            .write("echo", Bytes::from_static(b"two\r"))
            .await
            .unwrap();
        let mut other = attacher
            .attach(&env.owner, "echo", AttachOptions::default())
            .await
            .unwrap();
        until(&mut other, "got-two").await;
        let resume = OutputCursor {
            epoch: joined.epoch,
            offset: resume_at,
        };
        let since = Some(resume);
        let mut back = attacher
            .attach(&env.owner, "echo", AttachOptions::default().since(since))
            .await
            .unwrap();
        let event = tokio::time::timeout(WAIT, back.recv()).await.unwrap();
        let Some(ViewerEvent::Output { offset, bytes }) = event else {
            panic!("{event:?}")
        };
        assert_eq!(offset, Some(resume_at));
        assert_eq!(bytes, "two\r\ngot-two\r\n");
        // One stream: the viewer's position is a cursor an agent reads
        // the very same bytes from.
        let read = env
            .registry
            .owner(&env.owner)
            .output_since("echo", since)
            .await
            .unwrap();
        assert_eq!((read.from, read.gap), (resume, None));
        assert!(read.bytes.starts_with(b"two\r\ngot-two\r\n"), "{read:?}");
        // Another stream's offset is never trusted.
        let foreign = Some(OutputCursor {
            epoch: joined.epoch ^ 1,
            offset: 0,
        });
        let mut stranger = attacher
            .attach(&env.owner, "echo", AttachOptions::default().since(foreign))
            .await
            .unwrap();
        first_snapshot(&mut stranger).await;
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn a_first_viewer_resumes_from_an_agents_cursor() {
    use tmux_engine::registry::OutputCursor;
    within(async {
        let env = Env::new().await;
        env.spawn(sh("while read line; do echo got-$line; done").name("echo"))
            .await;
        let owned = env.registry.owner(&env.owner);
        // An agent's cursor, taken before any viewer (or hub) exists.
        let cursor: OutputCursor = owned.output_end("echo").await.unwrap().unwrap();
        owned
            .write("echo", Bytes::from_static(b"one\r"))
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        let read = loop {
            let read = owned.output_since("echo", Some(cursor)).await.unwrap();
            if String::from_utf8_lossy(&read.bytes).contains("got-one\r\n") {
                break read;
            }
            assert!(tokio::time::Instant::now() < deadline, "{read:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        let attacher = Attacher::new(env.registry.clone());
        let mut viewer = attacher
            .attach(
                &env.owner,
                "echo",
                AttachOptions::default().since(Some(cursor)),
            )
            .await
            .unwrap();
        assert_eq!(viewer.hello().cursor.map(|at| at.epoch), Some(cursor.epoch));
        // The hub replays from the same stream the agent read: the same
        // bytes at the same offsets, no snapshot.
        let event = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
        let Some(ViewerEvent::Output { offset, bytes }) = event else {
            panic!("{event:?}")
        };
        assert_eq!(offset, Some(cursor.offset));
        assert!(bytes.starts_with(&read.bytes), "{bytes:?} vs {read:?}");
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn exit_reaches_viewers_and_policies_decide_the_next_attach() {
    within(async {
        let env = Env::new().await;
        env.spawn(sh("read x; exit 3").name("never")).await;
        env.spawn(
            sh("read x; exit 4")
                .name("again")
                .restart(RestartPolicy::OnAttach),
        )
        .await;
        let attacher = Attacher::new(env.registry.clone());
        let mut viewers = Vec::new();
        for _ in 0..3 {
            let viewer = attacher
                .attach(&env.owner, "never", AttachOptions::default())
                .await
                .unwrap();
            viewers.push(viewer);
        }
        viewers[0].input(Bytes::from_static(b"\r")).await.unwrap();
        for viewer in &mut viewers {
            let mut exit = None;
            while let Some(event) = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap() {
                if let ViewerEvent::Exit(status) = event {
                    exit = Some(status);
                }
            }
            assert_eq!(exit, Some(ExitStatus::Code(3)));
        }
        let dead = attacher
            .attach(&env.owner, "never", AttachOptions::default())
            .await
            .unwrap_err();
        assert_eq!(dead.code(), "TERMINAL_DEAD");
        // `on-attach`: the attach gets a fresh program.
        env.registry
            .owner(&env.owner)
            .write("again", Bytes::from_static(b"\r"))
            .await
            .unwrap();
        super::wait_status(&env, "again", |s| !s.status.is_running()).await;
        let mut fresh = attacher
            .attach(&env.owner, "again", AttachOptions::default())
            .await
            .unwrap();
        first_snapshot(&mut fresh).await;
        fresh.input(Bytes::from_static(b"\r")).await.unwrap();
        let mut exit = None;
        while let Some(event) = tokio::time::timeout(WAIT, fresh.recv()).await.unwrap() {
            if let ViewerEvent::Exit(status) = event {
                exit = Some(status);
            }
        }
        assert_eq!(exit, Some(ExitStatus::Code(4)));
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn viewers_of_an_always_terminal_survive_its_restart() {
    within(async {
        let env = Env::new().await;
        env.spawn(
            sh("echo run-$((0+1)); read x; exit 1")
                .name("loop")
                .restart(RestartPolicy::Always),
        )
        .await;
        let attacher = Attacher::new(env.registry.clone());
        let mut viewer = attacher
            .attach(&env.owner, "loop", AttachOptions::default())
            .await
            .unwrap();
        until(&mut viewer, "run-1").await;
        viewer.input(Bytes::from_static(b"\r")).await.unwrap();
        let events = until(&mut viewer, "run-1").await;
        let exit = events
            .iter()
            .position(|e| matches!(e, ViewerEvent::Exit(ExitStatus::Code(1))));
        let repaint = events
            .iter()
            .rposition(|e| matches!(e, ViewerEvent::Snapshot { .. }));
        assert!(exit.is_some() && repaint > exit, "{events:?}");
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn pty_keys_output_resize_read_only_and_no_prompt() {
    within(async {
        let env = Env::new().await;
        // The trap prints the size the program sees on each SIGWINCH; the
        // loop keeps going when a signal interrupts `read`.
        env.spawn(
            sh("trap 'set -- $(stty size); echo winch-$1x$2' WINCH; \
                while :; do read line && { echo got-$line; stty size; }; done")
            .name("pty"),
        )
        .await;
        let attacher = Attacher::new(env.registry.clone());
        let opts = AttachOptions::default()
            .transport(Transport::Pty)
            .size(Some(Size { cols: 90, rows: 20 }));
        let mut viewer = attacher.attach(&env.owner, "pty", opts).await.unwrap();
        assert_eq!(viewer.hello().transport, Transport::Pty);
        viewer.input(Bytes::from_static(b"one\r")).await.unwrap();
        until(&mut viewer, "20 90").await;
        // Resize: the program gets SIGWINCH and sees the new size.
        viewer.resize(Size { cols: 70, rows: 15 }).await.unwrap();
        until(&mut viewer, "winch-15x70").await;
        // Queued input: the answer comes with it on this transport.
        let answer = viewer
            .input_queued(Bytes::from_static(b"two\r"))
            .await
            .unwrap();
        answer.await.unwrap();
        until(&mut viewer, "15 70").await;
        // The prefix reaches the program as text; no prompt runs commands.
        let canary = env.dir.path().join("CANARY");
        let keys = format!("\x02:run-shell 'touch {}'\r", canary.display());
        viewer.input(Bytes::from(keys)).await.unwrap();
        until(&mut viewer, "got-").await;
        env.registry
            .owner(&env.owner)
            .wait(
                "pty",
                &tmux_engine::registry::WaitCondition::Text("run-shell".into()),
                WAIT,
            )
            .await
            .unwrap();
        assert!(!canary.exists(), "a viewer reached tmux's command prompt");
        // Read-only: refused before tmux (and dropped by tmux's `-r` too:
        // the unit test in `src/attach/pty_tests.rs` writes to its pty).
        let ro = AttachOptions::default()
            .transport(Transport::Pty)
            .read_only(true);
        let watcher = attacher.attach(&env.owner, "pty", ro).await.unwrap();
        let refused = watcher.input(Bytes::from_static(b"x\r")).await.unwrap_err();
        assert_eq!(refused.code(), "READ_ONLY");
        let refused = watcher
            .resize(Size { cols: 60, rows: 10 })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "READ_ONLY");
        drop(watcher);
        drop(viewer);
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

/// A PTY viewer reads its client's pty in its own task; the session's
/// task says the exit. Both reach the viewer: the program's last line, its
/// exit status, then the end.
#[tokio::test]
async fn a_pty_viewer_gets_the_last_output_and_the_exit_then_the_end() {
    within(async {
        let env = Env::new().await;
        env.spawn(sh("read x; echo last-$((6*7)); exit 5").name("ends"))
            .await;
        let attacher = Attacher::new(env.registry.clone());
        let opts = AttachOptions::default().transport(Transport::Pty);
        let mut viewer = attacher.attach(&env.owner, "ends", opts).await.unwrap();
        // Attached once the client drew: the keys now reach the program.
        let first = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
        assert!(
            matches!(first, Some(ViewerEvent::Output { .. })),
            "{first:?}"
        );
        viewer.input(Bytes::from_static(b"go\r")).await.unwrap();
        let mut events = Vec::new();
        while let Some(event) = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap() {
            events.push(event);
        }
        let text = String::from_utf8_lossy(&output(&events)).into_owned();
        assert!(text.contains("last-42"), "{text:?}");
        let exits: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ViewerEvent::Exit(status) => Some(*status),
                _ => None,
            })
            .collect();
        assert_eq!(exits, [ExitStatus::Code(5)], "{events:?}");
        drop(viewer);
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn pty_attach_detach_cycles_beside_a_control_client_leave_the_server_alive() {
    within(async {
        let env = Env::new().await;
        env.spawn(sh("while read line; do echo got-$line; done").name("busy"))
            .await;
        let attacher = Attacher::new(env.registry.clone());
        let mut control = attacher
            .attach(&env.owner, "busy", AttachOptions::default())
            .await
            .unwrap();
        for _ in 0..200 {
            let opts = AttachOptions::default().transport(Transport::Pty);
            let mut viewer = attacher.attach(&env.owner, "busy", opts).await.unwrap();
            // Attached once it drew something.
            let _ = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
            drop(viewer);
        }
        control.input(Bytes::from_static(b"alive\r")).await.unwrap();
        until(&mut control, "got-alive").await;
        let report = env.registry.owner(&env.owner).probe("busy").await.unwrap();
        assert!(report.snapshot.status.is_running());
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

/// tmux 3.3a drops output of a dying pane it had not yet written to a
/// control client, and then keeps that client's offset behind the pane's
/// own; a `respawn-pane` keeps the offsets, so its parser skipped as many
/// of the next program's first bytes (the `always` test's `n-1`). Each run
/// here prints `start-N` first, then floods and exits at once, so the
/// tail is often dropped; every restarted program's first line must be
/// whole in the scrollback.
#[tokio::test]
async fn a_restarted_program_keeps_its_first_bytes_after_a_dropped_exit_tail() {
    within(async {
        let env = Env::new().await;
        let count = env.dir.path().join("count");
        let script = format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; \
             echo start-$n; [ $n -ge 4 ] && exec sleep 60; seq 1 1000; exit 1",
            c = count.display()
        );
        env.spawn(sh(&script).name("flood").restart(RestartPolicy::Always))
            .await;
        let registry = env.registry.owner(&env.owner);
        let request = tmux_engine::registry::ReadRequest {
            offset: 0,
            count: Some(10_000),
        };
        // Until the sixth run's line is in (or the wait ends: then the
        // lines say what was lost).
        let deadline = tokio::time::Instant::now() + WAIT;
        let lines = loop {
            let page = registry.read("flood", request).await.unwrap();
            let done = page.lines.iter().any(|l| l.contains("-4"));
            if done || tokio::time::Instant::now() > deadline {
                break page.lines;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let starts: Vec<&str> = lines
            .iter()
            .map(|l| l.trim_end())
            .filter(|l| l.contains("-") || l.contains("start"))
            .collect();
        let want: Vec<String> = (1..=4).map(|n| format!("start-{n}")).collect();
        assert_eq!(starts, want, "a restarted program lost its first bytes");
        env.finish().await;
    })
    .await;
}
