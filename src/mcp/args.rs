//! The MCP tools' arguments: typed, with the JSON Schemas clients see
//! (derived by `schemars`, so schema and parser cannot drift), and their
//! one-way conversion into the registry's requests. No IO, no registry
//! calls: like `cli/args.rs`, every check here runs before anything moves.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::MAX_READ_LINES;
use crate::registry::{ReadRequest, RestartPolicy, SendRequest, SpawnSpec, WaitCondition, WaitFor};
use crate::vocab::Size;
use crate::{Error, Result};

/// A `terminal_wait` gives up after this long unless told otherwise (the
/// CLI's `wait` default).
pub const DEFAULT_WAIT_SECS: f64 = 30.0;

/// `terminal_spawn`'s arguments.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    /// A name unique among your terminals, usable instead of the id.
    pub name: Option<String>,
    /// The program and its arguments, executed exactly (no shell parses
    /// them); default: an interactive shell.
    pub command: Option<Vec<String>>,
    /// Working directory (relative paths are resolved against the server's).
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    pub env: Option<BTreeMap<String, String>>,
    /// Width in columns (default 80).
    pub cols: Option<u16>,
    /// Height in rows (default 24).
    pub rows: Option<u16>,
    /// What to do when the program dies (default `never`).
    pub restart: Option<Restart>,
}

/// The restart policies, as their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// Keep the exit status; never rerun.
    Never,
    /// Recreate a dead terminal when it is next used.
    OnAttach,
    /// Recreate on death, with backoff.
    Always,
}

/// `terminal_send`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// Terminal id or name.
    pub terminal: String,
    /// The text to type, exactly (a newline in it is a newline typed).
    pub text: String,
    /// Press Enter after the text.
    #[serde(default)]
    pub submit: bool,
    /// When the send is done: `stdin` (default) when the program waits
    /// for input again, e.g. the shell's prompt is back; `idle` when the
    /// output went quiet; `exit` when the program ended; `none` at once.
    #[serde(default)]
    pub wait: Option<Wait>,
    /// Give up waiting after this many seconds (default 30); the output so
    /// far is returned with `wait_reason: "timeout"`.
    pub timeout_secs: Option<f64>,
}

/// The send wait conditions, as their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Output went quiet, or the program blocked reading its terminal.
    Idle,
    /// The foreground program blocked reading its terminal.
    Stdin,
    /// The program exited.
    Exit,
    /// Return immediately after typing.
    None,
}

/// `terminal_read`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Terminal id or name.
    pub terminal: String,
    /// Lines to skip back from the newest (default 0: the latest page).
    #[serde(default)]
    pub offset: usize,
    /// Lines to return (default 100, at most 1000).
    pub count: Option<usize>,
}

/// The arguments of the tools that name a terminal and nothing else.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalArgs {
    /// Terminal id or name.
    pub terminal: String,
}

/// `terminal_wait`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// Terminal id or name.
    pub terminal: String,
    /// Wait until a line of the screen or recent scrollback contains this.
    pub text: Option<String>,
    /// Wait until a line of the screen or recent scrollback matches this
    /// regular expression (Rust `regex` syntax).
    pub regex: Option<String>,
    /// Wait until the program exits (give `true`).
    pub exit: Option<bool>,
    /// Give up after this many seconds (default 30).
    pub timeout_secs: Option<f64>,
}

/// `terminal_signal`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalArgs {
    /// Terminal id or name.
    pub terminal: String,
    /// One of INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 USR2 (`SIG`
    /// prefix allowed); goes to the foreground process group.
    pub signal: String,
}

/// `terminal_list`'s arguments: none (an unknown one is an error, as for
/// every other tool).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {}

