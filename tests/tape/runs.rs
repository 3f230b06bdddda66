//! Tapes that pass and fail: what the issue's "Done when" names.

use super::{assert_passed, options, run, write_tape};
use crate::support::{live, test_dir};
use tmux_engine::tape::{self, Tape};

#[tokio::test]
async fn a_shell_tape_types_waits_and_checks_its_exit() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "shell.tape",
            "# a shell session\nSet Shell sh\nType \"echo hello $((6*7))\"\nEnter\n\
             Wait+Screen /hello 42/\nExpect Line 2 /^hello 42$/\nExpect Line -1 /^$/\n\
             Wait Stable 100ms\nType \"exit 3\"\nEnter\nExpect Exit 3\n",
        )
        .await;
        assert_passed(&r);
    })
    .await;
}

#[tokio::test]
async fn a_python_repl_tape() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "python.tape",
            "Require python3\nSet Shell \"python3 -q\"\nWait />>> $/\nType \"6*7\"\nEnter\n\
             Expect /^42$/\nWait />>> $/\nCtrl+D\nExpect Exit 0\n",
        )
        .await;
        assert_passed(&r);
    })
    .await;
}

#[tokio::test]
async fn a_vim_tape_edits_and_writes_a_file() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "vim.tape",
            "Require vim\nSet Size 60x12\nSet Shell \"vim -u NONE -i NONE -N\"\n\
             Wait+Screen /^~/\nType \"ihello from vim\"\nEscape\n\
             Expect Line 1 /^hello from vim$/\nType \":wq! out.txt\"\nEnter\nExpect Exit 0\n",
        )
        .await;
        assert_passed(&r);
        let written = std::fs::read_to_string(dir.path().join("out.txt")).expect("vim wrote");
        assert_eq!(written, "hello from vim\n");
    })
    .await;
}

#[tokio::test]
async fn a_colour_check_passes_on_red_and_fails_on_green() {
    live(async |dir| {
        let body = "Set Shell sh\nType \"printf '\\033[1;31mERROR\\033[0m ok\\n'\"\nEnter\n";
        let red = run(
            dir.path(),
            "red.tape",
            &format!(
                "{body}Expect Style \"ERROR\" fg=red bold\nExpect Style \"ok\" fg=default no-bold\n"
            ),
        )
        .await;
        assert_passed(&red);
        let green = run(
            dir.path(),
            "green.tape",
            &format!("{body}Expect@300ms Style \"ERROR\" fg=green\n"),
        )
        .await;
        let f = green.failure.expect("green is not red");
        let text = f.to_string();
        assert!(
            text.starts_with(&format!("{}:4: ", dir.path().join("green.tape").display())),
            "{text}"
        );
        assert!(text.contains("is not drawn fg=green"), "{text}");
        assert!(
            text.contains("fg=red"),
            "the message shows how it is drawn: {text}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_failing_expectation_points_at_its_line_with_the_screen() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "fails.tape",
            "Set Shell sh\n\n# the greeting\nType \"echo hi there\"\nEnter\nWait+Screen /hi there/\n\
             Expect@300ms /goodbye/\nType \"echo never\"\n",
        )
        .await;
        let f = r.failure.expect("the expectation fails");
        let at = f.at.clone().expect("a location");
        assert_eq!((at.file.clone(), at.line), (dir.path().join("fails.tape"), 7));
        assert!(f.message.starts_with("Expect@300ms /goodbye/: /goodbye/ is not on the screen"), "{f}");
        let screen = f.screen.clone().expect("the screen");
        assert!(screen.contains("|hi there"), "{screen}");
        assert!(!f.to_string().contains("never"), "the tape stopped there: {f}");
    })
    .await;
}

#[tokio::test]
async fn a_golden_snapshot_is_written_compared_and_updated() {
    live(async |dir| {
        let tape = |word: &str| {
            format!("Set Shell sh\nSet Size 30x4\nSet WaitTimeout 1s\nType \"echo {word}\"\nEnter\nWait+Screen /^{word}$/\nSnapshot greeting\n")
        };
        let golden = dir.path().join("__snapshots__/greeting.txt");
        assert_passed(&run(dir.path(), "snap.tape", &tape("hello")).await);
        let first = std::fs::read_to_string(&golden).expect("written");
        assert!(first.contains("|hello"), "{first}");
        assert!(dir.path().join("__snapshots__/greeting.styled.txt").exists());
        // The same screen again: passes without writing.
        let again = run(dir.path(), "snap.tape", &tape("hello")).await;
        assert_passed(&again);
        assert!(again.notes.is_empty(), "{:?}", again.notes);
        // The screen changes: it fails with a diff and leaves the golden.
        let changed = run(dir.path(), "snap.tape", &tape("howdy")).await;
        let f = changed.failure.expect("a changed screen fails");
        assert_eq!(f.at.as_ref().map(|a| a.line), Some(7));
        assert!(f.message.contains("-") && f.message.contains("+ |howdy"), "{f}");
        assert_eq!(std::fs::read_to_string(&golden).expect("kept"), first);
        // --update accepts it.
        let path = write_tape(dir.path(), "snap.tape", &tape("howdy"));
        let mut opts = options(dir.path());
        opts.update = true;
        let updated = tape::run_files(&[path], &opts).await;
        assert_passed(&updated[0]);
        assert!(std::fs::read_to_string(&golden).expect("updated").contains("|howdy"));
        assert_passed(&run(dir.path(), "snap.tape", &tape("howdy")).await);
    })
    .await;
}

