//! Building tmux commands that no caller-supplied text can break out of.
//!
//! [`quote`] is the one quoting function of the engine: every argument that
//! reaches a tmux command line goes through it (via [`TmuxCommand`]), and
//! pane input goes hex-encoded through [`send_keys_hex`]. Names are checked
//! by [`check_name`](crate::vocab::check_name). This module builds text and argv;
//! it runs nothing.
//!
//! Two forms of the same command exist, with different hazards:
//!
//! - the *line* form ([`TmuxCommand::line`]) is what a control client writes
//!   on tmux's stdin. tmux parses it like a config file: `;`, `{}`, `#`, `$`,
//!   `~`, quotes and a raw LF are all syntax, so every argument is
//!   double-quoted and escaped;
//! - the *argv* form ([`TmuxCommand::argv`]) is for `tmux -S SOCK CMD ARGS`.
//!   tmux splits argv into commands at any argument that *ends* with `;`, so
//!   such an argument gets a `\` before its final `;` (tmux turns `\;` back
//!   into `;`).
//!
//! In both forms, arguments tmux format-expands (`-F`, `new-session -s/-c`,
//! `rename-*`, `run-shell`, ...) need `#` doubled: use
//! [`TmuxCommand::format_arg`] / [`TmuxCommand::format_opt`] for them.
//! `display-message` text also goes through `strftime`, so `%` must be
//! doubled as well: [`TmuxCommand::format_time_arg`].

use std::ffi::OsString;
use std::fmt::{self, Write as _};
use std::os::unix::ffi::OsStringExt;

use crate::vocab::{PaneId, Size};
use crate::{Error, Result};

/// Bytes per `send-keys -H` command in [`send_keys_hex`] when the caller
/// passes 0. tmux has no line limit on the control connection, but the CLI
/// form is bounded by tmux's 16 KiB message size; 1 KiB (about 3 KiB of
/// command text) fits both with room to spare.
pub(crate) const DEFAULT_HEX_CHUNK: usize = 1024;

/// Most bytes one `send-keys -H` command carries ([`send_keys_hex`] clamps
/// its chunk to it): tmux 3.3a's command parser keeps one stack entry per
/// argument and fails a command of 10 000 or more with "yacc stack
/// overflow" (nothing is typed), and its cost per argument grows with the
/// count, so bigger chunks are slower, never faster.
pub(crate) const MAX_HEX_CHUNK: usize = 4096;

/// Encodes `arg` as one double-quoted tmux argument that parses back to
/// exactly `arg`, wherever it appears on a command line.
///
/// `\ " $ ~ # ; { }` get a backslash; bytes below 0x20, 0x7f and bytes of
/// 0x80 and above become `\ooo` (three octal digits), so the result is
/// ASCII, never contains LF or CR, never expands a variable or home
/// directory, and never ends the command. It does not protect against
/// format expansion (`#{...}`): see `format_escape`.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `arg` contains NUL: tmux arguments are C
/// strings. Send NUL to a pane with [`send_keys_hex`].
pub fn quote(arg: &[u8]) -> Result<String> {
    let mut out = String::with_capacity(arg.len() + 2);
    quote_into(&mut out, arg)?;
    Ok(out)
}

fn quote_into(out: &mut String, arg: &[u8]) -> Result<()> {
    if arg.contains(&0) {
        return Err(Error::InvalidInput(format!(
            "tmux argument {:?} contains a NUL byte",
            String::from_utf8_lossy(arg)
        )));
    }
    out.push('"');
    for &b in arg {
        match b {
            b'\\' | b'"' | b'$' | b'~' | b'#' | b';' | b'{' | b'}' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7e => out.push(char::from(b)),
            // The parser reads exactly three octal digits, the first 0-3,
            // which covers every byte.
            _ => write!(out, "\\{b:03o}").expect("writing to a String cannot fail"),
        }
    }
    out.push('"');
    Ok(())
}

/// Doubles every `#`, for an argument that tmux format-expands, so that it
/// expands to exactly `arg` (`##` is a literal `#`).
pub fn format_escape(arg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(arg.len());
    for &b in arg {
        if b == b'#' {
            out.push(b'#');
        }
        out.push(b);
    }
    out
}

