//! What a draining serve hands the next serve on the same state
//! directory: the sign-in links and sessions (`signin/`), so that a
//! page open across a restart reconnects signed in (the close code 1012
//! told it to) instead of being signed out. One file,
//! `STATE/serve-handoff.json`, written 0600 and renamed into place as
//! the old serve leaves, read and removed by the next one as it starts;
//! older than [`MAX_AGE`] it is removed unread (nobody restarted: the
//! browsers' sessions end as they did before). It holds session secrets:
//! the state directory is the user's own (0700), like `serve.json`,
//! which holds the token.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::signin::{Carried, SignIns};
use crate::{Error, Result};

/// The file's name in the state directory.
pub const HANDOFF: &str = "serve-handoff.json";

/// How long a handoff waits for the next serve.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// Writes what `signins` holds for the next serve.
pub(crate) fn hand_off(signins: &SignIns, dir: &Path) -> Result<()> {
    let path = dir.join(HANDOFF);
    let context = || format!("writing {}", path.display());
    let text = serde_json::to_vec(&signins.carry())
        .map_err(|e| Error::io(context(), std::io::Error::other(e)))?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(context(), e))?;
    file.write_all(&text).map_err(|e| Error::io(context(), e))?;
    file.persist(&path)
        .map_err(|e| Error::io(context(), e.error))?;
    Ok(())
}

/// Takes over a recent handoff in `dir`, if there is one, and removes
/// it: how many sessions came over. A file that is not the user's own,
/// that others may read, or that is stale or unreadable is removed and
/// ignored.
pub(crate) fn take_over(signins: &SignIns, dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(HANDOFF);
    let Ok(file) = std::fs::File::open(&path) else {
        return 0;
    };
    let _ = std::fs::remove_file(&path);
    let Ok(meta) = file.metadata() else {
        return 0;
    };
    let fresh = meta
        .modified()
        .ok()
        .and_then(|at| SystemTime::now().duration_since(at).ok())
        .is_some_and(|age| age <= MAX_AGE);
    let private = meta.uid() == rustix::process::geteuid().as_raw() && meta.mode() & 0o077 == 0;
    if !fresh || !private {
        tracing::warn!(fresh, private, "ignored a serve handoff");
        return 0;
    }
    match serde_json::from_reader::<_, Carried>(std::io::BufReader::new(file)) {
        Ok(carried) => signins.take_over(carried),
        Err(error) => {
            tracing::warn!(%error, "ignored an unreadable serve handoff");
            0
        }
    }
}
