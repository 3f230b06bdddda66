//! A long history in one frame (issue 49): a viewer reads its terminal's
//! past output in pages (`{"type":"history","before":N}`), from the
//! stream's ring and, older than the ring holds, from the kept history on
//! disk; real tmux, real serve. In headless Chromium, the page attached to
//! a terminal that printed 100,000 lines shows its screen from the
//! snapshot alone and lets a person scroll through the whole past (the
//! past view, web/past.js), line 1 to the last, and on after 4.5 MB more.

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
    ask(ws, before, max).await;
    answer(ws).await
}

/// Asks for the page of bytes before `before` (at most `max`).
async fn ask(ws: &mut Ws, before: u64, max: Option<u64>) {
    let ask = match max {
        Some(max) => format!(r#"{{"type":"history","before":{before},"max":{max}}}"#),
        None => format!(r#"{{"type":"history","before":{before}}}"#),
    };
    ws.send_text(&ask).await;
}

/// Reads the answer to a history request (skipping live output):
/// `(frame, bytes)`.
async fn answer(ws: &mut Ws) -> (serde_json::Value, Vec<u8>) {
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

/// A serve of a `ring`-byte ring (`--replay-bytes`) with terminal `name`
/// running `sh -c script`, its history kept.
async fn keeping(ring: &str, name: &str, script: &str) -> Served {
    let served = Served::start(&["--replay-bytes", ring]).await;
    let spawn =
        serde_json::json!({"name": name, "keep_history": true, "command": ["sh", "-c", script]});
    served.spawn(&spawn.to_string()).await;
    served
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
        let served = keeping(
            "65536",
            "long",
            "seq -f 'line %g' 1 20000; echo END; exec cat",
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

/// The kept history is written behind the stream: the relay writes each
/// read to it after serving its links (off the echo's path), so for a
/// moment a viewer's ring can be past the files' end, and a loaded machine
/// can stretch that moment (the test above once failed "each page goes
/// further back": a page at the ring's start came back empty, `first`
/// saying older bytes existed). Here the relay is stopped mid-flood, where
/// it may be anywhere in its loop, a page is asked that needs the bytes
/// just older than a 4 KiB ring, and the relay goes on a little later: the
/// page waits for it (or, had the relay not come back, would say nothing
/// older can be read, `from == first`), never a page short of the bytes
/// asked while older ones exist.
#[tokio::test]
async fn a_page_past_the_ring_waits_for_the_relay_to_keep_its_bytes() {
    use crate::support::Stopped;
    const ROUNDS: usize = 12;
    const PAGE: u64 = 50_000;
    // How long the relay stays stopped at most while a page is asked: a
    // serve that does not wait answers well within it (the page is read
    // from the files at once), one that waits gets its bytes once the
    // relay goes on. Pacing only: no outcome depends on how long it is.
    const STOPPED: std::time::Duration = std::time::Duration::from_millis(500);
    within(async {
        let served = keeping("4096", "flood", "seq -f 'line %.0f' 1 1000000000").await;
        let relay = crate::support::relays(&served.cli.runtime());
        assert_eq!(relay.len(), 1, "one relay: {relay:?}");
        let relay = relay[0];
        let mut ws = served.ws("flood", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        for round in 0..ROUNDS {
            // The flood reaches this viewer: the relay is inside its loop.
            while !matches!(ws.next().await, Frame::Binary(_)) {}
            let stopped = Stopped::new(relay);
            // The newest bytes, from the ring; then the page before them,
            // which is older than the ring holds.
            let (newest, _) = page(&mut ws, u64::MAX, Some(4096)).await;
            let before = newest["from"].as_u64().unwrap();
            ask(&mut ws, before, Some(PAGE)).await;
            // The relay goes on once serve answered, or after a while
            // (serve waits for it): either way the answer must hold.
            let answered = tokio::time::timeout(STOPPED, answer(&mut ws)).await;
            drop(stopped);
            let (frame, bytes) = match answered {
                Ok(answered) => answered,
                Err(_) => answer(&mut ws).await,
            };
            let (from, first) = (
                frame["from"].as_u64().unwrap(),
                frame["first"].as_u64().unwrap(),
            );
            assert_eq!(frame["to"].as_u64().unwrap(), before, "{frame}");
            assert!(
                from == first || before - from > PAGE - 100,
                "round {round}: a page of {} bytes before {before} of a 4 KiB ring, \
                 not the {PAGE} asked, and first = {first}: {frame}",
                bytes.len()
            );
            let lines = numbered(&bytes);
            assert!(
                lines.windows(2).all(|pair| pair[1] == pair[0] + 1),
                "round {round}: the kept lines run in order"
            );
        }
        ws.close().await;
    })
    .await;
}

/// Walks the past view down from where it is, a screen at a time, in
/// the page (pages load as it goes), for at most `WALK_STEPS` screens:
/// `{out, done}`, the numbers of its `line N of the history` rows in the
/// order drawn, and whether it reached the bottom. A call is one DevTools
/// answer, which the harness waits for a bounded time: the whole walk of
/// ~4,000 screens in one call outlasted it on a loaded machine, so
/// [`walk`] calls this until done.
const WALK: &str = "(async () => {
  const p = tmuxEngine.past, s = p.state, out = [];
  const settled = async () => { while (s.asked || s.want) await new Promise((r) => setTimeout(r, 5)); };
  const rows = () => Math.max(1, Math.floor(document.getElementById('past').clientHeight / s.rowH));
  for (let step = 0; step < WALK_STEPS; step++) {
    await settled();
    for (const row of p.shown) {
      const m = /^line (\\d+) of the history/.exec(row);
      if (m) out.push(Number(m[1]));
    }
    if (s.atBottom) return {out, done: true};
    p.scrollRows(rows());
  }
  return {out, done: false};
})()";

/// Screens walked by one [`WALK`] call: a few hundred milliseconds idle.
const WALK_STEPS: u32 = 100;

/// Walks the past view from where it is to its bottom ([`WALK`] until it
/// is done, at most 100,000 screens); the numbers drawn, in order.
async fn walk(browser: &mut Browser) -> Vec<u64> {
    let expression = WALK.replace("WALK_STEPS", &WALK_STEPS.to_string());
    let mut drawn = Vec::new();
    for _ in 0..100_000 / WALK_STEPS {
        let answer = browser.eval(&expression).await;
        drawn.extend(
            answer["out"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap()),
        );
        if answer["done"] == true {
            return drawn;
        }
    }
    panic!("no bottom after 100,000 screens");
}

/// The numbers drawn, each once in order: a screen's rows repeated at the
/// bottom (the last step is short) are dropped; a gap or a line out of
/// order fails.
fn in_order(drawn: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for &n in drawn {
        match out.last() {
            Some(&last) if n <= last => {}
            Some(&last) => {
                assert_eq!(n, last + 1, "a gap after line {last}");
                out.push(n);
            }
            None => out.push(n),
        }
    }
    out
}

/// Waits until terminal `name` printed `END-OF-HISTORY`, then opens the
/// page on it and waits until its past view has a first page to show.
async fn open_on_history(served: &Served, binary: &std::path::PathBuf, name: &str) -> Browser {
    until_screen(served, name, "END-OF-HISTORY").await;
    let url = format!("{}&t={name}", served.sign_in_url("{}").await);
    let mut browser = Browser::open(binary, &url).await;
    browser
        .until(
            "the past's first page",
            "typeof tmuxEngine === 'object' && tmuxEngine.past.available()",
        )
        .await;
    browser
}

/// A wheel turn at the middle of the stage (negative `delta_y`: up).
async fn wheel(browser: &mut Browser, delta_y: f64) {
    let at = browser
        .eval(
            "(() => { const r = document.getElementById('stage').getBoundingClientRect();\
             return [r.x + r.width / 2, r.y + r.height / 2]; })()",
        )
        .await;
    browser
        .call(
            "Input.dispatchMouseEvent",
            serde_json::json!({"type": "mouseWheel", "x": at[0], "y": at[1],
                               "deltaX": 0, "deltaY": delta_y}),
        )
        .await;
}

#[tokio::test]
async fn a_person_scrolls_through_a_100000_line_history_and_past_4_mib_printed_since() {
    let binary = chromium_required();
    within(async {
        // A ring of 256 KiB: most of the history is read from disk.
        let served = Served::start(&["--replay-bytes", "262144"]).await;
        served
            .spawn(
                r#"{"name":"hist","history_limit":2000,"keep_history":true,
                    "command":["sh","-c","seq -f 'line %g of the history' 1 100000; echo END-OF-HISTORY; read go; seq -f 'line %g of the history' 100001 260000; echo END-TWO; exec cat"]}"#,
            )
            .await;
        let mut browser = open_on_history(&served, &binary, "hist").await;
        // xterm.js holds the snapshot only: tmux's screen and its last
        // lines, never the whole history parsed.
        let lines = browser.lines().await;
        assert!(lines.iter().any(|line| line.trim_end() == "END-OF-HISTORY"), "{lines:?}");
        assert!(lines.len() < 1000, "{} lines in xterm.js", lines.len());
        // A wheel up at the terminal's top opens the past at its end.
        browser.eval("tmuxEngine.term.scrollToTop()").await;
        wheel(&mut browser, -120.0).await;
        browser
            .until("the past view open", "!document.getElementById('past').hidden")
            .await;
        browser
            .until(
                "the past's last rows",
                "tmuxEngine.past.shown.filter((r) => r.trim()).pop() === 'END-OF-HISTORY'",
            )
            .await;
        // Dragged to the top: line 1; then screen by screen to the end,
        // every line once, in order.
        browser.eval("tmuxEngine.past.drag(0)").await;
        browser
            .until("line 1 at the top", "tmuxEngine.past.shown[0] === 'line 1 of the history'")
            .await;
        let drawn = walk(&mut browser).await;
        assert_eq!(in_order(&drawn), (1..=100_000).collect::<Vec<_>>());
        // Down past its end: the terminal again, still live.
        wheel(&mut browser, 120.0).await;
        browser
            .until("the past view closed", "document.getElementById('past').hidden")
            .await;
        browser.until_focused().await;
        // 4.5 MB more after the snapshot (the page once stopped loading
        // history past 4 MiB printed since): the past still reaches line 1
        // and ends at the output now.
        browser.type_line("go").await;
        browser.line("END-TWO").await;
        browser.eval("document.getElementById('past-open').click()").await;
        browser
            .until(
                "the past's last rows, now",
                "tmuxEngine.past.shown.filter((r) => r.trim()).pop() === 'END-TWO'",
            )
            .await;
        browser.eval("tmuxEngine.past.drag(0)").await;
        browser
            .until("line 1 at the top", "tmuxEngine.past.shown[0] === 'line 1 of the history'")
            .await;
        // The middle of the scrollbar is near the middle of the output.
        browser.eval("tmuxEngine.past.drag(0.5)").await;
        browser
            .until("a line drawn mid-way", "/^line \\d+ of/.test(tmuxEngine.past.shown[0] || '')")
            .await;
        let middle = browser.eval("Number(/^line (\\d+)/.exec(tmuxEngine.past.shown[0])[1])").await;
        let middle = middle.as_u64().unwrap();
        assert!((100_000..160_000).contains(&middle), "line {middle} at half way");
        browser.screenshot("history.png").await;
        browser.key("Escape", "Escape", 27, 0).await;
        browser
            .until("Esc closes the past", "document.getElementById('past').hidden")
            .await;
        browser.close().await;
    })
    .await;
}

/// Whether the past view shows as many rows as fit, each at most the
/// terminal's width, its last one `last`.
const FITS: &str = "(() => {
  const p = tmuxEngine.past, cols = tmuxEngine.term.cols;
  const rows = Math.max(1, Math.floor(document.getElementById('past').clientHeight / p.state.rowH));
  const drawn = p.shown.filter((r) => r.trim());
  return p.shown.length === rows && p.shown.every((r) => r.length <= cols) && drawn.pop() === 'LAST';
})()";

#[tokio::test]
async fn the_past_view_redraws_at_the_new_size_when_the_window_resizes() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        // Lines of ~70 columns: one row each in the first window, two in
        // the narrow one.
        served
            .spawn(
                r#"{"name":"hist","keep_history":true,
                    "command":["sh","-c","seq -f 'line %g of the history, long enough to wrap on a narrow screen' 1 3000; echo END-OF-HISTORY; exec cat"]}"#,
            )
            .await;
        let mut browser = open_on_history(&served, &binary, "hist").await;
        browser.eval("document.getElementById('past-open').click()").await;
        let fits = FITS.replace("LAST", "END-OF-HISTORY");
        browser.until("the past view at its end", &fits).await;
        let wide = browser.eval("tmuxEngine.term.cols").await.as_u64().unwrap();
        assert!(wide > 75, "{wide} columns");
        // Narrower and shorter while the view is open: its rows are
        // counted and wrapped again, its end still in view.
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                serde_json::json!({"width": 420, "height": 400, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        browser
            .until("the terminal narrowed", "tmuxEngine.term.cols < 60")
            .await;
        browser.until("the past view at the new size", &fits).await;
        assert_eq!(browser.eval("document.getElementById('past').hidden").await, false);
        // Scrolled up from there, then resized back: the view stays at the
        // same line, wrapped at the wide width again.
        browser.eval("tmuxEngine.past.scrollRows(-40)").await;
        let line = "Number(/^line (\\d+)/.exec(tmuxEngine.past.shown.find((r) => /^line \\d+/.test(r)))[1])";
        let before = browser.eval(line).await.as_u64().unwrap();
        browser
            .call("Emulation.clearDeviceMetricsOverride", serde_json::json!({}))
            .await;
        browser
            .until(
                "the view wrapped at the wide width",
                &format!("tmuxEngine.term.cols === {wide} && tmuxEngine.past.shown.every((r) => r.length <= {wide}) \
                          && tmuxEngine.past.shown.some((r) => /^line \\d+ .*narrow screen$/.test(r))"),
            )
            .await;
        let after = browser.eval(line).await.as_u64().unwrap();
        assert!(before.abs_diff(after) <= 1, "line {before} at the top, then {after}");
        browser.close().await;
    })
    .await;
}
