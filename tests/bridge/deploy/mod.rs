//! `serve` as it is deployed: connection limits (header and idle
//! timeouts, the connection cap, a low fd limit), TLS, a Unix socket, a
//! base path, the token's sources, and a real nginx in front of it. Each
//! test runs the real binary with its own directories, driven by raw
//! HTTP/1.1 over TCP, TLS or a Unix socket.

mod activation;
mod connections;
mod flags;
mod manifests;
mod nginx;
mod nodes;
mod probes;
mod tls;

use std::process::Stdio;
use std::sync::OnceLock;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Child;

use super::WAIT;
use crate::cli::Cli;

/// A running `serve`, killed on drop (then its terminals, by the [`Cli`]).
pub(crate) struct Serve {
    _child: Child,
    /// Its directories; dropped after the child.
    pub(crate) cli: Cli,
    /// The first line it printed (the URL, or `unix:PATH /path`).
    pub(crate) line: String,
    /// The token it runs with (empty when the test named its own).
    token: String,
}

impl Serve {
    /// `serve ARGS...` (no `--listen` added) on `cli`'s directories.
    pub(crate) async fn start(cli: Cli, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        let command = cli.command(&argv);
        Serve::spawn(cli, command, env).await
    }

    /// As [`start`](Serve::start), under `ulimit -n LIMIT`.
    pub(crate) async fn start_limited(cli: Cli, limit: u32, args: &[&str]) -> Serve {
        Serve::start_limited_with(cli, limit, args, None).await
    }

    /// As [`start_limited`](Serve::start_limited), its warnings written
    /// to `log` when given.
    pub(crate) async fn start_limited_with(
        cli: Cli,
        limit: u32,
        args: &[&str],
        log: Option<&std::path::Path>,
    ) -> Serve {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        let inner = cli.command(&argv);
        let mut shell = std::process::Command::new("sh");
        shell.arg("-c").arg(match log {
            Some(log) => format!(
                "ulimit -n {limit} && exec \"$0\" \"$@\" 2>'{}'",
                log.display()
            ),
            None => format!("ulimit -n {limit} && exec \"$0\" \"$@\""),
        });
        let mut command = super::wrapped(shell, &inner);
        command.stdin(Stdio::null());
        let env: &[(&str, &str)] = if log.is_some() {
            &[("TMUX_ENGINE_LOG", "warn")]
        } else {
            &[]
        };
        Serve::spawn(cli, command, env).await
    }

    async fn spawn(cli: Cli, command: std::process::Command, env: &[(&str, &str)]) -> Serve {
        let mut command = tokio::process::Command::from(command);
        command.envs(env.iter().copied());
        let (child, line, token) = super::spawn_serve(command).await;
        Serve {
            _child: child,
            cli,
            line,
            token,
        }
    }

    /// `127.0.0.1:PORT` of a printed `http(s)://127.0.0.1:PORT/...` URL.
    pub(crate) fn addr(&self) -> String {
        let rest = self.line.split_once("://").unwrap().1;
        rest.split('/').next().unwrap().to_owned()
    }

    /// The token it runs with (empty when the test named its own).
    pub(crate) fn token(&self) -> String {
        self.token.clone()
    }
}

/// Runs `serve ARGS...` that must refuse to start: its exit status and
/// stderr (a serve that starts instead fails the test at [`WAIT`]).
pub(crate) async fn refused(cli: &Cli, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut argv = vec!["serve"];
    argv.extend_from_slice(args);
    let mut command = tokio::process::Command::from(cli.command(&argv));
    command
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(WAIT, command.output())
        .await
        .expect("serve kept running instead of refusing")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "serve started: {stdout} {stderr}");
    assert!(stdout.is_empty(), "serve printed a URL: {stdout}");
    stderr
}

/// The `--allow-host NAME` arguments that let `Host: NAME` through, when
/// this build has the Host allow-list (a Unix socket has no address of its
/// own to match); none before it existed.
pub(crate) fn allow_host(name: &str) -> Vec<String> {
    static KNOWN: OnceLock<bool> = OnceLock::new();
    let known = *KNOWN.get_or_init(|| {
        let help = Cli::new().run(&["serve", "--help"]);
        String::from_utf8_lossy(&help.stdout).contains("--allow-host")
    });
    if known {
        vec!["--allow-host".to_owned(), name.to_owned()]
    } else {
        Vec::new()
    }
}

/// A response read by [`exchange`].
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    /// The head, lowercased.
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Reply {
    /// The body as JSON (panics when it is not).
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// Sends one HTTP/1.1 request (`Connection: close`) on `stream` and reads
/// the whole response.
pub(crate) async fn exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    method: &str,
    host: &str,
    path: &str,
    token: &str,
    body: Option<&str>,
) -> Reply {
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    if !token.is_empty() {
        request.push_str(&format!("authorization: Bearer {token}\r\n"));
    }
    if let Some(body) = body {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        request.push_str("\r\n");
    }
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(WAIT, async {
        // A reset after a complete answer (a refusal) is still an answer.
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("no response in time");
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete response: {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head:?}"));
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply { status, head, body }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Whether the server closes `stream` (EOF or reset) within [`WAIT`],
/// after the client sent `sent`.
pub(crate) async fn closed_by_server(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    sent: &[u8],
) -> bool {
    if !sent.is_empty() {
        stream.write_all(sent).await.unwrap();
    }
    let mut sink = [0u8; 1024];
    tokio::time::timeout(WAIT, async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}
