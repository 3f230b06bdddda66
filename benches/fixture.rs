//! Fixture benchmarks, each against the raw tmux CLI in the same run:
//!
//! 1. latency from a program printing a marker to the wait seeing it:
//!    `wait_for_text` vs a `capture-pane` loop polling every 10 ms (the
//!    program stamps each marker with bash's `$EPOCHREALTIME`, so both
//!    sides measure print-to-resolve, not the send); once recording (the
//!    default) and once with `artifacts(false)`, for the recorder's cost;
//! 2. start-to-first-prompt and teardown of `/bin/sh`: `Fixture::sh()` +
//!    `close` vs `tmux new-session -d` + polling `capture-pane` +
//!    `tmux kill-server`;
//! 3. 50 fixtures at once: all pass, none leak (servers, pane processes,
//!    server directories checked by pid and path);
//! 4. the same print-to-resolve latency through pexpect's approach: the
//!    program on a pty of our own (`setsid -c`), its master read by a
//!    thread into a buffer that `expect` searches, no tmux at all;
//! 5. issue 19's four scenarios as a suite (a `python3 -q` REPL to its
//!    exit status, a colour check, a vim screen snapshot, text printed
//!    after a random 0-300 ms delay; run at once, as `cargo test` would),
//!    timed per round, quiet and with two `sh -c 'while :; do :; done'`
//!    loops, failures counted.
//!
//! Run: `cargo bench --bench fixture` (add `-- quick` for fewer samples).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tmux_engine::fixture::Fixture;
use tmux_engine::screen::Color;
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
        latency(&tmux, base.path(), if quick { 10 } else { 40 }, true).await;
        latency(&tmux, base.path(), if quick { 10 } else { 40 }, false).await;
        start_teardown(&tmux, base.path(), if quick { 5 } else { 15 }).await;
        parallel(&tmux, base.path(), 50).await;
    });
    pty_latency(if quick { 10 } else { 40 });
    rt.block_on(async {
        let rounds = if quick { 3 } else { 10 };
        suite(&tmux, base.path(), rounds, false).await;
        suite(&tmux, base.path(), rounds, true).await;
    });
}

/// pexpect's approach: the program on a pty, the master read directly.
fn pty_latency(n: usize) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::{Read, Write};
    use std::sync::{Condvar, Mutex};

    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("pts path"))
        .expect("open the pty");
    let stdio = |file: &std::fs::File| std::process::Stdio::from(file.try_clone().expect("dup"));
    let mut child = Command::new("setsid")
        .args(["-c", "bash", "--norc", "--noprofile", "-c", MARKER_LOOP])
        .stdin(stdio(&slave))
        .stdout(stdio(&slave))
        .stderr(stdio(&slave))
        .spawn()
        .expect("setsid bash");
    drop(slave);
    let mut writer = std::fs::File::from(master);
    let mut reader = writer.try_clone().expect("dup master");
    let seen = Arc::new((Mutex::new(Vec::<u8>::new()), Condvar::new()));
    let feed = seen.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(got @ 1..) = reader.read(&mut chunk) {
            let (buf, ready) = &*feed;
            buf.lock().expect("buffer").extend_from_slice(&chunk[..got]);
            ready.notify_all();
        }
    });
    // As pexpect's `expect`: wait until the buffer holds `want`, return
    // what it holds.
    let expect = |want: &str| -> String {
        let (buf, ready) = &*seen;
        let mut buf = buf.lock().expect("buffer");
        loop {
            let text = String::from_utf8_lossy(&buf).into_owned();
            if text.contains(want) {
                buf.clear();
                return text;
            }
            buf = ready.wait(buf).expect("buffer");
        }
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut samples = Vec::new();
    for i in 0..n {
        writer
            .write_all(format!("{i}\r").as_bytes())
            .expect("write");
        let text = expect(&format!("MARK{i} "));
        let resolved = now();
        // The stamp may still be on its way: read until the line ends.
        let text = if text.contains(&format!("MARK{i} "))
            && text.trim_end().ends_with(|c: char| c.is_ascii_digit())
            && text.ends_with('\n')
        {
            text
        } else {
            text + &expect("\n")
        };
        samples.push(Duration::from_secs_f64(
            (resolved - stamp(&text, i)).max(0.0),
        ));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "wait latency (print -> resolved), median of {n}: direct pty reader (pexpect's approach) {}",
        ms(median(samples))
    );
}

