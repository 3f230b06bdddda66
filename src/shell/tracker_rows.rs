//! The table of recorded shells: each row a stream recorded from real
//! bash, zsh or dash (`fixtures/shell/`) with the commands, exit codes and
//! outputs the tracker must find in it, whole and in chunks of every size.
//! Apart from the tests of one behaviour each (`tracker_tests.rs`) because
//! it is data: a recording added is a row and a line of `rows!`.

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
