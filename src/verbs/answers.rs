//! The answers of the verbs that have no registry type of their own; the
//! others answer with the registry's values as they are
//! ([`TerminalSnapshot`], [`ReadPage`], [`Screen`], [`SignalDelivery`],
//! [`ProbeReport`]). Every face renders these, so a field has one name.
//!
//! [`TerminalSnapshot`]: crate::registry::TerminalSnapshot
//! [`ReadPage`]: crate::registry::ReadPage
//! [`Screen`]: crate::screen::Screen
//! [`SignalDelivery`]: crate::registry::SignalDelivery
//! [`ProbeReport`]: crate::registry::ProbeReport

use schemars::JsonSchema;
use serde::Serialize;

use crate::registry::{SendOutput, SendResult, TerminalStatus, WaitReason};

/// How a send ended, with the output it produced: built here once for
/// every face.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SendAnswer {
    /// The output since the send began, escape sequences stripped.
    pub output: String,
    /// Why the send stopped waiting: `idle`, `stdin_read`, `exited`,
    /// `timeout` or `cancelled`.
    pub wait_reason: WaitReason,
    /// The terminal's status when the send ended.
    pub status: TerminalStatus,
    /// The visible screen when the send ended.
    pub viewport: String,
    /// Whether older output was cut to stay within a bound.
    pub truncated: bool,
}

impl SendAnswer {
    /// The answer of a send that ended with `result` after `output`.
    pub fn new(result: SendResult, output: SendOutput) -> SendAnswer {
        SendAnswer {
            output: output.text,
            wait_reason: result.wait_reason,
            status: result.status,
            viewport: result.viewport,
            truncated: result.truncated || output.truncated,
        }
    }
}

/// What `kill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KillAnswer {
    /// `false` when another kill of it was already under way (this one
    /// joined it).
    pub killed: bool,
}

/// What `wait` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WaitAnswer {
    /// The matching line, or the exit status in words.
    pub matched: String,
}

/// What `write` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WriteAnswer {
    /// Bytes written.
    pub written: usize,
}

/// The size after `resize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ResizeAnswer {
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
}
