//! The three faces agree because they share the verb layer: the same
//! invalid and edge inputs fed to the CLI (the real binary, `--json`), the
//! HTTP API (a real `serve` on 127.0.0.1) and the MCP tools (the real
//! `mcp` over stdio) give the same outcome and the same error code.
#![allow(clippy::unwrap_used)]

use reqwest::Method;
use serde_json::{Value, json};

use crate::bridge::Served;
use crate::cli::Cli;
use crate::mcp::{Mcp, text};
use crate::support::within;

/// One face, reached as its users reach it.
enum Face<'a> {
    Cli(&'a Cli),
    Http(&'a Served),
    Mcp(&'a Mcp),
}

/// A verb's outcome: its answer, or its error code.
type Outcome = Result<Value, String>;

impl Face<'_> {
    fn name(&self) -> &'static str {
        match self {
            Face::Cli(_) => "cli",
            Face::Http(_) => "http",
            Face::Mcp(_) => "mcp",
        }
    }

    /// Runs `verb` with the face-neutral `args` (the MCP tool's arguments,
    /// which the other faces spell their own way).
    async fn call(&self, verb: &str, args: &Value) -> Outcome {
        match self {
            Face::Cli(cli) => cli_call(cli, verb, args).await,
            Face::Http(served) => http_call(served, verb, args).await,
            Face::Mcp(mcp) => {
                let result = mcp.call(&format!("terminal_{verb}"), args.clone()).await;
                let body = text(&result);
                if result.is_error == Some(true) {
                    Err(body.split(": ").next().unwrap().to_owned())
                } else {
                    Ok(serde_json::from_str(&body).unwrap())
                }
            }
        }
    }
}

fn field<'a>(args: &'a Value, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|value| !value.is_null())
}

async fn cli_call(cli: &Cli, verb: &str, args: &Value) -> Outcome {
    let mut argv: Vec<String> = vec![verb.to_owned(), "--json".to_owned()];
    let word = |value: &Value| {
        value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned)
    };
    match verb {
        "spawn" => {
            for flag in ["name", "cwd", "shell", "history_limit"] {
                if let Some(value) = field(args, flag) {
                    argv.extend([format!("--{}", flag.replace('_', "-")), word(value)]);
                }
            }
            // The CLI spells a size COLSxROWS: one of the two is "COLS".
            let size: Vec<String> = ["cols", "rows"]
                .iter()
                .filter_map(|key| field(args, key).map(word))
                .collect();
            if !size.is_empty() {
                argv.extend(["--size".to_owned(), size.join("x")]);
            }
            if let Some(command) = field(args, "command") {
                argv.push("--".to_owned());
                argv.extend(command.as_array().unwrap().iter().map(word));
            }
        }
        "signal" => argv.extend([word(&args["terminal"]), word(&args["signal"])]),
        "read" => {
            argv.push(word(&args["terminal"]));
            for key in ["count", "max_bytes", "max_lines"] {
                if let Some(value) = field(args, key) {
                    argv.extend([format!("--{}", key.replace('_', "-")), word(value)]);
                }
            }
        }
        "kill" => argv.push(word(&args["terminal"])),
        "send" => {
            argv.push(word(&args["terminal"]));
            for key in field(args, "keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                argv.extend(["--key".to_owned(), word(key)]);
            }
        }
        "search" => argv.push(word(&args["regex"])),
        "list" => {}
        other => panic!("no CLI spelling for {other}"),
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut command = cli.command(&argv);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    if output.status.success() {
        Ok(serde_json::from_slice(&output.stdout).unwrap())
    } else {
        let error: Value = serde_json::from_slice(&output.stderr)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
        Err(error["error"]["code"].as_str().unwrap().to_owned())
    }
}

