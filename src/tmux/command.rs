//! STUB (lead's placeholder until the tmux module lands): minimal builder.

use std::fmt::Write as _;

use crate::Result;
use crate::control::PaneId;

/// A tmux command line built from quoted arguments.
#[derive(Clone, Debug)]
pub struct TmuxCommand {
    line: String,
}

/// Quotes one argument.
///
/// # Errors
/// NUL bytes are rejected.
pub fn quote(arg: &[u8]) -> Result<String> {
    let mut out = String::from("\"");
    for &b in arg {
        match b {
            0 => return Err(crate::Error::InvalidInput("NUL in argument".into())),
            b'\\' | b'"' | b'$' | b'~' | b'#' | b';' | b'{' | b'}' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    Ok(out)
}

impl TmuxCommand {
    /// Starts a command.
    pub fn new(name: &str) -> Self {
        TmuxCommand { line: name.to_owned() }
    }
    /// Adds a flag.
    pub fn flag(mut self, flag: &str) -> Self {
        self.line.push(' ');
        self.line.push_str(flag);
        self
    }
    /// Adds a quoted argument.
    pub fn arg(mut self, arg: impl AsRef<[u8]>) -> Self {
        self.line.push(' ');
        self.line.push_str(&quote(arg.as_ref()).unwrap_or_default());
        self
    }
    /// Adds `-t TARGET`.
    pub fn target(self, target: impl std::fmt::Display) -> Self {
        self.flag("-t").arg(target.to_string())
    }
    /// The line.
    pub fn line(&self) -> &str {
        &self.line
    }
}

/// send-keys -H chunks.
pub fn send_keys_hex(pane: PaneId, bytes: &[u8], chunk: usize) -> Vec<TmuxCommand> {
    bytes
        .chunks(chunk.max(1))
        .map(|c| {
            let mut cmd = TmuxCommand::new("send-keys").target(pane).flag("-H");
            for b in c {
                cmd = cmd.flag(&format!("{b:02x}"));
            }
            cmd
        })
        .collect()
}
