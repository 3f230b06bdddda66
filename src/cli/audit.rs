//! `tmux-engine audit verify FILE`: checks the chain of an audit log that
//! `serve --audit-log FILE` wrote (the library's `audit`), naming the
//! first line edited, deleted, inserted or moved.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use tmux_engine::Error;

use super::args::Global;
use super::report::CliError;

/// `audit`'s subcommands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum AuditCommand {
    /// Check every line's hash and its link to the line before; exits
    /// non-zero with AUDIT_BROKEN naming the first bad line. Prints the
    /// line count and the head hash (keep it elsewhere: cutting lines off
    /// the end leaves a valid, shorter chain).
    Verify {
        /// The log (`serve --audit-log FILE`).
        file: PathBuf,
    },
}

/// Runs an `audit` subcommand.
///
/// # Errors
/// `AUDIT_BROKEN` naming the first bad line; `IO` reading the file.
pub(crate) fn run(
    global: &Global,
    command: AuditCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let AuditCommand::Verify { file } = command;
    let verified = tmux_engine::audit::verify(&file)?;
    let text = if global.json {
        serde_json::json!({"ok": true, "lines": verified.lines, "head": verified.head}).to_string()
    } else {
        format!("ok: {} lines, head {}", verified.lines, verified.head)
    };
    writeln!(out, "{text}").map_err(|e| Error::io("writing stdout", e))?;
    Ok(())
}
