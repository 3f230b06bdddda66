//! A running `serve`'s API as the CLI reaches it (`link`, `upload`,
//! `download`): the serve found through the file it writes in the state
//! directory (`serve.json`, 0600: its URL and, for a single-token serve,
//! the token) unless `--url` and `$TMUX_ENGINE_TOKEN` say otherwise, proven,
//! then one plain HTTP/1.1 request over TCP or a Unix socket (hyper's
//! client); no TLS. Apart from the commands because each of them asks
//! through it, and because the proof is what keeps a token off a stranger's
//! listener.
//!
//! A recorded serve is proven before anything is sent: its pid must be
//! alive and this user's, the listening socket at the recorded address
//! must be one of that process's descriptors (by inode,
//! `/proc/net/{tcp,tcp6,unix}` against `/proc/PID/fd`), and it must answer
//! a fresh nonce with its HMAC under the key recorded beside the URL
//! (`POST /api/serve-proof`, no credential sent). A serve that was killed
//! leaves its file behind and another user may bind its port next: then
//! the file is stale, it is removed, and the error names it; no token and
//! no file's bytes go to that listener.

use std::io::Write;
use std::path::{Path, PathBuf};

use axum::body::Body;
use serde_json::{Value, json};
use tmux_engine::Error;
use tmux_engine::bridge::{ProofKey, proof_nonce};

use super::args::Global;
use super::report::CliError;
use super::terminals::state_dir;

/// The file `serve` writes in the state directory.
pub(super) const FOUND: &str = "serve.json";

/// How long a recorded serve has to prove itself (each of the answer's
/// head and body): a listener that holds the connection gets nothing.
const PROOF_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The environment variable of the owner's token (as for `serve`).
pub(super) const TOKEN_ENV: &str = "TMUX_ENGINE_TOKEN";

/// What `serve` records for `link`, removed when it stops (if still its).
pub(crate) struct Found {
    path: PathBuf,
    pid: u32,
}

impl Found {
    /// Writes `DIR/serve.json` (0600, replaced atomically): `url` is
    /// `http(s)://HOST:PORT[/BASE]` or `unix:PATH /BASE`, `token` the
    /// single token (none with a token file or `--no-auth`), `host` the
    /// Host to send over a socket, `proof` the key serve proves itself
    /// with.
    ///
    /// # Errors
    /// `IO` when the file cannot be written.
    pub(crate) fn write(
        dir: &Path,
        url: &str,
        token: Option<&str>,
        host: Option<&str>,
        proof: &ProofKey,
    ) -> Result<Found, Error> {
        let pid = std::process::id();
        let path = dir.join(FOUND);
        let text = json!({
            "url": url,
            "token": token,
            "host": host,
            "pid": pid,
            "proof": proof.recorded(),
        })
        .to_string();
        let context = || format!("writing {}", path.display());
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(context(), e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| Error::io(context(), e))?;
        file.persist(&path)
            .map_err(|e| Error::io(context(), e.error))?;
        Ok(Found { path, pid })
    }
}

impl Drop for Found {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|found| found["pid"] == self.pid);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Where to send the request.
/// A running serve to ask: where it listens, the owner's token for it,
/// and the `Host` to name.
pub(super) struct Serve {
    pub(super) target: Target,
    pub(super) token: String,
    pub(super) host: Option<String>,
}

