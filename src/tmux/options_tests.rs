//! Server options: validation, the start argv, the config text.

use super::*;

#[test]
fn validates_options() {
    let cases: Vec<(ServerOptions, &str)> = vec![
        (
            ServerOptions {
                session: "a:b".into(),
                ..Default::default()
            },
            "name \"a:b\"",
        ),
        (
            ServerOptions {
                size: Size { cols: 0, rows: 24 },
                ..Default::default()
            },
            "size 0x24",
        ),
        (
            ServerOptions {
                size: Size {
                    cols: 80,
                    rows: crate::vocab::MAX_SIZE + 1,
                },
                ..Default::default()
            },
            "size 80x1001",
        ),
        (
            ServerOptions {
                history_limit: u32::MAX,
                ..Default::default()
            },
            "history limit",
        ),
        (
            ServerOptions {
                shell: Some("bash".into()),
                ..Default::default()
            },
            "shell bash",
        ),
        (
            ServerOptions {
                cwd: Some("/nonexistent/dir".into()),
                ..Default::default()
            },
            "cwd /nonexistent/dir",
        ),
        (
            ServerOptions {
                env: vec![("A=B".into(), "c".into())],
                ..Default::default()
            },
            "\"A=B\"",
        ),
        (
            ServerOptions {
                extra_config: vec!["set -g status on\nkill-server".into()],
                ..Default::default()
            },
            "line break",
        ),
    ];
    for (opts, want) in cases {
        let err = validate(&opts).expect_err(want);
        assert_eq!(err.code(), "INVALID_INPUT");
        assert!(err.to_string().contains(want), "{err} lacks {want}");
    }
    validate(&ServerOptions::default()).expect("defaults are valid");
}

#[test]
fn start_argv_quotes_for_argv() {
    let opts = ServerOptions {
        session: "s#1".into(),
        command: vec!["sh".into(), "-c".into(), "echo x;".into()],
        env: vec![("K".into(), "v;".into())],
        ..Default::default()
    };
    let argv = start_argv(&opts, "=s#1", StartMode::Report, None).expect("valid");
    let text: Vec<_> = argv.iter().map(|a| a.to_str().expect("utf8")).collect();
    assert_eq!(
        text,
        [
            "new-session",
            "-s",
            "s##1",
            "-x",
            "80",
            "-y",
            "24",
            "-P",
            "-F",
            START_FORMAT,
            "-e",
            r"K=v\;",
            "--",
            "sh",
            "-c",
            r"echo x\;",
            ";",
            "pipe-pane",
            "-o",
            "-t",
            "=s#1:",
            "--",
            DRAIN_PIPE,
            ";",
            "set-option",
            "-w",
            "-t",
            "=s#1:",
            "--",
            "window-size",
            "manual",
        ]
    );
}

#[test]
fn respawn_runs_what_new_session_ran() {
    let mut opts = ServerOptions {
        command: vec!["id>/tmp/p".into()],
        env: vec![("K".into(), "v;".into())],
        cwd: Some("/tmp".into()),
        ..Default::default()
    };
    let start = start_argv(&opts, "=main", StartMode::Quiet, None).expect("valid");
    // After `new-session -s main -x 80 -y 24`, up to the first `;`.
    let end = start.iter().position(|a| a == ";").expect("chained");
    let (respawn, drain) = respawn_commands(&opts, "%0").expect("valid");
    assert_eq!(&respawn.argv()[..4], ["respawn-pane", "-k", "-t", "%0"]);
    assert_eq!(&respawn.argv()[4..], &start[7..end]);
    let drain = drain.expect("the drain pipe is re-applied");
    assert_eq!(
        drain.argv(),
        ["pipe-pane", "-o", "-t", "%0", "--", DRAIN_PIPE]
    );
    opts.drain_on_exit = false;
    assert!(respawn_commands(&opts, "%0").expect("valid").1.is_none());
}

#[test]
fn exec_words_never_hand_one_word_to_a_shell() {
    let words = |argv: &[&str]| {
        exec_words(&argv.iter().map(OsString::from).collect::<Vec<_>>()).map(|w| {
            w.into_iter()
                .map(|w| w.into_string().expect("utf8"))
                .collect::<Vec<_>>()
        })
    };
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (&["id>/tmp/p"], &[ENV, "--", "id>/tmp/p"]),
        (&["-x"], &[ENV, "--", "-x"]),
        (&["A=B"], &[SH, "-c", EXEC_ARG0, "A=B"]),
        (&["sh", "-c", "x"], &["sh", "-c", "x"]),
        (&["a b", "c"], &["a b", "c"]),
    ];
    for (argv, want) in cases {
        assert_eq!(words(argv).expect("valid"), *want, "{argv:?}");
    }
    let err = words(&["-a=b"]).expect_err("ambiguous");
    assert_eq!(err.code(), "INVALID_INPUT");
    assert_eq!(shell_words(None, "a; b"), ["/bin/sh", "-c", "a; b"]);
}

#[test]
fn config_is_hermetic_and_quoted() {
    let opts = ServerOptions {
        shell: Some("/bin/my shell;x".into()),
        history_limit: 500,
        size: Size {
            cols: 100,
            rows: 30,
        },
        ..Default::default()
    };
    let text = config_text(&opts, false).expect("valid");
    for want in [
        "set -s @tmux-engine \"1\"\n",
        "set -g remain-on-exit on\n",
        "set -g history-limit 500\n",
        "set -g default-size \"100x30\"\n",
        "set -g default-shell \"/bin/my shell\\;x\"\n",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    assert!(
        !text.contains("set -g window-size"),
        "global manual size crashes tmux"
    );
    assert!(!text.contains("GLIBC_TUNABLES"), "{text}");
    // A server started with the allocator's settings keeps them from its
    // panes, before the caller's own lines.
    let tuned = config_text(&opts, true).expect("valid");
    assert!(
        tuned.contains("\nset-environment -gu GLIBC_TUNABLES\n"),
        "{tuned}"
    );
}
