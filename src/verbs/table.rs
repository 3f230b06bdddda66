//! The one verb table ([`VERBS`]): each verb a client can ask for is
//! declared here once, with its request and answer types, whether it
//! changes anything, its HTTP route, its CLI word, its MCP tool and the
//! words that describe it. The MCP tools (`mcp/tools.rs`) and the HTTP
//! routes and OpenAPI document (`bridge/openapi.rs`) are built by iterating
//! it, so a verb is served, described and checked the same way everywhere;
//! the CLI runs its verbs through the same entries (`cli/verbs.rs`).
//!
//! Adding a verb: its function (`run.rs`; its request type in
//! `requests.rs` when none fits), one entry here, and its clap variant
//! with its line in `TerminalCommand::table_call` (`cli/args.rs`).

use std::future::Future;
use std::pin::Pin;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::answers::{KillAnswer, ReadAnswer, SendAnswer, WaitAnswer};
use super::commands::CommandsRequest;
use super::requests::{
    ListRequest, ReadRequest, RenameRequest, SendRequest, SignalRequest, SpawnRequest,
    TerminalRequest, WaitRequest,
};
use super::search::{SearchAnswer, SearchRequest};
use super::{commands, run, search};
use crate::registry::{CommandsAnswer, Owned, SignalDelivery, TerminalSnapshot};
use crate::screen::Screen;
use crate::{Error, Result};

/// A type's JSON Schema under the given settings (each face picks its
/// draft and whether to inline).
pub(crate) type SchemaFn = fn(SchemaSettings) -> Schema;

/// A verb run from its arguments to its answer as JSON.
pub(crate) type RunFn =
    for<'a> fn(Owned<'a>, Arguments) -> Pin<Box<dyn Future<Output = Result<Value>> + Send + 'a>>;

/// A verb's HTTP route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// `GET`, `POST` or `DELETE`; a `GET` or `DELETE` takes its arguments
    /// from the query, a `POST` from its JSON body.
    pub method: &'static str,
    /// axum's syntax; `{t}` is the terminal (id or name), which the
    /// arguments then must not name.
    pub path: &'static str,
    /// The status of a success.
    pub status: u16,
}

/// One verb, declared once for every face.
#[derive(Debug, Clone, Copy)]
pub struct Verb {
    /// The verb (`read`); the OpenAPI `operationId`.
    pub name: &'static str,
    /// The CLI's subcommand.
    pub cli: &'static str,
    /// The MCP tool's name.
    pub tool: &'static str,
    /// The HTTP route, if the verb has one.
    pub route: Option<Route>,
    /// It changes nothing (MCP `readOnlyHint`; a read-only token may call it).
    pub read_only: bool,
    /// It may destroy something (MCP `destructiveHint`).
    pub destructive: bool,
    /// Calling it twice does what once does (MCP `idempotentHint`).
    pub idempotent: bool,
    /// It reaches beyond the engine's own state (MCP `openWorldHint`).
    pub open_world: bool,
    /// One line: the route's summary.
    pub summary: &'static str,
    /// The whole story, with the real defaults: the tool's description
    /// and the route's.
    pub description: &'static str,
    /// The request's schema.
    pub request: SchemaFn,
    /// The answer's schema.
    pub answer: SchemaFn,
    /// Whether `arguments` fit the request type (unknown, missing or
    /// mistyped fields), without running anything.
    pub check: fn(&Map<String, Value>) -> std::result::Result<(), serde_json::Error>,
    /// Runs the verb.
    pub run: RunFn,
}

/// A verb's arguments as a face received them.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// A JSON object: MCP's arguments, an HTTP body, the CLI's flags.
    Json(Map<String, Value>),
    /// A `key=value&...` query (an HTTP `GET`), every value a string.
    Query(Vec<(String, String)>),
}

impl Arguments {
    /// The request these arguments spell.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming what does not fit.
    pub fn parse<T: DeserializeOwned>(self) -> Result<T> {
        match self {
            Arguments::Json(fields) => serde_json::from_value(Value::Object(fields))
                .map_err(|e| Error::InvalidInput(format!("request body: {e}"))),
            Arguments::Query(pairs) => {
                let query = serde_urlencoded::to_string(pairs)
                    .map_err(|e| Error::InvalidInput(format!("query: {e}")))?;
                serde_urlencoded::from_str(&query)
                    .map_err(|e| Error::InvalidInput(format!("query: {e}")))
            }
        }
    }

