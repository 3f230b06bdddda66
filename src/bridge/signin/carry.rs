//! What one serve hands the next on the same state directory when it
//! drains (`handoff.rs`): the live links and sessions, their instants as
//! seconds left. Apart from the store because it is a wire form (serde, read
//! by another process) with its own rules of what is not carried.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Link, Principal, Session, SignIns};

/// The links and sessions one serve hands the next on the same state
/// directory when it drains (`handoff.rs`): instants as seconds left.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Carried {
    links: Vec<CarriedLink>,
    sessions: Vec<CarriedSession>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CarriedLink {
    id: String,
    terminal: Option<String>,
    ends_in: Option<u64>,
    code: Option<String>,
    owner: crate::registry::OwnerId,
    read_only: bool,
    expires_in: u64,
    expires_at: u64,
    created_at: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct CarriedSession {
    secret: String,
    owner: crate::registry::OwnerId,
    read_only: bool,
    terminal: Option<String>,
    ends_in: Option<u64>,
    link: String,
}

impl SignIns {
    /// Everything still live, to carry to the next serve.
    pub(crate) fn carry(&self) -> Carried {
        let now = Instant::now();
        let mut inner = self.lock();
        inner.prune(now);
        let left = |at: Instant| at.saturating_duration_since(now).as_secs();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Carried {
            links: inner
                .links
                .iter()
                .map(|link| CarriedLink {
                    id: link.id.clone(),
                    terminal: link.terminal.clone(),
                    ends_in: link.ends.map(left),
                    code: link.code.as_deref().map(text),
                    owner: link.principal.owner.clone(),
                    read_only: link.principal.read_only,
                    expires_in: left(link.expires),
                    expires_at: link.expires_at,
                    created_at: link.created_at,
                })
                .collect(),
            sessions: inner
                .sessions
                .iter()
                .map(|session| CarriedSession {
                    secret: text(&session.secret),
                    owner: session.principal.owner.clone(),
                    read_only: session.principal.read_only,
                    terminal: session.terminal.clone(),
                    ends_in: session.ends.map(left),
                    link: session.link.clone(),
                })
                .collect(),
        }
    }

    /// Takes over what a previous serve carried, within the per-owner
    /// bounds (the oldest beyond them are dropped): how many sessions
    /// came over.
    pub(crate) fn take_over(&self, carried: Carried) -> usize {
        let now = Instant::now();
        let at = |secs: u64| now + Duration::from_secs(secs);
        let mut inner = self.lock();
        for link in carried.links {
            inner.links.push(Link {
                id: link.id,
                terminal: link.terminal,
                ends: link.ends_in.map(at),
                code: link.code.map(String::into_bytes),
                principal: Principal {
                    owner: link.owner,
                    read_only: link.read_only,
                },
                // Who minted it is not carried: a read-only link counts
                // against read-only callers, where it may have come from.
                by_read_only: link.read_only,
                // The files grant is not carried: a handed-over link moves
                // no files (the safe side) until minted again.
                files: false,
                expires: at(link.expires_in),
                expires_at: link.expires_at,
                created_at: link.created_at,
            });
        }
        for session in carried.sessions {
            inner.sessions.push(Session {
                secret: session.secret.into_bytes(),
                principal: Principal {
                    owner: session.owner,
                    read_only: session.read_only,
                },
                terminal: session.terminal,
                files: false,
                ends: session.ends_in.map(at),
                link: session.link,
            });
        }
        inner.prune(now);
        inner.bound();
        inner.sessions.len()
    }
}
