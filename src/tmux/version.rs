//! Which tmux we run: discovery of the binary, its version, and the
//! version-dependent quirks as capability flags.
//!
//! Every "if tmux >= X" decision of the engine reads a [`Caps`] flag; no
//! other module compares version numbers. This module runs `tmux -V` and
//! nothing else: it never starts a server.

use std::cmp::Ordering;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Error, Result};

/// The environment variable that overrides which tmux the engine runs: a
/// path (anything containing `/`) or a name looked up on `PATH`.
pub const TMUX_ENV: &str = "TMUX_ENGINE_TMUX";

/// The oldest tmux the engine supports: `pause-after`, subscriptions and
/// `new-session -e` arrived in 3.2.
pub const MIN_VERSION: (u32, u32) = (3, 2);

/// How far a build is from a numbered release.
///
/// Ordered oldest first: a development build of X.Y comes before the
/// release candidates of X.Y, which come before X.Y itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// A development build working towards the version (`next-3.6`,
    /// `master`, OpenBSD base).
    Dev,
    /// A release candidate (`3.4-rc`, `3.2-rc3`; the number is 0 when absent).
    Rc(u32),
    /// A numbered release (`3.3a`).
    Release,
}

/// A tmux version as printed by `tmux -V`.
///
/// Parsed forms: `3.3a`, `3.5`, `3.4-rc`, `3.2-rc3`, `next-3.6` (a
/// development build before 3.6), `master` (newest of all; see
/// [`Version::is_master`]) and `openbsd-7.4` (OpenBSD's base tmux, mapped to
/// the last tmux release before that OpenBSD release, so capabilities are
/// never over-claimed). Ordering ignores `raw`.
#[derive(Clone, Debug)]
pub struct Version {
    /// Major number (`3` in `3.3a`).
    pub major: u32,
    /// Minor number (`3` in `3.3a`).
    pub minor: u32,
    /// Patch letter (`a` in `3.3a`), if any.
    pub letter: Option<char>,
    /// Release, release candidate or development build.
    pub stage: Stage,
    /// The version text as tmux printed it, without the `tmux ` prefix.
    pub raw: String,
}

/// `major` given to `master` builds: newer than any numbered release.
const MASTER_MAJOR: u32 = u32::MAX;

/// An OpenBSD release, (major, minor).
type OsRelease = (u32, u32);
/// A tmux release, (major, minor, letter).
type Release = (u32, u32, Option<char>);

/// OpenBSD release -> the last tmux release published before it.
///
/// OpenBSD's base tmux tracks tmux's development tree, so it is usually a
/// little newer than this; under-claiming only costs a harmless workaround,
/// over-claiming would send commands tmux does not know.
const OPENBSD: &[(OsRelease, Release)] = &[
    ((6, 9), (3, 2, None)),
    ((7, 0), (3, 2, Some('a'))),
    ((7, 1), (3, 2, Some('a'))),
    ((7, 2), (3, 3, Some('a'))),
    ((7, 3), (3, 3, Some('a'))),
    ((7, 4), (3, 3, Some('a'))),
    ((7, 5), (3, 4, None)),
    ((7, 6), (3, 5, None)),
    ((7, 7), (3, 5, Some('a'))),
    ((7, 8), (3, 5, Some('a'))),
];

impl Version {
    /// Parses the output of `tmux -V` (`tmux 3.3a\n`) or the bare version
    /// text (`3.3a`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the text when it is not a tmux version.
    pub fn parse(text: &str) -> Result<Version> {
        let trimmed = text.trim();
        let raw = trimmed.strip_prefix("tmux ").unwrap_or(trimmed).trim();
        Self::parse_raw(raw).ok_or_else(|| {
            Error::InvalidInput(format!(
                "{text:?} is not a tmux version (expected e.g. `tmux 3.3a`)"
            ))
        })
    }

