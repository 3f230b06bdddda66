//! The WebSocket protocol: refusals as close codes, hello, snapshot and
//! output, input and resize, exit then 4404, resume with `since`, and bad
//! input (malformed frames, a 10 MiB frame, connect/disconnect loops, a
//! viewer that never reads).

use reqwest::Method;

use super::{Frame, Received, Served, WAIT};
use crate::support::{poll, within};

#[tokio::test]
async fn refusals_close_with_their_codes() {
    within(async {
        let served = Served::start(&["--allow-origin", "https://term.example"]).await;
        served.spawn(r#"{"name":"t","command":["sh"]}"#).await;
        served.spawn(r#"{"name":"done","command":["true"]}"#).await;
        poll("`true` to end", WAIT, || async {
            let (_, shown) = served.get("/api/terminals/done").await;
            (shown["status"]["kind"] == "exited").then_some(())
        })
        .await;
        let own = served.base.clone();
        let cases: &[(&str, &str, Option<&str>, u16)] = &[
            ("t", "token=", None, 4401),
            ("t", "token=0123456789abcdef0123", None, 4401),
            ("t", "", Some("http://evil.example"), 4403),
            ("t", "", Some("null"), 4403),
            ("nope", "", None, 4404),
            ("done", "", None, 4404),
            ("t", "transport=telnet", None, 4400),
            ("t", "since=garbage", None, 4400),
            ("t", "read_only=maybe", None, 4400),
        ];
        for (target, query, origin, want) in cases {
            let mut ws = served.ws(target, query, *origin).await;
            assert_eq!(ws.close_code().await, *want, "{target} {query} {origin:?}");
        }
        for origin in [own.as_str(), "https://term.example"] {
            let mut ws = served.ws("t", "", Some(origin)).await;
            assert_eq!(ws.text().await["type"], "hello", "{origin}");
        }
        // Not an upgrade: answered like any route.
        let (status, _) = served.get("/api/terminals/t/attach").await;
        assert_eq!(status, 400);
        for name in ["t", "done"] {
            served
                .call(served.request(Method::DELETE, &format!("/api/terminals/{name}")))
                .await;
        }
    })
    .await;
}

#[tokio::test]
async fn hello_snapshot_input_resize_exit_then_4404() {
    within(async {
        let served = Served::start(&[]).await;
        let snapshot = served
            .spawn(r#"{"name":"sh","command":["sh"],"cols":80,"rows":24}"#)
            .await;
        let mut ws = served.ws("sh", "", None).await;
        let hello = ws.text().await;
        assert_eq!(hello["type"], "hello");
        assert_eq!(hello["id"], snapshot["id"]);
        assert_eq!(hello["name"], "sh");
        assert_eq!(hello["transport"], "control");
        assert_eq!(hello["read_only"], false);
        assert_eq!(
            (hello["cols"].as_u64(), hello["rows"].as_u64()),
            (Some(80), Some(24))
        );
        assert_eq!(hello["stream"].as_str().unwrap().len(), 16);
        let first = ws.text().await;
        assert_eq!(first["type"], "snapshot");
        assert!(
            matches!(ws.next().await, Frame::Binary(_)),
            "the repaint follows"
        );

        let mut seen = Received {
            offset: first["offset"].as_u64().unwrap(),
            start: first["offset"].as_u64().unwrap(),
            bytes: Vec::new(),
            repaint: Vec::new(),
        };
        ws.input(b"echo $((6*7))\r").await;
        seen.until(&mut ws, "42").await;

        ws.send_text(r#"{"type":"resize","cols":100,"rows":30}"#)
            .await;
        loop {
            if let Frame::Text(frame) = ws.next().await
                && frame["type"] == "resize"
            {
                assert_eq!(
                    (frame["cols"].as_u64(), frame["rows"].as_u64()),
                    (Some(100), Some(30))
                );
                break;
            }
        }
        let (_, screen) = served.get("/api/terminals/sh/screen").await;
        assert_eq!(screen["cols"], 100);

        ws.input(b"exit 3\r").await;
        let exit = loop {
            if let Frame::Text(frame) = ws.next().await
                && frame["type"] == "exit"
            {
                break frame;
            }
        };
        assert_eq!(exit["status"]["kind"], "exited");
        assert_eq!(exit["status"]["exit"]["code"], 3);
        assert_eq!(ws.close_code().await, 4404);
        served
            .call(served.request(Method::DELETE, "/api/terminals/sh"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn resume_with_since_loses_and_repeats_nothing() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"r","command":["sh"]}"#).await;
        // A witness that stays connected throughout.
        let mut witness = served.ws("r", "", None).await;
        let stream = witness.text().await["stream"].as_str().unwrap().to_owned();
        let mut all = Received::default();

        let mut ws = served.ws("r", "", None).await;
        ws.text().await;
        let mut mine = Received::default();
        ws.input(b"echo one-$((1+1))\r").await;
        mine.until(&mut ws, "one-2").await;
        ws.close().await;

        // Output the viewer misses while away.
        let (status, _) = served
            .post(
                "/api/terminals/r/send",
                r#"{"text":"echo two-$((2+2))","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200);
        let since = mine.offset;
        let mut back = served
            .ws("r", &format!("since={stream}:{since}"), None)
            .await;
        let hello = back.text().await;
        assert_eq!(hello["offset"].as_u64(), Some(since), "{hello}");
        let mut resumed = Received {
            offset: since,
            start: since,
            bytes: Vec::new(),
            repaint: Vec::new(),
        };
        resumed.until(&mut back, "two-4").await;
        all.until(&mut witness, "two-4").await;
        // The resumed bytes are exactly the witness's from `since` on. The
        // two may have the same bytes in different frames: read the witness
        // as far as the resumed viewer got.
        let from = usize::try_from(since - all.start).unwrap();
        while all.bytes.len() < from + resumed.bytes.len() {
            if let Frame::Binary(bytes) = witness.next().await {
                all.bytes.extend_from_slice(&bytes);
            }
        }
        let witnessed = &all.bytes[from..from + resumed.bytes.len()];
        assert_eq!(
            String::from_utf8_lossy(&resumed.bytes),
            String::from_utf8_lossy(witnessed)
        );

        // An unknown stream gets a snapshot instead.
        let mut stale = served.ws("r", "since=0000000000000001:5", None).await;
        stale.text().await;
        assert_eq!(stale.text().await["type"], "snapshot");
        served
            .call(served.request(Method::DELETE, "/api/terminals/r"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn read_only_viewers_never_reach_the_pane() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"ro","command":["sh"]}"#).await;
        let mut viewer = served.ws("ro", "read_only=true", None).await;
        assert_eq!(viewer.text().await["read_only"], true);
        viewer.input(b"echo not-$((1+2))\r").await;
        viewer
            .send_text(r#"{"type":"resize","cols":50,"rows":10}"#)
            .await;
        let mut writer = served.ws("ro", "", None).await;
        writer.text().await;
        writer.input(b"echo yes-$((2+2))\r").await;
        let mut seen = Received::default();
        seen.until(&mut viewer, "yes-4").await;
        let (_, screen) = served.get("/api/terminals/ro/screen").await;
        assert!(!screen.to_string().contains("not-3"), "{screen}");
        assert_ne!(screen["cols"], 50);
        served
            .call(served.request(Method::DELETE, "/api/terminals/ro"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_answered_and_bounded() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"b","command":["sh"]}"#).await;

        let mut ws = served.ws("b", "", None).await;
        ws.text().await;
        ws.send_text("{not json").await;
        assert_eq!(ws.close_code().await, 4400);

        let mut ws = served.ws("b", "", None).await;
        ws.text().await;
        // The server may close before the client finished writing.
        let _ = ws.try_input(&vec![b'x'; 10 << 20]).await;
        let code = ws.close_code().await;
        assert!(
            code == 1009 || code == 1006,
            "a 10 MiB frame closed with {code}"
        );

        // 1000 viewers come and go, 25 at a time.
        let started = std::time::Instant::now();
        for _ in 0..40 {
            futures_util::future::join_all((0..25).map(|_| async {
                let ws = served.ws("b", "", None).await;
                ws.close().await;
            }))
            .await;
        }
        eprintln!("1000 connect/disconnects took {:?}", started.elapsed());

        eprintln!("10 MiB frame and 1000 viewers done");
        // A viewer that never reads while the program floods.
        let _stuck = served.ws("b", "", None).await;
        let mut ws = served.ws("b", "", None).await;
        ws.text().await;
        ws.input(b"seq 1 1000000; echo fl$((0))od-done\r").await;
        let mut seen = Received::default();
        seen.until(&mut ws, "fl0od-done").await;
        eprintln!("flood done after {:?}", started.elapsed());
        let rss = rss_kib(served.pid());
        assert!(rss < 256 * 1024, "server RSS {rss} KiB");

        eprintln!("rss {rss} KiB after {:?}", started.elapsed());
        // The terminal is unharmed.
        let (status, sent) = served
            .post(
                "/api/terminals/b/send",
                r#"{"text":"echo ok-$((3*3))","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200);
        assert!(sent["output"].as_str().unwrap().contains("ok-9"), "{sent}");
        eprintln!("send done after {:?}", started.elapsed());
        served
            .call(served.request(Method::DELETE, "/api/terminals/b"))
            .await;
    })
    .await;
}

/// Resident memory of a process, in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn pty_transport_says_hello_and_closes_4404_at_the_end() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"p","command":["sh"]}"#).await;
        let mut ws = served.ws("p", "transport=pty", None).await;
        let hello = ws.text().await;
        assert_eq!(hello["transport"], "pty");
        assert!(
            hello["stream"].is_null() && hello["offset"].is_null(),
            "{hello}"
        );
        ws.input(b"echo pty-$((5*5))\r").await;
        let mut seen = Received::default();
        seen.until(&mut ws, "pty-25").await;
        ws.input(b"exit\r").await;
        assert_eq!(ws.close_code().await, 4404);
        served
            .call(served.request(Method::DELETE, "/api/terminals/p"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn viewers_are_counted_per_terminal_over_both_transports() {
    within(async {
        let served = Served::start(&[]).await;
        let watched = served.spawn(r#"{"name":"watched","command":["sh"]}"#).await;
        let alone = served.spawn(r#"{"name":"alone","command":["sh"]}"#).await;
        let count = |counts: &serde_json::Value, t: &serde_json::Value| {
            counts[t["id"].as_str().unwrap()].as_u64()
        };
        let (status, counts) = served.get("/api/viewers").await;
        assert_eq!(status, 200, "{counts}");
        assert_eq!(count(&counts, &watched), Some(0), "{counts}");
        let mut control = served.ws("watched", "", None).await;
        assert_eq!(control.text().await["type"], "hello");
        let mut pty = served.ws("watched", "transport=pty", None).await;
        assert_eq!(pty.text().await["type"], "hello");
        let (_, counts) = served.get("/api/viewers").await;
        assert_eq!(count(&counts, &watched), Some(2), "{counts}");
        assert_eq!(count(&counts, &alone), Some(0), "{counts}");
        assert_eq!(
            counts.as_object().unwrap().len(),
            2,
            "only the owner's terminals: {counts}"
        );
        // A viewer that leaves stops counting (once serve saw it go).
        pty.close().await;
        poll("the pty viewer to stop counting", WAIT, || async {
            let (_, counts) = served.get("/api/viewers").await;
            (count(&counts, &watched) == Some(1)).then_some(())
        })
        .await;
        drop(control);
    })
    .await;
}
