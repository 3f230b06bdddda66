//! The owner-scoped terminal registry: owners, terminals, restart policy,
//! liveness, persistence and adoption.
//!
//! A [`Registry`] mints ids, publishes terminals only after their setup
//! succeeded, fences every call to the terminal's exact owner (through the
//! owner's handle, [`Registry::owner`] → [`Owned`]), allows one send at a
//! time per terminal, awaits every cleanup and reports every failure. One
//! backend, fixed when the registry is built, runs the terminals: tmux
//! ([`Registry::open`], [`backend`]), or the stub in the registry-logic
//! tests (`tests/support/stub.rs`, written against these public traits).
//! The core reaches it only through the [`Backend`] and
//! [`BackendTerminal`] traits; viewers get a [`ViewedTerminal`].
//!
//! | file           | job                                                  |
//! |----------------|------------------------------------------------------|
//! | `seam.rs`      | the backend traits                                   |
//! | `values.rs`    | the values crossing them: statuses, sends, pages     |
//! | `signal.rs`    | the allowed [`Signal`]s                              |
//! | `names.rs`     | [`OwnerId`], [`TerminalId`], name rules              |
//! | `spec.rs`      | [`SpawnSpec`], policies, config, snapshots           |
//! | `state.rs`     | the maps behind the lock (private)                   |
//! | `presence.rs`  | a terminal's presence here: one enum, its changes    |
//! | `service.rs`   | [`Registry`], [`Owned`], the shared `Inner`          |
//! | `spawn.rs`     | `spawn`: reservation, publication, rollback          |
//! | `ops.rs`       | send, read, screen, signal, list, show               |
//! | `io.rs`        | output, input, resize, events, attach command, wait  |
//! | `lifecycle.rs` | kill (one `Close` task per terminal), disposal       |
//! | `liveness.rs`  | probe, attach, recreation                            |
//! | `supervise.rs` | the `always` policy's restart loop                   |
//! | `viewed.rs`    | [`ViewedTerminal`]: what viewers may do              |
//! | `store.rs`     | persistence as one async call (state dir or memory)  |
//! | `persist.rs`   | the state directory's records (blocking file I/O)    |
//! | `locks.rs`     | `flock`s shared by every process on a state dir      |
//! | `adopt.rs`     | open, refresh (rescan), reap                         |
//! | `backend/`     | the tmux backend                                     |
//!
//! Locking: one `std::sync::Mutex` guards the maps and is never held across
//! `.await`; backend calls run outside it. Per-terminal liveness work is
//! serialized by a `tokio::sync::Mutex` within a process, and across the
//! processes sharing a state directory by `flock`s (`locks.rs`): name
//! reservation, one send at a time, recreation and kill, and which process
//! runs an `always` restart loop.

mod adopt;
pub mod backend;
mod commands;
mod io;
mod lifecycle;
mod liveness;
mod locks;
mod names;
mod ops;
mod persist;
mod presence;
mod rename;
mod seam;
mod service;
mod signal;
mod spawn;
mod spec;
mod state;
mod store;
mod supervise;
mod values;
mod viewed;

pub use crate::stream::{CursorGap, OutputCursor, OutputSince, Stream, strip_escapes};
pub use adopt::ScanReport;
pub use commands::{CommandRef, CommandsAnswer, MarkedCommand};
pub use io::{WaitCondition, WaitSince};
pub use liveness::{AttachTarget, ProbeReport};
pub use names::validate_name;
pub use names::{OwnerId, TerminalId};
pub use ops::SendHandle;
pub use persist::{CorruptRecord, LoadedRecords, StateDir, TerminalRecord};
pub use seam::{
    AttachLock, Backend, BackendTerminal, CloseReason, CommandResult, CommandRun, ExitStatus,
    Liveness, OutputStream, ReadPage, ReadRequest, ReapReport, RecordCheck, SendOperation,
    SendOutput, SendRequest, SendResult, SpawnRequest, StartedSend, TerminalStatus, WaitFor,
    WaitReason,
};
pub use service::{Owned, Registry};
pub use signal::{Signal, SignalDelivery};
pub use spec::{
    MAX_HISTORY_LIMIT, RegistryConfig, RestartBackoff, RestartPolicy, SpawnSpec, TerminalSnapshot,
};
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
