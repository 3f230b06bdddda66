//! Viewers of an `always` terminal through real `serve` and WebSockets:
//! its tmux server SIGKILLed right after a viewer's hello, on a terminal
//! `serve` spawned and on one it adopted after a restart of `serve`; and
//! one viewer typing into each of four restarts (respawned in place or
//! rebuilt, both transports), once, right after the new program showed.

use std::time::Duration;

use super::{Frame, Served, Ws};
use crate::support::within;

/// An `always` echo loop named `loop`.
const ECHO_LOOP: &str = r#"{"name":"loop","restart":"always","command":["/bin/sh","-c","echo run-$$; while read l; do echo got-$l; done"]}"#;

/// serve's flags here: restarts 0.05 s after a death instead of the
/// default 0.5 (doubled for each restart in a row), so four rounds of
/// restarts are not 7.5 s of backoff; what a viewer sees of a restart
/// does not hang on how long it waited.
const QUICK_RESTARTS: &[&str] = &["--restart-delay", "0.05"];

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
        let served = Served::start(QUICK_RESTARTS).await;
        let id = served.spawn(ECHO_LOOP).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for round in 0..3 {
            let mut ws = served.ws("loop", "", None).await;
            assert_eq!(ws.text().await["type"], "hello");
            if round == 1 {
                // After the join's snapshot rather than before it. The
                // last round's viewer may still count as typing (it typed
                // its ping under 2 s ago): that badge can come first.
                let first = loop {
                    let frame = ws.text().await;
                    if frame["type"] != "typing" {
                        break frame;
                    }
                };
                assert_eq!(first["type"], "snapshot", "{first}");
            }
            kill(served.server_pid(&id));
            sees_the_restart(&mut ws, round).await;
            ws.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn an_adopted_always_terminal_restarts_for_its_viewer_after_a_serve_restart() {
    within(async {
        let mut first = Served::start(QUICK_RESTARTS).await;
        let id = first.spawn(ECHO_LOOP).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(first.terminate().await.success());
        let Served { cli, .. } = first;
        let served = Served::start_with(cli, QUICK_RESTARTS, &[]).await;
        let mut ws = served.ws("loop", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        kill(served.server_pid(&id));
        sees_the_restart(&mut ws, 0).await;
        ws.close().await;
    })
    .await;
}

/// How a round ends the running program of an `always` terminal.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// SIGKILL to its tmux server: the terminal is rebuilt.
    Server,
    /// `tmux kill-server` on its socket: rebuilt too.
    Shutdown,
    /// SIGKILL to the program alone: the server lives, and the pane is
    /// respawned in place (the viewer gets `exit` first).
    Program,
}

/// Ends `id`'s program `how`; `run` is what it printed (`run-PID`).
fn end_program(served: &Served, id: &str, how: Kill, run: &str) {
    match how {
        Kill::Server => kill(served.server_pid(id)),
        Kill::Shutdown => {
            let path = served
                .cli
                .state()
                .join("terminals")
                .join(format!("{id}.json"));
            let record: serde_json::Value =
                serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let socket = record["locator"]["socket"].as_str().unwrap();
            let status = std::process::Command::new("tmux")
                .args(["-S", socket, "kill-server"])
                .status()
                .unwrap();
            assert!(status.success());
        }
        Kill::Program => kill(run.trim_start_matches("run-").parse().unwrap()),
    }
}

/// The last `run-PID` `bytes` show.
fn run_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let at = text.rfind("run-")?;
    let digits: String = text[at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("run-{digits}"))
}

/// One round after the kill: waits until a program other than `old` shows
/// on the viewer's screen (control: in a snapshot's repaint or the live
/// bytes after it; PTY: in tmux's redraw), types once, and waits for that
/// program's answer. Returns the program's `run-PID`.
async fn types_into_the_restart(ws: &mut Ws, old: &str, round: u32, pty: bool) -> String {
    // The PTY transport has no snapshots: tmux's client redraws.
    let mut repainted = pty;
    let mut fresh: Option<String> = None;
    // What the viewer shows since its last snapshot.
    let mut shown = Vec::new();
    let mut frames = Vec::new();
    let needle = format!("got-typed-{round}");
    let seen = tokio::time::timeout(super::WAIT, async {
        loop {
            let frame = ws.next().await;
            frames.push(format!("{frame:?}").chars().take(100).collect::<String>());
            match frame {
                Frame::Text(frame) if frame["type"] == "snapshot" => {
                    repainted = true;
                    shown.clear();
                }
                Frame::Text(_) => {}
                Frame::Binary(bytes) => {
                    shown.extend_from_slice(&bytes);
                    if fresh.is_some() {
                        // Live, or in a repaint that came after the typing
                        // (the respawn's resync may capture the answer).
                        if String::from_utf8_lossy(&shown).contains(&needle) {
                            return;
                        }
                    } else if repainted && let Some(run) = run_line(&shown).filter(|run| run != old)
                    {
                        // Typed once, as soon as the restarted program shows.
                        fresh = Some(run);
                        ws.input(format!("typed-{round}\r").as_bytes()).await;
                    }
                }
                Frame::Close(code) => panic!("round {round}: closed with {code}: {frames:#?}"),
            }
        }
    })
    .await;
    assert!(
        seen.is_ok(),
        "round {round}: no {needle:?} after {fresh:?} showed: {frames:#?}"
    );
    fresh.unwrap()
}

/// Four rounds on one viewer (`query`: its transport): the program is
/// ended `how`, and the viewer types into each restarted one.
async fn a_viewer_types_into_each_restart(how: Kill, query: &str) {
    let served = Served::start(QUICK_RESTARTS).await;
    let id = served.spawn(ECHO_LOOP).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pty = query == "transport=pty";
    let mut ws = served.ws("loop", query, None).await;
    assert_eq!(ws.text().await["type"], "hello");
    let mut shown = Vec::new();
    while run_line(&shown).is_none() {
        match ws.next().await {
            Frame::Text(frame) if frame["type"] == "snapshot" => shown.clear(),
            Frame::Binary(bytes) => shown.extend_from_slice(&bytes),
            other => panic!("before the first program showed: {other:?}"),
        }
    }
    let mut old = run_line(&shown).unwrap();
    for round in 0..4 {
        end_program(&served, &id, how, &old);
        old = types_into_the_restart(&mut ws, &old, round, pty).await;
    }
    ws.close().await;
}

#[tokio::test]
async fn a_viewer_types_into_the_program_respawned_in_place() {
    within(a_viewer_types_into_each_restart(Kill::Program, "")).await;
}

#[tokio::test]
async fn a_viewer_types_into_the_program_rebuilt_after_a_sigkill_of_its_server() {
    within(a_viewer_types_into_each_restart(Kill::Server, "")).await;
}

#[tokio::test]
async fn a_viewer_types_into_the_program_rebuilt_after_kill_server() {
    within(a_viewer_types_into_each_restart(Kill::Shutdown, "")).await;
}

#[tokio::test]
async fn a_pty_viewer_types_into_the_program_respawned_in_place() {
    within(a_viewer_types_into_each_restart(
        Kill::Program,
        "transport=pty",
    ))
    .await;
}
