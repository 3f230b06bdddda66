//! A `serve` killed in the middle of spawns, started again: it reaps at
//! start, so every program still running belongs to a terminal it lists
//! (a spawn a crash cut short leaves a whole terminal or nothing), within
//! 10 s of the restart; and it prints its URL before it reaps, however
//! much a crash left to reap.

use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Served, WAIT};
use crate::support::within;

/// The pids of the processes whose command line is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

#[tokio::test]
async fn a_crash_in_the_middle_of_spawns_leaves_no_orphans_after_the_restart() {
    within(async {
        let marker = format!("{}", 900_000 + std::process::id() % 99_999);
        let argv = ["sleep", marker.as_str()];
        let served = Served::start(&["--pool", "0"]).await;
        let body = serde_json::json!({ "command": argv }).to_string();
        let spawns: Vec<_> = (0..10)
            .map(|_| {
                served
                    .request(reqwest::Method::POST, "/api/terminals")
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
            })
            .collect();
        let running = tokio::spawn(futures_util::future::join_all(spawns));
        // Cut the spawns short once some program runs (a tmux server and
        // its pane exist, most records not yet).
        crate::support::poll("a first program", WAIT, || async {
            (!processes(&argv).is_empty()).then_some(())
        })
        .await;
        let cli = served.crash().await;
        drop(running.await);
        let served = Served::start_with(cli, &["--pool", "0"], &[]).await;
        let restarted = tokio::time::Instant::now();
        // Polled to a deadline by hand, so a failure names what was left:
        // the programs running, and the terminals listed with their state.
        let deadline = tokio::time::Instant::now() + WAIT;
        let listed = loop {
            let (status, list) = served.get("/api/terminals").await;
            assert_eq!(status, 200, "{list}");
            let listed = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["status"]["kind"] == "running")
                .count();
            let programs = processes(&argv);
            if programs.len() == listed {
                break listed;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "orphans after {WAIT:?}: programs {programs:?}, terminals {list}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let took = restarted.elapsed();
        eprintln!("{listed} whole terminals, no orphan, {took:?} after the restart");
        let (_, list) = served.get("/api/terminals").await;
        for terminal in list.as_array().unwrap() {
            let id = terminal["id"].as_str().unwrap();
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{id}")))
                .await;
        }
    })
    .await;
}

/// What a crash left (servers whose records are gone) is reaped after
/// the URL is printed, never before: a reap may wait seconds on each
/// server (tmux 3.3a keeps one whose crashed engine's control client had
/// output queued until SIGKILL, docs/tmux-quirks.md), and a browser or
/// script waiting for the URL must not wait for it. Told by the order of
/// serve's own lines (stderr joined to stdout): the URL comes before the
/// first "reaped at start", and every leftover is reaped then.
#[tokio::test]
async fn serve_prints_its_url_before_it_reaps_what_a_crash_left() {
    within(async {
        const LEFT: usize = 4;
        let marker = format!("{}", 800_000 + std::process::id() % 99_999);
        let argv = ["sleep", marker.as_str()];
        let served = Served::start(&["--pool", "0"]).await;
        let body = serde_json::json!({ "command": argv }).to_string();
        for _ in 0..LEFT {
            let (status, answer) = served
                .call(
                    served
                        .request(reqwest::Method::POST, "/api/terminals")
                        .header("content-type", "application/json")
                        .body(body.clone()),
                )
                .await;
            assert_eq!(status, 201, "{answer}");
        }
        // A spawn answers once its pane exists; the program is exec'd by
        // the pane's wrapper after that, so it is waited for, not assumed.
        crate::support::poll("the programs to start", WAIT, || async {
            (processes(&argv).len() == LEFT).then_some(())
        })
        .await;
        let cli = served.crash().await;
        // Their records gone: servers a crash left with no record, as a
        // spawn cut short leaves them (stamped, spawn lock free).
        let records = cli.state().join("terminals");
        for record in std::fs::read_dir(&records).unwrap() {
            std::fs::remove_file(record.unwrap().path()).unwrap();
        }
        assert_eq!(processes(&argv).len(), LEFT);
        let serve = cli.command(&["serve", "--listen", "127.0.0.1:0", "--pool", "0"]);
        let mut joined = std::process::Command::new("sh");
        joined.args(["-c", "exec \"$@\" 2>&1", "sh"]);
        let mut command = tokio::process::Command::from(super::wrapped(joined, &serve));
        command
            .env("TMUX_ENGINE_LOG", "info")
            .env(
                "TMUX_ENGINE_TOKEN",
                format!("test{:028x}", super::rand_u128()),
            )
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut next = async || {
            tokio::time::timeout(WAIT, lines.next_line())
                .await
                .expect("serve printed nothing more")
                .unwrap()
                .expect("serve exited")
        };
        let mut before = Vec::new();
        loop {
            let line = next().await;
            if line.starts_with("http://") {
                break;
            }
            before.push(line);
        }
        assert!(
            !before.iter().any(|line| line.contains("reaped at start")),
            "reaped before the URL: {before:#?}"
        );
        let mut reaped = 0;
        while reaped < LEFT {
            if next().await.contains("reaped at start") {
                reaped += 1;
            }
        }
        crate::support::poll("the leftovers' programs to end", WAIT, || async {
            processes(&argv).is_empty().then_some(())
        })
        .await;
        drop(child);
    })
    .await;
}