/// Two busy loops, killed when dropped.
struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    fn start() -> BusyLoops {
        BusyLoops(
            (0..2)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Issue 19's four scenarios, run at once per round (see the module docs).
async fn suite(tmux: &Arc<Tmux>, base: &Path, rounds: usize, loaded: bool) {
    let _busy = loaded.then(BusyLoops::start);
    let vim = which::which("vim").is_ok();
    let mut times = Vec::new();
    let mut failures = Vec::new();
    for round in 0..rounds {
        let t0 = Instant::now();
        let results = futures_util::future::join_all([
            tokio::spawn(python_repl(tmux.clone(), base.to_owned())),
            tokio::spawn(colour_check(tmux.clone(), base.to_owned())),
            tokio::spawn(vim_snapshot(tmux.clone(), base.to_owned(), vim)),
            tokio::spawn(random_delay(tmux.clone(), base.to_owned())),
        ])
        .await;
        times.push(t0.elapsed());
        for result in results {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("round {round}: {e}")),
                Err(e) => failures.push(format!("round {round}: panicked: {e}")),
            }
        }
    }
    println!(
        "four-scenario suite ({}), median of {rounds} rounds: {}; failed scenarios: {}{}{}",
        if loaded { "two busy loops" } else { "quiet" },
        ms(median(times)),
        failures.len(),
        if vim {
            ""
        } else {
            " (vim not installed: its scenario skipped)"
        },
        failures
            .iter()
            .map(|f| format!("\n  {f}"))
            .collect::<String>(),
    );
}

fn fixture(
    builder: tmux_engine::fixture::FixtureBuilder,
    tmux: Arc<Tmux>,
    base: &Path,
) -> tmux_engine::fixture::FixtureBuilder {
    builder.tmux(tmux).runtime_dir(base)
}

async fn python_repl(tmux: Arc<Tmux>, base: std::path::PathBuf) -> tmux_engine::Result<()> {
    let py = fixture(
        Fixture::builder("python3").arg("-q").size(60, 10),
        tmux,
        &base,
    )
    .start()
    .await?;
    py.wait_for_text(">>> ").await?;
    py.send_text("1+1\r").await?;
    py.wait_for_regex(r"(?m)^2$").await?;
    py.send_keys(&["C-d"]).await?;
    let status = py.wait_for_exit().await?;
    assert_eq!(status, ExitStatus::Code(0));
    py.close().await
}

async fn colour_check(tmux: Arc<Tmux>, base: std::path::PathBuf) -> tmux_engine::Result<()> {
    let fx = fixture(
        Fixture::script("printf '\\033[31merror\\033[0m: bad input\\n'; sleep 30"),
        tmux,
        &base,
    )
    .start()
    .await?;
    let screen = fx.wait_for_text("bad input").await?;
    assert!(screen.find("error").fg_is(Color::Indexed(1)));
    fx.close().await
}

async fn vim_snapshot(
    tmux: Arc<Tmux>,
    base: std::path::PathBuf,
    vim: bool,
) -> tmux_engine::Result<()> {
    if !vim {
        return Ok(());
    }
    let dir = tempfile::tempdir_in(&base).map_err(|e| tmux_engine::Error::io("vim dir", e))?;
    std::fs::write(dir.path().join("notes.txt"), "first line\nsecond line\n")
        .map_err(|e| tmux_engine::Error::io("vim file", e))?;
    let fx = fixture(
        Fixture::builder("vim")
            .args(["-u", "NONE", "-i", "NONE", "-N", "-n", "--noplugin"])
            .args(["-c", "set shortmess+=I laststatus=0 noruler", "notes.txt"])
            .cwd(dir.path())
            .size(40, 6),
        tmux,
        &base,
    )
    .start()
    .await?;
    fx.wait_for_text("\"notes.txt\" 2L").await?;
    fx.send_text("Gothird line\x1b").await?;
    fx.wait_for(|s| s.row(2) == Some("third line") && s.cursor().col == 9)
        .await?;
    assert_eq!(
        fx.snapshot(),
        "40x6 cursor 2:9 alternate\n |first line\n |second line\n>|third line\n |~\n |~\n |\n"
    );
    fx.send_text(":q!\r").await?;
    assert_eq!(fx.wait_for_exit().await?, ExitStatus::Code(0));
    fx.close().await
}

async fn random_delay(tmux: Arc<Tmux>, base: std::path::PathBuf) -> tmux_engine::Result<()> {
    let delay = getrandom::u64().map_or(150, |r| r % 300);
    let fx = fixture(
        Fixture::script(format!("sleep {:.3}; echo ready", delay as f64 / 1000.0)),
        tmux,
        &base,
    )
    .start()
    .await?;
    fx.wait_for_text("ready").await?;
    fx.wait_for_exit().await?;
    fx.close().await
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

async fn latency(tmux: &Arc<Tmux>, base: &Path, n: usize, record: bool) {
    let fx = Fixture::builder("bash")
        .args(["--norc", "--noprofile", "-c", MARKER_LOOP])
        .artifacts(record)
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
        "wait latency (print -> resolved), median of {n}: wait_for_text ({}) {}, capture-pane poll 10ms {}, {:.1}x faster",
        if record { "recording" } else { "artifacts off" },
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