    /// The same arguments naming `terminal` (a route's `{t}`).
    ///
    /// # Errors
    /// `INVALID_INPUT` when they name one already: the path names it.
    pub fn with_terminal(mut self, terminal: String) -> Result<Arguments> {
        let named = match &self {
            Arguments::Json(fields) => fields.contains_key("terminal"),
            Arguments::Query(pairs) => pairs.iter().any(|(key, _)| key == "terminal"),
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
        }
        Ok(self)
    }
}

fn schema<T: JsonSchema>(settings: SchemaSettings) -> Schema {
    settings.into_generator().into_root_schema_for::<T>()
}

fn check<T: DeserializeOwned>(
    arguments: &Map<String, Value>,
) -> std::result::Result<(), serde_json::Error> {
    T::deserialize(serde::de::IntoDeserializer::into_deserializer(arguments)).map(drop)
}

fn json(answer: impl Serialize) -> Result<Value> {
    serde_json::to_value(answer)
        .map_err(|e| Error::io("encoding an answer", std::io::Error::other(e)))
}

const TERMINAL: &str = "/api/terminals/{t}";

/// The route `method path`, answering `status` on success.
const fn at(method: &'static str, path: &'static str, status: u16) -> Option<Route> {
    Some(Route {
        method,
        path,
        status,
    })
}

