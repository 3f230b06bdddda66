//! Reaping the backend's runtime directory: only what is proven unclaimed.
//!
//! A server directory goes through the kill path (its panes' process
//! trees, server and directory) only when one of these is proven:
//!
//! - no server: no socket file, or a socket nobody listens on
//!   (`ECONNREFUSED` on connect);
//! - a server that answers, carries the engine's mark and this state
//!   directory's mark (`@tmux-engine-state`), and whose terminal id
//!   (`@tmux-engine-id`) has no file in the state directory, readable or
//!   not.
//!
//! Everything else is left alone and reported as skipped: a directory a
//! record names (paths compared canonical) or this engine's pool holds,
//! one younger than the grace
//! period (a spawn in another process may not have written its record
//! yet) unless its terminal's spawn lock is free and it still has no
//! record (its spawner died: a crash 40 ms into a spawn is reaped at the
//! next start, not a minute later), a connect or query that failed or timed out ("unknown" is never
//! "no server": a busy server or fd exhaustion must not cost a live
//! terminal), a server of another state directory, and one without the
//! identifying marks (started before they existed, or not by a registry).
//!
//! Directories are judged and killed several at once ([`AT_ONCE`]): a
//! crash's leftovers cost about the slowest one, not their sum.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};

use super::locator::TmuxLocator;
use super::{ID_OPTION, SESSION, STATE_OPTION, TmuxConfig};
use crate::registry::TerminalId;
use crate::registry::seam::ReapReport;
use crate::statedir::Purpose;
use crate::statedir::{StateDir, TerminalRecord};
use crate::tmux::command::TmuxCommand;
use crate::tmux::options::{MARK_OPTION, MARK_VALUE};
use crate::tmux::server::DIR_PREFIX;
use crate::tmux::{ServerHandle, Tmux};
use crate::{Error, Result};

/// How long the one-shot identity query may take; a server slower than
/// this is "unknown" and left alone.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// What a server directory holds, as far as can be proven.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Occupant {
    /// No socket, or one nobody listens on.
    Nothing,
    /// A server listens; whether it is the engine's is another question.
    Listening,
    /// The connect failed otherwise (fd exhaustion, permissions...).
    Unknown(String),
}

/// Who listens on `socket`, by a connect alone (no tmux process, no
/// client attached): what `list` uses too.
pub(super) fn occupant(socket: &Path) -> Occupant {
    match UnixStream::connect(socket) {
        Ok(_) => Occupant::Listening,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::NotFound | ErrorKind::ConnectionRefused
            ) =>
        {
            Occupant::Nothing
        }
        Err(error) => Occupant::Unknown(error.to_string()),
    }
}

/// A server's identifying marks.
#[derive(Debug, PartialEq, Eq)]
struct Marks {
    engine: bool,
    id: String,
    state: String,
}

