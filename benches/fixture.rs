//! Fixture benchmarks, each against the raw tmux CLI in the same run:
//!
//! 1. latency from a program printing a marker to the wait seeing it:
//!    `wait_for_text` vs a `capture-pane` loop polling every 10 ms (the
//!    program stamps each marker with bash's `$EPOCHREALTIME`, so both
//!    sides measure print-to-resolve, not the send);
//! 2. start-to-first-prompt and teardown of `/bin/sh`: `Fixture::sh()` +
//!    `close` vs `tmux new-session -d` + polling `capture-pane` +
//!    `tmux kill-server`;
//! 3. 50 fixtures at once: all pass, none leak (servers, pane processes,
//!    server directories checked by pid and path).
//!
//! Run: `cargo bench --bench fixture` (add `-- quick` for fewer samples).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tmux_engine::fixture::Fixture;
use tmux_engine::tmux::{Tmux, process, procfs};
use tmux_engine::vocab::ExitStatus;

use common::{median, ms, raw_session_args};

/// Prints `MARK<line> <time>` for every line it reads, without echo.
const MARKER_LOOP: &str =
    "stty -echo; while IFS= read -r l; do printf 'MARK%s %s\\n' \"$l\" \"$EPOCHREALTIME\"; done";

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmux = Arc::new(Tmux::discover().expect("tmux"));
    let base = tempfile::Builder::new()
        .prefix("tefb")
        .tempdir_in("/tmp")
        .expect("bench dir");
    rt.block_on(async {
        latency(&tmux, base.path(), if quick { 10 } else { 40 }).await;
        start_teardown(&tmux, base.path(), if quick { 5 } else { 15 }).await;
        parallel(&tmux, base.path(), 50).await;
    });
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// The stamp the program printed after `MARK<i> `.
fn stamp(text: &str, i: usize) -> f64 {
    let key = format!("MARK{i} ");
    let at = text.find(&key).expect("marker") + key.len();
    text[at..]
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("stamp")
}

