//! The one integration-test binary: fixture replays, registry logic on the
//! stub backend, and live tests against a real tmux, each with its own
//! server in its own directory. Its folders mirror `src/`: `tests/X/`
//! tests `src/X/` (`fault.rs`, `docs_tables.rs` and `layers/` check the
//! whole).

mod support;

mod attach;
mod backend;
mod bridge;
mod cli;
mod control;
mod docs_tables;
mod fault;
mod fixture;
mod layers;
mod mcp;
mod registry;
mod screen;
mod tape;
mod tmux;
mod verbs;
