//! The size cap on every face: over `MAX_SIZE` a side or `MAX_CELLS`
//! cells is `INVALID_INPUT` from HTTP, the WebSocket's resize (4400), MCP
//! and the CLI; and the largest allowed terminal, its screen full of
//! coloured text, answers its screen, a viewer's snapshot and a resize
//! whole with serve's RSS growing under 64 MiB (their times printed for
//! docs/agents.md, not asserted).

use std::time::Instant;

use serde_json::json;

use super::ws::rss_kib;
use super::{Frame, Served, WAIT};
use crate::support::{poll, within};

#[tokio::test]
async fn sizes_over_the_cap_are_invalid_input_on_every_face() {
    within(async {
        let served = Served::start(&[]).await;
        for (cols, rows) in [
            (1001, 10),
            (10, 1001),
            (1000, 132),
            (363, 363),
            (10_000, 10_000),
        ] {
            let body = json!({"command": ["sh"], "cols": cols, "rows": rows}).to_string();
            let (status, answer) = served.post("/api/terminals", &body).await;
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (400, Some("INVALID_INPUT")),
                "{cols}x{rows}: {answer}"
            );
        }
        served
            .spawn(r#"{"name":"t","command":["sh"],"cols":1000,"rows":131}"#)
            .await;
        let mut ws = served.ws("t", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        ws.send_text(r#"{"type":"resize","cols":1000,"rows":132}"#)
            .await;
        assert_eq!(ws.close_code().await, 4400);
        let cli = served.cli.run(&["spawn", "--size", "1001x10", "--", "sh"]);
        let stderr = String::from_utf8_lossy(&cli.stderr);
        assert!(
            !cli.status.success() && stderr.contains("INVALID_INPUT"),
            "{stderr}"
        );
        let mcp = crate::mcp::Mcp::start(&served.cli).await;
        let result = mcp
            .call(
                "terminal_spawn",
                json!({"command": ["sh"], "cols": 600, "rows": 600}),
            )
            .await;
        let text = serde_json::to_string(&result.content).unwrap();
        assert!(
            result.is_error == Some(true) && text.contains("INVALID_INPUT"),
            "{text}"
        );
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/t"))
            .await;
    })
    .await;
}

/// The largest terminal the caps allow answers its screen, a viewer's
/// snapshot and a resize whole, without serve growing past 64 MiB. How
/// long they take is printed, not asserted (a debug build beside busy
/// cores took 1.5 s for the screen in a loaded `scripts/check`, 1.05 s
/// alone): speed belongs in benchmarks, and tmux's own 10000x10000, which
/// the caps keep out, took 16 s and 6.9 GiB.
#[tokio::test]
async fn the_largest_allowed_terminal_answers_whole_within_its_memory_bound() {
    within(async {
        let served = Served::start(&[]).await;
        // 131 rows of 1000 cells, each cell its own colour.
        let fill = "import sys\nfor r in range(131):\n    sys.stdout.write(''.join('\\x1b[3%dm%s' % (c % 8, chr(65 + (r + c) % 26)) for c in range(1000 if r < 130 else 999)))\nsys.stdout.write('\\x1b[0m')\nsys.stdout.flush()\nimport time\ntime.sleep(600)\n";
        let body = json!({"name": "big", "command": ["python3", "-c", fill], "cols": 1000, "rows": 131});
        served.spawn(&body.to_string()).await;
        poll("the screen to fill", WAIT, || async {
            let (_, screen) = served.get("/api/terminals/big/screen").await;
            let lines = screen["lines"].as_array()?;
            (lines.len() == 131 && lines[130].as_str()?.trim_end().len() == 999).then_some(())
        })
        .await;
        let before = rss_kib(served.pid());
        let started = Instant::now();
        let (status, screen) = served.get("/api/terminals/big/screen").await;
        let took = started.elapsed();
        assert_eq!((status, screen["cols"].clone()), (200, json!(1000)));
        let grown = rss_kib(served.pid()).saturating_sub(before);
        eprintln!("1000x131 screen: {took:?}, serve RSS +{grown} KiB");
        assert!(grown < 64 * 1024, "serve grew {grown} KiB");
        // A viewer's hello and snapshot (the whole coloured screen).
        let started = Instant::now();
        let mut ws = served.ws("big", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        let repaint = loop {
            match ws.next().await {
                Frame::Text(frame) if frame["type"] == "snapshot" => {}
                Frame::Binary(bytes) => break bytes,
                other => panic!("{other:?}"),
            }
        };
        let snapshot = started.elapsed();
        // A resize to the other largest shape, answered by its frame.
        let started = Instant::now();
        ws.send_text(r#"{"type":"resize","cols":362,"rows":362}"#)
            .await;
        loop {
            match ws.next().await {
                Frame::Text(frame) if frame["type"] == "resize" => {
                    assert_eq!((frame["cols"].clone(), frame["rows"].clone()), (json!(362), json!(362)));
                    break;
                }
                Frame::Close(code) => panic!("closed {code}"),
                _ => {}
            }
        }
        let resize = started.elapsed();
        let grown = rss_kib(served.pid()).saturating_sub(before);
        eprintln!(
            "snapshot of {} bytes: {snapshot:?}; resize to 362x362: {resize:?}; serve RSS +{grown} KiB",
            repaint.len()
        );
        assert!(grown < 64 * 1024, "serve grew {grown} KiB");
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/big"))
            .await;
    })
    .await;
}