/// Checks `arguments` against the argument type of `tool`, before the
/// tool runs: wrong types, unknown fields and missing required ones are
/// the protocol's invalid params (JSON-RPC -32602), as the contract
/// says. rmcp itself turns them into tool results (`isError`, so a model
/// may retry), which a harness cannot tell from the tool's own failure.
/// An unknown tool is the router's to refuse.
///
/// # Errors
/// The deserializer's message, naming the tool.
pub fn check_arguments(
    tool: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> std::result::Result<(), String> {
    fn parse<'de, T: Deserialize<'de>>(
        arguments: &'de serde_json::Map<String, serde_json::Value>,
    ) -> std::result::Result<(), serde_json::Error> {
        T::deserialize(serde::de::IntoDeserializer::into_deserializer(arguments)).map(drop)
    }
    let empty = serde_json::Map::new();
    let arguments = arguments.unwrap_or(&empty);
    let checked = match tool {
        "terminal_spawn" => parse::<SpawnArgs>(arguments),
        "terminal_list" => parse::<ListArgs>(arguments),
        "terminal_send" => parse::<SendArgs>(arguments),
        "terminal_read" => parse::<ReadArgs>(arguments),
        "terminal_screen" | "terminal_kill" => parse::<TerminalArgs>(arguments),
        "terminal_wait" => parse::<WaitArgs>(arguments),
        "terminal_signal" => parse::<SignalArgs>(arguments),
        _ => Ok(()),
    };
    checked.map_err(|error| format!("invalid arguments for {tool}: {error}"))
}

impl SpawnArgs {
    /// The spec these arguments describe.
    ///
    /// # Errors
    /// `INVALID_INPUT` for an empty command or a cwd that cannot be
    /// resolved; the registry checks the rest ([`SpawnSpec::validate`]).
    pub fn spec(self) -> Result<SpawnSpec> {
        let restart = match self.restart.unwrap_or(Restart::Never) {
            Restart::Never => RestartPolicy::Never,
            Restart::OnAttach => RestartPolicy::OnAttach,
            Restart::Always => RestartPolicy::Always,
        };
        let mut spec = SpawnSpec::default().restart(restart);
        if let Some(name) = self.name {
            spec = spec.name(name);
        }
        if let Some(command) = self.command {
            // An empty array would silently mean "the shell": say so instead.
            if command.is_empty() {
                return Err(Error::InvalidInput(
                    "command is an empty array: omit it for a shell".to_owned(),
                ));
            }
            spec = spec.command(command);
        }
        if let Some(cwd) = self.cwd {
            spec = spec.cwd(
                std::path::absolute(&cwd)
                    .map_err(|e| Error::io(format!("resolving cwd {}", cwd.display()), e))?,
            );
        }
        for (key, value) in self.env.unwrap_or_default() {
            spec = spec.env(key, value);
        }
        if self.cols.is_some() || self.rows.is_some() {
            let default = Size::default();
            spec = spec.size(
                self.cols.unwrap_or(default.cols),
                self.rows.unwrap_or(default.rows),
            );
        }
        Ok(spec)
    }
}

impl SendArgs {
    /// The send request these arguments describe.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a timeout that is not a number of seconds.
    pub fn request(&self) -> Result<SendRequest> {
        Ok(SendRequest {
            text: self.text.clone().into_bytes().into(),
            submit: self.submit,
            wait: match self.wait.unwrap_or(Wait::Stdin) {
                Wait::Idle => WaitFor::Idle,
                Wait::Stdin => WaitFor::StdinRead,
                Wait::Exit => WaitFor::Exit,
                Wait::None => WaitFor::None,
            },
            timeout: self.timeout_secs.map(seconds).transpose()?,
        })
    }
}

impl ReadArgs {
    /// The read request, its count capped at [`MAX_READ_LINES`]; `true`
    /// with it when the cap cut the count.
    pub fn request(&self) -> (ReadRequest, bool) {
        let capped = self.count.map(|count| count.min(MAX_READ_LINES));
        let request = ReadRequest {
            offset: self.offset,
            count: capped,
        };
        (request, capped != self.count)
    }
}

impl WaitArgs {
    /// What to wait for: exactly one of `text`, `regex`, `exit: true`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for none or several, or a regex that does not
    /// compile.
    pub fn condition(&self) -> Result<WaitCondition> {
        match (&self.text, &self.regex, self.exit.unwrap_or(false)) {
            (Some(text), None, false) => Ok(WaitCondition::Text(text.clone())),
            (None, Some(regex), false) => WaitCondition::regex(regex.as_str()),
            (None, None, true) => Ok(WaitCondition::Exit),
            _ => Err(Error::InvalidInput(
                "give exactly one of text, regex, exit: true".to_owned(),
            )),
        }
    }

    /// The deadline.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a timeout that is not a number of seconds.
    pub fn timeout(&self) -> Result<Duration> {
        seconds(self.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS))
    }
}

