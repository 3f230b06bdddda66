//! `rename`, the verb the page's list needed: one verb (`verbs::rename`)
//! reached from HTTP (`POST /api/terminals/{t}/rename`), the CLI (`rename T
//! NAME`) and MCP (`terminal_rename`), each a process of its own on one
//! state directory, so each sees the others' renames at its next scan.

use serde_json::json;

use super::Served;
use crate::mcp::Mcp;
use crate::support::within;

#[tokio::test]
async fn one_rename_verb_reaches_http_cli_and_mcp_across_processes() {
    within(async {
        let served = Served::start(&[]).await;
        for name in ["one", "two"] {
            served
                .spawn(&format!(r#"{{"name":"{name}","command":["sleep","600"]}}"#))
                .await;
        }

        // HTTP.
        let (status, renamed) = served
            .post("/api/terminals/one/rename", r#"{"name":"uno"}"#)
            .await;
        assert_eq!(
            (status, &renamed["name"]),
            (200, &json!("uno")),
            "{renamed}"
        );
        let id = renamed["id"].as_str().unwrap().to_owned();
        assert_eq!(served.get("/api/terminals/one").await.0, 404);
        assert_eq!(served.get("/api/terminals/uno").await.1["id"], id.as_str());
        for (body, status, code) in [
            (r#"{"name":"two"}"#, 409, "DUPLICATE_NAME"),
            (r#"{"name":"a:b"}"#, 400, "INVALID_INPUT"),
            (r#"{"name":""}"#, 400, "INVALID_INPUT"),
            (r#"{"name":"x","terminal":"two"}"#, 400, "INVALID_INPUT"),
            (r#"{"nom":"x"}"#, 400, "INVALID_INPUT"),
        ] {
            let (got, error) = served.post("/api/terminals/uno/rename", body).await;
            assert_eq!(
                (got, &error["error"]["code"]),
                (status, &json!(code)),
                "{body}: {error}"
            );
        }
        // Two renames to one name at once: one wins, one is refused.
        let (first, second) = tokio::join!(
            served.post("/api/terminals/uno/rename", r#"{"name":"same"}"#),
            served.post("/api/terminals/two/rename", r#"{"name":"same"}"#),
        );
        let mut statuses = [first.0, second.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{first:?} {second:?}");
        let back = if first.0 == 200 { "uno" } else { "two" };
        let (status, _) = served
            .post(
                "/api/terminals/same/rename",
                &format!(r#"{{"name":"{back}"}}"#),
            )
            .await;
        assert_eq!(status, 200);
        let (status, same) = served
            .post("/api/terminals/uno/rename", r#"{"name":"uno"}"#)
            .await;
        assert_eq!((status, &same["name"]), (200, &json!("uno")));

        // The CLI, another process: the name serve gave is the one it finds.
        let printed = served.cli.ok(&["rename", "uno", "eins"]);
        assert!(printed.starts_with(&format!("{id}\t")), "{printed}");
        let failed = served.cli.run(&["rename", "eins", "two"]);
        assert!(
            String::from_utf8_lossy(&failed.stderr).starts_with("error: DUPLICATE_NAME: "),
            "{failed:?}"
        );
        // serve sees it on its next scan (a lookup that misses is one).
        assert_eq!(served.get("/api/terminals/eins").await.1["id"], id.as_str());
        assert_eq!(served.get("/api/terminals/uno").await.0, 404);

        // MCP, a third process.
        let mcp = Mcp::start(&served.cli).await;
        let renamed = mcp
            .ok(
                "terminal_rename",
                json!({"terminal": "eins", "name": "ichi"}),
            )
            .await;
        assert_eq!(
            (&renamed["id"], &renamed["name"]),
            (&json!(id), &json!("ichi"))
        );
        let refused = mcp
            .error(
                "terminal_rename",
                json!({"terminal": "ichi", "name": "two"}),
            )
            .await;
        assert!(refused.contains("DUPLICATE_NAME"), "{refused}");
        let (_, listed) = served.get("/api/terminals").await;
        let names: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ichi", "two"]);
        assert!(served.cli.ok(&["list"]).contains("ichi"));
        for name in ["ichi", "two"] {
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{name}")))
                .await;
        }
    })
    .await;
}
