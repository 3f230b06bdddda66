//! TLS: a certificate from a CA generated here, a client that trusts only
//! that CA (tokio-rustls), the API and a WebSocket over it; a handshake
//! that never starts is cut at the header timeout; bad files are named.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::{TlsConnector, client::TlsStream};
use tokio_tungstenite::tungstenite::Message;

use super::{Serve, closed_by_server, exchange, refused};
use crate::cli::Cli;
use crate::support::within;

/// A CA and a `127.0.0.1`/`localhost` certificate it signed, as PEM files
/// in `dir`; returns (cert, key, the CA's DER).
pub(crate) fn certificate(
    dir: &Path,
) -> (PathBuf, PathBuf, rustls::pki_types::CertificateDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let leaf = params.signed_by(&key, &issuer).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, leaf.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (cert_path, key_path, ca.der().clone())
}

/// A TLS client connection to `addr` trusting only `ca`.
pub(crate) async fn connect(
    addr: &str,
    ca: &rustls::pki_types::CertificateDer<'static>,
) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

#[tokio::test]
async fn https_serves_the_api_and_a_websocket_and_cuts_silent_handshakes() {
    within(async {
        let cli = Cli::new();
        let dir = cli.state().with_file_name("tls");
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key, ca) = certificate(&dir);
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--header-timeout",
            "1",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ];
        let served = Serve::start(cli, &args, &[]).await;
        assert!(
            served.line.starts_with("https://127.0.0.1:"),
            "printed {}",
            served.line
        );
        let (addr, token) = (served.addr(), served.token());

        let body = r#"{"command":["sh","-c","echo tls-ok; exec cat"]}"#;
        let spawned = exchange(
            connect(&addr, &ca).await,
            "POST",
            &addr,
            "/api/terminals",
            &token,
            Some(body),
        )
        .await;
        assert_eq!(spawned.status, 201, "{spawned:?}");
        let id = spawned.json()["id"].as_str().unwrap().to_owned();
        let listed = exchange(
            connect(&addr, &ca).await,
            "GET",
            &addr,
            "/api/terminals",
            &token,
            None,
        )
        .await;
        assert_eq!(listed.status, 200, "{listed:?}");
        assert!(listed.body.contains(&id), "{listed:?}");

        let url = format!("wss://{addr}/api/terminals/{id}/attach");
        let request = super::super::ws_request(&url, &token);
        let (mut ws, _) = tokio_tungstenite::client_async(request, connect(&addr, &ca).await)
            .await
            .unwrap();
        let hello = tokio::time::timeout(super::WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Message::Text(hello) = hello else {
            panic!("{hello:?}")
        };
        let hello: serde_json::Value = serde_json::from_str(&hello).unwrap();
        assert_eq!(hello["type"], "hello", "{hello}");

        // A TCP client that never starts the handshake holds no slot.
        let silent = TcpStream::connect(&addr).await.unwrap();
        assert!(
            closed_by_server(silent, b"").await,
            "a silent TLS socket stayed open"
        );
    })
    .await;
}

#[tokio::test]
async fn bad_tls_files_are_refused_naming_the_file() {
    within(async {
        let cli = Cli::new();
        let dir = cli.state().with_file_name("tls");
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key, _) = certificate(&dir);
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let missing = dir.join("missing.pem");
        for (cert, key, named) in [
            (&junk, &key, &junk),
            (&cert, &missing, &missing),
            (&cert, &junk, &junk),
        ] {
            let args = [
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                key.to_str().unwrap(),
            ];
            let stderr = refused(&cli, &args, &[]).await;
            assert!(stderr.contains("INVALID_INPUT"), "{stderr}");
            assert!(stderr.contains(named.to_str().unwrap()), "{stderr}");
        }
    })
    .await;
}