async fn http_call(served: &Served, verb: &str, args: &Value) -> Outcome {
    let terminal = args["terminal"].as_str().unwrap_or("");
    let mut body = args.clone();
    if let Some(fields) = body.as_object_mut() {
        fields.remove("terminal");
    }
    let (method, path, body) = match verb {
        "spawn" => (Method::POST, "/api/terminals".to_owned(), Some(body)),
        "list" => (Method::GET, "/api/terminals".to_owned(), None),
        "search" => {
            let regex = args["regex"].as_str().unwrap().replace('(', "%28");
            (Method::GET, format!("/api/search?regex={regex}"), None)
        }
        "kill" => (Method::DELETE, format!("/api/terminals/{terminal}"), None),
        "send" => (
            Method::POST,
            format!("/api/terminals/{terminal}/send"),
            Some(body),
        ),
        "signal" => (
            Method::POST,
            format!("/api/terminals/{terminal}/signal"),
            Some(body),
        ),
        "read" => {
            let query: Vec<String> = ["count", "max_bytes", "max_lines"]
                .iter()
                .filter_map(|key| field(args, key).map(|n| format!("{key}={n}")))
                .collect();
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            };
            (
                Method::GET,
                format!("/api/terminals/{terminal}/scrollback{query}"),
                None,
            )
        }
        other => panic!("no HTTP route for {other}"),
    };
    let mut request = served.request(method, &path);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let (status, answer) = served.call(request).await;
    if (200..300).contains(&status) {
        Ok(answer)
    } else {
        Err(answer["error"]["code"].as_str().unwrap().to_owned())
    }
}

/// The inputs every face refuses, with the code each must give.
fn refused() -> Vec<(&'static str, Value)> {
    vec![
        // A directory that exists where every face runs: only the rule
        // refuses it.
        ("spawn", json!({"cwd": "."})),
        ("spawn", json!({"cols": 100})),
        ("spawn", json!({"rows": 30})),
        ("spawn", json!({"command": [""]})),
        ("spawn", json!({"shell": ""})),
        ("spawn", json!({"name": "t-1a2308edac7-b10a309c95b89d50"})),
        ("spawn", json!({"cols": 0, "rows": 30})),
        ("signal", json!({"terminal": "nope", "signal": "NOPE"})),
        ("read", json!({"terminal": "nope", "count": 10_001})),
        // Issue 17's bounds: the whole answer's, checked before any lookup.
        ("read", json!({"terminal": "nope", "max_bytes": 10})),
        ("read", json!({"terminal": "nope", "max_bytes": 65_537})),
        ("read", json!({"terminal": "nope", "max_lines": 0})),
        ("search", json!({"regex": "("})),
        ("spawn", json!({"history_limit": 1_000_001})),
        // An empty key is refused on every face, before any lookup (a
        // word that names no key is judged by what is in front: issue 44).
        ("send", json!({"terminal": "nope", "keys": ["Escape", ""]})),
    ]
}

/// Runs every case on `face` and returns what came out, in order.
async fn outcomes(face: &Face<'_>) -> Vec<(String, Outcome)> {
    let mut seen = Vec::new();
    for (verb, args) in refused() {
        seen.push((format!("{verb} {args}"), face.call(verb, &args).await));
    }
    // Nothing was spawned by the refusals.
    let list = face.call("list", &json!({})).await.unwrap();
    assert_eq!(list, json!([]), "{}", face.name());
    // The edges that pass: a size given whole, a count at the bound.
    let spawn = json!({"name": "edge", "command": ["sleep", "60"], "cols": 100, "rows": 30});
    let snapshot = face.call("spawn", &spawn).await;
    let shape = snapshot.map(|s| json!({"name": s["name"], "kind": s["status"]["kind"]}));
    seen.push(("spawn edge".to_owned(), shape));
    let read = json!({"terminal": "edge", "count": 10_000});
    let page = face.call("read", &read).await;
    seen.push((
        "read at the bound".to_owned(),
        page.map(|p| p["truncated"].clone()),
    ));
    let killed = face.call("kill", &json!({"terminal": "edge"})).await;
    seen.push(("kill edge".to_owned(), killed));
    seen
}

#[tokio::test]
async fn the_same_input_gives_the_same_outcome_from_every_face() {
    within(async {
        let cli = Cli::new();
        let served = Served::start(&[]).await;
        let mcp_dirs = Cli::new();
        let mcp = Mcp::start(&mcp_dirs).await;
        let want = outcomes(&Face::Cli(&cli)).await;
        for (case, outcome) in &want[..refused().len()] {
            assert_eq!(outcome, &Err("INVALID_INPUT".to_owned()), "cli: {case}");
        }
        let tail = &want[refused().len()..];
        assert_eq!(
            tail[0].1,
            Ok(json!({"name": "edge", "kind": "running"})),
            "cli"
        );
        assert_eq!(tail[2].1, Ok(json!({"killed": true})), "cli");
        for face in [Face::Http(&served), Face::Mcp(&mcp)] {
            let got = outcomes(&face).await;
            assert_eq!(got, want, "{} differs from the CLI", face.name());
        }
        mcp.stop().await;
    })
    .await;
}
