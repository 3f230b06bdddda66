//! The front door as an attacker meets it: a rebinding DNS name (`Host`),
//! a foreign page's script-free form, a page on another port of
//! 127.0.0.1 riding a cookie or a URL's token, Fetch metadata, cookies
//! and caching, and unknown routes. Raw HTTP over a
//! `TcpStream` wherever a client library would fix the headers up.

use reqwest::Method;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Served, WAIT};
use crate::support::within;

/// One raw HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The header block, lowercased.
    head: String,
    body: String,
}

impl Answer {
    fn code(&self) -> String {
        let body: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        body["error"]["code"].as_str().unwrap_or("").to_owned()
    }
}

/// The `host:port` serve listens on.
fn addr(served: &Served) -> &str {
    served.base.trim_start_matches("http://")
}

/// Sends `method path` with exactly `headers` (plus `Content-Length` for
/// a body and `Connection: close`) and reads the whole answer.
async fn raw(served: &Served, method: &str, path: &str, headers: &[String], body: &str) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr(served)).await.unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    if !body.is_empty() {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("no answer in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    Answer {
        status: head[9..12].parse().unwrap_or_else(|_| panic!("{answer}")),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

fn host(served: &Served) -> String {
    format!("Host: {}", addr(served))
}

fn cookie(token: &str) -> String {
    format!("Cookie: tmux_engine_token={token}")
}

const JSON: &str = "Content-Type: application/json";

/// The owner's terminals, asked with the Bearer token.
async fn count(served: &Served) -> usize {
    let (status, list) = served.get("/api/terminals").await;
    assert_eq!(status, 200, "{list}");
    list.as_array().unwrap().len()
}

#[tokio::test]
async fn a_rebinding_host_is_421_before_authentication_websocket_included() {
    within(async {
        for args in [&["--no-auth"][..], &[][..]] {
            let served = Served::start(args).await;
            let bearer = format!("Authorization: Bearer {}", served.token);
            let port = addr(&served).rsplit(':').next().unwrap().to_owned();
            let evil = format!("Host: evil.example:{port}");
            for headers in [
                vec![evil.clone()],
                vec![evil.clone(), bearer.clone()],
                vec![evil.clone(), format!("Origin: http://evil.example:{port}")],
                vec!["Host: evil.example".to_owned()],
                vec![format!("Host: 127.0.0.1:{port}.evil.example")],
                vec![format!("Host: 127.0.0.1:{port}"), evil.clone()],
                vec![],
            ] {
                for path in ["/", "/api/terminals", "/nope"] {
                    let answer = raw(&served, "GET", path, &headers, "").await;
                    assert_eq!(
                        (answer.status, answer.code().as_str()),
                        (421, "FORBIDDEN_HOST"),
                        "{args:?} {path} {headers:?}: {answer:?}"
                    );
                }
            }
            let answer = raw(
                &served,
                "POST",
                "/api/terminals",
                &[evil.clone(), bearer.clone(), JSON.to_owned()],
                "{}",
            )
            .await;
            assert_eq!(answer.status, 421, "{answer:?}");
            // The upgrade is refused at the HTTP level: no socket opens.
            let upgrade = |host: String| {
                vec![
                    host,
                    format!("Origin: http://evil.example:{port}"),
                    "Upgrade: websocket".to_owned(),
                    "Connection: Upgrade".to_owned(),
                    "Sec-WebSocket-Version: 13".to_owned(),
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==".to_owned(),
                ]
            };
            let mut headers = upgrade(evil.clone());
            headers.push(bearer.clone());
            let answer = raw(&served, "GET", "/api/terminals/x/attach", &headers, "").await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (421, "FORBIDDEN_HOST"),
                "{args:?} upgrade: {answer:?}"
            );
            // The bridge's own names still pass, in any case.
            for name in ["127.0.0.1", "LOCALHOST", "localhost"] {
                let answer = raw(
                    &served,
                    "GET",
                    "/api/terminals",
                    &[format!("Host: {name}:{port}"), bearer.clone()],
                    "",
                )
                .await;
                assert_eq!(answer.status, 200, "{name}: {answer:?}");
            }
            assert_eq!(count(&served).await, 0);
        }
    })
    .await;
}

#[tokio::test]
async fn allowed_hosts_pass_with_or_without_their_port() {
    within(async {
        let served = Served::start(&[
            "--no-auth",
            "--allow-host",
            "term.example",
            "--allow-host",
            "box.lan:8443",
        ])
        .await;
        for (name, want) in [
            ("term.example", 200),
            ("term.example:1234", 200),
            ("box.lan:8443", 200),
            ("box.lan", 421),
            ("box.lan:8444", 421),
            ("other.example", 421),
        ] {
            let answer = raw(
                &served,
                "GET",
                "/api/terminals",
                &[format!("Host: {name}")],
                "",
            )
            .await;
            assert_eq!(answer.status, want, "{name}: {answer:?}");
        }
        let bad = served
            .cli
            .run(&["serve", "--listen", "127.0.0.1:0", "--allow-host", "a b"]);
        assert_eq!(bad.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&bad.stderr).contains("INVALID_INPUT"));
    })
    .await;
}

