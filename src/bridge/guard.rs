//! The front door, before any token is looked at: which names a request
//! may address the bridge by (`Host`, against DNS rebinding), which
//! origins may write or attach (against foreign pages), and what a body
//! must be labelled (`application/json`, which no page can send to another
//! origin without a CORS preflight this server never grants). Matching is
//! sans-IO; [`front_door`] applies it to every route. Tokens and cookies
//! are `auth.rs`'s.

use std::net::{IpAddr, Ipv6Addr};

use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, TRANSFER_ENCODING};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::warn;

use super::api::ApiError;
use super::{AppState, BridgeConfig};

/// The Fetch metadata header browsers add to every request they make.
pub(crate) const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// A host and port as a request names them, normalized: the host
/// lowercase (an IPv6 address bracketed, in its canonical form), the port
/// `None` when absent or the scheme's default (`:80` under http, `:443`
/// under https), so `name` and `name:80` are the same authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    /// Parses `host[:port]` or `[v6][:port]`; `None` for anything else
    /// (userinfo, a path, an empty or out-of-range port, odd characters).
    fn parse(text: &str, https: bool) -> Option<Authority> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (inner, after) = rest.split_once(']')?;
            let ip: Ipv6Addr = inner.parse().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (format!("[{ip}]"), port)
        } else {
            let (host, port) = match text.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            };
            let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if host.is_empty() || !host.chars().all(name_char) {
                return None;
            }
            (host.to_ascii_lowercase(), port)
        };
        let port = match port {
            None => None,
            Some(digits) => {
                if digits.is_empty()
                    || digits.len() > 5
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                Some(digits.parse::<u16>().ok().filter(|port| *port != 0)?)
            }
        };
        Some(Authority::new(host, port, https))
    }

    fn new(host: String, port: Option<u16>, https: bool) -> Authority {
        let default = if https { 443 } else { 80 };
        Authority {
            host,
            port: port.filter(|port| *port != default),
        }
    }

    fn of_ip(ip: IpAddr, port: u16, https: bool) -> Authority {
        let host = match ip {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        Authority::new(host, Some(port), https)
    }
}

impl std::fmt::Display for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// One name the bridge answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    authority: Authority,
    /// `--allow-host NAME` without a port: a proxy in front may have
    /// stripped it, so any port (or none) matches.
    any_port: bool,
}

impl HostRule {
    fn matches(&self, authority: &Authority) -> bool {
        self.authority.host == authority.host
            && (self.any_port || self.authority.port == authority.port)
    }
}

/// A web origin (`scheme://host[:port]`), normalized like [`Authority`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    https: bool,
    authority: Authority,
}

impl Origin {
    /// Parses a serialized origin (a trailing `/` tolerated, as people
    /// write them in flags); `None` for `null`, other schemes, paths.
    fn parse(text: &str) -> Option<Origin> {
        let text = text.trim().to_ascii_lowercase();
        let (https, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else {
            (false, text.strip_prefix("http://")?)
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        Some(Origin {
            https,
            authority: Authority::parse(rest, https)?,
        })
    }
}

/// Checks `--allow-host` text: `NAME` or `NAME:PORT` (an IPv6 address
/// bracketed).
///
/// # Errors
/// `INVALID_INPUT` naming the value.
pub fn check_allow_host(text: &str) -> crate::Result<()> {
    host_rule(text, false).map(drop).ok_or_else(|| {
        crate::Error::InvalidInput(format!(
            "allowed host {text:?} is not NAME or NAME:PORT (IPv6 in brackets)"
        ))
    })
}

/// Checks `--allow-origin` text: `http://HOST[:PORT]` or
/// `https://HOST[:PORT]`.
///
/// # Errors
/// `INVALID_INPUT` naming the value.
pub fn check_allow_origin(text: &str) -> crate::Result<()> {
    Origin::parse(text).map(drop).ok_or_else(|| {
        crate::Error::InvalidInput(format!(
            "allowed origin {text:?} is not scheme://HOST[:PORT] (http or https)"
        ))
    })
}

fn host_rule(text: &str, https: bool) -> Option<HostRule> {
    let authority = Authority::parse(text, https)?;
    // An explicit port, even the default one, is exact.
    let any_port = if text.starts_with('[') {
        !text.contains("]:")
    } else {
        !text.contains(':')
    };
    Some(HostRule {
        authority,
        any_port,
    })
}

/// The policy of one bridge, computed once from its [`BridgeConfig`].
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    https: bool,
    hosts: Vec<HostRule>,
    origins: Vec<Origin>,
}

/// Why the front door turned a request away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 421 `FORBIDDEN_HOST`.
    Host(String),
    /// 403 `FORBIDDEN_ORIGIN`.
    Origin(String),
    /// 415 `UNSUPPORTED_MEDIA_TYPE`.
    MediaType(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let error = match self {
            Refusal::Host(message) => {
                ApiError::new(StatusCode::MISDIRECTED_REQUEST, "FORBIDDEN_HOST", message)
            }
            Refusal::Origin(message) => {
                ApiError::new(StatusCode::FORBIDDEN, "FORBIDDEN_ORIGIN", message)
            }
            Refusal::MediaType(message) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UNSUPPORTED_MEDIA_TYPE",
                message,
            ),
        };
        error.into_response()
    }
}

