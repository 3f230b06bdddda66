//! The owner-scoped terminal registry: owners, terminals, restart policy,
//! liveness, persistence and adoption.
//!
//! A [`Registry`] mints ids, publishes terminals only after their setup
//! succeeded, fences every call to the terminal's exact owner (through the
//! owner's handle, [`Registry::owner`] → [`Owned`]), allows one send at a
//! time per terminal, awaits every cleanup and reports every failure. One
//! backend, fixed when the registry is built, runs the terminals: tmux
//! ([`Registry::open`], [`crate::backend`]: a peer module above this one),
//! or the stub in the registry-logic
//! tests (`tests/support/stub.rs`, written against these public traits).
//! The core reaches it only through the [`Backend`] and
//! [`BackendTerminal`] traits; viewers get a [`ViewedTerminal`].
//!
//! One rule splits the files: each is one concern, holding that
//! concern's values and all of its code, `impl Registry` and
//! `impl Owned` alike; the seam (`seam.rs`, `values.rs`) is the concern
//! every other one uses. The values every layer shares (ids, [`SpawnSpec`],
//! [`RestartPolicy`]) live in [`crate::vocab`]; the state directory's
//! records and locks in `crate::statedir`, below this module.
//!
//! | file           | concern                                              |
//! |----------------|------------------------------------------------------|
//! | `seam.rs`      | the backend traits                                   |
//! | `values.rs`    | their values: statuses, pages; snapshots             |
//! | `send/`        | a send's values: request, handle, output, answer     |
//! | `service.rs`   | [`Registry`], its config, [`Owned`], `Inner`         |
//! | `state.rs`     | the maps behind the lock; a terminal's `Presence`    |
//! | `spawn.rs`     | `spawn`: reservation, publication, rollback          |
//! | `ops.rs`       | send, read, screen, signal, list, show               |
//! | `signal.rs`    | the allowed [`Signal`]s                              |
//! | `io.rs`        | output, input, resize, events, attach command, wait  |
//! | `command.rs`   | a command the shell's marks show, as a value         |
//! | `commands.rs`  | `commands` and the wait for a command                |
//! | `rename.rs`    | `rename`                                             |
//! | `lifecycle.rs` | kill (one `Close` task per terminal), disposal       |
//! | `adopt.rs`     | adoption: open, refresh (rescan), lazy attach, reap  |
//! | `history.rs`   | kept histories, boot ids, the restore after a reboot |
//! | `liveness.rs`  | probe, attach, recreation                            |
//! | `supervise.rs` | restart policies, the `always` loop                  |
//! | `viewed.rs`    | [`ViewedTerminal`]: what viewers may do              |
//!
//! Locking: one `std::sync::Mutex` guards the maps and is never held across
//! `.await`; backend calls run outside it. Per-terminal liveness work is
//! serialized by a `tokio::sync::Mutex` within a process, and across the
//! processes sharing a state directory by `flock`s (`statedir/locks.rs`): name
//! reservation, one send at a time, recreation and kill, and which process
//! runs an `always` restart loop.

mod adopt;
mod command;
mod commands;
mod history;
mod io;
mod kept_read;
mod lifecycle;
mod listing;
mod liveness;
mod ops;
mod rename;
pub(crate) mod seam;
mod send;
mod service;
mod signal;
mod spawn;
mod state;
mod supervise;
mod values;
mod viewed;

pub use crate::history::FLUSH_INTERVAL as HISTORY_FLUSH_INTERVAL;
/// What a backend's keeper of kept histories is handed
/// ([`BackendTerminal::keep_history`]).
pub use crate::history::keeper::KeepOrder;
pub use crate::statedir::{CorruptRecord, LoadedRecords, StateDir, TerminalRecord};
pub use crate::stream::strip_escapes;
pub use crate::stream::{CursorGap, OutputCursor, OutputSince, Stream};
pub use crate::vocab::ids::{OwnerId, TerminalId};
pub use crate::vocab::spawn_spec::{RestartPolicy, SpawnSpec};
pub use adopt::ScanReport;
pub use command::{Command, CommandRef, CommandsAnswer};
pub use history::HOST_RESTARTED;
pub use io::{WaitCondition, WaitSince};
pub use kept_read::Searchable;
pub use liveness::{AttachTarget, ProbeReport};
pub(crate) use seam::answered;
pub use seam::{
    AttachLock, Backend, BackendHealth, BackendTerminal, CloseReason, ExitCodeSource, Liveness,
    OutputStream, ReadPage, ReadRequest, ReapReport, RecordCheck, Restore, SendAnswer, SendHandle,
    SendOperation, SendOutput, SendRequest, SpawnRequest, TerminalStatus, WaitFor, WaitReason,
    WriteAnswer,
};
pub use service::{Census, Owned, Registry, RegistryConfig, RestartBackoff};
pub use signal::{Signal, SignalDelivery};
pub use values::TerminalSnapshot;
pub use viewed::ViewedTerminal;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Error;

    /// The registry's aggregate errors keep every failure in their text.
    #[test]
    fn error_texts_name_the_values() {
        let close = || {
            Arc::new(Error::io(
                "stub close",
                std::io::Error::other("close failed"),
            ))
        };
        let errors = [
            Error::TerminalClosing("t-1-0123456789abcdef".to_owned()),
            Error::TerminalDead {
                terminal: "t-1-0123456789abcdef".to_owned(),
                status: "exited with code 1".to_owned(),
            },
            Error::BackendCleanup {
                cause: Box::new(Error::Cancelled("spawn of terminal t-1".to_owned())),
                cleanup: close(),
            },
            Error::RollbackFailed {
                cause: Box::new(Error::RegistryDisposing),
                rollback: close(),
            },
            Error::CloseFailed {
                failures: vec![close(), close()],
            },
            Error::CleanupFailed {
                failures: vec![
                    close(),
                    Arc::new(Error::CloseFailed {
                        failures: vec![close()],
                    }),
                ],
            },
        ];
        let text: Vec<String> = errors
            .iter()
            .map(|error| format!("{}: {error}", error.code()))
            .collect();
        insta::assert_snapshot!(text.join("\n"), @r"
        TERMINAL_CLOSING: terminal t-1-0123456789abcdef is closing
        TERMINAL_DEAD: terminal t-1-0123456789abcdef is dead: exited with code 1
        BACKEND_CLEANUP_FAILED: cancelled: spawn of terminal t-1; backend cleanup also failed: stub close: close failed
        ROLLBACK_FAILED: spawn and rollback both failed: the registry is disposing; rollback: stub close: close failed
        CLOSE_FAILED: failed to close 2 terminal(s): stub close: close failed; stub close: close failed
        CLEANUP_FAILED: failed to clean up registry lifecycle: stub close: close failed; failed to close 1 terminal(s): stub close: close failed
        ");
    }
}
