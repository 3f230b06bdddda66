//! One terminal: a private tmux server with its control client attached
//! from the first byte, and the pane it runs the program in.
//!
//! This is the composition every user of the engine needs (`run`, the test
//! fixture, the registry's tmux backend): the control client creates the
//! session itself (`tmux -C new-session ...`), with the pane subscribed
//! before tmux writes anything, so no output is lost to a late attach.

use std::sync::Arc;

use crate::control::PaneId;
use crate::control::client::{ClientOptions, ControlClient, PaneStream};
use crate::control::subscribe::SubscribeOptions;
use crate::tmux::command::TmuxCommand;
use crate::tmux::server::{FirstPane, Server};
use crate::tmux::{ServerOptions, Tmux};
use crate::{Error, Result};

/// A running terminal: server, control client and its one pane.
#[derive(Debug)]
pub struct Terminal {
    server: Server,
    client: ControlClient,
    pane: PaneId,
}

impl Terminal {
    /// Starts a server running `server_opts.command` (or the shell) and
    /// attaches a control client with `client_opts`; the returned stream
    /// follows the pane from its first byte.
    ///
    /// # Errors
    /// Invalid options, tmux failing to start (`COMMAND_FAILED`,
    /// `SERVER_GONE`), or `UNRESPONSIVE`. Nothing is left running.
    pub async fn start(
        tmux: Arc<Tmux>,
        server_opts: ServerOptions,
        client_opts: ClientOptions,
        subscribe: SubscribeOptions,
    ) -> Result<(Terminal, PaneStream)> {
        let (mut server, command) = Server::prepare(tmux, server_opts)?;
        // Every engine client of this server serialises its handshake and
        // its detach with the others (tmux 3.3a crash; see the option).
        let client_opts = ClientOptions {
            handshake_lock: client_opts
                .handshake_lock
                .or_else(|| Some(server.control_lock())),
            ..client_opts
        };
        // The first pane of a fresh server is always %0.
        let pane = PaneId(0);
        let (client, mut streams) =
            ControlClient::spawn_subscribed(command, client_opts, &[(pane, subscribe)]).await?;
        let stream = streams.pop().expect("one subscription was asked for");
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
        server.set_started(
            pid,
            FirstPane {
                id: pane,
                pid: pane_pid,
            },
        );
        Ok((
            Terminal {
                server,
                client,
                pane,
            },
            stream,
        ))
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The control client.
    pub fn client(&self) -> &ControlClient {
        &self.client
    }

    /// The pane the program runs in.
    pub fn pane(&self) -> PaneId {
        self.pane
    }

    /// Splits the terminal into its server, client and pane, e.g. to
    /// [`Server::into_detached`] the server so it outlives this process.
    pub fn into_parts(self) -> (Server, ControlClient, PaneId) {
        (self.server, self.client, self.pane)
    }

    /// Detaches the client and kills the server, removing its directory.
    ///
    /// # Errors
    /// As [`Server::kill`].
    pub async fn kill(self) -> Result<()> {
        let Terminal { server, client, .. } = self;
        // Kill first: detaching first would make tmux tear down the client
        // while output may still be queued, which is wasted work.
        let result = server.kill().await;
        // A lossless subscriber that stopped reading could hold the reader
        // up; the connection is dead either way, so don't wait for long.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), client.closed()).await;
        result
    }
}
