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