#[tokio::test]
async fn a_foreign_pages_text_plain_form_spawns_nothing() {
    within(async {
        // What `<form enctype="text/plain" method="post">` sends: no
        // preflight, the cookie if it has one, a foreign Origin.
        let pwned = crate::cli::Cli::new();
        let file = pwned.runtime().with_file_name("pwned");
        let body = format!(r#"{{"command":["sh","-c","id > {}"]}}"#, file.display());
        let served = Served::start_with(pwned, &["--no-auth"], &[]).await;
        for headers in [
            vec![
                host(&served),
                "Content-Type: text/plain".to_owned(),
                "Origin: http://evil.example".to_owned(),
                "Sec-Fetch-Site: cross-site".to_owned(),
            ],
            vec![
                host(&served),
                "Content-Type: text/plain".to_owned(),
                "Origin: null".to_owned(),
            ],
            // Even with no Origin at all, the type alone refuses it.
            vec![host(&served), "Content-Type: text/plain".to_owned()],
            vec![
                host(&served),
                "Content-Type: application/x-www-form-urlencoded".to_owned(),
            ],
        ] {
            let answer = raw(&served, "POST", "/api/terminals", &headers, &body).await;
            assert!(
                matches!(
                    (answer.status, answer.code().as_str()),
                    (403, "FORBIDDEN_ORIGIN") | (415, "UNSUPPORTED_MEDIA_TYPE")
                ),
                "{headers:?}: {answer:?}"
            );
        }
        // Refused before the handler ran: a spawn answers only once done.
        assert_eq!(count(&served).await, 0);
        assert!(!file.exists(), "{} was created", file.display());
        let answer = raw(
            &served,
            "POST",
            "/api/terminals",
            &[host(&served), "Content-Type: text/plain".to_owned()],
            "{}",
        )
        .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (415, "UNSUPPORTED_MEDIA_TYPE")
        );

        // With a token: the same form riding the cookie.
        let served = Served::start(&[]).await;
        let answer = raw(
            &served,
            "POST",
            "/api/terminals",
            &[
                host(&served),
                cookie(&served.token),
                "Content-Type: text/plain".to_owned(),
                "Origin: http://127.0.0.1:8000".to_owned(),
            ],
            &body,
        )
        .await;
        assert!(matches!(answer.status, 403 | 415), "{answer:?}");
        assert_eq!(count(&served).await, 0);
        assert!(!file.exists());
    })
    .await;
}

