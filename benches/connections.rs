//! `serve`'s connection handling, beside a raw-tmux baseline from the same
//! run (`tmux -S SOCK list-sessions`: asking a tmux server for its
//! sessions, the closest raw counterpart of `GET /api/terminals`):
//!
//! 1. a fresh client's `GET /api/terminals` (new connection each time)
//!    with 0 idle sockets held, then with `BENCH_IDLE` (default 300) idle
//!    sockets held: median time to an answer, the answers' statuses, and
//!    the time until a 200 (the header timeout, 10 s, frees the slots);
//!    once as is and once under `ulimit -n 256`;
//! 2. the same fresh request over TLS (handshake included) against plain.
//!
//! `cargo bench --bench connections` (`BENCH_SAMPLES`, default 30).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_or, median, ms};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::CertificateDer};

/// A `serve` on a free port with its own directories; killed on drop.
struct Serve {
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
    addr: String,
    token: String,
}

impl Serve {
    async fn start(limit: Option<u32>, tls: Option<(&Path, &Path)>) -> Serve {
        let dir = tempfile::Builder::new()
            .prefix("tmuxeng")
            .tempdir_in("/tmp")
            .expect("temp dir");
        std::fs::create_dir_all(dir.path().join("rt")).expect("runtime dir");
        let bin = env!("CARGO_BIN_EXE_tmux-engine");
        let mut args = vec![
            "serve".to_owned(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
        ];
        if let Some((cert, key)) = tls {
            args.extend(["--tls-cert".to_owned(), cert.display().to_string()]);
            args.extend(["--tls-key".to_owned(), key.display().to_string()]);
        }
        let mut command = tokio::process::Command::new("sh");
        let limit = limit.map_or(String::new(), |n| format!("ulimit -n {n} && "));
        command
            .arg("-c")
            .arg(format!("{limit}exec \"$0\" \"$@\""))
            .arg(bin)
            .args(&args)
            .env("TMUX_ENGINE_STATE_DIR", dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", dir.path().join("rt"))
            .env("TMUX_ENGINE_SHELL", "/bin/sh")
            .env("TMUX_ENGINE_OWNER", "bench")
            .env("TMUX_ENGINE_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("tmux-engine serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .await
            .expect("the URL");
        let rest = line.trim().split_once("://").expect("a URL").1;
        let (addr, _code) = rest.split_once("/#code=").expect("a sign-in code");
        Serve {
            child,
            _dir: dir,
            addr: addr.to_owned(),
            token: TOKEN.to_owned(),
        }
    }
}

/// The token the bench's serve runs with (serve prints a code, not it).
const TOKEN: &str = "benchbenchbenchbenchbenchbench00";

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// One `GET /api/terminals` on `stream`; the status (0: no answer).
async fn get(mut stream: impl AsyncRead + AsyncWrite + Unpin, serve: &Serve) -> u16 {
    let request = format!(
        "GET /api/terminals HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\nconnection: close\r\n\r\n",
        serve.addr, serve.token
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    let text = String::from_utf8_lossy(&reply);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A fresh plain request: (time, status).
async fn fresh(serve: &Serve) -> (Duration, u16) {
    let started = Instant::now();
    let status = match TcpStream::connect(&serve.addr).await {
        Ok(stream) => get(stream, serve).await,
        Err(_) => 0,
    };
    (started.elapsed(), status)
}

/// A fresh TLS request, handshake included.
async fn fresh_tls(serve: &Serve, connector: &tokio_rustls::TlsConnector) -> Duration {
    let started = Instant::now();
    let tcp = TcpStream::connect(&serve.addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let stream = connector.connect(name, tcp).await.expect("handshake");
    assert_eq!(get(stream, serve).await, 200);
    started.elapsed()
}

fn raw_tmux_list(samples: usize) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let sock = dir.path().join("s");
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("tmux")
    };
    tmux(&["-f", "/dev/null", "new-session", "-d", "cat"]);
    let times = (0..samples)
        .map(|_| {
            let started = Instant::now();
            tmux(&["list-sessions"]);
            started.elapsed()
        })
        .collect();
    tmux(&["kill-server"]);
    median(times)
}

async fn idle_scenario(limit: Option<u32>, idle: usize, samples: usize) {
    let label = limit.map_or("no ulimit".to_owned(), |n| format!("ulimit -n {n}"));
    let serve = Serve::start(limit, None).await;
    let mut quiet = Vec::new();
    for _ in 0..samples {
        quiet.push(fresh(&serve).await.0);
    }
    let mut held = Vec::new();
    for _ in 0..idle {
        held.push(TcpStream::connect(&serve.addr).await.expect("idle socket"));
    }
    let opened = Instant::now();
    let mut busy = Vec::new();
    let (mut ok, mut refused, mut failed) = (0, 0, 0);
    for _ in 0..samples {
        let (time, status) = fresh(&serve).await;
        busy.push(time);
        match status {
            200 => ok += 1,
            503 => refused += 1,
            _ => failed += 1,
        }
    }
    let until_ok = loop {
        if fresh(&serve).await.1 == 200 {
            break opened.elapsed();
        }
        if opened.elapsed() > Duration::from_secs(60) {
            break Duration::MAX;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "{label}: fresh request, 0 idle: {}; with {idle} idle held: {} ({ok}x 200, {refused}x 503, {failed}x none); first 200 after {:.1} s",
        ms(median(quiet)),
        ms(median(busy)),
        until_ok.as_secs_f64()
    );
    drop(held);
}

async fn tls_scenario(samples: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("cert");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("cert file");
    std::fs::write(&key_path, key.serialize_pem()).expect("key file");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(cert.der().to_vec()))
        .expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let plain = Serve::start(None, None).await;
    let tls = Serve::start(None, Some((&cert_path, &key_path))).await;
    let (mut p, mut t) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        p.push(fresh(&plain).await.0);
        t.push(fresh_tls(&tls, &connector).await);
    }
    let (p, t) = (median(p), median(t));
    println!(
        "fresh request over TLS (handshake included): {} vs plain {} -> {:.2}x",
        ms(t),
        ms(p),
        t.as_secs_f64() / p.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let samples: usize = env_or("BENCH_SAMPLES", 30);
    let idle: usize = env_or("BENCH_IDLE", 300);
    println!(
        "raw tmux baseline: `tmux list-sessions` round trip {}",
        ms(raw_tmux_list(samples))
    );
    idle_scenario(None, idle, samples).await;
    idle_scenario(Some(256), idle, samples).await;
    tls_scenario(samples).await;
}
