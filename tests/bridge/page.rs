//! The page's features in headless chromium (the harness in `browser.rs`):
//! the addons (WebGL falling back to the DOM renderer without a GPU or on
//! a software one), a program's title, links, OSC 52, Unicode 11 widths,
//! options from the server and the URL, the welcome and `#t=NAME`, the
//! list's actions, copy without an interrupt and the on-screen keys. Each
//! state is saved as a screenshot under `shots_dir()`. Plus
//! `--page-option`'s checks, which need no browser.

use base64::Engine;
use serde_json::{Value, json};

use super::Served;
use super::browser::{Browser, chromium_required};
use crate::support::within;

/// A 1x1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// The centre of cell (`col`, buffer line `line`) in viewport pixels.
async fn cell(browser: &mut Browser, col: usize, line: usize) -> (f64, f64) {
    let at = browser
        .eval(&format!(
            "(() => {{ const t = tmuxEngine.term; const r = t.element.querySelector('.xterm-screen').getBoundingClientRect();\
             const w = r.width / t.cols, h = r.height / t.rows; const row = {line} - t.buffer.active.viewportY;\
             return [r.left + ({col} + 0.5) * w, r.top + (row + 0.5) * h]; }})()"
        ))
        .await;
    (at[0].as_f64().unwrap(), at[1].as_f64().unwrap())
}

