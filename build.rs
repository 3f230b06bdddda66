//! Precompresses the page's assets (issue 27): every file `web/` and
//! `web/vendor/` hold when the crate is built is compressed once here, with
//! gzip (level 9) and brotli (quality 11), and named by a hash of its
//! bytes, so `serve` answers each request from bytes already made (chosen
//! by `Accept-Encoding`, with the hash as its `ETag`) and never compresses
//! at run time. Whatever the page is made of at build time is covered: the
//! list is the directory, not a table to keep in step.
//!
//! Writes `$OUT_DIR/assets.rs`: `COMPRESSED`, one `(name, hash, gzip,
//! brotli)` per file by its served name (the file name: `web/vendor/x.js`
//! is served as `/assets/x.js`, as `bridge/page/mod.rs` names them).
//!
//! Also links `tmux-engine-relay` as a static PIE ([`static_relay`]).

#[cfg(feature = "serve")]
use std::io::Write;
#[cfg(feature = "serve")]
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    static_relay();
    // Only serve's page is made of these files: a library built without
    // the `serve` feature compresses nothing (and has no flate2/brotli).
    #[cfg(feature = "serve")]
    compress_page();
}

/// Links the resident relay (`tmux-engine-relay`, one per terminal for as
/// long as its pane lives) as a static PIE: glibc linked in, so no loader
/// and no shared library is relocated per process (its private memory 140
/// -> 96 KiB, docs/benchmarks.md), its code still placed at random.
///
/// Cargo sets `-C target-feature=+crt-static` only for a whole build, and
/// rustc then still names the C libraries for a dynamic link
/// (`-Bdynamic -lgcc_s ... -lm ... -lc`): `-static-pie` alone would link
/// their shared objects into an executable with no loader to load them.
/// So, for this one binary, a directory of its own comes first in the
/// library path: each of those names there is a linker script naming the
/// static archive (`libgcc_s` the static unwinder and `libgcc`, as a
/// crt-static build links them), found where the C compiler finds them.
/// Where one is missing (no `libc.a`), where `crt-static` is on already
/// (scripts/lib/static-build) and when cross-compiling, the relay is linked
/// as rustc would (a warning says so).
fn static_relay() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let crt_static = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if !gnu_linux || crt_static || var("TARGET") != var("HOST") {
        return;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let find = |file: &str| -> Option<String> {
        let out = std::process::Command::new(&linker)
            .arg(format!("-print-file-name={file}"))
            .output()
            .ok()?;
        let path = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        // The compiler prints the bare name for a file it cannot find.
        std::path::Path::new(&path).is_file().then_some(path)
    };
    let (Some(libc), Some(libgcc), Some(libgcc_eh)) =
        (find("libc.a"), find("libgcc.a"), find("libgcc_eh.a"))
    else {
        println!(
            "cargo:warning=tmux-engine-relay is linked dynamically: {linker} finds no \
             libc.a, libgcc.a or libgcc_eh.a (glibc's static library: libc6-dev)"
        );
        return;
    };
    let out = std::path::PathBuf::from(var("OUT_DIR")).join("static-relay");
    std::fs::create_dir_all(&out).expect("OUT_DIR is writable");
    // Since glibc 2.34 libutil, librt, libpthread and libdl are empty
    // archives (their functions are in libc.a); where one has no archive
    // it has no shared object either, and an empty script stands for it.
    let scripts = [
        ("gcc_s", vec![libgcc_eh.clone(), libgcc.clone()]),
        ("c", vec![libc, libgcc, libgcc_eh]),
        ("m", find("libm.a").into_iter().collect()),
        ("util", find("libutil.a").into_iter().collect()),
        ("rt", find("librt.a").into_iter().collect()),
        ("pthread", find("libpthread.a").into_iter().collect()),
        ("dl", find("libdl.a").into_iter().collect()),
    ];
    for (name, archives) in scripts {
        let text = if archives.is_empty() {
            "/* in libc.a */\n".to_owned()
        } else {
            format!("GROUP({})\n", archives.join(" "))
        };
        std::fs::write(out.join(format!("lib{name}.so")), text).expect("OUT_DIR is writable");
    }
    println!("cargo:rustc-link-arg-bin=tmux-engine-relay=-static-pie");
    println!(
        "cargo:rustc-link-arg-bin=tmux-engine-relay=-L{}",
        out.to_str().expect("OUT_DIR is UTF-8")
    );
}

