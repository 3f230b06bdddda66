//! What the accept loop is given: its limits, TLS from PEM files, a Unix
//! socket bound private, and a checked base path.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio_rustls::rustls;

use crate::{Error, Result};

/// How long a client may take to send a request's head (and to finish a
/// TLS handshake) unless configured otherwise.
const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive connection may sit with no request in flight
/// unless configured otherwise.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default connection cap: half the soft `RLIMIT_NOFILE`, so the
/// other half stays for the terminals' control clients (pipes), PTY
/// viewers, the registry's files and tmux sockets; at least 16.
pub(crate) fn default_max_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let half = limit.map_or(1 << 16, |limit| limit / 2);
    usize::try_from(half).unwrap_or(usize::MAX).max(16)
}

/// Where the bridge listens.
#[derive(Debug)]
pub enum Listener {
    /// A bound TCP socket.
    Tcp(TcpListener),
    /// A bound Unix socket (behind a reverse proxy).
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Listener {
        Listener::Tcp(listener)
    }
}

impl From<UnixListener> for Listener {
    fn from(listener: UnixListener) -> Listener {
        Listener::Unix(listener)
    }
}

/// Binds a Unix socket at `path`, created `0600` (bound in a private
/// directory beside it, then renamed into place, so it is never reachable
/// with wider modes). A stale socket of ours nobody listens on is
/// replaced; anything else at `path` is refused.
///
/// The socket's directory must be the user's own and writable by no one
/// else (sticky or not): whoever can write it can put their own socket
/// at `path` and read the tokens of the next clients.
///
/// # Errors
/// `UNSAFE_DIRECTORY` for a directory another user owns or can write;
/// `INVALID_INPUT` when `path` is not a socket, is another user's, or a
/// live server listens on it; `IO` when binding fails.
pub fn bind_unix(path: &Path) -> Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let shown = path.display();
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    check_socket_dir(parent)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(Error::InvalidInput(format!(
                    "{shown} exists and is not a socket"
                )));
            }
            if meta.uid() != rustix::process::geteuid().as_raw() {
                return Err(Error::InvalidInput(format!(
                    "socket {shown} belongs to another user"
                )));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(Error::InvalidInput(format!(
                    "another server is listening on {shown}"
                )));
            }
            std::fs::remove_file(path)
                .map_err(|e| Error::io(format!("removing stale socket {shown}"), e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("inspecting {shown}"), e)),
    }
    let staging = tempfile::Builder::new()
        .prefix(".te")
        .tempdir_in(parent)
        .map_err(|e| Error::io(format!("creating a directory beside {shown}"), e))?;
    let bound = staging.path().join("s");
    let listener = std::os::unix::net::UnixListener::bind(&bound)
        .map_err(|e| Error::io(format!("listening on {shown}"), e))?;
    std::fs::set_permissions(&bound, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&bound, path))
        .and_then(|()| listener.set_nonblocking(true))
        .map_err(|e| Error::io(format!("placing socket {shown}"), e))?;
    UnixListener::from_std(listener).map_err(|e| Error::io(format!("listening on {shown}"), e))
}

