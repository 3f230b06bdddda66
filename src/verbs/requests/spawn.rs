//! `spawn`'s request: what a client may ask of a new terminal (its
//! schema, with the rules JSON Schema can state) and its one validation
//! into a [`SpawnSpec`], with what an agent's terminal gets by default.
//! Apart from the other requests because it is the one that builds a
//! whole spec and carries a policy of its own (the agent's environment).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{NAME_PATTERN, invalid};
use crate::registry::{RestartPolicy, SpawnSpec};
use crate::{Error, Result};

/// `spawn`: start a terminal. Its schema says that `cols` and `rows` come
/// together (a number for one, a number for the other), and that `command`
/// and `shell` do not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {"if": {"required": ["cols"], "properties": {"cols": {"type": "integer"}}},
     "then": {"required": ["rows"], "properties": {"rows": {"type": "integer"}}}},
    {"if": {"required": ["rows"], "properties": {"rows": {"type": "integer"}}},
     "then": {"required": ["cols"], "properties": {"cols": {"type": "integer"}}}},
    {"not": {"required": ["command", "shell"],
             "properties": {"command": {"type": "array"}, "shell": {"type": "string"}}}}
]))]
pub struct SpawnRequest {
    /// Unique per owner; usable as id.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64), regex(pattern = NAME_PATTERN))]
    pub name: Option<String>,
    /// The program and its words (no shell); absent: a shell.
    #[serde(default)]
    #[schemars(extend(
        "items" = {"type": "string", "pattern": r"^[^\x00]*$"},
        "prefixItems" = [{"type": "string", "minLength": 1, "pattern": r"^[^\x00]*$"}],
        "minItems" = 1
    ))]
    pub command: Option<Vec<String>>,
    /// A line for `SHELL -c`, instead of `command`.
    #[serde(default)]
    #[schemars(length(min = 1), regex(pattern = r"^[^\x00]*$"))]
    pub shell: Option<String>,
    /// Absolute working directory.
    #[serde(default)]
    #[schemars(extend("pattern" = r"^/[^\x00]*$"))]
    pub cwd: Option<PathBuf>,
    /// Extra environment, no `=` in names; `SHELL`: the shell to run.
    #[serde(default)]
    #[schemars(extend(
        "propertyNames" = {"pattern": r"^[^=\x00]+$"},
        "additionalProperties" = {"type": "string", "pattern": r"^[^\x00]*$"}
    ))]
    pub env: Option<BTreeMap<String, String>>,
    /// Columns (with `rows`; default 80).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub cols: Option<u16>,
    /// Rows (with `cols`; default 24).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub rows: Option<u16>,
    /// Default never; on-attach: at attach, send, read, wait.
    #[serde(default)]
    pub restart: Option<RestartPolicy>,
    /// Free-form, e.g. `repl`.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64))]
    pub role: Option<String>,
    /// Prompt marks (default true): exact output, `exit_code`.
    #[serde(default)]
    pub shell_integration: Option<bool>,
    /// Scrollback lines (default 10000).
    #[serde(default)]
    #[schemars(range(max = 1_000_000))]
    pub history_limit: Option<u32>,
    /// Pagers `cat`, editors fail fast (mcp default; `env` wins).
    #[serde(default)]
    pub agent: Option<bool>,
    /// Survives reboots.
    #[serde(default)]
    pub keep_history: Option<bool>,
    /// Typed after restore.
    #[serde(default)]
    pub resume_command: Option<String>,
    /// Asciicast too.
    #[serde(default)]
    pub record: Option<bool>,
}

/// What an agent's terminal gets (`agent: true`) unless its `env` says
/// otherwise. The editor is a one-line `sh -c` script: git runs
/// `$EDITOR "$@"` through the shell, so its file name lands in `$0`.
pub const AGENT_ENV: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("EDITOR", AGENT_EDITOR),
    ("GIT_EDITOR", AGENT_EDITOR),
];

/// An editor that fails fast and says why.
const AGENT_EDITOR: &str = "sh -c 'echo \"tmux-engine: no interactive editor for agents; \
    pass the text on the command line (git commit -m ...) or write the file with a command \
    (spawn with env EDITOR=... to choose one)\" >&2; exit 1'";

impl SpawnRequest {
    /// The spec this request describes, checked.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the field: an empty `command` or program, an
    /// empty `shell`, a relative `cwd`, only one of `cols`/`rows`, and
    /// everything [`SpawnSpec::validate`] refuses (a name shaped like an
    /// id, a bad size, ...).
    pub fn validate(self) -> Result<SpawnSpec> {
        let mut spec = SpawnSpec::default()
            .restart(self.restart.unwrap_or_default())
            .shell_integration(self.shell_integration.unwrap_or(true));
        if let Some(name) = self.name {
            spec = spec.name(name);
        }
        if let Some(role) = self.role {
            spec = spec.role(role);
        }
        if let Some(lines) = self.history_limit {
            spec = spec.history_limit(lines);
        }
        if let Some(keep) = self.keep_history {
            spec = spec.keep_history(keep);
        }
        if let Some(line) = self.resume_command {
            spec = spec.resume_command(line);
        }
        spec = spec.record(self.record == Some(true));
        if let Some(command) = self.command {
            // Absent means the shell; present but empty would silently
            // mean the same, so it is a mistake to report.
            match command.first() {
                None => return Err(invalid("command is an empty array: omit it for a shell")),
                Some(program) if program.is_empty() => {
                    return Err(invalid("command's program (its first word) is empty"));
                }
                Some(_) => spec = spec.command(command),
            }
        }
        if let Some(line) = self.shell {
            if line.trim().is_empty() {
                return Err(invalid(
                    "shell is an empty command line: omit it for a shell",
                ));
            }
            spec = spec.shell(line);
        }
        if let Some(cwd) = self.cwd {
            if !cwd.is_absolute() {
                return Err(Error::InvalidInput(format!(
                    "cwd {} is not an absolute path",
                    cwd.display()
                )));
            }
            spec = spec.cwd(cwd);
        }
        // The spawn's own env wins: the agent's defaults go in first.
        if self.agent == Some(true) {
            for (key, value) in AGENT_ENV {
                spec = spec.env(*key, *value);
            }
        }
        for (key, value) in self.env.unwrap_or_default() {
            spec = spec.env(key, value);
        }
        match (self.cols, self.rows) {
            (Some(cols), Some(rows)) => spec = spec.size(cols, rows),
            (None, None) => {}
            _ => return Err(invalid("give both cols and rows, or neither")),
        }
        spec.validate()?;
        Ok(spec)
    }
}
