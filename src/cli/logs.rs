//! `tmux-engine logs T [--follow] [--since CURSOR] [--strip]`: a
//! terminal's kept history, read from its files under the
//! state directory, whether it runs, is gone after a reboot, or is held by
//! another engine. Raw bytes by default (colors and all); `--strip`
//! prints text. `--follow` keeps printing what the engine holding the
//! terminal writes (it writes at most a second or 64 KiB behind), and the
//! cursor after the last byte goes to stderr at the end, for `--since`.

use std::io::Write;

use clap::Args;
use tmux_engine::Error;
use tmux_engine::registry::{OutputCursor, strip_escapes};

use super::args::Global;
use super::report::CliError;
use super::terminals::{DETACH_WAIT, open_registry, owner};

/// `logs`' arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct LogsArgs {
    /// Terminal id or name.
    target: String,
    /// Keep printing as the history grows (until interrupted).
    #[arg(long)]
    follow: bool,
    /// Print what came after this cursor (a `next_cursor`, a send's
    /// `cursor`, or what `logs` printed last on stderr).
    #[arg(long)]
    since: Option<String>,
    /// Text: escape sequences stripped.
    #[arg(long)]
    strip: bool,
}

/// Prints the kept history.
///
/// # Errors
/// `NO_TERMINAL`, `UNSUPPORTED` for a terminal that keeps no history,
/// `INVALID_INPUT` for a bad cursor, `IO` reading or writing.
pub(crate) async fn run(
    global: &Global,
    args: LogsArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut since = args
        .since
        .as_deref()
        .map(str::parse::<OutputCursor>)
        .transpose()?;
    let owner = owner(global)?;
    let registry = open_registry(global, false, None).await?;
    let mut interrupts = super::run::Interrupts::register()?;
    let result = async {
        loop {
            let read = registry
                .owner(&owner)
                .kept_history(&args.target, since)
                .await?;
            let written = if args.strip {
                out.write_all(strip_escapes(&read.bytes).as_bytes())
            } else {
                out.write_all(&read.bytes)
            };
            written
                .and_then(|()| out.flush())
                .map_err(|error| Error::io("writing the history", error))?;
            since = Some(read.end());
            // A read stops at a hole in the history: the next one goes
            // on past it, until nothing is left.
            if !read.bytes.is_empty() {
                continue;
            }
            if !args.follow {
                return Ok::<_, Error>(());
            }
            // The files are another process's to write: looked at again
            // once per flush interval of the writer.
            tokio::select! {
                _ = interrupts.recv() => return Ok(()),
                () = tokio::time::sleep(tmux_engine::registry::HISTORY_FLUSH_INTERVAL) => {}
            }
        }
    }
    .await;
    if let Some(cursor) = since {
        eprintln!("cursor {cursor}");
    }
    let _ = tokio::time::timeout(DETACH_WAIT, registry.shutdown()).await;
    result.map_err(CliError::from)
}
