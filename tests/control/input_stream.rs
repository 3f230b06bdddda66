//! Input is a stream, not a build-up: a paste reaches the program byte for
//! byte through the control client's pieces, other commands of the same
//! client answer while it is typed, two pastes never mix, and a server
//! lost mid-paste fails the write instead of hanging it. Real tmux, one
//! server per test.

use std::path::Path;
use std::time::Duration;

use futures_util::FutureExt;
use tmux_engine::ErrorCode;
use tmux_engine::control::client::SubscribeOptions;
use tmux_engine::control::client::{ClientOptions, ControlClient, PaneEvent, PaneStream};
use tmux_engine::control::wait_pane_exit;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::process;
use tmux_engine::tmux::{Server, TmuxCommand};
use tmux_engine::vocab::PaneId;

use crate::support::{live, opts, tmux};

const MIB: usize = 1 << 20;

/// A launched server and its control client.
struct Term {
    server: Server,
    client: ControlClient,
}

const PANE: PaneId = PaneId(0);

/// Starts `sh -c script` in a fresh server; the stream follows its pane.
async fn start(dir: &Path, script: &str, client: ClientOptions) -> (Term, PaneStream) {
    let mut server = opts(dir);
    server.command = ["sh", "-c", script].iter().map(Into::into).collect();
    let Parts {
        server,
        client,
        output,
        ..
    } = launch(tmux(), server, client, SubscribeOptions::default())
        .await
        .expect("terminal starts");
    (Term { server, client }, output)
}

/// Reads the stream until `want` has been seen in the output bytes.
async fn read_until(stream: &mut PaneStream, want: &[u8]) {
    let mut seen = Vec::new();
    while !seen.windows(want.len()).any(|w| w == want) {
        match stream.recv().await.expect("stream open") {
            PaneEvent::Output(bytes) => seen.extend_from_slice(&bytes),
            PaneEvent::Resync(snap) => seen.extend_from_slice(&snap.to_ansi()),
        }
    }
}

/// A program that switches its tty to raw mode (no echo, no line editing,
/// no signals: every byte is data), says `ready`, and stores exactly
/// `len` bytes of input in `out`.
fn store(out: &Path, len: usize) -> String {
    format!(
        "stty raw -echo; echo ready; head -c {len} > '{}'",
        out.display()
    )
}

/// `len` bytes holding every byte value in every position mod 256, plus
/// the bytes a careless path would change: LF and CR, key names, a
/// bracketed-paste marker, ESC sequences, invalid UTF-8, NUL runs.
fn every_byte(len: usize) -> Vec<u8> {
    let specials: &[&[u8]] = &[
        b"\n\r\r\n",
        b"Enter C-c ; kill-server",
        b"\x1b[200~\x1b[201~",
        b"\x1b[A\x1bOP",
        b"\xff\xfe\xc3(",
        b"\0\0\0\0",
        b"#{pane_id} $HOME \\",
    ];
    let mut data = Vec::with_capacity(len);
    let mut i = 0usize;
    while data.len() < len {
        if i.is_multiple_of(4096) {
            data.extend_from_slice(specials[(i / 4096) % specials.len()]);
        }
        // Walks every byte value at every offset: 251 is prime to 256.
        data.push((i.wrapping_mul(251) ^ (i >> 8)) as u8);
        i += 1;
    }
    data.truncate(len);
    data
}

/// Waits for the pane's program to exit (it has read all it wanted).
async fn exited(term: &Term) {
    tokio::time::timeout(Duration::from_secs(30), wait_pane_exit(&term.client, PANE))
        .await
        .expect("the program exits within 30 s")
        .expect("exit status");
}

