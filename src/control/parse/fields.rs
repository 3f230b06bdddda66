//! The nom plumbing and field parsers the per-notification parsers are
//! built from: ids, numbers, names, and the `... : data` tail. Each field
//! parser reports which field was bad through [`Fail`], so errors name it.

use nom::IResult;
use nom::bytes::complete::take_till;
use nom::combinator::rest;
use nom::sequence::preceded;

use super::ParseErrorKind;
use crate::control::{PaneId, SessionId, WindowId};

/// The parsers' error: our kind, so the caller learns which field was bad.
#[derive(Debug)]
pub(super) struct Fail(pub(super) ParseErrorKind);

impl<'a> nom::error::ParseError<&'a [u8]> for Fail {
    fn from_error_kind(_: &'a [u8], _: nom::error::ErrorKind) -> Self {
        // Only reached by a library combinator failing without one of our
        // field parsers naming the field; none of ours let that happen.
        Fail(ParseErrorKind::MissingField { field: "field" })
    }

    fn append(_: &'a [u8], _: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

pub(super) type PResult<'a, T> = IResult<&'a [u8], T, Fail>;

pub(super) fn fail<T>(kind: ParseErrorKind) -> Result<T, nom::Err<Fail>> {
    Err(nom::Err::Error(Fail(kind)))
}

/// Runs a notification parser over the arguments (everything after the
/// name, starting with its space).
pub(super) fn run<'a, T>(
    mut parser: impl FnMut(&'a [u8]) -> PResult<'a, T>,
    args: &'a [u8],
) -> Result<T, ParseErrorKind> {
    match parser(args) {
        Ok((_, value)) => Ok(value),
        Err(nom::Err::Error(Fail(kind)) | nom::Err::Failure(Fail(kind))) => Err(kind),
        // `complete` parsers never ask for more input.
        Err(nom::Err::Incomplete(_)) => Err(ParseErrorKind::MissingField { field: "field" }),
    }
}

/// Splits off the next space-delimited token (possibly empty).
pub(super) fn token(i: &[u8]) -> PResult<'_, &[u8]> {
    take_till(|b| b == b' ')(i)
}

/// The single space before a field; its absence means the field is missing.
pub(super) fn sp(field: &'static str) -> impl Fn(&[u8]) -> PResult<'_, ()> {
    move |i: &[u8]| match i.split_first() {
        Some((b' ', rest)) => Ok((rest, ())),
        _ => fail(ParseErrorKind::MissingField { field }),
    }
}

/// A decimal number of at most 20 digits, no sign; `None` on overflow.
pub(super) fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        } else {
            None
        }
    })
}

/// A whole token that is a decimal number fitting `T`.
pub(super) fn number<T: TryFrom<u64>>(field: &'static str) -> impl Fn(&[u8]) -> PResult<'_, T> {
    move |i: &[u8]| {
        let (rest, tok) = token(i)?;
        if tok.is_empty() {
            return fail(ParseErrorKind::MissingField { field });
        }
        match decimal(tok).and_then(|n| T::try_from(n).ok()) {
            Some(n) => Ok((rest, n)),
            None => fail(ParseErrorKind::BadNumber { field }),
        }
    }
}

/// A whole token that is `sigil` followed by a `u32`, as tmux writes ids.
pub(super) fn id(sigil: u8, field: &'static str) -> impl Fn(&[u8]) -> PResult<'_, u32> {
    move |i: &[u8]| {
        let (rest, tok) = token(i)?;
        match tok.split_first() {
            None => fail(ParseErrorKind::MissingField { field }),
            Some((&s, digits)) if s == sigil => {
                match decimal(digits).and_then(|n| u32::try_from(n).ok()) {
                    Some(n) => Ok((rest, n)),
                    None => fail(ParseErrorKind::BadId { field }),
                }
            }
            Some(_) => fail(ParseErrorKind::BadId { field }),
        }
    }
}

/// `%3`
pub(super) fn pane_id(i: &[u8]) -> PResult<'_, PaneId> {
    let (i, n) = id(b'%', "pane id")(i)?;
    Ok((i, PaneId(n)))
}

/// `@1`
pub(super) fn window_id(i: &[u8]) -> PResult<'_, WindowId> {
    let (i, n) = id(b'@', "window id")(i)?;
    Ok((i, WindowId(n)))
}

/// `$0`
pub(super) fn session_id(i: &[u8]) -> PResult<'_, SessionId> {
    let (i, n) = id(b'$', "session id")(i)?;
    Ok((i, SessionId(n)))
}

/// `-` for "none", else whatever `inner` parses.
pub(super) fn or_dash<'a, T>(
    inner: impl Fn(&'a [u8]) -> PResult<'a, T>,
) -> impl Fn(&'a [u8]) -> PResult<'a, Option<T>> {
    move |i: &'a [u8]| match i.strip_prefix(b"-") {
        Some(rest) if rest.first().is_none_or(|&b| b == b' ') => Ok((rest, None)),
        _ => inner(i).map(|(rest, v)| (rest, Some(v))),
    }
}

/// A space-free token that tmux writes as UTF-8 (client and subscription
/// names).
pub(super) fn word(field: &'static str) -> impl Fn(&[u8]) -> PResult<'_, String> {
    move |i: &[u8]| {
        let (rest, tok) = token(i)?;
        if tok.is_empty() {
            return fail(ParseErrorKind::MissingField { field });
        }
        utf8(tok, field).map(|s| (rest, s))
    }
}

pub(super) fn utf8(b: &[u8], field: &'static str) -> Result<String, nom::Err<Fail>> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => fail(ParseErrorKind::NotUtf8 { field }),
    }
}

/// `[ SP rest]`: a name that runs to the end of the line (it may hold
/// spaces, and may be empty). tmux vis-encodes session and window names, so
/// they are UTF-8.
pub(super) fn name_rest(field: &'static str) -> impl Fn(&[u8]) -> PResult<'_, String> {
    move |i: &[u8]| {
        let name = i.strip_prefix(b" ").unwrap_or(i);
        utf8(name, field).map(|s| (&i[i.len()..], s))
    }
}

/// `[ SP rest]` as text; invalid UTF-8 is replaced, because free text
/// (reasons, config errors, buffer names) is not vis-encoded by tmux and is
/// still worth showing.
pub(super) fn text_rest(i: &[u8]) -> PResult<'_, String> {
    let (end, all) = rest(i)?;
    let text = all.strip_prefix(b" ").unwrap_or(all);
    Ok((end, String::from_utf8_lossy(text).into_owned()))
}

/// Fields a later tmux may append after the ones we know; ignored so a new
/// release does not turn known notifications into errors.
pub(super) fn later_fields(i: &[u8]) -> PResult<'_, ()> {
    let (i, _) = rest(i)?;
    Ok((i, ()))
}

/// `*(SP token) SP ":" [SP data]`: skips "future use" tokens up to the lone
/// `:`, then returns everything after it and its space (the data may itself
/// contain ` : `).
pub(super) fn colon_data<'a>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, &'a [u8]> {
    move |mut i: &'a [u8]| loop {
        let (rest, tok) = preceded(sp(field), token)(i)?;
        if tok == b":" {
            let data = rest.strip_prefix(b" ").unwrap_or(rest);
            return Ok((&data[data.len()..], data));
        }
        i = rest;
    }
}
