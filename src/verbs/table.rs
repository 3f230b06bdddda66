//! The one verb table ([`VERBS`]): each verb a client can ask for is
//! declared here once, with its request and answer types, whether it
//! changes anything, its HTTP route, its CLI word, its MCP tool, the
//! words that describe it, and every trait in which the faces treat it
//! differently (cancellable, detached, bounded text, progress, what it
//! types, a share link's reach, its text for a person). The MCP tools
//! (`mcp/tools.rs`), the HTTP routes and OpenAPI document
//! (`bridge/openapi/`, `bridge/api.rs`), the share-link scope
//! (`bridge/scope.rs`) and the CLI (`cli/verbs.rs`) read these fields and
//! never a verb's name, so a verb is served, described and checked the
//! same way everywhere.
//!
//! Adding a verb: its function (`run.rs`; its request type in
//! `requests/` when none fits), one entry here (its text in `text.rs`),
//! and its clap variant with its line in `TerminalCommand::verb_call`
//! (`cli/args.rs`). What an entry holds (the [`Verb`] type and its
//! fields) is `verb.rs`.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::answers::{KillAnswer, ReadAnswer, ShowAnswer, WaitAnswer};
use super::arguments::Arguments;
use super::commands::CommandsRequest;
use super::requests::{
    ListRequest, ReadRequest, RenameRequest, SendRequest, SignalRequest, SpawnRequest,
    TerminalRequest, WaitRequest,
};
use super::search::{SearchAnswer, SearchRequest};
use super::verb::{Route, Shared, Verb};
use super::{commands, run, search, text};
use crate::registry::{CommandsAnswer, SendAnswer, SignalDelivery, TerminalSnapshot};
use crate::screen::Screen;
use crate::{Error, Result};

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

/// How to type keys, in one line: every description that types says it
/// with these words (a literal, for `concat!`).
macro_rules! keys_line {
    () => {
        "Keys by tmux name in `keys`: [\"Escape\", \":wq\", \"Enter\"], \"C-c\", \"Up\"."
    };
}

/// `keys_line!` as a value, for the faces' own words.
pub(crate) const KEYS_LINE: &str = keys_line!();

/// The route `method path`, answering `status` on success.
const fn at(method: &'static str, path: &'static str, status: u16) -> Option<Route> {
    Some(Route {
        method,
        path,
        status,
    })
}

/// `spawn`.
pub const SPAWN: Verb = Verb {
    name: "spawn",
    cli: "spawn",
    tool: "terminal_spawn",
    route: at("POST", "/api/terminals", 201),
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: true,
    summary: "Start a terminal; its snapshot.",
    description: "A persistent terminal: a shell, `command` run exactly or a `shell` \
                  line; its snapshot.",
    request: schema::<SpawnRequest>,
    answer: schema::<TerminalSnapshot>,
    check: check::<SpawnRequest>,
    run: |owned, args| Box::pin(async move { json(run::spawn(owned, args.parse()?).await?) }),
    cancellable: true,
    detached: true,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[("agent", true)],
    shared: Shared::No,
    text: text::id,
    scans: false,
};

