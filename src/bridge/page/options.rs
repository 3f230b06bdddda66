//! The page's client options (`serve --page-option KEY=VALUE`): the
//! defaults a deployment sets for font, theme, cursor and scrollback, as
//! ttyd's `-t` does. The page applies them under a person's own choices
//! (kept in `localStorage`) and the URL's query, and checks those against
//! the same table in `web/app.js`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{Error, Result};

/// What a value must be.
enum Kind {
    /// An integer in `min..=max`.
    Integer { min: u64, max: u64 },
    /// One of these words.
    Word(&'static [&'static str]),
    /// Text of 1 to 200 characters, no control characters.
    Text,
}

/// Every option, under the name the page (and its URL query) uses.
const OPTIONS: &[(&str, Kind)] = &[
    ("fontSize", Kind::Integer { min: 6, max: 72 }),
    ("fontFamily", Kind::Text),
    ("theme", Kind::Word(&["dark", "light", "solarized"])),
    ("cursorStyle", Kind::Word(&["block", "underline", "bar"])),
    ("cursorBlink", Kind::Word(&["true", "false"])),
    (
        "scrollback",
        Kind::Integer {
            min: 0,
            max: 100_000,
        },
    ),
    ("clipboardWrite", Kind::Word(&["ask", "allow", "deny"])),
];

/// The page's default options, each checked when set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageOptions(BTreeMap<&'static str, Value>);

impl PageOptions {
    /// Sets one option from `KEY=VALUE`.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the key and what it takes: no `=`, an
    /// unknown key, or a value out of its range or set.
    pub fn set(&mut self, assignment: &str) -> Result<()> {
        let known = || {
            OPTIONS
                .iter()
                .map(|(key, _)| *key)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(Error::InvalidInput(format!(
                "page option {assignment:?}: expected KEY=VALUE (keys: {})",
                known()
            )));
        };
        let Some((key, kind)) = OPTIONS.iter().find(|(name, _)| *name == key) else {
            return Err(Error::InvalidInput(format!(
                "unknown page option {key:?} (keys: {})",
                known()
            )));
        };
        let bad =
            |wants: String| Error::InvalidInput(format!("page option {key}={value:?}: {wants}"));
        let value = match kind {
            Kind::Integer { min, max } => match value.parse::<u64>() {
                Ok(n) if (*min..=*max).contains(&n) => Value::from(n),
                _ => return Err(bad(format!("expected an integer from {min} to {max}"))),
            },
            Kind::Word(words) if words.contains(&value) => match value {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                word => Value::from(word),
            },
            Kind::Word(words) => return Err(bad(format!("expected one of {}", words.join(", ")))),
            Kind::Text => {
                let chars = value.chars().count();
                if chars == 0 || chars > 200 || value.chars().any(char::is_control) {
                    return Err(bad(
                        "expected 1 to 200 characters, no control characters".to_owned()
                    ));
                }
                Value::from(value)
            }
        };
        self.0.insert(key, value);
        Ok(())
    }

    /// No option set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The options as one JSON object, for the page.
    pub(super) fn to_json(&self) -> String {
        Value::Object(
            self.0
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect(),
        )
        .to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn options_are_checked_and_typed() {
        let mut options = PageOptions::default();
        for good in [
            "fontSize=16",
            "theme=light",
            "cursorStyle=bar",
            "cursorBlink=false",
            "scrollback=0",
            "fontFamily=DejaVu Sans Mono, monospace",
        ] {
            options.set(good).unwrap();
        }
        assert_eq!(
            options.to_json(),
            r#"{"cursorBlink":false,"cursorStyle":"bar","fontFamily":"DejaVu Sans Mono, monospace","fontSize":16,"scrollback":0,"theme":"light"}"#
        );
        for (bad, says) in [
            ("fontSize", "expected KEY=VALUE"),
            ("colour=red", "unknown page option \"colour\""),
            ("fontSize=5", "from 6 to 72"),
            ("fontSize=big", "from 6 to 72"),
            ("theme=pink", "one of dark, light, solarized"),
            ("cursorBlink=yes", "one of true, false"),
            ("fontFamily=", "1 to 200 characters"),
            ("fontFamily=a\u{7}b", "no control characters"),
            ("scrollback=100001", "from 0 to 100000"),
        ] {
            let error = options.set(bad).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidInput, "{bad}");
            assert!(error.to_string().contains(says), "{bad}: {error}");
        }
    }
}