/// The serve to ask: `url` and `host` when given, else what the running
/// serve wrote in the state directory; the token from `TOKEN_ENV`, else
/// that file.
///
/// # Errors
/// `INVALID_INPUT` without a serve to ask or a token; `UNSUPPORTED` for
/// `https`.
pub(super) async fn find_serve(
    global: &Global,
    url: Option<String>,
    host: Option<String>,
) -> Result<Serve, CliError> {
    let file = state_dir(global)?.join(FOUND);
    let recorded = std::fs::read_to_string(&file).ok();
    let found: Value = recorded
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let judged = url.is_none() && recorded.is_some();
    let url = url
        .or_else(|| found["url"].as_str().map(str::to_owned))
        .ok_or_else(|| {
            Error::InvalidInput(
                "no running serve found on this state directory: give --url".to_owned(),
            )
        })?;
    let host = host.or_else(|| found["host"].as_str().map(str::to_owned));
    let target = target(&url)?;
    // Only a serve the file records is at stake: an explicit --url is the
    // caller's own choice.
    if judged {
        let proof = match proven(&found) {
            Ok(()) => challenge(&target, host.as_deref(), &found).await,
            Err(why) => Err(why),
        };
        if let Err(why) = proof {
            // Removed only if it still says what was judged.
            if std::fs::read_to_string(&file).ok() == recorded {
                let _ = std::fs::remove_file(&file);
            }
            return Err(Error::InvalidInput(format!(
                "stale {}: {why}; removed it (nothing was sent). Start serve again, or give --url",
                file.display()
            ))
            .into());
        }
    }
    let token = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|token| !token.is_empty())
        .or_else(|| found["token"].as_str().map(str::to_owned))
        .ok_or_else(|| {
            Error::InvalidInput(format!("no token: set {TOKEN_ENV} to the owner's token"))
        })?;
    Ok(Serve {
        target,
        token,
        host,
    })
}

/// Asks the listener at `target` to prove it holds the key `found`
/// records: a fresh nonce out, its HMAC back; nothing else is sent.
async fn challenge(target: &Target, host: Option<&str>, found: &Value) -> Result<(), String> {
    let key = found["proof"]
        .as_str()
        .map(ProofKey::from_recorded)
        .ok_or("it records no proof key (a serve older than this command?)")?;
    let nonce = proof_nonce().map_err(|e| e.to_string())?;
    let body = json!({ "nonce": nonce }).to_string();
    let asked = exchange(
        target,
        host,
        None,
        ("POST", "/api/serve-proof"),
        Body::from(body),
        Some(("application/json", None)),
    );
    let failed = || "the listener at its address gave no proof that it is that serve".to_owned();
    let response = tokio::time::timeout(PROOF_WAIT, asked)
        .await
        .map_err(|_| failed())?
        .map_err(|_| failed())?;
    if !response.status().is_success() {
        return Err(failed());
    }
    let bytes = tokio::time::timeout(
        PROOF_WAIT,
        axum::body::to_bytes(Body::new(response.into_body()), 4096),
    )
    .await
    .map_err(|_| failed())?
    .map_err(|_| failed())?;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let proof = answer["proof"].as_str().unwrap_or_default();
    if key.verify(&nonce, proof) {
        Ok(())
    } else {
        Err(failed())
    }
}

/// Whether the serve `found` records is alive, this user's, and the one
/// listening at its address; why not otherwise.
fn proven(found: &Value) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let pid = found["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
        .ok_or("it records no pid")?;
    let url = found["url"].as_str().ok_or("it records no address")?;
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let owner = std::fs::metadata(&proc)
        .map_err(|_| format!("the serve it records (pid {pid}) is gone"))?
        .uid();
    let me = rustix::process::geteuid().as_raw();
    if owner != me {
        return Err(format!(
            "its pid {pid} is now another user's process (uid {owner})"
        ));
    }
    let target = target(url).map_err(|e| e.to_string())?;
    let listening = listening_inodes(&target);
    let fds = std::fs::read_dir(proc.join("fd"))
        .map_err(|_| format!("the fds of pid {pid} cannot be read"))?;
    let holds = fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|link| {
                let link = link.to_str()?.to_owned();
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|inode| listening.contains(&inode))
    });
    if holds {
        Ok(())
    } else {
        Err(format!(
            "the serve it records (pid {pid}) is not the one listening on {url}"
        ))
    }
}

