//! Who a request acts as: tokens (from `--token`, `--token-file` or drawn
//! at random), the one place a client carries a credential
//! (`Authorization: Bearer`, or on a WebSocket the `bearer.` subprotocol
//! beside `tmux-engine`), and constant-time comparison. No cookie and no
//! `?token=`: a cookie reaches every port of the host, a URL is kept in
//! histories and logs. Sessions are `signin/`'s; no routing, no
//! registry calls, and no origin or host policy here (`guard.rs`).

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, SEC_WEBSOCKET_PROTOCOL};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use crate::registry::OwnerId;
use crate::{Error, Result};

/// A token shorter than this is refused: it could be guessed.
pub(crate) const MIN_TOKEN_LEN: usize = 16;

/// What an authenticated request may do, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The owner whose terminals it sees.
    pub owner: OwnerId,
    /// It may only look: never write, resize, spawn, kill or signal.
    pub read_only: bool,
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Each request must carry one of these tokens.
    Tokens(Tokens),
    /// `--no-auth`: every request acts as this principal (loopback only;
    /// the CLI refuses it elsewhere).
    Open(Principal),
}

/// The accepted tokens, each acting as its principal.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Principal)>,
}

impl Tokens {
    /// One read-write token for `owner`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a token shorter than `MIN_TOKEN_LEN` (16 bytes) or with
    /// characters other than printable ASCII.
    pub fn single(token: &str, owner: OwnerId) -> Result<Tokens> {
        check_token(token)?;
        Ok(Tokens {
            entries: vec![(
                token.as_bytes().to_vec(),
                Principal {
                    owner,
                    read_only: false,
                },
            )],
        })
    }

    /// A token file: one `TOKEN OWNER [read-only]` per line; blank lines
    /// and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the line: a missing owner, an invalid owner
    /// or token, an unknown third word, a token listed twice, no tokens.
    pub fn parse(text: &str) -> Result<Tokens> {
        let mut tokens = Tokens::default();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad =
                |why: &str| Error::InvalidInput(format!("token file line {}: {why}", number + 1));
            let words: Vec<&str> = line.split_whitespace().collect();
            let (token, owner, read_only) = match words.as_slice() {
                [token, owner] => (*token, *owner, false),
                [token, owner, "read-only"] => (*token, *owner, true),
                [_, _, other] => return Err(bad(&format!("{other:?} is not read-only"))),
                _ => return Err(bad("expected TOKEN OWNER [read-only]")),
            };
            check_token(token).map_err(|e| bad(&e.to_string()))?;
            let owner = OwnerId::new(owner).map_err(|e| bad(&e.to_string()))?;
            if tokens.find(token.as_bytes()).is_some() {
                return Err(bad("the token is listed twice"));
            }
            tokens
                .entries
                .push((token.as_bytes().to_vec(), Principal { owner, read_only }));
        }
        if tokens.entries.is_empty() {
            return Err(Error::InvalidInput(
                "the token file has no tokens".to_owned(),
            ));
        }
        Ok(tokens)
    }

    /// The principal of `presented`, comparing against every token in
    /// constant time (per token length), so timing tells nothing about
    /// which token, or how much of one, matched.
    pub(crate) fn find(&self, presented: &[u8]) -> Option<&Principal> {
        let mut found = Choice::from(0);
        let mut index = 0u64;
        for (i, (token, _)) in self.entries.iter().enumerate() {
            // The first hit wins; no branch depends on a comparison.
            let hit = token.as_slice().ct_eq(presented) & !found;
            index = u64::conditional_select(&index, &(i as u64), hit);
            found |= hit;
        }
        let index = usize::try_from(index).expect("an index of the token list fits usize");
        bool::from(found).then(|| &self.entries[index].1)
    }
}

/// Refuses tokens that are short or would not survive a header or a
/// token file line.
fn check_token(token: &str) -> Result<()> {
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::InvalidInput(format!(
            "a token must be at least {MIN_TOKEN_LEN} printable ASCII characters without spaces"
        )));
    }
    Ok(())
}

/// A fresh random token: 128 bits as 32 lowercase hex digits.
///
/// # Errors
/// `IO` when the OS has no randomness to give.
pub fn generate_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::io("drawing a random token", std::io::Error::other(e)))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The subprotocol the page asks for (and the bridge selects) on the
/// WebSocket; the credential rides beside it as `bearer.SECRET`, since a
/// browser cannot set `Authorization` on a WebSocket.
pub(crate) const WS_PROTOCOL: &str = "tmux-engine";

