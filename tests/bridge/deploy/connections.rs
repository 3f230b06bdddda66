//! Bounded connections: the header-read and idle timeouts cut sockets
//! that hold a slot without a request; past `--max-connections` a client
//! is answered 503 at once; under a low fd limit idle sockets cannot lock
//! a real client out.

use std::time::Duration;

use tokio::net::TcpStream;

use super::{Serve, closed_by_server, exchange};
use crate::cli::Cli;
use crate::support::{poll, within};

/// A serve on a free loopback port with these header and idle timeouts
/// (seconds).
async fn serve_timed(header: &str, idle: &str) -> Serve {
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--header-timeout",
        header,
        "--idle-timeout",
        idle,
    ];
    Serve::start(Cli::new(), &args, &[]).await
}

#[tokio::test]
async fn silent_and_partial_heads_are_cut_at_the_header_timeout() {
    within(async {
        let served = serve_timed("1", "600").await;
        let addr = served.addr();
        let silent = TcpStream::connect(&addr).await.unwrap();
        assert!(
            closed_by_server(silent, b"").await,
            "a silent socket stayed open"
        );
        let partial = TcpStream::connect(&addr).await.unwrap();
        assert!(
            closed_by_server(partial, b"GET /api/terminals HTTP/1.1\r\nhost: 127.0.0.1").await,
            "a half-sent head stayed open"
        );
        // The server still answers a whole request.
        let stream = TcpStream::connect(&addr).await.unwrap();
        let reply = exchange(
            stream,
            "GET",
            &addr,
            "/api/terminals",
            &served.token(),
            None,
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    })
    .await;
}

#[tokio::test]
async fn a_trickled_body_is_cut_when_it_pauses_past_the_header_timeout() {
    within(async {
        let served = serve_timed("1", "600").await;
        let addr = served.addr();
        let stream = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /api/terminals HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"na",
            served.token()
        );
        assert!(
            closed_by_server(stream, head.as_bytes()).await,
            "a stalled body held its connection"
        );
    })
    .await;
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout() {
    within(async {
        let served = serve_timed("600", "1").await;
        let addr = served.addr();
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let request = format!(
            "GET /api/terminals HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\r\n",
            served.token()
        );
        tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
            .await
            .unwrap();
        // The answer comes and the connection is kept alive, then cut.
        let mut head = [0u8; 12];
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut head)
            .await
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        assert!(
            closed_by_server(stream, b"").await,
            "an idle keep-alive stayed open"
        );
    })
    .await;
}

#[tokio::test]
async fn past_max_connections_a_client_gets_503_then_a_freed_slot_serves() {
    within(async {
        let served = Serve::start(
            Cli::new(),
            &[
                "--listen",
                "127.0.0.1:0",
                "--max-connections",
                "4",
                "--header-timeout",
                "600",
            ],
            &[],
        )
        .await;
        let addr = served.addr();
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(TcpStream::connect(&addr).await.unwrap());
        }
        let fifth = TcpStream::connect(&addr).await.unwrap();
        let reply = exchange(fifth, "GET", &addr, "/api/terminals", &served.token(), None).await;
        assert_eq!(reply.status, 503, "{reply:?}");
        assert_eq!(reply.json()["error"]["code"], "TOO_MANY_CONNECTIONS");
        drop(idle);
        let token = served.token();
        poll(
            "a request served after the idle sockets closed",
            super::WAIT,
            || async {
                let stream = TcpStream::connect(&addr).await.ok()?;
                let reply = exchange(stream, "GET", &addr, "/api/terminals", &token, None).await;
                (reply.status == 200).then_some(())
            },
        )
        .await;
    })
    .await;
}

/// The case: `ulimit -n 256`, 300 idle sockets, the default
/// connection limit: a real client is answered within 15 s (503 while they
/// are held, then 200 once the header timeout has cut them). The header
/// timeout is 2 s, not the default 10: the timer is what the test waits
/// for, not what it checks.
#[tokio::test]
async fn three_hundred_idle_sockets_under_ulimit_256_do_not_lock_clients_out() {
    within(async {
        let args = ["--listen", "127.0.0.1:0", "--header-timeout", "2"];
        let served = Serve::start_limited(Cli::new(), 256, &args).await;
        let addr = served.addr();
        let mut idle = Vec::new();
        for _ in 0..300 {
            idle.push(TcpStream::connect(&addr).await.unwrap());
        }
        let client = reqwest::Client::new();
        let url = format!("http://{addr}/api/terminals");
        let started = tokio::time::Instant::now();
        let answered = tokio::time::timeout(
            Duration::from_secs(15),
            client.get(&url).bearer_auth(served.token()).send(),
        )
        .await
        .expect("no answer within 15 s while 300 idle sockets are held")
        .expect("the request failed");
        assert!(
            [200, 503].contains(&answered.status().as_u16()),
            "{}",
            answered.status()
        );
        // Held idle sockets are cut by the header timeout: then a client
        // is served.
        let token = served.token();
        poll(
            "a 200 while the idle sockets are held",
            Duration::from_secs(40),
            || async {
                let response = client.get(&url).bearer_auth(&token).send().await.ok()?;
                (response.status() == 200).then_some(())
            },
        )
        .await;
        eprintln!("first answer and 200 within {:?}", started.elapsed());
        drop(idle);
    })
    .await;
}

/// More sockets than file descriptors (the cap set above `ulimit -n`):
/// accept fails with EMFILE (serve says so in its log), backs off, and
/// serving resumes once the sockets go.
#[tokio::test]
async fn accept_errors_back_off_and_serving_resumes() {
    within(async {
        let cli = Cli::new();
        let log = cli.state().with_file_name("serve.log");
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "1000",
            "--header-timeout",
            "600",
        ];
        let served = Serve::start_limited_with(cli, 64, &args, Some(&log)).await;
        let addr = served.addr();
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(TcpStream::connect(&addr).await.unwrap());
        }
        poll("serve's EMFILE warning", super::super::WAIT, || async {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains("accepting connections failed").then_some(())
        })
        .await;
        drop(idle);
        let token = served.token();
        poll(
            "a request served after EMFILE",
            super::super::WAIT,
            || async {
                let stream = TcpStream::connect(&addr).await.ok()?;
                let reply = exchange(stream, "GET", &addr, "/api/terminals", &token, None).await;
                (reply.status == 200).then_some(())
            },
        )
        .await;
    })
    .await;
}
