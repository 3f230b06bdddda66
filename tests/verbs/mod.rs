//! `src/verbs/` tested through its faces: the CLI, HTTP and MCP agree on
//! the same inputs, and names are checked the same way on each.

mod faces;
mod names_everywhere;