/// VHS's documented syntax, as its README writes a demo: settings it draws
/// with (accepted), `Output`, `Type`, `Sleep`, keys, `Hide`/`Show`,
/// `Screenshot`.
const VHS_DEMO: &str = r#"# Where should we write the GIF?
Output demo.gif
Output demo.txt

Require echo

# Set up a 1200x600 terminal with 46px font.
Set Shell "bash"
Set FontSize 46
Set Width 1200
Set Height 600
Set Theme "Dracula"
Set Padding 20
Set TypingSpeed 5ms
Set WindowBar Colorful
Set BorderRadius 10
Set CursorBlink false

Hide
Type "clear"
Enter
Show

# Type a command in the terminal.
Type "echo 'Welcome to VHS!'"

# Pause for dramatic effect...
Sleep 300ms

# Run the command by pressing enter.
Enter
Wait

Type "ech"
Backspace 3
Ctrl+L
Type@10ms "echo done"
Enter
Wait+Screen /^done/
Screenshot demo.png

# Admire the output for a bit.
Sleep 200ms
"#;

#[tokio::test]
async fn a_vhs_tape_runs_unchanged() {
    live(async |dir| {
        let r = run(dir.path(), "demo.tape", VHS_DEMO).await;
        assert_passed(&r);
        let txt = std::fs::read_to_string(dir.path().join("demo.txt")).expect("demo.txt");
        assert!(txt.contains("done"), "{txt}");
        let gif = std::fs::read(dir.path().join("demo.gif")).expect("demo.gif");
        let decoder = gif::DecodeOptions::new()
            .read_info(&gif[..])
            .expect("a GIF");
        assert!(
            decoder.width() <= 1200 && decoder.width() > 1000,
            "{}",
            decoder.width()
        );
        assert!(
            decoder.height() <= 600 && decoder.height() > 500,
            "{}",
            decoder.height()
        );
        assert!(dir.path().join("demo.png").exists());
    })
    .await;
}

#[test]
fn unsupported_commands_fail_naming_the_command_and_line() {
    let dir = test_dir();
    let path = write_tape(
        dir.path(),
        "odd.tape",
        "Output demo.gif\nSet FontSize 32\nSet WindowBar Colorful\nType \"ok\"\nSet Telepathy on\n",
    );
    let e = Tape::read(&path).expect_err("Set Telepathy");
    assert_eq!(e.code().as_str(), "UNSUPPORTED");
    assert!(e.to_string().contains("odd.tape:5: Set Telepathy"), "{e}");
    let path = write_tape(dir.path(), "mp4.tape", "Type \"x\"\nOutput demo.mp4\n");
    let e = Tape::read(&path).expect_err("mp4");
    assert!(e.to_string().contains("mp4.tape:2: Output"), "{e}");
    // `Source` keeps the sourced file's own lines, never their text (a
    // sourced file may be no tape at all: `Source /etc/shadow`).
    write_tape(dir.path(), "inner.tape", "Type \"x\"\n\nFly away\n");
    let path = write_tape(dir.path(), "outer.tape", "Source inner.tape\n");
    let e = Tape::read(&path).expect_err("inner");
    assert!(e.to_string().contains("inner.tape:3: "), "{e}");
    assert!(!e.to_string().contains("Fly"), "{e}");
    // The README's tape stays a tape.
    let demo = Tape::read(std::path::Path::new("docs/tapes/demo.tape")).expect("the demo parses");
    assert!(demo.step_count() > 10);
}

#[tokio::test]
async fn source_env_and_copy_paste() {
    live(async |dir| {
        write_tape(
            dir.path(),
            "setup.tape",
            "Set Shell sh\nEnv GREETING \"hi from env\"\n",
        );
        let r = run(
            dir.path(),
            "main.tape",
            "Source setup.tape\nType \"echo $GREETING\"\nEnter\nExpect /^hi from env$/\n\
             Copy \"echo pasted\"\nPaste\nEnter\nExpect /^pasted$/\n",
        )
        .await;
        assert_passed(&r);
    })
    .await;
}

#[tokio::test]
async fn tapes_run_in_parallel() {
    live(async |dir| {
        // Four tapes meet at a barrier: each marks its start, then waits
        // for all four marks. At -j 4 they all pass; run one after
        // another, the first would wait alone until its Expect gave up.
        let meet = dir.path().join("meet");
        std::fs::create_dir(&meet).expect("making the meeting directory");
        let paths: Vec<_> = (0..4)
            .map(|i| {
                let body = format!(
                    "Set Shell sh\n\
                     Type \"touch {m}/{i}; until [ $(ls {m} | wc -l) -eq 4 ]; do sleep 0.05; done; echo all-met\"\n\
                     Enter\nExpect /^all-met$/\n",
                    m = meet.display()
                );
                write_tape(dir.path(), &format!("p{i}.tape"), &body)
            })
            .collect();
        let results = tape::run_files(&paths, &options(dir.path())).await;
        results.iter().for_each(assert_passed);
        let met = std::fs::read_dir(&meet).expect("reading the meeting directory");
        assert_eq!(met.count(), 4);
    })
    .await;
}
