//! Identities: owners ([`OwnerId`]), terminals ([`TerminalId`]), and the
//! checks on user-chosen terminal names.
//!
//! Ids are validated on construction (and on deserialization), so every
//! value of these types is safe to use as a file name or tmux target.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::hidden_char;
use crate::{Error, Result};

pub(crate) use super::MAX_NAME_LEN;

/// The longest owner id, in bytes.
pub const MAX_OWNER_LEN: usize = 256;

/// Who a terminal belongs to: an agent, a user, a test.
///
/// Any non-empty string without control characters (at most
/// 256 bytes). An owner needs no registration: its
/// handle is [`Registry::owner`](crate::registry::Registry::owner).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct OwnerId(String);

impl OwnerId {
    /// Checks and wraps an owner id.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `id` is empty, too long or has control
    /// characters.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        if id.is_empty() {
            return Err(Error::InvalidInput("owner id must be non-empty".to_owned()));
        }
        if id.len() > MAX_OWNER_LEN {
            return Err(Error::InvalidInput(format!(
                "owner id {id:?} is {} bytes, over the {MAX_OWNER_LEN}-byte limit",
                id.len()
            )));
        }
        if id.chars().any(char::is_control) {
            return Err(Error::InvalidInput(format!(
                "owner id {id:?} contains a control character"
            )));
        }
        Ok(OwnerId(id))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OwnerId {
    type Error = Error;

    fn try_from(id: String) -> Result<Self> {
        OwnerId::new(id)
    }
}

