//! The composition under every terminal: a private tmux server whose
//! session the control client creates itself (`tmux -C new-session ...`),
//! with the pane subscribed before tmux writes anything, so no output is
//! lost to a late attach. On the raw path a client linked directly (no
//! process) then takes that client's place (`hand_over`).
//!
//! [`Terminal`](super::Terminal) adds the screen model and the user-facing
//! verbs on top; the registry's tmux backend and `run` use these parts
//! directly (they keep the server past the engine, or need lossless
//! delivery).

use std::sync::Arc;

use crate::control::PaneId;
use crate::control::client::{ClientOptions, ControlClient, PaneStream};
use crate::control::subscribe::SubscribeOptions;
use crate::tmux::command::TmuxCommand;
use crate::tmux::exit_handshake::{StartSignal, wrapper_executable};
use crate::tmux::relay::RelayListener;
use crate::tmux::server::{FirstPane, Server};
use crate::tmux::{ServerOptions, Tmux, with_parent};
use crate::{Error, Result};

/// A started server, its control client, its one pane and that pane's
/// output from the first byte.
#[derive(Debug)]
#[non_exhaustive]
pub struct Parts {
    /// The server: killed when dropped unless
    /// [`into_detached`](Server::into_detached).
    pub server: Server,
    /// The control client that created the session.
    pub client: ControlClient,
    /// The pane the program runs in (`%0`).
    pub pane: PaneId,
    /// The pane's output, subscribed before tmux wrote anything.
    pub output: PaneStream,
    /// On the raw path, the epoch the pane's relay numbers its bytes in
    /// (`output` starts at its offset 0): every engine process linked to
    /// the terminal counts in it. `None`: `%output`, this process's own.
    pub stream_epoch: Option<u64>,
}

/// Starts a server running `server_opts.command` (or the shell) and
/// attaches a control client with `client_opts`; the returned stream
/// follows the pane from its first byte with `subscribe`.
///
/// Every engine client of the server takes the server's handshake lock
/// (tmux 3.3a crash; see [`ClientOptions::handshake_lock`]), and writes
/// large pastes' pieces into the server's own private directory unless
/// `client_opts` names one ([`ClientOptions::input_dir`]), as a client
/// attaching to it later does.
///
/// # Errors
/// Invalid options, tmux failing to start (`COMMAND_FAILED`,
/// `SERVER_GONE`), or `UNRESPONSIVE`. Nothing is left running.
pub async fn launch(
    tmux: Arc<Tmux>,
    server_opts: ServerOptions,
    client_opts: ClientOptions,
    subscribe: SubscribeOptions,
) -> Result<Parts> {
    launch_as(tmux, server_opts, client_opts, subscribe, Starter::Plain).await
}

/// How [`launch_as`] runs the `tmux -C` process that starts the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Starter {
    /// As it is.
    Plain,
    /// Killed by the kernel should this process end while it runs
    /// ([`with_parent`]), where the relay executable is known and another
    /// client takes its place at once ([`hand_over`]): what a server that
    /// must die with the engine needs (the warm pool's).
    DiesWithEngine,
}

