//! Helpers shared by the integration tests: recorded fixtures and codec
//! drivers; for the live tests the tmux under test, per-test
//! directories, deadlines, and a minimal control-mode reader (the real
//! client lives in `control::client`; these tests must not depend on it).

#![allow(dead_code)]

pub mod stub;
pub mod tmux_registry;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tempfile::TempDir;
use tmux_engine::control::{ControlCodec, Event, Notification};
use tmux_engine::tmux::{Server, ServerOptions, Tmux};
use tmux_engine::vocab::PaneId;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio_util::codec::Decoder;

/// Every live test's limit.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The tmux under test; a missing or old tmux fails loudly, never skips.
pub fn tmux() -> Arc<Tmux> {
    static TMUX: OnceLock<Arc<Tmux>> = OnceLock::new();
    TMUX.get_or_init(|| {
        Arc::new(Tmux::discover().unwrap_or_else(|e| panic!("live tests need tmux >= 3.2: {e}")))
    })
    .clone()
}

/// `NAME=VALUE` of `name` in the environment process `pid` started with,
/// if set.
pub fn environ_entry(pid: u32, name: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("reading environ");
    raw.split(|b| *b == 0)
        .map(String::from_utf8_lossy)
        .find(|entry| entry.split_once('=').is_some_and(|(k, _)| k == name))
        .map(|entry| entry.into_owned())
}

/// The running relays (`__stream-relay`) of servers under `runtime`.
pub fn relays(runtime: &Path) -> Vec<u32> {
    let needle = runtime.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .expect("listing /proc")
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline);
            // The relay itself, not tmux, whose command line names it too.
            let mut words = text.split('\0');
            let relay = words.nth(1) == Some("__stream-relay");
            (relay && words.next()?.starts_with(&needle)).then_some(pid)
        })
        .collect()
}

/// The path of program `name` on `PATH`, when it is installed.
pub fn installed(name: &str) -> Option<String> {
    which::which(name)
        .ok()
        .map(|path| path.to_string_lossy().into_owned())
}

/// A tmpfs of `size` (tmpfs's own syntax: `256k`, `8m`) mounted at
/// `dir` (0700), for an honest full disk; unmounted when the guard drops,
/// even when an assertion fails first. Needs root: fails, never skips.
pub fn full_disk(dir: &Path, size: &str) -> Unmount {
    let mounted = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(dir)
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        mounted,
        "mounting a tmpfs needs root (this test's honest full disk)"
    );
    Unmount(dir.to_owned())
}

/// Unmounts its directory on drop (see [`full_disk`]).
pub struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Runs a test body under [`TEST_TIMEOUT`].
pub async fn within<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("test exceeded its timeout")
}

/// Runs a live test's body under [`TEST_TIMEOUT`] with its own
/// [`test_dir`], removed when the body ends or panics.
pub async fn live(body: impl AsyncFnOnce(&TempDir)) {
    within(async {
        let tmp = test_dir();
        body(&tmp).await;
    })
    .await;
}

/// Starts a test server with `options` (see [`opts`]); a failed start
/// fails the test.
pub async fn start_server(options: ServerOptions) -> Server {
    Server::start(tmux(), options).await.expect("starting tmux")
}

/// A pane command: `sh -c script sh args...` (`args` are `$1`...).
pub fn sh_c(script: &str, args: &[&std::ffi::OsStr]) -> Vec<std::ffi::OsString> {
    let mut argv: Vec<std::ffi::OsString> =
        vec!["sh".into(), "-c".into(), script.into(), "sh".into()];
    argv.extend(args.iter().map(|a| a.to_os_string()));
    argv
}

/// Writes `text` to `path` as an executable script (mode 0755), from a
/// `sh` of its own: a file this test process held open for writing could
/// be copied into another test's fork (its descriptors, until that child's
/// `exec` closes them), and an `exec` of the script meanwhile fails
/// `ETXTBSY` ("text file busy"). Only the pipe to that `sh` is ours.
pub fn write_script(path: &Path, text: &str) {
    use std::io::Write;
    let mut writer = std::process::Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("starting sh to write a script");
    let mut stdin = writer.stdin.take().expect("its stdin");
    stdin
        .write_all(text.as_bytes())
        .expect("writing the script");
    drop(stdin);
    let status = writer.wait().expect("sh writing a script");
    assert!(status.success(), "writing {}: {status}", path.display());
}

/// A per-test directory whose path has no `.` or `:` (so paths inside it
/// can appear in session names) and stays short (socket paths).
pub fn test_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("tmuxeng")
        .tempdir_in("/tmp")
        .expect("creating a test directory")
}

/// Options for a test server: sockets under `dir`, `/bin/sh` pinned so the
/// user's shell and dotfiles play no part.
pub fn opts(dir: &Path) -> ServerOptions {
    ServerOptions::default()
        .runtime_dir(Some(dir.join("rt")))
        .shell(Some(PathBuf::from("/bin/sh")))
}

/// Polls `check` every 10 ms until it returns `Some`, or panics with `what`
/// after `timeout`.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A process stopped (SIGSTOP) while this lives, continued (SIGCONT)
/// when it is dropped, a failing test's unwinding included: a test never
/// leaves a tmux server stopped behind it.
pub struct Stopped(u32);

