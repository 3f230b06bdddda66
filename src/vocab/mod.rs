//! The engine's shared vocabulary: tmux object ids, owner and terminal
//! ids, names, sizes, exit statuses, what to spawn (`SpawnSpec`), where an
//! escape sequence ends, and (from `error/`) what a malformed control-mode
//! line is.
//!
//! A leaf: everything may use it, and it uses nothing of the engine but
//! `error/` ([`crate::Error`], [`ParseError`]). Values only, no IO.

mod escape_sequence;
mod exit_status;
pub(crate) mod ids;
mod markup;
mod names;
mod object_ids;
mod size;
pub(crate) mod spawn_spec;

pub(crate) use escape_sequence::{EscapeSequence, escape_sequence};
pub use exit_status::ExitStatus;
pub(crate) use ids::{OwnerId, TerminalId, stream_epoch, validate_name};
pub(crate) use markup::escape_markup;
pub(crate) use names::{MAX_NAME_LEN, check_env_name, check_name, hidden_char};
pub use object_ids::{PaneId, SessionId, WindowId};
// A malformed line's error is the error module's (`Error::Parse` holds
// it); named here too, where the protocol's values are.
pub(crate) use crate::error::is_notification_name;
pub use crate::error::{ParseError, ParseErrorKind};
pub use size::{MAX_CELLS, MAX_SIZE, Size};
pub(crate) use spawn_spec::{RestartPolicy, SpawnSpec};
