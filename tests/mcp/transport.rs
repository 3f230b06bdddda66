//! `mcp`'s stdio lines as a broken or hostile client writes them, by
//! hand (the SDK's client never sends them): a line that is not JSON is
//! answered `-32700`, JSON that is no message `-32600`, and 200,000
//! pipelined calls from a client that does not read its answers stop
//! being read after a few, instead of being taken in all at once.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::cli::Cli;
use crate::support::within;

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// An `mcp` child with raw pipes, initialized.
async fn raw_mcp(
    cli: &Cli,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    BufReader<tokio::process::ChildStdout>,
) {
    let mut child = tokio::process::Command::from(cli.command(&["mcp"]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"raw","version":"0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let answer = next(&mut stdout).await;
    assert_eq!(answer["id"], 0, "{answer}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    (child, stdin, stdout)
}

async fn next(stdout: &mut BufReader<tokio::process::ChildStdout>) -> Value {
    let mut line = String::new();
    tokio::time::timeout(crate::bridge::WAIT, stdout.read_line(&mut line))
        .await
        .expect("no answer in time")
        .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[tokio::test]
async fn input_that_is_not_json_is_answered_with_a_parse_error() {
    within(async {
        let cli = Cli::new();
        let (_child, mut stdin, mut stdout) = raw_mcp(&cli).await;
        stdin.write_all(b"this is not json\n").await.unwrap();
        let answer = next(&mut stdout).await;
        assert_eq!(answer["error"]["code"], -32700, "{answer}");
        assert!(answer.get("id").is_none_or(Value::is_null), "{answer}");
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":17}\n")
            .await
            .unwrap();
        let answer = next(&mut stdout).await;
        assert_eq!(
            (answer["error"]["code"].clone(), answer["id"].clone()),
            (json!(-32600), json!(5)),
            "{answer}"
        );
        // And the session goes on.
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let answer = next(&mut stdout).await;
        assert_eq!(answer["id"], 6, "{answer}");
    })
    .await;
}

#[tokio::test]
async fn pipelined_calls_are_read_only_as_fast_as_they_are_answered() {
    within(async {
        let cli = Cli::new();
        let (child, mut stdin, mut stdout) = raw_mcp(&cli).await;
        let pid = child.id().unwrap();
        let before = rss_kib(pid);
        // Six times what the pipes and mcp took in before stalling (3,232 seen):
        // enough to show the stall, cheap enough for a loaded debug build.
        const CALLS: usize = 20_000;
        let call = |id: usize| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let progress = written.clone();
        let writer = tokio::spawn(async move {
            for id in 1..=CALLS {
                stdin.write_all(call(id).as_bytes()).await.unwrap();
                progress.store(id, std::sync::atomic::Ordering::Relaxed);
            }
            stdin
        });
        // Nobody reads the answers: the writer must stall long before the
        // end (the pipes hold a few hundred calls), and mcp stay small.
        let mut last = 0;
        let mut still = 0;
        let deadline = tokio::time::Instant::now() + crate::bridge::WAIT;
        while still < 10 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = written.load(std::sync::atomic::Ordering::Relaxed);
            assert!(
                now < CALLS,
                "all {CALLS} calls were taken in without an answer read"
            );
            still = if now == last { still + 1 } else { 0 };
            last = now;
            assert!(
                tokio::time::Instant::now() < deadline,
                "the writer never stalled"
            );
        }
        let grown = rss_kib(pid).saturating_sub(before);
        eprintln!(
            "mcp: {last} of {CALLS} calls written before it stopped reading; RSS +{grown} KiB"
        );
        assert!(grown < 64 * 1024, "RSS grew {grown} KiB");
        // Reading the answers lets every call through, in bounded steps.
        let mut answered = 0;
        while answered < CALLS {
            let answer = next(&mut stdout).await;
            assert!(answer.get("result").is_some(), "{answer}");
            answered += 1;
        }
        let grown = rss_kib(pid).saturating_sub(before);
        eprintln!("mcp: all {CALLS} answered; RSS +{grown} KiB");
        assert!(grown < 64 * 1024, "RSS grew {grown} KiB");
        drop(writer.await.unwrap());
    })
    .await;
}
