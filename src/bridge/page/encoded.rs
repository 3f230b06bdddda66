//! The page's files as build.rs precompressed them (gzip, brotli), one
//! chosen per request by `Accept-Encoding`, each with an `ETag` of its
//! content hash. A file asked for by its hashed name (`app.HASH.js`, how
//! the built page names it) never changes, so it is cached for a year
//! (`immutable`); by its plain name it is revalidated (`no-cache`, a 304
//! for a matching `If-None-Match`).

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

mod built {
    include!(concat!(env!("OUT_DIR"), "/assets.rs"));
}

/// A year: what a hashed name may be kept for.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// One file's encodings.
struct Encoded {
    hash: &'static str,
    gzip: &'static [u8],
    brotli: &'static [u8],
}

/// The encodings by served name.
static BY_NAME: LazyLock<HashMap<&'static str, Encoded>> = LazyLock::new(|| {
    built::COMPRESSED
        .iter()
        .map(|&(name, hash, gzip, brotli)| (name, Encoded { hash, gzip, brotli }))
        .collect()
});

/// The built page (every file named by its hash), identity.
pub(super) fn index() -> &'static str {
    built::INDEX.0
}

/// The encodings a client takes, best first: brotli, gzip, identity
/// (`q=0` refuses one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Coding {
    Brotli,
    Gzip,
    Identity,
}

/// The best coding `Accept-Encoding` allows.
pub(super) fn coding(headers: &HeaderMap) -> Coding {
    let Some(accept) = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
    else {
        return Coding::Identity;
    };
    let mut best = Coding::Identity;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        let coding = match name.as_str() {
            "br" => Coding::Brotli,
            "gzip" | "x-gzip" => Coding::Gzip,
            _ => continue,
        };
        if !refused && (coding == Coding::Brotli || best == Coding::Identity) {
            best = coding;
        }
    }
    best
}

/// `name` as served (`app.js`), and whether it was asked for by its
/// hashed name (`app.HASH.js`) with the current hash.
pub(super) fn resolve(name: &str) -> Option<(String, bool)> {
    if BY_NAME.contains_key(name) {
        return Some((name.to_owned(), false));
    }
    let (rest, ext) = name.rsplit_once('.')?;
    let (stem, hash) = rest.rsplit_once('.')?;
    let plain = format!("{stem}.{ext}");
    (BY_NAME.get(plain.as_str())?.hash == hash).then_some((plain, true))
}

/// The page, encoded as the client takes it.
pub(super) fn page(headers: &HeaderMap) -> (Vec<(header::HeaderName, HeaderValue)>, &'static [u8]) {
    let (_, gzip, brotli) = built::INDEX;
    let coding = coding(headers);
    let body: &'static [u8] = match coding {
        Coding::Brotli => brotli,
        Coding::Gzip => gzip,
        Coding::Identity => built::INDEX.0.as_bytes(),
    };
    (encoding_headers(coding), body)
}

fn encoding_headers(coding: Coding) -> Vec<(header::HeaderName, HeaderValue)> {
    let mut out = vec![(header::VARY, HeaderValue::from_static("accept-encoding"))];
    match coding {
        Coding::Brotli => out.push((header::CONTENT_ENCODING, HeaderValue::from_static("br"))),
        Coding::Gzip => out.push((header::CONTENT_ENCODING, HeaderValue::from_static("gzip"))),
        Coding::Identity => {}
    }
    out
}

/// Serves `body` (the identity bytes of the asset `name`) in the coding
/// the client takes, or 304 when its `If-None-Match` names this version.
/// `hashed`: asked for by its hashed name. An asset build.rs did not
/// see is served as it is, without an `ETag`.
pub(super) fn serve(
    name: &str,
    hashed: bool,
    body: &'static str,
    headers: &HeaderMap,
    respond: impl FnOnce(&'static [u8]) -> Response,
) -> Response {
    let Some(encoded) = BY_NAME.get(name) else {
        return respond(body.as_bytes());
    };
    let coding = coding(headers);
    let etag = match coding {
        Coding::Brotli => format!("\"{}-br\"", encoded.hash),
        Coding::Gzip => format!("\"{}-gz\"", encoded.hash),
        Coding::Identity => format!("\"{}\"", encoded.hash),
    };
    let cache = if hashed { IMMUTABLE } else { "no-cache" };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim().trim_start_matches("W/") == etag || tag.trim() == "*")
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let bytes = match coding {
            Coding::Brotli => encoded.brotli,
            Coding::Gzip => encoded.gzip,
            Coding::Identity => body.as_bytes(),
        };
        respond(bytes)
    };
    let out = response.headers_mut();
    for (name, value) in encoding_headers(coding) {
        if !fresh || name == header::VARY {
            out.insert(name, value);
        }
    }
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, etag);
    }
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Coding {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).expect("a header value"),
        );
        coding(&headers)
    }

    #[test]
    fn accept_encoding_picks_brotli_then_gzip_and_honours_q_zero() {
        assert_eq!(accept("gzip, deflate, br, zstd"), Coding::Brotli);
        assert_eq!(accept("gzip"), Coding::Gzip);
        assert_eq!(accept("br;q=0, gzip;q=0.5"), Coding::Gzip);
        assert_eq!(accept("gzip;q=0"), Coding::Identity);
        assert_eq!(accept("identity"), Coding::Identity);
        assert_eq!(coding(&HeaderMap::new()), Coding::Identity);
    }

    #[test]
    fn every_built_file_resolves_by_its_hashed_name_only_with_its_hash() {
        assert!(!built::COMPRESSED.is_empty());
        for &(name, hash, gzip, brotli) in built::COMPRESSED {
            assert!(!gzip.is_empty() && !brotli.is_empty(), "{name}");
            let (stem, ext) = name.rsplit_once('.').expect("an extension");
            let hashed = format!("{stem}.{hash}.{ext}");
            assert_eq!(resolve(&hashed), Some((name.to_owned(), true)));
            assert_eq!(resolve(name), Some((name.to_owned(), false)));
            // The built page never names a file by its plain name.
            assert!(!index().contains(&format!("\"assets/{name}\"")), "{name}");
            assert_eq!(resolve(&format!("{stem}.0000000000000000.{ext}")), None);
        }
    }
}
