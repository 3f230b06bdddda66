//! The front door's matching tables: hosts, write rules, WebSocket
//! origins (`guard.rs`).

use super::*;
use crate::ErrorCode;
use crate::bridge::{Auth, Principal};
use crate::registry::OwnerId;

fn config(listen: &str) -> BridgeConfig {
    BridgeConfig::new(Auth::Open(Principal {
        owner: OwnerId::new("t").unwrap(),
        read_only: false,
    }))
    .listening_on(listen.parse().unwrap())
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

fn host_ok(guard: &Guard, host: &'static str) -> bool {
    guard
        .host(&headers(&[("host", host)]), &Uri::default())
        .is_ok()
}

#[test]
fn loopback_hosts() {
    let guard = Guard::new(&config("127.0.0.1:7681"));
    for (host, want) in [
        ("127.0.0.1:7681", true),
        ("localhost:7681", true),
        ("LOCALHOST:7681", true),
        ("[::1]:7681", true),
        ("[0:0:0:0:0:0:0:1]:7681", true),
        ("127.0.0.1", false),
        ("127.0.0.1:7682", false),
        ("localhost:8000", false),
        ("evil.example:7681", false),
        ("evil.example", false),
        ("127.0.0.1:7681@evil.example", false),
        ("user@127.0.0.1:7681", false),
        ("127.0.0.1:07681", true),
        ("127.0.0.1:", false),
        ("127.0.0.1:99999", false),
        ("127.0.0.1:7681/x", false),
        ("", false),
        ("[::1", false),
        ("[zz]:7681", false),
        ("localhost.:7681", false),
    ] {
        assert_eq!(host_ok(&guard, host), want, "{host:?}");
    }
    assert!(
        guard.host(&HeaderMap::new(), &Uri::default()).is_err(),
        "a missing Host"
    );
    let twice = headers(&[("host", "127.0.0.1:7681"), ("host", "127.0.0.1:7681")]);
    assert!(guard.host(&twice, &Uri::default()).is_err(), "two Hosts");
    // HTTP/2 and absolute-form: the URI's authority counts, and must agree.
    let uri: Uri = "http://localhost:7681/api".parse().unwrap();
    assert!(guard.host(&HeaderMap::new(), &uri).is_ok());
    let evil: Uri = "http://evil.example:7681/api".parse().unwrap();
    assert!(
        guard
            .host(&headers(&[("host", "127.0.0.1:7681")]), &evil)
            .is_err()
    );
}

#[test]
fn listen_and_allowed_hosts() {
    let guard = Guard::new(
        &config("192.0.2.7:443")
            .https(true)
            .allow_host("term.example")
            .allow_host("Box.Lan:8443")
            .allow_host("[2001:db8::1]:9000")
            .allow_host("bad host")
            .allow_origin("https://ui.example:4443/"),
    );
    for (host, want) in [
        ("192.0.2.7", true),
        ("192.0.2.7:443", true),
        ("192.0.2.7:80", false),
        ("127.0.0.1:443", false),
        ("localhost", false),
        ("term.example", true),
        ("term.example:1234", true),
        ("TERM.example:443", true),
        ("sub.term.example", false),
        ("box.lan:8443", true),
        ("box.lan", false),
        ("[2001:db8::1]:9000", true),
        ("[2001:db8::1]", false),
        ("ui.example:4443", true),
        ("ui.example", false),
        ("bad host", false),
    ] {
        assert_eq!(host_ok(&guard, host), want, "{host:?}");
    }
    // A Unix socket with nothing named: nothing passes.
    let none = Guard::new(&BridgeConfig::new(Auth::Tokens(Default::default())));
    assert!(!host_ok(&none, "localhost"));
    let v6 = Guard::new(&config("[::1]:7000"));
    assert!(host_ok(&v6, "[::1]:7000") && host_ok(&v6, "127.0.0.1:7000"));
    let any = Guard::new(&config("0.0.0.0:7000"));
    assert!(host_ok(&any, "localhost:7000") && !host_ok(&any, "evil.example:7000"));
    assert!(check_allow_host("term.example:8443").is_ok());
    assert_eq!(
        check_allow_host("a b").unwrap_err().code(),
        ErrorCode::InvalidInput
    );
    assert!(check_allow_origin("https://x.example").is_ok());
    assert!(check_allow_origin("x.example").is_err());
}

#[test]
fn write_rules() {
    let guard = Guard::new(&config("127.0.0.1:7681").allow_origin("https://term.example"));
    let host = Authority::parse("127.0.0.1:7681", false).unwrap();
    let check = |method: Method, pairs: &[(&'static str, &'static str)]| match guard.check_write(
        &method,
        &headers(pairs),
        &host,
        false,
    ) {
        Ok(()) => "ok",
        Err(Refusal::Host(_)) => "host",
        Err(Refusal::Origin(_)) => "origin",
        Err(Refusal::MediaType(_)) => "type",
    };
    let json = ("content-type", "application/json");
    let some = ("content-length", "2");
    for (method, pairs, want) in [
        (Method::POST, vec![json, some], "ok"),
        (
            Method::POST,
            vec![("content-type", "Application/JSON; charset=utf-8"), some],
            "ok",
        ),
        (
            Method::POST,
            vec![("content-type", "text/plain"), some],
            "type",
        ),
        (
            Method::POST,
            vec![("content-type", "application/x-www-form-urlencoded"), some],
            "type",
        ),
        (
            Method::POST,
            vec![("content-type", "application/jsonp"), some],
            "type",
        ),
        (Method::POST, vec![some], "type"),
        (Method::POST, vec![("transfer-encoding", "chunked")], "type"),
        (Method::POST, vec![("content-length", "0")], "ok"),
        (Method::DELETE, vec![], "ok"),
        (
            Method::POST,
            vec![json, some, ("origin", "http://127.0.0.1:7681")],
            "ok",
        ),
        (
            Method::POST,
            vec![json, some, ("origin", "https://term.example")],
            "ok",
        ),
        (
            Method::POST,
            vec![json, some, ("origin", "http://127.0.0.1:8000")],
            "origin",
        ),
        (
            Method::POST,
            vec![json, some, ("origin", "https://127.0.0.1:7681")],
            "origin",
        ),
        (
            Method::POST,
            vec![json, some, ("origin", "http://localhost:7681")],
            "origin",
        ),
        (Method::POST, vec![json, some, ("origin", "null")], "origin"),
        (
            Method::DELETE,
            vec![("origin", "http://evil.example")],
            "origin",
        ),
        (
            Method::OPTIONS,
            vec![("origin", "http://evil.example")],
            "origin",
        ),
        (
            Method::POST,
            vec![json, some, ("sec-fetch-site", "cross-site")],
            "origin",
        ),
        (
            Method::POST,
            vec![json, some, ("sec-fetch-site", "same-origin")],
            "origin",
        ),
        (
            Method::POST,
            vec![
                json,
                some,
                ("sec-fetch-site", "same-site"),
                ("origin", "http://127.0.0.1:8000"),
            ],
            "origin",
        ),
        (
            Method::POST,
            vec![
                json,
                some,
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://127.0.0.1:7681"),
            ],
            "ok",
        ),
        (
            Method::POST,
            vec![
                json,
                some,
                ("origin", "http://127.0.0.1:7681"),
                ("origin", "http://evil.example"),
            ],
            "origin",
        ),
        // Reads are never refused here: a page cannot read the answers.
        (
            Method::GET,
            vec![
                ("origin", "http://evil.example"),
                ("content-type", "text/plain"),
            ],
            "ok",
        ),
        (Method::HEAD, vec![("sec-fetch-site", "cross-site")], "ok"),
    ] {
        assert_eq!(check(method.clone(), &pairs), want, "{method} {pairs:?}");
    }
}

#[test]
fn websocket_origins() {
    let guard = Guard::new(&config("127.0.0.1:7681").allow_origin("https://term.example/"));
    let allowed = |pairs: &[(&'static str, &'static str)]| guard.origin_allowed(&headers(pairs));
    let host = ("host", "127.0.0.1:7681");
    assert!(allowed(&[host]));
    assert!(allowed(&[host, ("origin", "http://127.0.0.1:7681")]));
    assert!(allowed(&[
        ("host", "localhost:7681"),
        ("origin", "http://localhost:7681")
    ]));
    assert!(allowed(&[host, ("origin", "https://term.example")]));
    assert!(!allowed(&[host, ("origin", "http://127.0.0.1:7682")]));
    assert!(!allowed(&[host, ("origin", "https://127.0.0.1:7681")]));
    assert!(!allowed(&[host, ("origin", "null")]));
    // The rebinding case: Origin and Host agree, but the name is not ours.
    assert!(!allowed(&[
        ("host", "evil.example:7681"),
        ("origin", "http://evil.example:7681")
    ]));
    let https = Guard::new(&config("127.0.0.1:443").https(true));
    assert!(https.origin_allowed(&headers(&[
        ("host", "localhost"),
        ("origin", "https://localhost")
    ])));
    assert!(!https.origin_allowed(&headers(&[
        ("host", "localhost"),
        ("origin", "http://localhost")
    ])));
}