fn seconds(value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        Error::InvalidInput(format!("timeout_secs {value} is not a number of seconds"))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wait(text: Option<&str>, regex: Option<&str>, exit: Option<bool>) -> WaitArgs {
        WaitArgs {
            terminal: "t".to_owned(),
            text: text.map(str::to_owned),
            regex: regex.map(str::to_owned),
            exit,
            timeout_secs: None,
        }
    }

    #[test]
    fn wait_takes_exactly_one_condition() {
        let cases = [
            (wait(Some("a"), None, None), Some("text")),
            (wait(None, Some("a+"), None), Some("regex")),
            (wait(None, None, Some(true)), Some("exit")),
            (wait(None, None, None), None),
            (wait(None, None, Some(false)), None),
            (wait(Some("a"), Some("b"), None), None),
            (wait(Some("a"), None, Some(true)), None),
            (wait(None, Some("("), None), None),
        ];
        for (args, want) in cases {
            let got = args.condition().ok().map(|c| match c {
                WaitCondition::Text(_) => "text",
                WaitCondition::Regex(_) => "regex",
                _ => "exit",
            });
            assert_eq!(got, want, "{args:?}");
        }
    }

    #[test]
    fn spawn_fills_the_missing_dimension_and_maps_restart() {
        let args: SpawnArgs = serde_json::from_value(serde_json::json!({
            "name": "repl", "command": ["python3"], "cols": 100, "restart": "on-attach",
            "env": {"A": "1"}
        }))
        .unwrap();
        let spec = args.spec().unwrap();
        assert_eq!(
            spec.size,
            Some(Size {
                cols: 100,
                rows: 24
            })
        );
        assert_eq!(spec.restart, RestartPolicy::OnAttach);
        assert_eq!(spec.command, ["python3"]);
        assert_eq!(spec.env.get("A").map(String::as_str), Some("1"));
        let empty = SpawnArgs {
            command: Some(Vec::new()),
            ..SpawnArgs::default()
        };
        assert_eq!(empty.spec().unwrap_err().code(), "INVALID_INPUT");
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused() {
        for bad in [
            serde_json::json!({"terminal": "t", "text": "x", "wait": "forever"}),
            serde_json::json!({"terminal": "t", "text": "x", "sumbit": true}),
            serde_json::json!({"text": "x"}),
        ] {
            assert!(
                serde_json::from_value::<SendArgs>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let send: SendArgs =
            serde_json::from_value(serde_json::json!({"terminal": "t", "text": "x"})).unwrap();
        let request = send.request().unwrap();
        assert_eq!(request.wait, WaitFor::StdinRead);
        assert!(!request.submit);
        let negative = SendArgs {
            timeout_secs: Some(-1.0),
            ..send
        };
        assert_eq!(negative.request().unwrap_err().code(), "INVALID_INPUT");
    }

    #[test]
    fn read_count_is_capped() {
        let read = |count| ReadArgs {
            terminal: "t".to_owned(),
            offset: 0,
            count,
        };
        assert_eq!(read(None).request().0.count, None);
        assert!(!read(Some(5)).request().1);
        let (request, capped) = read(Some(MAX_READ_LINES + 1)).request();
        assert_eq!(request.count, Some(MAX_READ_LINES));
        assert!(capped);
    }
}
