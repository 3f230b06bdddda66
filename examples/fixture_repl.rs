//! Drives two real interactive programs found on a fresh Debian machine,
//! the way a test would: the Python REPL (type `1+1`, wait for `2`, Ctrl-D,
//! exit status) and bash line editing (`Up` recalls history).
//!
//! Run: `cargo run --example fixture_repl`. Exits non-zero on any failure.

use std::time::Duration;

use tmux_engine::fixture::Fixture;
use tmux_engine::vocab::ExitStatus;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Python: -q skips the banner; the screen model sees what a user sees.
    let py = Fixture::builder("python3")
        .arg("-q")
        .size(60, 10)
        .timeout(Duration::from_secs(10))
        .start()
        .await?;
    py.wait_for_text(">>> ").await?;
    py.send_text("1+1\r").await?;
    py.wait_for_regex(r"(?m)^2$").await?;
    println!("python:\n{}", py.snapshot());
    py.send_keys(&["C-d"]).await?;
    let exit = py.wait_for_exit().await?;
    assert_eq!(exit, ExitStatus::Code(0));
    println!("python {exit}");
    py.close().await?;

    // bash without rc files: run a command, recall it with Up, edit, run.
    let sh = Fixture::bash().size(60, 8).start().await?;
    sh.wait_for_text("$ ").await?;
    sh.send_text("echo hello").await?;
    sh.send_keys(&["Enter"]).await?;
    sh.wait_for_regex(r"(?m)^hello$").await?;
    sh.send_keys(&["Up"]).await?;
    sh.send_text(" again").await?;
    sh.send_keys(&["Enter"]).await?;
    sh.wait_for_regex(r"(?m)^hello again$").await?;
    sh.wait_for_stable(Duration::from_millis(100)).await?;
    println!("bash:\n{}", sh.snapshot());
    sh.send_text("exit 3\r").await?;
    assert_eq!(sh.wait_for_exit().await?, ExitStatus::Code(3));
    sh.close().await?;
    Ok(())
}
