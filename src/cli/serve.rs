//! `serve`: the web bridge on one long-lived registry. Parses the flags
//! into a [`BridgeConfig`] and [`ServeOptions`], opens the registry with a
//! clean environment for the terminals it spawns, binds (TCP, maybe TLS,
//! or a Unix socket), prints the URL to open, and serves until Ctrl-C or
//! SIGTERM; then drains (the viewers close with 1012, in-flight requests
//! finish, all within `DRAIN_BOUND`), hands its sign-in sessions to the
//! next serve on the same state directory, and detaches from the
//! terminals, leaving them running.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::Args;
use tmux_engine::Error;
use tmux_engine::backend::TmuxConfig;
use tmux_engine::bridge::{
    Auth, Bridge, BridgeConfig, Listener, Notifier, PageOptions, Principal, ServeOptions, Tls,
    Tokens, TrustedProxy, bind_unix, clean_environment, generate_token, inherited,
    validate_base_path,
};
use tmux_engine::registry::RestartBackoff;

use super::args::{Global, SHELL_ENV};
use super::report::{CliError, write_line};
use super::terminals::{owner, state_dir};

/// The environment variable read for the token when `--token` is absent.
const TOKEN_ENV: &str = "TMUX_ENGINE_TOKEN";

/// Where `--listen` points.
#[derive(Debug, Clone)]
pub(crate) enum ListenAt {
    /// `ADDR:PORT` (`[::1]:7681` for IPv6).
    Tcp(SocketAddr),
    /// `unix:/path`.
    Unix(PathBuf),
}

impl FromStr for ListenAt {
    type Err = String;

    fn from_str(text: &str) -> Result<ListenAt, String> {
        match text.strip_prefix("unix:") {
            Some("") => Err("unix: needs a path (unix:/run/tmux-engine.sock)".to_owned()),
            Some(path) => Ok(ListenAt::Unix(PathBuf::from(path))),
            None => text
                .parse()
                .map(ListenAt::Tcp)
                .map_err(|e| format!("{e} (expected ADDR:PORT or unix:/path)")),
        }
    }
}

/// `1048576`, `512K`, `50M`, `1G` as bytes.
fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, scale) = match text.strip_suffix(['K', 'k']) {
        Some(digits) => (digits, 1 << 10),
        None => match text.strip_suffix(['M', 'm']) {
            Some(digits) => (digits, 1 << 20),
            None => match text.strip_suffix(['G', 'g']) {
                Some(digits) => (digits, 1 << 30),
                None => (text, 1),
            },
        },
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?}: expected a positive number of bytes, K, M or G"))
}

/// `0.5`, `2` as seconds: `--restart-delay`. Not under 10 ms (a program
/// that dies at once would run through its restarts in a blink), and not
/// past the backoff's cap, where the doubling has nothing left to double.
fn parse_restart_delay(text: &str) -> Result<Duration, String> {
    let cap = RestartBackoff::default().max_delay;
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .filter(|delay| (Duration::from_millis(10)..=cap).contains(delay))
        .ok_or_else(|| format!("{text:?}: expected seconds from 0.01 to {}", cap.as_secs()))
}

/// `10`, `0.5` as seconds: `--control-timeout`, within
/// [`TmuxConfig::CONTROL_TIMEOUT_RANGE`] (the backend refuses others).
fn parse_control_timeout(text: &str) -> Result<Duration, String> {
    let range = TmuxConfig::CONTROL_TIMEOUT_RANGE;
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .filter(|timeout| range.contains(timeout))
        .ok_or_else(|| {
            format!(
                "{text:?}: expected seconds from {} to {}",
                range.start().as_secs_f64(),
                range.end().as_secs()
            )
        })
}

