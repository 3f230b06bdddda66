//! Sign-in without a reusable secret in any URL or cookie: one-time codes
//! (what `serve` prints and `tmux-engine link` mints, valid once and for
//! minutes), exchanged by the page for a session credential that lives in
//! the page's own origin storage and travels as `Authorization: Bearer`
//! (or the WebSocket's `bearer.` subprotocol). Sessions live in this
//! process only; a restart signs every browser out.
//!
//! Every lookup compares against every entry in constant time (as
//! `auth.rs` does for tokens), and both lists are bounded per owner: at
//! most [`MAX_LINKS`] live links (minting more is refused) and
//! [`MAX_SESSIONS`] sessions (that owner's oldest is signed out). This file
//! is the store, with no HTTP in it; the handlers of `/api/sign-in`,
//! `/api/session` and `/api/links` are `routes.rs`, and what a draining
//! serve hands the next is `carry.rs`.

mod carry;
mod routes;

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use subtle::ConstantTimeEq;

use super::auth::{Principal, generate_token};
use crate::Error;

pub(crate) use carry::Carried;
pub(crate) use routes::{LinkRequest, SessionAnswer, SessionRequest};
pub(super) use routes::{json_body, links, mint, revoke, sign_in, sign_out, whoami};

/// How long a sign-in code works unless told otherwise.
pub(crate) const DEFAULT_CODE_LIFETIME: Duration = Duration::from_secs(600);

/// The longest a code may be asked to live.
pub(crate) const MAX_CODE_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Links (used or not) one owner keeps at once; minting beyond them is
/// refused until some expire or are revoked. Per owner, so that one owner
/// cannot keep another from minting; and the links read-only callers
/// minted count apart from the ones its read-write callers did, so a
/// read-only holder cannot keep the owner from minting.
pub const MAX_LINKS: usize = 256;

/// Sessions one owner keeps at once; a new one beyond them signs that
/// owner's oldest out (never another owner's).
pub const MAX_SESSIONS: usize = 256;

/// One minted link.
struct Link {
    id: String,
    /// A share link: the one terminal (its id) its holder may use.
    terminal: Option<String>,
    /// A share link's holder may move files (`--files`).
    files: bool,
    /// A share link's sessions end then too.
    ends: Option<Instant>,
    /// `None` once exchanged: a code works once.
    code: Option<Vec<u8>>,
    principal: Principal,
    /// A read-only caller minted it: it counts against read-only callers'
    /// [`MAX_LINKS`], not the owner's.
    by_read_only: bool,
    /// When the code stops working.
    expires: Instant,
    expires_at: u64,
    created_at: u64,
}

/// One signed-in browser (or a client that exchanged a code itself).
struct Session {
    secret: Vec<u8>,
    principal: Principal,
    /// Its one terminal, for a share link's holder.
    terminal: Option<String>,
    /// A share link's holder may move files.
    files: bool,
    /// When a share link's session ends.
    ends: Option<Instant>,
    /// The link it came from: revoking that link ends it.
    link: String,
}

#[derive(Default)]
struct Inner {
    links: Vec<Link>,
    sessions: Vec<Session>,
}

/// The codes and sessions of one bridge.
pub(crate) struct SignIns {
    inner: Mutex<Inner>,
    /// Bumped whenever a session may have ended (a revoke, a sign-out, an
    /// eviction): every live WebSocket watches it and re-checks its
    /// credential, so ending access ends open viewers too.
    ended: tokio::sync::watch::Sender<u64>,
}

