//! `serve`: the web bridge on one long-lived registry. Parses the flags
//! into a [`BridgeConfig`], opens the registry with a clean environment
//! for the terminals it spawns, prints the URL to open, and serves until
//! Ctrl-C or SIGTERM; then closes the viewers (1001) and shuts the
//! registry down, leaving the terminals running.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use tmux_engine::Error;
use tmux_engine::bridge::{Auth, Bridge, BridgeConfig, Principal, Tokens, auth, clean_environment};
use tmux_engine::registry::tmux::{TmuxConfig, open_registry};

use super::args::{Global, SHELL_ENV};
use super::report::{CliError, write_line};
use super::terminals::{owner, state_dir};

/// `serve`'s flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, default_value = "127.0.0.1:7681")]
    listen: SocketAddr,
    /// The token clients must present [default: a random one, printed in the URL].
    #[arg(long, conflicts_with_all = ["token_file", "no_auth"])]
    token: Option<String>,
    /// A file of `TOKEN OWNER [read-only]` lines; each token acts as its owner.
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
    /// Bytes of output kept per terminal for resuming viewers.
    #[arg(long, default_value_t = 1 << 20)]
    replay_bytes: usize,
    /// Seconds between WebSocket pings; a viewer that sends nothing for one
    /// more interval after a ping is closed (1001). 0 turns pings off.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    ping_interval: u64,
}

/// Serves until SIGINT or SIGTERM.
///
/// # Errors
/// `INVALID_INPUT` for bad flags (`--no-auth` off loopback, a weak token,
/// a bad token file); `IO` when the address cannot be bound; the
/// registry's errors.
pub(crate) async fn run(
    global: &Global,
    args: ServeArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let owner = owner(global)?;
    for host in &args.allow_host {
        tmux_engine::bridge::check_allow_host(host)?;
    }
    for origin in &args.allow_origin {
        tmux_engine::bridge::check_allow_origin(origin)?;
    }
    let mut printed_token = None;
    let auth = if args.no_auth {
        if !args.listen.ip().is_loopback() {
            return Err(Error::InvalidInput(format!(
                "--no-auth is refused on {}: listen on a loopback address or use a token",
                args.listen
            ))
            .into());
        }
        Auth::Open(Principal {
            owner,
            read_only: false,
        })
    } else if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading token file {}", path.display()), e))?;
        Auth::Tokens(Tokens::parse(&text)?)
    } else {
        let token = match args.token {
            Some(token) => token,
            None => {
                let token = auth::generate_token()?;
                printed_token = Some(token.clone());
                token
            }
        };
        Auth::Tokens(Tokens::single(&token, owner)?)
    };
    let mut interrupts = super::run::Interrupts::register()?;
    let dir = state_dir(global)?;
    let mut config = TmuxConfig::for_state_dir(&dir).environment(clean_environment());
    if let Some(shell) = std::env::var_os(SHELL_ENV).filter(|v| !v.is_empty()) {
        config = config.shell(shell);
    }
    let (registry, _report) = open_registry(dir, config).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Error::io(format!("listening on {}", args.listen), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::io("reading the listening address", e))?;
    let url = match &printed_token {
        Some(token) => format!("http://{local}/?token={token}"),
        None => format!("http://{local}/"),
    };
    write_line(out, &url)?;
    out.flush().map_err(|e| Error::io("writing stdout", e))?;
    let mut bridge_config = BridgeConfig::new(auth)
        .replay_bytes(args.replay_bytes)
        .listening_on(local)
        .ping_interval(std::time::Duration::from_secs(args.ping_interval));
    for origin in args.allow_origin {
        bridge_config = bridge_config.allow_origin(origin);
    }
    for host in args.allow_host {
        bridge_config = bridge_config.allow_host(host);
    }
    let bridge = Bridge::new(registry.clone(), bridge_config);
    let served = bridge
        .serve(listener, async move {
            interrupts.recv().await;
        })
        .await;
    // The terminals keep running; only our control clients detach.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), registry.shutdown()).await;
    Ok(served?)
}
