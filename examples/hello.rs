//! The library in one screen: start a shell, type, wait for what it
//! prints, read the screen, kill it. `cargo run --example hello`.
//!
//! This is the README's first library example, word for word.

use tmux_engine::Terminal;

#[tokio::main]
async fn main() -> tmux_engine::Result<()> {
    let t = Terminal::builder()
        .command(["bash", "--norc", "--noprofile"])
        .size(100, 30)
        .start()
        .await?;
    t.send_text("echo hi $((6*7))\r").await?;
    t.wait_for_text("hi 42").await?;
    let screen = t.screen().await?;
    println!("{}", screen.text());
    t.kill().await?;
    Ok(())
}
