//! tmux's object ids: `%N` panes, `@N` windows, `$N` sessions, as
//! newtypes parsed from their wire form, never bare integers.

use std::fmt;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident, $sigil:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($sigil, "{}"), self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = crate::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.strip_prefix($sigil)
                    .and_then(|n| {
                        if n.bytes().all(|b| b.is_ascii_digit()) {
                            n.parse().ok()
                        } else {
                            None
                        }
                    })
                    .map($name)
                    .ok_or_else(|| {
                        crate::Error::InvalidInput(format!(
                            concat!("{:?} is not a ", stringify!($name), " (expected ", $sigil, "N)"),
                            s
                        ))
                    })
            }
        }
    };
}

id_newtype!(
    /// A pane id, written `%N` on the wire. Unique for the server's lifetime.
    PaneId,
    "%"
);
id_newtype!(
    /// A window id, written `@N` on the wire.
    WindowId,
    "@"
);
id_newtype!(
    /// A session id, written `$N` on the wire.
    SessionId,
    "$"
);
