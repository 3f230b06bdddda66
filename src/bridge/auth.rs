//! Who a request acts as: tokens (from `--token`, `--token-file` or drawn
//! at random), the three places a client may carry one (`Authorization:
//! Bearer`, `?token=`, the page's cookies), constant-time comparison, and
//! the cookie itself. No routing, no registry calls, and no origin or host
//! policy here (`guard.rs`).

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use super::frames::form_pairs;
use crate::registry::OwnerId;
use crate::{Error, Result};

/// The cookie the page gets after a `?token=` load.
pub(crate) const COOKIE_NAME: &str = "tmux_engine_token";

/// A token shorter than this is refused: it could be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

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
    /// `INVALID_INPUT` for a token shorter than [`MIN_TOKEN_LEN`] or with
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

/// Where a request's token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carrier {
    /// `Authorization: Bearer`: only a program can have set it.
    Bearer,
    /// `?token=` in the URL.
    Query,
    /// The page's cookie, which a browser attaches by itself (hence the
    /// `Origin` a write carried only by it must show).
    Cookie,
}

impl Auth {
    /// The principal a request acts as, from its headers and query, or
    /// `None` (answer 401 / close 4401).
    pub(crate) fn authenticate(&self, headers: &HeaderMap, query: &str) -> Option<Principal> {
        self.identify(headers, query)
            .map(|(principal, _)| principal)
    }

    /// As [`authenticate`](Auth::authenticate), with the carrier the
    /// token came in (`None` under [`Auth::Open`]).
    pub(crate) fn identify(
        &self,
        headers: &HeaderMap,
        query: &str,
    ) -> Option<(Principal, Option<Carrier>)> {
        match self {
            Auth::Open(principal) => Some((principal.clone(), None)),
            Auth::Tokens(tokens) => {
                let (carrier, presented) = presented_tokens(headers, query)?;
                // Of several cookies a valid one wins: a junk cookie planted
                // by a page on another port must not lock the user out.
                presented
                    .iter()
                    .find_map(|token| tokens.find(token.as_bytes()))
                    .map(|principal| (principal.clone(), Some(carrier)))
            }
        }
    }

    /// The principal of the request's valid cookie, if it has one (never
    /// under [`Auth::Open`], which sets no cookies).
    pub(crate) fn cookie_principal(&self, headers: &HeaderMap) -> Option<Principal> {
        let Auth::Tokens(tokens) = self else {
            return None;
        };
        cookie_tokens(headers)
            .iter()
            .find_map(|token| tokens.find(token.as_bytes()))
            .cloned()
    }
}

/// The tokens a request carries and where: the `Authorization: Bearer`
/// header, else `?token=`, else every token cookie. The first carrier
/// present decides; only cookies come several (a browser sends each
/// `tmux_engine_token` whose path and domain match).
pub(crate) fn presented_tokens(headers: &HeaderMap, query: &str) -> Option<(Carrier, Vec<String>)> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let token = value.strip_prefix("Bearer ")?.trim().to_owned();
        return Some((Carrier::Bearer, vec![token]));
    }
    if let Some(token) = query_token(query) {
        return Some((Carrier::Query, vec![token]));
    }
    let cookies = cookie_tokens(headers);
    (!cookies.is_empty()).then_some((Carrier::Cookie, cookies))
}

/// Every `tmux_engine_token` cookie's value, in the order sent.
fn cookie_tokens(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim_matches('"').to_owned())
        .collect()
}

/// The `token` parameter of a query string.
pub(crate) fn query_token(query: &str) -> Option<String> {
    form_pairs(query).find_map(|(key, value)| (key == "token").then_some(value))
}

/// The `Set-Cookie` value that keeps the page's token: not readable by
/// scripts, never sent by another site's requests, scoped to `path` (the
/// base path, or `/`), and `Secure` when the page is served over https.
pub(crate) fn cookie(token: &str, path: &str, secure: bool) -> String {
    let path = if path.is_empty() { "/" } else { path };
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE_NAME}={token}; Path={path}; HttpOnly; SameSite=Strict{secure}")
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
    fn carriers() {
        let first = |headers: &HeaderMap, query: &str| {
            presented_tokens(headers, query).map(|(carrier, tokens)| (carrier, tokens[0].clone()))
        };
        let mut headers = HeaderMap::new();
        assert_eq!(presented_tokens(&headers, ""), None);
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=b; tmux_engine_token=fromcookie"),
        );
        assert_eq!(
            first(&headers, ""),
            Some((Carrier::Cookie, "fromcookie".to_owned()))
        );
        assert_eq!(
            first(&headers, "x=1&token=q%2Bq"),
            Some((Carrier::Query, "q+q".to_owned()))
        );
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer fromheader"));
        assert_eq!(
            first(&headers, "token=q"),
            Some((Carrier::Bearer, "fromheader".to_owned()))
        );
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic xyz"));
        assert_eq!(presented_tokens(&headers, "token=q"), None);
    }

    #[test]
    fn a_valid_cookie_wins_over_junk_ones() {
        let auth = Auth::Tokens(Tokens::single("aaaaaaaaaaaaaaaa", owner("alice")).unwrap());
        for cookies in [
            "tmux_engine_token=junk; tmux_engine_token=aaaaaaaaaaaaaaaa",
            "tmux_engine_token=aaaaaaaaaaaaaaaa; tmux_engine_token=junk",
            "tmux_engine_token=; x=y; tmux_engine_token=aaaaaaaaaaaaaaaa",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(COOKIE, HeaderValue::from_static(cookies));
            let (principal, carrier) = auth.identify(&headers, "").unwrap();
            assert_eq!(
                (principal.owner, carrier),
                (owner("alice"), Some(Carrier::Cookie))
            );
            assert_eq!(
                auth.cookie_principal(&headers).unwrap().owner,
                owner("alice")
            );
        }
        let mut junk = HeaderMap::new();
        junk.append(COOKIE, HeaderValue::from_static("tmux_engine_token=junk"));
        assert_eq!(auth.authenticate(&junk, ""), None);
        junk.append(
            COOKIE,
            HeaderValue::from_static("tmux_engine_token=aaaaaaaaaaaaaaaa"),
        );
        assert!(auth.authenticate(&junk, "").is_some(), "two Cookie headers");
    }

    #[test]
    fn cookies_follow_the_base_path_and_scheme() {
        assert_eq!(
            cookie("t", "", false),
            "tmux_engine_token=t; Path=/; HttpOnly; SameSite=Strict"
        );
        assert_eq!(
            cookie("t", "/term", true),
            "tmux_engine_token=t; Path=/term; HttpOnly; SameSite=Strict; Secure"
        );
    }

    #[test]
    fn generated_tokens_are_long_and_distinct() {
        let a = generate_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, generate_token().unwrap());
        Tokens::single(&a, owner("x")).unwrap();
    }
}
