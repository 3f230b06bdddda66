//! The JSON routes, their status mapping, authentication carriers, token
//! files with owners and read-only tokens, bad bodies, the spawned
//! terminals' clean environment, and shutdown.

use reqwest::Method;
use serde_json::Value;

use super::{Served, WAIT};
use crate::support::{poll, within};

fn code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {body}"))
}

#[tokio::test]
async fn routes_answer_with_the_cli_json_and_map_errors_to_statuses() {
    within(async {
        let served = Served::start(&[]).await;
        let snapshot = served
            .spawn(r#"{"name":"a","command":["sh"],"cols":90,"rows":20,"role":"repl"}"#)
            .await;
        assert_eq!(snapshot["name"], "a");
        assert_eq!(snapshot["status"]["kind"], "running");
        let id = snapshot["id"].as_str().unwrap().to_owned();

        let (status, list) = served.get("/api/terminals").await;
        assert_eq!(status, 200);
        assert_eq!(list.as_array().unwrap().len(), 1);
        assert_eq!(list[0]["id"], id.as_str());
        let (status, shown) = served.get(&format!("/api/terminals/{id}")).await;
        assert_eq!((status, &shown["name"]), (200, &Value::from("a")));

        let (status, sent) = served
            .post(
                "/api/terminals/a/send",
                r#"{"text":"echo $((6*7))","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200, "{sent}");
        assert!(sent["output"].as_str().unwrap().contains("42"), "{sent}");
        for key in ["wait_reason", "status", "truncated"] {
            assert!(sent.get(key).is_some(), "send lacks {key}: {sent}");
        }
        // The screen only when asked for (issue 17).
        assert!(sent.get("viewport").is_none(), "{sent}");
        let (status, screen) = served.get("/api/terminals/a/screen").await;
        assert_eq!((status, &screen["cols"]), (200, &Value::from(90)));
        assert!(screen["lines"].to_string().contains("42"), "{screen}");
        let (status, page) = served
            .get("/api/terminals/a/scrollback?offset=0&count=5")
            .await;
        assert_eq!(status, 200, "{page}");
        assert!(page["lines"].as_array().unwrap().len() <= 5);
        let (status, signalled) = served
            .post("/api/terminals/a/signal", r#"{"signal":"INT"}"#)
            .await;
        assert_eq!(status, 200, "{signalled}");

        let cases: &[(&str, &str, &str, u16, &str)] = &[
            (
                "POST",
                "/api/terminals",
                r#"{"name":"a"}"#,
                409,
                "DUPLICATE_NAME",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"name":"../x"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"name":"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"cols":"wide","rows":2}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"cols":80}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"colour":"red"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"restart":"sometimes"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals",
                r#"{"cwd":"relative"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals/a/signal",
                r#"{"signal":"FOO"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals/a/send",
                r#"{"text":1}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "POST",
                "/api/terminals/a/send",
                r#"{"text":"","wait":"x"}"#,
                400,
                "INVALID_INPUT",
            ),
            (
                "GET",
                "/api/terminals/a/scrollback?count=-1",
                "",
                400,
                "INVALID_INPUT",
            ),
            ("GET", "/api/terminals/nope", "", 404, "NO_TERMINAL"),
            ("GET", "/api/terminals/nope/screen", "", 404, "NO_TERMINAL"),
            ("DELETE", "/api/terminals/nope", "", 404, "NO_TERMINAL"),
        ];
        for (method, path, body, want_status, want_code) in cases {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let (status, answer) = served
                .call(
                    served
                        .request(method, path)
                        .header("content-type", "application/json")
                        .body((*body).to_owned()),
                )
                .await;
            assert_eq!(
                (status, code(&answer)),
                (*want_status, *want_code),
                "{path} {body}"
            );
        }
        // Bodies are limited: a 2 MiB body is refused from its length alone,
        // before the server buffers it (so only its start is sent here).
        let (status, answer) = oversized_post(&served, "/api/terminals/a/send", 2 << 20).await;
        assert_eq!((status, code(&answer)), (413, "INVALID_INPUT"));

        // A one-word command is argv, not shell text: nothing named so exists.
        let snapshot = served
            .spawn(r#"{"name":"argv","command":["echo hi; exit 3"]}"#)
            .await;
        let exited = poll("the one-word command to fail", WAIT, || async {
            let (_, shown) = served.get("/api/terminals/argv").await;
            (shown["status"]["kind"] == "exited").then_some(shown)
        })
        .await;
        assert_eq!(exited["status"]["exit"]["code"], 127, "{exited} {snapshot}");
        let (status, answer) = served
            .post("/api/terminals/argv/send", r#"{"text":"x"}"#)
            .await;
        assert_eq!((status, code(&answer)), (410, "TERMINAL_DEAD"));

        let (status, killed) = served
            .call(served.request(Method::DELETE, &format!("/api/terminals/{id}")))
            .await;
        assert_eq!((status, killed), (200, serde_json::json!({"killed": true})));
        let (status, _) = served.get("/api/terminals/a").await;
        assert_eq!(status, 404);
        served
            .call(served.request(Method::DELETE, "/api/terminals/argv"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn only_a_bearer_token_or_session_passes() {
    within(async {
        let served = Served::start(&[]).await;
        let http = reqwest::Client::new();
        let url = |path: &str| format!("{}{path}", served.base);
        for path in ["/api/terminals", "/api/terminals/x/screen", "/api/links"] {
            let status = http.get(url(path)).send().await.unwrap().status().as_u16();
            assert_eq!(status, 401, "{path}");
            let status = http
                .get(url(path))
                .bearer_auth("0123456789abcdef0123456789abcdef")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(status, 401, "{path} with a wrong token");
        }
        let (status, body) = served.get("/api/terminals").await;
        assert_eq!((status, body), (200, Value::Array(Vec::new())));
        for carrier in [
            http.get(url(&format!("/api/terminals?token={}", served.token))),
            http.get(url("/api/terminals"))
                .header("cookie", format!("tmux_engine_token={}", served.token)),
        ] {
            assert_eq!(carrier.send().await.unwrap().status().as_u16(), 401);
        }
        // The page and its assets are public: they hold no secret, and
        // the page signs in itself.
        for path in ["/", "/assets/app.js"] {
            let page = http.get(url(path)).send().await.unwrap();
            assert_eq!(page.status().as_u16(), 200, "{path}");
            assert!(page.headers().get("set-cookie").is_none(), "{path}");
        }
        // The printed code, once, is a session that acts as the owner.
        let sign_in = |code: String| {
            http.post(url("/api/sign-in"))
                .header("content-type", "application/json")
                .body(format!(r#"{{"code":"{code}"}}"#))
                .send()
        };
        let answer = sign_in(served.code.clone()).await.unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        let session: Value = answer.json().await.unwrap();
        assert_eq!(session["read_only"], false, "{session}");
        let secret = session["session"].as_str().unwrap().to_owned();
        let again = sign_in(served.code.clone()).await.unwrap();
        assert_eq!(again.status().as_u16(), 401, "a code works once");
        let whoami: Value = http
            .get(url("/api/session"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(whoami["owner"], session["owner"], "{whoami}");
        assert!(whoami.get("session").is_none(), "{whoami}");
        let signed_out = http
            .delete(url("/api/session"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(signed_out.status().as_u16(), 200);
        let status = http
            .get(url("/api/terminals"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 401, "signed out");
    })
    .await;
}

#[tokio::test]
async fn token_file_owners_are_fenced_and_read_only_tokens_only_look() {
    within(async {
        let cli = crate::cli::Cli::new();
        let file = super::token_file(&cli, "# owner tokens\nalicealicealiceal alice\nbobbobbobbobbobbo bob\nviewviewviewviewv alice read-only\n");
        let mut served =
            Served::start_with(cli, &["--token-file", &file], &[]).await;
        served.token = "alicealicealiceal".to_owned();
        let snapshot = served.spawn(r#"{"name":"mine","command":["sh"]}"#).await;
        let id = snapshot["id"].as_str().unwrap().to_owned();

        served.token = "bobbobbobbobbobbo".to_owned();
        let (_, list) = served.get("/api/terminals").await;
        assert_eq!(list, Value::Array(Vec::new()));
        for path in [format!("/api/terminals/{id}"), "/api/terminals/mine".to_owned()] {
            let (status, body) = served.get(&path).await;
            assert_eq!((status, code(&body)), (404, "NO_TERMINAL"));
            assert!(!body.to_string().contains("alice"), "{body}");
        }
        let (status, _) = served.call(served.request(Method::DELETE, &format!("/api/terminals/{id}"))).await;
        assert_eq!(status, 404);
        let mut ws = served.ws(&id, "", None).await;
        assert_eq!(ws.close_code().await, 4404);

        served.token = "viewviewviewviewv".to_owned();
        let (status, list) = served.get("/api/terminals").await;
        assert_eq!((status, list.as_array().unwrap().len()), (200, 1));
        let (status, _) = served.get("/api/terminals/mine/screen").await;
        assert_eq!(status, 200);
        for (method, path, body) in [
            (Method::POST, "/api/terminals", "{}"),
            (Method::POST, "/api/terminals/mine/send", r#"{"text":"x"}"#),
            (Method::POST, "/api/terminals/mine/signal", r#"{"signal":"INT"}"#),
            (Method::DELETE, "/api/terminals/mine", ""),
        ] {
            let (status, answer) = served
                .call(
                    served
                        .request(method, path)
                        .header("content-type", "application/json")
                        .body(body.to_owned()),
                )
                .await;
            assert_eq!((status, code(&answer)), (403, "READ_ONLY"), "{path}");
        }
        // A read-only token's viewer is read-only whatever it asks.
        let mut ws = served.ws("mine", "read_only=false", None).await;
        let hello = ws.text().await;
        assert_eq!(hello["read_only"], true);
        served.token = "alicealicealiceal".to_owned();
        served.call(served.request(Method::DELETE, "/api/terminals/mine")).await;
    })
    .await;
}

#[tokio::test]
async fn spawned_terminals_get_a_clean_environment() {
    within(async {
        let served = Served::start_with(
            crate::cli::Cli::new(),
            &[],
            &[("BRIDGE_SECRET", "hunter2"), ("LC_TIME", "C")],
        )
        .await;
        served
            .spawn(r#"{"name":"env","command":["sh"],"env":{"MINE":"yes"}}"#)
            .await;
        let (status, sent) = served
            .post(
                "/api/terminals/env/send",
                r#"{"text":"echo [$BRIDGE_SECRET] [$MINE] [$LC_TIME] [${PATH:+path}]","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200, "{sent}");
        let output = sent["output"].as_str().unwrap();
        assert!(output.contains("[] [yes] [C] [path]"), "{output}");
        served.call(served.request(Method::DELETE, "/api/terminals/env")).await;
    })
    .await;
}

#[tokio::test]
async fn no_auth_is_refused_off_loopback() {
    let cli = crate::cli::Cli::new();
    let output = cli.run(&["serve", "--no-auth", "--listen", "0.0.0.0:0"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("INVALID_INPUT") && stderr.contains("--no-auth"),
        "{stderr}"
    );
}

#[tokio::test]
async fn sigterm_closes_viewers_with_1012_and_leaves_terminals_running() {
    within(async {
        let mut served = Served::start(&[]).await;
        served.spawn(r#"{"name":"keep","command":["sh"]}"#).await;
        let mut ws = served.ws("keep", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        let status = served.terminate().await;
        assert!(status.success(), "{status}");
        assert_eq!(ws.close_code().await, 1012);
        let listed = served.cli.ok(&["--json", "show", "keep"]);
        assert!(listed.contains("\"running\""), "{listed}");
        served.cli.ok(&["kill", "keep"]);
    })
    .await;
}

/// `GET /api/openapi.json`: behind the token like every `/api` route, an
/// OpenAPI 3.1 document naming every route of docs/serve.md's table, and every
/// operation it names is served (none is the router's "no such route").
#[tokio::test]
async fn the_openapi_document_names_every_route_and_every_one_is_served() {
    within(async {
        let served = Served::start(&[]).await;
        let (status, refused) = served
            .call(reqwest::Client::new().get(format!("{}/api/openapi.json", served.base)))
            .await;
        assert_eq!((status, code(&refused)), (401, "UNAUTHORIZED"));
        let (status, document) = served.get("/api/openapi.json").await;
        assert_eq!(status, 200, "{document}");
        assert_eq!(document["openapi"], "3.1.0");
        let paths = document["paths"].as_object().unwrap();
        let readme: &[(&str, &str)] = &[
            ("get", "/api/terminals"),
            ("post", "/api/terminals"),
            ("get", "/api/terminals/{t}"),
            ("delete", "/api/terminals/{t}"),
            ("post", "/api/terminals/{t}/signal"),
            ("get", "/api/terminals/{t}/screen"),
            ("get", "/api/terminals/{t}/scrollback"),
            ("post", "/api/terminals/{t}/send"),
            ("get", "/api/terminals/{t}/attach"),
            ("get", "/api/openapi.json"),
        ];
        let mut documented = Vec::new();
        for (path, methods) in paths {
            for method in methods.as_object().unwrap().keys() {
                documented.push((method.clone(), path.clone()));
            }
        }
        for (method, path) in readme {
            assert!(
                documented.contains(&((*method).to_owned(), (*path).to_owned())),
                "{method} {path} is not documented"
            );
        }
        let spawn = &paths["/api/terminals"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["properties"];
        assert!(spawn.get("cwd").is_some(), "{spawn}");
        // A body every route refuses (or ignores), so the probe spawns nothing.
        for (method, path) in documented {
            let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
            let path = path.replace("{t}", "nope");
            let (status, answer) = served
                .call(
                    served
                        .request(method.clone(), &path)
                        .header("content-type", "application/json")
                        .body(r#"{"cols":1}"#),
                )
                .await;
            assert_ne!(status, 405, "{method} {path}: {answer}");
            assert!(
                !answer.to_string().contains("no such route"),
                "{method} {path}: {answer}"
            );
        }
    })
    .await;
}

/// POSTs headers announcing `length` bytes but sends only 1 KiB of them,
/// then reads the answer.
async fn oversized_post(served: &Served, path: &str, length: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = served.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n",
        served.token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 1024]).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer[9..12].parse().unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}