/// The inodes of the listening sockets at `target`'s address: TCP
/// sockets in state LISTEN on its port (`/proc/net/tcp`, `tcp6`), or the
/// Unix sockets bound to its path (`/proc/net/unix`).
fn listening_inodes(target: &Target) -> Vec<u64> {
    let read =
        |name: &str| std::fs::read_to_string(format!("/proc/net/{name}")).unwrap_or_default();
    match target {
        Target::Tcp { authority, .. } => {
            let Some(port) = authority
                .rsplit_once(':')
                .and_then(|(_, port)| port.parse::<u16>().ok())
            else {
                return Vec::new();
            };
            let mut inodes = Vec::new();
            for table in ["tcp", "tcp6"] {
                for line in read(table).lines().skip(1) {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let (Some(local), Some(state), Some(inode)) =
                        (fields.get(1), fields.get(3), fields.get(9))
                    else {
                        continue;
                    };
                    let local_port = local
                        .rsplit_once(':')
                        .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
                    // 0A: TCP_LISTEN.
                    if *state == "0A"
                        && local_port == Some(port)
                        && let Ok(inode) = inode.parse()
                    {
                        inodes.push(inode);
                    }
                }
            }
            inodes
        }
        Target::Unix { path, .. } => read("unix")
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let bound = fields.get(7)?;
                (Path::new(bound) == path.as_path())
                    .then(|| fields.get(6)?.parse().ok())
                    .flatten()
            })
            .collect(),
    }
}

pub(super) enum Target {
    Tcp { authority: String, base: String },
    Unix { path: PathBuf, base: String },
}

pub(super) fn target(url: &str) -> Result<Target, Error> {
    if let Some(rest) = url.strip_prefix("unix:") {
        let (path, base) = rest.split_once(' ').unwrap_or((rest, ""));
        return Ok(Target::Unix {
            path: PathBuf::from(path),
            base: base.trim().trim_end_matches('/').to_owned(),
        });
    }
    if url.starts_with("https://") {
        return Err(Error::Unsupported(
            "link speaks plain HTTP only: give --url http://127.0.0.1:PORT or unix:PATH".to_owned(),
        ));
    }
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        Error::InvalidInput(format!(
            "--url {url:?}: expected http://HOST:PORT[/BASE] or unix:PATH"
        ))
    })?;
    let (authority, base) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Ok(Target::Tcp {
        authority: authority.to_owned(),
        base: base.trim_end_matches('/').to_owned(),
    })
}

/// Sends one request to serve over its TCP or unix socket and returns the
/// response (any status). `content` is the body's type and, when known,
/// its length.
pub(super) async fn send(
    target: &Target,
    host: Option<&str>,
    token: &str,
    head: (&str, &str),
    body: Body,
    content: Option<(&str, Option<u64>)>,
) -> Result<axum::http::Response<hyper::body::Incoming>, Error> {
    exchange(target, host, Some(token), head, body, content).await
}

/// [`send`] with an `Authorization` header only when `token` is given.
async fn exchange(
    target: &Target,
    host: Option<&str>,
    token: Option<&str>,
    head: (&str, &str),
    body: Body,
    content: Option<(&str, Option<u64>)>,
) -> Result<axum::http::Response<hyper::body::Incoming>, Error> {
    use hyper_util::rt::TokioIo;
    let (method, path) = head;
    let io_error = |e: std::io::Error| Error::io("connecting to serve", e);
    let (host, base) = match target {
        Target::Tcp { authority, base } => (authority.clone(), base),
        Target::Unix { base, .. } => (host.unwrap_or("localhost").to_owned(), base),
    };
    let mut builder = axum::http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("host", host);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    if let Some((kind, length)) = content {
        builder = builder.header("content-type", kind);
        if let Some(length) = length {
            builder = builder.header("content-length", length);
        }
    }
    let request = builder
        .body(body)
        .map_err(|e| Error::InvalidInput(format!("building the request: {e}")))?;
    let http = |e: hyper::Error| Error::io("talking to serve", std::io::Error::other(e));
    macro_rules! send {
        ($stream:expr) => {{
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new($stream))
                    .await
                    .map_err(http)?;
            tokio::spawn(connection);
            sender.send_request(request).await.map_err(http)?
        }};
    }
    Ok(match target {
        Target::Tcp { authority, .. } => {
            send!(
                tokio::net::TcpStream::connect(authority)
                    .await
                    .map_err(io_error)?
            )
        }
        Target::Unix { path, .. } => {
            send!(
                tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(io_error)?
            )
        }
    })
}