/// The prefix of the subprotocol that carries a credential.
const WS_BEARER: &str = "bearer.";

impl Auth {
    /// Every owner a credential here acts as (each once).
    pub(crate) fn owners(&self) -> Vec<OwnerId> {
        let mut owners: Vec<OwnerId> = match self {
            Auth::Open(principal) => vec![principal.owner.clone()],
            Auth::Tokens(tokens) => tokens
                .entries
                .iter()
                .map(|(_, principal)| principal.owner.clone())
                .collect(),
        };
        owners.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        owners.dedup();
        owners
    }

    /// The principal of a token (never a session: those are
    /// `signin/`'s), or `None`. Under [`Auth::Open`] every request is
    /// the open principal.
    pub(crate) fn token_principal(&self, presented: Option<&str>) -> Option<Principal> {
        match self {
            Auth::Open(principal) => Some(principal.clone()),
            Auth::Tokens(tokens) => tokens.find(presented?.as_bytes()).cloned(),
        }
    }
}

/// The credential of `Authorization: Bearer`, the only carrier of HTTP
/// requests: never a query parameter (URLs are kept in histories and
/// logs) nor a cookie (a browser sends cookies to every port of a host).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    Some(value.strip_prefix("Bearer ")?.trim().to_owned())
}

/// The credential of a WebSocket upgrade: `Authorization: Bearer` (a
/// script), else a `bearer.SECRET` entry of `Sec-WebSocket-Protocol` (the
/// page).
pub(crate) fn ws_bearer(headers: &HeaderMap) -> Option<String> {
    bearer(headers).or_else(|| {
        headers
            .get_all(SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .find_map(|protocol| protocol.trim().strip_prefix(WS_BEARER).map(str::to_owned))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use axum::http::HeaderValue;

    fn owner(name: &str) -> OwnerId {
        OwnerId::new(name).unwrap()
    }

    #[test]
    fn token_files() {
        let tokens =
            Tokens::parse("# comment\n\naaaaaaaaaaaaaaaa alice\nbbbbbbbbbbbbbbbb bob read-only\n")
                .unwrap();
        assert_eq!(
            tokens.find(b"aaaaaaaaaaaaaaaa"),
            Some(&Principal {
                owner: owner("alice"),
                read_only: false
            })
        );
        assert!(tokens.find(b"bbbbbbbbbbbbbbbb").unwrap().read_only);
        assert_eq!(tokens.find(b"bbbbbbbbbbbbbbb"), None);
        assert_eq!(tokens.find(b""), None);
        for bad in [
            "",
            "# only a comment\n",
            "aaaaaaaaaaaaaaaa",
            "short alice",
            "aaaaaaaaaaaaaaaa alice admin",
            "aaaaaaaaaaaaaaaa \u{7}",
            "aaaaaaaaaaaaaaaa alice\naaaaaaaaaaaaaaaa bob",
        ] {
            assert_eq!(
                Tokens::parse(bad).unwrap_err().code(),
                ErrorCode::InvalidInput,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn only_bearer_carries_a_credential() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert("cookie", HeaderValue::from_static("tmux_engine_token=x"));
        assert_eq!(bearer(&headers), None);
        headers.insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("tmux-engine, bearer.fromprotocol"),
        );
        assert_eq!(bearer(&headers), None, "the subprotocol is the WebSocket's");
        assert_eq!(ws_bearer(&headers).as_deref(), Some("fromprotocol"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer fromheader"));
        assert_eq!(bearer(&headers).as_deref(), Some("fromheader"));
        assert_eq!(ws_bearer(&headers).as_deref(), Some("fromheader"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic xyz"));
        assert_eq!(bearer(&headers), None);
        let auth = Auth::Tokens(Tokens::single("aaaaaaaaaaaaaaaa", owner("alice")).unwrap());
        assert_eq!(
            auth.token_principal(Some("aaaaaaaaaaaaaaaa"))
                .unwrap()
                .owner,
            owner("alice")
        );
        assert_eq!(auth.token_principal(Some("aaaaaaaaaaaaaaab")), None);
        assert_eq!(auth.token_principal(None), None);
    }

    #[test]
    fn generated_tokens_are_long_and_distinct() {
        let a = generate_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, generate_token().unwrap());
        Tokens::single(&a, owner("x")).unwrap();
    }
}
