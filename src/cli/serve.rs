//! `serve`: the web bridge on one long-lived registry. Parses the flags
//! into a [`BridgeConfig`] and [`ServeOptions`], opens the registry with a
//! clean environment for the terminals it spawns, binds (TCP, maybe TLS,
//! or a Unix socket), prints the URL to open, and serves until Ctrl-C or
//! SIGTERM; then drains (the viewers close with 1012, in-flight requests
//! finish, all within `DRAIN_BOUND`), hands its sign-in sessions to the
//! next serve on the same state directory, and detaches from the
//! terminals, leaving them running.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
use super::serve_args::{ListenAt, ServeArgs};
use super::terminals::{owner, state_dir};

/// The environment variable read for the token when `--token` is absent.
const TOKEN_ENV: &str = "TMUX_ENGINE_TOKEN";

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
