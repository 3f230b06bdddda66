//! The tracker over streams recorded from real bash, zsh and dash through
//! the engine (`fixtures/shell/`, made by `fixtures/shell/record.sh`),
//! fed whole and in chunks of every size, with no process.
//!
//! This file holds the helpers and the tests of one behaviour each; the
//! table of recorded shells, one row per recording, is `tracker_rows.rs`.

use std::time::{Duration, SystemTime};

use super::*;

#[path = "tracker_rows.rs"]
mod rows;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/shell/{name}.bytes", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Text as a terminal shows it, roughly: escape sequences dropped, a
/// carriage return or backspace moves back over the line, each line's
/// trailing blanks and the whole's blank ends trimmed.
fn plain(bytes: &[u8]) -> String {
    let mut lines = vec![Vec::new()];
    let mut column: usize = 0;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == 0x1b {
            let rest = &bytes[at..];
            let skip = rest[1..]
                .iter()
                .position(|&b| match rest.get(1) {
                    Some(b'[') => (0x40..=0x7e).contains(&b) && b != b'[',
                    Some(b']') => b == 0x07,
                    _ => true,
                })
                .map_or(rest.len(), |p| p + 2);
            at += skip;
            continue;
        }
        let line = lines.last_mut().expect("a line");
        match byte {
            b'\r' => column = 0,
            0x08 => column = column.saturating_sub(1),
            b'\n' => {
                lines.push(Vec::new());
                column = 0;
            }
            0x07 => {}
            _ => {
                if column < line.len() {
                    line[column] = byte;
                } else {
                    line.push(byte);
                }
                column += 1;
            }
        }
        at += 1;
    }
    let text: Vec<String> = lines
        .iter()
        .map(|line| String::from_utf8_lossy(line).trim_end().to_owned())
        .collect();
    text.join("\n").trim().to_owned()
}

