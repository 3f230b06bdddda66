//! `tmux-engine serve` as a user runs it: the binary on a free loopback
//! port with its own state and runtime directories, driven over HTTP and
//! WebSockets (and a real browser in `browser.rs`).
#![allow(clippy::unwrap_used)]

mod assets;
mod browser;
mod crash;
mod deploy;
mod drain;
mod fallback;
mod files;
mod hygiene;
mod identity;
mod memory;
mod page;
mod page_early;
mod page_files;
mod page_history;
mod page_rename;
mod page_typing;
mod phone;
mod pool;
mod quota;
mod read_only;
mod recreated;
mod reflow;
mod revoked;
mod routes;
mod security;
mod signin;
mod sizes;
mod stale;
mod stall;
mod viewers;
mod ws;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Message, http::HeaderValue};

use crate::cli::Cli;

/// How long any one wait in these tests may take.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Spawns `command` (a `serve`, stdout piped, killed on drop) and reads
/// the first line it prints: its URL (a one-time `#code=` sign-in link).
/// Unless the command names its own credentials (`--token`,
/// `--token-file`, `--no-auth`, `$TMUX_ENGINE_TOKEN`), it gets a fresh
/// token in `$TMUX_ENGINE_TOKEN`, returned third (else empty), for the
/// test's Bearer requests: serve prints no token in its URL.
pub(crate) async fn spawn_serve(mut command: tokio::process::Command) -> (Child, String, String) {
    let std = command.as_std();
    let names_its_own = std.get_args().any(|arg| {
        ["--token", "--token-file", "--no-auth"]
            .iter()
            .any(|flag| arg.to_str().is_some_and(|arg| arg.starts_with(flag)))
    });
    let from_env = std
        .get_envs()
        .find(|(key, _)| *key == "TMUX_ENGINE_TOKEN")
        .and_then(|(_, value)| value.map(|v| v.to_string_lossy().into_owned()));
    let token = match (names_its_own, from_env) {
        (_, Some(token)) => token,
        (true, None) => String::new(),
        (false, None) => {
            let token = format!("test{:028x}", rand_u128());
            command.env("TMUX_ENGINE_TOKEN", &token);
            token
        }
    };
    command
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::time::timeout(WAIT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("serve printed no URL")
        .unwrap();
    assert!(!line.is_empty(), "serve exited before printing its URL");
    (child, line.trim().to_owned(), token)
}

/// 112 random-enough bits for a test token (the clock and a counter).
fn rand_u128() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (now ^ (u128::from(COUNT.fetch_add(1, Ordering::Relaxed)) << 64)
        ^ u128::from(std::process::id()))
        & ((1 << 112) - 1)
}

/// `inner` (a [`Cli::command`]) run through `wrapper` (`setsid`, `sh -c
/// ...`): its program and arguments appended, its environment carried
/// over, removals included.
pub(crate) fn wrapped(
    mut wrapper: std::process::Command,
    inner: &std::process::Command,
) -> std::process::Command {
    wrapper.arg(inner.get_program()).args(inner.get_args());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => wrapper.env(key, value),
            None => wrapper.env_remove(key),
        };
    }
    wrapper
}

