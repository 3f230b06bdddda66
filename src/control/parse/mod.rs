//! One control-mode line (`&[u8]`, no `\n`) to a typed [`Line`]; nom inside, no IO.
//!
//! [`parse_line`] dispatches on the `%name` of a line to one nom parser per
//! notification (named for it, its doc line showing the wire form). The
//! parsers are `complete` parsers over bytes: lines are not UTF-8 in general
//! (`%output` carries raw pane bytes). `%output` is checked first because it
//! is almost all of the traffic, and its data is sliced out of the line
//! without a copy unless it holds an escape. Framing, the line limit and
//! `%begin`..`%end` folding are the codec's job, not this module's; nom types
//! never leave it.

use bytes::{Bytes, BytesMut};
use nom::sequence::preceded;

use super::escape::{UNESCAPE_SLACK, unescape_output};
use super::layout::{Layout, layout_field};
use super::{Guard, GuardKind, Line, Notification, PaneId, SessionId, WindowId};

mod fields;

use crate::vocab::is_notification_name as is_name;
pub(crate) use crate::vocab::{ParseError, ParseErrorKind};
use fields::{
    PResult, colon_data, fail, later_fields, name_rest, number, or_dash, pane_id, run, session_id,
    sp, text_rest, utf8, window_id, word,
};

/// Unescaped `%output` data is written into shared chunks of this size, so
/// one allocation serves many lines (each line's `Bytes` keeps its chunk
/// alive; small enough that a held line pins little memory).
const SCRATCH_CHUNK: usize = 16 * 1024;

/// Parses one line without its `\n`.
///
/// `%output` data without a backslash is a zero-copy slice of `line`.
///
/// # Errors
/// A [`ParseError`] carrying the line when it starts with `%` and a known
/// notification name but its fields do not follow that notification's
/// grammar, or when `%` is not followed by a name. Unknown names are not
/// errors: they become [`Notification::Unknown`]. Lines not starting with
/// `%` are [`Line::Text`].
pub fn parse_line(line: &Bytes) -> Result<Line, ParseError> {
    parse_line_into(line, &mut BytesMut::new())
}

/// [`parse_line`] with a caller-kept buffer for unescaped output, so the
/// codec allocates once per [`SCRATCH_CHUNK`] rather than once per line.
pub(crate) fn parse_line_into(line: &Bytes, scratch: &mut BytesMut) -> Result<Line, ParseError> {
    dispatch(line, scratch).map_err(|kind| ParseError::new(kind, line.clone()))
}

/// A guard line (`%begin`/`%end`/`%error T N F`), or `None` for anything
/// else. The codec calls this on block content, where a line that merely
/// looks like a guard is body text, not an error.
pub(crate) fn parse_guard(line: &[u8]) -> Option<Guard> {
    let (kind, args) = if let Some(args) = line.strip_prefix(b"%end") {
        (GuardKind::End, args)
    } else if let Some(args) = line.strip_prefix(b"%error") {
        (GuardKind::Error, args)
    } else if let Some(args) = line.strip_prefix(b"%begin") {
        (GuardKind::Begin, args)
    } else {
        return None;
    };
    guard(kind, args).ok()
}

