//! The state directory shared by every process of one registry: one JSON
//! record per terminal (`records.rs`; `cache.rs` keeps them parsed between
//! scans), the advisory locks that keep the
//! registry's invariants across processes (`locks.rs`), and the async
//! front the registry calls (`store.rs`, a directory or memory only).
//!
//! Below the registry and the backend, above the vocabulary: it knows
//! files, records and locks, never owners' rights, policy or tmux.

mod cache;
mod locks;
mod records;
mod store;

pub(crate) use locks::{FileLock, Purpose};
pub(crate) use records::write_atomically;
pub use records::{CorruptRecord, LoadedRecords, StateDir, TerminalRecord};
pub(crate) use store::Store;
