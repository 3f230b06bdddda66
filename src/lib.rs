//! tmux-engine: run terminals inside private tmux servers and drive them
//! through tmux control mode.
//!
//! Start with [`Terminal`]: one program in its own private tmux server, with
//! a screen model that follows its output.
//!
//! ```no_run
//! use tmux_engine::Terminal;
//!
//! # async fn demo() -> tmux_engine::Result<()> {
//! let t = Terminal::builder().command(["bash", "--norc"]).start().await?;
//! t.send_text("echo hi $((6*7))\r").await?;
//! t.wait_for_text("hi 42").await?;
//! println!("{}", t.screen().await?.text());
//! t.kill().await?;
//! # Ok(()) }
//! ```
//!
//! For persistent, owner-scoped terminals that outlive the process, see
//! [`registry`]; for tests that drive TUIs, [`fixture::Fixture`].
//!
//! Every failure is an [`Error`] whose [`code`](Error::code) is an
//! [`ErrorCode`]: match on it (`error.code() == ErrorCode::NoTerminal`);
//! its string (`NO_TERMINAL`) is what the CLI, HTTP API and MCP tools
//! report.
//!
//! # Layers
//!
//! Each uses only the ones below it (checked by `tests/layers/`; the
//! repository's `docs/architecture.md` explains them):
//!
//! ```text
//!  bridge, mcp           `serve`: HTTP routes, WebSocket viewers, the page; MCP tools
//!  verbs                 one request/answer type per verb, one validation (every face's)
//!  attach                viewers: control fan-out with resume, PTY attach
//!  backend, tape         the tmux backend: implements the registry's seam; tape files
//!  registry, fixture     owners, terminals, policy, persistence, I/O; the test preset
//!  terminal, picture     Terminal::builder(), send, wait, screen, resize, output, kill;
//!                        screens to PNG, recordings to GIF
//!  screen                Screen (text, cells, cursor), the emulator model, the waits
//!  control::client ...   one task set per tmux server: pipelined commands, routed
//!                        output, lag/pause/resync, pushed exits (pane_exit)
//!  control (protocol)    parse_line, ControlCodec, escape, Layout: sans-IO decoding
//!  tmux                  version, the one quoting path, server/handle, kill, /proc
//!  vocab, error          ids, names, Size, ExitStatus, ParseError; Error, ErrorCode
//! ```
//!
//! # Features
//!
//! The default feature `cli` is the binary and turns every face on. A
//! library user who wants only the core (control protocol, registry,
//! [`Terminal`], the fixture) sets `default-features = false` and adds
//! what they use: `serve` (the `bridge` module), `mcp`, `tape`, `picture`, `verbs`
//! (the faces' request/answer types), `schema` (JSON Schemas of the value
//! types).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// A few crate-private helpers of the core serve only the faces (the
// verbs' schemas, tape's cast writer, the shell marks the answers carry):
// dead code is checked on the full build (`cli`, which scripts/check
// lints), not on a partial one.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]

/// Builder-style setters for an options struct whose fields are public to
/// read but which is `#[non_exhaustive]` (so it can grow without breaking
/// callers): `Opts::default().field(value)`, one method per named field.
macro_rules! setters {
    ($ty:ty { $($field:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $field(mut self, value: $t) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

pub mod attach;
#[cfg(feature = "serve")]
pub mod audit;
pub mod backend;
#[cfg(feature = "serve")]
pub mod bridge;
pub mod control;
mod error;
pub mod fixture;
pub(crate) mod history;
pub(crate) mod hops;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "picture")]
pub mod picture;
pub mod registry;
pub mod screen;
// Public for the command tracker's benchmark (`benches/tracker.rs`) only.
#[doc(hidden)]
pub mod shell;
mod statedir;
mod stream;
#[cfg(feature = "tape")]
pub mod tape;
pub mod terminal;
pub mod tmux;
#[cfg(feature = "verbs")]
pub mod verbs;
pub mod vocab;

pub use error::{Error, ErrorCode, Result};
/// The relay's writer of kept histories, which the engine's binaries hand
/// to [`tmux::relay`].
pub use history::RelayKeeper;
pub use terminal::Terminal;

/// The README's Rust examples, compiled (and run) by `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

/// The library guide's Rust examples (`docs/library.md`), compiled (and
/// run, unless marked `no_run`) by `cargo test`, as the README's are.
#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
pub struct LibraryGuideExamples;
