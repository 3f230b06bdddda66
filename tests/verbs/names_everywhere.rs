//! Issue 14, items 8 and 11 (names): a name with the shape of a terminal
//! id, or with bidi controls or other invisible characters, is
//! `INVALID_INPUT` through the CLI and HTTP (MCP: `tests/mcp.rs`); lookups
//! take a target as an id before a name.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use crate::support::stub::StubBackend;
use serde_json::Value;
use tmux_engine::registry::{OwnerId, Registry, RegistryConfig, SpawnSpec};

use crate::bridge::Served;
use crate::cli::Cli;
use crate::support::within;

/// Names every face must refuse, the id-shaped one first (it is filled in
/// with a live terminal's id by each test).
fn bad_names(id: &str) -> Vec<String> {
    let mut names = vec![id.to_owned(), "t-1a2308edac7-b10a309c95b89d50".to_owned()];
    names.extend(
        [
            "evil\u{202E}txt",
            "\u{2066}x\u{2069}",
            "a\u{200B}b",
            "\u{FEFF}bom",
            "rtl\u{200F}",
            "ar\u{061C}",
            "zw\u{200D}j",
        ]
        .map(str::to_owned),
    );
    names
}

#[test]
fn the_cli_refuses_id_shaped_and_invisible_names() {
    let cli = Cli::new();
    let id = cli.ok(&["spawn", "--name", "real", "--", "sleep", "60"]);
    let id = id.trim();
    for name in bad_names(id) {
        let out = cli.run(&["spawn", "--name", &name, "--", "sleep", "60"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name:?}: {stderr}");
        assert!(
            stderr.starts_with("error: INVALID_INPUT: "),
            "{name:?}: {stderr}"
        );
    }
    // Only the one terminal, and the id still reaches it.
    let listed = cli.ok(&["list"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    cli.ok(&["kill", id]);
    assert_eq!(cli.ok(&["list"]), "");
}

#[tokio::test]
async fn http_refuses_id_shaped_and_invisible_names() {
    within(async {
        let served = Served::start(&[]).await;
        let real = served
            .spawn(r#"{"name":"real","command":["sleep","60"]}"#)
            .await;
        let id = real["id"].as_str().unwrap();
        for name in bad_names(id) {
            let body = serde_json::json!({"name": name, "command": ["sleep", "60"]});
            let (status, answer) = served.post("/api/terminals", &body.to_string()).await;
            assert_eq!(
                (status, &answer["error"]["code"]),
                (400, &Value::from("INVALID_INPUT")),
                "{name:?}: {answer}"
            );
        }
        let (_, list) = served.get("/api/terminals").await;
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        let (status, _) = served
            .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{id}")))
            .await;
        assert!((200..300).contains(&status), "{status}");
    })
    .await;
}

/// A record written before names of an id's shape were refused: its name
/// is another terminal's id. The id wins: a kill by id reaches the
/// terminal that has it, never the impostor.
#[tokio::test]
async fn a_lookup_takes_the_id_before_a_name() {
    let dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let backend = StubBackend::new();
    let owner = OwnerId::new("owner").unwrap();
    let (real, impostor) = {
        let registry = open(dir.path(), &backend).await;
        let real = registry
            .owner(&owner)
            .spawn(SpawnSpec::new().name("real"))
            .await
            .unwrap();
        let impostor = registry
            .owner(&owner)
            .spawn(SpawnSpec::new().name("impostor"))
            .await
            .unwrap();
        (real.id, impostor.id)
    };
    let record = dir.path().join(format!("terminals/{impostor}.json"));
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(rename(&mut json, real.as_str()), "no name in {json}");
    std::fs::write(&record, json.to_string()).unwrap();

    let registry = open(dir.path(), &backend).await;
    let shown = registry.owner(&owner).show(real.as_str()).await.unwrap();
    assert_eq!(shown.id, real, "the id resolved to the impostor");
    assert!(registry.owner(&owner).kill(real.as_str()).await.unwrap());
    let left: Vec<_> = registry
        .owner(&owner)
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|snapshot| snapshot.id)
        .collect();
    assert_eq!(left, std::slice::from_ref(&impostor));
    // The name still works once no id takes precedence.
    assert!(registry.owner(&owner).kill(real.as_str()).await.unwrap());
    assert!(registry.owner(&owner).list().await.unwrap().is_empty());
}

async fn open(dir: &Path, backend: &Arc<StubBackend>) -> Registry {
    let config = RegistryConfig::default().state_dir(dir);
    let (registry, report) = Registry::open_with(config, backend.clone()).await.unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
    registry
}

/// Sets every `"name": "impostor"` in a record to `to`.
fn rename(json: &mut Value, to: &str) -> bool {
    match json {
        Value::Object(map) => {
            let mut found = false;
            for (key, value) in map.iter_mut() {
                if key == "name" && value == "impostor" {
                    *value = Value::from(to);
                    found = true;
                } else {
                    found |= rename(value, to);
                }
            }
            found
        }
        Value::Array(items) => items
            .iter_mut()
            .map(|v| rename(v, to))
            .fold(false, |a, b| a | b),
        _ => false,
    }
}