#[cfg(feature = "serve")]
fn compress_page() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let web = root.join("web");
    println!("cargo:rerun-if-changed=web");
    println!("cargo:rerun-if-changed=web/vendor");
    let mut files = Vec::new();
    for dir in [web.clone(), web.join("vendor")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let served = [".js", ".css", ".html"]
                .iter()
                .any(|ext| name.ends_with(ext));
            // The page itself is served by its own route (below).
            if path.is_file() && served && name != "index.html" {
                println!("cargo:rerun-if-changed={}", path.display());
                files.push((name, path));
            }
        }
    }
    files.sort();
    let mut table = String::from(
        "/// `(served name, content hash, gzip, brotli)` of every page file, made by build.rs.\n\
         pub(super) const COMPRESSED: &[(&str, &str, &[u8], &[u8])] = &[\n",
    );
    for (name, path) in &files {
        let bytes = std::fs::read(path).expect("a page file is readable");
        let hash = format!("{:016x}", fnv1a(&bytes));
        let gz = out.join(format!("{name}.gz"));
        let br = out.join(format!("{name}.br"));
        std::fs::write(&gz, gzip(&bytes)).expect("OUT_DIR is writable");
        std::fs::write(&br, brotli(&bytes)).expect("OUT_DIR is writable");
        table.push_str(&format!(
            "    ({name:?}, {hash:?}, include_bytes!({:?}), include_bytes!({:?})),\n",
            path_str(&gz),
            path_str(&br)
        ));
    }
    table.push_str("];\n");
    // The page names each file by its hash, so a browser may keep it for
    // good: a new build's page names new files.
    let mut index = std::fs::read_to_string(web.join("index.html")).expect("web/index.html");
    for (name, path) in &files {
        let bytes = std::fs::read(path).expect("a page file is readable");
        index = index.replace(
            &format!("\"assets/{name}\""),
            &format!("\"assets/{}\"", hashed(name, fnv1a(&bytes))),
        );
    }
    let page = out.join("index.html");
    std::fs::write(&page, &index).expect("OUT_DIR is writable");
    std::fs::write(out.join("index.html.gz"), gzip(index.as_bytes())).expect("OUT_DIR");
    std::fs::write(out.join("index.html.br"), brotli(index.as_bytes())).expect("OUT_DIR");
    table.push_str(&format!(
        "/// web/index.html naming every file by its hash; gzip; brotli.\n\
         pub(super) const INDEX: (&str, &[u8], &[u8]) = (include_str!({:?}), \
         include_bytes!({:?}), include_bytes!({:?}));\n",
        path_str(&page),
        path_str(&out.join("index.html.gz")),
        path_str(&out.join("index.html.br")),
    ));
    std::fs::write(out.join("assets.rs"), table).expect("OUT_DIR is writable");
}

/// `name.js` as `name.HASH.js`: how the page names a file (and
/// `bridge/page/mod.rs` reads it back).
#[cfg(feature = "serve")]
fn hashed(name: &str, hash: u64) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash:016x}.{ext}"),
        None => format!("{name}.{hash:016x}"),
    }
}

#[cfg(feature = "serve")]
fn path_str(path: &Path) -> String {
    path.to_str().expect("OUT_DIR is UTF-8").to_owned()
}

/// FNV-1a, 64 bits: stable across builds and toolchains (std's hasher is
/// not), enough to tell two versions of one file apart.
#[cfg(feature = "serve")]
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(feature = "serve")]
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("in memory");
    encoder.finish().expect("in memory")
}

#[cfg(feature = "serve")]
fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &bytes[..], &mut out, &params).expect("in memory");
    out
}