#[tokio::test]
async fn the_page_loads_its_addons_and_follows_titles_links_clipboard_and_widths() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[
            "--page-option",
            "theme=light",
            "--page-option",
            "fontSize=13",
        ])
        .await;
        // The URL's fontSize beats the server's; the server's theme stays.
        let code = served.sign_in_code("{}").await;
        let url = format!("{}/?fontSize=17#code={code}", served.base);
        let mut browser = Browser::open(&binary, &url).await;
        browser
            .until("the page", "typeof tmuxEngine === 'object' && tmuxEngine.terminals !== undefined")
            .await;
        assert_eq!(browser.eval("location.search").await, "?fontSize=17");
        assert_eq!(
            browser
                .eval("[tmuxEngine.term.options.fontSize, tmuxEngine.options.theme, pageOptions.source('fontSize'), pageOptions.source('theme'), tmuxEngine.term.options.theme.background]")
                .await,
            json!([17, "light", "url", "server", "#fafafa"])
        );
        let addons = browser.eval("tmuxEngine.addons").await;
        for addon in ["fit", "unicode11", "web-links", "clipboard", "image"] {
            assert!(addons.as_array().unwrap().contains(&Value::from(addon)), "{addons}");
        }
        // WebGL where the browser has it on a GPU, else the DOM renderer, cleanly.
        let webgl = browser.eval(HARDWARE_WEBGL).await;
        let renderer = browser.eval("tmuxEngine.renderer").await;
        assert_eq!(
            renderer,
            if webgl == Value::Bool(true) { "webgl" } else { "dom" },
            "{}",
            browser.eval("tmuxEngine.rendererError").await
        );
        eprintln!("renderer: {renderer}");

        // Nothing open: the welcome, not an empty terminal.
        browser
            .until(
                "the welcome",
                "getComputedStyle(document.getElementById('welcome')).display !== 'none'\
                 && getComputedStyle(document.getElementById('screen')).visibility === 'hidden'",
            )
            .await;
        browser.screenshot("welcome.png").await;

        browser.eval("document.getElementById('welcome-new').click()").await;
        browser
            .until(
                "shell-1 opened",
                "tmuxEngine.name === 'shell-1' && location.hash === '#t=shell-1'\
                 && tmuxEngine.socket?.readyState === 1",
            )
            .await;
        browser.until_focused().await;
        browser.prompt().await;

        browser.type_line(r"printf '\033]0;hello\007'").await;
        browser
            .until(
                "the title",
                "document.title === 'hello' && document.querySelector('#terminals li.open .title')?.textContent === 'hello'",
            )
            .await;

        // OSC 52 asks first (clipboardWrite=ask, the default): nothing is
        // copied until Allow is clicked.
        browser.type_line(r"printf '\033]52;c;aGk=\007'").await;
        browser
            .until(
                "the copy notice",
                "tmuxEngine.lastOffer === 'hi' && !!document.getElementById('clipboard-ask')",
            )
            .await;
        assert_eq!(browser.eval("tmuxEngine.lastCopy").await, serde_json::Value::Null);
        browser
            .eval("document.querySelector('#clipboard-ask button[aria-label=\"allow this copy\"]').click()")
            .await;
        browser
            .until("the clipboard write", "tmuxEngine.lastCopy === 'hi'")
            .await;
        // Denied by the option: offered, never copied.
        browser
            .eval("document.getElementById('opt-clipboardWrite').value = 'deny'; document.getElementById('opt-clipboardWrite').onchange()")
            .await;
        browser.type_line(r"printf '\033]52;c;bm8=\007'").await;
        browser
            .until("the denied offer", "tmuxEngine.lastOffer === 'no'")
            .await;
        assert_eq!(browser.eval("[tmuxEngine.lastCopy, !!document.getElementById('clipboard-ask')]").await, serde_json::json!(["hi", false]));

        // U+1F600 is wide in Unicode 11 (one cell in Unicode 6).
        browser.type_line(r"printf '\360\237\230\200X\n'").await;
        let line = browser.line("😀X").await;
        let widths = browser
            .eval(&format!(
                "(() => {{ const l = tmuxEngine.term.buffer.active.getLine({line});\
                 return [tmuxEngine.term.unicode.activeVersion, l.getCell(0).getWidth(), l.getCell(2).getChars()]; }})()"
            ))
            .await;
        assert_eq!(widths, json!(["11", 2, "X"]));

        // Images: sixel (decoded in WebAssembly, which the CSP allows) and
        // iTerm's inline protocol (a 1x1 PNG) both reach the image store.
        browser
            .type_line(r"printf '\033Pq#0;2;100;0;0#0!20~-!20~\033\\'")
            .await;
        browser
            .until("the sixel stored", "tmuxEngine.image.storageUsage > 0")
            .await;
        let sixel = browser.eval("tmuxEngine.image.storageUsage").await;
        browser
            .type_line(&format!(
                r"printf '\033]1337;File=inline=1;size={}:{PNG}\007'",
                base64::engine::general_purpose::STANDARD
                    .decode(PNG)
                    .unwrap()
                    .len()
            ))
            .await;
        browser
            .until(
                "the inline image stored",
                &format!("tmuxEngine.image.storageUsage > {sixel}"),
            )
            .await;

        // A printed URL is a link: hovering shows it, clicking follows it.
        let link = "http://127.0.0.1:9/a-link";
        browser.type_line(&format!("echo {link}")).await;
        let line = browser.line(link).await;
        let (x, y) = cell(&mut browser, 5, line).await;
        // Moved until xterm.js shows the link (a move it handled before the
        // row was drawn finds none), wiggling a pixel so each is a move.
        let deadline = tokio::time::Instant::now() + super::WAIT;
        for wiggle in [0.0, 1.0].into_iter().cycle() {
            browser.mouse("mouseMoved", x + wiggle, y).await;
            if browser
                .eval("!!document.querySelector('.xterm-cursor-pointer')")
                .await
                == Value::Bool(true)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no link under the mouse"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        browser.mouse("mousePressed", x, y).await;
        browser.mouse("mouseReleased", x, y).await;
        browser
            .until("the link followed", &format!("tmuxEngine.lastLink === '{link}'"))
            .await;
        browser.screenshot("terminal.png").await;

        // The Options panel: a choice applies at once, is saved, and beats
        // the URL's from then on.
        browser
            .eval(
                "document.getElementById('settings').click();\
                 const size = document.getElementById('opt-fontSize');\
                 size.value = '20'; size.dispatchEvent(new Event('change'))",
            )
            .await;
        assert_eq!(
            browser
                .eval("[tmuxEngine.term.options.fontSize, pageOptions.source('fontSize'), location.search, JSON.parse(localStorage.getItem('tmux-engine.options')).fontSize]")
                .await,
            json!([20, "saved", "", 20])
        );

        // A reload reopens the terminal its fragment names.
        browser.eval("window.beforeReload = true").await;
        browser.call("Page.reload", json!({})).await;
        browser
            .until(
                "shell-1 reopened, its font size saved",
                "!window.beforeReload && tmuxEngine.name === 'shell-1' && tmuxEngine.term.options.fontSize === 20\
                 && tmuxEngine.socket?.readyState === 1 && document.body.classList.contains('opened')",
            )
            .await;
        browser.close().await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/shell-1"))
            .await;
    })
    .await;
}

