//! The deployment flags: plain HTTP refused off loopback, a Unix socket
//! (0600, a stale one replaced), a base path for everything, the token
//! from `TMUX_ENGINE_TOKEN`, and a token file others can read refused.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use tokio::net::{TcpStream, UnixStream};

use super::{Serve, allow_host, exchange, refused};
use crate::cli::Cli;
use crate::support::within;

#[tokio::test]
async fn plain_http_off_loopback_is_refused_unless_allowed() {
    within(async {
        let cli = Cli::new();
        let stderr = refused(&cli, &["--listen", "0.0.0.0:0"], &[]).await;
        assert!(stderr.contains("INVALID_INPUT"), "{stderr}");
        assert!(stderr.contains("--allow-plain-http"), "{stderr}");
        let stderr = refused(
            &cli,
            &["--listen", "[::]:0", "--no-auth", "--allow-plain-http"],
            &[],
        )
        .await;
        assert!(stderr.contains("--no-auth is refused"), "{stderr}");
    })
    .await;
}

/// The rule is the bridge's own: a program embedding `Bridge` gets it
/// without the CLI (`Bridge::serve_with` asks it of a TCP listener).
#[test]
fn the_bridge_refuses_open_access_and_plain_http_off_loopback() {
    use tmux_engine::bridge::{Auth, BridgeConfig, Principal, Tokens, generate_token};
    use tmux_engine::registry::OwnerId;
    let owner = OwnerId::new("tester").unwrap();
    let open = BridgeConfig::new(Auth::Open(Principal {
        owner: owner.clone(),
        read_only: false,
    }));
    let token = generate_token().unwrap();
    let tokens = BridgeConfig::new(Auth::Tokens(Tokens::single(&token, owner).unwrap()));
    let public: std::net::SocketAddr = "192.0.2.1:8080".parse().unwrap();
    let loopback: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let refused = |result: tmux_engine::Result<()>| {
        let error = result.expect_err("refused");
        assert_eq!(error.code().as_str(), "INVALID_INPUT", "{error}");
        error.to_string()
    };
    assert!(refused(open.check_transport(public, true)).contains("--no-auth is refused"));
    assert!(refused(tokens.check_transport(public, false)).contains("plain HTTP is refused"));
    tokens.check_transport(public, true).unwrap();
    tokens
        .clone()
        .allow_plain_http(true)
        .check_transport(public, false)
        .unwrap();
    open.check_transport(loopback, false).unwrap();
    tokens.check_transport(loopback, false).unwrap();
}