impl Default for SignIns {
    fn default() -> Self {
        SignIns {
            inner: Mutex::default(),
            ended: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// A freshly minted link.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Minted {
    /// Its id, for `GET /api/links` and revoking.
    pub id: String,
    /// The one-time code.
    pub code: String,
    /// The path to open (under the base path): `/#code=CODE`.
    pub path: String,
    /// When the code stops working, seconds since the Unix epoch.
    pub expires_at: u64,
    /// Whoever signs in with it may only look.
    pub read_only: bool,
    /// A share link's terminal (its id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// A share link's holder may move files in and out.
    pub files: bool,
}

/// What `GET /api/links` shows of one link (never its code).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct LinkInfo {
    /// Its id.
    pub id: String,
    /// Whoever signs in with it may only look.
    pub read_only: bool,
    /// It was already exchanged.
    pub used: bool,
    /// When it was minted, seconds since the Unix epoch.
    pub created_at: u64,
    /// When its code stops (or stopped) working.
    pub expires_at: u64,
    /// Sessions signed in through it.
    pub sessions: usize,
    /// A share link's terminal (its id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// A share link's holder may move files in and out.
    pub files: bool,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// The index of the entry whose secret is `presented`, in time that
/// depends only on the list's length and the secrets' lengths.
fn find<T>(entries: &[T], secret: impl Fn(&T) -> Option<&[u8]>, presented: &[u8]) -> Option<usize> {
    let mut found = None;
    for (index, entry) in entries.iter().enumerate() {
        let hit = secret(entry).is_some_and(|secret| bool::from(secret.ct_eq(presented)));
        if hit && found.is_none() {
            found = Some(index);
        }
    }
    found
}

impl SignIns {
    /// What a live viewer watches: it changes whenever a session may have
    /// ended (expiry is each session's own deadline, [`Self::session_ends`]).
    pub(crate) fn watch_ended(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended.subscribe()
    }

    /// Tells the watchers that sessions may have ended.
    fn ended(&self) {
        self.ended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// When the session `presented` ends by itself (a share link's
    /// expiry), if it does.
    pub(crate) fn session_ends(&self, presented: &[u8]) -> Option<Instant> {
        let inner = self.lock();
        let index = find(&inner.sessions, |s| Some(s.secret.as_slice()), presented)?;
        inner.sessions[index].ends
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new one-time code for `principal`, valid for `lifetime`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a lifetime of zero or past
    /// [`MAX_CODE_LIFETIME`], or with [`MAX_LINKS`] live links already;
    /// `IO` without randomness.
    pub(crate) fn mint(&self, principal: Principal, lifetime: Duration) -> crate::Result<Minted> {
        let by_read_only = principal.read_only;
        self.mint_for(principal, by_read_only, None, false, lifetime)
    }

    /// As [`mint`](Self::mint), for one terminal (its id) when given: a
    /// share link, whose sessions see only that terminal and end when
    /// the link expires. `by_read_only`: a read-only caller mints it (it
    /// counts against those callers' links, not the owner's).
    pub(crate) fn mint_for(
        &self,
        principal: Principal,
        by_read_only: bool,
        terminal: Option<String>,
        files: bool,
        lifetime: Duration,
    ) -> crate::Result<Minted> {
        if files && terminal.is_none() {
            return Err(Error::InvalidInput(
                "files is a share link's grant: name its terminal too".to_owned(),
            ));
        }
        if lifetime.is_zero() || lifetime > MAX_CODE_LIFETIME {
            return Err(Error::InvalidInput(format!(
                "a link's lifetime must be from 1 s to {} days",
                MAX_CODE_LIFETIME.as_secs() / 86_400
            )));
        }
        let code = generate_token()?;
        let id = generate_token()?[..12].to_owned();
        let now = Instant::now();
        let mut inner = self.lock();
        inner.prune(now);
        let counted = inner
            .links
            .iter()
            .filter(|link| {
                link.principal.owner == principal.owner && link.by_read_only == by_read_only
            })
            .count();
        if counted >= MAX_LINKS {
            let whose = if by_read_only {
                " minted by read-only callers"
            } else {
                ""
            };
            return Err(Error::InvalidInput(format!(
                "{MAX_LINKS} links{whose} are live already: revoke some or wait for them to expire"
            )));
        }
        let created_at = unix_now();
        let expires_at = created_at + lifetime.as_secs();
        let read_only = principal.read_only;
        let ends = terminal.as_ref().map(|_| now + lifetime);
        inner.links.push(Link {
            id: id.clone(),
            terminal: terminal.clone(),
            files,
            ends,
            code: Some(code.as_bytes().to_vec()),
            principal,
            by_read_only,
            expires: now + lifetime,
            expires_at,
            created_at,
        });
        Ok(Minted {
            id,
            path: format!("/#code={code}"),
            code,
            expires_at,
            read_only,
            terminal,
            files,
        })
    }

    /// Exchanges a code for a new session: its secret and principal.
    /// `None` for a code that is unknown, used or expired (all three look
    /// the same to the caller).
    pub(crate) fn redeem(&self, code: &str) -> Option<(String, Principal, Option<String>)> {
        // A share link's grant of files rides with its session.
        let secret = generate_token().ok()?;
        let now = Instant::now();
        let mut inner = self.lock();
        inner.prune(now);
        let index = find(&inner.links, |link| link.code.as_deref(), code.as_bytes())?;
        let link = &mut inner.links[index];
        if link.expires <= now {
            return None;
        }
        link.code = None;
        let (principal, id) = (link.principal.clone(), link.id.clone());
        let (terminal, ends, files) = (link.terminal.clone(), link.ends, link.files);
        let mine: Vec<usize> = (0..inner.sessions.len())
            .filter(|&i| inner.sessions[i].principal.owner == principal.owner)
            .collect();
        let evicted = mine.len() >= MAX_SESSIONS;
        if evicted {
            inner.sessions.remove(mine[0]);
        }
        inner.sessions.push(Session {
            secret: secret.as_bytes().to_vec(),
            principal: principal.clone(),
            terminal: terminal.clone(),
            files,
            ends,
            link: id,
        });
        drop(inner);
        if evicted {
            self.ended();
        }
        Some((secret, principal, terminal))
    }

    /// The principal of a session secret, and its one terminal for a
    /// share link's holder with whether it may move files (an ended
    /// share session is none).
    pub(crate) fn session(&self, presented: &[u8]) -> Option<(Principal, Option<(String, bool)>)> {
        let inner = self.lock();
        let index = find(&inner.sessions, |s| Some(s.secret.as_slice()), presented)?;
        let session = &inner.sessions[index];
        if session.ends.is_some_and(|ends| ends <= Instant::now()) {
            return None;
        }
        let scope = session
            .terminal
            .clone()
            .map(|terminal| (terminal, session.files));
        Some((session.principal.clone(), scope))
    }

    /// Ends the session `presented` (sign out); whether there was one.
    pub(crate) fn end_session(&self, presented: &[u8]) -> bool {
        let mut inner = self.lock();
        let found = find(&inner.sessions, |s| Some(s.secret.as_slice()), presented);
        let ended = found.map(|index| inner.sessions.remove(index)).is_some();
        drop(inner);
        if ended {
            self.ended();
        }
        ended
    }

    /// `owner`'s links, oldest first.
    pub(crate) fn list(&self, owner: &crate::registry::OwnerId) -> Vec<LinkInfo> {
        let mut inner = self.lock();
        inner.prune(Instant::now());
        inner
            .links
            .iter()
            .filter(|link| link.principal.owner == *owner)
            .map(|link| LinkInfo {
                id: link.id.clone(),
                read_only: link.principal.read_only,
                used: link.code.is_none(),
                created_at: link.created_at,
                expires_at: link.expires_at,
                sessions: inner.sessions.iter().filter(|s| s.link == link.id).count(),
                terminal: link.terminal.clone(),
                files: link.files,
            })
            .collect()
    }

    /// Revokes `owner`'s link `id`: its code stops working and every
    /// session signed in through it ends. Whether there was such a link.
    pub(crate) fn revoke(&self, owner: &crate::registry::OwnerId, id: &str) -> bool {
        let mut inner = self.lock();
        let before = inner.links.len();
        inner
            .links
            .retain(|link| !(link.id == id && link.principal.owner == *owner));
        if inner.links.len() == before {
            return false;
        }
        inner.sessions.retain(|session| session.link != id);
        drop(inner);
        self.ended();
        true
    }
}

impl Inner {
    /// Keeps each owner's newest [`MAX_LINKS`] links and
    /// [`MAX_SESSIONS`] sessions.
    fn bound(&mut self) {
        fn newest<T>(entries: &mut Vec<T>, owner: impl Fn(&T) -> String, max: usize) {
            let mut seen = std::collections::HashMap::<String, usize>::new();
            let mut keep = vec![false; entries.len()];
            for (index, entry) in entries.iter().enumerate().rev() {
                let n = seen.entry(owner(entry)).or_default();
                *n += 1;
                keep[index] = *n <= max;
            }
            let mut keep = keep.into_iter();
            entries.retain(|_| keep.next().unwrap_or(false));
        }
        newest(
            &mut self.links,
            |l| l.principal.owner.to_string(),
            MAX_LINKS,
        );
        newest(
            &mut self.sessions,
            |s| s.principal.owner.to_string(),
            MAX_SESSIONS,
        );
    }

    /// Forgets links whose code expired unused, and used links no session
    /// came from any more: neither can sign anyone in.
    fn prune(&mut self, now: Instant) {
        self.sessions
            .retain(|session| session.ends.is_none_or(|ends| ends > now));
        let sessions = &self.sessions;
        self.links.retain(|link| match link.code {
            Some(_) => link.expires > now,
            None => sessions.iter().any(|s| s.link == link.id),
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::OwnerId;

    fn alice(read_only: bool) -> Principal {
        Principal {
            owner: OwnerId::new("alice").unwrap(),
            read_only,
        }
    }

    #[test]
    fn a_code_works_once_and_revoking_ends_its_sessions() {
        let signins = SignIns::default();
        let minted = signins.mint(alice(true), DEFAULT_CODE_LIFETIME).unwrap();
        assert_eq!(minted.path, format!("/#code={}", minted.code));
        assert!(signins.redeem("nope").is_none());
        let (secret, principal, _) = signins.redeem(&minted.code).unwrap();
        assert_eq!(principal, alice(true));
        assert!(signins.redeem(&minted.code).is_none(), "used twice");
        assert_eq!(
            signins.session(secret.as_bytes()),
            Some((alice(true), None))
        );
        assert_eq!(signins.session(minted.code.as_bytes()), None);
        let listed = signins.list(&alice(false).owner);
        assert_eq!(
            (listed.len(), listed[0].used, listed[0].sessions),
            (1, true, 1)
        );
        assert!(!signins.revoke(&OwnerId::new("bob").unwrap(), &minted.id));
        assert!(signins.revoke(&alice(false).owner, &minted.id));
        assert_eq!(signins.session(secret.as_bytes()), None);
    }

    #[test]
    fn expired_codes_and_bad_lifetimes_are_refused() {
        let signins = SignIns::default();
        assert!(signins.mint(alice(false), Duration::ZERO).is_err());
        assert!(signins.mint(alice(false), MAX_CODE_LIFETIME * 2).is_err());
        let minted = signins.mint(alice(false), Duration::from_secs(1)).unwrap();
        signins.lock().links[0].expires = Instant::now();
        assert!(signins.redeem(&minted.code).is_none());
        assert!(signins.list(&alice(false).owner).is_empty(), "pruned");
    }

    /// 256 links minted by a read-only caller once made
    /// the owner's `link` fail for as long as they lived.
    #[test]
    fn read_only_callers_cannot_spend_the_owners_links() {
        let signins = SignIns::default();
        for _ in 0..MAX_LINKS {
            signins
                .mint_for(alice(true), true, None, false, MAX_CODE_LIFETIME)
                .unwrap();
        }
        let refused = signins
            .mint_for(alice(true), true, None, false, MAX_CODE_LIFETIME)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("read-only callers"), "{refused}");
        // The owner still mints, read-only links too.
        signins.mint(alice(false), DEFAULT_CODE_LIFETIME).unwrap();
        signins
            .mint_for(alice(true), false, None, false, DEFAULT_CODE_LIFETIME)
            .unwrap();
    }

    /// Revoking and signing out tell the live viewers.
    #[test]
    fn ending_a_session_wakes_its_watchers() {
        let signins = SignIns::default();
        let mut watch = signins.watch_ended();
        let minted = signins.mint(alice(false), DEFAULT_CODE_LIFETIME).unwrap();
        let (secret, ..) = signins.redeem(&minted.code).unwrap();
        assert!(!watch.has_changed().unwrap());
        assert!(signins.revoke(&alice(false).owner, &minted.id));
        assert!(watch.has_changed().unwrap());
        watch.mark_unchanged();
        assert_eq!(signins.session(secret.as_bytes()), None);
        let code = signins
            .mint(alice(false), DEFAULT_CODE_LIFETIME)
            .unwrap()
            .code;
        let (secret, ..) = signins.redeem(&code).unwrap();
        assert!(signins.end_session(secret.as_bytes()));
        assert!(watch.has_changed().unwrap());
    }

    #[test]
    fn signing_out_ends_one_session() {
        let signins = SignIns::default();
        let code = signins
            .mint(alice(false), DEFAULT_CODE_LIFETIME)
            .unwrap()
            .code;
        let (secret, ..) = signins.redeem(&code).unwrap();
        assert!(signins.end_session(secret.as_bytes()));
        assert!(!signins.end_session(secret.as_bytes()));
        assert_eq!(signins.session(secret.as_bytes()), None);
    }
}
