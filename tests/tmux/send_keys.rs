//! `send_keys_hex` delivers arbitrary bytes to the pane's program exactly,
//! over a control connection and through `Server::run`.

use std::time::Duration;

use tmux_engine::tmux::{Server, send_keys_hex};

use crate::support::{Control, live, opts, poll, sh_c, start_server};

const WAIT: Duration = Duration::from_secs(30);

/// Every byte value, then a >16 KiB pseudo-random tail (xorshift, so the
/// test is reproducible).
fn payload() -> Vec<u8> {
    let mut data: Vec<u8> = (0..=255).collect();
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..(17 * 1024) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data.push(x.to_le_bytes()[0]);
    }
    data
}

/// A server whose pane copies its raw input to `out` and touches `ready`
/// once the tty is raw.
async fn cat_server(dir: &std::path::Path, name: &str) -> (Server, std::path::PathBuf) {
    let out = dir.join(format!("{name}.out"));
    let ready = dir.join(format!("{name}.ready"));
    let script = "stty raw -echo -iexten; touch \"$2\"; exec cat > \"$1\"";
    let command = sh_c(script, &[out.as_os_str(), ready.as_os_str()]);
    let server = start_server(opts(dir).command(command)).await;
    poll("the pane to be raw", WAIT, || async {
        ready.exists().then_some(())
    })
    .await;
    (server, out)
}

async fn wait_for_file(out: &std::path::Path, want: &[u8]) {
    let got = poll("all bytes to arrive", WAIT, || async {
        let got = std::fs::read(out).ok()?;
        (got.len() >= want.len()).then_some(got)
    })
    .await;
    assert_eq!(got.len(), want.len());
    let first_bad = got.iter().zip(want).position(|(a, b)| a != b);
    assert_eq!(first_bad, None, "bytes differ");
}

#[tokio::test]
async fn hex_keys_reach_the_program_exactly_over_control() {
    live(async |tmp| {
        let (server, out) = cat_server(tmp.path(), "control").await;
        let data = payload();
        let mut control = Control::attach(&server).await;
        for cmd in send_keys_hex(server.first_pane().id, &data, 0) {
            let block = control.cmd(cmd.line()).await;
            assert!(block.ok, "{}", block.text());
        }
        wait_for_file(&out, &data).await;
        control.close().await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn hex_keys_reach_the_program_exactly_via_cli() {
    live(async |tmp| {
        let (server, out) = cat_server(tmp.path(), "cli").await;
        let data = payload();
        for cmd in send_keys_hex(server.first_pane().id, &data, 4096) {
            server.run(&cmd).await.expect("send-keys");
        }
        wait_for_file(&out, &data).await;
        server.kill().await.expect("kill");
    })
    .await;
}
