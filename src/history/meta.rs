//! What `meta.json` holds beside a kept history's bytes: the fields a
//! restore and a reader need (epochs, the streams' bases, cwd, title,
//! size, boot id, gaps). Apart from `mod.rs` because it is a file format
//! other processes read and older engines wrote: every field added must
//! default.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::vocab::Size;

/// What `meta.json` holds beside the bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The history's own epoch, which its offsets count in.
    pub epoch: u64,
    /// The streams that fed it, oldest first: (stream epoch, the history
    /// offset of that stream's byte 0).
    #[serde(default)]
    pub streams: Vec<(u64, u64)>,
    /// The boot id of the machine the history was last written on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The last known working directory of its program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The last title its program set (OSC 0 or 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its size, as last known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// When it was last written, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub updated_ms: u64,
    /// When its terminal was last restored after a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_ms: Option<u64>,
    /// How many holes the history's offsets have: bytes lost between
    /// the stream and the files (a write failed, a writer fell behind or
    /// resumed past bytes nobody wrote), whose offsets no bytes fill.
    #[serde(default)]
    pub gaps: u64,
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}
