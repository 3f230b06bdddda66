//! The page's files as served (issue 27): precompressed at build time,
//! chosen by `Accept-Encoding`, revalidated by `ETag`, cached for a year
//! under the hashed names the built page uses.

use std::io::Read;

use super::Served;
use crate::support::within;

#[tokio::test]
async fn assets_come_compressed_as_asked_revalidate_and_hashed_names_are_immutable() {
    within(async {
        let served = Served::start(&[]).await;
        let original = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/vendor/xterm.js"),
        )
        .unwrap();
        let get = |path: &str, headers: &[(&str, &str)]| {
            let mut request = served.request(reqwest::Method::GET, path);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.send()
        };
        // gzip when that is all the client takes: the same bytes, smaller.
        let gz = get("/assets/xterm.js", &[("accept-encoding", "gzip")])
            .await
            .unwrap();
        assert_eq!(gz.status(), 200);
        assert_eq!(gz.headers()["content-encoding"], "gzip");
        assert_eq!(gz.headers()["vary"], "accept-encoding");
        assert_eq!(gz.headers()["cache-control"], "no-cache");
        let etag = gz.headers()["etag"].to_str().unwrap().to_owned();
        let body = gz.bytes().await.unwrap();
        assert!(body.len() < original.len() / 2, "{} bytes", body.len());
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert!(decoded == original, "gzip does not decode to the file");
        // brotli first when offered; identity when nothing is.
        let br = get("/assets/xterm.js", &[("accept-encoding", "gzip, br")])
            .await
            .unwrap();
        assert_eq!(br.headers()["content-encoding"], "br");
        assert_ne!(br.headers()["etag"].to_str().unwrap(), etag);
        let plain = get("/assets/xterm.js", &[]).await.unwrap();
        assert!(plain.headers().get("content-encoding").is_none());
        assert!(plain.bytes().await.unwrap() == original);
        // The client's copy is current: 304, no body.
        let again = get(
            "/assets/xterm.js",
            &[("accept-encoding", "gzip"), ("if-none-match", &etag)],
        )
        .await
        .unwrap();
        assert_eq!(again.status(), 304);
        assert!(again.bytes().await.unwrap().is_empty());
        // The page names it by its hash, which is cached for good; a
        // wrong hash is no file.
        let page = get("/", &[]).await.unwrap().text().await.unwrap();
        let hashed = page
            .split('"')
            .find(|part| part.starts_with("assets/xterm.") && part.ends_with(".js"))
            .expect("the page loads xterm.js");
        assert_ne!(hashed, "assets/xterm.js", "{page}");
        let cached = get(&format!("/{hashed}"), &[]).await.unwrap();
        assert_eq!(cached.status(), 200, "{hashed}");
        assert_eq!(
            cached.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert!(cached.bytes().await.unwrap() == original);
        let stale = get("/assets/xterm.0000000000000000.js", &[]).await.unwrap();
        assert_eq!(stale.status(), 404);
    })
    .await;
}