/// A page on another port of 127.0.0.1 can make the browser send the
/// cookie an older serve set (cookies ignore ports) or a URL's token:
/// neither is a credential any more, for reads or writes, with its
/// Origin or without.
#[tokio::test]
async fn another_port_of_127_0_0_1_cannot_act_with_a_cookie_or_a_url_token() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"sh","command":["sh"]}"#).await;
        let foreign = "Origin: http://127.0.0.1:8000".to_owned();
        for (method, path, body) in [
            ("GET", "/api/terminals", ""),
            ("GET", "/api/terminals/sh/screen", ""),
            ("POST", "/api/terminals", "{}"),
            (
                "POST",
                "/api/terminals/sh/send",
                r#"{"text":"touch x","submit":true}"#,
            ),
            ("POST", "/api/terminals/sh/signal", r#"{"signal":"INT"}"#),
            ("POST", "/api/links", "{}"),
            ("DELETE", "/api/terminals/sh", ""),
        ] {
            let with_query = format!("{path}?token={}", served.token);
            for (path, carrier) in [(path, cookie(&served.token)), (&with_query, String::new())] {
                for origin in [Some(&foreign), None] {
                    let mut headers = vec![host(&served)];
                    headers.extend([carrier.clone()].into_iter().filter(|c| !c.is_empty()));
                    headers.extend(origin.cloned());
                    if !body.is_empty() {
                        headers.push(JSON.to_owned());
                    }
                    let answer = raw(&served, method, path, &headers, body).await;
                    assert!(
                        matches!(
                            (answer.status, answer.code().as_str()),
                            (401, "UNAUTHORIZED") | (403, "FORBIDDEN_ORIGIN")
                        ),
                        "{method} {path} {headers:?}: {answer:?}"
                    );
                }
            }
        }
        // The WebSocket neither: a URL token or a cookie is a 4401.
        let mut ws = served
            .ws("sh", &format!("token={}", served.token), None)
            .await;
        assert_eq!(ws.close_code().await, 4401);
        assert_eq!(count(&served).await, 1, "the shell is still the only one");
        served
            .call(served.request(Method::DELETE, "/api/terminals/sh"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn fetch_metadata_from_another_site_is_refused() {
    within(async {
        let served = Served::start(&[]).await;
        let bearer = format!("Authorization: Bearer {}", served.token);
        for extra in [
            vec!["Sec-Fetch-Site: cross-site"],
            vec!["Sec-Fetch-Site: same-site"],
            vec!["Sec-Fetch-Site: same-site", "Origin: http://127.0.0.1:8000"],
            vec!["Sec-Fetch-Site: cross-site", "Origin: http://evil.example"],
        ] {
            let mut headers = vec![host(&served), bearer.clone(), JSON.to_owned()];
            headers.extend(extra.iter().map(|h| (*h).to_owned()));
            let answer = raw(&served, "POST", "/api/terminals", &headers, "{}").await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (403, "FORBIDDEN_ORIGIN"),
                "{extra:?}: {answer:?}"
            );
        }
        assert_eq!(count(&served).await, 0);
    })
    .await;
}

#[tokio::test]
async fn scripts_with_a_bearer_and_the_page_with_its_session_still_write() {
    within(async {
        let served = Served::start(&["--allow-origin", "https://term.example"]).await;
        let bearer = format!("Authorization: Bearer {}", served.token);
        // curl: a Bearer token, no Origin, no Fetch metadata.
        let answer = raw(
            &served,
            "POST",
            "/api/terminals",
            &[host(&served), bearer.clone(), JSON.to_owned()],
            r#"{"name":"curl","command":["sh"]}"#,
        )
        .await;
        assert_eq!(answer.status, 201, "{answer:?}");
        // The page: it exchanged the printed code for a session, sent as
        // Bearer with its own Origin and same-origin metadata.
        let own = format!("Origin: {}", served.base);
        let signed_in = raw(
            &served,
            "POST",
            "/api/sign-in",
            &[host(&served), own.clone(), JSON.to_owned()],
            &format!(r#"{{"code":"{}"}}"#, served.code),
        )
        .await;
        assert_eq!(signed_in.status, 200, "{signed_in:?}");
        assert!(!signed_in.head.contains("set-cookie"), "{signed_in:?}");
        let session: Value = serde_json::from_str(&signed_in.body).unwrap();
        let session = format!(
            "Authorization: Bearer {}",
            session["session"].as_str().unwrap()
        );
        for (name, origin) in [
            ("page", own.as_str()),
            ("allowed", "Origin: https://term.example"),
        ] {
            let answer = raw(
                &served,
                "POST",
                "/api/terminals",
                &[
                    host(&served),
                    session.clone(),
                    origin.to_owned(),
                    "Sec-Fetch-Site: same-origin".to_owned(),
                    "Content-Type: application/json; charset=utf-8".to_owned(),
                ],
                &format!(r#"{{"name":"{name}","command":["sh"]}}"#),
            )
            .await;
            assert_eq!(answer.status, 201, "{name}: {answer:?}");
        }
        // The page's own origin under localhost is its own there.
        let port = addr(&served).rsplit(':').next().unwrap().to_owned();
        let answer = raw(
            &served,
            "DELETE",
            "/api/terminals/page",
            &[
                format!("Host: localhost:{port}"),
                session.clone(),
                format!("Origin: http://localhost:{port}"),
            ],
            "",
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(count(&served).await, 2);
        for name in ["curl", "allowed"] {
            served
                .call(served.request(Method::DELETE, &format!("/api/terminals/{name}")))
                .await;
        }
    })
    .await;
}

#[tokio::test]
async fn no_answer_sets_a_cookie_and_api_answers_are_not_stored() {
    within(async {
        let served = Served::start(&[]).await;
        let bearer = format!("Authorization: Bearer {}", served.token);
        for (path, headers) in [
            ("/", vec![host(&served)]),
            (&*format!("/?token={}", served.token), vec![host(&served)]),
            ("/api/terminals", vec![host(&served), bearer.clone()]),
            ("/api/terminals", vec![host(&served)]),
            ("/api/session", vec![host(&served), bearer.clone()]),
            ("/api/nope", vec![host(&served), bearer.clone()]),
            ("/api/openapi.json", vec![host(&served), bearer.clone()]),
        ] {
            let answer = raw(&served, "GET", path, &headers, "").await;
            assert!(!answer.head.contains("set-cookie"), "{path}: {answer:?}");
            assert!(
                answer.head.contains("cache-control: no-store"),
                "{path}: {answer:?}"
            );
        }
        // The page's old cookie switch is gone.
        let answer = raw(
            &served,
            "POST",
            "/",
            &[
                host(&served),
                JSON.to_owned(),
                format!("Origin: {}", served.base),
            ],
            &format!(r#"{{"token":"{}"}}"#, served.token),
        )
        .await;
        assert!(!answer.head.contains("set-cookie"), "{answer:?}");
        assert_eq!(answer.status, 405, "{answer:?}");
    })
    .await;
}

#[tokio::test]
async fn unknown_routes_are_401_without_a_token_and_404_with() {
    within(async {
        let served = Served::start(&[]).await;
        let http = reqwest::Client::new();
        for path in ["/nope", "/api/nope", "/api/terminals/x/y/z", "/assets"] {
            let status = http
                .get(format!("{}{path}", served.base))
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status.as_u16(), 401, "{path}");
            let (status, body) = served.get(path).await;
            assert_eq!(status, 404, "{path}: {body}");
        }
        let status = http
            .post(format!("{}/nope", served.base))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 401);
    })
    .await;
}