impl Guard {
    /// The names: the listen address; on loopback (or the unspecified
    /// address, which answers on loopback too) `127.0.0.1`, `localhost`
    /// and `[::1]` with its port (names no attacker's DNS can hand out);
    /// each allowed host; the host of each allowed origin. With no listen
    /// address and no allowed hosts, nothing is allowed.
    pub(crate) fn new(config: &BridgeConfig) -> Guard {
        let https = config.https;
        let mut hosts = Vec::new();
        let exact = |authority| HostRule {
            authority,
            any_port: false,
        };
        if let Some(listen) = config.listen {
            hosts.push(exact(Authority::of_ip(listen.ip(), listen.port(), https)));
            if listen.ip().is_loopback() || listen.ip().is_unspecified() {
                for name in ["127.0.0.1", "localhost", "[::1]"] {
                    hosts.push(exact(Authority::new(
                        name.to_owned(),
                        Some(listen.port()),
                        https,
                    )));
                }
            }
        }
        for text in &config.allow_hosts {
            match host_rule(text, https) {
                Some(rule) => hosts.push(rule),
                None => warn!(host = %text, "ignoring a malformed allowed host"),
            }
        }
        let mut origins = Vec::new();
        for text in &config.allow_origins {
            match Origin::parse(text) {
                Some(origin) => {
                    // The proxy serving that origin forwards its Host.
                    hosts.push(exact(Authority::new(
                        origin.authority.host.clone(),
                        origin.authority.port,
                        https,
                    )));
                    origins.push(origin);
                }
                None => warn!(origin = %text, "ignoring a malformed allowed origin"),
            }
        }
        Guard {
            https,
            hosts,
            origins,
        }
    }

    /// The allowed authority a request addresses: its `Host` header and
    /// its URI's authority (absolute-form, HTTP/2's `:authority`), at
    /// least one present, agreeing, and one of the bridge's names.
    pub(crate) fn host(&self, headers: &HeaderMap, uri: &Uri) -> Result<Authority, Refusal> {
        let mut values = headers.get_all(HOST).iter();
        let header = match (values.next(), values.next()) {
            (Some(_), Some(_)) => return Err(Refusal::Host("several Host headers".to_owned())),
            (one, None) => one,
            (None, Some(_)) => None,
        };
        let header = match header {
            None => None,
            Some(value) => Some(self.authority(value.to_str().ok())?),
        };
        let in_uri = match uri.authority() {
            None => None,
            Some(authority) => Some(self.authority(Some(authority.as_str()))?),
        };
        let authority = match (header, in_uri) {
            (Some(header), Some(in_uri)) if header != in_uri => {
                return Err(Refusal::Host(format!(
                    "the Host header {header} and the request target's {in_uri} differ"
                )));
            }
            (Some(authority), _) | (None, Some(authority)) => authority,
            (None, None) => return Err(Refusal::Host("the Host header is missing".to_owned())),
        };
        if self.hosts.iter().any(|rule| rule.matches(&authority)) {
            Ok(authority)
        } else {
            Err(Refusal::Host(format!(
                "{authority} is not a name of this server (serve --allow-host adds one)"
            )))
        }
    }

    fn authority(&self, text: Option<&str>) -> Result<Authority, Refusal> {
        text.and_then(|text| Authority::parse(text, self.https))
            .ok_or_else(|| Refusal::Host("the Host header is malformed".to_owned()))
    }