/// Doubles every `#` and `%`, for an argument that tmux format-expands and
/// then passes through `strftime` (`display-message` text), so that it
/// expands to exactly `arg` (`%%` is a literal `%`).
pub fn format_time_escape(arg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(arg.len());
    for &b in arg {
        if b == b'#' || b == b'%' {
            out.push(b);
        }
        out.push(b);
    }
    out
}

/// The argv form of one argument: tmux splits CLI arguments into commands at
/// an argument ending in `;` and turns a final `\;` into `;`, so a final `;`
/// gets a backslash before it.
fn argv_escape(arg: &[u8]) -> OsString {
    let mut out = arg.to_vec();
    if out.last() == Some(&b';') {
        out.insert(out.len() - 1, b'\\');
    }
    OsString::from_vec(out)
}

/// One tmux command, built so that every argument is a single argument to
/// tmux whatever its bytes: the line form for a control connection, the
/// argv form for a one-shot `tmux` process.
///
/// Options (flags and flag values) always come before the positional
/// arguments, in the order they were added, followed by `--` when there are
/// positional arguments, so an argument starting with `-` is never taken
/// for a flag:
///
/// ```
/// # use tmux_engine::tmux::TmuxCommand;
/// let cmd = TmuxCommand::new("set-buffer")
///     .opt("-b", "t")
///     .arg("x; kill-server");
/// assert_eq!(cmd.line(), r#"set-buffer -b "t" -- "x\; kill-server""#);
/// # Ok::<(), tmux_engine::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmuxCommand {
    /// The line form, always without `\n`.
    line: String,
    /// Where the next option goes in `line` (before ` --`).
    line_opts_end: usize,
    /// The argv form, the command name first.
    argv: Vec<OsString>,
    /// Where the next option goes in `argv`.
    argv_opts_end: usize,
    /// Whether `--` and positional arguments have been added.
    has_positional: bool,
    /// Why the command cannot run (the first argument holding NUL): kept,
    /// not returned, so building never fails; [`TmuxCommand::checked`] is
    /// the one step that reports it, like `std::process::Command::spawn`.
    invalid: Option<String>,
}

impl TmuxCommand {
    /// A command with no arguments, e.g. `TmuxCommand::new("send-keys")`.
    ///
    /// # Panics
    ///
    /// When `name` is not a plain command name (lowercase letters and `-`):
    /// it is code, never caller input.
    pub fn new(name: &'static str) -> TmuxCommand {
        assert!(
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "tmux command name {name:?} is not lowercase letters and '-'"
        );
        TmuxCommand {
            line: name.to_owned(),
            line_opts_end: name.len(),
            argv: vec![OsString::from(name)],
            argv_opts_end: 1,
            has_positional: false,
            invalid: None,
        }
    }

    /// Adds a flag without a value, e.g. `-H` or `-d`.
    ///
    /// # Panics
    ///
    /// When `flag` is not `-` followed by ASCII letters or digits: flags are
    /// code, never caller input.
    pub fn flag(mut self, flag: &'static str) -> TmuxCommand {
        check_flag(flag);
        self.push_opt(flag, None);
        self
    }

    /// Adds a flag with a value, e.g. `.opt("-b", name)`: the value is one
    /// argument, quoted in the line form. A value holding NUL makes the
    /// command invalid (reported by [`TmuxCommand::checked`]).
    ///
    /// # Panics
    ///
    /// As [`TmuxCommand::flag`].
    pub fn opt(mut self, flag: &'static str, value: impl AsRef<[u8]>) -> TmuxCommand {
        check_flag(flag);
        self.push_opt(flag, Some(value.as_ref()));
        self
    }

    /// Adds a flag whose value tmux format-expands (`-F`, `new-session -s`
    /// and `-c`, ...): `#` is doubled first so the value arrives literally.
    /// For a real format (`-F '#{pane_id}'`) use [`TmuxCommand::opt`].
    ///
    /// # Panics
    ///
    /// As [`TmuxCommand::flag`].
    pub fn format_opt(self, flag: &'static str, value: impl AsRef<[u8]>) -> TmuxCommand {
        self.opt(flag, format_escape(value.as_ref()))
    }

