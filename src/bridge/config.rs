//! How a [`Bridge`](super::Bridge) is configured: [`BridgeConfig`], its
//! builder and the transport rule (no open access, no plain HTTP off
//! loopback). Apart from the bridge because it is a value the CLI builds
//! and checks before anything is served; nothing here serves.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::auth::Auth;
use super::files::DEFAULT_MAX_FILE_SIZE;
use super::identity::TrustedProxy;
use super::node::PeerNode;
use super::page::PageOptions;
use super::prove::ProofKey;
use super::signin::DEFAULT_CODE_LIFETIME;
use crate::{Error, Result};

/// How often WebSocket viewers are pinged unless configured otherwise.
pub(crate) const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(20);

/// How a [`Bridge`](super::Bridge) authenticates and what it keeps for resumes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BridgeConfig {
    /// Tokens, or open access.
    pub auth: Auth,
    /// Origins (`scheme://host[:port]`) besides the page's own that may
    /// write and open WebSockets; their hosts are allowed `Host` names.
    pub allow_origins: Vec<String>,
    /// Host names (`NAME` or `NAME:PORT`) a request's `Host` may name
    /// besides the listen address and, on loopback, the loopback names.
    /// `NAME` alone allows any port (a proxy may strip it); `NAME:PORT`
    /// exactly that one.
    pub allow_hosts: Vec<String>,
    /// The TCP address the bridge listens on: its port and whether it is
    /// loopback decide which `Host` values are the bridge's own. `None` on
    /// a Unix socket: then only [`allow_hosts`](BridgeConfig::allow_hosts)
    /// (and the hosts of the allowed origins) are, and with none of those
    /// every request is refused (421), so a socket deployment must name
    /// its hosts.
    pub listen: Option<SocketAddr>,
    /// The page is served over `https` (TLS here or at a proxy): its own
    /// origin has that scheme and the cookie is `Secure`.
    pub https: bool,
    /// The path prefix the bridge is mounted under: empty, or `/prefix`
    /// without a trailing slash.
    pub base_path: String,
    /// How often a WebSocket viewer is pinged; one that stops answering is
    /// closed.
    pub ping_interval: Duration,
    /// The page's default client options (`serve --page-option`).
    pub page_options: PageOptions,
    /// The largest file an upload may write or a download may read
    /// (`serve --max-file-size`).
    pub max_file_size: u64,
    /// The key this run proves itself with (`POST /api/serve-proof`),
    /// recorded in `serve.json` for the CLI; none answers 404.
    pub proof_key: Option<ProofKey>,
    /// The proxies whose user header names the owner
    /// (`serve --trusted-proxy --user-header`).
    pub trusted_proxy: Option<TrustedProxy>,
    /// Where every act that changes a terminal or moves data is recorded
    /// (`serve --audit-log`).
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// This serve's node name (`serve --node`): every terminal id and
    /// link it answers carries it.
    pub node: Option<String>,
    /// The other nodes behind the same origin (`serve --peer-node`), which
    /// the page lists and opens terminals of too.
    pub peer_nodes: Vec<PeerNode>,
    /// Plain HTTP may be served on a TCP address off loopback
    /// (`serve --allow-plain-http`: the network is trusted); see
    /// [`check_transport`](BridgeConfig::check_transport).
    pub allow_plain_http: bool,
}

impl BridgeConfig {
    /// The default bound on one file moved in or out, each way
    /// (`serve --max-file-size`).
    pub const DEFAULT_MAX_FILE_SIZE: u64 = DEFAULT_MAX_FILE_SIZE;
    /// How long a sign-in code works unless told otherwise.
    pub const DEFAULT_CODE_LIFETIME: std::time::Duration = DEFAULT_CODE_LIFETIME;

    /// A config with `auth` and no extra origins.
    pub fn new(auth: Auth) -> BridgeConfig {
        BridgeConfig {
            auth,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            listen: None,
            https: false,
            base_path: String::new(),
            ping_interval: DEFAULT_PING_INTERVAL,
            page_options: PageOptions::default(),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            proof_key: None,
            trusted_proxy: None,
            audit: None,
            node: None,
            peer_nodes: Vec::new(),
            allow_plain_http: false,
        }
    }