/// `serve`'s flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct ServeArgs {
    /// `ADDR:PORT` (`[::1]:7681` for IPv6), or `unix:/path` for a reverse
    /// proxy (the socket is created 0600; a stale one of ours is replaced).
    #[arg(
        long,
        default_value = "127.0.0.1:7681",
        value_name = "ADDR:PORT|unix:PATH"
    )]
    listen: ListenAt,
    /// The token clients must present [default: $TMUX_ENGINE_TOKEN, else a
    /// random one, printed in the URL]. A token in argv is visible to every
    /// local user in /proc/*/cmdline: prefer TMUX_ENGINE_TOKEN or --token-file.
    #[arg(long, conflicts_with_all = ["token_file", "no_auth"])]
    token: Option<String>,
    /// A file of `TOKEN OWNER [read-only]` lines; each token acts as its
    /// owner. Must be the user's own and not readable by group or others.
    #[arg(long, conflicts_with = "no_auth")]
    token_file: Option<PathBuf>,
    /// An origin (scheme://HOST[:PORT]) besides the page's own that may write and open
    /// WebSockets; its host becomes an allowed Host too (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// A name clients may reach serve by (the Host header), besides the listen address and,
    /// on loopback, 127.0.0.1/localhost/[::1]: NAME allows any port, NAME:PORT only that
    /// port; other names are refused with 421 (DNS rebinding) (repeatable).
    #[arg(long = "allow-host", value_name = "NAME[:PORT]")]
    allow_host: Vec<String>,
    /// No authentication at all (refused unless listening on loopback).
    #[arg(long)]
    no_auth: bool,
    /// Bytes of output kept per terminal: what a `read since` cursor and a
    /// resuming viewer can be answered from.
    #[arg(long, default_value_t = 4 << 20)]
    replay_bytes: usize,
    /// Seconds between WebSocket pings; a viewer that sends nothing for one
    /// more interval after a ping is closed (1001). 0 turns pings off.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    ping_interval: u64,
    /// Seconds a client may take to send a request's head (or finish the
    /// TLS handshake), and the longest pause in a request body; a
    /// connection that sends nothing is closed after it.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// Seconds a request's whole body may take, however steadily it comes.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout: u64,
    /// Seconds a kept-alive connection may wait for its next request.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Connections served at once (WebSockets included); a new one beyond
    /// them gets 503 TOO_MANY_CONNECTIONS. [default: half the open-file
    /// limit (ulimit -n), leaving the other half for the terminals' pipes,
    /// PTYs and the registry's files]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// Terminals one owner may have; a spawn past them is 429
    /// TOO_MANY_TERMINALS [default: the open-file limit (ulimit -n) / 16,
    /// at least 8: each terminal costs serve about four descriptors, and
    /// the connections get half the limit].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_terminals_per_owner: Option<u64>,
    /// The largest file an upload may write or a download may read
    /// (`PUT`/`GET /api/terminals/{t}/files`, `upload`, `download`): bytes,
    /// or with K, M or G (powers of 1024); larger is 413. [default: 1G]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_file_size: Option<u64>,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address (refused otherwise: the
    /// token would cross the network in clear). Use TLS or a proxy instead.
    #[arg(long)]
    allow_plain_http: bool,
    /// Serve the page, API and WebSocket under this path (`/prefix`), as a
    /// reverse proxy mounts it; other paths answer 404.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    base_path: String,
    /// This serve's node behind a shared front door: every terminal id it
    /// answers becomes NAME.t-… and its links carry &node=NAME, so a
    /// stateless proxy routes by the id, a header or a path prefix
    /// (1-63 of a-z, 0-9, '-').
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// Another node behind the same origin and the path its serve is
    /// mounted at (b=/nodes/b/): the page lists and opens its terminals
    /// too, and says when it is unreachable (repeatable).
    #[arg(long = "peer-node", value_name = "NAME=PATH", requires = "node")]
    peer_node: Vec<String>,
    /// A default of the page's client options (repeatable): fontSize=6..72,
    /// fontFamily=TEXT, theme=dark|light|solarized, cursorStyle=block|underline|bar,
    /// cursorBlink=true|false, scrollback=0..100000. A person's choices in
    /// the page and the URL's query (`?fontSize=16&theme=light`) override them.
    #[arg(long = "page-option", value_name = "KEY=VALUE")]
    page_option: Vec<String>,
    /// Servers kept started ahead of spawns, so a new terminal reaches its
    /// prompt sooner (each is used by one terminal only; waiting ones exit
    /// with `serve`). 0 turns the pool off.
    #[arg(long, value_name = "N", env = "TMUX_ENGINE_POOL", default_value_t = TmuxConfig::DEFAULT_POOL_SIZE)]
    pool: usize,
    /// Spawns keep their history on disk unless they say otherwise
    /// (`keep_history`): terminals come back after a reboot.
    #[arg(long)]
    keep_history: bool,
    /// Seconds before an `always` terminal that died is started again
    /// (0.01-30, fractions allowed); each consecutive restart doubles it, up
    /// to 30 s, and after 10 in a row the terminal is left dead.
    #[arg(long, value_name = "SECS", default_value = "0.5", value_parser = parse_restart_delay)]
    restart_delay: Duration,
    /// Seconds an idle terminal keeps serve's control link to its tmux
    /// server (no command under way, nothing following its events) before
    /// letting it go, to link again on its next use. 0 keeps every link.
    #[arg(long, value_name = "SECS", default_value_t = TmuxConfig::IDLE_UNLINK.as_secs())]
    idle_unlink: u64,
    /// Seconds tmux may take to answer a terminal's control client before
    /// the command fails UNRESPONSIVE (a stopped server, or a machine under
    /// heavy load; the server is not taken for gone). 0.01-3600, fractions
    /// allowed.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_control_timeout)]
    control_timeout: Duration,
    /// Believe --user-header only from these peers: ADDR/BITS (10.0.0.0/8,
    /// ::1/128), ADDR, or `unix` (any peer of serve's unix socket). The
    /// header from any other peer is refused, 403 UNTRUSTED_PROXY (repeatable).
    #[arg(
        long = "trusted-proxy",
        value_name = "CIDR|unix",
        requires = "user_header"
    )]
    trusted_proxy: Vec<String>,
    /// The header in which a trusted proxy names the user (e.g.
    /// oauth2-proxy's X-Forwarded-User): that user is the owner, no token needed.
    #[arg(long, value_name = "NAME", requires = "trusted_proxy")]
    user_header: Option<String>,
    /// Append every act that changes a terminal or moves data (sign-in,
    /// links, spawn, kill, signal, rename, send, upload, download, input per
    /// burst: who, which terminal, how many bytes, never the bytes) to FILE
    /// as JSON lines, each chained to the one before by a SHA-256 hash;
    /// created 0600. `tmux-engine audit verify FILE` checks it.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
}