    fn parse_raw(raw: &str) -> Option<Version> {
        let make = |major, minor, letter, stage| Version {
            major,
            minor,
            letter,
            stage,
            raw: raw.to_owned(),
        };
        if raw == "master" {
            return Some(make(MASTER_MAJOR, 0, None, Stage::Dev));
        }
        if let Some(rest) = raw.strip_prefix("next-") {
            let (major, minor, letter) = numbered(rest)?;
            return Some(make(major, minor, letter, Stage::Dev));
        }
        if let Some(rest) = raw.strip_prefix("openbsd-") {
            let (os_major, os_minor, _) = numbered(rest)?;
            let os = (os_major, os_minor);
            // Older than the table: too old for the engine anyway, so map
            // below 3.2 and let the caller refuse it.
            let &(_, (major, minor, letter)) = OPENBSD
                .iter()
                .rev()
                .find(|(release, _)| *release <= os)
                .unwrap_or(&((0, 0), (3, 1, None)));
            return Some(make(major, minor, letter, Stage::Release));
        }
        if let Some((number, rc)) = raw.split_once("-rc") {
            let (major, minor, letter) = numbered(number)?;
            let rc = if rc.is_empty() { 0 } else { digits(rc)? };
            return Some(make(major, minor, letter, Stage::Rc(rc)));
        }
        let (major, minor, letter) = numbered(raw)?;
        Some(make(major, minor, letter, Stage::Release))
    }

    /// A numbered release, for tables and comparisons.
    pub fn new(major: u32, minor: u32, letter: Option<char>) -> Version {
        let raw = match letter {
            Some(l) => format!("{major}.{minor}{l}"),
            None => format!("{major}.{minor}"),
        };
        Version {
            major,
            minor,
            letter,
            stage: Stage::Release,
            raw,
        }
    }

    /// True for a `tmux master` build (no number; treated as the newest).
    pub fn is_master(&self) -> bool {
        self.major == MASTER_MAJOR
    }

    /// True when this is `major.minor` or newer, counting development builds
    /// and release candidates of `major.minor` as having its features.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    fn key(&self) -> (u32, u32, Stage, Option<char>) {
        (self.major, self.minor, self.stage, self.letter)
    }
}

/// `3.3a` -> (3, 3, Some('a')); at most one trailing ASCII letter.
fn numbered(text: &str) -> Option<(u32, u32, Option<char>)> {
    let (major, rest) = text.split_once('.')?;
    let major = digits(major)?;
    let split = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (minor, suffix) = rest.split_at(split);
    let minor = digits(minor)?;
    let mut chars = suffix.chars();
    let letter = match (chars.next(), chars.next()) {
        (None, _) => None,
        (Some(c), None) if c.is_ascii_lowercase() => Some(c),
        _ => return None,
    };
    Some((major, minor, letter))
}

fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// What the running tmux can do and which of its bugs the engine must work
/// around: every version check of the engine, in one place.
///
/// Sources: `reference/control-mode.md` §11 and `reference/tmux-quirks.md`.
/// Flags named for a feature are true when tmux has it; flags named for a
/// bug are true when tmux has the bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caps {
    /// 3.2+: `refresh-client -f pause-after=N`, `%pause`, `%continue`,
    /// `%extended-output` and `refresh-client -A`: the bounded-queue story.
    pub pause_after: bool,
    /// 3.2+: `refresh-client -B` format subscriptions and
    /// `%subscription-changed` (pane death without polling).
    pub subscriptions: bool,
    /// 3.2+: `%client-detached`.
    pub client_detached: bool,
    /// 3.2+: `new-session -e K=V` (older tmux only had it on new-window).
    pub new_session_env: bool,
    /// 3.2+: `remain-on-exit failed` and remain-on-exit as a pane option.
    pub remain_on_exit_failed: bool,
    /// 3.3+: `#{pane_dead_signal}` and `#{pane_dead_time}`; older tmux only
    /// tells the exit status, so a signal death looks like a plain exit.
    pub pane_dead_signal: bool,
    /// 3.3+: per-window control-client size `refresh-client -C @W:WxH`.
    pub per_window_client_size: bool,
    /// 3.3+: `pipe-pane` refuses dead panes.
    pub pipe_pane_refuses_dead: bool,
    /// Before 3.4 the server reads a control client's stdin before the
    /// attach command has run, so the client must wait for the first
    /// `%end`/`%error` before writing anything.
    pub reads_stdin_before_attach: bool,
    /// Before 3.4 a config-file error puts pane `%0` into view mode, where
    /// it swallows `send-keys` (tmux#3193); 3.4+ reports `%config-error`.
    pub config_error_view_mode: bool,
    /// 3.4+: `%config-error` notifications.
    pub config_error_notification: bool,
    /// 3.4+: `%message` for `display-message` aimed at a control client.
    pub message_notification: bool,
    /// 3.4+: `%paste-buffer-changed` and `%paste-buffer-deleted`.
    pub paste_buffer_notifications: bool,
    /// 3.4+: reply lines (not `capture-pane`) are vis-escaped, with the
    /// backslash itself left alone, so the escaping cannot be undone:
    /// keep `-F` formats to ids and numbers, free text last.
    pub reply_text_vis_escaped: bool,
    /// 3.4+: `capture-pane -T` (trim trailing spaces).
    pub capture_pane_trim: bool,
    /// 3.5+: `run-shell` output reaches a control client as bare lines
    /// outside any block; before, it opens view mode on the active pane.
    pub run_shell_bare_lines: bool,
    /// 3.5+: `refresh-client -r %P:REPORT` (OSC 10/11 colour replies).
    pub refresh_client_reports: bool,
    /// 3.6+: the `no-detach-on-destroy` client flag.
    pub no_detach_on_destroy: bool,
    /// 3.7+: `refresh-client -A %P:off` discards queued blocks; before 3.7 it
    /// could leave blocks pointing into a drained buffer and crash the
    /// server. Only use `off` when set.
    pub pane_off_safe: bool,
    /// 3.7+: control characters in format output are replaced (tab -> `_`).
    pub format_control_chars_replaced: bool,
    /// 3.7 series (reported on 3.7b): `split-window -P -F` prints nothing in
    /// control mode; query the new pane with `list-panes` instead.
    pub split_window_print_broken: bool,
    /// 3.2 to 3.7c: `%pause`/`%continue` from `refresh-client -A` arrive
    /// inside that command's reply block.
    pub pause_inside_block: bool,
    /// After 3.7c only (master): `respawn-pane` resets control-client
    /// offsets. Before, output after a respawn can be truncated for
    /// control clients (tmux#5498): resync with `capture-pane`.
    pub respawn_resets_control_offsets: bool,
    /// After 3.7c only (master): notifications are deferred until the
    /// outermost reply block closes (tmux#5458).
    pub notifications_deferred: bool,
}

