//! A verb's arguments as a face received them ([`Arguments`]), and their
//! one way into the verb's request type: serde for JSON and queries, a
//! downcast for a request a face built itself. Nothing here knows a verb.

use std::any::Any;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// A verb's arguments as a face received them.
pub enum Arguments {
    /// A JSON object: MCP's arguments, an HTTP body.
    Json(Map<String, Value>),
    /// A `key=value&...` query (an HTTP `GET`), every value a string.
    Query(Vec<(String, String)>),
    /// A request already built as its verb's type: the CLI's flags, which
    /// clap read and its own conversions checked (`--stdin`'s bytes, which
    /// JSON cannot carry, included).
    Typed(Box<dyn Any + Send>),
}

impl std::fmt::Debug for Arguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arguments::Json(fields) => f.debug_tuple("Json").field(fields).finish(),
            Arguments::Query(pairs) => f.debug_tuple("Query").field(pairs).finish(),
            Arguments::Typed(_) => f.write_str("Typed(..)"),
        }
    }
}

impl Arguments {
    /// A request a face built as its verb's type.
    pub fn typed<T: Any + Send>(request: T) -> Arguments {
        Arguments::Typed(Box::new(request))
    }

    /// The request these arguments spell.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming what does not fit (a typed request of
    /// another verb's type included).
    pub fn parse<T: DeserializeOwned + 'static>(self) -> Result<T> {
        match self {
            Arguments::Json(mut fields) => {
                fields.values_mut().for_each(whole_numbers);
                serde_json::from_value(Value::Object(fields))
                    .map_err(|e| Error::InvalidInput(format!("request body: {e}")))
            }
            Arguments::Query(pairs) => {
                let query = serde_urlencoded::to_string(pairs)
                    .map_err(|e| Error::InvalidInput(format!("query: {e}")))?;
                serde_urlencoded::from_str(&query)
                    .map_err(|e| Error::InvalidInput(format!("query: {e}")))
            }
            Arguments::Typed(request) => request.downcast::<T>().map(|r| *r).map_err(|_| {
                Error::InvalidInput(format!(
                    "the request is not a {}",
                    std::any::type_name::<T>()
                ))
            }),
        }
    }

    /// The same arguments naming `terminal` (a route's `{t}`).
    ///
    /// # Errors
    /// `INVALID_INPUT` when they name one already: the path names it (a
    /// typed request always does).
    pub fn with_terminal(mut self, terminal: String) -> Result<Arguments> {
        let named = match &self {
            Arguments::Json(fields) => fields.contains_key("terminal"),
            Arguments::Query(pairs) => pairs.iter().any(|(key, _)| key == "terminal"),
            Arguments::Typed(_) => true,
        };
        if named {
            return Err(Error::InvalidInput(
                "the terminal is named by the path, not by a terminal field".to_owned(),
            ));
        }
        match &mut self {
            Arguments::Json(fields) => {
                fields.insert("terminal".to_owned(), Value::String(terminal));
            }
            Arguments::Query(pairs) => pairs.push(("terminal".to_owned(), terminal)),
            Arguments::Typed(_) => {}
        }
        Ok(self)
    }

    /// The length of a JSON `text` field (what a send types), for the
    /// audit's count: `None` where there is none.
    pub(crate) fn text_len(&self) -> Option<u64> {
        match self {
            Arguments::Json(fields) => fields
                .get("text")
                .and_then(Value::as_str)
                .map(|text| text.len() as u64),
            _ => None,
        }
    }
}

/// Numbers with no fraction (`12402.0`) made integers, in place: JSON
/// Schema's `integer` takes them (a number is an integer by its value),
/// and so must the fields the schemas call integers; a float field reads
/// an integer as well.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(number) if number.is_f64() => {
            if let Some(float) = number.as_f64()
                && float.fract() == 0.0
                && float.abs() < 9.0e15
            {
                // Below 2^53, where every integer is exact.
                #[allow(clippy::cast_possible_truncation)]
                let whole = float as i64;
                *value = Value::from(whole);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::verbs::ReadRequest;

    /// A query spells numbers and enums as strings; the request types
    /// read them as the JSON face does.
    #[test]
    fn a_query_parses_into_the_request_type() {
        let query = |pairs: &[(&str, &str)]| {
            Arguments::Query(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        };
        let read: ReadRequest = query(&[("since", "1:2"), ("format", "bytes")])
            .with_terminal("t".to_owned())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(read.terminal, "t");
        assert_eq!(read.format, Some(crate::verbs::ReadFormat::Bytes));
        let read: ReadRequest = query(&[("count", "5"), ("offset", "2")])
            .with_terminal("t".to_owned())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!((read.count, read.offset), (Some(5), 2));
        for bad in [
            &[("count", "ten")][..],
            &[("format", "words")][..],
            &[("bogus", "1")][..],
        ] {
            let error = query(bad)
                .with_terminal("t".to_owned())
                .unwrap()
                .parse::<ReadRequest>()
                .unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
        }
        let named = query(&[("terminal", "u")]).with_terminal("t".to_owned());
        assert_eq!(named.unwrap_err().code(), "INVALID_INPUT");
    }

    /// A typed request comes back as itself, or as `INVALID_INPUT` when
    /// it is another verb's type.
    #[test]
    fn a_typed_request_comes_back_as_its_type() {
        let request = crate::verbs::TerminalRequest {
            terminal: "t".to_owned(),
        };
        let back: crate::verbs::TerminalRequest =
            Arguments::typed(request.clone()).parse().unwrap();
        assert_eq!(back, request);
        let error = Arguments::typed(request)
            .parse::<ReadRequest>()
            .unwrap_err();
        assert_eq!(error.code(), "INVALID_INPUT");
    }
}