/// `list`.
pub const LIST: Verb = Verb {
    name: "list",
    cli: "list",
    tool: "terminal_list",
    route: at("GET", "/api/terminals", 200),
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "Your terminals in creation order, as snapshots.",
    description: "Your terminals, oldest first, as snapshots.",
    request: schema::<ListRequest>,
    answer: schema::<Vec<TerminalSnapshot>>,
    check: check::<ListRequest>,
    run: |owned, args| Box::pin(async move { json(run::list(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    // Each unchanged terminal's JSON is kept between lists (registry/listing.rs).
    encode: Some(|owned, args| {
        Box::pin(async move {
            let _: ListRequest = args.parse()?;
            owned.list_json().await
        })
    }),
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Filtered,
    text: text::snapshots,
    scans: true,
};

/// `show`.
pub const SHOW: Verb = Verb {
    name: "show",
    cli: "show",
    tool: "terminal_show",
    route: at("GET", TERMINAL, 200),
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "One terminal's snapshot.",
    description: "One terminal's snapshot: {id, name, owner, kind, status: {kind: \
                  running|exited (exit)|gone (reason)}, pid, restart, restarts, role, \
                  created_ms, output_path, shell, shell_integration, keep_history, restored_ms, \
                  history_error}.",
    request: schema::<TerminalRequest>,
    answer: schema::<ShowAnswer>,
    check: check::<TerminalRequest>,
    run: |owned, args| Box::pin(async move { json(run::show(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Terminal,
    text: text::shown,
    scans: false,
};

/// `send`.
pub const SEND: Verb = Verb {
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
    description: concat!(
        "Type `text`, press `keys`, and wait (`wait`). ",
        keys_line!(),
        " Returns {output, exit_code, exit_code_source, duration_secs, commands (as \
         terminal_commands), wait_reason, typed, not_typed_reason, \
         foreground_command, screen, status, viewport, truncated, elided_bytes, elided_from, \
         elided_to, cursor, start_cursor, recreated}: output as the terminal shows it; typed false: \
         never typed; wait_reason full_screen: a pager or editor is in front (keys only, any word); past max_bytes/max_lines head and tail kept (terminal_read since \
         elided_from: the rest)."
    ),
    request: schema::<SendRequest>,
    answer: schema::<SendAnswer>,
    check: check::<SendRequest>,
    run: |owned, args| {
        Box::pin(async move { json(run::send(owned, args.parse()?).await?.result().await?) })
    },
    cancellable: true,
    detached: false,
    encode: None,
    unbounded: false,
    progress: Some(|owned, args| {
        Box::pin(async move {
            let handle = run::send(owned, args.parse()?).await?;
            Ok(handle.then(|answer| async move { json(answer) }))
        })
    }),
    types: Some(|fields| Arguments::Json(fields.clone()).parse()),
    agent_defaults: &[("history", false)],
    shared: Shared::Terminal,
    text: text::output,
    scans: false,
};

/// `read`.
pub const READ: Verb = Verb {
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
    description: "Lines back from the newest: {lines, total_lines, range, \
                  truncated, next_cursor}; with `since`, the output after a cursor: \
                  {lines|text|bytes, truncated, next_cursor, more, gap, resumed_at, recreated}: read \
                  on from next_cursor while more; gap: from resumed_at.",
    request: schema::<ReadRequest>,
    answer: schema::<ReadAnswer>,
    check: check::<ReadRequest>,
    run: |owned, args| Box::pin(async move { json(run::read(owned, args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Terminal,
    text: text::page,
    scans: false,
};

/// `search`.
pub const SEARCH: Verb = Verb {
    name: "search",
    cli: "search",
    tool: "terminal_search",
    route: at("GET", "/api/search", 200),
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "Lines of your terminals' scrollback matching a regex, with context.",
    description: "Output lines matching `regex`: {matches: \
                  [{terminal, name, line, cursor, text, before, after}], searched, \
                  truncated, ranges: [{terminal, searched_from, older_output}]}.",
    request: schema::<SearchRequest>,
    answer: schema::<SearchAnswer>,
    check: check::<SearchRequest>,
    run: |owned, args| Box::pin(async move { json(search::search(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::No,
    text: text::matches,
    scans: false,
};

/// `commands`.
pub const COMMANDS: Verb = Verb {
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
    description: "Last commands, oldest first: \
                  {commands: [{id, text, start_cursor, end_cursor, exit_code, duration_secs, \
                  running}], known_from, unknown_ended, total}. terminal_wait command: id \
                  collects one; unknown_ended: ends without a start.",
    request: schema::<CommandsRequest>,
    answer: schema::<CommandsAnswer>,
    check: check::<CommandsRequest>,
    run: |owned, args| {
        Box::pin(async move { json(commands::commands(owned, &args.parse()?).await?) })
    },
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Terminal,
    text: text::commands,
    scans: false,
};

/// `screen`.
pub const SCREEN: Verb = Verb {
    name: "screen",
    cli: "screen",
    tool: "terminal_screen",
    route: at("GET", "/api/terminals/{t}/screen", 200),
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "The visible screen: {lines, cols, rows, cursor}.",
    description: "The visible screen: {lines, cols, rows, cursor: [col, row]} (at most 64 \
                  KiB).",
    request: schema::<TerminalRequest>,
    answer: schema::<Screen>,
    check: check::<TerminalRequest>,
    run: |owned, args| Box::pin(async move { json(run::screen(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: true,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Terminal,
    text: text::lines,
    scans: false,
};

/// `wait`.
pub const WAIT: Verb = Verb {
    name: "wait",
    cli: "wait",
    tool: "terminal_wait",
    route: None,
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "Wait until a text, a regex, the program's exit or a command's end.",
    description: "Until a line of output has `text` or matches `regex`, the program \
                  exits (`exit`), or a command ends (`command`, even long after its \
                  send); one of them. Returns {matched, command, exit_code, duration_secs, \
                  output, recreated}: all but matched for a command. \
                  Past timeout_secs: TIMEOUT.",
    request: schema::<WaitRequest>,
    answer: schema::<WaitAnswer>,
    check: check::<WaitRequest>,
    run: |owned, args| Box::pin(async move { json(run::wait(owned, &args.parse()?).await?) }),
    cancellable: true,
    detached: false,
    encode: None,
    unbounded: true,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::No,
    text: text::found,
    scans: false,
};

/// `signal`.
pub const SIGNAL: Verb = Verb {
    name: "signal",
    cli: "signal",
    tool: "terminal_signal",
    route: at("POST", "/api/terminals/{t}/signal", 200),
    read_only: false,
    destructive: true,
    idempotent: false,
    open_world: false,
    summary: "Signal the foreground process group; {signal, pgid}.",
    description: "Signal the terminal's foreground process group (INT is Ctrl-C). Returns \
                  {signal, pgid}.",
    request: schema::<SignalRequest>,
    answer: schema::<SignalDelivery>,
    check: check::<SignalRequest>,
    run: |owned, args| Box::pin(async move { json(run::signal(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::Terminal,
    text: text::delivery,
    scans: false,
};

/// `kill`.
pub const KILL: Verb = Verb {
    name: "kill",
    cli: "kill",
    tool: "terminal_kill",
    route: at("DELETE", TERMINAL, 200),
    read_only: false,
    destructive: true,
    idempotent: true,
    open_world: false,
    summary: "Kill a terminal and its process tree.",
    description: "Kill a terminal and its process tree, and forget it. Returns {killed}: \
                  false when another kill was under way.",
    request: schema::<TerminalRequest>,
    answer: schema::<KillAnswer>,
    check: check::<TerminalRequest>,
    run: |owned, args| Box::pin(async move { json(run::kill(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::No,
    text: text::killed,
    scans: false,
};

/// `rename`.
pub const RENAME: Verb = Verb {
    name: "rename",
    cli: "rename",
    tool: "terminal_rename",
    route: at("POST", "/api/terminals/{t}/rename", 200),
    read_only: false,
    destructive: false,
    idempotent: true,
    open_world: false,
    summary: "Give the terminal a new name `{name}`; its snapshot.",
    description: "Rename a terminal (unique among yours); its snapshot.",
    request: schema::<RenameRequest>,
    answer: schema::<TerminalSnapshot>,
    check: check::<RenameRequest>,
    run: |owned, args| Box::pin(async move { json(run::rename(owned, &args.parse()?).await?) }),
    cancellable: false,
    detached: false,
    encode: None,
    unbounded: false,
    progress: None,
    types: None,
    agent_defaults: &[],
    shared: Shared::No,
    text: text::snapshot,
    scans: false,
};

/// Every verb the faces share, in the order they are listed.
pub static VERBS: &[Verb] = &[
    SPAWN, LIST, SHOW, SEND, READ, SEARCH, COMMANDS, SCREEN, WAIT, SIGNAL, KILL, RENAME,
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
}