    /// Whether `origin` (a header's text) is the page's own (this scheme,
    /// `host`) or an allowed one.
    fn origin_ok(&self, origin: &str, host: &Authority) -> bool {
        let Some(origin) = Origin::parse(origin) else {
            return false;
        };
        (origin.https == self.https && origin.authority == *host) || self.origins.contains(&origin)
    }

    /// The write rules for a request to `host`: anything but `GET` and
    /// `HEAD` that carries `Origin` or `Sec-Fetch-Site` must come from an
    /// allowed origin, and a body must be `application/json` (an
    /// `upload`'s may be `application/octet-stream`). `OPTIONS`
    /// is not exempt: no route answers it, and a CORS preflight refused
    /// here keeps the browser from sending the real request.
    pub(crate) fn check_write(
        &self,
        method: &Method,
        headers: &HeaderMap,
        host: &Authority,
        upload: bool,
    ) -> Result<(), Refusal> {
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        if headers.contains_key(ORIGIN) || headers.contains_key(SEC_FETCH_SITE) {
            self.check_origin(headers, host)?;
        }
        let length = headers
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
        let has_body =
            length.is_some_and(|length| length > 0) || headers.contains_key(TRANSFER_ENCODING);
        if has_body && !is_json(headers.get(CONTENT_TYPE)) {
            // An upload's body is bytes; that label needs a CORS preflight
            // too, so no other page can send it either.
            if upload && is_type(headers.get(CONTENT_TYPE), "application/octet-stream") {
                return Ok(());
            }
            return Err(Refusal::MediaType(
                "a request body must be Content-Type: application/json \
                 (an upload's: application/octet-stream)"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// The request's `Origin` is present, single and allowed for `host`.
    pub(crate) fn check_origin(
        &self,
        headers: &HeaderMap,
        host: &Authority,
    ) -> Result<(), Refusal> {
        let mut values = headers.get_all(ORIGIN).iter();
        match (values.next(), values.next()) {
            (Some(origin), None) if origin.to_str().is_ok_and(|o| self.origin_ok(o, host)) => {
                Ok(())
            }
            (None, _) => Err(Refusal::Origin(
                "this request must carry the page's Origin".to_owned(),
            )),
            _ => Err(Refusal::Origin(
                "the request's Origin is neither the page's own nor an allowed one".to_owned(),
            )),
        }
    }

    /// Whether a WebSocket upgrade may attach: no `Origin` (not a
    /// browser), or the page's own origin, i.e. this bridge's scheme and
    /// the request's `Host` provided that `Host` is one of the bridge's
    /// names (never a name the request made up), or an allowed origin.
    pub fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        if !headers.contains_key(ORIGIN) {
            return true;
        }
        match self.host(headers, &Uri::default()) {
            Ok(host) => self.check_origin(headers, &host).is_ok(),
            Err(_) => false,
        }
    }
}

/// `application/json`, with parameters (`; charset=utf-8`) or without.
fn is_json(value: Option<&HeaderValue>) -> bool {
    is_type(value, "application/json")
}

/// The media type `kind`, with parameters or without.
fn is_type(value: Option<&HeaderValue>, kind: &str) -> bool {
    value
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|named| named.trim().eq_ignore_ascii_case(kind))
}

/// The middleware outside everything else, authentication included:
/// refuses a foreign `Host` (421) and a cross-origin or mislabelled write
/// (403, 415), with `--no-auth` too. An HTTP/2 request's `:authority`
/// becomes its `Host`, so later checks read headers alone.
pub(crate) async fn front_door(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let host = match state.guard.host(request.headers(), request.uri()) {
        Ok(host) => host,
        Err(refusal) => return refusal.into_response(),
    };
    let upload = super::files::is_upload(request.method(), request.uri().path());
    if let Err(refusal) =
        state
            .guard
            .check_write(request.method(), request.headers(), &host, upload)
    {
        return refusal.into_response();
    }
    if !request.headers().contains_key(HOST)
        && let Some(authority) = request.uri().authority()
        && let Ok(value) = HeaderValue::from_str(authority.as_str())
    {
        request.headers_mut().insert(HOST, value);
    }
    next.run(request).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "guard_tests.rs"]
mod tests;
