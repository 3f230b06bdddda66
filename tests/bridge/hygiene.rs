//! Issue 14, items 4, 9 (pings) and 11 (WebSocket hygiene): a session
//! leader `serve` survives PTY viewers leaving; protocol violations close
//! with 1007/1002 and a close frame; a peer that stops answering pings is
//! dropped; a resize flood is coalesced.

use futures_util::SinkExt;
use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

use super::{Frame, Received, Served, WAIT};
use crate::cli::Cli;
use crate::support::{poll, within};

/// `serve ARGS` started through util-linux `setsid`, so it leads its own
/// session as under systemd or a container init: a terminal it opens
/// without `O_NOCTTY` would become its controlling terminal.
async fn start_session_leader(cli: Cli, args: &[&str]) -> Served {
    let mut argv = vec!["serve", "--listen", "127.0.0.1:0"];
    argv.extend_from_slice(args);
    let inner = cli.command(&argv);
    let mut command = std::process::Command::new("setsid");
    if rustix::process::geteuid().is_root() {
        // Root could steal the pty back for its client (`TIOCSCTTY` with
        // CAP_SYS_ADMIN), hiding the hang-up; a service or a container
        // without that capability cannot, so neither may this serve.
        command.args(["setpriv", "--bounding-set=-sys_admin", "--"]);
    }
    let mut command = tokio::process::Command::from(super::wrapped(command, &inner));
    // Not a group leader when spawned, so `setsid` execs in place (no
    // fork): the child is serve itself.
    command.stdin(std::process::Stdio::null());
    let (child, line, token) = super::spawn_serve(command).await;
    Served::from_url(child, cli, &line, &token)
}