    /// Names this serve's node: terminal ids become `NODE.t-…`, links
    /// carry `&node=NODE` ([`check_node_name`](super::check_node_name) first).
    #[must_use]
    pub fn node(mut self, name: impl Into<String>) -> BridgeConfig {
        self.node = Some(name.into());
        self
    }

    /// Tells the page of another node behind the same origin.
    #[must_use]
    pub fn peer_node(mut self, peer: PeerNode) -> BridgeConfig {
        self.peer_nodes.push(peer);
        self
    }

    /// Proves this serve with `key` (`POST /api/serve-proof`).
    #[must_use]
    pub fn proof_key(mut self, key: ProofKey) -> BridgeConfig {
        self.proof_key = Some(key);
        self
    }

    /// Takes the owner from `proxy`'s user header, from its peers only.
    #[must_use]
    pub fn trusted_proxy(mut self, proxy: TrustedProxy) -> BridgeConfig {
        self.trusted_proxy = Some(proxy);
        self
    }

    /// Records every act that changes a terminal or moves data in `log`.
    #[must_use]
    pub fn audit_log(mut self, log: Arc<crate::audit::AuditLog>) -> BridgeConfig {
        self.audit = Some(log);
        self
    }

    /// Bounds the files moved through `/api/terminals/{t}/files`.
    #[must_use]
    pub fn max_file_size(mut self, bytes: u64) -> BridgeConfig {
        self.max_file_size = bytes;
        self
    }

    /// Lets requests name `host` (`NAME` or `NAME:PORT`) in `Host`.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> BridgeConfig {
        self.allow_hosts.push(host.into());
        self
    }

    /// Allows plain HTTP off loopback (see
    /// [`check_transport`](BridgeConfig::check_transport)).
    #[must_use]
    pub fn allow_plain_http(mut self, allow: bool) -> BridgeConfig {
        self.allow_plain_http = allow;
        self
    }

    /// Refuses a TCP address off loopback for open access ([`Auth::Open`],
    /// `serve --no-auth`: anyone who reaches the port owns the terminals),
    /// and for plain HTTP (`tls`: whether TLS is served here) unless
    /// [`allow_plain_http`](BridgeConfig::allow_plain_http): the token would
    /// cross the network in clear. Loopback passes, as does a Unix socket
    /// (never checked here: its directory decides who reaches it).
    /// [`Bridge::serve_with`](super::Bridge::serve_with) checks it; call it first to refuse before
    /// anything else is set up.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the address and the ways out.
    pub fn check_transport(&self, addr: SocketAddr, tls: bool) -> Result<()> {
        if addr.ip().is_loopback() {
            return Ok(());
        }
        if matches!(self.auth, Auth::Open(_)) {
            return Err(Error::InvalidInput(format!(
                "--no-auth is refused on {addr}: listen on a loopback address or use a token"
            )));
        }
        if !tls && !self.allow_plain_http {
            return Err(Error::InvalidInput(format!(
                "plain HTTP is refused on the non-loopback address {addr}: the token would \
                 cross the network in clear; give --tls-cert/--tls-key, listen on loopback or \
                 unix:/path behind a TLS proxy, or pass --allow-plain-http"
            )));
        }
        Ok(())
    }

    /// Records the TCP address the bridge listens on.
    #[must_use]
    pub fn listening_on(mut self, addr: SocketAddr) -> BridgeConfig {
        self.listen = Some(addr);
        self
    }

    /// Marks the page as served over `https`.
    #[must_use]
    pub fn https(mut self, https: bool) -> BridgeConfig {
        self.https = https;
        self
    }

    /// Mounts the bridge under `prefix` (`/prefix`).
    #[must_use]
    pub fn base_path(mut self, prefix: impl Into<String>) -> BridgeConfig {
        self.base_path = prefix.into();
        self
    }

    /// Sets the WebSocket ping interval.
    #[must_use]
    pub fn ping_interval(mut self, interval: Duration) -> BridgeConfig {
        self.ping_interval = interval;
        self
    }

    /// Sets the page's default client options.
    #[must_use]
    pub fn page_options(mut self, options: PageOptions) -> BridgeConfig {
        self.page_options = options;
        self
    }

    /// Allows WebSocket upgrades from `origin` too.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> BridgeConfig {
        self.allow_origins.push(origin.into());
        self
    }
}