/// Serves until SIGINT or SIGTERM.
///
/// # Errors
/// `INVALID_INPUT` for bad flags (`--no-auth` or plain HTTP off loopback,
/// a weak token, a bad token file, TLS files, base path, a page option); `UNSAFE_FILE`
/// for a token file others can read; `IO` when the address cannot be
/// bound; the registry's errors.
pub(crate) async fn run(
    global: &Global,
    args: ServeArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // First, before any thread reads the environment: the socket systemd
    // (or systemd-socket-activate) passed replaces --listen.
    let inherited = inherited()?;
    let listen = match &inherited {
        Some(Listener::Tcp(listener)) => ListenAt::Tcp(
            listener
                .local_addr()
                .map_err(|e| Error::io("reading the passed socket's address", e))?,
        ),
        Some(Listener::Unix(listener)) => ListenAt::Unix(
            listener
                .local_addr()
                .ok()
                .and_then(|addr| addr.as_pathname().map(Path::to_owned))
                .unwrap_or_default(),
        ),
        None => args.listen.clone(),
    };
    let owner = owner(global)?;
    for host in &args.allow_host {
        tmux_engine::bridge::check_allow_host(host)?;
    }
    for origin in &args.allow_origin {
        tmux_engine::bridge::check_allow_origin(origin)?;
    }
    let base_path = validate_base_path(&args.base_path)?;
    if let Some(node) = &args.node {
        tmux_engine::bridge::check_node_name(node)?;
    }
    let peer_nodes = args
        .peer_node
        .iter()
        .map(|spec| tmux_engine::bridge::PeerNode::parse(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let mut page_options = PageOptions::default();
    for option in &args.page_option {
        page_options.set(option)?;
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(Tls::from_pem_files(cert, key)?),
        _ => None,
    };
    // The owner whose sign-in link serve prints (one token, not a file).
    let mut signs_in = None;
    let mut generated = None;
    let auth = if args.no_auth {
        Auth::Open(Principal {
            owner,
            read_only: false,
        })
    } else if let Some(path) = &args.token_file {
        Auth::Tokens(Tokens::parse(&read_private(path)?)?)
    } else {
        let from_env = std::env::var(TOKEN_ENV)
            .ok()
            .filter(|token| !token.is_empty());
        let token = match args.token.or(from_env) {
            Some(token) => token,
            None => {
                let token = generate_token()?;
                generated = Some(token.clone());
                token
            }
        };
        signs_in = Some((owner.clone(), token.clone()));
        Auth::Tokens(Tokens::single(&token, owner)?)
    };
    // No --no-auth and no plain HTTP off loopback: the bridge's rule (a
    // program embedding it gets it too), asked here before anything is
    // set up.
    let mut bridge_config = BridgeConfig::new(auth).allow_plain_http(args.allow_plain_http);
    if let ListenAt::Tcp(addr) = &listen {
        bridge_config.check_transport(*addr, tls.is_some())?;
    }
    let mut interrupts = super::run::Interrupts::register()?;
    let dir = state_dir(global)?;
    let mut config = TmuxConfig::for_state_dir(&dir)
        .environment(clean_environment())
        .pool_size(args.pool)
        .idle_unlink((args.idle_unlink > 0).then(|| Duration::from_secs(args.idle_unlink)))
        .control_timeout(args.control_timeout);
    config.output_buffer = args.replay_bytes;
    if let Some(shell) = std::env::var_os(SHELL_ENV).filter(|v| !v.is_empty()) {
        config = config.shell(shell);
    }
    let backend: std::sync::Arc<dyn tmux_engine::registry::Backend> =
        std::sync::Arc::new(tmux_engine::backend::TmuxBackend::new(config)?);
    let defaults = RestartBackoff::default();
    let backoff = RestartBackoff::new(
        args.restart_delay,
        defaults.max_delay,
        defaults.max_restarts,
        defaults.stable_after,
    );
    let (registry, _report) = tmux_engine::registry::Registry::open_with(
        super::terminals::registry_config(dir.clone(), true, args.keep_history).backoff(backoff),
        backend,
    )
    .await?;
    let quota = args
        .max_terminals_per_owner
        .map_or_else(default_quota, |n| usize::try_from(n).unwrap_or(usize::MAX));
    registry.limit_terminals_per_owner(Some(quota));
    let scheme = if tls.is_some() { "https" } else { "http" };
    // The CLI proves the serve serve.json names before it sends a token.
    let proof_key = tmux_engine::bridge::ProofKey::generate()?;
    let trusted_proxy = match &args.user_header {
        Some(header) => Some(TrustedProxy::new(&args.trusted_proxy, header)?),
        None => None,
    };
    let audit = match &args.audit_log {
        Some(path) => Some(std::sync::Arc::new(tmux_engine::audit::AuditLog::open(
            path,
        )?)),
        None => None,
    };
    bridge_config = bridge_config
        .proof_key(proof_key.clone())
        .ping_interval(Duration::from_secs(args.ping_interval))
        .https(tls.is_some())
        .base_path(base_path.clone())
        .page_options(page_options)
        .max_file_size(
            args.max_file_size
                .unwrap_or(BridgeConfig::DEFAULT_MAX_FILE_SIZE),
        );
    if let Some(proxy) = trusted_proxy {
        bridge_config = bridge_config.trusted_proxy(proxy);
    }
    if let Some(node) = &args.node {
        bridge_config = bridge_config.node(node.clone());
    }
    for peer in peer_nodes {
        bridge_config = bridge_config.peer_node(peer);
    }
    if let Some(audit) = audit {
        bridge_config = bridge_config.audit_log(audit);
    }
    let (listener, url, socket): (Listener, _, _) = match (inherited, &listen) {
        (Some(listener), ListenAt::Tcp(local)) => {
            bridge_config = bridge_config.listening_on(*local);
            (listener, format!("{scheme}://{local}{base_path}"), None)
        }
        // The manager made the socket and removes it: not ours to remove.
        (Some(listener), ListenAt::Unix(path)) => {
            let url = format!("unix:{} {base_path}", path.display());
            (listener, url, None)
        }
        (None, ListenAt::Tcp(addr)) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
            let local = listener
                .local_addr()
                .map_err(|e| Error::io("reading the listening address", e))?;
            bridge_config = bridge_config.listening_on(local);
            let url = format!("{scheme}://{local}{base_path}");
            (listener.into(), url, None)
        }
        (None, ListenAt::Unix(path)) => {
            let listener = bind_unix(path)?;
            // The proxy's URL is not ours to know: the socket, then the
            // path (and code) to open under the proxy.
            let url = format!("unix:{} {base_path}", path.display());
            (listener.into(), url, Some(Socket::placed(path)))
        }
    };
    let socket_host = args.allow_host.first().cloned();
    for origin in args.allow_origin {
        bridge_config = bridge_config.allow_origin(origin);
    }
    for host in args.allow_host {
        bridge_config = bridge_config.allow_host(host);
    }
    let mut options = ServeOptions::default()
        .header_timeout(Duration::from_secs(args.header_timeout))
        .idle_timeout(Duration::from_secs(args.idle_timeout))
        .body_timeout(Duration::from_secs(args.body_timeout));
    if let Some(max) = args.max_connections {
        options = options.max_connections(usize::try_from(max).unwrap_or(usize::MAX));
    }
    if let Some(tls) = tls {
        options = options.tls(tls);
    }
    let bridge = Bridge::new(registry.clone(), bridge_config);
    let carried = bridge.take_over(&dir);
    if carried > 0 {
        tracing::info!(
            sessions = carried,
            "took over the previous serve's sessions"
        );
    }
    // The printed URL holds a one-time code, never the token: URLs stay
    // in browser histories and proxy logs.
    let path = match &signs_in {
        Some((owner, _)) => bridge.sign_in_path(
            Principal {
                owner: owner.clone(),
                read_only: false,
            },
            BridgeConfig::DEFAULT_CODE_LIFETIME,
        )?,
        None => "/".to_owned(),
    };
    // Recorded before the URL is printed: whoever waits for the URL (a
    // script, a unit's ExecStartPost, the tests) may run `link` or
    // `upload` at once, and those find serve through this file.
    let found = super::serve_api::Found::write(
        &state_dir(global)?,
        &url,
        signs_in.as_ref().map(|(_, token)| token.as_str()),
        socket_host.as_deref(),
        &proof_key,
    )?;
    write_line(out, &format!("{url}{path}"))?;
    out.flush().map_err(|e| Error::io("writing stdout", e))?;
    // Only now: the URL must not wait for a crash's leftovers (see
    // `reap_at_start`).
    super::terminals::reap_at_start(&registry);
    if let Some(token) = &generated {
        eprintln!(
            "token for scripts (Authorization: Bearer): {token}\n\
             the link above works once, for {} minutes; `tmux-engine link` makes another",
            BridgeConfig::DEFAULT_CODE_LIFETIME.as_secs() / 60
        );
    }
    // The manager (Type=notify) learns that serve answers, and keeps a
    // watchdog on it when it set one.
    let notifier = Notifier::from_env();
    let watchdog = tokio_util::sync::CancellationToken::new();
    if let Some(notifier) = &notifier {
        let ready = format!(
            "READY=1\nSTATUS=serving {url}\nMAINPID={}",
            std::process::id()
        );
        if let Err(error) = notifier.notify(&ready) {
            tracing::warn!(%error, "telling the service manager serve is ready");
        }
        notifier.keep_watchdog(watchdog.clone());
    }
    let served = bridge
        .serve_with(listener, options, async move {
            interrupts.recv().await;
            if let Some(notifier) = notifier {
                let _ = notifier.notify("STOPPING=1\nSTATUS=draining");
            }
        })
        .await;
    watchdog.cancel();
    if let Err(error) = bridge.hand_off(&dir) {
        tracing::warn!(%error, "the next serve will not know this one's sessions");
    }
    drop(socket);
    drop(found);
    // The terminals keep running; only our control clients detach.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), registry.shutdown()).await;
    Ok(served?)
}

/// The default `--max-terminals-per-owner`: a sixteenth of the open-file
/// limit, at least 8.
fn default_quota() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    usize::try_from(limit.map_or(1 << 16, |limit| limit / 16))
        .unwrap_or(usize::MAX)
        .max(8)
}

