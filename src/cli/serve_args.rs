//! `serve`'s flags: what `--help` shows and how each value is read and
//! bounded before anything starts. Apart from `serve.rs`, which turns
//! them into the bridge's config and runs it, because the flags are
//! `serve`'s interface (a table of settings) and the run is its
//! behaviour.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Args;
use tmux_engine::backend::TmuxConfig;
use tmux_engine::bridge::ServeOptions;
use tmux_engine::registry::RestartBackoff;

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
    seconds_within(
        text,
        &(Duration::from_millis(10)..=RestartBackoff::default().max_delay),
    )
}

/// `10`, `0.5` as seconds: `--control-timeout`, within
/// [`TmuxConfig::CONTROL_TIMEOUT_RANGE`] (the backend refuses others).
fn parse_control_timeout(text: &str) -> Result<Duration, String> {
    seconds_within(text, &TmuxConfig::CONTROL_TIMEOUT_RANGE)
}

/// `text` as seconds (fractions allowed) within `range`, else an error
/// naming the range.
fn seconds_within(text: &str, range: &RangeInclusive<Duration>) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .filter(|secs| range.contains(secs))
        .ok_or_else(|| {
            format!(
                "{text:?}: expected seconds from {} to {}",
                range.start().as_secs_f64(),
                range.end().as_secs_f64()
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
    pub(super) listen: ListenAt,
    /// The token clients must present [default: $TMUX_ENGINE_TOKEN, else a
    /// random one, printed in the URL]. A token in argv is visible to every
    /// local user in /proc/*/cmdline: prefer TMUX_ENGINE_TOKEN or --token-file.
    #[arg(long, conflicts_with_all = ["token_file", "no_auth"])]
    pub(super) token: Option<String>,
    /// A file of `TOKEN OWNER [read-only]` lines; each token acts as its
    /// owner. Must be the user's own and not readable by group or others.
    #[arg(long, conflicts_with = "no_auth")]
    pub(super) token_file: Option<PathBuf>,
    /// An origin (scheme://HOST[:PORT]) besides the page's own that may write and open
    /// WebSockets; its host becomes an allowed Host too (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub(super) allow_origin: Vec<String>,
    /// A name clients may reach serve by (the Host header), besides the listen address and,
    /// on loopback, 127.0.0.1/localhost/[::1]: NAME allows any port, NAME:PORT only that
    /// port; other names are refused with 421 (DNS rebinding) (repeatable).
    #[arg(long = "allow-host", value_name = "NAME[:PORT]")]
    pub(super) allow_host: Vec<String>,
    /// No authentication at all (refused unless listening on loopback).
    #[arg(long)]
    pub(super) no_auth: bool,
    /// Bytes of output kept per terminal: what a `read since` cursor and a
    /// resuming viewer can be answered from.
    #[arg(long, default_value_t = 4 << 20)]
    pub(super) replay_bytes: usize,
    /// Seconds between WebSocket pings; a viewer that sends nothing for one
    /// more interval after a ping is closed (1001). 0 turns pings off.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    pub(super) ping_interval: u64,
    /// Seconds a client may take to send a request's head (or finish the
    /// TLS handshake), and the longest pause in a request body; a
    /// connection that sends nothing is closed after it.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) header_timeout: u64,
    /// Seconds a request's whole body may take, however steadily it comes.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) body_timeout: u64,
    /// Seconds a kept-alive connection may wait for its next request.
    #[arg(long, value_name = "SECS", default_value_t = ServeOptions::DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) idle_timeout: u64,
    /// Connections served at once (WebSockets included); a new one beyond
    /// them gets 503 TOO_MANY_CONNECTIONS. [default: half the open-file
    /// limit (ulimit -n), leaving the other half for the terminals' pipes,
    /// PTYs and the registry's files]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) max_connections: Option<u64>,
    /// Terminals one owner may have; a spawn past them is 429
    /// TOO_MANY_TERMINALS [default: the open-file limit (ulimit -n) / 16,
    /// at least 8: each terminal costs serve about four descriptors, and
    /// the connections get half the limit].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) max_terminals_per_owner: Option<u64>,
    /// The largest file an upload may write or a download may read
    /// (`PUT`/`GET /api/terminals/{t}/files`, `upload`, `download`): bytes,
    /// or with K, M or G (powers of 1024); larger is 413. [default: 1G]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub(super) max_file_size: Option<u64>,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(super) tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(super) tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address (refused otherwise: the
    /// token would cross the network in clear). Use TLS or a proxy instead.
    #[arg(long)]
    pub(super) allow_plain_http: bool,
    /// Serve the page, API and WebSocket under this path (`/prefix`), as a
    /// reverse proxy mounts it; other paths answer 404.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub(super) base_path: String,
    /// This serve's node behind a shared front door: every terminal id it
    /// answers becomes NAME.t-… and its links carry &node=NAME, so a
    /// stateless proxy routes by the id, a header or a path prefix
    /// (1-63 of a-z, 0-9, '-').
    #[arg(long, value_name = "NAME")]
    pub(super) node: Option<String>,
    /// Another node behind the same origin and the path its serve is
    /// mounted at (b=/nodes/b/): the page lists and opens its terminals
    /// too, and says when it is unreachable (repeatable).
    #[arg(long = "peer-node", value_name = "NAME=PATH", requires = "node")]
    pub(super) peer_node: Vec<String>,
    /// A default of the page's client options (repeatable): fontSize=6..72,
    /// fontFamily=TEXT, theme=dark|light|solarized, cursorStyle=block|underline|bar,
    /// cursorBlink=true|false, scrollback=0..100000. A person's choices in
    /// the page and the URL's query (`?fontSize=16&theme=light`) override them.
    #[arg(long = "page-option", value_name = "KEY=VALUE")]
    pub(super) page_option: Vec<String>,
    /// Servers kept started ahead of spawns, so a new terminal reaches its
    /// prompt sooner (each is used by one terminal only; waiting ones exit
    /// with `serve`). 0 turns the pool off.
    #[arg(long, value_name = "N", env = "TMUX_ENGINE_POOL", default_value_t = TmuxConfig::DEFAULT_POOL_SIZE)]
    pub(super) pool: usize,
    /// Spawns keep their history on disk unless they say otherwise
    /// (`keep_history`): terminals come back after a reboot.
    #[arg(long)]
    pub(super) keep_history: bool,
    /// Seconds before an `always` terminal that died is started again
    /// (0.01-30, fractions allowed); each consecutive restart doubles it, up
    /// to 30 s, and after 10 in a row the terminal is left dead.
    #[arg(long, value_name = "SECS", default_value = "0.5", value_parser = parse_restart_delay)]
    pub(super) restart_delay: Duration,
    /// Seconds an idle terminal keeps serve's control link to its tmux
    /// server (no command under way, nothing following its events) before
    /// letting it go, to link again on its next use. 0 keeps every link.
    #[arg(long, value_name = "SECS", default_value_t = TmuxConfig::IDLE_UNLINK.as_secs())]
    pub(super) idle_unlink: u64,
    /// Seconds tmux may take to answer a terminal's control client before
    /// the command fails UNRESPONSIVE (a stopped server, or a machine under
    /// heavy load; the server is not taken for gone). 0.01-3600, fractions
    /// allowed.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_control_timeout)]
    pub(super) control_timeout: Duration,
    /// Believe --user-header only from these peers: ADDR/BITS (10.0.0.0/8,
    /// ::1/128), ADDR, or `unix` (any peer of serve's unix socket). The
    /// header from any other peer is refused, 403 UNTRUSTED_PROXY (repeatable).
    #[arg(
        long = "trusted-proxy",
        value_name = "CIDR|unix",
        requires = "user_header"
    )]
    pub(super) trusted_proxy: Vec<String>,
    /// The header in which a trusted proxy names the user (e.g.
    /// oauth2-proxy's X-Forwarded-User): that user is the owner, no token needed.
    #[arg(long, value_name = "NAME", requires = "trusted_proxy")]
    pub(super) user_header: Option<String>,
    /// Append every act that changes a terminal or moves data (sign-in,
    /// links, spawn, kill, signal, rename, send, upload, download, input per
    /// burst: who, which terminal, how many bytes, never the bytes) to FILE
    /// as JSON lines, each chained to the one before by a SHA-256 hash;
    /// created 0600. `tmux-engine audit verify FILE` checks it.
    #[arg(long, value_name = "FILE")]
    pub(super) audit_log: Option<PathBuf>,
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