    /// Adds `-t TARGET`: an id such as a [`PaneId`] (`%3`) or an exact session
    /// (`=name`), quoted like any other value.
    pub fn target(self, target: impl fmt::Display) -> TmuxCommand {
        self.opt("-t", target.to_string())
    }

    /// Adds a positional argument, taken literally (quoted in the line form).
    /// A value holding NUL makes the command invalid (reported by
    /// [`TmuxCommand::checked`]).
    pub fn arg(mut self, value: impl AsRef<[u8]>) -> TmuxCommand {
        let value = value.as_ref();
        if self.refuse_nul(value) {
            return self;
        }
        self.start_positional();
        self.line.push(' ');
        quote_into(&mut self.line, value).expect("NUL was refused above");
        self.argv.push(argv_escape(value));
        self
    }

    /// Adds a positional argument that tmux format-expands (`run-shell`,
    /// `rename-session`, ...): `#` is doubled first so it arrives literally.
    /// For `display-message` text use [`TmuxCommand::format_time_arg`].
    pub fn format_arg(self, value: impl AsRef<[u8]>) -> TmuxCommand {
        self.arg(format_escape(value.as_ref()))
    }

    /// Adds a positional argument that tmux format-expands and then expands
    /// with `strftime` (`display-message` text: `%H` becomes the hour): `#`
    /// and `%` are doubled first so it arrives literally.
    pub fn format_time_arg(self, value: impl AsRef<[u8]>) -> TmuxCommand {
        self.arg(format_time_escape(value.as_ref()))
    }

    /// The one checked step: the command itself when every argument was
    /// valid, the reason it cannot run otherwise. Everything that runs a
    /// command (control client, one-shot `tmux`) goes through it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when an argument contained NUL (tmux
    /// arguments are C strings; send NUL to a pane with [`send_keys_hex`]).
    pub fn checked(&self) -> Result<&TmuxCommand> {
        match &self.invalid {
            None => Ok(self),
            Some(reason) => Err(Error::InvalidInput(reason.clone())),
        }
    }

    /// The line form, for a control connection: one line, never containing
    /// `\n` or `\r`; the writer adds the `\n`. Arguments refused as
    /// invalid are missing from it: run the command only after
    /// [`TmuxCommand::checked`].
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The line form, owned (see [`TmuxCommand::line`]).
    pub(crate) fn into_line(self) -> String {
        self.line
    }

    /// The argv form, the command name first, for `tmux -S SOCK ARGV...`;
    /// as with [`TmuxCommand::line`], check first.
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    /// Records the first NUL-holding value; true when `value` is refused.
    fn refuse_nul(&mut self, value: &[u8]) -> bool {
        if !value.contains(&0) {
            return false;
        }
        if self.invalid.is_none() {
            let shown = String::from_utf8_lossy(value);
            self.invalid = Some(format!(
                "argument {shown:?} of tmux {} contains NUL",
                self.argv[0].to_string_lossy()
            ));
        }
        true
    }

    /// Appends a positional argument known to need no quoting (hex bytes).
    fn push_bare(&mut self, word: &str) {
        debug_assert!(word.bytes().all(|b| b.is_ascii_hexdigit()));
        self.start_positional();
        self.line.push(' ');
        self.line.push_str(word);
        self.argv.push(OsString::from(word));
    }

    fn start_positional(&mut self) {
        if !self.has_positional {
            self.has_positional = true;
            self.line.push_str(" --");
            self.argv.push(OsString::from("--"));
        }
    }

    fn push_opt(&mut self, flag: &'static str, value: Option<&[u8]>) {
        if value.is_some_and(|value| self.refuse_nul(value)) {
            return;
        }
        let mut text = format!(" {flag}");
        if let Some(value) = value {
            text.push(' ');
            quote_into(&mut text, value).expect("NUL was refused above");
        }
        self.line.insert_str(self.line_opts_end, &text);
        self.line_opts_end += text.len();
        self.argv.insert(self.argv_opts_end, OsString::from(flag));
        self.argv_opts_end += 1;
        if let Some(value) = value {
            self.argv.insert(self.argv_opts_end, argv_escape(value));
            self.argv_opts_end += 1;
        }
    }
}