/// Refuses (`UNSAFE_DIRECTORY`) a socket directory not owned by the
/// effective user, or that group or other may write.
fn check_socket_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(dir)
        .map_err(|e| Error::io(format!("examining directory {}", dir.display()), e))?;
    let me = rustix::process::geteuid().as_raw();
    let unsafe_dir = |reason: String| Error::UnsafeDirectory {
        path: dir.to_owned(),
        reason,
    };
    if meta.uid() != me {
        return Err(unsafe_dir(format!(
            "owned by uid {}, not by this user (uid {me}): put the socket in a directory of \
             your own that no one else can write",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(unsafe_dir(format!(
            "mode {mode:04o} lets group or other write it (they could replace the socket)"
        )));
    }
    Ok(())
}

/// A TLS server configuration (rustls, `ring` provider, HTTP/1.1 only).
#[derive(Clone)]
pub struct Tls(pub(super) Arc<rustls::ServerConfig>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads a PEM certificate chain and a PEM private key.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the file that cannot be read, holds no
    /// certificate or key, or does not match the other.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            Error::InvalidInput(format!("{what} {}: {e}", path.display()))
        };
        let certs = CertificateDer::pem_file_iter(cert)
            .and_then(Iterator::collect::<std::result::Result<Vec<_>, _>>)
            .map_err(|e| bad("TLS certificate file", cert, &e))?;
        if certs.is_empty() {
            return Err(bad("TLS certificate file", cert, &"no certificate in it"));
        }
        let private =
            PrivateKeyDer::from_pem_file(key).map_err(|e| bad("TLS key file", key, &e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::InvalidInput(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, private)
            .map_err(|e| {
                Error::InvalidInput(format!(
                    "TLS certificate file {} with key file {}: {e}",
                    cert.display(),
                    key.display()
                ))
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls(Arc::new(config)))
    }
}

/// How long a request's whole body may take unless configured otherwise:
/// the largest body (1 MiB) at 35 KB/s.
const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection limits and TLS of [`Bridge::serve_with`](crate::bridge::Bridge::serve_with).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Time to receive a request's head, counted from the connection's
    /// start (or the first byte after an idle keep-alive pause); also the
    /// TLS handshake's limit and the longest pause in a request body.
    pub header_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Time a request's whole body may take, however steadily it comes
    /// (a byte every few seconds never pauses past the header timeout).
    pub body_timeout: Duration,
    /// Connections (WebSockets included) served at once.
    pub max_connections: usize,
    /// TLS, or plain HTTP.
    pub tls: Option<Tls>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: default_max_connections(),
            tls: None,
        }
    }
}

impl ServeOptions {
    /// How long a client may take to send a request's head (and to finish
    /// a TLS handshake) unless configured otherwise.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = DEFAULT_HEADER_TIMEOUT;
    /// How long a kept-alive connection may sit with no request in flight
    /// unless configured otherwise.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = DEFAULT_IDLE_TIMEOUT;
    /// How long a request's whole body may take unless configured
    /// otherwise: the largest body (1 MiB) at 35 KB/s.
    pub const DEFAULT_BODY_TIMEOUT: Duration = DEFAULT_BODY_TIMEOUT;

    /// Sets the header-read (and TLS handshake) timeout.
    #[must_use]
    pub fn header_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.header_timeout = timeout;
        self
    }

    /// Sets the idle keep-alive timeout.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the whole-body deadline.
    #[must_use]
    pub fn body_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.body_timeout = timeout;
        self
    }

    /// Sets the connection cap (at least 1).
    #[must_use]
    pub fn max_connections(mut self, max: usize) -> ServeOptions {
        self.max_connections = max.max(1);
        self
    }

    /// Serves TLS.
    #[must_use]
    pub fn tls(mut self, tls: Tls) -> ServeOptions {
        self.tls = Some(tls);
        self
    }
}

/// Checks a `--base-path`: empty (or `/`) for none, else `/a/b` with
/// segments of `A-Z a-z 0-9 - . _ ~` that are not `.` or `..`, no
/// trailing slash. Returns the normalised prefix.
///
/// # Errors
/// `INVALID_INPUT` naming the prefix and what is wrong with it.
pub fn validate_base_path(prefix: &str) -> Result<String> {
    if prefix.is_empty() || prefix == "/" {
        return Ok(String::new());
    }
    let bad = |why: &str| Error::InvalidInput(format!("base path {prefix:?}: {why}"));
    let Some(rest) = prefix.strip_prefix('/') else {
        return Err(bad("must start with /"));
    };
    if rest.ends_with('/') {
        return Err(bad("must not end with /"));
    }
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(bad("empty, . or .. segment"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        {
            return Err(bad("only A-Z a-z 0-9 - . _ ~ and / are allowed"));
        }
    }
    Ok(prefix.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn base_paths() {
        for (given, want) in [
            ("", ""),
            ("/", ""),
            ("/a", "/a"),
            ("/a-b/c_d.e~", "/a-b/c_d.e~"),
        ] {
            assert_eq!(validate_base_path(given).unwrap(), want, "{given}");
        }
        for bad in [
            "a", "/a/", "//a", "/a//b", "/./a", "/a/..", "/a b", "/a?b", "/a%2f", "/é",
        ] {
            let error = validate_base_path(bad).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidInput, "{bad}");
        }
    }
}
