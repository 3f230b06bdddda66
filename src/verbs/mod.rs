//! The one verb layer: every verb a client can ask for (spawn, list, show,
//! send, read, search, commands, screen, wait, signal, kill, probe, rename) as one
//! request type and one answer type, each request checked by one
//! validation, and one function per verb that runs it on a [`Registry`].
//!
//! | file          | job                                                     |
//! |---------------|---------------------------------------------------------|
//! | `commands.rs` | `commands`: a terminal's last commands from its stream  |
//! | `record.rs`   | `record`: output as an asciicast v2 recording           |
//! | `requests/`   | the request types (serde + JSON Schema) and their checks |
//! | `answers.rs`  | the answer types the verbs return                       |
//! | `arguments.rs`| a verb's arguments as a face received them              |
//! | `bounds.rs`   | the bound on a whole answer (`max_bytes`, `max_lines`)  |
//! | `run.rs`      | one function per verb: validate, then one registry call |
//! | `search.rs`   | `search`: a regex over one or all terminals' scrollback |
//! | `since.rs`    | `read since`: the output after a cursor, cut at a line  |
//! | `table.rs`    | the verb table: each verb once, for every face          |
//! | `verb.rs`     | what a verb declares: the fields the faces read         |
//! | `text.rs`     | each answer as a person reads it (the CLI's text)       |
//!
//! The verb table ([`VERBS`]) declares each verb once (name, request and
//! answer types, read-only or not, HTTP route, CLI word, MCP tool,
//! description, and the traits the faces act on: cancellable, detached,
//! bounded text, progress, a share link's reach, its text); the MCP tools,
//! the HTTP routes and the CLI's verbs are built from it, and no face
//! tells a verb by its name.
//! The CLI's `--json`, the HTTP API (`bridge/api.rs`) and the MCP tools
//! (`mcp/`) parse into these requests and render these answers and
//! nothing else, so the three faces share one set of rules: a relative
//! `cwd`, one of `cols`/`rows`, an empty `command`, a name shaped like an
//! id, an unknown signal or a `count` over `MAX_READ_LINES` are the same
//! `INVALID_INPUT` from each. Every registry call of the faces' verbs is in
//! `run.rs`, one per verb.
//!
//! [`Registry`]: crate::registry::Registry

mod answers;
mod arguments;
mod bounds;
mod commands;
mod record;
mod requests;
mod run;
mod search;
mod since;
mod table;
mod text;
mod verb;

pub use answers::{KillAnswer, ReadAnswer, WaitAnswer};
pub use arguments::Arguments;
pub(crate) use bounds::MAX_ANSWER_BYTES;
pub(crate) use bounds::{keep_tail_json, keep_tail_lines_json};
pub use commands::{CommandsRequest, commands};
pub use record::{DEFAULT_RECORD_LIMIT, RecordAnswer, record};
pub use requests::RenameRequest;
pub use requests::{
    ListRequest, ReadFormat, ReadRequest, SendRequest, SignalRequest, SpawnRequest,
    TerminalRequest, WaitRequest,
};
pub use run::rename;
pub(crate) use run::snapshot;
pub use run::{
    attach_command, attach_lock, events, kill, list, probe, read, screen, send, signal, spawn, wait,
};
pub use search::{SearchAnswer, SearchMatch, SearchRequest, search};
pub(crate) use table::KEYS_LINE;
pub use table::{
    COMMANDS, KILL, LIST, READ, RENAME, SCREEN, SEARCH, SEND, SHOW, SIGNAL, SPAWN, VERBS, WAIT,
};
pub use text::terminal_line;
pub(crate) use verb::SchemaFn;
pub use verb::{Route, Shared, Verb};

/// Lines one read returns at most; a larger `count` is `INVALID_INPUT`
/// from every face (the registry's own page bound, so nothing is cut
/// silently).
pub(crate) const MAX_READ_LINES: usize = 10_000;

/// A wait gives up after this many seconds unless told otherwise.
const DEFAULT_WAIT_SECS: f64 = 30.0;
