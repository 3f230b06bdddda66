//! A start command's reply: tmux's `new-session -P -F ...` run as a
//! control client answers in one `%begin`/`%end` block, read here before
//! the client detaches, and the pane it reports ([`FirstPane`]). Kept
//! apart from [`super::server`] because it is the one place that reads
//! control-mode guard lines without `control::parse` (this layer may not
//! use it: tests/layers.rs).

use crate::vocab::PaneId;
use crate::{Error, Result};

/// The pane `new-session` created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstPane {
    /// Its id (`%0` on a fresh server).
    pub id: PaneId,
    /// The pid of its program. Right after the start this can still be
    /// tmux's fork, before it execs the program.
    pub pid: u32,
}

/// Runs a start command and returns the body of its first reply block
/// (`new-session`'s), then closes the client's stdin, which detaches it,
/// and reaps it. `%begin`/`%end` guard lines are matched by their number,
/// so a program's output cannot end the block early; notifications before
/// it are skipped.
pub(super) async fn first_reply(
    mut command: tokio::process::Command,
    line: &str,
) -> Result<String> {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

    let mut child = command
        .spawn()
        .map_err(|e| Error::io(format!("spawning tmux for `{line}`"), e))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let mut guard: Option<String> = None;
    let mut body: Vec<String> = Vec::new();
    let mut failed = false;
    let mut complete = false;
    while let Some(text) = lines
        .next_line()
        .await
        .map_err(|e| Error::io(format!("reading tmux's reply to `{line}`"), e))?
    {
        match &guard {
            None => {
                if let Some(rest) = text.strip_prefix("%begin ") {
                    guard = Some(guard_key(rest).to_owned());
                }
            }
            Some(key) => {
                let end = text.strip_prefix("%end ").map(|rest| (rest, false));
                let error = text.strip_prefix("%error ").map(|rest| (rest, true));
                match end.or(error) {
                    Some((rest, is_error)) if guard_key(rest) == key => {
                        failed = is_error;
                        complete = true;
                        break;
                    }
                    _ => body.push(text),
                }
            }
        }
    }
    // Detaches the client (tmux sees its stdin close); the session stays.
    drop(child.stdin.take());
    let status = child.wait().await;
    if failed || !complete {
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut stderr).await;
        }
        let message = if failed {
            body.join("\n")
        } else if !stderr.trim().is_empty() {
            stderr.trim().to_owned()
        } else {
            match status {
                Ok(status) => format!("tmux exited with {status} before its reply"),
                Err(e) => format!("tmux ended before its reply ({e})"),
            }
        };
        return Err(Error::Command {
            command: line.to_owned(),
            message,
        });
    }
    Ok(body.join("\n"))
}

/// The `TIME NUMBER` of a guard line's `TIME NUMBER FLAGS`: what pairs a
/// `%begin` with its `%end`.
fn guard_key(rest: &str) -> &str {
    rest.rsplit_once(' ').map_or(rest, |(key, _flags)| key)
}

/// Parses `PID %N PANE_PID` from the start command's output.
pub(super) fn parse_start(out: &str, command: &str) -> Result<(u32, FirstPane)> {
    let bad = || Error::Command {
        command: command.to_owned(),
        message: format!("unexpected output {out:?} (expected \"PID %PANE PANE_PID\")"),
    };
    let mut words = out.lines().next().ok_or_else(bad)?.split(' ');
    let (Some(pid), Some(pane), Some(pane_pid), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(bad());
    };
    let pid = pid.parse().map_err(|_| bad())?;
    let id = pane.parse().map_err(|_| bad())?;
    let pane_pid = pane_pid.parse().map_err(|_| bad())?;
    Ok((pid, FirstPane { id, pid: pane_pid }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn a_guard_pairs_by_time_and_number_not_flags() {
        assert_eq!(guard_key("1796211056 260 0"), "1796211056 260");
        assert_eq!(guard_key("1796211056 260 1"), guard_key("1796211056 260 0"));
        assert_ne!(guard_key("1796211056 261 0"), guard_key("1796211056 260 0"));
    }

    #[test]
    fn parses_start_output() {
        let (pid, pane) = parse_start("123 %0 456\n", "new-session").expect("parses");
        assert_eq!((pid, pane.id, pane.pid), (123, PaneId(0), 456));
        for bad in ["", "123 %0", "123 0 456", "x %0 456", "1 %0 2 3"] {
            let err = parse_start(bad, "new-session").expect_err(bad);
            assert_eq!(err.code(), ErrorCode::CommandFailed);
        }
    }
}
