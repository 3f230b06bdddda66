//! Issue 17's cursors through MCP: a send's cursors, `read since` paging
//! through an output far larger than one answer, and a cursor of an
//! earlier engine run answered as stale, not as other bytes.

use serde_json::{Value, json};

use super::{Mcp, shell};
use crate::cli::Cli;
use crate::support::within;

/// Reads from `cursor` on until nothing more is held; every line seen, and
/// the last answer.
async fn read_all(mcp: &Mcp, terminal: &str, mut cursor: String) -> (Vec<String>, Value) {
    let mut seen = Vec::new();
    loop {
        let args = json!({"terminal": terminal, "since": cursor});
        let answer = mcp.ok("terminal_read", args).await;
        assert!(answer.to_string().len() <= 64 * 1024);
        seen.extend(
            answer["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|line| line.as_str().unwrap().to_owned()),
        );
        cursor = answer["next_cursor"].as_str().unwrap().to_owned();
        if answer["more"] == false {
            return (seen, answer);
        }
    }
}

#[tokio::test]
async fn every_line_of_a_huge_output_is_reachable_by_cursor() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        shell(&mcp, "seq").await;
        let args = json!({"terminal": "seq", "text": "seq 1 200000", "submit": true});
        let sent = mcp.ok("terminal_send", args).await;
        assert_eq!(sent["truncated"], true);
        let start = sent["start_cursor"].as_str().unwrap().to_owned();
        let (seen, last) = read_all(&mcp, "seq", start).await;
        assert_eq!(last["gap"], Value::Null, "{last}");
        // Only the numbers (the echo of the command and the prompt
        // around them are output too), every one in order, no escapes.
        let numbers: Vec<&str> = seen
            .iter()
            .map(String::as_str)
            .filter(|line| line.bytes().all(|b| b.is_ascii_digit()) && !line.is_empty())
            .collect();
        assert_eq!(numbers.len(), 200_000);
        assert!(
            numbers
                .iter()
                .zip(1..)
                .all(|(line, n)| *line == n.to_string())
        );
        assert!(seen.iter().all(|line| !line.contains('\u{1b}')));
        // The send's own `cursor` is where its output ended: reading from
        // it gets only what came later.
        let after = mcp
            .ok(
                "terminal_read",
                json!({"terminal": "seq", "since": sent["cursor"], "format": "text"}),
            )
            .await;
        assert!(
            !after["text"].as_str().unwrap().contains("199999"),
            "{after}"
        );
        mcp.stop().await;
    })
    .await;
}

/// A terminal's stream is the host's, not a process's: a cursor an
/// earlier engine run handed out reads the same bytes in the next one;
/// only a cursor of another stream is stale.
#[tokio::test]
async fn a_cursor_of_an_earlier_engine_run_reads_on_in_the_next() {
    let cli = Cli::new();
    within(async {
        let first = Mcp::start(&cli).await;
        shell(&first, "keep").await;
        let args = json!({"terminal": "keep", "text": "echo one", "submit": true});
        let sent = first.ok("terminal_send", args).await;
        let cursor = sent["cursor"].as_str().unwrap().to_owned();
        let start = sent["start_cursor"].as_str().unwrap().to_owned();
        first.stop().await;

        let second = Mcp::start(&cli).await;
        let args = json!({"terminal": "keep", "text": "echo two", "submit": true});
        let again = second.ok("terminal_send", args).await;
        assert_eq!(
            again["cursor"].as_str().unwrap().split(':').next(),
            cursor.split(':').next(),
            "one epoch across engine runs: {again}"
        );
        let answer = second
            .ok(
                "terminal_read",
                json!({"terminal": "keep", "since": cursor, "format": "text"}),
            )
            .await;
        assert_eq!(answer["gap"], Value::Null, "{answer}");
        let text = answer["text"].as_str().unwrap();
        assert!(text.contains("two") && !text.contains("one"), "{answer}");
        // The first run's start cursor reads its own command's output.
        let answer = second
            .ok(
                "terminal_read",
                json!({"terminal": "keep", "since": start, "format": "text"}),
            )
            .await;
        assert_eq!(answer["gap"], Value::Null, "{answer}");
        assert!(
            answer["text"].as_str().unwrap().contains("one\n"),
            "{answer}"
        );
        // Another stream's cursor is stale, answered from the oldest byte.
        let answer = second
            .ok(
                "terminal_read",
                json!({"terminal": "keep", "since": "0000000000000001:0"}),
            )
            .await;
        assert_eq!(answer["gap"], "stale", "{answer}");
        assert!(answer["resumed_at"].is_string(), "{answer}");
        let bad = second
            .error(
                "terminal_read",
                json!({"terminal": "keep", "since": "nope"}),
            )
            .await;
        assert!(bad.starts_with("INVALID_INPUT: "), "{bad}");
        second
            .ok("terminal_kill", json!({"terminal": "keep"}))
            .await;
        second.stop().await;
    })
    .await;
}

/// Issue 25, item 6: a bounded answer keeps the head and the tail of the
/// output (a build's first error and its summary), says how many bytes
/// went between them, and `read since elided_from` reaches every one.
#[tokio::test]
async fn a_bounded_send_keeps_head_and_tail() {
    let cli = Cli::new();
    within(async {
        let mcp = Mcp::start(&cli).await;
        shell(&mcp, "long").await;
        let args = json!({"terminal": "long", "text": "seq 1 20000", "submit": true,
                          "max_bytes": 4096});
        let sent = mcp.ok("terminal_send", args).await;
        assert!(sent.to_string().len() <= 4096, "{}", sent.to_string().len());
        assert_eq!(sent["exit_code"], 0, "{sent}");
        assert_eq!(sent["truncated"], true);
        let output = sent["output"].as_str().unwrap();
        assert!(output.starts_with("1\n2\n3\n"), "{output}");
        assert!(output.ends_with("19999\n20000\n"), "{output}");
        let whole: usize = (1..=20_000).map(|n: u32| n.to_string().len() + 1).sum();
        let elided = usize::try_from(sent["elided_bytes"].as_u64().unwrap()).unwrap();
        assert_eq!(output.len() + elided, whole, "{sent}");
        // Every elided line, in order, from the cursor before them.
        let kept: Vec<&str> = output.lines().collect();
        let from = sent["elided_from"].as_str().unwrap().to_owned();
        assert!(sent["elided_to"].is_string(), "{sent}");
        let (seen, _) = read_all(&mcp, "long", from).await;
        let numbers: Vec<String> = (1..=20_000).map(|n: u32| n.to_string()).collect();
        let first = seen.iter().position(|line| line == "1").unwrap();
        assert_eq!(seen[first..first + 20_000], numbers[..]);
        // What was kept is a head and a tail of whole lines.
        let head = kept
            .iter()
            .zip(&numbers)
            .take_while(|(a, b)| **a == **b)
            .count();
        let tail = kept.len() - head;
        assert!(head > 100 && tail > 100, "{head} {tail}");
        assert_eq!(kept[head..], numbers[20_000 - tail..]);
        mcp.stop().await;
    })
    .await;
}