fn dispatch(line: &Bytes, scratch: &mut BytesMut) -> Result<Line, ParseErrorKind> {
    let b: &[u8] = line;
    // The hot path: nearly every line of a busy stream is `%output`.
    if let Some(args) = b.strip_prefix(b"%output")
        && args.first().is_none_or(|&c| c == b' ')
    {
        let (pane, data) = run(output, args)?;
        let data = data_bytes(line, data, scratch)?;
        return Ok(Line::Notification(Notification::Output { pane, data }));
    }
    let Some(after) = b.strip_prefix(b"%") else {
        return Ok(Line::Text(line.clone()));
    };
    let name_end = memchr::memchr(b' ', after).unwrap_or(after.len());
    let (name, args) = after.split_at(name_end);
    if !is_name(name) {
        return Err(ParseErrorKind::BadName);
    }
    let n = match name {
        b"begin" => return guard(GuardKind::Begin, args).map(Line::Guard),
        b"end" => return guard(GuardKind::End, args).map(Line::Guard),
        b"error" => return guard(GuardKind::Error, args).map(Line::Guard),
        b"extended-output" => {
            let (pane, age_ms, data) = run(extended_output, args)?;
            let data = data_bytes(line, data, scratch)?;
            Notification::ExtendedOutput { pane, age_ms, data }
        }
        b"pause" => run(pause, args)?,
        b"continue" => run(continue_, args)?,
        b"layout-change" => run(layout_change, args).map_err(|kind| match kind {
            ParseErrorKind::BadLayout { offset } => ParseErrorKind::BadLayout {
                offset: offset + line.len() - args.len(),
            },
            kind => kind,
        })?,
        b"window-add" => run(window_add, args)?,
        b"unlinked-window-add" => run(unlinked_window_add, args)?,
        b"window-close" => run(window_close, args)?,
        b"unlinked-window-close" => run(unlinked_window_close, args)?,
        b"window-renamed" => run(window_renamed, args)?,
        b"unlinked-window-renamed" => run(unlinked_window_renamed, args)?,
        b"window-pane-changed" => run(window_pane_changed, args)?,
        b"session-changed" => run(session_changed, args)?,
        b"client-session-changed" => run(client_session_changed, args)?,
        b"client-detached" => run(client_detached, args)?,
        b"session-renamed" => run(session_renamed, args)?,
        b"session-window-changed" => run(session_window_changed, args)?,
        b"sessions-changed" => run(sessions_changed, args)?,
        b"pane-mode-changed" => run(pane_mode_changed, args)?,
        b"subscription-changed" => {
            let (sub, value) = run(subscription_changed, args)?;
            Notification::SubscriptionChanged {
                name: sub.name,
                session: sub.session,
                window: sub.window,
                index: sub.index,
                pane: sub.pane,
                // Subscription values are the raw format expansion: no escaping.
                value: tail(line, value),
            }
        }
        b"exit" => run(exit, args)?,
        b"config-error" => run(config_error, args)?,
        b"message" => run(message, args)?,
        b"paste-buffer-changed" => run(paste_buffer_changed, args)?,
        b"paste-buffer-deleted" => run(paste_buffer_deleted, args)?,
        _ => Notification::Unknown {
            name: String::from_utf8_lossy(name).into_owned(),
            args: tail(line, args.strip_prefix(b" ").unwrap_or(args)),
        },
    };
    Ok(Line::Notification(n))
}

/// The end of `line` from where `field` starts; `field` must be a suffix of
/// `line` (every data field runs to the end of the line). Zero-copy.
fn tail(line: &Bytes, field: &[u8]) -> Bytes {
    line.slice(line.len().saturating_sub(field.len())..)
}

/// `%output` data as bytes: a slice of `line` when nothing is escaped,
/// otherwise unescaped into `scratch`.
fn data_bytes(line: &Bytes, data: &[u8], scratch: &mut BytesMut) -> Result<Bytes, ParseErrorKind> {
    if memchr::memchr(b'\\', data).is_none() {
        return Ok(tail(line, data));
    }
    // The unescaper wants a little slack past the data for its fixed-size
    // copies. `reserve` takes the chunk back in place once every `Bytes`
    // split off it was dropped (the usual case: consumers keep up), so the
    // memory is reused while still in cache; otherwise it starts a new one.
    let needed = data.len() + UNESCAPE_SLACK;
    if scratch.capacity() < needed {
        scratch.reserve(needed.max(SCRATCH_CHUNK));
    }
    match unescape_output(data, scratch) {
        Ok(()) => Ok(scratch.split().freeze()),
        Err(e) => {
            scratch.clear();
            Err(ParseErrorKind::BadEscape {
                offset: line.len() - data.len() + e.offset,
            })
        }
    }
}

// ---- one parser per line kind -------------------------------------------
// Each takes the arguments after the `%name`, starting with their space.

