//! Memory per client, as the hostile clients of issue 28 spend it: a
//! WebSocket ping flood whose pongs are never read (closed 1008 once its
//! write budget is spent), 2,000 connections each holding an unfinished
//! 60 KiB request head (their sum is budgeted; a head past 64 KiB is
//! 431), and a body trickled a byte at a time (cut at the body deadline).
//! Each attack keeps serve's RSS growth under 64 MiB; figures are printed
//! for docs/benchmarks.md (`scripts/memory-figures` runs these).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ws::rss_kib;
use super::{Served, WAIT};
use crate::support::within;

/// What any one attack may add to serve's resident memory.
const GROWTH: u64 = 64 * 1024;

fn addr(served: &Served) -> String {
    served.base.trim_start_matches("http://").to_owned()
}

/// A masked client frame.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    assert!(payload.len() < 126);
    out.push(0x80 | u8::try_from(payload.len()).unwrap());
    let mask = [1u8, 2, 3, 4];
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// Writes pings with the largest control payload to `stream`, 512 to a
/// write, until `limit` bytes are sent or a write fails or stalls for
/// `stall` (serve stopped reading, or dropped the connection); the bytes
/// sent.
async fn flood(stream: &mut TcpStream, limit: usize, stall: Duration) -> usize {
    let ping = frame(0x9, &[b'p'; 125]);
    let burst: Vec<u8> = (0..512).flat_map(|_| ping.clone()).collect();
    let mut sent = 0usize;
    while sent < limit {
        match tokio::time::timeout(stall, stream.write_all(&burst)).await {
            Ok(Ok(())) => sent += burst.len(),
            Ok(Err(_)) | Err(_) => break,
        }
    }
    sent
}

/// A raw WebSocket to terminal `t`, upgraded.
async fn upgrade(served: &Served) -> TcpStream {
    upgrade_receiving(served, None).await
}

/// [`upgrade`] over a socket whose receive buffer is `receive_buffer`
/// bytes (the kernel's default when `None`).
async fn upgrade_receiving(served: &Served, receive_buffer: Option<u32>) -> TcpStream {
    let addr = addr(served);
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(size) = receive_buffer {
        socket.set_recv_buffer_size(size).unwrap();
    }
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!(
        "GET /api/terminals/t/attach HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {}\r\n\r\n",
        served.token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

/// Reads server frames (unmasked) until a close frame: its code, or
/// `None` when the connection ends first.
async fn close_code(stream: &mut TcpStream) -> Option<u16> {
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    tokio::time::timeout(WAIT, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
            let mut at = 0;
            while at + 2 <= received.len() {
                let (opcode, len) = (received[at] & 0x0f, usize::from(received[at + 1] & 0x7f));
                let (len, start) = match len {
                    126 if at + 4 <= received.len() => (
                        usize::from(u16::from_be_bytes([received[at + 2], received[at + 3]])),
                        at + 4,
                    ),
                    126 | 127 => break,
                    len => (len, at + 2),
                };
                if start + len > received.len() {
                    break;
                }
                if opcode == 0x8 && len >= 2 {
                    return Some(u16::from_be_bytes([received[start], received[start + 1]]));
                }
                at = start + len;
            }
            received.drain(..at);
        }
    })
    .await
    .expect("no close in time")
}

/// A client that floods pings without reading, then reads, gets its 1008
/// even when serve's close frame is still queued behind the pongs it
/// owes (a small receive buffer keeps them there). serve used to drop
/// the connection as soon as its discard budget was spent, with the
/// flood still unread: Linux answers that close with a RST and throws
/// away what serve had not sent yet, the close frame included.
#[tokio::test]
async fn a_flooding_client_that_reads_late_still_gets_its_close_frame() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"t","command":["sh"]}"#).await;
        let mut stream = upgrade_receiving(&served, Some(4096)).await;
        // Until serve stops reading (its budget spent) or drops us.
        let sent = flood(&mut stream, 64 << 20, Duration::from_millis(300)).await;
        assert_eq!(
            close_code(&mut stream).await,
            Some(1008),
            "closed without 1008 after {} KiB of pings",
            sent >> 10
        );
    })
    .await;
}

