//! The tracker over streams recorded from real bash, zsh and dash through
//! the engine (`fixtures/shell/`, made by `fixtures/shell/record.sh`),
//! fed whole and in chunks of every size, with no process.

use std::time::{Duration, SystemTime};

use super::*;

/// What a row expects of one command: its line, exit code, whether it
/// runs, and its output (escape sequences and carriage returns dropped,
/// trimmed).
type Expected = (&'static str, Option<i32>, bool, &'static str);

struct Row {
    fixture: &'static str,
    /// Lines typed at the prompt in one write, as a send says them
    /// (sh only), by the index of the prompt (`B`) they were typed at.
    typed: &'static [(usize, &'static str)],
    commands: &'static [Expected],
    integration: ShellIntegration,
}

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

const ROWS: &[Row] = &[
    // Several commands in one send: `a; b` is one command; two lines are
    // two; `false`; an empty line is none.
    Row {
        fixture: "bash-several",
        typed: &[],
        commands: &[
            ("echo a; echo b", Some(0), false, "a\nb"),
            ("echo one", Some(0), false, "one"),
            ("echo two", Some(0), false, "two"),
            ("false", Some(1), false, ""),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-several",
        typed: &[],
        commands: &[
            ("echo a; echo b", Some(0), false, "a\nb"),
            ("echo one", Some(0), false, "one"),
            ("echo two", Some(0), false, "two"),
            ("false", Some(1), false, ""),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-several",
        typed: &[(1, " echo one\recho two\r")],
        commands: &[
            ("echo a; echo b", Some(0), false, "a\nb"),
            ("echo one", Some(0), false, "one"),
            ("echo two", Some(0), false, "two"),
            ("false", Some(1), false, ""),
        ],
        integration: ShellIntegration::Active,
    },
    // A heredoc is one command, its lines in its text.
    Row {
        fixture: "bash-heredoc",
        typed: &[],
        commands: &[
            (
                "cat <<EOF\n> hello\n> world\n> EOF",
                Some(0),
                false,
                "hello\nworld",
            ),
            ("echo after", Some(0), false, "after"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-heredoc",
        typed: &[],
        commands: &[
            (
                "cat <<EOF\nheredoc> hello\nheredoc> world\nheredoc> EOF",
                Some(0),
                false,
                "hello\nworld",
            ),
            ("echo after", Some(0), false, "after"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-heredoc",
        typed: &[(0, " cat <<EOF\rhello\rworld\rEOF\r")],
        commands: &[
            (
                "cat <<EOF\nhello\nworld\nEOF",
                Some(0),
                false,
                "hello\nworld",
            ),
            ("echo after", Some(0), false, "after"),
        ],
        integration: ShellIntegration::Active,
    },
    // Loops: one line, and one over several lines.
    Row {
        fixture: "bash-loop",
        typed: &[],
        commands: &[
            (
                "for i in 1 2 3; do echo n$i; done",
                Some(0),
                false,
                "n1\nn2\nn3",
            ),
            (
                "for i in x y\n> do\n> echo $i\n> done",
                Some(0),
                false,
                "x\ny",
            ),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-loop",
        typed: &[],
        commands: &[
            (
                "for i in 1 2 3; do echo n$i; done",
                Some(0),
                false,
                "n1\nn2\nn3",
            ),
            (
                "for i in x y\nfor> do\nfor> echo $i\nfor> done",
                Some(0),
                false,
                "x\ny",
            ),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-loop",
        typed: &[(1, " for i in x y\rdo\recho $i\rdone\r")],
        commands: &[
            (
                "for i in 1 2 3; do echo n$i; done",
                Some(0),
                false,
                "n1\nn2\nn3",
            ),
            ("for i in x y\ndo\necho $i\ndone", Some(0), false, "x\ny"),
        ],
        integration: ShellIntegration::Active,
    },
    // Typed while `sleep` ran: echoed in its output, read at the next
    // prompt. sh cannot tell that line's output from its echo (nobody
    // said it was typed ahead: see the module's notes).
    Row {
        fixture: "bash-type-ahead",
        typed: &[],
        commands: &[
            ("sleep 1", Some(0), false, "echo ahead"),
            ("echo ahead", Some(0), false, "ahead"),
            ("echo later", Some(0), false, "later"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-type-ahead",
        typed: &[],
        commands: &[
            ("sleep 1", Some(0), false, "echo ahead"),
            ("echo ahead", Some(0), false, "ahead"),
            ("echo later", Some(0), false, "later"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-type-ahead",
        typed: &[],
        commands: &[
            ("sleep 1", Some(0), false, "echo ahead"),
            ("ahead", Some(0), false, ""),
            ("echo later", Some(0), false, "later"),
        ],
        integration: ShellIntegration::Active,
    },
    // A reply to `read` is part of the command that reads it.
    Row {
        fixture: "bash-read",
        typed: &[],
        commands: &[
            ("read x; echo got=$x", Some(0), false, "hello\ngot=hello"),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-read",
        typed: &[],
        commands: &[
            ("read x; echo got=$x", Some(0), false, "hello\ngot=hello"),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-read",
        typed: &[],
        commands: &[
            ("read x; echo got=$x", Some(0), false, "hello\ngot=hello"),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    // A silent reply: nothing echoed.
    Row {
        fixture: "bash-read-s",
        typed: &[],
        commands: &[
            ("read -s y; echo len=${#y}", Some(0), false, "len=6"),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-read-s",
        typed: &[],
        commands: &[
            ("read -s y; echo len=${#y}", Some(0), false, "len=6"),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-read-s",
        typed: &[],
        commands: &[
            (
                "stty -echo; read y; stty echo; echo len=${#y}",
                Some(0),
                false,
                "len=6",
            ),
            ("echo next", Some(0), false, "next"),
        ],
        integration: ShellIntegration::Active,
    },
    // Ctrl-C at an empty prompt and on a half-typed line: no command;
    // Ctrl-C of a running `sleep`: a command that ended 130.
    Row {
        fixture: "bash-ctrl-c",
        typed: &[],
        commands: &[
            ("echo after", Some(0), false, "after"),
            ("sleep 5", Some(130), false, "^C"),
            ("echo end", Some(0), false, "end"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-ctrl-c",
        typed: &[],
        commands: &[
            ("echo after", Some(0), false, "after"),
            ("sleep 5", Some(130), false, "^C"),
            ("echo end", Some(0), false, "end"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-ctrl-c",
        typed: &[],
        commands: &[
            ("echo after", Some(0), false, "after"),
            ("sleep 5", Some(130), false, "^C"),
            ("echo end", Some(0), false, "end"),
        ],
        integration: ShellIntegration::Active,
    },
    // `PROMPT_COMMAND=` (bash), `precmd_functions=()` (zsh): the end
    // marks stop, `B` and `C` go on: lost; a command still running at the
    // next prompt's `B` ended there, its code unknown. sh's `PS1='$ '` drops every
    // mark: its last command seems to run on (nothing is out of order).
    Row {
        fixture: "bash-lost",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            ("PROMPT_COMMAND=", None, false, "root@vm:/#"),
            ("echo one", None, false, "one\nroot@vm:/#"),
            ("echo two", None, false, "two\nroot@vm:/#"),
        ],
        integration: ShellIntegration::Lost,
    },
    Row {
        fixture: "zsh-lost",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            ("precmd_functions=()", None, false, "vm#"),
            ("echo one", None, false, "one\nvm#"),
            ("echo two", None, false, "two\nvm#"),
        ],
        integration: ShellIntegration::Lost,
    },
    Row {
        fixture: "sh-lost",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            (
                "PS1='$ '",
                None,
                true,
                "$  echo one\none\n$  echo two\ntwo\n$",
            ),
        ],
        integration: ShellIntegration::Active,
    },
    // `exec bash` (no engine rc): `C`, then no mark ever. Only the shell
    // seen waiting at its terminal tells (`stopped`). dash's `exec dash`
    // keeps `ENV`, so the marks go on.
    Row {
        fixture: "bash-exec",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            (
                "exec bash",
                None,
                true,
                "root@vm:/# echo after\nafter\nroot@vm:/#",
            ),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "zsh-exec",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            ("exec zsh", None, true, "vm# echo after\nafter\nvm#"),
        ],
        integration: ShellIntegration::Active,
    },
    Row {
        fixture: "sh-exec",
        typed: &[],
        commands: &[
            ("echo before", Some(0), false, "before"),
            ("exec /usr/bin/dash", Some(0), false, ""),
            ("echo after", Some(0), false, "after"),
        ],
        integration: ShellIntegration::Active,
    },
];

fn check(row: &Row, size: usize) {
    let bytes = fixture(row.fixture);
    let sh = row.fixture.starts_with("sh-");
    let tracker = run(&bytes, sh, size, row.typed);
    let got = summary(&tracker, &bytes);
    let want: Vec<_> = row
        .commands
        .iter()
        .map(|&(text, code, running, output)| (text.to_owned(), code, running, output.to_owned()))
        .collect();
    assert_eq!(got, want, "{} in chunks of {size}", row.fixture);
    assert_eq!(
        tracker.integration(true, true),
        row.integration,
        "{} in chunks of {size}",
        row.fixture
    );
    assert_eq!(tracker.known_from(), 0);
}

macro_rules! rows {
    ($($name:ident: $index:expr;)*) => {$(
        #[test]
        fn $name() {
            let row = &ROWS[$index];
            for size in [1, 2, 3, 5, 7, 11, 64, 4096] {
                check(row, size);
            }
        }
    )*};
}

rows! {
    bash_several: 0; zsh_several: 1; sh_several: 2;
    bash_heredoc: 3; zsh_heredoc: 4; sh_heredoc: 5;
    bash_loop: 6; zsh_loop: 7; sh_loop: 8;
    bash_type_ahead: 9; zsh_type_ahead: 10; sh_type_ahead: 11;
    bash_read: 12; zsh_read: 13; sh_read: 14;
    bash_read_s: 15; zsh_read_s: 16; sh_read_s: 17;
    bash_ctrl_c: 18; zsh_ctrl_c: 19; sh_ctrl_c: 20;
    bash_lost: 21; zsh_lost: 22; sh_lost: 23;
    bash_exec: 24; zsh_exec: 25; sh_exec: 26;
}

#[test]
fn every_row_has_its_test() {
    assert_eq!(ROWS.len(), 27);
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
