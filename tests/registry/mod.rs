//! `src/registry/` tested: its logic on the stub backend (`logic/`), and
//! against real tmux the scenarios that apply, exact sends, wait reasons,
//! paging, real signals, pushed death, recreation, adoption across
//! registries, kept histories, search and reaping.
#![allow(clippy::unwrap_used)]

mod commands;
mod cwd;
mod hardening;
mod kept_read;
mod lifecycle;
mod listing;
mod liveness;
mod logic;
mod old_records;
mod reboot;
mod revive;
mod search;

use crate::support::tmux_registry::*;