fn tmux_cli(tmux: &Tmux, socket: &Path, args: &[&str]) -> std::process::Output {
    let mut argv = vec!["-S".to_owned(), socket.display().to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    tmux.command(argv).output().expect("tmux")
}

async fn latency(tmux: &Arc<Tmux>, base: &Path, n: usize) {
    let fx = Fixture::builder("bash")
        .args(["--norc", "--noprofile", "-c", MARKER_LOOP])
        .tmux(tmux.clone())
        .runtime_dir(base)
        .start()
        .await
        .expect("fixture");
    fx.wait_for_stable(Duration::from_millis(200))
        .await
        .expect("ready");

    let dir = tempfile::tempdir_in(base).expect("raw dir");
    let socket = dir.path().join("s");
    let out = tmux_cli(
        tmux,
        &socket,
        &raw_session_args(
            "/dev/null",
            &["bash", "--norc", "--noprofile", "-c", MARKER_LOOP],
        ),
    );
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(200));

    let (mut ours, mut polled) = (Vec::new(), Vec::new());
    for i in 0..n {
        // Ours: send, then wait on the screen model.
        fx.send_text(format!("{i}\r")).await.expect("send");
        let screen = fx
            .wait_for_text(&format!("MARK{i} "))
            .await
            .expect("marker");
        let resolved = now();
        ours.push(Duration::from_secs_f64(
            (resolved - stamp(&screen.text(), i)).max(0.0),
        ));

        // Theirs: send with the CLI, poll capture-pane every 10 ms.
        let key = i.to_string();
        let out = tmux_cli(
            tmux,
            &socket,
            &[
                "send-keys",
                "-t",
                "%0",
                "-l",
                &key,
                ";",
                "send-keys",
                "-t",
                "%0",
                "Enter",
            ],
        );
        assert!(out.status.success());
        let want = format!("MARK{i} ");
        loop {
            let out = tmux_cli(tmux, &socket, &["capture-pane", "-p", "-t", "%0"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.contains(&want) {
                let resolved = now();
                polled.push(Duration::from_secs_f64(
                    (resolved - stamp(&text, i)).max(0.0),
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let _ = tmux_cli(tmux, &socket, &["kill-server"]);
    fx.close().await.expect("close");
    let (a, b) = (median(ours), median(polled));
    println!(
        "wait latency (print -> resolved), median of {n}: wait_for_text {}, capture-pane poll 10ms {}, {:.1}x faster",
        ms(a),
        ms(b),
        b.as_secs_f64() / a.as_secs_f64().max(1e-9)
    );
}

async fn start_teardown(tmux: &Arc<Tmux>, base: &Path, n: usize) {
    let (mut fx_start, mut fx_stop, mut raw_start, mut raw_stop, mut raw_gone) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t0 = Instant::now();
        let fx = Fixture::sh()
            .tmux(tmux.clone())
            .runtime_dir(base)
            .start()
            .await
            .expect("fixture");
        fx.wait_for_text("$ ").await.expect("prompt");
        let t1 = Instant::now();
        fx.close().await.expect("close");
        fx_start.push(t1 - t0);
        fx_stop.push(t1.elapsed());

        let dir = tempfile::tempdir_in(base).expect("raw dir");
        let socket = dir.path().join("s");
        let t0 = Instant::now();
        let out = Command::new(tmux.path())
            .args(["-S"])
            .arg(&socket)
            .args(raw_session_args("/dev/null", &["/bin/sh", "-i"]))
            .env("PS1", "$ ")
            .output()
            .expect("tmux");
        assert!(out.status.success(), "{out:?}");
        loop {
            let out = tmux_cli(tmux, &socket, &["capture-pane", "-p", "-t", "%0"]);
            if String::from_utf8_lossy(&out.stdout).contains("$") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let t1 = Instant::now();
        let pid = String::from_utf8_lossy(
            &tmux_cli(tmux, &socket, &["display-message", "-p", "#{pid}"]).stdout,
        )
        .trim()
        .parse::<u32>()
        .expect("server pid");
        // Not timed: the fixture knows its pid already.
        let t1_kill = Instant::now();
        let _ = tmux_cli(tmux, &socket, &["kill-server"]);
        let returned = t1_kill.elapsed();
        // What the fixture's close also guarantees: the server is gone.
        tmux_engine::tmux::process::wait_dead(pid, Duration::from_secs(5)).await;
        raw_start.push(t1 - t0);
        raw_stop.push(returned);
        raw_gone.push(t1_kill.elapsed());
    }
    let (a, b, c, d) = (
        median(fx_start),
        median(raw_start),
        median(fx_stop),
        median(raw_stop),
    );
    println!(
        "start to first prompt, median of {n}: fixture {}, raw tmux CLI {} ({:.2}x)",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
    let gone = median(raw_gone);
    println!(
        "teardown, median of {n}: fixture close {} (every process gone, dirs removed); \
         raw kill-server returns {} ({:.2}x), raw until the server pid is gone {} ({:.2}x)",
        ms(c),
        ms(d),
        c.as_secs_f64() / d.as_secs_f64(),
        ms(gone),
        c.as_secs_f64() / gone.as_secs_f64()
    );
    println!(
        "start + teardown: fixture {}, raw {} ({:.2}x)",
        ms(a + c),
        ms(b + d),
        (a + c).as_secs_f64() / (b + d).as_secs_f64()
    );
}

async fn parallel(tmux: &Arc<Tmux>, base: &Path, n: usize) {
    let base = base.join("parallel");
    let t0 = Instant::now();
    let runs = (0..n).map(|i| {
        let tmux = tmux.clone();
        let base = base.clone();
        tokio::spawn(async move {
            let fx = Fixture::sh()
                .tmux(tmux)
                .runtime_dir(&base)
                .timeout(Duration::from_secs(120))
                .start()
                .await
                .expect("start");
            let started = (fx.server_pid(), fx.pane_pid());
            fx.wait_for_text("$ ").await.expect("prompt");
            fx.send_text(format!("echo ok-$((1000+{i}))\r"))
                .await
                .expect("send");
            fx.wait_for_regex(format!("(?m)^ok-{}$", 1000 + i).as_str())
                .await
                .expect("echo");
            fx.send_text(b"exit 7\r").await.expect("exit");
            assert_eq!(fx.wait_for_exit().await.expect("exit"), ExitStatus::Code(7));
            fx.close().await.expect("close");
            started
        })
    });
    let mut started = Vec::new();
    for run in futures_util::future::join_all(runs).await {
        started.push(run.expect("a fixture failed"));
    }
    let elapsed = t0.elapsed();
    let servers_alive = started
        .iter()
        .filter(|(s, _)| process::is_alive(*s))
        .count();
    let pane_procs: usize = started
        .iter()
        .map(|&(server, pane)| procfs::session_members(pane, server).len())
        .sum();
    let dirs_left = std::fs::read_dir(&base).map(|d| d.count()).unwrap_or(0);
    println!(
        "{n} fixtures in parallel: {} passed in {}; after: {servers_alive} servers alive, \
         {pane_procs} pane processes alive, {dirs_left} server dirs left",
        started.len(),
        ms(elapsed)
    );
}
