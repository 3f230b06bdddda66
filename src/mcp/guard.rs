//! The operator's guard rails on what an agent types (`mcp --deny REGEX`,
//! `--allow REGEX`, `--policy FILE`, `--no-syntax-check`), checked on a
//! send's text before anything is typed: a forbidden command is
//! `FORBIDDEN_COMMAND`, a bash or sh command line that does not parse is
//! `SYNTAX_ERROR` with the shell's message, and in both cases nothing is
//! typed. A guard rail, not a sandbox: it sees the text the agent sends,
//! not what a program it starts does.
//!
//! The rules: a `deny` regex matching anywhere in the text refuses it,
//! whoever reads it. The `allow` regexes (when there are any) and the
//! syntax check apply to a command line run at the shell's prompt: each
//! of its non-empty lines must match an `allow` regex; a reply to a
//! program that reads the terminal (the last command still runs) is not a
//! command line.

use std::path::Path;

use regex::Regex;
use tokio::io::AsyncWriteExt;

use crate::shell::ShellKind;
use crate::{Error, Result};

/// The guard rails of one `mcp` server.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    deny: Vec<Regex>,
    allow: Vec<Regex>,
    syntax_check: bool,
}

/// Where the text goes: what decides which rails apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// The prompt of a shell of this kind (no command of it runs).
    Prompt(ShellKind),
    /// Any other program that reads the terminal (a reply, not a command
    /// line), or a shell the engine does not know.
    Program,
}

impl Guard {
    /// The rails from the flags: `deny` and `allow` regexes, a policy
    /// file's lines (`deny:REGEX` or `allow:REGEX`, `#` comments and blank
    /// lines skipped), and whether to check bash and sh syntax.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a regex that does not compile or a policy line
    /// without its prefix; `IO` for a policy file that cannot be read.
    pub fn new(
        deny: &[String],
        allow: &[String],
        policy: Option<&Path>,
        syntax_check: bool,
    ) -> Result<Guard> {
        let mut guard = Guard {
            deny: Vec::new(),
            allow: Vec::new(),
            syntax_check,
        };
        for pattern in deny {
            guard.deny.push(compile(pattern)?);
        }
        for pattern in allow {
            guard.allow.push(compile(pattern)?);
        }
        if let Some(path) = policy {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::io(format!("reading the policy {}", path.display()), e))?;
            guard.add_policy(&text)?;
        }
        Ok(guard)
    }

    /// Adds a policy's lines.
    fn add_policy(&mut self, text: &str) -> Result<()> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(pattern) = line.strip_prefix("deny:") {
                self.deny.push(compile(pattern.trim())?);
            } else if let Some(pattern) = line.strip_prefix("allow:") {
                self.allow.push(compile(pattern.trim())?);
            } else {
                return Err(Error::InvalidInput(format!(
                    "policy line {}: {line:?} starts with neither deny: nor allow:",
                    number + 1
                )));
            }
        }
        Ok(())
    }

    /// Whether these rails refuse nothing (no rule, no syntax check): then
    /// a send need not look where its text goes.
    pub(super) fn is_open(&self) -> bool {
        self.deny.is_empty() && self.allow.is_empty() && !self.syntax_check
    }

    /// Whether `text` may be typed at `target` (with `submit`, Enter
    /// after it). The allow rules and the syntax check look only at a text
    /// the shell will run: one submitted or with a line break in it; a
    /// part of a line typed alone is not yet a command.
    ///
    /// # Errors
    /// `FORBIDDEN_COMMAND` naming the rule, `SYNTAX_ERROR` with the
    /// shell's message, `IO` when the shell for the check cannot run.
    pub(super) async fn check(&self, text: &str, submit: bool, target: Target) -> Result<()> {
        if let Some(rule) = self.deny.iter().find(|rule| rule.is_match(text)) {
            return Err(Error::ForbiddenCommand(format!(
                "the text matches --deny {:?}; nothing was typed",
                rule.as_str()
            )));
        }
        let Target::Prompt(kind) = target else {
            return Ok(());
        };
        if !submit && !text.contains('\n') {
            return Ok(());
        }
        if !self.allow.is_empty() {
            let lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
            for line in lines {
                if !self.allow.iter().any(|rule| rule.is_match(line)) {
                    return Err(Error::ForbiddenCommand(format!(
                        "{line:?} matches no --allow rule; nothing was typed"
                    )));
                }
            }
        }
        match kind {
            ShellKind::Bash | ShellKind::Sh if self.syntax_check => syntax(kind, text).await,
            _ => Ok(()),
        }
    }
}

fn compile(pattern: &str) -> Result<Regex> {
    Regex::new(pattern).map_err(|e| Error::InvalidInput(format!("regex {pattern:?}: {e}")))
}

/// `bash -n` or `sh -n` on `text`: parsed, never run.
async fn syntax(kind: ShellKind, text: &str) -> Result<()> {
    let program = if kind == ShellKind::Bash {
        "bash"
    } else {
        "sh"
    };
    let mut child = tokio::process::Command::new(program)
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::io(format!("running {program} -n"), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A shell that stops reading early has found its error already.
        let _ = stdin.write_all(text.as_bytes()).await;
        let _ = stdin.write_all(b"\n").await;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| Error::io(format!("running {program} -n"), e))?;
    if output.status.success() {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(Error::SyntaxError(format!(
        "{program} -n: {message}; nothing was typed"
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_rails_refuse_what_they_should() {
        let mut guard = Guard::new(&["rm -rf /".to_owned()], &[], None, true).unwrap();
        guard
            .add_policy("# comment\n\nallow:^(ls|echo)\\b\n")
            .unwrap();
        let bash = Target::Prompt(ShellKind::Bash);
        let code = |r: Result<()>| r.err().map(|e| e.code().as_str());
        assert_eq!(code(guard.check("echo hi", true, bash).await), None);
        assert_eq!(code(guard.check("ls\necho x", true, bash).await), None);
        assert_eq!(
            code(guard.check("echo x; rm -rf /", true, bash).await),
            Some("FORBIDDEN_COMMAND")
        );
        assert_eq!(
            code(guard.check("cat x", true, bash).await),
            Some("FORBIDDEN_COMMAND")
        );
        // A reply is no command line: only deny applies.
        assert_eq!(
            code(guard.check("cat x", true, Target::Program).await),
            None
        );
        assert_eq!(
            code(guard.check("rm -rf /", true, Target::Program).await),
            Some("FORBIDDEN_COMMAND")
        );
        let error = guard.check("echo 'open", true, bash).await.unwrap_err();
        assert_eq!(error.code().as_str(), "SYNTAX_ERROR");
        assert!(error.to_string().contains("bash -n"), "{error}");
        let sh = Target::Prompt(ShellKind::Sh);
        assert_eq!(
            code(guard.check("echo (", true, sh).await),
            Some("SYNTAX_ERROR")
        );
        // Typed without Enter, it is not run yet.
        assert_eq!(code(guard.check("echo 'open", false, bash).await), None);
        let off = Guard::new(&[], &[], None, false).unwrap();
        assert_eq!(code(off.check("echo 'open", true, bash).await), None);
        assert!(guard.add_policy("rm").is_err());
        assert!(Guard::new(&["(".to_owned()], &[], None, true).is_err());
    }
}
