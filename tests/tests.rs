//! The one integration-test binary: fixture replays, registry logic on the
//! stub backend, and live tests against a real tmux, each with its own
//! server in its own directory.

mod support;

mod argv;
mod attach_cli;
mod bridge;
mod cli;
mod client;
mod codec_fixtures;
mod codec_props;
mod decode_cli;
mod dirs;
mod discovery;
mod docs_tables;
mod faces;
mod fault;
mod fixture;
mod injection;
mod input_stream;
mod kill;
mod layers;
mod mcp;
mod names_everywhere;
mod pid_reuse;
mod raw_path;
mod registry_logic;
mod registry_tmux;
mod run_cli;
mod screen_model;
mod send_keys;
mod server;
mod tape;