/// The session id of `pid` (field 6 of `/proc/PID/stat`).
fn session_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; fields count from its `)`.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(3).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_session_leader_serve_outlives_its_pty_viewers() {
    within(async {
        let cli = Cli::new();
        let file = super::token_file(
            &cli,
            "ownerownerownerow tester\nlooklooklooklookl tester read-only\n",
        );
        let mut served = start_session_leader(cli, &["--token-file", &file]).await;
        let pid = served.pid();
        assert_eq!(session_of(pid), pid, "serve must lead its session");
        served.token = "ownerownerownerow".to_owned();
        served.spawn(r#"{"name":"p","command":["sh"]}"#).await;
        for (round, token) in ["ownerownerownerow", "looklooklooklookl"]
            .iter()
            .cycle()
            .take(6)
            .enumerate()
        {
            served.token = (*token).to_owned();
            let mut ws = served.ws("p", "transport=pty", None).await;
            let hello = ws.text().await;
            assert_eq!(hello["transport"], "pty", "round {round}");
            // Drawn: the client is attached on the pty before it leaves.
            let mut seen = Received::default();
            if hello["read_only"] == false {
                ws.input(format!("echo round-$((40+{round}))\r").as_bytes())
                    .await;
                seen.until(&mut ws, &format!("round-{}", 40 + round)).await;
            } else {
                let first = ws.next().await;
                assert!(
                    matches!(first, super::Frame::Binary(_)),
                    "round {round}: the read-only client drew nothing: {first:?}"
                );
            }
            ws.close().await;
            // The viewer's client is gone (its pty hung up) and serve still
            // answers: the hang-up reached no controlling terminal of its.
            served.token = "ownerownerownerow".to_owned();
            let (status, _) = served.get("/api/terminals/p").await;
            assert_eq!(status, 200, "round {round}: serve stopped answering");
        }
        served.token = "ownerownerownerow".to_owned();
        // A last viewer's hang-up has had every chance to arrive: the
        // terminal has gone through one more attach and detach.
        let mut ws = served.ws("p", "transport=pty", None).await;
        ws.text().await;
        ws.close().await;
        poll("the last pty client to leave", WAIT, || async {
            let (status, _) = served.get("/api/terminals/p").await;
            (status == 200).then_some(())
        })
        .await;
        assert!(
            served.child.try_wait().unwrap().is_none(),
            "serve exited after a pty viewer left"
        );
        served
            .call(served.request(Method::DELETE, "/api/terminals/p"))
            .await;
    })
    .await;
}

/// A WebSocket client written by hand, for what tungstenite refuses to
/// send (bad UTF-8, reserved bits, unmasked frames) and for a peer that
/// reads nothing and answers nothing.
struct Raw {
    stream: TcpStream,
    /// Bytes read but not yet parsed.
    buf: Vec<u8>,
}

/// A frame the server sent: its opcode and payload.
#[derive(Debug)]
struct Sent {
    opcode: u8,
    payload: Vec<u8>,
}

impl Raw {
    /// Upgrades a connection to `target`'s attach route with `query`.
    async fn connect(served: &Served, target: &str, query: &str) -> Raw {
        let url = served.ws_url(target, query);
        let (host, path) = url.trim_start_matches("ws://").split_once('/').unwrap();
        let mut stream = TcpStream::connect(host).await.unwrap();
        let request = format!(
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {}\r\n\r\n",
            served.token
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Raw {
            stream,
            buf: Vec::new(),
        };
        let end = loop {
            if let Some(at) = raw.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            assert!(raw.fill().await, "closed during the handshake");
        };
        let head = String::from_utf8_lossy(&raw.buf[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        raw.buf.drain(..end);
        raw
    }

    /// Reads more bytes; `false` at the end of the stream.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0; 64 * 1024];
        let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
            .await
            .expect("nothing from the server in time")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// Sends one frame: `head` is its first byte (FIN, RSV, opcode),
    /// masked as a client must unless `masked` is false.
    async fn send(&mut self, head: u8, payload: &[u8], masked: bool) {
        let mut frame = vec![head];
        let mask_bit = if masked { 0x80 } else { 0 };
        match payload.len() {
            len @ 0..=125 => frame.push(mask_bit | u8::try_from(len).unwrap()),
            len => {
                frame.push(mask_bit | 126);
                frame.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
            }
        }
        if masked {
            let key = [0x12, 0x34, 0x56, 0x78];
            frame.extend_from_slice(&key);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        } else {
            frame.extend_from_slice(payload);
        }
        // The server may already have closed: what it sent is what counts.
        let _ = self.stream.write_all(&frame).await;
    }

    /// The next whole frame the server sent; `None` once the connection
    /// ended without one.
    async fn frame(&mut self) -> Option<Sent> {
        loop {
            if let Some((sent, used)) = parse_frame(&self.buf) {
                self.buf.drain(..used);
                return Some(sent);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// The close code the server sent, skipping what came before it;
    /// `None` when it dropped the connection without a close frame.
    async fn close_code(&mut self) -> Option<u16> {
        loop {
            let sent = self.frame().await?;
            if sent.opcode == 0x8 {
                return Some(
                    sent.payload
                        .get(..2)
                        .map_or(1005, |code| u16::from_be_bytes([code[0], code[1]])),
                );
            }
        }
    }
}

/// One unmasked server frame at the start of `buf`, and its length.
fn parse_frame(buf: &[u8]) -> Option<(Sent, usize)> {
    let (&head, rest) = buf.split_first()?;
    let (&len, rest) = rest.split_first()?;
    let (len, rest) = match len & 0x7f {
        126 => (
            usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().unwrap())),
            &rest[2..],
        ),
        127 => (
            usize::try_from(u64::from_be_bytes(rest.get(..8)?.try_into().unwrap())).unwrap(),
            &rest[8..],
        ),
        short => (usize::from(short), rest),
    };
    let payload = rest.get(..len)?.to_vec();
    let used = buf.len() - rest.len() + len;
    Some((
        Sent {
            opcode: head & 0x0f,
            payload,
        },
        used,
    ))
}

#[tokio::test]
async fn protocol_violations_close_with_1007_or_1002_and_a_close_frame() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"t","command":["sh"]}"#).await;
        // (what, first byte, payload, masked, close code)
        let cases: &[(&str, u8, &[u8], bool, u16)] = &[
            ("text that is not UTF-8", 0x81, b"ok\xff\xfe", true, 1007),
            ("truncated UTF-8", 0x81, b"\xe2\x82", true, 1007),
            ("an unmasked frame", 0x82, b"abc", false, 1002),
            ("a reserved bit", 0xc2, b"abc", true, 1002),
            ("an unknown opcode", 0x83, b"abc", true, 1002),
            ("a continuation of nothing", 0x80, b"abc", true, 1002),
            ("a fragmented ping", 0x09, b"", true, 1002),
            ("a ping over 125 bytes", 0x89, &[b'p'; 126], true, 1002),
        ];
        for (what, head, payload, masked, want) in cases {
            let mut raw = Raw::connect(&served, "t", "").await;
            raw.send(*head, payload, *masked).await;
            assert_eq!(raw.close_code().await, Some(*want), "{what}");
        }
        // A text frame split across fragments is judged whole.
        let mut raw = Raw::connect(&served, "t", "").await;
        raw.send(0x01, b"{\"type\":\"resize\",\xe2", true).await;
        raw.send(0x80, b"\x28\xa1}", true).await;
        assert_eq!(raw.close_code().await, Some(1007), "fragmented bad UTF-8");
        // Still serving, and a good viewer still attaches.
        let mut ws = served.ws("t", "", None).await;
        assert_eq!(ws.text().await["type"], "hello");
        served
            .call(served.request(Method::DELETE, "/api/terminals/t"))
            .await;
    })
    .await;
}

/// The TCP state of the connection from local port `local` to remote port
/// `remote` as `/proc/net/tcp` shows it (`08` is CLOSE_WAIT: the peer
/// closed). Both ports: a local port alone also names an older socket of
/// another test (one in TIME_WAIT, or a connection to another server,
/// which may share an ephemeral port), and the first such line read
/// stood in for this one.
fn tcp_state(local: u16, remote: u16) -> Option<String> {
    let port = |address: &str| u16::from_str_radix(address.rsplit(':').next()?, 16).ok();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ours = port(fields.get(1)?)? == local && port(fields.get(2)?)? == remote;
        ours.then(|| fields[3].to_owned())
    })
}

