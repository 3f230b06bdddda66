//! `commands`: a terminal's last commands as its stream holds them (see
//! [`crate::registry::CommandsAnswer`]), on every face.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::registry::{CommandsAnswer, Owned};
use crate::{Error, Result};

/// Commands a `commands` answer lists unless told (the newest).
const DEFAULT_COMMANDS: usize = 20;

/// The most commands one answer lists.
const MAX_COMMANDS_LISTED: usize = 1000;

/// `commands`: the newest commands an integrated shell marked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandsRequest {
    /// Terminal id or name.
    pub terminal: String,
    /// The newest this many (default 20).
    #[serde(default)]
    #[schemars(range(max = 1000))]
    pub limit: Option<usize>,
}

/// `commands`: the terminal's newest commands, oldest first, with where
/// the stream's knowledge starts.
///
/// # Errors
/// `INVALID_INPUT` for a `limit` over 1000, or the registry's.
pub async fn commands(owned: Owned<'_>, request: &CommandsRequest) -> Result<CommandsAnswer> {
    let limit = request.limit.unwrap_or(DEFAULT_COMMANDS);
    if limit > MAX_COMMANDS_LISTED {
        return Err(Error::InvalidInput(format!(
            "limit {limit} is over {MAX_COMMANDS_LISTED}"
        )));
    }
    owned.commands(&request.terminal, limit).await
}
