//! The CLI's commands, private to the `tmux-engine` binary: `main.rs` only
//! parses arguments and calls these; each command takes its input and
//! output as parameters instead of touching stdin/stdout itself. They use
//! the library's public API only, like any other program would.
//!
//! Edges run one way: `terminals` (the entry of the registry commands)
//! uses `verbs`, which uses `args` (clap types and their conversion into
//! requests) and `report` (exit codes, errors, writers).
//!
//! - `decode`: a raw `tmux -C` stream to JSON lines;
//! - `run`: one command in a private server, output streamed;
//! - `mcp`: the MCP server over the registry (the library's `mcp`);
//! - `serve`: the web bridge on one long-lived registry;
//! - `link`: a new sign-in link from a running `serve`, through its API;
//! - `files`: `upload` and `download`, through a running `serve`'s API;
//! - `serve_api`: that API as these reach it: serve found, proven, asked;
//! - `tape`: `test` (tape files) and `render` (a recording to GIF/PNG);
//! - `logs`: a terminal's kept history, from its files;
//! - `service`: the systemd unit that runs `serve` at boot;
//! - `secret_file`: the one check of a file of secrets (token, environment);
//! - `audit`: `audit verify`, the chain of `serve --audit-log`'s file;
//! - `allocator`: `serve` and `mcp` restart themselves once with glibc's
//!   allocator settings (one arena);
//! - `terminals` (+ `verbs`, `args`, `report`): the registry commands over a
//!   state directory.

pub(crate) mod allocator;
pub(crate) mod args;
pub(crate) mod audit;
pub(crate) mod decode;
pub(crate) mod files;
pub(crate) mod link;
pub(crate) mod logs;
pub(crate) mod mcp;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod secret_file;
pub(crate) mod serve;
pub(crate) mod serve_api;
pub(crate) mod serve_args;
pub(crate) mod service;
pub(crate) mod tape;
pub(crate) mod terminals;
mod verbs;
