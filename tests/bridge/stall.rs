//! `serve --control-timeout`: how long tmux may take to answer before a
//! verb fails `UNRESPONSIVE`, a setting of serve's backend (it was the
//! library's `TmuxConfig::control_timeout` alone). A terminal whose tmux
//! server is stopped answers with the timeout serve was given, and works
//! again once tmux is continued.

use std::time::Duration;

use super::Served;
use crate::support::Stopped;

/// A send to a terminal whose tmux is stopped fails `UNRESPONSIVE` after
/// serve's `--control-timeout` (the error names it), the terminal is not
/// taken for gone, and it answers again once tmux is continued.
#[tokio::test]
async fn a_stopped_tmux_is_unresponsive_after_serves_control_timeout() {
    let served = Served::start(&["--control-timeout", "0.5"]).await;
    let snapshot = served.spawn(r#"{"name":"s"}"#).await;
    let id = snapshot["id"].as_str().unwrap().to_owned();
    let send = r#"{"text":"echo back-$((40+2))","submit":true}"#;
    // At its prompt first: the stall is then tmux's alone.
    let (status, answer) = served
        .post(&format!("/api/terminals/{id}/send"), r#"{"text":""}"#)
        .await;
    assert_eq!(status, 200, "{answer}");
    let server = served.server_pid(&id);
    {
        let _stopped = Stopped::new(server);
        let (status, answer) = served
            .post(&format!("/api/terminals/{id}/send"), send)
            .await;
        assert_eq!(
            answer["error"]["code"], "UNRESPONSIVE",
            "{status}: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("500ms"),
            "serve's timeout, not the default: {message}"
        );
    }
    // Continued: the same terminal answers (asked until it does: the
    // failed send's relink may still be under way).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, answer) = served
            .post(&format!("/api/terminals/{id}/send"), send)
            .await;
        if status == 200 && answer["output"] == "back-42\n" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status}: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listed = served.get("/api/terminals").await.1;
    assert_eq!(listed[0]["status"]["kind"], "running", "{listed}");
}