/// Feeds `bytes` in chunks of `size` (a time a second apart each), saying
/// the typed text at the prompts `typed` names (a chunk also ends at each
/// prompt's end, as a send types only once it saw it).
fn run(bytes: &[u8], sh: bool, size: usize, typed: &[(usize, &str)]) -> Tracker {
    let mut tracker = Tracker::new(sh);
    let mut time = SystemTime::UNIX_EPOCH;
    let prompt_ends: Vec<usize> = bytes
        .windows(6)
        .enumerate()
        .filter(|(_, w)| *w == b"133;B\x07")
        .map(|(i, _)| i + 6)
        .collect();
    let mut cuts: Vec<usize> = (1..=bytes.len() / size).map(|n| n * size).collect();
    cuts.extend(&prompt_ends);
    cuts.push(bytes.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut at = 0;
    for cut in cuts {
        tracker.feed(&bytes[at..cut], at as u64, time);
        at = cut;
        time += Duration::from_secs(1);
        if let Some(prompt) = prompt_ends.iter().position(|&end| end == cut)
            && let Some((_, text)) = typed.iter().find(|(n, _)| *n == prompt)
        {
            tracker.typed(text.as_bytes());
        }
    }
    tracker
}

fn summary(tracker: &Tracker, bytes: &[u8]) -> Vec<(String, Option<i32>, bool, String)> {
    tracker
        .spans()
        .iter()
        .map(|span| {
            let end = span.end.unwrap_or(bytes.len() as u64);
            (
                plain(&span.echo.head),
                span.exit_code,
                span.running(),
                plain(&bytes[span.start as usize..end as usize]),
            )
        })
        .collect()
}

#[test]
fn exec_bash_is_lost_once_someone_sees_the_marks_stop_and_a_prompt_heals_it() {
    let bytes = fixture("bash-exec");
    let mut tracker = run(&bytes, false, 4096, &[]);
    assert_eq!(tracker.prompt(), Prompt::Running);
    tracker.stopped();
    assert_eq!(tracker.integration(true, true), ShellIntegration::Lost);
    // A whole prompt after it (the engine's rc sourced again).
    let at = bytes.len() as u64;
    let prompt = b"\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07";
    tracker.feed(prompt, at, SystemTime::UNIX_EPOCH);
    assert_eq!(tracker.integration(true, true), ShellIntegration::Active);
    // At a prompt, nobody can see the marks stop.
    tracker.stopped();
    assert_eq!(tracker.integration(true, true), ShellIntegration::Active);
}

#[test]
fn a_tracker_that_joins_mid_stream_knows_commands_from_its_first_byte() {
    let bytes = fixture("bash-several");
    // From inside the first command's output: its end counts as unknown.
    let from = bytes
        .windows(3)
        .position(|w| w == b"a\r\n")
        .expect("the first output");
    let mut tracker = Tracker::new(false);
    tracker.feed(&bytes[from..], from as u64, SystemTime::UNIX_EPOCH);
    assert_eq!(tracker.known_from(), from as u64);
    assert_eq!(tracker.unknown_ended(), 1);
    let texts: Vec<String> = tracker
        .spans()
        .iter()
        .map(|s| plain(&s.echo.head))
        .collect();
    assert_eq!(texts, ["echo one", "echo two", "false"]);
    assert_eq!(tracker.integration(false, true), ShellIntegration::Active);
    // Nothing marked yet, joined: unknown; from the first byte: never.
    let fresh = Tracker::new(false);
    assert_eq!(fresh.integration(false, true), ShellIntegration::Unknown);
    assert_eq!(
        fresh.integration(true, true),
        ShellIntegration::NeverStarted
    );
    assert_eq!(fresh.integration(true, false), ShellIntegration::Unknown);
}

#[test]
fn durations_come_from_arrival_times_and_skips_drop_half_read_marks() {
    let mut tracker = Tracker::new(false);
    let t = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let chunks: [&[u8]; 4] = [
        b"\x1b]133;A\x07$ \x1b]133;B\x07sleep 2\r\n\x1b]133;C\x07",
        b"zz",
        b"\x1b]133;D;0\x07\x1b]13",
        b"3;A\x07$ \x1b]133;B\x07",
    ];
    let mut at = 0;
    for (secs, chunk) in chunks.iter().enumerate() {
        tracker.feed(chunk, at, t(secs as u64 * 2));
        at += chunk.len() as u64;
    }
    let span = &tracker.spans()[0];
    assert_eq!(
        span.ended.unwrap().duration_since(span.started).unwrap(),
        Duration::from_secs(4)
    );
    assert_eq!(tracker.prompt(), Prompt::Reading { quiet: true });
    // A skip, then output mid-mark: what was cut is dropped, not misread.
    tracker.feed(b"\x1b]133;", at, t(9));
    tracker.feed(b"x\r\n", at + 100, t(10));
    assert_eq!(tracker.prompt(), Prompt::Unknown);
    assert_eq!(tracker.spans().len(), 1);
}

#[test]
fn durations_come_from_the_times_the_marks_carry_however_late_they_are_read() {
    // Read all at once, long after (a process that linked later): the
    // arrival time is one instant, the marks' own times are the command's.
    let late = SystemTime::UNIX_EPOCH + Duration::from_secs(5_000);
    let took = |bytes: &[u8]| {
        let mut tracker = Tracker::new(false);
        tracker.feed(bytes, 0, late);
        let span = &tracker.spans()[0];
        span.ended.unwrap().duration_since(span.started).unwrap()
    };
    // bash, zsh: `t=` on both marks.
    assert_eq!(
        took(
            b"\x1b]133;A\x07$ \x1b]133;B\x07sleep 2\r\n\x1b]133;C;t=1000.25\x07\
              \x1b]133;D;0;t=1002,75\x07\x1b]133;A\x07$ \x1b]133;B\x07"
        ),
        Duration::from_millis(2500)
    );
    // fish: the run time on its `D`.
    assert_eq!(
        took(b"\x1b]133;A\x07$ \x1b]133;B\x07sleep 2\r\n\x1b]133;C\x07\x1b]133;D;0;d=2017\x07"),
        Duration::from_millis(2017)
    );
    // No times: arrival, which for a late reader is nothing.
    assert_eq!(
        took(b"\x1b]133;A\x07$ \x1b]133;B\x07sleep 2\r\n\x1b]133;C\x07\x1b]133;D;0\x07"),
        Duration::ZERO
    );
}

#[test]
fn the_spans_kept_are_bounded() {
    let mut tracker = Tracker::new(false);
    let one = b"\x1b]133;A\x07$ \x1b]133;B\x07true\r\n\x1b]133;C\x07\x1b]133;D;0\x07";
    for n in 0..(MAX_SPANS + 5) as u64 {
        tracker.feed(one, n * one.len() as u64, SystemTime::UNIX_EPOCH);
    }
    assert_eq!(tracker.spans().len(), MAX_SPANS);
    let past_c = one
        .windows(8)
        .position(|w| w == b"\x1b]133;C\x07")
        .map(|at| at + 8);
    assert_eq!(
        Some(tracker.spans()[0].start),
        past_c.map(|at| 5 * one.len() as u64 + at as u64)
    );
}

#[test]
fn a_line_typed_where_no_mark_was_seen_starts_at_the_prompt() {
    // A stream that joined a running sh after its prompt was drawn: the
    // sender typed at the prompt it judged by the cursor.
    for (sh, echo) in [
        (true, &b" echo $((6*7))\r\n42\r\n"[..]),
        (false, &b" echo $((6*7))\r\n\x1b]133;C\x0742\r\n"[..]),
    ] {
        let mut tracker = Tracker::new(sh);
        tracker.typed(b" echo $((6*7))\r");
        let mut bytes = echo.to_vec();
        bytes.extend_from_slice(b"\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07");
        tracker.feed(&bytes, 0, SystemTime::UNIX_EPOCH);
        let got = summary(&tracker, &bytes);
        assert_eq!(
            got,
            [("echo $((6*7))".to_owned(), Some(0), false, "42".to_owned())],
            "sh: {sh}"
        );
        assert_eq!(tracker.unknown_ended(), 0);
    }
}
