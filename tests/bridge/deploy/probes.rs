//! The scheduler's routes on the real binary: `/healthz` and `/readyz`
//! answer anyone on any `Host`, under the base path and beside it;
//! `/metrics` is behind the token, counts what the API did, and passes
//! `promtool check metrics` (Debian's `prometheus`, which
//! `scripts/install-deps` installs; without it the test fails).

use tokio::net::TcpStream;

use super::{Serve, exchange};
use crate::cli::Cli;
use crate::support::within;

async fn get(serve: &Serve, host: &str, path: &str, token: &str) -> super::Reply {
    let stream = TcpStream::connect(serve.addr()).await.unwrap();
    exchange(stream, "GET", host, path, token, None).await
}

#[tokio::test]
async fn probes_answer_anyone_and_metrics_need_the_token() {
    within(async {
        let cli = Cli::new();
        let serve = Serve::start(
            cli,
            &[
                "--listen",
                "127.0.0.1:0",
                "--base-path",
                "/t",
                "--pool",
                "1",
            ],
            &[],
        )
        .await;
        let token = serve.token();
        // A kubelet probes the pod's address, which no --allow-host names.
        for path in ["/healthz", "/readyz", "/t/healthz", "/t/readyz"] {
            let reply = get(&serve, "10.1.2.3:7681", path, "").await;
            assert_eq!(reply.status, 200, "{path}: {reply:?}");
            assert!(reply.head.contains("cache-control: no-store"), "{reply:?}");
        }
        assert_eq!(get(&serve, "10.1.2.3", "/healthz", "").await.body, "ok\n");
        assert_eq!(get(&serve, "10.1.2.3", "/readyz", "").await.body, "ready\n");
        // Metrics: not for anyone, nor under a foreign Host.
        let host = serve.addr();
        assert_eq!(get(&serve, &host, "/t/metrics", "").await.status, 401);
        assert_eq!(
            get(&serve, "10.1.2.3", "/t/metrics", &token).await.status,
            421
        );
        // Two spawns (one fails: a duplicate name) and a send.
        let api = |method: &'static str, path: &'static str, body: &'static str| {
            let (host, token) = (host.clone(), token.clone());
            let addr = serve.addr();
            async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                exchange(stream, method, &host, path, &token, Some(body)).await
            }
        };
        let spawned = api("POST", "/t/api/terminals", r#"{"name":"m"}"#).await;
        assert_eq!(spawned.status, 201, "{spawned:?}");
        let again = api("POST", "/t/api/terminals", r#"{"name":"m"}"#).await;
        assert_eq!(again.status, 409, "{again:?}");
        let sent = api("POST", "/t/api/terminals/m/send", r#"{"text":"echo hi"}"#).await;
        assert_eq!(sent.status, 200, "{sent:?}");
        let metrics = get(&serve, &host, "/t/metrics", &token).await;
        assert_eq!(metrics.status, 200, "{metrics:?}");
        assert!(
            metrics
                .head
                .contains("content-type: text/plain; version=0.0.4"),
            "{metrics:?}"
        );
        let text = metrics.body;
        for line in [
            "tmux_engine_terminals{status=\"running\"} 1",
            "tmux_engine_verb_calls_total{verb=\"spawn\",outcome=\"ok\"} 1",
            "tmux_engine_verb_calls_total{verb=\"spawn\",outcome=\"error\"} 1",
            "tmux_engine_verb_calls_total{verb=\"send\",outcome=\"ok\"} 1",
            "tmux_engine_verb_duration_seconds_count{verb=\"send\"} 1",
            "tmux_engine_viewers 0",
            "tmux_engine_ready 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // The pool served the spawn or missed it: either way it counted it.
        let pool = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(
            pool("tmux_engine_pool_hits_total") + pool("tmux_engine_pool_misses_total"),
            1,
            "{text}"
        );
        // No per-terminal or per-owner label anywhere.
        assert!(
            !text.contains("terminal=") && !text.contains("owner="),
            "{text}"
        );
        promtool(&text);
    })
    .await;
}

/// `promtool check metrics` on `text`: it reads stdin and lints names,
/// types, help and histogram shapes; any finding fails the test.
fn promtool(text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus; scripts/install-deps installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