fn check_flag(flag: &str) {
    let ok = flag
        .strip_prefix('-')
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert!(ok, "tmux flag {flag:?} is not '-' and letters or digits");
}

impl fmt::Display for TmuxCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

/// `send-keys -t %P -H -- 68 69 ...` commands that type `bytes` into `pane`
/// exactly: each byte is one hex argument, so NUL, invalid UTF-8 and bytes
/// that name keys (`Enter`) all arrive as themselves. At most `chunk` bytes
/// per command; `chunk` 0 means `DEFAULT_HEX_CHUNK`, and a chunk over
/// `MAX_HEX_CHUNK` is clamped to it. No bytes, no commands.
///
/// This builds every command at once (one `OsString` per byte for the argv
/// form): fine for keystrokes and tests, not for a paste. The control
/// client streams big writes through tmux buffers instead
/// ([`ControlClient::send_bytes`](crate::control::client::ControlClient::send_bytes)).
pub fn send_keys_hex(pane: PaneId, bytes: &[u8], chunk: usize) -> Vec<TmuxCommand> {
    let chunk = match chunk {
        0 => DEFAULT_HEX_CHUNK,
        n => n.min(MAX_HEX_CHUNK),
    };
    bytes
        .chunks(chunk)
        .map(|part| send_keys_hex_chunk(pane, part))
        .collect()
}

/// One `send-keys -t %P -H -- 68 69 ...` command typing all of `bytes`
/// (see [`send_keys_hex`]).
///
/// # Panics
///
/// When `bytes` is longer than `MAX_HEX_CHUNK`: tmux would refuse the
/// command, so a caller passing more has a bug.
pub fn send_keys_hex_chunk(pane: PaneId, bytes: &[u8]) -> TmuxCommand {
    assert!(
        bytes.len() <= MAX_HEX_CHUNK,
        "{} bytes is over tmux's send-keys argument limit",
        bytes.len()
    );
    let mut cmd = TmuxCommand::new("send-keys").target(pane).flag("-H");
    let mut hex = String::with_capacity(2);
    for &b in bytes {
        hex.clear();
        write!(hex, "{b:02x}").expect("writing to a String cannot fail");
        cmd.push_bare(&hex);
    }
    cmd
}

/// The line form of [`send_keys_hex_chunk`], exactly, written straight
/// into one string: no argv form, no formatting machinery. Every keystroke
/// of every viewer is one of these (building it through
/// [`TmuxCommand`] was about 20 µs of a cold cache per keystroke, as long
/// as the pipe write that sends it).
///
/// # Panics
///
/// As [`send_keys_hex_chunk`].
pub(crate) fn send_keys_hex_line(pane: PaneId, bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    assert!(
        bytes.len() <= MAX_HEX_CHUNK,
        "{} bytes is over tmux's send-keys argument limit",
        bytes.len()
    );
    let mut line = String::with_capacity(32 + 3 * bytes.len());
    line.push_str("send-keys -t \"%");
    push_decimal(&mut line, pane.0);
    line.push_str("\" -H");
    if !bytes.is_empty() {
        line.push_str(" --");
    }
    for &b in bytes {
        line.push(' ');
        line.push(char::from(HEX[usize::from(b >> 4)]));
        line.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    line
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut start = digits.len();
    loop {
        start -= 1;
        // A digit: `n % 10` is below 10.
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[start..] {
        out.push(char::from(d));
    }
}

/// `resize-window -t PANE -x COLS -y ROWS`: the window follows, and with
/// `window-size manual` (the engine's servers) it stays at that size
/// whatever clients attach.
pub fn resize_window(pane: PaneId, size: Size) -> TmuxCommand {
    TmuxCommand::new("resize-window")
        .target(pane)
        .opt("-x", size.cols.to_string())
        .opt("-y", size.rows.to_string())
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
