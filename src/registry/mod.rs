//! The owner-scoped terminal registry: owners, terminals, restart policy,
//! liveness, persistence and adoption, independent of how terminals run.
//!
//! A [`Registry`] mints ids, publishes terminals only after their setup
//! succeeded, fences every call to the terminal's exact owner, allows one
//! send at a time per terminal, awaits every cleanup and reports every
//! failure. Terminal mechanics live behind the [`Backend`] and
//! [`BackendTerminal`] traits; this module never talks to tmux itself.
//!
//! | file           | job                                                  |
//! |----------------|------------------------------------------------------|
//! | `backend.rs`   | the backend traits and the values crossing them      |
//! | `ids.rs`       | [`OwnerId`], [`TerminalId`], name rules              |
//! | `spec.rs`      | [`SpawnSpec`], policies, config, snapshots           |
//! | `state.rs`     | the maps behind the lock (private)                   |
//! | `service.rs`   | [`Registry`], backend registration, `spawn`          |
//! | `ops.rs`       | send, read, screen, signal, list, show               |
//! | `lifecycle.rs` | kill, owner and registry disposal                    |
//! | `liveness.rs`  | probe, attach, recreation, the `always` loop         |
//! | `persist.rs`   | the state directory's records                        |
//! | `adopt.rs`     | open, refresh (rescan), reap                         |
//! | `stub.rs`      | a scriptable backend for tests (feature `stub`)      |
//!
//! Locking: one `std::sync::Mutex` guards the maps and is never held across
//! `.await`; backend calls run outside it. Per-terminal liveness work is
//! serialized by a `tokio::sync::Mutex`.

mod adopt;
mod backend;
mod ids;
mod lifecycle;
mod liveness;
mod ops;
mod persist;
mod service;
mod spec;
mod state;
#[cfg(any(test, feature = "stub"))]
pub mod stub;

pub use adopt::ScanReport;
pub use backend::{
    Backend, BackendTerminal, CloseReason, ExitStatus, Liveness, ReadPage, ReadRequest, ReapReport,
    Screen, SendOperation, SendOutput, SendRequest, SendResult, Signal, SignalDelivery,
    SpawnRequest, StartedSend, TerminalStatus, WaitFor, WaitReason,
};
pub use ids::{MAX_NAME_LEN, MAX_OWNER_LEN, OwnerId, TerminalId, validate_name};
pub use liveness::{AttachTarget, ProbeReport};
pub use ops::SendHandle;
pub use persist::{CorruptRecord, LoadedRecords, RECORD_VERSION, StateDir, TerminalRecord};
pub use service::{BackendGuard, Registry};
pub use spec::{
    DEFAULT_KIND, MAX_DIMENSION, RegistryConfig, RestartBackoff, RestartPolicy, Size, SpawnSpec,
    TerminalSnapshot,
};
