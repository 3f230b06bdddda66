//! VHS's grammar as its own lexer and parser take it (issue 45): several
//! commands a line, trailing comments, `@speed` with no space; and tapes
//! that are hermetic and fail where they should: a shell that is not
//! installed, typing into a program that exited, a nested tmux that is
//! typed into and gone after the tape.

use super::{assert_passed, options, run};
use crate::support::live;

#[tokio::test]
async fn multi_command_lines_comments_and_speed_without_a_space() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "vhs.tape",
            "Set Shell sh # the shell\n\
             Type \"echo one\" Enter Wait+Screen /^one$/ # three commands\n\
             Type@.01'echo two' Enter\n\
             Wait+Screen /^two$/ Ctrl+C Sleep 10ms\n\
             Type \"echo \" \"three\" Enter Expect /^three$/\n",
        )
        .await;
        assert_passed(&r);
    })
    .await;
}

#[tokio::test]
async fn a_missing_shell_and_typing_into_an_exited_program_fail_at_their_line() {
    live(async |dir| {
        let r = run(dir.path(), "noshell.tape", "Type \"echo hi\"\n").await;
        assert_passed(&r);
        let r = run(
            dir.path(),
            "missing.tape",
            "# no such shell\nSet Shell tmux-engine-no-such-shell\nType \"echo hi\" Enter\n",
        )
        .await;
        let failure = r.failure.expect("a missing shell fails");
        assert_eq!(failure.at.map(|at| at.line), Some(2), "{}", failure.message);
        assert!(
            failure.message.contains("is not installed"),
            "{}",
            failure.message
        );
        let r = run(
            dir.path(),
            "exited.tape",
            "Set Shell sh\nType \"exit 0\" Enter\nExpect Exit 0\nType \"echo late\"\n",
        )
        .await;
        let failure = r.failure.expect("typing into an exited program fails");
        assert_eq!(failure.at.map(|at| at.line), Some(4), "{}", failure.message);
        assert!(
            failure.message.contains("exited with code 0"),
            "{}",
            failure.message
        );
    })
    .await;
}

#[tokio::test]
async fn a_nested_tmux_is_typed_into_and_gone_after_the_tape() {
    live(async |dir| {
        // `Set TypeAhead true` types without waiting for anything (so the
        // nested shell's prompt may come after the echo of the typed line,
        // before its output).
        let r = run(
            dir.path(),
            "nested.tape",
            "Set Shell sh\nSet TypeAhead true\n\
             Type \"echo $TMUX_TMPDIR > tmpdir.txt\" Enter\n\
             Type \"unset TMUX; exec tmux -f /dev/null new-session\" Enter\n\
             Wait+Screen /\\[0\\] 0:/\n\
             Type \"tmux display -p '#{socket_path}' > socket.txt; echo nested-$((6*7))\" Enter\n\
             Wait+Screen /nested-42$/\n",
        )
        .await;
        assert_passed(&r);
        let tmpdir = std::fs::read_to_string(dir.path().join("tmpdir.txt")).expect("tmpdir.txt");
        let socket = std::fs::read_to_string(dir.path().join("socket.txt")).expect("socket.txt");
        let (tmpdir, socket) = (tmpdir.trim(), socket.trim());
        let runtime = options(dir.path()).runtime_dir.expect("runtime dir");
        assert!(
            tmpdir.starts_with(runtime.to_str().expect("utf-8")),
            "{tmpdir}"
        );
        assert!(socket.starts_with(tmpdir), "{socket} is not under {tmpdir}");
        // The tape's end killed the nested server and removed its directory.
        assert!(!std::path::Path::new(tmpdir).exists(), "{tmpdir} is left");
        let alive = std::process::Command::new("tmux")
            .args(["-S", socket, "list-sessions"])
            .output()
            .expect("tmux");
        assert!(
            !alive.status.success(),
            "the nested server outlived the tape"
        );
    })
    .await;
}

#[tokio::test]
async fn a_nested_tmux_is_typed_into_without_typing_ahead() {
    live(async |dir| {
        // VHS's examples/split/split.tape in short: a tmux in the tape's
        // terminal, split, typed into, its prefix key, the other pane. Its
        // client never reads the terminal (its server does): input to it
        // is not waited for, and nothing needs `Set TypeAhead`.
        let r = run(
            dir.path(),
            "split.tape",
            "Set Shell sh\n\
             Type \"unset TMUX; exec tmux -f /dev/null new-session -- sh\" Enter\n\
             Wait+Screen /\\[0\\] 0:/\n\
             Type \"tmux split-window -d -h -- sh; echo left-$((6*7))\" Enter\n\
             Wait+Screen /left-42/\n\
             Ctrl+B\nType o\n\
             Type \"echo right-$((6*7))\" Enter\n\
             Wait+Screen /right-42/\n",
        )
        .await;
        assert_passed(&r);
    })
    .await;
}
