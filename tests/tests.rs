//! The one integration-test binary: live tests against a real tmux, each
//! with its own server in its own directory.

mod support;

mod discovery;
mod injection;
mod send_keys;
mod server;