/// Reads a file of secrets, refusing (`UNSAFE_FILE`) one that is not the
/// user's own or that group or others may read or write: checked on the
/// opened file, so a swap after the check changes nothing.
fn read_private(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let context = || format!("reading token file {}", path.display());
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(context(), e))?;
    let meta = file.metadata().map_err(|e| Error::io(context(), e))?;
    crate::cli::secret_file::check(path, &meta)?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| Error::io(context(), e))?;
    Ok(text)
}

/// The Unix socket `serve` placed, removed on the way out unless another
/// file took its path meanwhile.
struct Socket {
    path: PathBuf,
    inode: Option<(u64, u64)>,
}

impl Socket {
    fn placed(path: &Path) -> Socket {
        Socket {
            path: path.to_owned(),
            inode: identity(path),
        }
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.inode.is_some() && identity(&self.path) == self.inode {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_delays() {
        // The flag's written default is the registry's.
        assert_eq!(
            parse_restart_delay("0.5"),
            Ok(RestartBackoff::default().initial)
        );
        assert_eq!(parse_restart_delay("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_restart_delay("30"), Ok(Duration::from_secs(30)));
        for bad in ["", "0", "0.001", "30.5", "-1", "NaN", "inf", "1s"] {
            assert!(parse_restart_delay(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn control_timeouts() {
        // The flag's written default is the backend's.
        assert_eq!(parse_control_timeout("10"), Ok(TmuxConfig::CONTROL_TIMEOUT));
        assert_eq!(parse_control_timeout("0.01"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_control_timeout("3600"), Ok(Duration::from_secs(3600)));
        for bad in ["", "0", "0.001", "3601", "-1", "NaN", "inf", "10s"] {
            let error = parse_control_timeout(bad).expect_err(bad);
            assert!(error.contains("0.01 to 3600"), "{bad:?}: {error}");
        }
    }
}
