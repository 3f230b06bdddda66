//! The page on a phone and a tablet (issue 30), in headless chromium with
//! touch emulated: after `seq 1 100` the cursor's row is inside the
//! terminal's box and above the key bar, every key button is what a tap
//! at its centre hits, the phone's drawer opens and closes, and a
//! keyboard (a smaller `visualViewport`) re-fits the terminal above it.

use serde_json::{Value, json};

use super::Served;
use super::browser::{Browser, chromium_required};
use crate::support::within;

/// Where the geometry stands: the terminal's rows, the drawn screen, its
/// box, the key bar and the cursor's row, in viewport pixels.
const GEOMETRY: &str = "(() => {
  const t = tmuxEngine.term;
  const rect = (el) => el.getBoundingClientRect();
  const screen = rect(document.querySelector('#screen .xterm-screen'));
  const box = rect(document.getElementById('screen'));
  const keys = rect(document.getElementById('keys'));
  const cell = screen.height / t.rows;
  const cursorTop = screen.top + t.buffer.active.cursorY * cell;
  return { rows: t.rows, cols: t.cols, screenTop: screen.top, boxTop: box.top,
           screenBottom: screen.bottom, boxBottom: box.bottom,
           keysTop: keys.top, keysBottom: keys.bottom, cursorBottom: cursorTop + cell,
           height: window.visualViewport.height, width: innerWidth,
           keysShown: getComputedStyle(document.getElementById('keys')).display !== 'none' };
})()";

/// Each key button: whether `elementFromPoint` at its centre is it, and
/// whether it lies wholly inside the viewport.
const KEYS: &str = "[...document.querySelectorAll('#keys button')].map((b) => {
  const r = b.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return { key: b.dataset.key, hit: hit === b || b.contains(hit),
           inside: r.left >= 0 && r.top >= 0 && r.right <= innerWidth + 0.5
                   && r.bottom <= window.visualViewport.height + 0.5 && r.width >= 24 };
})";

fn check_geometry(geometry: &Value, what: &str) {
    let f = |key: &str| geometry[key].as_f64().unwrap();
    assert_eq!(
        geometry["keysShown"], true,
        "{what}: no key bar: {geometry}"
    );
    assert!(
        f("screenBottom") <= f("boxBottom") + 0.5 && f("screenTop") >= f("boxTop") - 0.5,
        "{what}: rows drawn outside the box: {geometry}"
    );
    assert!(
        f("cursorBottom") <= f("boxBottom") + 0.5 && f("cursorBottom") <= f("keysTop") + 0.5,
        "{what}: the cursor's row is outside the box or under the key bar: {geometry}"
    );
    assert!(
        f("keysBottom") <= f("height") + 0.5,
        "{what}: the key bar is below the viewport: {geometry}"
    );
}

async fn check_keys(browser: &mut Browser, what: &str) {
    let keys = browser.eval(KEYS).await;
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 7, "{keys:?}");
    for key in keys {
        assert!(
            key["hit"] == true && key["inside"] == true,
            "{what}: {key} is covered or cut off"
        );
    }
}

/// A browser at `width`x`height` with touch, on `served`'s page with
/// terminal `p` open and `seq 1 100` run in it.
async fn device(served: &Served, width: u32, height: u32) -> Browser {
    let binary = chromium_required();
    let mut browser = Browser::open(&binary, "about:blank").await;
    // Scale 1: under a larger emulated scale headless chromium's WebGL
    // canvas keeps a 1x backing store while drawing at the scale, which
    // would make the screenshot (not the layout measured here) wrong.
    browser
        .call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": true}),
        )
        .await;
    browser
        .call(
            "Emulation.setTouchEmulationEnabled",
            json!({"enabled": true, "maxTouchPoints": 5}),
        )
        .await;
    let code = served.sign_in_code("{}").await;
    browser
        .call(
            "Page.navigate",
            json!({"url": format!("{}/#code={code}&t=p", served.base)}),
        )
        .await;
    browser
        .until(
            "the terminal, open",
            "typeof tmuxEngine === 'object' && tmuxEngine.signedIn === true \
             && tmuxEngine.socket?.readyState === 1 && tmuxEngine.stream !== null",
        )
        .await;
    browser.prompt().await;
    browser.eval("tmuxEngine.term.focus()").await;
    browser.type_line("seq 1 100").await;
    browser.line("100").await;
    // The prompt after it: the cursor sits on the last row.
    browser
        .until(
            "the prompt after 100",
            "(() => { const b = tmuxEngine.term.buffer.active;\
             const row = b.getLine(b.baseY + b.cursorY).translateToString(true);\
             return row.trim() !== '' && row.trim() !== '100' && b.baseY > 0; })()",
        )
        .await;
    browser
}

