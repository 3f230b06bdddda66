//! What to spawn ([`SpawnSpec`]): a terminal's command, environment and
//! registry metadata, and the checks on them ([`SpawnSpec::validate`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ids::validate_name;
use super::{Size, check_env_name};
use crate::{Error, Result};

/// What to do when a terminal's program dies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Keep the exit status; never rerun (a dead command is meaningful state).
    #[default]
    Never,
    /// Recreate a dead terminal when it is probed or attached, exactly once
    /// under concurrency, never while it is alive (REPL-like terminals).
    OnAttach,
    /// Recreate on death, with exponential backoff and a cap
    /// ([`RestartBackoff`](crate::registry::RestartBackoff)).
    Always,
}

impl std::str::FromStr for RestartPolicy {
    type Err = Error;

    /// Parses `never`, `on-attach` or `always`.
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "never" => Ok(RestartPolicy::Never),
            "on-attach" => Ok(RestartPolicy::OnAttach),
            "always" => Ok(RestartPolicy::Always),
            _ => Err(Error::InvalidInput(format!(
                "restart policy {text:?} is not one of never, on-attach, always"
            ))),
        }
    }
}

/// What to spawn: a terminal's command, environment and registry metadata.
///
/// Built with [`SpawnSpec::new`] and the builder methods; persisted verbatim
/// in the terminal's record so a vanished terminal can be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SpawnSpec {
    /// A name unique among the owner's terminals, usable instead of the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Program and arguments, executed exactly as given: no shell parsing,
    /// one word included (`id>/tmp/p` runs a program of that name). Empty
    /// runs the backend's pinned shell, or [`shell`](Self::shell).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// A command line for the shell to parse (`SHELL -c LINE`), instead of
    /// `command`: shell parsing happens only when asked for here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Working directory (the backend's default when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Initial size (the backend's default when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// A free-form role, e.g. `repl`; the registry only stores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// What to do when the program dies.
    #[serde(default)]
    pub restart: RestartPolicy,
    /// Start the shell (bash, zsh or POSIX sh, when no command is given)
    /// with the engine's rc, which marks prompts and commands (OSC 133)
    /// so a send returns a command's exact output and exit code (see
    /// `crate::shell`); on unless turned off.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub shell_integration: bool,
    /// Lines of scrollback the terminal keeps (the backend's default,
    /// 10000, when `None`; at most 1,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_limit: Option<u32>,
    /// Write its output to files under the state directory, so its
    /// history outlives a reboot (`crate::history`); `None`: the
    /// registry's default ([`RegistryConfig::keep_history`]).
    ///
    /// [`RegistryConfig::keep_history`]: crate::registry::RegistryConfig::keep_history
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_history: Option<bool>,
    /// A command line typed at the new prompt of a terminal restored after
    /// a reboot (`claude --resume`, `vim -S Session.vim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_command: Option<String>,
    /// Also write an asciicast v2 recording beside the kept history.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record: bool,
}

/// The most scrollback lines a terminal may keep: a million lines of a
/// wide terminal is already hundreds of megabytes in tmux.
pub(crate) const MAX_HISTORY_LIMIT: u32 = 1_000_000;

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_yes(value: &bool) -> bool {
    *value
}

impl Default for SpawnSpec {
    fn default() -> Self {
        SpawnSpec::new()
    }
}

impl SpawnSpec {
    /// A spec for the pinned shell, with no name.
    pub fn new() -> Self {
        SpawnSpec {
            name: None,
            command: Vec::new(),
            shell: None,
            cwd: None,
            env: BTreeMap::new(),
            size: None,
            role: None,
            restart: RestartPolicy::Never,
            shell_integration: true,
            history_limit: None,
            keep_history: None,
            resume_command: None,
            record: false,
        }
    }

    /// Keeps (or not) its history on disk.
    #[must_use]
    pub fn keep_history(mut self, keep: bool) -> Self {
        self.keep_history = Some(keep);
        self
    }

    /// Sets the command typed after a restore.
    #[must_use]
    pub fn resume_command(mut self, line: impl Into<String>) -> Self {
        self.resume_command = Some(line.into());
        self
    }

    /// Records it as asciicast v2 beside its kept history.
    #[must_use]
    pub fn record(mut self, on: bool) -> Self {
        self.record = on;
        self
    }

    /// Whether its history is kept on disk (once the registry resolved
    /// the default).
    pub fn keeps_history(&self) -> bool {
        self.keep_history == Some(true) || self.record
    }

    /// Sets the lines of scrollback kept.
    #[must_use]
    pub fn history_limit(mut self, lines: u32) -> Self {
        self.history_limit = Some(lines);
        self
    }

    /// Turns shell integration on or off (on by default).
    #[must_use]
    pub fn shell_integration(mut self, on: bool) -> Self {
        self.shell_integration = on;
        self
    }

    /// Whether this spec runs the pinned shell interactively (no command,
    /// no shell line) with integration on: what the backend then starts
    /// with the engine's rc.
    pub fn integrates_shell(&self) -> bool {
        self.shell_integration && self.command.is_empty() && self.shell.is_none()
    }