/// Every verb the faces share, in the order they are listed.
pub static VERBS: &[Verb] = &[
    Verb {
        name: "spawn",
        cli: "spawn",
        tool: "terminal_spawn",
        route: at("POST", "/api/terminals", 201),
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
        summary: "Start a terminal; its snapshot.",
        description: "Start a persistent terminal (a shell unless `command` is given; its words \
                      are executed exactly, not through a shell). It keeps running across \
                      restarts of this server. Returns its snapshot: id, name, status, pid, \
                      restart policy.",
        request: schema::<SpawnRequest>,
        answer: schema::<TerminalSnapshot>,
        check: check::<SpawnRequest>,
        run: |owned, args| Box::pin(async move { json(run::spawn(owned, args.parse()?).await?) }),
    },
    Verb {
        name: "list",
        cli: "list",
        tool: "terminal_list",
        route: at("GET", "/api/terminals", 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "Your terminals in creation order, as snapshots.",
        description: "List your terminals in creation order, as snapshots (id, name, status, \
                      pid).",
        request: schema::<ListRequest>,
        answer: schema::<Vec<TerminalSnapshot>>,
        check: check::<ListRequest>,
        run: |owned, args| Box::pin(async move { json(run::list(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "show",
        cli: "show",
        tool: "terminal_show",
        route: at("GET", TERMINAL, 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "One terminal's snapshot.",
        description: "One terminal's snapshot (id, name, status, pid, restart policy).",
        request: schema::<TerminalRequest>,
        answer: schema::<TerminalSnapshot>,
        check: check::<TerminalRequest>,
        run: |owned, args| Box::pin(async move { json(run::show(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "send",
        cli: "send",
        tool: "terminal_send",
        route: at("POST", "/api/terminals/{t}/send", 200),
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
        summary: "Type text and wait (default `command`: until every command of it ended and \
                  the prompt is back); {output, exit_code, commands, wait_reason, typed, \
                  status, truncated}.",
        description: "Type text into a terminal (with `submit`, press Enter after it) and wait \
                      until the program is done with it (`wait`: command, the default, types at \
                      the shell's prompt or into a program reading the terminal, and waits \
                      until every command of the text ended and the prompt is back; without \
                      the engine's shell integration it waits as stdin: until the program \
                      waits for input again). Returns {output, exit_code, commands, \
                      wait_reason, typed, status, truncated}: the output it produced, escape \
                      sequences stripped (all its commands'); `exit_code` is the last \
                      command's; `commands` lists each command the shell ran (text, \
                      exit_code, duration_secs, cursors); `wait_reason` is command, \
                      stdin_read (a program reads the terminal), busy (it waits on other \
                      files, e.g. a server), idle, exited, timeout or cancelled; `typed: \
                      false` (with `not_typed_reason`) when the text could not be typed by \
                      the deadline (`timeout_secs`, default 30): it is then never typed. The \
                      whole answer is at most `max_bytes` (default and most 64 KiB) and \
                      `max_lines`, the newest output kept (`truncated` says when older output \
                      was cut); `include_screen: true` adds the screen as `viewport`; \
                      `cursor` is where a `terminal_read` with `since` goes on, \
                      `start_cursor` where this output began. Over MCP it reports progress \
                      while it waits when the request carries a progress token, and a cancel \
                      stops the wait, not the program.",
        request: schema::<SendRequest>,
        answer: schema::<SendAnswer>,
        check: check::<SendRequest>,
        run: |owned, args| {
            Box::pin(async move { json(run::send(owned, args.parse()?).await?.answer().await?) })
        },
    },
    Verb {
        name: "read",
        cli: "read",
        tool: "terminal_read",
        route: at("GET", "/api/terminals/{t}/scrollback", 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "A page of scrollback: {lines, total_lines, range, truncated, next_cursor}; \
                  or with since, the output after a cursor.",
        description: "Read a page of a terminal's scrollback, escape sequences stripped, \
                      counted back from the newest line: `offset` lines skipped, `count` \
                      lines returned (default 100, at most 10000). Or, with `since: CURSOR` (a \
                      `next_cursor`, or a send's `cursor`/`start_cursor`), the output written \
                      after it, oldest first, as `lines` (the default), `text` or `bytes` \
                      (`format`). The whole answer is at most `max_bytes` (default and most 64 \
                      KiB) and `max_lines`. Returns {lines, total_lines, range, truncated, \
                      next_cursor}; with since, {lines|text|bytes, truncated, next_cursor, \
                      more, gap, resumed_at}: read on from next_cursor while `more`; `gap` \
                      says why it starts at `resumed_at` instead of the cursor (evicted: no \
                      longer held; stale: an earlier engine run's cursor).",
        request: schema::<ReadRequest>,
        answer: schema::<ReadAnswer>,
        check: check::<ReadRequest>,
        run: |owned, args| Box::pin(async move { json(run::read(owned, args.parse()?).await?) }),
    },
    Verb {
        name: "search",
        cli: "search",
        tool: "terminal_search",
        route: at("GET", "/api/search", 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "Lines of your terminals' scrollback matching a regex, with context.",
        description: "Search scrollback with a regex (Rust syntax), escape sequences stripped \
                      as in terminal_read: one terminal's (`terminal`) or all of yours. \
                      Returns {matches: [{terminal, name, line, text, before, after}], \
                      searched, truncated}: `line` counts as terminal_read's range does, \
                      `context` lines (default 0, at most 10) around each, at most \
                      `max_matches` (default 50, at most 500; the newest kept) and \
                      `max_bytes` (default and most 64 KiB).",
        request: schema::<SearchRequest>,
        answer: schema::<SearchAnswer>,
        check: check::<SearchRequest>,
        run: |owned, args| {
            Box::pin(async move { json(search::search(owned, &args.parse()?).await?) })
        },
    },
    Verb {
        name: "commands",
        cli: "commands",
        tool: "terminal_commands",
        route: at("GET", "/api/terminals/{t}/commands", 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "The terminal's last commands from its output stream: {commands: [{id, text, \
                  start_cursor, end_cursor, exit_code, duration_secs, running}], known_from, \
                  unknown_ended, total}.",
        description: "List the terminal's last commands as its integrated shell marked them \
                      in the output stream: {commands: [{id, text, start_cursor, end_cursor, \
                      exit_code, duration_secs, running}], known_from, unknown_ended, total}, \
                      oldest first, the newest `limit` (default 20, at most 1000). An id is \
                      the command's start_cursor; terminal_wait {command: ID or \"last\"} \
                      collects its exit_code and output. Only what the stream holds is known: \
                      nothing before `known_from` (e.g. before an engine restart); \
                      `unknown_ended` counts end marks whose start is not held (no code is \
                      reported for them).",
        request: schema::<CommandsRequest>,
        answer: schema::<CommandsAnswer>,
        check: check::<CommandsRequest>,
        run: |owned, args| {
            Box::pin(async move { json(commands::commands(owned, &args.parse()?).await?) })
        },
    },
    Verb {
        name: "screen",
        cli: "screen",
        tool: "terminal_screen",
        route: at("GET", "/api/terminals/{t}/screen", 200),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "The visible screen: {lines, cols, rows, cursor}.",
        description: "Capture a terminal's visible screen: {lines, cols, rows, cursor} (over \
                      MCP at most 64 KiB of text; rows beyond that are dropped from the top).",
        request: schema::<TerminalRequest>,
        answer: schema::<Screen>,
        check: check::<TerminalRequest>,
        run: |owned, args| Box::pin(async move { json(run::screen(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "wait",
        cli: "wait",
        tool: "terminal_wait",
        route: None,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "Wait until a text, a regex, the program's exit or a command's end.",
        description: "Wait until a line of the terminal's output contains `text` or matches \
                      `regex` (`since`: command, the default, looks at the output after the \
                      newest command's start, never its echoed command line; screen at the \
                      screen and its last 200 lines of scrollback; or a cursor), or until the \
                      program exits (`exit: true`), or until a command ends (`command`: an id \
                      from terminal_commands or a send's start_cursor, or \"last\"; it then \
                      returns {matched, command, exit_code, duration_secs, output}, however \
                      long after its send timed out); give exactly one. Returns {matched}: \
                      the matching line (at most 64 KiB) or the exit status in words. Past \
                      `timeout_secs` (default 30) it is a TIMEOUT error showing the last lines \
                      searched. A cancel stops the wait, not the program.",
        request: schema::<WaitRequest>,
        answer: schema::<WaitAnswer>,
        check: check::<WaitRequest>,
        run: |owned, args| Box::pin(async move { json(run::wait(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "signal",
        cli: "signal",
        tool: "terminal_signal",
        route: at("POST", "/api/terminals/{t}/signal", 200),
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
        summary: "Signal the foreground process group; {signal, pgid}.",
        description: "Send a signal (INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 USR2) to the \
                      terminal's foreground process group, e.g. INT for Ctrl-C. Returns \
                      {signal, pgid}.",
        request: schema::<SignalRequest>,
        answer: schema::<SignalDelivery>,
        check: check::<SignalRequest>,
        run: |owned, args| Box::pin(async move { json(run::signal(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "kill",
        cli: "kill",
        tool: "terminal_kill",
        route: at("DELETE", TERMINAL, 200),
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
        summary: "Kill a terminal and its process tree.",
        description: "Kill a terminal and its whole process tree, and forget it. Returns \
                      {killed}: false when another kill of it was already under way.",
        request: schema::<TerminalRequest>,
        answer: schema::<KillAnswer>,
        check: check::<TerminalRequest>,
        run: |owned, args| Box::pin(async move { json(run::kill(owned, &args.parse()?).await?) }),
    },
    Verb {
        name: "rename",
        cli: "rename",
        tool: "terminal_rename",
        route: at("POST", "/api/terminals/{t}/rename", 200),
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        summary: "Give the terminal a new name `{name}`; its snapshot.",
        description: "Give a terminal a new name (unique among yours, not shaped like an id); \
                      its snapshot. The old name no longer finds it.",
        request: schema::<RenameRequest>,
        answer: schema::<TerminalSnapshot>,
        check: check::<RenameRequest>,
        run: |owned, args| Box::pin(async move { json(run::rename(owned, &args.parse()?).await?) }),
    },
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every verb's argument check refuses an unknown field, and the
    /// names are unique on every face.
    #[test]
    fn every_verb_checks_its_arguments_and_names_are_unique() {
        let unknown = serde_json::json!({"no_such_argument": 1});
        for verb in VERBS {
            let error = (verb.check)(unknown.as_object().unwrap()).unwrap_err();
            assert!(
                error.to_string().contains("no_such_argument"),
                "{}: {error}",
                verb.name
            );
        }
        let unique = |names: Vec<String>| {
            let set: std::collections::BTreeSet<&String> = names.iter().collect();
            assert_eq!(set.len(), names.len(), "{names:?}");
        };
        unique(VERBS.iter().map(|verb| verb.name.to_owned()).collect());
        unique(VERBS.iter().map(|verb| verb.cli.to_owned()).collect());
        unique(VERBS.iter().map(|verb| verb.tool.to_owned()).collect());
        unique(
            VERBS
                .iter()
                .filter_map(|verb| verb.route)
                .map(|route| format!("{} {}", route.method, route.path))
                .collect(),
        );
        assert!((VERBS[1].check)(&Map::new()).is_ok());
    }

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
        assert_eq!(read.format, Some(super::super::ReadFormat::Bytes));
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
}