#[tokio::test]
async fn a_peer_that_stops_answering_pings_is_closed_1001_and_dropped() {
    within(async {
        let served = Served::start(&["--ping-interval", "1"]).await;
        served.spawn(r#"{"name":"t","command":["sh"]}"#).await;
        // A live viewer, read all along (tungstenite answers each ping).
        let mut live = served.ws("t", "", None).await;
        live.text().await;
        let reader = tokio::spawn(async move {
            let mut seen = Received::default();
            seen.until(&mut live, "alive-42").await;
            live
        });
        // A dead one: upgraded, then never read and never answering.
        let mut dead = Raw::connect(&served, "t", "").await;
        let local = dead.stream.local_addr().unwrap().port();
        let remote = dead.stream.peer_addr().unwrap().port();
        poll("the server to close the silent peer", WAIT, || async {
            (tcp_state(local, remote).as_deref() == Some("08")).then_some(())
        })
        .await;
        // What it had sent meanwhile: pings, then a close frame (1001).
        let mut pings = 0;
        let code = loop {
            match dead.frame().await {
                Some(Sent { opcode: 0x9, .. }) => pings += 1,
                Some(Sent {
                    opcode: 0x8,
                    payload,
                }) => break Some(u16::from_be_bytes([payload[0], payload[1]])),
                Some(_) => {}
                None => break None,
            }
        };
        assert!(pings >= 1, "no ping before the close");
        assert_eq!(code, Some(1001), "a close frame before the drop");
        // The live viewer outlived the dead one's two intervals.
        let (status, _) = served
            .post(
                "/api/terminals/t/send",
                r#"{"text":"echo alive-$((40+2))","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200);
        let live = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
        live.close().await;
        served
            .call(served.request(Method::DELETE, "/api/terminals/t"))
            .await;
    })
    .await;
}

#[tokio::test]
async fn a_resize_flood_is_coalesced_and_settles_on_the_last_size() {
    within(async {
        let served = Served::start(&[]).await;
        served
            .spawn(r#"{"name":"t","command":["sh"],"cols":80,"rows":24}"#)
            .await;
        let mut ws = served.ws("t", "", None).await;
        ws.text().await;
        const FLOOD: u16 = 10_000;
        for n in 0..FLOOD {
            // Every frame a different size from the one before it.
            let (cols, rows) = (81 + n % 40, 25 + n % 2);
            let frame = format!(r#"{{"type":"resize","cols":{cols},"rows":{rows}}}"#);
            ws.socket.feed(Message::Text(frame.into())).await.unwrap();
        }
        ws.socket
            .feed(Message::Text(
                r#"{"type":"resize","cols":123,"rows":33}"#.into(),
            ))
            .await
            .unwrap();
        ws.socket
            .feed(Message::Binary(b"echo flood-$((6*7))\r".to_vec().into()))
            .await
            .unwrap();
        ws.socket.flush().await.unwrap();
        // The input follows the flood: once it echoes, every resize before
        // it was applied or replaced. Count what the terminal went through.
        let mut resizes = 0;
        let mut output = Vec::new();
        while !output.windows(8).any(|w| w == b"flood-42") {
            match ws.next().await {
                Frame::Text(frame) if frame["type"] == "resize" => resizes += 1,
                Frame::Binary(bytes) => output.extend_from_slice(&bytes),
                Frame::Text(_) => {}
                Frame::Close(code) => panic!("closed {code} during the flood"),
            }
        }
        // One tmux command per frame would have resized it ~10k times.
        assert!(
            resizes < usize::from(FLOOD / 10),
            "{resizes} resizes for {FLOOD} frames: not coalesced"
        );
        // The last size wins.
        poll("the last size", WAIT, || async {
            let (_, screen) = served.get("/api/terminals/t/screen").await;
            (screen["cols"] == 123 && screen["rows"] == 33).then_some(())
        })
        .await;
        served
            .call(served.request(Method::DELETE, "/api/terminals/t"))
            .await;
    })
    .await;
}