/// Whether the browser has WebGL2 drawn by a GPU (not SwiftShader or
/// llvmpipe on the CPU, where the page keeps the DOM renderer).
const HARDWARE_WEBGL: &str = "(() => { const gl = document.createElement('canvas').getContext('webgl2');\
     if (!gl) return false; const i = gl.getExtension('WEBGL_debug_renderer_info');\
     const name = String(gl.getParameter(i ? i.UNMASKED_RENDERER_WEBGL : gl.RENDERER));\
     return !/swiftshader|llvmpipe|softpipe|software/i.test(name); })()";

#[tokio::test]
async fn with_a_software_gpu_the_dom_renderer_draws_the_terminal() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"gl","shell":"echo gl-$((3*4)); exec cat"}"#).await;
        let url = format!("{}/#code={}&t=gl", served.base, served.code);
        // SwiftShader: WebGL2 on the CPU, as a machine without a GPU driver
        // may have it.
        let mut browser = Browser::launch(&binary, &url, &["--enable-unsafe-swiftshader"]).await;
        browser
            .until("gl opened", "typeof tmuxEngine === 'object' && tmuxEngine.name === 'gl'")
            .await;
        browser.line("gl-12").await;
        let webgl = browser
            .eval("!!document.createElement('canvas').getContext('webgl2')")
            .await;
        let hardware = browser.eval(HARDWARE_WEBGL).await;
        let state = browser
            .eval("[tmuxEngine.renderer, !!tmuxEngine.term.element.querySelector('.xterm-screen canvas'), tmuxEngine.rendererError]")
            .await;
        eprintln!("webgl2 {webgl}, on a GPU {hardware}: {state}");
        if hardware == Value::Bool(true) {
            assert_eq!(state, json!(["webgl", true, null]));
        } else {
            // On the CPU the DOM renderer paints sooner (issue 49): it is
            // kept, and the page says why.
            assert_eq!(state[0], "dom", "{state}");
            if webgl == Value::Bool(true) {
                assert!(state[2].as_str().unwrap().contains("drawn on the CPU"), "{state}");
            }
        }
        browser.screenshot("webgl.png").await;
        browser.close().await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/gl"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn the_list_spawns_kills_restarts_and_clears_and_keys_do_what_they_say() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served
            .spawn(r#"{"name":"done","shell":"exit 4"}"#)
            .await;
        served
            .spawn(r#"{"name":"flaky","shell":"sleep 600","restart":"on-attach"}"#)
            .await;
        let mut browser = Browser::open(
            &binary,
            &format!("{}/#code={}", served.base, served.code),
        )
        .await;
        let item = |name: &str| format!("document.querySelector('#terminals li[data-name=\"{name}\"]')");
        let button = |label: &str| format!("document.querySelector('button[aria-label=\"{label}\"]')");
        browser
            .until(
                "done exited",
                &format!("{}?.dataset.status === 'exited' && {0}.textContent.includes('exited (code 4)')", item("done")),
            )
            .await;

        // Spawn with a name and a command line.
        browser
            .eval(
                "document.getElementById('more').click();\
                 document.getElementById('spawn-name').value = 'kitty';\
                 document.getElementById('spawn-command').value = 'cat -v';\
                 document.getElementById('spawn-go').click()",
            )
            .await;
        browser
            .until(
                "kitty opened",
                &format!("tmuxEngine.name === 'kitty' && tmuxEngine.socket?.readyState === 1 && {}?.dataset.status === 'running'", item("kitty")),
            )
            .await;
        // The page's own viewer shows in the entry's badge (the list is
        // refreshed once the attach's hello came).
        browser
            .until(
                "kitty's viewer badge",
                &format!("{}?.querySelector('.badge.viewers')?.textContent === '1 viewer'", item("kitty")),
            )
            .await;
        browser.until_focused().await;
        browser.type_line("first").await;
        browser.line("first").await;

        // Ctrl+C with text selected copies it; cat keeps running.
        browser.eval("tmuxEngine.term.selectAll()").await;
        browser.key("c", "KeyC", 67, 2).await;
        browser
            .until("the copy", "(tmuxEngine.lastCopy || '').includes('first')")
            .await;
        browser.type_line("still-here").await;
        browser.line("still-here").await;

        // On a narrow screen the key bar shows; its keys reach the program.
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 600, "height": 700, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        browser
            .until(
                "the key bar",
                "getComputedStyle(document.getElementById('keys')).display === 'flex'",
            )
            .await;
        browser
            .eval("document.querySelector('#keys [data-key=\"esc\"]').click()")
            .await;
        browser
            .eval("document.querySelector('#keys [data-key=\"up\"]').click()")
            .await;
        // Ctrl, then g: one ^G (BEL), and Ctrl is off again.
        browser
            .eval("document.querySelector('#keys [data-key=\"ctrl\"]').click()")
            .await;
        browser.type_line("gg").await;
        browser.line("^[^[[A^Gg").await;
        browser.screenshot("narrow.png").await;
        browser
            .call("Emulation.clearDeviceMetricsOverride", json!({}))
            .await;

        // Ctrl+C with nothing selected interrupts cat.
        browser.key("c", "KeyC", 67, 2).await;
        browser
            .until(
                "kitty exited",
                &format!("{}?.dataset.status === 'exited'", item("kitty")),
            )
            .await;

        // flaky dies; restarting it from the list recreates it.
        let (status, _) = served
            .post("/api/terminals/flaky/signal", r#"{"signal":"KILL"}"#)
            .await;
        assert_eq!(status, 200);
        browser
            .until(
                "flaky's restart button",
                &format!("!!{}", button("restart flaky")),
            )
            .await;
        browser.screenshot("list.png").await;
        browser.eval(&format!("{}.click()", button("restart flaky"))).await;
        browser
            .until(
                "flaky running again",
                &format!("tmuxEngine.name === 'flaky' && {}?.dataset.status === 'running'", item("flaky")),
            )
            .await;
        let (_, flaky) = served.get("/api/terminals/flaky").await;
        assert_eq!(
            (&flaky["status"]["kind"], &flaky["restarts"]),
            (&Value::from("running"), &Value::from(1)),
            "{flaky}"
        );

        // Rename from the list: the open terminal's name and address follow.
        browser
            .eval(&format!(
                "{}.click(); const field = document.querySelector('input.rename');\
                 field.value = 'flaky-2';\
                 field.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter'}}))",
                button("rename flaky")
            ))
            .await;
        browser
            .until(
                "flaky renamed",
                &format!(
                    "!!{} && !{} && tmuxEngine.name === 'flaky-2' && location.hash === '#t=flaky-2'",
                    item("flaky-2"),
                    item("flaky")
                ),
            )
            .await;
        assert_eq!(served.get("/api/terminals/flaky").await.0, 404);
        assert_eq!(served.get("/api/terminals/flaky-2").await.0, 200);

        // Kill asks first.
        browser.eval(&format!("{}.click()", button("kill flaky-2"))).await;
        browser
            .until("the confirm", &format!("!!{}", button("really kill flaky-2")))
            .await;
        assert_eq!(served.get("/api/terminals/flaky-2").await.0, 200);
        browser.eval(&format!("{}.click()", button("really kill flaky-2"))).await;
        browser
            .until(
                "flaky-2 gone and the welcome back",
                &format!("!{} && !document.body.classList.contains('opened')", item("flaky-2")),
            )
            .await;
        assert_eq!(served.get("/api/terminals/flaky-2").await.0, 404);

        // Clear exited: done and kitty go.
        browser.eval("document.getElementById('clear').click()").await;
        browser
            .until(
                "the list cleared",
                "document.querySelectorAll('#terminals li').length === 0",
            )
            .await;
        let (_, list) = served.get("/api/terminals").await;
        assert_eq!(list, json!([]));
        browser.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_read_only_token_sees_badges_and_no_actions() {
    let binary = chromium_required();
    within(async {
        let cli = crate::cli::Cli::new();
        let file = super::token_file(
            &cli,
            "writerwriterwrite alice\nlookerlookerlooke alice read-only\n",
        );
        let mut served = Served::start_with(cli, &["--token-file", &file], &[]).await;
        served.token = "writerwriterwrite".to_owned();
        served
            .spawn(r#"{"name":"watched","shell":"echo watched-$((5*5)); exec cat"}"#)
            .await;
        served.token = "lookerlookerlooke".to_owned();
        let code = served.sign_in_code("{}").await;
        let mut browser =
            Browser::open(&binary, &format!("{}/#code={code}&t=watched", served.base)).await;
        served.token = "writerwriterwrite".to_owned();
        browser
            .until(
                "watched opened read-only",
                "typeof tmuxEngine === 'object' && tmuxEngine.name === 'watched'\
                 && tmuxEngine.readOnly && !document.getElementById('badge').hidden",
            )
            .await;
        browser.line("watched-25").await;
        let shown = |id: &str| {
            format!("getComputedStyle(document.getElementById('{id}')).display !== 'none'")
        };
        assert_eq!(
            browser
                .eval(&format!(
                    "[{}, {}, !!document.querySelector('#terminals li .badge.ro'),\
                     getComputedStyle(document.querySelector('#terminals li .actions')).display]",
                    shown("new"),
                    shown("clear")
                ))
                .await,
            json!([false, false, true, "none"])
        );
        browser.screenshot("read-only.png").await;
        browser.close().await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/watched"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn page_options_are_checked_and_reach_the_page() {
    within(async {
        let cli = crate::cli::Cli::new();
        for (bad, says) in [
            ("colour=red", "unknown page option \"colour\""),
            ("fontSize=200", "expected an integer from 6 to 72"),
            ("theme", "expected KEY=VALUE"),
        ] {
            let output = cli.run(&["serve", "--listen", "127.0.0.1:0", "--page-option", bad]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{bad}");
            assert!(
                stderr.contains("INVALID_INPUT") && stderr.contains(says),
                "{bad}: {stderr}"
            );
        }
        let served = Served::start(&["--page-option", "theme=solarized"]).await;
        let page = reqwest::Client::new()
            .get(format!("{}/", served.base))
            .send()
            .await
            .unwrap();
        let csp = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval';") && !csp.contains("'unsafe-eval'"),
            "{csp}"
        );
        let body = page.text().await.unwrap();
        assert!(
            body.contains(r#"<meta name="tmux-engine-options" content="{&quot;theme&quot;:&quot;solarized&quot;}">"#),
            "{body}"
        );
        // Every vendored script and style sheet SHA256SUMS lists, and the
        // page's own scripts, are served
        // byte for byte (scripts/check verifies the sums themselves).
        let vendor = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/vendor");
        let sums = std::fs::read_to_string(vendor.join("SHA256SUMS")).unwrap();
        let listed: Vec<&str> = sums
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_whitespace().nth(1))
            .filter(|name| !name.starts_with("LICENSE"))
            .collect();
        assert_eq!(listed.len(), 8, "{sums}");
        // The page's own scripts, served as web/ holds them.
        const OWN: [&str; 5] = ["options.js", "keys.js", "app.js", "list.js", "signin.js"];
        for name in listed.into_iter().chain(OWN) {
            let response = served
                .request(reqwest::Method::GET, &format!("/assets/{name}"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{name}");
            let path = if OWN.contains(&name) {
                vendor.with_file_name(name)
            } else {
                vendor.join(name)
            };
            assert!(
                response.bytes().await.unwrap() == std::fs::read(&path).unwrap(),
                "{name} is not what {} holds",
                path.display()
            );
        }
    })
    .await;
}