/// A socket only in a directory of the user's own that no one else can
/// write: another user able to write there could replace the socket and
/// capture the next client's Bearer token.
#[tokio::test]
async fn a_unix_socket_in_a_directory_others_can_write_or_own_is_refused() {
    within(async {
        let cli = Cli::new();
        let shared = cli.state().with_file_name("shared");
        std::fs::create_dir(&shared).unwrap();
        for mode in [0o777, 0o1777, 0o770] {
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
            let listen = format!("unix:{}/serve.sock", shared.display());
            let stderr = refused(&cli, &["--listen", &listen], &[]).await;
            assert!(stderr.contains("UNSAFE_DIRECTORY"), "{mode:o}: {stderr}");
            assert!(!shared.join("serve.sock").exists(), "{mode:o}");
        }
        if rustix::process::geteuid().is_root() {
            // Root: a private directory another user owns.
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
            let listen = format!("unix:{}/serve.sock", shared.display());
            let stderr = refused(&cli, &["--listen", &listen], &[]).await;
            assert!(
                stderr.contains("UNSAFE_DIRECTORY") && stderr.contains("owned by uid 65534"),
                "{stderr}"
            );
            std::os::unix::fs::chown(&shared, Some(0), Some(0)).unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn a_unix_socket_is_private_replaces_a_stale_one_and_serves() {
    within(async {
        let cli = Cli::new();
        let path = cli.state().with_file_name("serve.sock");
        // A socket file nobody listens on, as a killed serve leaves it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let listen = format!("unix:{}", path.display());
        let mut args = vec!["--listen".to_owned(), listen];
        args.extend(allow_host("localhost"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let served = Serve::start(cli, &args, &[]).await;
        assert!(
            served
                .line
                .starts_with(&format!("unix:{} /", path.display())),
            "{}",
            served.line
        );
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let stream = UnixStream::connect(&path).await.unwrap();
        let reply = exchange(
            stream,
            "GET",
            "localhost",
            "/api/terminals",
            &served.token(),
            None,
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.json(), serde_json::json!([]));
        // A second serve on the live socket is refused, not a takeover.
        let stderr = refused(
            &served.cli,
            &["--listen", &format!("unix:{}", path.display())],
            &[],
        )
        .await;
        assert!(stderr.contains("another server is listening"), "{stderr}");
    })
    .await;
}

#[tokio::test]
async fn base_path_mounts_page_api_and_websocket_and_nothing_else() {
    within(async {
        let served = Serve::start(
            Cli::new(),
            &["--listen", "127.0.0.1:0", "--base-path", "/tm/x"],
            &[],
        )
        .await;
        let (addr, token) = (served.addr(), served.token());
        assert!(served.line.contains("/tm/x/#code="), "{}", served.line);
        let get = |path: &'static str| {
            let (addr, token) = (addr.clone(), token.clone());
            async move {
                let stream = TcpStream::connect(&addr).await.unwrap();
                exchange(stream, "GET", &addr, path, &token, None).await
            }
        };
        let page = get("/tm/x/").await;
        assert_eq!(page.status, 200, "{page:?}");
        // Relative asset links (hashed names): they resolve under the prefix.
        let at = page
            .body
            .find(r#"src="assets/app."#)
            .expect("app.js linked");
        let name = page.body[at + 5..].split('"').next().unwrap().to_owned();
        assert!(name.ends_with(".js"), "{name}");
        let path: &'static str = Box::leak(format!("/tm/x/{name}").into_boxed_str());
        assert_eq!(get(path).await.status, 200, "{path}");
        assert_eq!(get("/tm/x/assets/app.js").await.status, 200);
        let redirect = get("/tm/x").await;
        assert_eq!(redirect.status, 308, "{redirect:?}");
        assert!(redirect.head.contains("location: /tm/x/"), "{redirect:?}");
        for outside in [
            "/",
            "/api/terminals",
            "/assets/app.js",
            "/tm/xapi/terminals",
            "/tm/api/terminals",
        ] {
            assert_eq!(get(outside).await.status, 404, "{outside}");
        }
        let stream = TcpStream::connect(&addr).await.unwrap();
        let body = r#"{"command":["sh","-c","echo based; exec cat"]}"#;
        let spawned = exchange(
            stream,
            "POST",
            &addr,
            "/tm/x/api/terminals",
            &token,
            Some(body),
        )
        .await;
        assert_eq!(spawned.status, 201, "{spawned:?}");
        let id = spawned.json()["id"].as_str().unwrap().to_owned();
        let listed = get("/tm/x/api/terminals").await;
        assert!(listed.body.contains(&id), "{listed:?}");
        let url = format!("ws://{addr}/tm/x/api/terminals/{id}/attach");
        let (socket, _) = tokio_tungstenite::connect_async(super::super::ws_request(&url, &token))
            .await
            .unwrap();
        let mut ws = super::super::Ws { socket };
        assert_eq!(ws.text().await["type"], "hello");
        let outside = format!("ws://{addr}/api/terminals/{id}/attach");
        assert!(
            tokio_tungstenite::connect_async(super::super::ws_request(&outside, &token))
                .await
                .is_err(),
            "upgraded outside the base path"
        );
    })
    .await;
}

#[tokio::test]
async fn the_token_can_come_from_tmux_engine_token() {
    within(async {
        let token = "envenvenvenvenvenvenvenv";
        let served = Serve::start(
            Cli::new(),
            &["--listen", "127.0.0.1:0"],
            &[("TMUX_ENGINE_TOKEN", token)],
        )
        .await;
        assert!(
            !served.line.contains(token) && served.line.contains("/#code="),
            "printed the token, or no sign-in code: {}",
            served.line
        );
        let addr = served.addr();
        let with = exchange(
            TcpStream::connect(&addr).await.unwrap(),
            "GET",
            &addr,
            "/api/terminals",
            token,
            None,
        )
        .await;
        assert_eq!(with.status, 200, "{with:?}");
        let other = exchange(
            TcpStream::connect(&addr).await.unwrap(),
            "GET",
            &addr,
            "/api/terminals",
            "otherotherotherotherother",
            None,
        )
        .await;
        assert_eq!(other.status, 401, "{other:?}");
        // A weak one is refused like a weak --token.
        let stderr = refused(
            &served.cli,
            &["--listen", "127.0.0.1:0"],
            &[("TMUX_ENGINE_TOKEN", "short")],
        )
        .await;
        assert!(stderr.contains("INVALID_INPUT"), "{stderr}");
    })
    .await;
}

#[tokio::test]
async fn a_token_file_others_can_read_is_unsafe() {
    within(async {
        let cli = Cli::new();
        let file = cli.state().with_file_name("tokens");
        std::fs::write(&file, "alicealicealiceal alice\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let stderr = refused(
                &cli,
                &[
                    "--listen",
                    "127.0.0.1:0",
                    "--token-file",
                    file.to_str().unwrap(),
                ],
                &[],
            )
            .await;
            assert!(stderr.contains("UNSAFE_FILE"), "{mode:o}: {stderr}");
            assert!(stderr.contains(file.to_str().unwrap()), "{stderr}");
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let served = Serve::start(
            cli,
            &[
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                file.to_str().unwrap(),
            ],
            &[],
        )
        .await;
        let addr = served.addr();
        let reply = exchange(
            TcpStream::connect(&addr).await.unwrap(),
            "GET",
            &addr,
            "/api/terminals",
            "alicealicealiceal",
            None,
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    })
    .await;
}