/// Writes a token file of `lines` beside `cli`'s runtime directory, 0600
/// (serve refuses one that group or others can read: `UNSAFE_FILE`), and
/// returns its path as text for `--token-file`.
pub(crate) fn token_file(cli: &Cli, lines: &str) -> String {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = cli.runtime().with_file_name("tokens");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    file.write_all(lines.as_bytes()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A running `serve`, killed on drop (then its terminals, by the [`Cli`]).
pub(crate) struct Served {
    child: Child,
    pub(crate) cli: Cli,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The token it runs with (empty with `--token-file` or `--no-auth`).
    pub(crate) token: String,
    /// The one-time sign-in code it printed (empty when none).
    pub(crate) code: String,
    http: reqwest::Client,
}

impl Served {
    /// `serve --listen 127.0.0.1:0 ARGS...`, once it printed its URL.
    pub(crate) async fn start(args: &[&str]) -> Served {
        Served::start_with(Cli::new(), args, &[]).await
    }

    /// As [`start`](Served::start) on `cli`'s directories, with extra
    /// environment variables.
    pub(crate) async fn start_with(cli: Cli, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut argv = vec!["serve", "--listen", "127.0.0.1:0"];
        argv.extend_from_slice(args);
        let mut command = tokio::process::Command::from(cli.command(&argv));
        command.envs(env.iter().copied());
        let (child, line, token) = spawn_serve(command).await;
        let served = Served::from_url(child, cli, &line, &token);
        assert!(
            served.base.starts_with("http://127.0.0.1:"),
            "printed {line:?}"
        );
        served
    }

    /// A `serve` already spawned, from the URL it printed and its token.
    pub(crate) fn from_url(child: Child, cli: Cli, url: &str, token: &str) -> Served {
        let (base, code) = url
            .split_once("/#code=")
            .unwrap_or((url.trim_end_matches('/'), ""));
        Served {
            child,
            cli,
            base: base.to_owned(),
            token: token.to_owned(),
            code: code.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// A fresh one-time sign-in URL (`BASE/#code=CODE`), minted with the
    /// token as `tmux-engine link` does.
    pub(crate) async fn sign_in_url(&self, body: &str) -> String {
        format!("{}/#code={}", self.base, self.sign_in_code(body).await)
    }

    /// A fresh one-time sign-in code, minted with the token from a
    /// `POST /api/links` body.
    pub(crate) async fn sign_in_code(&self, body: &str) -> String {
        let (status, minted) = self.post("/api/links", body).await;
        assert_eq!(status, 201, "{minted}");
        minted["code"].as_str().unwrap().to_owned()
    }

    /// The server's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// A request to `path` with the token as Bearer.
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// Sends and returns the status and JSON body.
    pub(crate) async fn call(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    /// `GET path` with the token.
    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        self.call(self.request(reqwest::Method::GET, path)).await
    }

    /// `POST path` with a JSON body (labelled so: the bridge refuses any
    /// other type) and the token.
    pub(crate) async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.call(
            self.request(reqwest::Method::POST, path)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_owned()),
        )
        .await
    }

    /// The tmux server pid of terminal `id`, from its record (rewritten
    /// when the terminal is rebuilt).
    pub(crate) fn server_pid(&self, id: &str) -> u32 {
        let path = self
            .cli
            .state()
            .join("terminals")
            .join(format!("{id}.json"));
        let record: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        u32::try_from(record["locator"]["server_pid"].as_u64().unwrap()).unwrap()
    }

    /// Spawns a terminal from a JSON body; panics unless 201.
    pub(crate) async fn spawn(&self, body: &str) -> Value {
        let (status, snapshot) = self.post("/api/terminals", body).await;
        assert_eq!(status, 201, "{snapshot}");
        snapshot
    }

    /// The WebSocket URL of `target` with `query`.
    pub(crate) fn ws_url(&self, target: &str, query: &str) -> String {
        let host = self.base.trim_start_matches("http://");
        format!("ws://{host}/api/terminals/{target}/attach?{query}")
    }

    /// Connects a WebSocket, with an `Origin` header when given; the
    /// token goes as `Authorization: Bearer` unless the query names one
    /// (which serve never accepts: a test of that).
    pub(crate) async fn ws(&self, target: &str, query: &str, origin: Option<&str>) -> Ws {
        let mut request = self.ws_url(target, query).into_client_request().unwrap();
        if !query.contains("token=") {
            request.headers_mut().insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {}", self.token)).unwrap(),
            );
        }
        if let Some(origin) = origin {
            request
                .headers_mut()
                .insert("origin", HeaderValue::from_str(origin).unwrap());
        }
        let (socket, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .unwrap()
            .unwrap();
        Ws { socket }
    }

    /// SIGKILL (a crash), waited for; its directories, for the next one.
    pub(crate) async fn crash(mut self) -> Cli {
        self.child.start_kill().unwrap();
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        self.cli
    }

    /// SIGTERM, then the exit status.
    pub(crate) async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.pid()).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap()
            .unwrap()
    }
}

/// A WebSocket request to `url` carrying `token` as `Authorization:
/// Bearer` (serve takes no token in a URL).
pub(crate) fn ws_request(
    url: &str,
    token: &str,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    request
}

/// One frame as the tests see it.
#[derive(Debug)]
pub(crate) enum Frame {
    Text(Value),
    Binary(Vec<u8>),
    /// The close code (1005 when none was given).
    Close(u16),
}

