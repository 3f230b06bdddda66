//! Who a request acts as: tokens (from `--token`, `--token-file` or drawn
//! at random), the three places a client may carry one (`Authorization:
//! Bearer`, `?token=`, the page's cookie), constant-time comparison, and
//! the WebSocket origin check. No routing and no registry calls here.

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use super::frames::form_pairs;
use crate::registry::OwnerId;
use crate::{Error, Result};

/// The cookie the page gets after a `?token=` load.
pub const COOKIE_NAME: &str = "tmux_engine_token";

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
    pub fn find(&self, presented: &[u8]) -> Option<&Principal> {
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

impl Auth {
    /// The principal a request acts as, from its headers and query, or
    /// `None` (answer 401 / close 4401).
    pub fn authenticate(&self, headers: &HeaderMap, query: &str) -> Option<Principal> {
        match self {
            Auth::Open(principal) => Some(principal.clone()),
            Auth::Tokens(tokens) => {
                let presented = presented_token(headers, query)?;
                tokens.find(presented.as_bytes()).cloned()
            }
        }
    }
}

/// The token a request carries: the `Authorization: Bearer` header, else
/// `?token=`, else the page's cookie. The first carrier present decides.
pub fn presented_token(headers: &HeaderMap, query: &str) -> Option<String> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let value = value.to_str().ok()?;
        return value.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
    }
    if let Some(token) = query_token(query) {
        return Some(token);
    }
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
}

/// The `token` parameter of a query string.
pub fn query_token(query: &str) -> Option<String> {
    form_pairs(query).find_map(|(key, value)| (key == "token").then_some(value))
}

/// The `Set-Cookie` value that keeps the page's token: not readable by
/// scripts, never sent by another site's requests.
pub fn cookie(token: &str) -> String {
    format!("{COOKIE_NAME}={token}; Path=/; HttpOnly; SameSite=Strict")
}

/// Whether a WebSocket upgrade's `Origin` may attach: absent (not a
/// browser), the page's own origin (`http://` + the `Host` header), or one
/// of `allowed` (compared without case and trailing slash).
pub fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let origin = normalize_origin(origin);
    let own = headers
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .map(|host| normalize_origin(&format!("http://{host}")));
    own.as_deref() == Some(origin.as_str())
        || allowed
            .iter()
            .any(|allow| normalize_origin(allow) == origin)
}

/// Lowercase, no trailing slash, no default port.
fn normalize_origin(origin: &str) -> String {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    match origin.strip_suffix(":80") {
        Some(bare) if bare.starts_with("http://") => bare.to_owned(),
        _ => match origin.strip_suffix(":443") {
            Some(bare) if bare.starts_with("https://") => bare.to_owned(),
            _ => origin,
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
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
                "INVALID_INPUT",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn carriers() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented_token(&headers, ""), None);
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=b; tmux_engine_token=fromcookie"),
        );
        assert_eq!(presented_token(&headers, "").as_deref(), Some("fromcookie"));
        assert_eq!(
            presented_token(&headers, "x=1&token=q%2Bq").as_deref(),
            Some("q+q")
        );
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer fromheader"));
        assert_eq!(
            presented_token(&headers, "token=q").as_deref(),
            Some("fromheader")
        );
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic xyz"));
        assert_eq!(presented_token(&headers, "token=q"), None);
    }

    #[test]
    fn origins() {
        let check = |origin: Option<&'static str>, allowed: &[&str]| {
            let mut headers = HeaderMap::new();
            headers.insert(HOST, HeaderValue::from_static("127.0.0.1:7681"));
            if let Some(origin) = origin {
                headers.insert(ORIGIN, HeaderValue::from_static(origin));
            }
            let allowed: Vec<String> = allowed.iter().map(|s| (*s).to_owned()).collect();
            origin_allowed(&headers, &allowed)
        };
        assert!(check(None, &[]));
        assert!(check(Some("http://127.0.0.1:7681"), &[]));
        assert!(!check(Some("http://127.0.0.1:7682"), &[]));
        assert!(!check(Some("https://127.0.0.1:7681"), &[]));
        assert!(!check(Some("null"), &[]));
        assert!(!check(Some("http://evil.example"), &[]));
        assert!(check(
            Some("https://term.example"),
            &["https://term.example/"]
        ));
    }

    #[test]
    fn generated_tokens_are_long_and_distinct() {
        let a = generate_token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, generate_token().unwrap());
        Tokens::single(&a, owner("x")).unwrap();
    }
}
