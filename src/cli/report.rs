//! How a registry command reports: exit codes, [`CliError`] (printed as
//! `error: CODE: message` or a JSON object), and the writers of its output.

use std::io::Write;

use serde_json::json;

use tmux_engine::{Error, Result};

/// Exit code of an engine error.
pub const EXIT_ERROR: u8 = 1;
/// Exit code of `wait` when its timeout passed first.
pub const EXIT_TIMEOUT: u8 = 4;
/// Exit code of `run` when the engine itself failed: apart from the
/// statuses its command can end with.
pub const EXIT_RUN_FAILED: u8 = 125;
/// A command ended by SIGINT or SIGTERM exits with this plus the signal
/// number (130, 143), as a shell reports a process killed by it.
pub const EXIT_INTERRUPTED_BASE: u8 = 128;

/// A failed command: its code, message and exit status.
#[derive(Debug)]
pub struct CliError {
    /// The stable code, e.g. `NO_TERMINAL`.
    pub code: &'static str,
    /// The message.
    pub message: String,
    /// The process exit status.
    pub exit: u8,
}

impl From<Error> for CliError {
    fn from(error: Error) -> Self {
        let code = error.code().as_str();
        CliError {
            code,
            message: error.to_string(),
            // Only a wait can time out this way (a send's timeout is a wait
            // reason, not an error).
            exit: if code == "TIMEOUT" {
                EXIT_TIMEOUT
            } else {
                EXIT_ERROR
            },
        }
    }
}

impl CliError {
    /// Writes the error as `error: CODE: message`, or as JSON.
    pub fn print(&self, json: bool, mut err: impl Write) {
        let _ = if json {
            writeln!(
                err,
                "{}",
                json!({"error": {"code": self.code, "message": self.message}})
            )
        } else {
            writeln!(err, "error: {}: {}", self.code, self.message)
        };
    }
}

pub(crate) fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string(value)
        .map_err(|e| Error::io("encoding JSON", std::io::Error::other(e)))?;
    writeln!(out, "{text}").map_err(|e| Error::io("writing stdout", e))
}

pub(crate) fn write_line(out: &mut dyn Write, text: &str) -> Result<()> {
    writeln!(out, "{text}").map_err(|e| Error::io("writing stdout", e))
}
