//! A long history in one frame (issue 49): a viewer reads its terminal's
//! past output in pages (`{"type":"history","before":N}`), from the
//! stream's ring and, older than the ring holds, from the kept history on
//! disk; real tmux, real serve. In headless Chromium, the page attached to
//! a terminal that printed 100,000 lines lets a person scroll to line 1.

use super::browser::{Browser, chromium_required};
use super::{Frame, Served, Ws};
use crate::support::within;

/// Reads `ws` until a snapshot and its repaint; the snapshot's offset.
async fn snapshot(ws: &mut Ws) -> u64 {
    loop {
        if let Frame::Text(frame) = ws.next().await
            && frame["type"] == "snapshot"
        {
            let offset = frame["offset"].as_u64().unwrap();
            assert!(matches!(ws.next().await, Frame::Binary(_)), "the repaint");
            return offset;
        }
    }
}

/// One page: asks for the bytes before `before` (at most `max`), reads
/// the answer (skipping live output); `(frame, bytes)`.
async fn page(ws: &mut Ws, before: u64, max: Option<u64>) -> (serde_json::Value, Vec<u8>) {
    let ask = match max {
        Some(max) => format!(r#"{{"type":"history","before":{before},"max":{max}}}"#),
        None => format!(r#"{{"type":"history","before":{before}}}"#),
    };
    ws.send_text(&ask).await;
    loop {
        if let Frame::Text(frame) = ws.next().await
            && frame["type"] == "history"
        {
            let Frame::Binary(bytes) = ws.next().await else {
                panic!("a history frame's bytes follow it");
            };
            let (from, to) = (
                frame["from"].as_u64().unwrap(),
                frame["to"].as_u64().unwrap(),
            );
            assert_eq!(bytes.len() as u64, to - from, "{frame}");
            return (frame, bytes);
        }
    }
}

/// Waits until `name`'s screen shows `needle`.
async fn until_screen(served: &Served, name: &str, needle: &str) {
    let deadline = tokio::time::Instant::now() + super::WAIT * 4;
    loop {
        let (_, screen) = served.get(&format!("/api/terminals/{name}/screen")).await;
        if screen.to_string().contains(needle) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{needle} never on {name}'s screen: {screen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The numbers of the `line N` lines in `bytes`, in order.
fn numbered(bytes: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|line| line.trim_end_matches('\r').strip_prefix("line "))
        .map(|n| n.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn a_viewer_reads_the_whole_history_a_page_at_a_time_past_the_ring() {
    within(async {
        // A ring of 64 KiB: most of the 20,000 lines (~230 KB) are only in
        // the kept history on disk.
        let served = Served::start(&["--replay-bytes", "65536"]).await;
        served
            .spawn(
                r#"{"name":"long","keep_history":true,
                    "command":["sh","-c","seq -f 'line %g' 1 20000; echo END; exec cat"]}"#,
            )
            .await;
        until_screen(&served, "long", "END").await;
        for query in ["", "read_only=true"] {
            let mut ws = served.ws("long", query, None).await;
            let hello = ws.text().await;
            assert_eq!(hello["type"], "hello");
            let stream = hello["stream"].as_str().unwrap().to_owned();
            let at = snapshot(&mut ws).await;
            let mut pages = Vec::new();
            let mut before = at;
            loop {
                let (frame, bytes) = page(&mut ws, before, Some(50_000)).await;
                assert_eq!(frame["stream"], stream.as_str());
                assert_eq!(frame["to"].as_u64().unwrap(), before, "pages meet exactly");
                assert!(bytes.len() <= 50_000, "a page is bounded: {}", bytes.len());
                let from = frame["from"].as_u64().unwrap();
                pages.push(bytes);
                if from == frame["first"].as_u64().unwrap() {
                    assert_eq!(from, 0, "the whole history, from the stream's first byte");
                    break;
                }
                assert!(from < before, "each page goes further back");
                before = from;
            }
            assert!(pages.len() > 4, "{} pages of 50 KB", pages.len());
            let whole: Vec<u8> = pages.into_iter().rev().flatten().collect();
            assert_eq!(numbered(&whole), (1..=20_000).collect::<Vec<_>>());
            assert!(String::from_utf8_lossy(&whole).contains("line 20000\r\nEND\r\n"));
            // Nothing before the first byte; past the end is the end.
            let (frame, bytes) = page(&mut ws, 0, None).await;
            assert_eq!((frame["from"].as_u64(), bytes.len()), (Some(0), 0));
            let (frame, _) = page(&mut ws, u64::MAX, Some(10)).await;
            assert_eq!(frame["to"].as_u64().unwrap(), at, "clamped to the end");
            ws.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_person_scrolls_to_line_1_of_a_100000_line_history() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served
            .spawn(
                r#"{"name":"hist","history_limit":100000,
                    "command":["sh","-c","seq -f 'line %g of the history' 1 100000; echo END-OF-HISTORY; exec cat"]}"#,
            )
            .await;
        until_screen(&served, "hist", "END-OF-HISTORY").await;
        let url = format!("{}&t=hist", served.sign_in_url("{}").await);
        let mut browser = Browser::open(&binary, &url).await;
        browser
            .until(
                "the history loaded",
                "typeof tmuxEngine === 'object' && !!tmuxEngine.historyLoaded \
                 && tmuxEngine.historyLoaded.from === tmuxEngine.historyLoaded.first",
            )
            .await;
        // The screen is tmux's: its last line of history and the marker.
        let lines = browser.lines().await;
        assert!(
            lines.iter().any(|line| line.trim_end() == "END-OF-HISTORY"),
            "{:?}",
            &lines[lines.len().saturating_sub(30)..]
        );
        assert_eq!(
            lines
                .iter()
                .filter(|line| line.trim_end() == "line 100000 of the history")
                .count(),
            1,
            "no line twice where the history meets the screen"
        );
        // Scrolled to the top: line 1 is the first line in view.
        browser.eval("tmuxEngine.term.scrollToTop()").await;
        let top = browser
            .eval(
                "(() => { const b = tmuxEngine.term.buffer.active;\
                 return [b.viewportY, b.getLine(b.viewportY).translateToString(true)]; })()",
            )
            .await;
        assert_eq!(top, serde_json::json!([0, "line 1 of the history"]));
        let numbers: Vec<u64> = lines
            .iter()
            .filter_map(|line| line.trim_end().strip_prefix("line "))
            .filter_map(|rest| rest.strip_suffix(" of the history"))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(numbers, (1..=100_000).collect::<Vec<_>>(), "every line once, in order");
        // Still live: what the program prints now follows the history.
        browser.until_focused().await;
        browser.type_line("typed after the history").await;
        browser.line("typed after the history").await;
        browser.screenshot("history.png").await;
        browser.close().await;
    })
    .await;
}
