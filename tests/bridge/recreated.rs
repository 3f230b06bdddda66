//! A program brought back by an attach is followed to its end as a
//! spawned one is: its exit status, the exit frame to its viewers, the
//! exit handshake's wrapper released. A real serve on 127.0.0.1 and a raw
//! WebSocket client, for a recreation by serve's own attach (either
//! transport) and for one by another process (the CLI's `probe`, as its
//! `attach`, `send` or mcp would): serve's watcher had seen the first
//! program's end and never looked again, so the second stayed `running`
//! in serve for ever and its viewer got no exit frame.

use std::path::Path;

use serde_json::{Value, json};

use super::{Frame, Served, WAIT, Ws};
use crate::support::within;

/// Reads frames until the exit frame; panics on a close before it.
async fn exit_frame(ws: &mut Ws) -> Value {
    loop {
        match ws.next().await {
            Frame::Text(value) if value["type"] == "exit" => return value,
            Frame::Close(code) => panic!("closed with {code} before an exit frame"),
            _ => {}
        }
    }
}

/// Polls REST until `job` is no longer running; its status.
async fn ended(served: &Served) -> Value {
    crate::support::poll("the job's end", WAIT, || async {
        let (_, shown) = served.get("/api/terminals/job").await;
        (shown["status"]["kind"] != "running").then(|| shown["status"].clone())
    })
    .await
}

/// Lets the job's program end with `code`: `go` appears whole (renamed
/// into place), never empty.
fn release(go: &Path, code: u8) {
    let next = go.with_extension("next");
    std::fs::write(&next, code.to_string()).unwrap();
    std::fs::rename(&next, go).unwrap();
}

/// Attaches to the dead job (brought back by now, or by this attach),
/// lets its program end and checks that serve followed it there.
async fn followed(served: &Served, query: &str, go: &Path, code: u8, round: &str) {
    let mut ws = served.ws("job", query, None).await;
    assert_eq!(ws.text().await["type"], "hello", "{round}");
    release(go, code);
    let exit = tokio::time::timeout(WAIT, exit_frame(&mut ws))
        .await
        .unwrap_or_else(|_| panic!("{round}: no exit frame"));
    assert_eq!(exit["status"]["kind"], "exited", "{round}: {exit}");
    assert_eq!(exit["status"]["exit"]["code"], code, "{round}: {exit}");
    // tmux marks the pane dead only once the wrapper is gone: an exit
    // status means the handshake let it go.
    let status = ended(served).await;
    assert_eq!(status["exit"]["code"], code, "{round}: {status}");
    ws.close().await;
}

#[tokio::test]
async fn a_program_brought_back_by_any_attach_is_followed_to_its_end() {
    within(async {
        let served = Served::start(&[]).await;
        let work = tempfile::tempdir().unwrap();
        let go = work.path().join("go");
        // Runs until `go` exists, then exits with the code it holds
        // (each program's own): an attach never races its end.
        let script = format!(
            "echo started; while [ ! -e {go} ]; do sleep 0.05; done; exit $(cat {go})",
            go = go.display()
        );
        release(&go, 3);
        served
            .spawn(
                &json!({"name": "job", "command": ["sh", "-c", script], "restart": "on-attach"})
                    .to_string(),
            )
            .await;
        let first = ended(&served).await;
        assert_eq!(first["exit"]["code"], 3, "{first}");
        // serve's own attach brings it back.
        std::fs::remove_file(&go).unwrap();
        followed(&served, "", &go, 4, "recreated by serve").await;
        // Another process brings it back while serve holds it.
        std::fs::remove_file(&go).unwrap();
        let probed = served.cli.run(&["--json", "probe", "job"]);
        assert!(
            probed.status.success(),
            "{}",
            String::from_utf8_lossy(&probed.stderr)
        );
        let probed: Value = serde_json::from_slice(&probed.stdout).unwrap();
        assert_eq!(probed["recreated"], true, "{probed}");
        followed(&served, "", &go, 5, "recreated by the CLI").await;
        // serve's pty transport brings it back.
        std::fs::remove_file(&go).unwrap();
        followed(
            &served,
            "transport=pty",
            &go,
            6,
            "recreated by a pty viewer",
        )
        .await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/job"))
            .await;
    })
    .await;
}