impl From<OwnerId> for String {
    fn from(id: OwnerId) -> String {
        id.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A terminal's opaque identity, minted by the registry.
///
/// The form is `t-<unix millis, hex>-<64 random bits, hex>`: unique across
/// engine restarts and processes sharing a state directory, and safe as a
/// file name and a tmux session name. Callers should treat it as opaque.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct TerminalId(String);

impl TerminalId {
    /// Mints a fresh id from the clock and the operating system's random
    /// source.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the random source fails.
    pub(crate) fn mint() -> Result<Self> {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        let random = getrandom::u64().map_err(|error| {
            Error::io(
                "reading random bytes for a terminal id",
                std::io::Error::other(error.to_string()),
            )
        })?;
        Ok(TerminalId(format!("t-{millis:x}-{random:016x}")))
    }

    /// Checks that `id` has the form of a registry-minted id.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the value otherwise.
    pub fn parse(id: &str) -> Result<Self> {
        let valid = id
            .strip_prefix("t-")
            .and_then(|rest| rest.split_once('-'))
            .is_some_and(|(time, random)| {
                !time.is_empty()
                    && time.len() <= 32
                    && random.len() == 16
                    && time.bytes().all(|byte| byte.is_ascii_hexdigit())
                    && random.bytes().all(|byte| byte.is_ascii_hexdigit())
            });
        if valid {
            Ok(TerminalId(id.to_owned()))
        } else {
            Err(Error::InvalidInput(format!("{id:?} is not a terminal id")))
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TerminalId {
    type Error = Error;

    fn try_from(id: String) -> Result<Self> {
        TerminalId::parse(&id)
    }
}

impl From<TerminalId> for String {
    fn from(id: TerminalId) -> String {
        id.0
    }
}

impl AsRef<str> for TerminalId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TerminalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a user-chosen terminal name: non-empty, at most [`MAX_NAME_LEN`]
/// bytes, nothing invisible (control, bidi or other format characters:
/// [`hidden_char`]), no `:` or `.` (tmux target separators), and not the
/// shape of a [`TerminalId`]: every lookup takes a target as an id first,
/// so a name that looked like another terminal's id would let a kill or a
/// send meant for that terminal reach this one (or the other way round).
///
/// Every face reaches this one check through [`SpawnSpec::validate`]
/// (the CLI, the HTTP bridge, MCP, the library).
///
/// # Errors
///
/// [`Error::InvalidInput`] naming the value and the rule it breaks.
///
/// [`SpawnSpec::validate`]: super::SpawnSpec::validate
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidInput(
            "terminal name must be non-empty".to_owned(),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidInput(format!(
            "terminal name {name:?} is {} bytes, over the {MAX_NAME_LEN}-byte limit",
            name.len()
        )));
    }
    if let Some(c) = hidden_char(name) {
        let kind = if c.is_control() {
            "a control character"
        } else {
            "an invisible format character"
        };
        return Err(Error::InvalidInput(format!(
            "terminal name {name:?} contains {kind} (U+{:04X})",
            u32::from(c)
        )));
    }
    if let Some(bad) = name.chars().find(|c| matches!(c, ':' | '.')) {
        return Err(Error::InvalidInput(format!(
            "terminal name {name:?} contains {bad:?}, which tmux reads as a target separator"
        )));
    }
    if TerminalId::parse(name).is_ok() {
        return Err(Error::InvalidInput(format!(
            "terminal name {name:?} has the shape of a terminal id (t-TIME-RANDOM); ids are the registry's"
        )));
    }
    Ok(())
}

/// A fresh output-stream epoch: random and never 0 (0 means "none known"
/// where a relay is asked for an offset), so two streams, of one process or
/// two, of one server or its successor, do not share one. A clock-derived
/// fallback keeps cursors working (less unique) should the OS refuse
/// randomness.
pub(crate) fn stream_epoch() -> u64 {
    let drawn = getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        u64::try_from(nanos % u128::from(u64::MAX)).unwrap_or(1) ^ u64::from(std::process::id())
    });
    drawn.max(1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_parse_and_differ() {
        let first = TerminalId::mint().unwrap();
        let second = TerminalId::mint().unwrap();
        assert_ne!(first, second);
        assert_eq!(TerminalId::parse(first.as_str()).unwrap(), first);
        assert!(first.as_str().starts_with("t-"));
    }

    #[test]
    fn terminal_id_parse_rejects_other_shapes() {
        for bad in [
            "",
            "t-",
            "pty-1",
            "t-1-2",
            "t-zz-0123456789abcdef",
            "t-1-0123456789abcdeg",
            "t-1-0123456789abcdef/..",
            "../t-1-0123456789abcdef",
        ] {
            let error = TerminalId::parse(bad).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad}");
            assert!(error.to_string().contains(&format!("{bad:?}")));
        }
    }

    #[test]
    fn names_follow_the_rules() {
        for good in [
            "main",
            "a b",
            "ünï",
            "x".repeat(MAX_NAME_LEN).as_str(),
            "-x",
            "t-1",
            "t-main-0123456789abcdef",
            "t-1a2308edac7-b10a309c95b89d5",
        ] {
            validate_name(good).unwrap();
        }
        let cases = [
            ("", "must be non-empty"),
            ("a:b", "':'"),
            ("a.b", "'.'"),
            ("a\nb", "control character"),
            ("a\u{7f}", "control character"),
            ("a\0", "control character"),
            ("a\u{202E}b", "invisible format character (U+202E)"),
            ("\u{2066}x\u{2069}", "U+2066"),
            ("a\u{200B}", "U+200B"),
            ("\u{FEFF}a", "U+FEFF"),
            ("a\u{200E}", "U+200E"),
            ("a\u{61C}", "U+061C"),
            ("t-1a2308edac7-b10a309c95b89d50", "shape of a terminal id"),
            ("t-0-0000000000000000", "shape of a terminal id"),
        ];
        for (bad, expected) in cases {
            let error = validate_name(bad).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT");
            assert!(error.to_string().contains(expected), "{error}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert!(
            validate_name(&long)
                .unwrap_err()
                .to_string()
                .contains("65 bytes")
        );
    }

    #[test]
    fn owner_ids_are_checked() {
        assert_eq!(OwnerId::new("agent-1").unwrap().as_str(), "agent-1");
        assert_eq!(OwnerId::new("").unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(OwnerId::new("a\tb").unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(
            OwnerId::new("x".repeat(MAX_OWNER_LEN + 1))
                .unwrap_err()
                .code(),
            "INVALID_INPUT"
        );
        assert!(serde_json::from_str::<OwnerId>("\"\"").is_err());
    }
}
