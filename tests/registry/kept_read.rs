//! `logs` could not read a kept history on a full disk: opening it
//! rewrote `meta.json`, the error was swallowed, and `logs` said the
//! terminal "keeps no history". Reading writes nothing now.

use crate::cli::Cli;

#[tokio::test]
async fn logs_reads_a_kept_history_on_a_full_disk() {
    crate::support::within(async {
        let cli = Cli::new();
        let state = cli.state();
        std::fs::create_dir_all(&state).unwrap();
        let _unmount = crate::support::full_disk(&state, "8m");
        cli.ok(&[
            "spawn",
            "--name",
            "kept",
            "--keep-history",
            "--",
            "sh",
            "-c",
            "read x; echo kept-line-$x; exec sleep 1000",
        ]);
        // Printed once the terminal's stream runs: output of a program's
        // first instant can miss a kept history (noted apart). A history
        // is written by the engine processes that hold the terminal (and
        // flushed as each ends): `wait` holds it until the line is out.
        cli.ok(&["send", "kept", "4677", "--submit", "--wait", "none"]);
        cli.ok(&[
            "wait",
            "kept",
            "--text",
            "kept-line-4677",
            "--since",
            "screen",
        ]);
        crate::support::poll(
            "the history on disk",
            std::time::Duration::from_secs(20),
            || async {
                let out = cli.run(&["logs", "kept"]);
                String::from_utf8_lossy(&out.stdout)
                    .contains("kept-line-4677")
                    .then_some(())
            },
        )
        .await;
        // Fill the disk.
        let mut file = std::fs::File::create(state.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
        drop(file);
        let out = cli.run(&["logs", "kept"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "logs on a full disk: {stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("kept-line-4677"),
            "{stderr}"
        );
        std::fs::remove_file(state.join("filler")).unwrap();
        cli.ok(&["kill", "kept"]);
    })
    .await;
}

/// A kept history was written by the engine processes holding the
/// terminal: nothing while none did (a spawn from the command line, then
/// output), and bytes lost whenever the writer fell a stream's ring
/// behind a flood on a loaded machine. The pane's relay writes it now,
/// reading every byte itself: a flood printed after the last command-line
/// call ended reaches `logs` whole and in order, no engine process
/// running meanwhile.
#[tokio::test]
async fn the_relay_keeps_every_byte_with_no_engine_running() {
    const LINES: u64 = 800_000;
    crate::support::within(async {
        let cli = Cli::new();
        cli.ok(&[
            "spawn",
            "--name",
            "flood",
            "--keep-history",
            "--",
            "sh",
            "-c",
            "read n; seq 1 $n; echo flood-done; exec sleep 1000",
        ]);
        cli.ok(&[
            "send",
            "flood",
            &LINES.to_string(),
            "--submit",
            "--wait",
            "none",
        ]);
        let logs = crate::support::poll(
            "the flood's end in the kept history",
            std::time::Duration::from_secs(60),
            || async {
                let out = cli.run(&["logs", "flood"]);
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.contains("flood-done").then_some(text)
            },
        )
        .await;
        let lines: Vec<&str> = logs.lines().map(str::trim_end).collect();
        let first = lines
            .iter()
            .position(|line| *line == "1")
            .expect("the flood's first line is kept");
        for (n, line) in (1..=LINES).zip(&lines[first..]) {
            assert_eq!(*line, n.to_string(), "line {n} of the flood");
        }
        assert_eq!(lines[first + LINES as usize], "flood-done");
        cli.ok(&["kill", "flood"]);
        assert!(
            !cli.state().join("history").join("flood").exists()
                || std::fs::read_dir(cli.state().join("history"))
                    .unwrap()
                    .next()
                    .is_none(),
            "a killed terminal's history is removed"
        );
    })
    .await;
}
