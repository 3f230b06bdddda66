//! The MCP tools' arguments are the verb layer's requests
//! ([`crate::verbs`]): their JSON Schemas are what clients see, and
//! their validation is every face's. What is MCP's own is the check that
//! the arguments fit a tool's type before the tool runs.

use serde::Deserialize;

use crate::verbs::RenameRequest;
use crate::verbs::{
    ListRequest, ReadRequest, SearchRequest, SendRequest, SignalRequest, SpawnRequest,
    TerminalRequest, WaitRequest,
};

/// Checks `arguments` against the argument type of `tool`, before the
/// tool runs: wrong types, unknown fields and missing required ones are
/// the protocol's invalid params (JSON-RPC -32602), as the contract
/// says. rmcp itself turns them into tool results (`isError`, so a model
/// may retry), which a harness cannot tell from the tool's own failure.
/// An unknown tool is the router's to refuse.
///
/// # Errors
/// The deserializer's message, naming the tool.
pub fn check_arguments(
    tool: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> std::result::Result<(), String> {
    fn parse<'de, T: Deserialize<'de>>(
        arguments: &'de serde_json::Map<String, serde_json::Value>,
    ) -> std::result::Result<(), serde_json::Error> {
        T::deserialize(serde::de::IntoDeserializer::into_deserializer(arguments)).map(drop)
    }
    let empty = serde_json::Map::new();
    let arguments = arguments.unwrap_or(&empty);
    let checked = match tool {
        "terminal_spawn" => parse::<SpawnRequest>(arguments),
        "terminal_list" => parse::<ListRequest>(arguments),
        "terminal_send" => parse::<SendRequest>(arguments),
        "terminal_read" => parse::<ReadRequest>(arguments),
        "terminal_show" | "terminal_screen" | "terminal_kill" => {
            parse::<TerminalRequest>(arguments)
        }
        "terminal_wait" => parse::<WaitRequest>(arguments),
        "terminal_commands" => parse::<crate::verbs::CommandsRequest>(arguments),
        "terminal_signal" => parse::<SignalRequest>(arguments),
        "terminal_rename" => parse::<RenameRequest>(arguments),
        "terminal_search" => parse::<SearchRequest>(arguments),
        _ => Ok(()),
    };
    checked.map_err(|error| format!("invalid arguments for {tool}: {error}"))
}
