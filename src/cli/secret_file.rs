//! Files that hold secrets (serve's token file, a unit's environment
//! file): refused (`UNSAFE_FILE`) unless the user's own and out of reach
//! of group and others. One check, so both refuse alike.

use std::path::Path;

use tmux_engine::{Error, Result};

/// Refuses `meta`, the metadata of the file at `path`, unless it is owned
/// by this user with no group or other bits. Not only regular files: a
/// token may come through a pipe (`--token-file <(...)`).
///
/// # Errors
/// [`Error::UnsafeFile`] naming why, and the fix.
pub(crate) fn check(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let unsafe_file = |reason: String| Error::UnsafeFile {
        path: path.to_owned(),
        reason,
    };
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(unsafe_file(format!(
            "owned by uid {}, not by this user (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_file(format!(
            "mode {:o} lets group or others at it: chmod 600 it",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}