/// `%begin TIME NUMBER FLAGS` (also `%end`, `%error`): exactly three numbers.
fn guard(kind: GuardKind, args: &[u8]) -> Result<Guard, ParseErrorKind> {
    let triple = |i| -> PResult<'_, (i64, u32, u32)> {
        let (i, time) = preceded(sp("time"), number::<i64>("time"))(i)?;
        let (i, num) = preceded(sp("number"), number::<u32>("number"))(i)?;
        let (i, flags) = preceded(sp("flags"), number::<u32>("flags"))(i)?;
        Ok((i, (time, num, flags)))
    };
    match triple(args) {
        Ok((&[], (time, number, flags))) => Ok(Guard {
            kind,
            time,
            number,
            flags,
        }),
        _ => Err(ParseErrorKind::BadGuard),
    }
}

/// `%output %P DATA`
fn output(i: &[u8]) -> PResult<'_, (PaneId, &[u8])> {
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    // Empty data may come without its space; tmux never sends it, but it is
    // harmless to accept.
    let data = i.strip_prefix(b" ").unwrap_or(i);
    Ok((&data[data.len()..], (pane, data)))
}

/// `%extended-output %P AGE ... : DATA`
fn extended_output(i: &[u8]) -> PResult<'_, (PaneId, u64, &[u8])> {
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    let (i, age) = preceded(sp("age"), number::<u64>("age"))(i)?;
    let (i, data) = colon_data("\" : \" before the data")(i)?;
    Ok((i, (pane, age, data)))
}

/// `%pause %P`
fn pause(i: &[u8]) -> PResult<'_, Notification> {
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::Pause { pane }))
}

/// `%continue %P`
fn continue_(i: &[u8]) -> PResult<'_, Notification> {
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::Continue { pane }))
}

/// `%layout-change @W LAYOUT VISIBLE FLAGS` (FLAGS may be empty, leaving a
/// trailing space). tmux before 2.2 sent only `@W LAYOUT`; that is accepted
/// with the visible layout equal to the layout and no flags.
///
/// Layout error offsets are relative to `i`; the dispatcher makes them
/// relative to the line.
fn layout_change(i: &[u8]) -> PResult<'_, Notification> {
    let args = i;
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, layout) = preceded(sp("layout"), layout_at(args))(i)?;
    if i.is_empty() {
        let visible_layout = layout.clone();
        let flags = String::new();
        return Ok((
            i,
            Notification::LayoutChange {
                window,
                layout,
                visible_layout,
                flags,
            },
        ));
    }
    let (i, visible_layout) = preceded(sp("visible layout"), layout_at(args))(i)?;
    // FLAGS is the last field: `*`, `-`, `Z`... or nothing at all.
    let flags = i.strip_prefix(b" ").unwrap_or(i);
    let flags = utf8(flags, "flags")?;
    Ok((
        &i[i.len()..],
        Notification::LayoutChange {
            window,
            layout,
            visible_layout,
            flags,
        },
    ))
}

/// One layout field; `args` is the start of the arguments, for offsets.
fn layout_at(args: &[u8]) -> impl Fn(&[u8]) -> PResult<'_, Layout> + '_ {
    move |i| match layout_field(i) {
        Ok((layout, rest)) => Ok((rest, layout)),
        Err(e) => fail(ParseErrorKind::BadLayout {
            offset: args.len() - i.len() + e.offset,
        }),
    }
}

/// `%window-add @W`
fn window_add(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::WindowAdd { window }))
}

/// `%unlinked-window-add @W`
fn unlinked_window_add(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::UnlinkedWindowAdd { window }))
}

/// `%window-close @W`
fn window_close(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::WindowClose { window }))
}

/// `%unlinked-window-close @W`
fn unlinked_window_close(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::UnlinkedWindowClose { window }))
}

/// `%window-renamed @W NAME`
fn window_renamed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, name) = name_rest("window name")(i)?;
    Ok((i, Notification::WindowRenamed { window, name }))
}

/// `%unlinked-window-renamed @W NAME`
fn unlinked_window_renamed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, name) = name_rest("window name")(i)?;
    Ok((i, Notification::UnlinkedWindowRenamed { window, name }))
}

