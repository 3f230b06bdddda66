//! serve behind a real nginx (Debian's package, installed by `.ci/run`):
//! serve on a Unix socket with a base path, nginx on a free loopback port
//! proxying that path with docs/serve.md's location block; the page, an API
//! call and a WebSocket attach go through it.

use std::path::Path;
use std::process::Stdio;

use tokio::net::TcpStream;

use super::{Serve, allow_host, exchange};
use crate::cli::Cli;
use crate::support::within;

/// docs/serve.md's `location` block ("serve behind nginx"), for `socket`.
fn location(socket: &Path) -> String {
    format!(
        r#"
        location /terminals/ {{
            proxy_pass http://unix:{socket}:;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 1h;
            proxy_buffering off;
        }}"#,
        socket = socket.display()
    )
}

/// A whole nginx configuration rooted in `dir` (pid, logs and temp files
/// there), listening on `port`.
fn config(dir: &Path, port: u16, socket: &Path) -> String {
    // As root nginx would hand its workers to `nobody`, who cannot open
    // serve's 0600 socket: keep them as this user.
    let user = if rustix::process::geteuid().is_root() {
        "user root root;"
    } else {
        ""
    };
    let d = dir.display();
    format!(
        r#"{user}
# One process: a worker of a SIGKILLed master would outlive the test.
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    server {{
        listen 127.0.0.1:{port};
        {location}
    }}
}}
"#,
        location = location(socket)
    )
}

/// nginx, stopped on drop.
pub(super) struct Nginx(tokio::process::Child);

impl Nginx {
    /// Starts `nginx` with the configuration `conf`, its prefix and error
    /// log in `root`, and waits until it accepts connections on `host`.
    pub(super) async fn start(nginx: &Path, root: &Path, conf: &Path, host: &str) -> Nginx {
        let child = tokio::process::Command::new(nginx)
            .arg("-c")
            .arg(conf)
            .arg("-p")
            .arg(root)
            // Not the compiled-in /var/log/nginx, which a user cannot write.
            .arg("-e")
            .arg(root.join("error.log"))
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let nginx = Nginx(child);
        crate::support::poll("nginx listening", super::super::WAIT, || async {
            TcpStream::connect(host).await.ok()
        })
        .await;
        nginx
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

pub(super) fn nginx_binary() -> Option<std::path::PathBuf> {
    which::which("nginx")
        .ok()
        .or_else(|| Some(Path::new("/usr/sbin/nginx").to_owned()).filter(|p| p.exists()))
}

#[tokio::test]
async fn serve_behind_nginx_on_a_unix_socket_under_a_base_path() {
    // No skip: a test that cannot run its tool fails (scripts/install-deps).
    let nginx = nginx_binary().expect("nginx is not installed: run scripts/install-deps");
    within(async {
        let cli = Cli::new();
        let root = cli.state().with_file_name("nginx");
        std::fs::create_dir_all(&root).unwrap();
        let socket = cli.state().with_file_name("serve.sock");
        // A free port: bind, note it, release it for nginx.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host = format!("127.0.0.1:{port}");
        let mut args = vec![
            "--listen".to_owned(),
            format!("unix:{}", socket.display()),
            "--base-path".to_owned(),
            "/terminals".to_owned(),
            "--allow-origin".to_owned(),
            format!("http://{host}"),
        ];
        args.extend(allow_host(&host));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let served = Serve::start(cli, &args, &[]).await;
        let token = served.token();
        let conf = root.join("nginx.conf");
        std::fs::write(&conf, config(&root, port, &socket)).unwrap();
        let _nginx = Nginx::start(&nginx, &root, &conf, &host).await;
        let error_log = root.join("error.log");
        let connect = || async {
            crate::support::poll("nginx listening", super::super::WAIT, || async {
                TcpStream::connect(&host).await.ok()
            })
            .await
        };
        let page = exchange(connect().await, "GET", &host, "/terminals/", &token, None).await;
        assert_eq!(
            page.status,
            200,
            "{page:?}\n{}",
            std::fs::read_to_string(&error_log).unwrap_or_default()
        );
        assert!(page.body.contains(r#"src="assets/app."#), "{page:?}");
        let body = r#"{"command":["sh","-c","echo proxied; exec cat"]}"#;
        let spawned = exchange(
            connect().await,
            "POST",
            &host,
            "/terminals/api/terminals",
            &token,
            Some(body),
        )
        .await;
        assert_eq!(spawned.status, 201, "{spawned:?}");
        let id = spawned.json()["id"].as_str().unwrap().to_owned();
        let url = format!("ws://{host}/terminals/api/terminals/{id}/attach");
        let (socket, _) = tokio_tungstenite::connect_async(super::super::ws_request(&url, &token))
            .await
            .unwrap();
        let mut ws = super::super::Ws { socket };
        assert_eq!(ws.text().await["type"], "hello");
        let mut received = super::super::Received::default();
        received.until(&mut ws, "proxied").await;
        ws.input(b"through nginx\n").await;
        received.until(&mut ws, "through nginx").await;
    })
    .await;
}