#[tokio::test]
async fn a_phone_gets_a_drawer_and_every_row_and_key_in_view() {
    chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"p","command":["sh"]}"#).await;
        let mut browser = device(&served, 390, 844).await;
        let geometry = browser.eval(GEOMETRY).await;
        eprintln!("390x844: {geometry}");
        check_geometry(&geometry, "390x844");
        check_keys(&mut browser, "390x844").await;
        // The list is a closed drawer: the terminal has the whole width.
        let side = "document.getElementById('side').getBoundingClientRect()";
        assert_eq!(
            browser
                .eval(&format!("{side}.right <= 0 || getComputedStyle(document.getElementById('side')).visibility === 'hidden'"))
                .await,
            true
        );
        let shot = browser.screenshot("phone.png").await;
        eprintln!("phone screenshot: {}", shot.display());
        // ☰ opens it, with the entry reachable; choosing the entry closes it.
        browser.tap("drawer").await;
        browser
            .until(
                "the drawer, open",
                &format!("document.body.classList.contains('drawer-open') && {side}.left >= 0"),
            )
            .await;
        browser
            .until(
                "the entry, reachable",
                "(() => { const li = document.querySelector('#terminals li[data-name=\"p\"]');\
                 if (!li) return false; const r = li.getBoundingClientRect();\
                 const hit = document.elementFromPoint(r.left + 20, r.top + r.height / 2);\
                 return li.contains(hit); })()",
            )
            .await;
        browser.screenshot("phone-drawer.png").await;
        browser
            .eval("document.querySelector('#terminals li[data-name=\"p\"] .name').click()")
            .await;
        browser
            .until(
                "the drawer, closed",
                &format!("!document.body.classList.contains('drawer-open') && {side}.right <= 0"),
            )
            .await;
        // The keyboard comes up: the visual viewport is 300 px shorter.
        let before = geometry["rows"].as_u64().unwrap();
        browser
            .eval(
                "(() => { const h = window.visualViewport.height - 300;\
                 Object.defineProperty(window.visualViewport, 'height', {get: () => h, configurable: true});\
                 window.visualViewport.dispatchEvent(new Event('resize')); })()",
            )
            .await;
        browser
            .until_reporting(
                "the re-fit above the keyboard",
                &format!("tmuxEngine.term.rows < {before}"),
                GEOMETRY,
            )
            .await;
        let keyboard = browser.eval(GEOMETRY).await;
        check_geometry(&keyboard, "with the keyboard");
        check_keys(&mut browser, "with the keyboard").await;
        // And goes: the rows come back.
        browser
            .eval(
                "(() => { delete window.visualViewport.height;\
                 window.visualViewport.dispatchEvent(new Event('resize')); })()",
            )
            .await;
        browser
            .until_reporting(
                "the re-fit without the keyboard",
                &format!("tmuxEngine.term.rows === {before}"),
                &format!("[{GEOMETRY}, window.visualViewport.scale, window.visualViewport.offsetTop, document.body.style.getPropertyValue('--vvh')]"),
            )
            .await;
        browser.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_tablet_keeps_the_side_list_and_every_row_and_key_in_view() {
    chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"p","command":["sh"]}"#).await;
        let mut browser = device(&served, 768, 1024).await;
        let geometry = browser.eval(GEOMETRY).await;
        check_geometry(&geometry, "768x1024");
        check_keys(&mut browser, "768x1024").await;
        let layout = browser
            .eval(
                "(() => { const side = document.getElementById('side').getBoundingClientRect();\
                 return [side.left, side.width,\
                 getComputedStyle(document.getElementById('drawer')).display]; })()",
            )
            .await;
        assert_eq!(layout[0], 0, "{layout}");
        assert!(layout[1].as_f64().unwrap() > 100.0, "{layout}");
        assert_eq!(layout[2], "none", "{layout}");
        browser.screenshot("tablet.png").await;
        browser.close().await;
    })
    .await;
}