#[tokio::test]
async fn a_mebibyte_of_every_byte_value_arrives_exactly() {
    live(async |dir| {
        let out = dir.path().join("received");
        let (term, mut stream) =
            start(dir.path(), &store(&out, MIB), ClientOptions::default()).await;
        let payload = every_byte(MIB);
        let values: std::collections::BTreeSet<u8> = payload.iter().copied().collect();
        assert_eq!(values.len(), 256, "the payload holds every byte value");
        read_until(&mut stream, b"ready").await;
        term.client.send_bytes(PANE, &payload).await.expect("send");
        exited(&term).await;
        let got = std::fs::read(&out).expect("written");
        assert_eq!(got.len(), payload.len());
        assert!(got == payload, "the program received other bytes");
        term.server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn other_commands_answer_while_a_paste_is_typed() {
    live(async |dir| {
        let out = dir.path().join("received");
        let (term, mut stream) =
            start(dir.path(), &store(&out, MIB), ClientOptions::default()).await;
        read_until(&mut stream, b"ready").await;
        let payload = every_byte(MIB);
        let mut paste = std::pin::pin!(term.client.send_bytes(PANE, &payload));
        // One poll starts the paste: its first pieces are queued. It is not
        // polled again until the capture has answered, so it cannot queue
        // more than what that first poll did.
        assert!(
            (&mut paste).now_or_never().is_none(),
            "a paste is not typed in one poll"
        );
        let capture = TmuxCommand::new("capture-pane").flag("-p").target(PANE);
        term.client
            .command(&capture)
            .await
            .expect("capture answers");
        let probe = TmuxCommand::new("display-message")
            .flag("-p")
            .target(PANE)
            .arg("#{pane_dead}");
        let alive = term.client.command(&probe).await.expect("probe answers");
        assert_eq!(alive.text(), "0");
        // Both answered ahead of most of the paste: a write that queued all
        // its commands up front would have been answered before them.
        assert!(
            (&mut paste).now_or_never().is_none(),
            "the paste was done before the commands sent after its start answered"
        );
        paste.await.expect("the paste completes");
        exited(&term).await;
        assert!(std::fs::read(&out).expect("written") == payload);
        term.server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn concurrent_pastes_arrive_each_whole_in_turn() {
    live(async |dir| {
        let out = dir.path().join("received");
        // Distinct alphabets: low bytes for one paste, high bytes for the
        // other, keystrokes in between, so any interleaving shows.
        let low: Vec<u8> = (0..MIB / 2).map(|i| (i % 128) as u8).collect();
        let high: Vec<u8> = (0..MIB / 2 + 4099).map(|i| 128 + (i % 128) as u8).collect();
        let total = low.len() + high.len() + 3;
        let (term, mut stream) =
            start(dir.path(), &store(&out, total), ClientOptions::default()).await;
        read_until(&mut stream, b"ready").await;
        let writes = [low.clone(), b"xyz".to_vec(), high.clone()].map(|bytes| {
            let client = term.client.clone();
            tokio::spawn(async move { client.send_bytes(PANE, &bytes).await })
        });
        for write in writes {
            write.await.expect("task").expect("write");
        }
        exited(&term).await;
        let got = std::fs::read(&out).expect("written");
        assert_eq!(got.len(), total);
        // Each write is one contiguous run, in some order.
        let mut rest = &got[..];
        let mut seen = Vec::new();
        while !rest.is_empty() {
            let which = [&low[..], b"xyz", &high[..]]
                .iter()
                .position(|w| rest.starts_with(w))
                .unwrap_or_else(|| {
                    panic!("bytes at {} start no write whole", got.len() - rest.len())
                });
            let len = [low.len(), 3, high.len()][which];
            seen.push(which);
            rest = &rest[len..];
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);
        term.server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_server_killed_mid_paste_fails_the_writes_with_server_gone() {
    live(async |dir| {
        let out = dir.path().join("received");
        let input_dir = dir.path().join("input");
        std::fs::create_dir(&input_dir).expect("input dir");
        let client_opts = ClientOptions::default().input_dir(Some(input_dir.clone()));
        let (term, mut stream) = start(dir.path(), &store(&out, 4 * MIB), client_opts).await;
        read_until(&mut stream, b"ready").await;
        let payload = every_byte(4 * MIB);
        let mut paste = std::pin::pin!(term.client.send_bytes(PANE, &payload));
        let mut queued = std::pin::pin!(term.client.send_bytes(PANE, b"after"));
        // The paste has started (its first pieces are queued) and the
        // second write waits for its turn.
        assert!((&mut paste).now_or_never().is_none());
        assert!((&mut queued).now_or_never().is_none());
        process::signal(term.server.pid(), rustix::process::Signal::KILL).expect("SIGKILL");
        let (pasted, after) = tokio::time::timeout(Duration::from_secs(20), async {
            (paste.await, queued.await)
        })
        .await
        .expect("the writes end instead of hanging");
        assert_eq!(
            pasted.expect_err("server gone").code(),
            ErrorCode::ServerGone
        );
        assert_eq!(
            after.expect_err("server gone").code(),
            ErrorCode::ServerGone
        );
        // Nothing of the paste is left behind for tmux to read.
        let left: Vec<_> = std::fs::read_dir(&input_dir)
            .expect("input dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(left.is_empty(), "pieces left behind: {left:?}");
        term.server.kill().await.expect("kill cleans up");
    })
    .await;
}

#[tokio::test]
async fn a_paste_into_a_dead_pane_leaves_the_server_running() {
    live(async |dir| {
        // tmux 3.3a's paste-buffer into a dead pane crashes the server.
        let (term, _stream) = start(dir.path(), "exit 3", ClientOptions::default()).await;
        exited(&term).await;
        let dead = TmuxCommand::new("display-message")
            .flag("-p")
            .target(PANE)
            .arg("#{pane_dead}");
        assert_eq!(term.client.command(&dead).await.expect("probe").text(), "1");
        let payload = every_byte(200_000);
        term.client
            .send_bytes(PANE, &payload)
            .await
            .expect("a write to a dead pane is dropped, as send-keys drops it");
        // The server is there and every command still gets its own reply.
        for i in 0..3 {
            let echo = TmuxCommand::new("display-message")
                .flag("-p")
                .arg(format!("still {i}"));
            assert_eq!(
                term.client
                    .command(&echo)
                    .await
                    .expect("server alive")
                    .text(),
                format!("still {i}")
            );
        }
        let buffers = TmuxCommand::new("list-buffers").opt("-F", "#{buffer_name}");
        let left = term.client.command(&buffers).await.expect("list-buffers");
        assert_eq!(left.text(), "", "no buffer is left behind");
        assert!(process::is_alive(term.server.pid()), "the server is up");
        term.server.kill().await.expect("kill");
    })
    .await;
}