/// `%window-pane-changed @W %P`
fn window_pane_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::WindowPaneChanged { window, pane }))
}

/// `%session-changed $S NAME`
fn session_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, session) = preceded(sp("session id"), session_id)(i)?;
    let (i, name) = name_rest("session name")(i)?;
    Ok((i, Notification::SessionChanged { session, name }))
}

/// `%client-session-changed CLIENT $S NAME`
fn client_session_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, client) = preceded(sp("client name"), word("client name"))(i)?;
    let (i, session) = preceded(sp("session id"), session_id)(i)?;
    let (i, name) = name_rest("session name")(i)?;
    Ok((
        i,
        Notification::ClientSessionChanged {
            client,
            session,
            name,
        },
    ))
}

/// `%client-detached CLIENT`
fn client_detached(i: &[u8]) -> PResult<'_, Notification> {
    let (i, client) = preceded(sp("client name"), word("client name"))(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::ClientDetached { client }))
}

/// `%session-renamed $S NAME`
fn session_renamed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, session) = preceded(sp("session id"), session_id)(i)?;
    let (i, name) = name_rest("session name")(i)?;
    Ok((i, Notification::SessionRenamed { session, name }))
}

/// `%session-window-changed $S @W`
fn session_window_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, session) = preceded(sp("session id"), session_id)(i)?;
    let (i, window) = preceded(sp("window id"), window_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::SessionWindowChanged { session, window }))
}

/// `%sessions-changed`
fn sessions_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::SessionsChanged))
}

/// `%pane-mode-changed %P`
fn pane_mode_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, pane) = preceded(sp("pane id"), pane_id)(i)?;
    let (i, ()) = later_fields(i)?;
    Ok((i, Notification::PaneModeChanged { pane }))
}

/// The fixed fields of a subscription line, before its value.
struct Subscription {
    name: String,
    session: SessionId,
    window: Option<WindowId>,
    index: Option<u32>,
    pane: Option<PaneId>,
}

/// `%subscription-changed NAME $S @W|- IDX|- %P|- ... : VALUE`
fn subscription_changed(i: &[u8]) -> PResult<'_, (Subscription, &[u8])> {
    let (i, name) = preceded(sp("subscription name"), word("subscription name"))(i)?;
    let (i, session) = preceded(sp("session id"), session_id)(i)?;
    let (i, window) = preceded(sp("window id"), or_dash(window_id))(i)?;
    let (i, index) = preceded(sp("window index"), or_dash(number::<u32>("window index")))(i)?;
    let (i, pane) = preceded(sp("pane id"), or_dash(pane_id))(i)?;
    let (i, value) = colon_data("\" : \" before the value")(i)?;
    let sub = Subscription {
        name,
        session,
        window,
        index,
        pane,
    };
    Ok((i, (sub, value)))
}

/// `%exit [REASON]`
fn exit(i: &[u8]) -> PResult<'_, Notification> {
    let (i, reason) = text_rest(i)?;
    let reason = (!reason.is_empty()).then_some(reason);
    Ok((i, Notification::Exit { reason }))
}

/// `%config-error TEXT`
fn config_error(i: &[u8]) -> PResult<'_, Notification> {
    let (i, text) = text_rest(i)?;
    Ok((i, Notification::ConfigError { text }))
}

/// `%message TEXT`
fn message(i: &[u8]) -> PResult<'_, Notification> {
    let (i, text) = text_rest(i)?;
    Ok((i, Notification::Message { text }))
}

/// `%paste-buffer-changed NAME`
fn paste_buffer_changed(i: &[u8]) -> PResult<'_, Notification> {
    let (i, name) = text_rest(i)?;
    Ok((i, Notification::PasteBufferChanged { name }))
}

/// `%paste-buffer-deleted NAME`
fn paste_buffer_deleted(i: &[u8]) -> PResult<'_, Notification> {
    let (i, name) = text_rest(i)?;
    Ok((i, Notification::PasteBufferDeleted { name }))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
