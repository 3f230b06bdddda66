//! Viewers of an `always` terminal through real `serve` and WebSockets:
//! its tmux server SIGKILLed right after a viewer's hello, on a terminal
//! `serve` spawned and on one it adopted after a restart of `serve`.

use std::time::Duration;

use super::{Frame, Served, Ws};
use crate::support::within;

/// An `always` echo loop named `loop`.
const ECHO_LOOP: &str = r#"{"name":"loop","restart":"always","command":["/bin/sh","-c","echo run-$$; while read l; do echo got-$l; done"]}"#;

/// The terminal's tmux server pid, from its record (rewritten on rebuild).
fn server_pid(served: &Served, id: &str) -> u32 {
    let path = served
        .cli
        .state()
        .join("terminals")
        .join(format!("{id}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    u32::try_from(record["locator"]["server_pid"].as_u64().unwrap()).unwrap()
}

fn kill(pid: u32) {
    tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL).unwrap();
}

/// After the kill: a snapshot, then live bytes of the restarted program
/// (the echo of a keystroke, typed again while the server is rebuilt).
async fn sees_the_restart(ws: &mut Ws, round: u32) {
    let ping = format!("ping-{round}\r");
    let needle = format!("got-ping-{round}");
    let mut snapshots = 0;
    let mut repaint_next = false;
    let mut live = Vec::new();
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match tokio::time::timeout(Duration::from_millis(250), ws.next()).await {
                Err(_) => {
                    let _ = ws.try_input(ping.as_bytes()).await;
                }
                Ok(Frame::Text(frame)) if frame["type"] == "snapshot" => {
                    snapshots += 1;
                    repaint_next = true;
                    live.clear();
                }
                Ok(Frame::Text(_)) => {}
                // The repaint follows its snapshot frame; live bytes after.
                Ok(Frame::Binary(_)) if repaint_next => repaint_next = false,
                Ok(Frame::Binary(bytes)) => {
                    live.extend_from_slice(&bytes);
                    if snapshots > 0 && String::from_utf8_lossy(&live).contains(&needle) {
                        return;
                    }
                }
                Ok(Frame::Close(code)) => panic!("round {round}: closed with {code}"),
            }
        }
    })
    .await;
    assert!(
        seen.is_ok(),
        "round {round}: {snapshots} snapshots, then no {needle:?} in {:?}",
        String::from_utf8_lossy(&live)
    );
}

#[tokio::test]
async fn a_websocket_viewer_of_an_always_terminal_sees_its_restart_after_a_kill() {
    within(async {
        let served = Served::start(&[]).await;
        let id = served.spawn(ECHO_LOOP).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for round in 0..3 {
            let mut ws = served.ws("loop", "", None).await;
            assert_eq!(ws.text().await["type"], "hello");
            if round == 1 {
                // After the join's snapshot rather than before it.
                assert_eq!(ws.text().await["type"], "snapshot");
            }
            kill(server_pid(&served, &id));
            sees_the_restart(&mut ws, round).await;
            ws.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn an_adopted_always_terminal_restarts_for_its_viewer_after_a_serve_restart() {
    within(async {
        let mut first = Served::start(&[]).await;
        let id = first.spawn(ECHO_LOOP).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(first.terminate().await.success());
        let Served { cli, .. } = first;
        let served = Served::start_with(cli, &[], &[]).await;
        let mut ws = served.ws("loop", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        kill(server_pid(&served, &id));
        sees_the_restart(&mut ws, 0).await;
        ws.close().await;
    })
    .await;
}