#[tokio::test]
async fn a_ping_flood_that_reads_no_pongs_is_closed_1008_and_costs_little() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"t","command":["sh"]}"#).await;
        let mut stream = upgrade(&served).await;
        let before = rss_kib(served.pid());
        // Pings with the largest control payload, never reading: the
        // flood ends when serve drops the connection (its budget spent)
        // or after 256 MiB.
        let sent = flood(&mut stream, 256 << 20, Duration::from_secs(2)).await;
        let grown = rss_kib(served.pid()).saturating_sub(before);
        eprintln!(
            "ping flood: {} KiB of pings sent, serve RSS +{grown} KiB",
            sent >> 10
        );
        assert!(grown < GROWTH, "serve grew {grown} KiB under a ping flood");
        // What the kernel's socket buffers hold on loopback (a few MiB
        // each way), the pongs owed and the close's discard budget: serve
        // stops reading well before this.
        assert!(
            sent < 32 << 20,
            "serve kept reading {} KiB of pings",
            sent >> 10
        );
        drop(stream);
        // A flood of 4 MiB, then reading: the pongs that fit, then 1008.
        let mut stream = upgrade(&served).await;
        flood(&mut stream, 4 << 20, Duration::from_millis(500)).await;
        assert_eq!(
            close_code(&mut stream).await,
            Some(1008),
            "closed without 1008"
        );
        let (status, _) = served.get("/api/terminals").await;
        assert_eq!(status, 200);
    })
    .await;
}

#[tokio::test]
async fn unfinished_request_heads_are_budgeted_together() {
    within(async {
        let served = Served::start(&[]).await;
        let addr = addr(&served);
        // A head well past 64 KiB is refused, not buffered (hyper's read
        // buffer may hold a little more than its cap in one read).
        let mut big = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n",
            "a".repeat(200 << 10)
        );
        let _ = big.write_all(head.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(WAIT, big.read_to_end(&mut answer)).await;
        assert!(
            answer.starts_with(b"HTTP/1.1 431"),
            "{:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        );

        let before = rss_kib(served.pid());
        let part = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}",
            "a".repeat(60 << 10)
        );
        let mut open = Vec::new();
        for _ in 0..2000 {
            let Ok(mut stream) = TcpStream::connect(&addr).await else {
                continue;
            };
            if stream.write_all(part.as_bytes()).await.is_ok() {
                open.push(stream);
            }
        }
        // Let serve read what it will (each read is counted on arrival).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        let mut grown = 0;
        while tokio::time::Instant::now() < deadline {
            grown = grown.max(rss_kib(served.pid()).saturating_sub(before));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("2000 unfinished 60 KiB heads: serve RSS +{grown} KiB");
        assert!(
            grown < GROWTH,
            "serve grew {grown} KiB holding unfinished heads"
        );
        // Meanwhile a whole request is answered.
        let (status, _) = served.get("/api/terminals").await;
        assert_eq!(status, 200);
        drop(open);
    })
    .await;
}

#[tokio::test]
async fn a_body_trickled_a_byte_at_a_time_is_cut_at_the_body_deadline() {
    within(async {
        let served = Served::start(&["--header-timeout", "3", "--body-timeout", "5"]).await;
        let addr = addr(&served);
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /api/terminals HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
            served.token
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = tokio::time::Instant::now();
        // A byte every 2 s never pauses past the header timeout (3 s).
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        let ended = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                tokio::select! {
                    read = stream.read(&mut chunk) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => answer.extend_from_slice(&chunk[..n]),
                    },
                    () = tokio::time::sleep(Duration::from_secs(2)) => {
                        if stream.write_all(b" ").await.is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .await;
        let took = started.elapsed();
        eprintln!(
            "trickled body cut after {took:?}: {:?}",
            String::from_utf8_lossy(&answer)
        );
        assert!(ended.is_ok(), "the trickled body was still open after 15 s");
    })
    .await;
}