impl Stopped {
    /// Stops `pid`.
    pub fn new(pid: u32) -> Stopped {
        tmux_engine::tmux::process::signal(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = tmux_engine::tmux::process::signal(self.0, rustix::process::Signal::CONT);
    }
}

/// Names a table row in a test's output when a failure unwinds through
/// it, so a row-per-case test still says which case broke.
pub struct Row(String);

impl Row {
    /// Marks the row `name` until the returned value drops.
    pub fn new(name: impl Into<String>) -> Row {
        Row(name.into())
    }
}

impl Drop for Row {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failed in row: {}", self.0);
        }
    }
}

/// One reply block read from a control client.
#[derive(Debug)]
pub struct Block {
    /// `%end` (true) or `%error` (false).
    pub ok: bool,
    /// The body lines, without `\n`.
    pub lines: Vec<Vec<u8>>,
}

impl Block {
    /// The body as lossy text, lines joined by `\n`.
    pub fn text(&self) -> String {
        self.lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A `tmux -C` client from [`Server::control_command`], read line by line.
pub struct Control {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// `%begin|%end|%error T N F` -> (kind, T, N, F).
fn guard(line: &[u8]) -> Option<(&str, &str, &str, u32)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.split(' ');
    let kind = parts.next()?;
    if !matches!(kind, "%begin" | "%end" | "%error") {
        return None;
    }
    let (t, n, f) = (parts.next()?, parts.next()?, parts.next()?.parse().ok()?);
    parts.next().is_none().then_some((kind, t, n, f))
}

impl Control {
    /// Attaches and waits for the attach command's own block: tmux before
    /// 3.4 reads stdin before the attach has run.
    pub async fn attach(server: &Server) -> Control {
        let mut child = server
            .control_command()
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning tmux -C");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut control = Control {
            child,
            stdin,
            stdout,
        };
        let first = control.block(0).await;
        assert!(first.ok, "attach failed: {}", first.text());
        control
    }

    async fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let n = self
            .stdout
            .read_until(b'\n', &mut line)
            .await
            .expect("reading tmux -C");
        assert!(n > 0, "tmux -C closed its output");
        line.pop();
        line
    }

    /// Reads up to the next block with `flags`, skipping notifications.
    async fn block(&mut self, flags: u32) -> Block {
        loop {
            let line = self.line().await;
            let Some(("%begin", t, n, f)) = guard(&line) else {
                continue;
            };
            let (t, n) = (t.to_owned(), n.to_owned());
            let mut lines = Vec::new();
            loop {
                let body = self.line().await;
                match guard(&body) {
                    Some((kind @ ("%end" | "%error"), t2, n2, f2))
                        if t2 == t && n2 == n && f2 == f =>
                    {
                        let ok = kind == "%end";
                        if f == flags {
                            return Block { ok, lines };
                        }
                        break;
                    }
                    _ => lines.push(body),
                }
            }
        }
    }

    /// Writes one command line and returns its reply block.
    pub async fn cmd(&mut self, line: &str) -> Block {
        assert!(!line.contains('\n'), "one line only");
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("writing to tmux -C");
        self.stdin.flush().await.expect("flushing tmux -C");
        self.block(1).await
    }

    /// Detaches (closes stdin) and waits for the client to exit.
    pub async fn close(self) {
        let Control {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        child.wait().await.expect("waiting for tmux -C");
    }
}

/// `fixtures/control/`, the recorded `tmux -C` transcripts.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/control")
}

/// Every `*.out` transcript, as (file name, bytes), sorted by name.
pub fn fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixture_dir())
        .expect("fixtures/control exists")
        .map(|entry| entry.expect("readable fixture dir").path())
        .filter(|path| path.extension().is_some_and(|e| e == "out"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&path).expect("readable fixture");
            (name, bytes)
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 40,
        "expected the 3.3a vectors, found {}",
        out.len()
    );
    out
}

/// The one transcript whose name starts with `prefix` (e.g. `"06-"`).
pub fn fixture(prefix: &str) -> Vec<u8> {
    let mut found = fixtures()
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix));
    let (_, bytes) = found
        .next()
        .unwrap_or_else(|| panic!("no fixture {prefix}*"));
    assert!(found.next().is_none(), "several fixtures match {prefix}");
    bytes
}

/// Decodes `input` fed as the given chunks, then ends the stream.
pub fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Event> {
    decode_chunks_with(ControlCodec::new(), chunks, |_, _| {})
}

/// Decodes the chunks with `codec`, calling `after_chunk` with the
/// buffer left and the chunk after each one, then ends the stream.
pub fn decode_chunks_with<'a>(
    mut codec: ControlCodec,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut after_chunk: impl FnMut(&BytesMut, &[u8]),
) -> Vec<Event> {
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(event) = codec.decode(&mut buf).expect("decode never fails") {
            events.push(event);
        }
        after_chunk(&buf, chunk);
    }
    while let Some(event) = codec.decode_eof(&mut buf).expect("decode_eof never fails") {
        events.push(event);
    }
    events
}

/// Decodes `input` in one piece.
pub fn decode(input: &[u8]) -> Vec<Event> {
    decode_chunks([input])
}

/// All `%output`/`%extended-output` bytes of `pane`, concatenated.
pub fn pane_output(events: &[Event], pane: PaneId) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        if let Event::Notification(
            Notification::Output { pane: p, data }
            | Notification::ExtendedOutput { pane: p, data, .. },
        ) = event
            && *p == pane
        {
            out.extend_from_slice(data);
        }
    }
    out
}

/// A `Bytes` of a static string, for comparisons.
pub fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}