/// Asks the server for its marks in one one-shot command. `None`: it did
/// not answer (in time).
async fn marks(handle: &ServerHandle) -> Result<Marks> {
    let format = format!("#{{{MARK_OPTION}}}|#{{{ID_OPTION}}}|#{{{STATE_OPTION}}}");
    let query = TmuxCommand::new("display-message")
        .opt("-t", format!("{}:", handle.session()))
        .flag("-p")
        .arg(format);
    let text = tokio::time::timeout(QUERY_TIMEOUT, handle.run(&query))
        .await
        .map_err(|_| Error::Unresponsive {
            command: "display-message (reap's identity query)".to_owned(),
            timeout: QUERY_TIMEOUT,
        })??;
    let line = text.trim_end_matches('\n');
    let mut parts = line.splitn(3, '|');
    Ok(Marks {
        engine: parts.next() == Some(MARK_VALUE),
        id: parts.next().unwrap_or_default().to_owned(),
        state: parts.next().unwrap_or_default().to_owned(),
    })
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// What an unnamed, old server directory holds: `Ok` with what it is when
/// it is proven unclaimed; else why it stays (`None`: another state
/// directory's, not ours to judge or report).
async fn judge(
    handle: &ServerHandle,
    ours: &str,
    claimed: &HashSet<&str>,
) -> std::result::Result<(&'static str, Option<String>), Option<String>> {
    match occupant(handle.socket()) {
        Occupant::Nothing => Ok(("socket directory without a server", None)),
        Occupant::Unknown(error) => Err(Some(format!("connect failed: {error}"))),
        Occupant::Listening => match marks(handle).await {
            Err(error) => Err(Some(format!("no answer: {error}"))),
            Ok(marks) if !marks.engine || marks.id.is_empty() => Err(Some(
                "a server without the engine's identifying marks".to_owned(),
            )),
            Ok(marks) if marks.state != ours => Err(None),
            Ok(marks) if claimed.contains(marks.id.as_str()) => Err(Some(format!(
                "terminal {} has a record (moved or unreadable)",
                marks.id
            ))),
            Ok(marks) => Ok(("server without a record", Some(marks.id))),
        },
    }
}

/// Whether the young server of terminal `id` was abandoned: nobody holds
/// its spawn lock (its spawner died, or finished) and, with the lock held
/// so that no spawn can finish meanwhile, it still has no record. A
/// pooled server is never abandoned: it has no spawn lock (it is reaped
/// once old, unless it waits in this engine's own pool).
fn abandoned(state_dir: Option<&Path>, id: Option<&str>) -> bool {
    let (Some(dir), Some(id)) = (state_dir, id) else {
        return false;
    };
    if super::pool::is_pooled(id) {
        return false;
    }
    let Ok(id) = TerminalId::parse(id) else {
        return false;
    };
    let Ok(state) = StateDir::open(dir) else {
        return false;
    };
    match state.try_lock(&StateDir::terminal_lock(&id, Purpose::Spawn)) {
        Ok(Some(_held)) => !state.record_path(&id).exists(),
        _ => false,
    }
}

/// How many server directories one reap judges and kills at once. Each
/// may take seconds (a query's [`QUERY_TIMEOUT`], a kill's grace: tmux
/// 3.3a keeps a server whose dead engine's control client had output
/// queued until SIGKILL, docs/tmux-quirks.md), so one after another a
/// crash's leftovers took their sum; at once, about the slowest one. Each
/// costs a few short-lived tmux clients and fds.
const AT_ONCE: usize = 16;

/// What one server directory came to.
enum Outcome {
    /// Killed: what it was, and where.
    Removed(String),
    /// Left alone, and why.
    Skipped(String),
    /// Too young to judge.
    Young,
    /// Not ours to judge or report (another state directory's).
    Foreign,
    /// Proven unclaimed, but the kill failed.
    Failed(Error),
}

pub(super) async fn reap(
    tmux: &Arc<Tmux>,
    config: &TmuxConfig,
    records: &[TerminalRecord],
    claimed: &[TerminalId],
    own: &[PathBuf],
) -> Result<ReapReport> {
    let mut report = ReapReport::default();
    let known: HashSet<PathBuf> = records
        .iter()
        .filter_map(|record| TmuxLocator::of(record).dir)
        .chain(own.iter().cloned())
        .map(|dir| canonical(&dir))
        .collect();
    let claimed: HashSet<&str> = claimed.iter().map(TerminalId::as_str).collect();
    let ours = config.state_mark();
    let runtime = canonical(&config.runtime_dir);
    let entries = match std::fs::read_dir(&runtime) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(report),
        Err(e) => {
            return Err(Error::io(
                format!("listing runtime directory {}", runtime.display()),
                e,
            ));
        }
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                report
                    .skipped
                    .push(format!("an entry of {}: {error}", runtime.display()));
                continue;
            }
        };
        let path = entry.path();
        let is_server_dir = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(DIR_PREFIX))
            && entry.file_type().is_ok_and(|kind| kind.is_dir());
        if !is_server_dir || known.contains(&canonical(&path)) {
            continue;
        }
        let young = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_none_or(|age| age < config.reap_grace);
        dirs.push((path, young));
    }
    let (ours, claimed) = (&ours, &claimed);
    let mut outcomes = stream::iter(dirs)
        .map(|(path, young)| one(tmux, config, path, young, ours, claimed))
        .buffer_unordered(AT_ONCE);
    while let Some(outcome) = outcomes.next().await {
        match outcome {
            Outcome::Removed(what) => report.removed.push(what),
            Outcome::Skipped(why) => report.skipped.push(why),
            Outcome::Young => report.young += 1,
            Outcome::Foreign => {}
            Outcome::Failed(error) => report.failures.push(error),
        }
    }
    // The state directory's half-written records, by the same grace.
    if let Some(state) = config
        .state_dir
        .as_deref()
        .and_then(|dir| StateDir::open(dir).ok())
    {
        report
            .removed
            .extend(state.remove_stale_temps(config.reap_grace));
    }
    Ok(report)
}

/// Judges one unnamed server directory and kills what is proven
/// unclaimed (see the module docs).
async fn one(
    tmux: &Arc<Tmux>,
    config: &TmuxConfig,
    path: PathBuf,
    young: bool,
    ours: &str,
    claimed: &HashSet<&str>,
) -> Outcome {
    let mut handle = ServerHandle::open(Arc::clone(tmux), &path, SESSION);
    let what = match judge(&handle, ours, claimed).await {
        Ok((what, id)) => {
            if young && !abandoned(config.state_dir.as_deref(), id.as_deref()) {
                return Outcome::Young;
            }
            what
        }
        Err(_) if young => return Outcome::Young,
        Err(Some(why)) => return Outcome::Skipped(format!("{}: {why}", path.display())),
        Err(None) => return Outcome::Foreign,
    };
    match handle.kill().await {
        Ok(()) => Outcome::Removed(format!("{what} at {}", path.display())),
        Err(error) => Outcome::Failed(error),
    }
}