/// [`launch`], its starting process run as `starter` says.
pub(crate) async fn launch_as(
    tmux: Arc<Tmux>,
    server_opts: ServerOptions,
    client_opts: ClientOptions,
    subscribe: SubscribeOptions,
    starter: Starter,
) -> Result<Parts> {
    let relay_executable = server_opts.raw_relay.clone();
    let (mut server, mut command) = Server::prepare(tmux, server_opts)?;
    // On the fallback (no direct link) too: the `tmux -C attach` process
    // that then takes over can let go while idle and start again, which
    // the starter, made to create the session, cannot.
    let handed_over = server.raw_socket().is_some();
    // The relay executable, where it can run: the pane's wrapper then, and
    // the pool's starter's guard.
    let wrapper = wrapper_executable(relay_executable.as_deref());
    if starter == Starter::DiesWithEngine
        && handed_over
        && let Some(relay) = wrapper
    {
        command = with_parent::wrap(&command, relay);
    }
    let client_opts = ClientOptions {
        handshake_lock: client_opts
            .handshake_lock
            .or_else(|| Some(server.control_lock())),
        input_dir: client_opts
            .input_dir
            .or_else(|| Some(server.dir().to_owned())),
        // Acknowledged by the reader: set before it reads a byte.
        exit_handshake: client_opts
            .exit_handshake
            .or_else(|| server.exit_handshake().then(|| server.dir().to_owned())),
        ..client_opts
    };
    // The first pane of a fresh server is always %0.
    let pane = PaneId(0);
    // Listening before tmux runs the pipe's relay, which finds nobody otherwise.
    let relay = server.raw_socket().map(RelayListener::bind).transpose()?;
    let ready_timeout = client_opts.ready_timeout;
    let starter_opts = ClientOptions {
        short_lived: handed_over,
        ..client_opts.clone()
    };
    // Open before tmux runs the pane: its wrapper tells the start through it.
    let start_signal = (!server.launcher() && server.exit_handshake() && wrapper.is_some())
        .then(|| StartSignal::open(server.dir()))
        .flatten();
    let (client, streams) =
        ControlClient::spawn_subscribed(command, starter_opts, &[(pane, subscribe)]).await?;
    let (client, mut streams) = if handed_over {
        hand_over(&server, (client, streams), client_opts, (pane, subscribe)).await?
    } else {
        (client, streams)
    };
    let output = streams.pop().expect("one subscription was asked for");
    let mut stream_epoch = None;
    if let Some(relay) = relay {
        // `%output` of the pane is off already: the relay is its only way.
        let linked = match relay.accept(ready_timeout).await {
            Ok(linked) => linked,
            Err(error) => {
                client.detach().await;
                return Err(error);
            }
        };
        stream_epoch = Some(linked.epoch);
        client.attach_raw(pane, linked)?;
    }
    let info = TmuxCommand::new("list-panes")
        .target(pane)
        .opt("-F", "#{pid} #{pane_pid}");
    let reply = client.command(&info).await?;
    let text = reply.text();
    let mut fields = text.split(' ').map(str::parse::<u32>);
    let (Some(Ok(pid)), Some(Ok(pane_pid))) = (fields.next(), fields.next()) else {
        return Err(Error::Command {
            command: info.line().to_owned(),
            message: format!("unexpected answer {text:?}"),
        });
    };
    if server.launcher() {
        crate::tmux::exit_handshake::exec_seen(pane_pid).await;
    } else if server.exit_handshake() {
        crate::tmux::exit_handshake::started_signalled(pane_pid, start_signal).await;
    }
    server.set_started(
        pid,
        FirstPane {
            id: pane,
            pid: pane_pid,
        },
    );
    Ok(Parts {
        server,
        client,
        pane,
        output,
        stream_epoch,
    })
}

/// Puts a client linked directly ([`ControlClient::attach_quiet`]: no
/// process) in the place of the `tmux -C` process that started the server,
/// so that no terminal keeps a `tmux -C` process at rest (~320 KiB each);
/// on the fallback, a `tmux -C attach` process, which lets go while idle
/// and starts again on its next use as the starter cannot.
/// Only on the raw path: the pane's bytes come from its relay, from byte 0,
/// whichever client is attached, so none is lost or doubled between the two
/// (on `%output`, the two clients' streams would overlap).
///
/// The starter goes first, and the link attaches once it has exited: the
/// two are never attached together. Were they, an engine SIGKILLed between
/// the two would leave the server for good (tmux 3.3a): the link's end
/// makes tmux write `%client-detached` to the starter, whose reader is dead
/// too, so that write never drains, and tmux never lets an exiting control
/// client with output left go; a pooled server (`exit-unattached`) then
/// outlived its engine. Meanwhile a bare connection to the socket (no
/// identify: no notification is written for it) holds the server up, which
/// `exit-unattached` would otherwise end with no client left.
///
/// # Errors
/// The link's, the starter being gone by then (a server that refuses the
/// link gets a `tmux -C attach` process from `attach_quiet` instead).
async fn hand_over(
    server: &Server,
    (starter, streams): (ControlClient, Vec<PaneStream>),
    opts: ClientOptions,
    (pane, subscribe): (PaneId, SubscribeOptions),
) -> Result<(ControlClient, Vec<PaneStream>)> {
    // Connected before the starter is let go: tmux accepts it in the loop
    // turn that sees the starter's end at the latest, so its exit check
    // finds a client still there. Should the connect fail (no server, no
    // descriptor left), a pooled server may exit with the starter and the
    // attach below fails: a failed start, nothing left behind.
    let holder = tokio::net::UnixStream::connect(server.socket()).await;
    drop(streams);
    // Under the handshake lock, and resolved once it has exited.
    starter.detach().await;
    let linked = ControlClient::attach_quiet(server.handle(), opts, &[(pane, subscribe)]).await;
    drop(holder);
    linked
}