impl Caps {
    /// The capabilities and quirks of `version`.
    pub fn for_version(v: &Version) -> Caps {
        let after_3_7 = v.at_least(3, 8) || v.is_master();
        Caps {
            pause_after: v.at_least(3, 2),
            subscriptions: v.at_least(3, 2),
            client_detached: v.at_least(3, 2),
            new_session_env: v.at_least(3, 2),
            remain_on_exit_failed: v.at_least(3, 2),
            pane_dead_signal: v.at_least(3, 3),
            per_window_client_size: v.at_least(3, 3),
            pipe_pane_refuses_dead: v.at_least(3, 3),
            reads_stdin_before_attach: !v.at_least(3, 4),
            config_error_view_mode: !v.at_least(3, 4),
            config_error_notification: v.at_least(3, 4),
            message_notification: v.at_least(3, 4),
            paste_buffer_notifications: v.at_least(3, 4),
            reply_text_vis_escaped: v.at_least(3, 4),
            capture_pane_trim: v.at_least(3, 4),
            run_shell_bare_lines: v.at_least(3, 5),
            refresh_client_reports: v.at_least(3, 5),
            no_detach_on_destroy: v.at_least(3, 6),
            pane_off_safe: v.at_least(3, 7),
            format_control_chars_replaced: v.at_least(3, 7),
            split_window_print_broken: v.major == 3 && v.minor == 7,
            pause_inside_block: v.at_least(3, 2) && !after_3_7,
            respawn_resets_control_offsets: after_3_7,
            notifications_deferred: after_3_7,
        }
    }
}

/// A tmux binary the engine can use: found, asked its version, and new
/// enough.
#[derive(Clone, Debug)]
pub struct Tmux {
    path: PathBuf,
    version: Version,
    caps: Caps,
}

impl Tmux {
    /// Finds tmux: `$TMUX_ENGINE_TMUX` (a path, or a name looked up on
    /// `PATH`) when set, else `tmux` on `PATH`. Runs `tmux -V` (blocking,
    /// once).
    ///
    /// # Errors
    ///
    /// [`Error::TmuxMissing`] naming where it looked; [`Error::TmuxTooOld`]
    /// for tmux before 3.2; [`Error::Io`] when `tmux -V` cannot be run for
    /// another reason.
    pub fn discover() -> Result<Tmux> {
        match std::env::var_os(TMUX_ENV) {
            Some(spec) if !spec.is_empty() => Self::find(&spec, Some(TMUX_ENV)),
            _ => Self::find(OsStr::new("tmux"), None),
        }
    }

