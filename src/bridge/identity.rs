//! Identity from a trusted proxy: behind a company's SSO proxy
//! (oauth2-proxy, an ingress with auth), the user comes in a header the
//! proxy sets (`--user-header X-Forwarded-User`), and the bridge takes it
//! as the owner, but only from a peer address inside `--trusted-proxy
//! CIDR` (or `unix`: any peer of serve's own Unix socket, which is 0600).
//! The same header from anyone else is refused (403 `UNTRUSTED_PROXY`),
//! never ignored: a proxy that is not listed is a deployment error to see
//! at once, and a client forging the header is told no.
//!
//! Sans IO: the accept loop puts the [`Peer`] into each request, this file
//! judges it.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, HeaderName};

use super::auth::Principal;
use crate::registry::OwnerId;
use crate::{Error, Result};

/// Who is at the other end of a connection (a request extension set by
/// the accept loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A TCP peer.
    Tcp(SocketAddr),
    /// A peer of serve's Unix socket.
    Unix,
}

/// One `--trusted-proxy` value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trusted {
    /// An address range.
    Net(IpAddr, u8),
    /// Every peer of the Unix socket.
    Unix,
}

impl Trusted {
    fn parse(text: &str) -> Result<Trusted> {
        if text == "unix" {
            return Ok(Trusted::Unix);
        }
        let bad = || {
            Error::InvalidInput(format!(
                "--trusted-proxy {text:?}: expected ADDR/BITS (10.0.0.0/8, ::1/128), ADDR, or unix"
            ))
        };
        let (addr, bits) = match text.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            Some(bits) => bits
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        Ok(Trusted::Net(addr, bits))
    }

    fn contains(&self, peer: Peer) -> bool {
        match (self, peer) {
            (Trusted::Unix, Peer::Unix) => true,
            (Trusted::Net(net, bits), Peer::Tcp(addr)) => {
                // An IPv4 peer on a dual-stack socket comes as ::ffff:a.b.c.d.
                let ip = match addr.ip() {
                    IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
                    v4 => v4,
                };
                match (net, ip) {
                    (IpAddr::V4(net), IpAddr::V4(ip)) => {
                        let mask = u32::MAX.checked_shl(32 - u32::from(*bits)).unwrap_or(0);
                        u32::from(*net) & mask == u32::from(ip) & mask
                    }
                    (IpAddr::V6(net), IpAddr::V6(ip)) => {
                        let mask = u128::MAX.checked_shl(128 - u32::from(*bits)).unwrap_or(0);
                        u128::from(*net) & mask == u128::from(ip) & mask
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// The proxies whose user header is believed, and that header.
#[derive(Debug, Clone)]
pub struct TrustedProxy {
    trusted: Vec<Trusted>,
    header: HeaderName,
}

/// What a request's proxy header says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Vouched {
    /// No user header: authenticate as usual.
    Absent,
    /// A trusted proxy named this user.
    User(Principal),
    /// The header came from a peer that is not a trusted proxy, or named
    /// no valid owner.
    Refused(String),
}

impl TrustedProxy {
    /// `--trusted-proxy` values (at least one) and `--user-header`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a bad range or header name, or no range.
    pub fn new(trusted: &[String], header: &str) -> Result<TrustedProxy> {
        if trusted.is_empty() {
            return Err(Error::InvalidInput(
                "--user-header needs at least one --trusted-proxy".to_owned(),
            ));
        }
        let header = HeaderName::try_from(header).map_err(|_| {
            Error::InvalidInput(format!("--user-header {header:?} is not a header name"))
        })?;
        Ok(TrustedProxy {
            trusted: trusted
                .iter()
                .map(|t| Trusted::parse(t))
                .collect::<Result<_>>()?,
            header,
        })
    }

    /// What `headers`, from `peer`, say of the user.
    pub(crate) fn vouch(&self, headers: &HeaderMap, peer: Option<Peer>) -> Vouched {
        let mut values = headers.get_all(&self.header).iter();
        let Some(value) = values.next() else {
            return Vouched::Absent;
        };
        let trusted = peer.is_some_and(|peer| self.trusted.iter().any(|t| t.contains(peer)));
        if !trusted {
            return Vouched::Refused(format!(
                "{} comes from a peer that is not a --trusted-proxy",
                self.header
            ));
        }
        if values.next().is_some() {
            return Vouched::Refused(format!("{} is given twice", self.header));
        }
        match value.to_str().ok().map(|v| OwnerId::new(v.trim())) {
            Some(Ok(owner)) => Vouched::User(Principal {
                owner,
                read_only: false,
            }),
            _ => Vouched::Refused(format!("{} names no valid owner", self.header)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn proxy(trusted: &[&str]) -> TrustedProxy {
        let trusted: Vec<String> = trusted.iter().map(|t| (*t).to_owned()).collect();
        TrustedProxy::new(&trusted, "X-Forwarded-User").unwrap()
    }

    fn headers(user: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(user) = user {
            headers.insert("x-forwarded-user", user.parse().unwrap());
        }
        headers
    }

    fn tcp(addr: &str) -> Option<Peer> {
        Some(Peer::Tcp(addr.parse().unwrap()))
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let proxy = proxy(&["10.1.0.0/16", "::1", "unix"]);
        let alice = Principal {
            owner: OwnerId::new("alice").unwrap(),
            read_only: false,
        };
        let table = [
            (
                tcp("10.1.2.3:5000"),
                Some("alice"),
                Vouched::User(alice.clone()),
            ),
            (
                tcp("[::ffff:10.1.9.9]:1"),
                Some("alice"),
                Vouched::User(alice.clone()),
            ),
            (tcp("[::1]:1"), Some("alice"), Vouched::User(alice.clone())),
            (
                Some(Peer::Unix),
                Some("alice"),
                Vouched::User(alice.clone()),
            ),
            (tcp("10.2.0.1:5000"), None, Vouched::Absent),
        ];
        for (peer, user, want) in table {
            assert_eq!(proxy.vouch(&headers(user), peer), want, "{peer:?} {user:?}");
        }
        for peer in [tcp("10.2.0.1:5000"), tcp("127.0.0.1:1"), None] {
            assert!(matches!(
                proxy.vouch(&headers(Some("alice")), peer),
                Vouched::Refused(_)
            ));
        }
        let tcp_only = self::proxy(&["127.0.0.1/32"]);
        assert!(matches!(
            tcp_only.vouch(&headers(Some("alice")), Some(Peer::Unix)),
            Vouched::Refused(_)
        ));
    }

    #[test]
    fn bad_ranges_and_headers_are_refused() {
        for bad in ["10.0.0.0/33", "::1/129", "nope", "10.0.0.0/"] {
            assert!(
                TrustedProxy::new(&[bad.to_owned()], "X-User").is_err(),
                "{bad}"
            );
        }
        assert!(TrustedProxy::new(&[], "X-User").is_err());
        assert!(TrustedProxy::new(&["unix".to_owned()], "bad header").is_err());
        assert!(TrustedProxy::new(&["0.0.0.0/0".to_owned()], "X-User").is_ok());
    }
}
