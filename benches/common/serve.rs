//! A `tmux-engine serve` for the benches that measure the bridge: the
//! built binary on a free loopback port, with its own state and runtime
//! directories, and every terminal of its registry killed on drop
//! (terminals outlive `serve` by design).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A client WebSocket of the bridge.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A running `serve`.
pub struct Serve {
    pub child: Child,
    pub dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub token: String,
    pub http: reqwest::Client,
}

impl Serve {
    /// `serve --listen 127.0.0.1:0 ARGS...`, once it printed its URL.
    pub fn start(args: &[&str]) -> Serve {
        let dir = tempfile::Builder::new()
            .prefix("tmuxeng")
            .tempdir_in("/tmp")
            .expect("temp dir");
        std::fs::create_dir_all(dir.path().join("rt")).expect("runtime dir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
            .env("TMUX_ENGINE_STATE_DIR", dir.path().join("state"))
            .env("TMUX_ENGINE_RUNTIME_DIR", dir.path().join("rt"))
            .env("TMUX_ENGINE_SHELL", "/bin/sh")
            .env("TMUX_ENGINE_OWNER", "bench")
            .env("TMUX_ENGINE_TOKEN", BENCH_TOKEN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("tmux-engine serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the URL");
        let (base, _code) = line
            .trim()
            .split_once("/#code=")
            .expect("a URL with a sign-in code");
        Serve {
            child,
            dir,
            base: base.to_owned(),
            token: BENCH_TOKEN.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// Spawns a terminal running `command` (argv); its id.
    pub async fn spawn(&self, command: &[&str]) -> String {
        let answer: serde_json::Value = self
            .http
            .post(format!("{}/api/terminals", self.base))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({ "command": command }))
            .send()
            .await
            .expect("spawn")
            .json()
            .await
            .expect("a snapshot");
        answer["id"]
            .as_str()
            .unwrap_or_else(|| panic!("spawn failed: {answer}"))
            .to_owned()
    }

    /// A control viewer of terminal `id`.
    pub async fn ws(&self, id: &str) -> Socket {
        let host = self.base.trim_start_matches("http://");
        let url = format!("ws://{host}/api/terminals/{id}/attach");
        let mut request =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
                .expect("a request");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.token).parse().expect("a header"),
        );
        tokio_tungstenite::connect_async(request)
            .await
            .expect("websocket")
            .0
    }

    /// The server's resident memory in KiB.
    pub fn rss(&self) -> u64 {
        super::rss_kib(self.child.id())
    }
}

/// The token every bench serve runs with (`$TMUX_ENGINE_TOKEN`): serve
/// prints a one-time sign-in code, never its token.
pub const BENCH_TOKEN: &str = "benchbenchbenchbenchbenchbench00";

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // rt/<registry directory>/<server directory>/tmux.sock
        for registry in std::fs::read_dir(self.dir.path().join("rt"))
            .into_iter()
            .flatten()
            .flatten()
        {
            for server in std::fs::read_dir(registry.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = Command::new("tmux")
                    .arg("-S")
                    .arg(server.path().join("tmux.sock"))
                    .arg("kill-server")
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}
