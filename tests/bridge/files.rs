//! Files in and out of a terminal (issue 30): `PUT`/`GET
//! /api/terminals/{t}/files` and the CLI's `upload`/`download` over them,
//! byte-exact and streamed (serve's memory stays flat), and every refusal
//! the issue names with its typed error.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::ws::rss_kib;
use super::{Served, token_file};
use crate::cli::Cli;
use crate::support::within;

const RW: &str = "files-rw-token-0123456789";
const RO: &str = "files-ro-token-0123456789";

/// `len` bytes no compressor or dedup would shrink (xorshift).
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// A terminal named `name` whose program (`sleep`) works in `dir`.
async fn terminal_in(served: &Served, name: &str, dir: &Path) {
    served
        .spawn(
            &json!({"name": name, "command": ["sleep", "600"], "cwd": dir.to_str().unwrap()})
                .to_string(),
        )
        .await;
}

/// Runs the binary on the serve's state directory with `token`.
async fn cli(served: &Served, token: &str, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::from(served.cli.command(args));
    command.env("TMUX_ENGINE_TOKEN", token);
    command.output().await.unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn fifty_mib_go_in_and_out_byte_exact_while_serve_stays_small() {
    within(async {
        let served = Served::start(&[]).await;
        let work = tempfile::tempdir().unwrap();
        let local = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let data = noise(50 << 20);
        let source = local.path().join("big.bin");
        std::fs::write(&source, &data).unwrap();
        // Warm the routes up, so the measure is the transfer's alone.
        std::fs::write(local.path().join("small"), b"warm").unwrap();
        let small = local.path().join("small");
        let out = cli(
            &served,
            &served.token,
            &["upload", "f", small.to_str().unwrap()],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let before = rss_kib(served.pid());
        let pid = served.pid();
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
        let sampler = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        let out = cli(
            &served,
            &served.token,
            &["upload", "f", source.to_str().unwrap()],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let landed = work.path().join("big.bin");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(landed.to_str().unwrap()), "{said}");
        assert!(
            std::fs::read(&landed).unwrap() == data,
            "the upload differs"
        );
        let back = local.path().join("back.bin");
        let out = cli(
            &served,
            &served.token,
            &["download", "f", "big.bin", "-o", back.to_str().unwrap()],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            std::fs::read(&back).unwrap() == data,
            "the download differs"
        );
        sampler.abort();
        let grown = peak.load(std::sync::atomic::Ordering::Relaxed) - before;
        eprintln!("serve's RSS grew {grown} KiB over 50 MiB each way");
        assert!(grown < 16 << 10, "serve's RSS grew {grown} KiB");
        // An absolute path too, and the CLI never replaces its output
        // without being asked.
        let out = cli(
            &served,
            &served.token,
            &[
                "download",
                "f",
                landed.to_str().unwrap(),
                "-o",
                back.to_str().unwrap(),
            ],
        )
        .await;
        assert!(!out.status.success());
        assert!(stderr(&out).contains("DUPLICATE_NAME"), "{}", stderr(&out));
        let out = cli(
            &served,
            &served.token,
            &["download", "f", landed.to_str().unwrap(), "-o", "-"],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout == data, "the absolute download differs");
        // Nothing but the files themselves is left in the directory.
        let mut names: Vec<String> = std::fs::read_dir(work.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["big.bin", "small"]);
    })
    .await;
}

/// A serve with a read-write and a read-only token for `tester`, files up
/// to 1 MiB.
async fn limited() -> Served {
    let cli = Cli::new();
    let tokens = token_file(&cli, &format!("{RW} tester\n{RO} tester read-only\n"));
    let mut served = Served::start_with(
        cli,
        &["--token-file", &tokens, "--max-file-size", "1M"],
        &[],
    )
    .await;
    served.token = RW.to_owned();
    served
}

async fn put(served: &Served, token: &str, query: &str, body: Vec<u8>) -> (u16, Value) {
    served
        .call(
            reqwest::Client::new()
                .put(format!("{}/api/terminals/f/files?{query}", served.base))
                .bearer_auth(token)
                .header("content-type", "application/octet-stream")
                .body(body),
        )
        .await
}

async fn get(served: &Served, token: &str, path: &str) -> (u16, Value) {
    served
        .call(
            reqwest::Client::new()
                .get(format!("{}/api/terminals/f/files?path={path}", served.base))
                .bearer_auth(token),
        )
        .await
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn every_refusal_has_its_typed_error() {
    within(async {
        let served = limited().await;
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let (status, answer) = put(&served, RW, "name=ok.txt", b"hello".to_vec()).await;
        assert_eq!(status, 201, "{answer}");
        assert_eq!(answer["size"], 5, "{answer}");
        assert_eq!(std::fs::read(work.path().join("ok.txt")).unwrap(), b"hello");
        for name in ["..", ".", "a%2Fb", "%2Fetc%2Fx", "a%00b", ""] {
            let (status, answer) = put(&served, RW, &format!("name={name}"), b"x".to_vec()).await;
            assert_eq!(
                (status, code(&answer)),
                (400, "INVALID_INPUT"),
                "{name}: {answer}"
            );
        }
        // A symlink planted in the directory is never written through,
        // asked to overwrite or not.
        let target = outside.path().join("target");
        std::os::unix::fs::symlink(&target, work.path().join("planted")).unwrap();
        for query in ["name=planted", "name=planted&overwrite=true"] {
            let (status, answer) = put(&served, RW, query, b"evil".to_vec()).await;
            assert_eq!(
                (status, code(&answer)),
                (400, "INVALID_INPUT"),
                "{query}: {answer}"
            );
            assert!(!target.exists(), "{query} wrote through the symlink");
        }
        // An existing file only with overwrite=true.
        let (status, answer) = put(&served, RW, "name=ok.txt", b"again".to_vec()).await;
        assert_eq!((status, code(&answer)), (409, "DUPLICATE_NAME"), "{answer}");
        let (status, answer) =
            put(&served, RW, "name=ok.txt&overwrite=true", b"again".to_vec()).await;
        assert_eq!(status, 201, "{answer}");
        assert_eq!(answer["replaced"], true, "{answer}");
        assert_eq!(std::fs::read(work.path().join("ok.txt")).unwrap(), b"again");
        // Read-only both ways.
        let (status, answer) = put(&served, RO, "name=ro.txt", b"x".to_vec()).await;
        assert_eq!((status, code(&answer)), (403, "READ_ONLY"), "{answer}");
        let (status, answer) = get(&served, RO, "ok.txt").await;
        assert_eq!((status, code(&answer)), (403, "READ_ONLY"), "{answer}");
        let out = cli(&served, RO, &["download", "f", "ok.txt", "-o", "-"]).await;
        assert!(stderr(&out).contains("READ_ONLY"), "{}", stderr(&out));
        // Over the limit: announced, and streamed without a length.
        let (status, answer) = put(&served, RW, "name=big", vec![7; (1 << 20) + 1]).await;
        assert_eq!((status, code(&answer)), (413, "INVALID_INPUT"), "{answer}");
        let (status, answer) = chunked_put(&served, "name=big", (1 << 20) + 1).await;
        assert_eq!((status, code(&answer)), (413, "INVALID_INPUT"), "{answer}");
        std::fs::write(work.path().join("huge"), vec![1; (1 << 20) + 1]).unwrap();
        let (status, answer) = get(&served, RW, "huge").await;
        assert_eq!((status, code(&answer)), (413, "INVALID_INPUT"), "{answer}");
        // Downloads of what is not a regular file.
        std::fs::create_dir(work.path().join("sub")).unwrap();
        for path in ["sub", "%2Fdev%2Fnull", "."] {
            let (status, answer) = get(&served, RW, path).await;
            assert_eq!(
                (status, code(&answer)),
                (400, "INVALID_INPUT"),
                "{path}: {answer}"
            );
        }
        let (status, answer) = get(&served, RW, "missing").await;
        assert_eq!((status, code(&answer)), (404, "INVALID_INPUT"), "{answer}");
        let (status, answer) = get(&served, RW, "ok.txt").await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer, "again");
        // The front door as for every write: the label and the origin.
        let (status, answer) = served
            .call(
                served
                    .request(reqwest::Method::PUT, "/api/terminals/f/files?name=t")
                    .header("content-type", "text/plain")
                    .body("x"),
            )
            .await;
        assert_eq!(status, 415, "{answer}");
        let (status, answer) = served
            .call(
                served
                    .request(reqwest::Method::PUT, "/api/terminals/f/files?name=t")
                    .header("content-type", "application/octet-stream")
                    .header("origin", "http://evil.example")
                    .body("x"),
            )
            .await;
        assert_eq!(
            (status, code(&answer)),
            (403, "FORBIDDEN_ORIGIN"),
            "{answer}"
        );
        let (status, _) = served
            .call(served.request(
                reqwest::Method::GET,
                "/api/terminals/nope/files?path=ok.txt",
            ))
            .await;
        assert_eq!(status, 404);
        // No temporary file was left by any refusal.
        let mut names: Vec<String> = std::fs::read_dir(work.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["huge", "ok.txt", "planted", "sub"]);
        let (_, document) = served.get("/api/openapi.json").await;
        let files = &document["paths"]["/api/terminals/{t}/files"];
        assert_eq!(files["put"]["operationId"], "upload", "{files}");
        assert_eq!(files["get"]["operationId"], "download", "{files}");
    })
    .await;
}

/// A `PUT` of `len` bytes in chunks, with no length announced.
async fn chunked_put(served: &Served, query: &str, len: usize) -> (u16, Value) {
    let addr = served.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "PUT /api/terminals/f/files?{query} HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {RW}\r\nContent-Type: application/octet-stream\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'z'; 64 << 10];
    let mut sent = 0;
    while sent < len {
        let n = chunk.len().min(len - sent);
        let frame = [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat();
        if stream.write_all(&frame).await.is_err() {
            break;
        }
        sent += n;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("");
    let body = body
        .lines()
        .find(|line| line.starts_with('{'))
        .unwrap_or(body);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn share_links_move_files_only_with_write() {
    within(async {
        let served = Served::start(&[]).await;
        let work = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        std::fs::write(work.path().join("log"), b"lines").unwrap();
        let http = reqwest::Client::new();
        // Read-only moves nothing; read-write moves files only with the
        // link's `files` grant (issue 46, item 13: a holder who may type
        // into a `less` has no shell, so no file should move for it).
        for (read_only, files, put_status, get_status) in [
            (true, true, 403, 403),
            (false, false, 403, 403),
            (false, true, 201, 200),
        ] {
            let (status, minted) = served
                .post(
                    "/api/links",
                    &json!({"terminal": "f", "read_only": read_only, "files": files}).to_string(),
                )
                .await;
            assert_eq!(status, 201, "{minted}");
            let session: Value = http
                .post(format!("{}/api/sign-in", served.base))
                .header("content-type", "application/json")
                .body(json!({"code": minted["code"]}).to_string())
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let session = session["session"].as_str().unwrap();
            let name = format!("from-link-{read_only}-{files}");
            let (status, answer) =
                put(&served, session, &format!("name={name}"), b"x".to_vec()).await;
            assert_eq!(
                status, put_status,
                "read_only {read_only} files {files}: {answer}"
            );
            let (status, answer) = get(&served, session, "log").await;
            assert_eq!(
                status, get_status,
                "read_only {read_only} files {files}: {answer}"
            );
            if read_only {
                assert_eq!(code(&answer), "READ_ONLY", "{answer}");
            } else if !files {
                assert_eq!(code(&answer), "FORBIDDEN_SCOPE", "{answer}");
                assert!(!work.path().join(&name).exists());
            }
        }
    })
    .await;
}

#[tokio::test]
async fn serve_logs_every_transfer_by_default() {
    within(async {
        let cli = Cli::new();
        let mut command =
            tokio::process::Command::from(cli.command(&["serve", "--listen", "127.0.0.1:0"]));
        command
            .env_remove("TMUX_ENGINE_LOG")
            .stderr(std::process::Stdio::piped());
        let (mut child, line, token) = super::spawn_serve(command).await;
        let stderr = child.stderr.take().unwrap();
        let served = Served::from_url(child, cli, &line, &token);
        let work = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let (status, answer) = put(&served, &token, "name=logged.txt", b"12345".to_vec()).await;
        assert_eq!(status, 201, "{answer}");
        let (status, _) = get(&served, &token, "logged.txt").await;
        assert_eq!(status, 200);
        let path = work.path().join("logged.txt").display().to_string();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        let mut seen = Vec::new();
        let sgr = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
        for what in ["upload", "download"] {
            let logged = tokio::time::timeout(super::WAIT, async {
                while let Some(line) = lines.next_line().await.unwrap() {
                    // Without its colours (SGR sequences).
                    let line = sgr.replace_all(&line, "").into_owned();
                    seen.push(line.clone());
                    if line.contains(what) {
                        return line;
                    }
                }
                panic!("serve's stderr ended: {seen:?}");
            })
            .await
            .expect("no transfer logged");
            for field in [
                "owner=tester".to_owned(),
                "terminal=f".to_owned(),
                format!("path={path}"),
                "size=5".to_owned(),
            ] {
                assert!(logged.contains(&field), "{what}: {field} missing: {logged}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn an_upload_cut_off_midway_leaves_nothing_behind() {
    within(async {
        let served = limited().await;
        let work = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let addr = served.base.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "PUT /api/terminals/f/files?name=half HTTP/1.1\r\nHost: {addr}\r\n\
             Authorization: Bearer {RW}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: 600000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&vec![b'h'; 300_000]).await.unwrap();
        // The temporary file exists while the body comes...
        let listed = || {
            std::fs::read_dir(work.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        crate::support::poll("the temporary file", super::WAIT, || async {
            listed()
                .iter()
                .any(|name| name.starts_with(".tmux-engine-upload-"))
                .then_some(())
        })
        .await;
        // ...and is gone once the client is, with nothing under the name.
        drop(stream);
        crate::support::poll("the temporary file removed", super::WAIT, || async {
            listed().is_empty().then_some(())
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_steady_upload_outlasts_the_body_timeout_by_its_length() {
    within(async {
        let served = Served::start(&["--body-timeout", "1"]).await;
        let work = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let addr = served.base.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        // 256 KiB: 8 s at 32 KiB/s, sent over about 2 s (a slow phone's pace,
        // never pausing near the header timeout).
        let piece = vec![b'p'; 32 << 10];
        let head = format!(
            "PUT /api/terminals/f/files?name=slow HTTP/1.1\r\nHost: {addr}\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            served.token,
            8 * piece.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            stream.write_all(&piece).await.unwrap();
        }
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.unwrap();
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
        assert_eq!(
            std::fs::metadata(work.path().join("slow")).unwrap().len(),
            (8 * 32) << 10
        );
    })
    .await;
}

/// Issue 46, item 8: a 0600 `secret.env` replaced by an upload became
/// 0644. An overwrite keeps the replaced file's mode now; a new file is
/// 0600.
#[tokio::test]
async fn an_overwrite_keeps_the_mode_and_a_new_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    within(async {
        let served = limited().await;
        let work = tempfile::tempdir().unwrap();
        terminal_in(&served, "f", work.path()).await;
        let mode = |name: &str| {
            std::fs::metadata(work.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        for (name, before) in [
            ("secret.env", 0o600),
            ("shared.txt", 0o640),
            ("tool", 0o750),
        ] {
            let path = work.path().join(name);
            std::fs::write(&path, b"old").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(before)).unwrap();
            let (status, answer) = put(
                &served,
                RW,
                &format!("name={name}&overwrite=true"),
                b"new".to_vec(),
            )
            .await;
            assert_eq!(
                (status, &answer["replaced"]),
                (201, &json!(true)),
                "{answer}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), b"new");
            assert_eq!(
                mode(name),
                before,
                "{name}: {:o} after, {before:o} before",
                mode(name)
            );
        }
        let (status, answer) = put(&served, RW, "name=fresh", b"x".to_vec()).await;
        assert_eq!(status, 201, "{answer}");
        assert_eq!(mode("fresh"), 0o600, "a new file: {:o}", mode("fresh"));
    })
    .await;
}

/// Issue 46, item 10: the partial file of an upload a killed serve was
/// writing stayed for ever, even after a restart. It is swept by its name
/// at start (the working directories of the terminals serve finds) and
/// before every upload into its directory; a fresh one (a live upload of
/// another serve) and other names stay.
#[tokio::test]
async fn partial_uploads_a_killed_serve_left_are_swept() {
    within(async {
        let work = tempfile::tempdir().unwrap();
        let served = Served::start(&[]).await;
        terminal_in(&served, "f", work.path()).await;
        let cli = served.crash().await;
        let plant = |name: &str, age: Duration| {
            let path = work.path().join(name);
            std::fs::write(&path, vec![b'p'; 4096]).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
        };
        let exists = |name: &str| work.path().join(name).exists();
        let hour = Duration::from_secs(3600);
        plant(".tmux-engine-upload-00ff00ff00ff00ff", hour);
        plant(".tmux-engine-upload-1234", Duration::ZERO);
        plant(".tmux-engine-upload-notes", hour);
        let served = Served::start_with(cli, &[], &[]).await;
        crate::support::poll(
            "the stale partial upload swept at start",
            super::WAIT,
            || async { (!exists(".tmux-engine-upload-00ff00ff00ff00ff")).then_some(()) },
        )
        .await;
        assert!(
            exists(".tmux-engine-upload-1234"),
            "a fresh partial file stays"
        );
        assert!(exists(".tmux-engine-upload-notes"), "another name stays");
        plant(".tmux-engine-upload-abcdef", hour);
        let token = served.token.clone();
        let (status, answer) = put(&served, &token, "name=after", b"x".to_vec()).await;
        assert_eq!(status, 201, "{answer}");
        assert!(
            !exists(".tmux-engine-upload-abcdef"),
            "swept before an upload"
        );
        assert!(exists(".tmux-engine-upload-1234"));
    })
    .await;
}