    /// Resolves `spec` as [`Tmux::discover`] resolves `$TMUX_ENGINE_TMUX`,
    /// without reading the environment: a path when it contains `/`, else a
    /// name looked up on `PATH`. `source` names where `spec` came from, for
    /// the error text.
    ///
    /// # Errors
    ///
    /// As [`Tmux::discover`].
    pub fn find(spec: &OsStr, source: Option<&str>) -> Result<Tmux> {
        let from = match source {
            Some(var) => format!(" (from {var})"),
            None => String::new(),
        };
        if spec.as_encoded_bytes().contains(&b'/') {
            return Self::at(spec).map_err(|e| match e {
                Error::TmuxMissing(msg) => Error::TmuxMissing(format!("{msg}{from}")),
                other => other,
            });
        }
        match which::which(spec) {
            Ok(path) => Self::at(path),
            Err(e) => Err(Error::TmuxMissing(format!(
                "no {:?} on PATH{from}: {e}; install tmux 3.2 or newer or set {TMUX_ENV}",
                spec.to_string_lossy()
            ))),
        }
    }

    /// Uses the tmux at `path`: runs `path -V`, parses it, refuses tmux
    /// before 3.2.
    ///
    /// # Errors
    ///
    /// [`Error::TmuxMissing`] when `path` does not exist, cannot be run or
    /// does not print a tmux version; [`Error::TmuxTooOld`] for tmux before
    /// 3.2; [`Error::Io`] for other failures to run it.
    pub fn at(path: impl Into<PathBuf>) -> Result<Tmux> {
        let path = path.into();
        let output = std::process::Command::new(&path)
            .arg("-V")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                    Error::TmuxMissing(format!("{} cannot be run: {e}", path.display()))
                }
                _ => Error::io(format!("running {} -V", path.display()), e),
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(Error::TmuxMissing(format!(
                "{} -V failed with {}: {}",
                path.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let version = Version::parse(&stdout).map_err(|_| {
            Error::TmuxMissing(format!(
                "{} -V printed {:?}, not a tmux version",
                path.display(),
                stdout.trim()
            ))
        })?;
        Self::with_version(path, version)
    }

    /// A tmux at `path` known to be `version`, without running it (for
    /// tests and for callers that already asked).
    ///
    /// # Errors
    ///
    /// [`Error::TmuxTooOld`] for tmux before 3.2.
    pub fn with_version(path: impl Into<PathBuf>, version: Version) -> Result<Tmux> {
        let path = path.into();
        if !version.at_least(MIN_VERSION.0, MIN_VERSION.1) {
            return Err(Error::TmuxTooOld {
                found: version.raw,
                path,
            });
        }
        let caps = Caps::for_version(&version);
        Ok(Tmux {
            path,
            version,
            caps,
        })
    }

    /// The binary.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// Its capabilities and quirks.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// A command running this tmux with `args`: `tmux -u ARGS`, with the
    /// variables that would make tmux think it runs inside another tmux
    /// removed. `-u` because a client that is not UTF-8 gets every reply
    /// and error text sanitised to `_`.
    pub fn command<I, S>(&self, args: I) -> std::process::Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut cmd = std::process::Command::new(&self.path);
        cmd.arg("-u");
        cmd.args(args.into_iter().map(Into::into));
        cmd.env_remove("TMUX").env_remove("TMUX_PANE");
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        let cases: &[(&str, u32, u32, Option<char>, Stage)] = &[
            ("tmux 3.3a", 3, 3, Some('a'), Stage::Release),
            ("tmux 3.3a\n", 3, 3, Some('a'), Stage::Release),
            ("tmux 3.5", 3, 5, None, Stage::Release),
            ("3.2", 3, 2, None, Stage::Release),
            ("tmux 3.1c", 3, 1, Some('c'), Stage::Release),
            ("tmux next-3.6", 3, 6, None, Stage::Dev),
            ("tmux 3.4-rc", 3, 4, None, Stage::Rc(0)),
            ("tmux 3.2-rc3", 3, 2, None, Stage::Rc(3)),
            ("tmux 3.10", 3, 10, None, Stage::Release),
            ("tmux openbsd-7.4", 3, 3, Some('a'), Stage::Release),
            ("tmux openbsd-7.5", 3, 4, None, Stage::Release),
            ("tmux openbsd-9.9", 3, 5, Some('a'), Stage::Release),
            ("tmux openbsd-6.1", 3, 1, None, Stage::Release),
            ("tmux master", MASTER_MAJOR, 0, None, Stage::Dev),
        ];
        for &(text, major, minor, letter, stage) in cases {
            let v = Version::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(
                (v.major, v.minor, v.letter, v.stage),
                (major, minor, letter, stage),
                "{text:?}"
            );
        }
        assert_eq!(Version::parse("tmux 3.3a").expect("parses").raw, "3.3a");
        assert_eq!(
            Version::parse("tmux master").expect("parses").to_string(),
            "master"
        );
    }

    #[test]
    fn rejects_non_versions() {
        for text in [
            "",
            "tmux",
            "tmux ",
            "tmux 3",
            "tmux 3.",
            "tmux .3",
            "tmux x.y",
            "tmux 3.3ab",
            "tmux 3.3A",
            "tmux next-",
            "tmux openbsd-x",
            "tmux 3.4-rcx",
            "screen 4.09",
            "tmux -3.3",
        ] {
            assert!(Version::parse(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn orders_versions() {
        let ascending = [
            "3.1c", "3.2-rc", "3.2-rc3", "3.2", "3.2a", "3.3", "3.3a", "3.4", "next-3.5", "3.5-rc",
            "3.5", "3.5a", "3.10", "master",
        ];
        let parsed: Vec<Version> = ascending
            .iter()
            .map(|t| Version::parse(t).expect("parses"))
            .collect();
        for pair in parsed.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(
            Version::parse("tmux 3.3a").expect("parses"),
            Version::new(3, 3, Some('a'))
        );
    }

    #[test]
    fn caps_follow_the_version_table() {
        let caps = |t: &str| Caps::for_version(&Version::parse(t).expect("parses"));
        // (version, pause_after, pane_dead_signal, reads_stdin_before_attach,
        //  reply_text_vis_escaped, run_shell_bare_lines, pane_off_safe,
        //  split_window_print_broken, respawn_resets_control_offsets)
        let table: &[(&str, [bool; 8])] = &[
            (
                "3.2",
                [true, false, true, false, false, false, false, false],
            ),
            (
                "3.2a",
                [true, false, true, false, false, false, false, false],
            ),
            (
                "3.3a",
                [true, true, true, false, false, false, false, false],
            ),
            ("3.4", [true, true, false, true, false, false, false, false]),
            (
                "3.4-rc",
                [true, true, false, true, false, false, false, false],
            ),
            ("3.5a", [true, true, false, true, true, false, false, false]),
            (
                "next-3.6",
                [true, true, false, true, true, false, false, false],
            ),
            ("3.7b", [true, true, false, true, true, true, true, false]),
            ("3.7c", [true, true, false, true, true, true, true, false]),
            ("3.8", [true, true, false, true, true, true, false, true]),
            ("master", [true, true, false, true, true, true, false, true]),
        ];
        for (text, want) in table {
            let c = caps(text);
            let got = [
                c.pause_after,
                c.pane_dead_signal,
                c.reads_stdin_before_attach,
                c.reply_text_vis_escaped,
                c.run_shell_bare_lines,
                c.pane_off_safe,
                c.split_window_print_broken,
                c.respawn_resets_control_offsets,
            ];
            assert_eq!(&got, want, "caps of {text}");
        }
        assert!(caps("3.3a").pause_inside_block);
        assert!(!caps("master").pause_inside_block);
        assert!(caps("3.3a").config_error_view_mode);
        assert!(caps("3.4").config_error_notification);
    }

    #[test]
    fn refuses_old_tmux() {
        let err = Tmux::with_version("/x/tmux", Version::parse("tmux 3.1c").expect("parses"))
            .expect_err("3.1c is too old");
        insta::assert_snapshot!(err, @"tmux 3.1c at /x/tmux is too old: tmux-engine needs tmux 3.2 or newer");
        assert_eq!(err.code(), "TMUX_TOO_OLD");
        let ok = Tmux::with_version("/x/tmux", Version::parse("tmux 3.2").expect("parses"))
            .expect("3.2 is supported");
        assert!(ok.caps().pause_after);
    }

    #[test]
    fn missing_binary_is_tmux_missing() {
        let err = Tmux::at("/nonexistent/dir/tmux").expect_err("no such file");
        assert_eq!(err.code(), "TMUX_MISSING");
        assert!(err.to_string().contains("/nonexistent/dir/tmux"), "{err}");
        let err = Tmux::find(OsStr::new("tmux-engine-no-such-binary"), Some(TMUX_ENV))
            .expect_err("not on PATH");
        assert_eq!(err.code(), "TMUX_MISSING");
        assert!(err.to_string().contains(TMUX_ENV), "{err}");
    }
}
