//! Which tmux we run: discovery of the binary and its version.
//!
//! Every "if tmux >= X" decision of the engine is a method of [`Tmux`]
//! here (the minimum version, [`Tmux::has_remain_on_exit_format`]); no
//! other module compares version numbers. This module runs `tmux -V` and
//! nothing else: it never starts a server.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{Error, Result};

/// The environment variable that overrides which tmux the engine runs: a
/// path (anything containing `/`) or a name looked up on `PATH`.
pub const TMUX_ENV: &str = "TMUX_ENGINE_TMUX";

/// A tmux release as printed by `tmux -V`: `3.3a` is major 3, minor 3,
/// letter `a`.
///
/// Only numbered releases parse: every tmux the engine supports (3.2 and
/// newer, as packaged on Linux) prints one. Ordered by release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    major: u32,
    minor: u32,
    letter: Option<char>,
}

/// The oldest tmux the engine supports: `pause-after`, subscriptions and
/// `new-session -e` arrived in 3.2.
pub const MIN_VERSION: Version = Version::new(3, 2);

/// The first tmux with `remain-on-exit-format` (the engine empties it so a
/// dead pane keeps its final screen).
const REMAIN_ON_EXIT_FORMAT: Version = Version::new(3, 3);

impl Version {
    const fn new(major: u32, minor: u32) -> Version {
        Version {
            major,
            minor,
            letter: None,
        }
    }

    /// Parses the output of `tmux -V` (`tmux 3.3a\n`) or the bare version
    /// text (`3.3a`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the text when it is not a numbered
    /// tmux release.
    pub fn parse(text: &str) -> Result<Version> {
        let trimmed = text.trim();
        let raw = trimmed.strip_prefix("tmux ").unwrap_or(trimmed).trim();
        numbered(raw).ok_or_else(|| {
            Error::InvalidInput(format!(
                "{text:?} is not a tmux version (expected e.g. `tmux 3.3a`)"
            ))
        })
    }
}

/// `3.3a` -> 3, 3, `a`; at most one trailing lowercase letter.
fn numbered(text: &str) -> Option<Version> {
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
    Some(Version {
        major,
        minor,
        letter,
    })
}

fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        match self.letter {
            Some(letter) => write!(f, "{letter}"),
            None => Ok(()),
        }
    }
}

/// A tmux binary the engine can use: found, asked its version, and new
/// enough.
#[derive(Clone, Debug)]
pub struct Tmux {
    path: PathBuf,
    version: Version,
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
        if version < MIN_VERSION {
            return Err(Error::TmuxTooOld {
                found: version.to_string(),
                path,
            });
        }
        Ok(Tmux { path, version })
    }

    /// The binary.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// True when this tmux has `remain-on-exit-format` (3.3+): the one
    /// feature the engine uses only where tmux has it.
    pub(crate) fn has_remain_on_exit_format(&self) -> bool {
        self.version >= REMAIN_ON_EXIT_FORMAT
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
    use crate::ErrorCode;

    fn v(major: u32, minor: u32, letter: Option<char>) -> Version {
        Version {
            major,
            minor,
            letter,
        }
    }

    #[test]
    fn parses_what_supported_tmux_prints() {
        // `tmux -V` of the releases packaged by Debian, Ubuntu and Fedora.
        let cases = [
            ("tmux 3.2a\n", v(3, 2, Some('a'))),
            ("tmux 3.3a\n", v(3, 3, Some('a'))),
            ("tmux 3.4\n", v(3, 4, None)),
            ("tmux 3.5a\n", v(3, 5, Some('a'))),
            ("3.2", v(3, 2, None)),
            ("tmux 3.10", v(3, 10, None)),
            ("tmux 3.1c", v(3, 1, Some('c'))),
        ];
        for (text, want) in cases {
            let got = Version::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(got, want, "{text:?}");
        }
        assert_eq!(
            Version::parse("tmux 3.3a").expect("parses").to_string(),
            "3.3a"
        );
        assert_eq!(
            Version::parse("tmux 3.4").expect("parses").to_string(),
            "3.4"
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
            "tmux master",
            "tmux next-3.6",
            "tmux 3.4-rc",
            "screen 4.09",
            "tmux -3.3",
        ] {
            assert!(Version::parse(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn orders_versions() {
        let ascending = [
            "3.1c", "3.2", "3.2a", "3.3", "3.3a", "3.4", "3.5", "3.5a", "3.10",
        ];
        let parsed: Vec<Version> = ascending
            .iter()
            .map(|t| Version::parse(t).expect("parses"))
            .collect();
        for pair in parsed.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn remain_on_exit_format_from_3_3() {
        let has = |text: &str| {
            Tmux::with_version("/x/tmux", Version::parse(text).expect("parses"))
                .expect("supported")
                .has_remain_on_exit_format()
        };
        assert!(!has("tmux 3.2a"));
        assert!(has("tmux 3.3a"));
        assert!(has("tmux 3.4"));
        assert!(has("tmux 3.5a"));
    }

    #[test]
    fn refuses_old_tmux() {
        let err = Tmux::with_version("/x/tmux", Version::parse("tmux 3.1c").expect("parses"))
            .expect_err("3.1c is too old");
        insta::assert_snapshot!(err, @"tmux 3.1c at /x/tmux is too old: tmux-engine needs tmux 3.2 or newer");
        assert_eq!(err.code(), ErrorCode::TmuxTooOld);
        for text in ["tmux 3.2", "tmux 3.2a"] {
            let ok = Tmux::with_version("/x/tmux", Version::parse(text).expect("parses"))
                .expect("3.2 is supported");
            assert_eq!(ok.version(), Version::parse(text).expect("parses"));
        }
    }

    #[test]
    fn missing_binary_is_tmux_missing() {
        let err = Tmux::at("/nonexistent/dir/tmux").expect_err("no such file");
        assert_eq!(err.code(), ErrorCode::TmuxMissing);
        assert!(err.to_string().contains("/nonexistent/dir/tmux"), "{err}");
        let err = Tmux::find(OsStr::new("tmux-engine-no-such-binary"), Some(TMUX_ENV))
            .expect_err("not on PATH");
        assert_eq!(err.code(), ErrorCode::TmuxMissing);
        assert!(err.to_string().contains(TMUX_ENV), "{err}");
    }
}
