//! Issue 46, item 4: opening the WebSocket of a dead `on-attach`
//! terminal with a read-only token or a read-only share link re-ran its
//! program (a deploy, a migration). A read-only viewer now gets the dead
//! terminal's close (4404) with a note, and the program stays ended; the
//! owner's attach still recreates it.

use serde_json::{Value, json};

use super::{Served, WAIT, Ws, token_file};
use crate::cli::Cli;
use crate::support::within;

const RW: &str = "ro46-rw-token-0123456789";
const RO: &str = "ro46-ro-token-0123456789";

async fn attach(served: &Served, target: &str, secret: &str) -> Ws {
    let url = served.ws_url(target, "");
    let (socket, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async(super::ws_request(&url, secret)),
    )
    .await
    .unwrap()
    .unwrap();
    Ws::from(socket)
}

#[tokio::test]
async fn a_read_only_viewer_never_starts_a_dead_on_attach_program() {
    within(async {
        let cli = Cli::new();
        let tokens = token_file(&cli, &format!("{RW} tester\n{RO} tester read-only\n"));
        let mut served = Served::start_with(cli, &["--token-file", &tokens], &[]).await;
        served.token = RW.to_owned();
        let work = tempfile::tempdir().unwrap();
        let runs = work.path().join("runs");
        let script = format!("echo ran >> {}; exit 0", runs.display());
        served
            .spawn(
                &json!({"name": "job", "command": ["sh", "-c", script], "restart": "on-attach"})
                    .to_string(),
            )
            .await;
        let count = || {
            std::fs::read_to_string(&runs)
                .unwrap_or_default()
                .lines()
                .count()
        };
        crate::support::poll("the job's end", WAIT, || async {
            let (_, shown) = served.get("/api/terminals/job").await;
            (count() == 1 && shown["status"]["kind"] != "running").then_some(())
        })
        .await;
        // A read-only token, then a read-only share link.
        let (status, minted) = served
            .post(
                "/api/links",
                &json!({"terminal": "job", "read_only": true}).to_string(),
            )
            .await;
        assert_eq!(status, 201, "{minted}");
        let session: Value = reqwest::Client::new()
            .post(format!("{}/api/sign-in", served.base))
            .header("content-type", "application/json")
            .body(json!({"code": minted["code"]}).to_string())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let link = session["session"].as_str().unwrap().to_owned();
        for (who, secret) in [("read-only token", RO), ("read-only link", link.as_str())] {
            let mut ws = attach(&served, "job", secret).await;
            let code = ws.close_code().await;
            assert_eq!(code, 4404, "{who}");
            assert_eq!(count(), 1, "{who} started the program again");
            let (_, shown) = served.get("/api/terminals/job").await;
            assert_ne!(shown["status"]["kind"], "running", "{who}: {shown}");
        }
        // The owner's attach recreates it, as its policy says.
        let mut ws = attach(&served, "job", RW).await;
        assert_eq!(ws.text().await["type"], "hello");
        crate::support::poll("the owner's recreation", WAIT, || async {
            (count() == 2).then_some(())
        })
        .await;
        drop(ws);
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/job"))
            .await;
    })
    .await;
}