    /// Sets the name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the program and its arguments.
    #[must_use]
    pub fn command<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.command = words.into_iter().map(Into::into).collect();
        self
    }

    /// Sets a command line the shell parses (`SHELL -c LINE`), instead of
    /// a command's words.
    #[must_use]
    pub fn shell(mut self, line: impl Into<String>) -> Self {
        self.shell = Some(line.into());
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Adds one environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the initial size.
    #[must_use]
    pub fn size(mut self, cols: u16, rows: u16) -> Self {
        self.size = Some(Size { cols, rows });
        self
    }

    /// Sets the role.
    #[must_use]
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }

    /// Sets the restart policy.
    #[must_use]
    pub fn restart(mut self, restart: RestartPolicy) -> Self {
        self.restart = restart;
        self
    }

    /// Checks everything the caller chose, before any backend sees it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the bad value: an unsafe name, a NUL
    /// in a command word, shell line, cwd or environment entry, both a
    /// command and a shell line, an environment key that is empty or has
    /// `=`, a zero or huge size, a role with control characters.
    pub fn validate(&self) -> Result<()> {
        if let Some(name) = &self.name {
            validate_name(name)?;
        }
        if let Some(lines) = self.history_limit
            && lines > MAX_HISTORY_LIMIT
        {
            return Err(Error::InvalidInput(format!(
                "history_limit {lines} is over the maximum of {MAX_HISTORY_LIMIT} lines"
            )));
        }
        for word in &self.command {
            if word.contains('\0') {
                return Err(Error::InvalidInput(format!(
                    "command word {word:?} contains a NUL byte"
                )));
            }
        }
        if let Some(line) = &self.shell {
            if !self.command.is_empty() {
                return Err(Error::InvalidInput(
                    "a spec has a command or a shell line, not both".to_owned(),
                ));
            }
            if line.contains('\0') {
                return Err(Error::InvalidInput(format!(
                    "shell line {line:?} contains a NUL byte"
                )));
            }
        }
        if let Some(cwd) = &self.cwd
            && cwd.as_os_str().as_encoded_bytes().contains(&0)
        {
            return Err(Error::InvalidInput(format!(
                "cwd {} contains a NUL byte",
                cwd.display()
            )));
        }
        for (key, value) in &self.env {
            check_env_name(key)?;
            if value.contains('\0') {
                return Err(Error::InvalidInput(format!(
                    "environment value of {key} contains a NUL byte"
                )));
            }
        }
        if let Some(size) = self.size {
            size.check()?;
        }
        if let Some(role) = &self.role
            && (role.is_empty() || role.len() > 64 || role.chars().any(char::is_control))
        {
            return Err(Error::InvalidInput(format!(
                "role {role:?} must be 1 to 64 bytes without control characters"
            )));
        }
        if let Some(line) = &self.resume_command
            && (line.trim().is_empty() || line.chars().any(char::is_control))
        {
            return Err(Error::InvalidInput(format!(
                "resume_command {line:?} must be one non-empty line without control characters"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spec_validation_names_the_value() {
        let cases = [
            (SpawnSpec::new().name(""), "must be non-empty"),
            (SpawnSpec::new().command(["a\0b"]), "NUL"),
            (SpawnSpec::new().cwd("/tmp/\0x"), "NUL"),
            (SpawnSpec::new().env("A=B", "x"), "\"A=B\""),
            (SpawnSpec::new().env("A", "x\0"), "A contains a NUL"),
            (SpawnSpec::new().size(0, 24), "size 0x24"),
            (SpawnSpec::new().size(80, 20_000), "size 80x20000"),
            (SpawnSpec::new().role("a\nb"), "role"),
            (SpawnSpec::new().command(["a"]).shell("b"), "not both"),
            (SpawnSpec::new().shell("a\0"), "shell line"),
        ];
        for (spec, expected) in cases {
            let error = spec.validate().unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT");
            assert!(error.to_string().contains(expected), "{error}");
        }
        SpawnSpec::new()
            .name("main")
            .command(["sh", "-c", "echo 'a;b' $(x)"])
            .env("K", "v w")
            .size(80, 24)
            .role("repl")
            .validate()
            .unwrap();
    }

    #[test]
    fn spec_round_trips_through_json() {
        let spec = SpawnSpec::new()
            .name("main")
            .command(["bash"])
            .cwd("/tmp")
            .env("A", "1")
            .size(100, 30)
            .role("repl")
            .restart(RestartPolicy::OnAttach);
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["restart"], "on-attach");
        assert_eq!(serde_json::from_value::<SpawnSpec>(json).unwrap(), spec);
        let minimal: SpawnSpec = serde_json::from_str(r#"{"kind":"stub"}"#).unwrap();
        assert_eq!(minimal, SpawnSpec::new());
    }

    #[test]
    fn restart_policy_parses() {
        assert_eq!(
            "on-attach".parse::<RestartPolicy>().unwrap(),
            RestartPolicy::OnAttach
        );
        let error = "sometimes".parse::<RestartPolicy>().unwrap_err();
        assert!(error.to_string().contains("\"sometimes\""));
    }
}
