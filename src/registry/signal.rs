//! The signals a caller may deliver to a terminal ([`Signal`]) and where a
//! delivery went ([`SignalDelivery`]).
//!
//! Only this fixed set is allowed; anything else is `INVALID_INPUT` before a
//! backend sees it. Backends deliver a real signal to the pane's foreground
//! process group, never typed bytes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The signals a caller may deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum Signal {
    /// `SIGINT`.
    Int,
    /// `SIGTERM`.
    Term,
    /// `SIGKILL`.
    Kill,
    /// `SIGHUP`.
    Hup,
    /// `SIGQUIT`.
    Quit,
    /// `SIGTSTP`.
    Tstp,
    /// `SIGCONT`.
    Cont,
    /// `SIGWINCH`.
    Winch,
    /// `SIGUSR1`.
    Usr1,
    /// `SIGUSR2`.
    Usr2,
}

impl Signal {
    /// Every allowed signal.
    pub const ALL: [Signal; 10] = [
        Signal::Int,
        Signal::Term,
        Signal::Kill,
        Signal::Hup,
        Signal::Quit,
        Signal::Tstp,
        Signal::Cont,
        Signal::Winch,
        Signal::Usr1,
        Signal::Usr2,
    ];

    /// The name without `SIG`, e.g. `INT`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "INT",
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
            Signal::Hup => "HUP",
            Signal::Quit => "QUIT",
            Signal::Tstp => "TSTP",
            Signal::Cont => "CONT",
            Signal::Winch => "WINCH",
            Signal::Usr1 => "USR1",
            Signal::Usr2 => "USR2",
        }
    }

    /// The platform's signal, for `kill(2)`.
    pub fn to_rustix(self) -> rustix::process::Signal {
        use rustix::process::Signal as Sys;
        match self {
            Signal::Int => Sys::INT,
            Signal::Term => Sys::TERM,
            Signal::Kill => Sys::KILL,
            Signal::Hup => Sys::HUP,
            Signal::Quit => Sys::QUIT,
            Signal::Tstp => Sys::TSTP,
            Signal::Cont => Sys::CONT,
            Signal::Winch => Sys::WINCH,
            Signal::Usr1 => Sys::USR1,
            Signal::Usr2 => Sys::USR2,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SIG{}", self.name())
    }
}

impl FromStr for Signal {
    type Err = Error;

    /// Parses `INT` or `SIGINT` (any case).
    fn from_str(text: &str) -> Result<Self> {
        let upper = text.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        Signal::ALL
            .into_iter()
            .find(|signal| signal.name() == bare)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "signal {text:?} is not one of INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 USR2"
                ))
            })
    }
}

/// Where a signal went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SignalDelivery {
    /// The signal delivered.
    pub signal: Signal,
    /// The process group it was delivered to.
    pub pgid: i32,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn signal_parses_with_and_without_prefix() {
        for (text, signal) in [
            ("INT", Signal::Int),
            ("SIGINT", Signal::Int),
            ("sigterm", Signal::Term),
            ("usr2", Signal::Usr2),
            ("SIGWINCH", Signal::Winch),
        ] {
            assert_eq!(text.parse::<Signal>().unwrap(), signal, "{text}");
        }
        for signal in Signal::ALL {
            assert_eq!(signal.to_string().parse::<Signal>().unwrap(), signal);
        }
    }

    #[test]
    fn signal_rejects_others_naming_the_value() {
        for text in ["", "SIG", "SEGV", "9", "SIGINTX", "INT "] {
            let error = text.parse::<Signal>().unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT");
            assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
        }
    }
}