/// A client WebSocket.
pub(crate) struct Ws {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl
    From<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    > for Ws
{
    fn from(
        socket: tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) -> Ws {
        Ws { socket }
    }
}

impl Ws {
    /// The next text, binary or close frame (pings skipped).
    pub(crate) async fn next(&mut self) -> Frame {
        loop {
            let message = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .expect("no frame in time");
            match message {
                Some(Ok(Message::Text(text))) => {
                    return Frame::Text(serde_json::from_str(&text).unwrap());
                }
                Some(Ok(Message::Binary(bytes))) => return Frame::Binary(bytes.to_vec()),
                Some(Ok(Message::Close(frame))) => {
                    return Frame::Close(frame.map_or(1005, |f| u16::from(f.code)));
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return Frame::Close(1006),
            }
        }
    }

    /// The next frame, which must be a text frame.
    pub(crate) async fn text(&mut self) -> Value {
        match self.next().await {
            Frame::Text(value) => value,
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    /// The close code and reason, skipping whatever comes before them.
    pub(crate) async fn close_frame(&mut self) -> (u16, String) {
        loop {
            let message = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .expect("no frame in time");
            match message {
                Some(Ok(Message::Close(frame))) => {
                    return frame.map_or((1005, String::new()), |f| {
                        (u16::from(f.code), f.reason.to_string())
                    });
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return (1006, String::new()),
            }
        }
    }

    /// A client WebSocket on `request`.
    pub(crate) async fn connect(
        request: tokio_tungstenite::tungstenite::handshake::client::Request,
    ) -> Ws {
        let (socket, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
            .await
            .unwrap()
            .unwrap();
        Ws { socket }
    }

    /// The close code, skipping whatever comes before it.
    pub(crate) async fn close_code(&mut self) -> u16 {
        loop {
            if let Frame::Close(code) = self.next().await {
                return code;
            }
        }
    }

    /// Sends input bytes.
    pub(crate) async fn input(&mut self, bytes: &[u8]) {
        self.socket
            .send(Message::Binary(bytes.to_vec().into()))
            .await
            .unwrap();
    }

    /// Sends input bytes; `false` when the server already closed.
    pub(crate) async fn try_input(&mut self, bytes: &[u8]) -> bool {
        self.socket
            .send(Message::Binary(bytes.to_vec().into()))
            .await
            .is_ok()
    }

    /// Sends a text frame.
    pub(crate) async fn send_text(&mut self, text: &str) {
        self.socket.send(Message::Text(text.into())).await.unwrap();
    }

    /// Closes from the client side (1000).
    pub(crate) async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}

/// Bytes a viewer received, by stream offset: what resume tests compare.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Offset of the next byte expected.
    pub(crate) offset: u64,
    /// Every live byte since the last snapshot.
    pub(crate) bytes: Vec<u8>,
    /// Offset of `bytes[0]`.
    pub(crate) start: u64,
    /// The last snapshot's repaint.
    pub(crate) repaint: Vec<u8>,
}

impl Received {
    /// Reads frames until `needle` shows in the live bytes or the last
    /// repaint (a lagging viewer may see it only there); a snapshot
    /// restarts the record at its offset.
    pub(crate) async fn until(&mut self, ws: &mut Ws, needle: &str) {
        let contains = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
        // Only the new bytes (and a needle's length before them) are
        // searched: a flood must not cost quadratic time.
        let mut searched = 0;
        let mut snapshot_next = false;
        loop {
            let from = searched.min(self.bytes.len()).saturating_sub(needle.len());
            if contains(&self.bytes[from..]) || contains(&self.repaint) {
                return;
            }
            searched = self.bytes.len();
            match ws.next().await {
                Frame::Text(value) if value["type"] == "snapshot" => {
                    self.offset = value["offset"].as_u64().unwrap();
                    self.start = self.offset;
                    self.bytes.clear();
                    searched = 0;
                    snapshot_next = true;
                }
                Frame::Text(_) => {}
                Frame::Binary(bytes) if snapshot_next => {
                    snapshot_next = false;
                    self.repaint = bytes;
                }
                Frame::Binary(bytes) => {
                    self.offset += bytes.len() as u64;
                    self.bytes.extend_from_slice(&bytes);
                }
                Frame::Close(code) => panic!("closed with {code} before {needle:?}"),
            }
        }
    }
}
