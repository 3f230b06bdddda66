//! The raw output path against a real tmux: a pane's bytes through its
//! `pipe-pane` relay instead of `%output`, exactly, to the last byte of a
//! fast exit, with bounded tmux memory under a stalled reader, and the
//! `%output` fallback where no relay can run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tmux_engine::control::client::{
    ClientOptions, OutputPath, PaneEvent, PaneStream, SubscribeOptions,
};
use tmux_engine::control::wait_pane_exit;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::ServerOptions;
use tmux_engine::vocab::ExitStatus;

use crate::support::{live, opts, sh_c, tmux};

/// The small relay binary (`tmux-engine` answers the relay's argument too).
fn relay() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tmux-engine-relay"))
}

/// What the exit handshake's wrapper prints after the program's last byte
/// (docs/tmux-quirks.md): the end of every handshaken pane's stream.
const MARKER: &[u8] = b"\x1b]8765;tmux-engine-exit\x07";

/// Every byte value, then invalid UTF-8 (a lone continuation byte, a cut
/// sequence, an overlong form), repeated to `len` bytes.
fn all_bytes(len: usize) -> Vec<u8> {
    let mut unit: Vec<u8> = (0..=255u8).collect();
    unit.extend_from_slice(b"\x80\xe2\x82\xc0\xaf\xff\xfe");
    unit.iter().copied().cycle().take(len).collect()
}

/// Runs `cat FILE` with output post-processing off (no LF -> CRLF), so
/// the pane's bytes are the file's, and exits with 3 at once.
fn cat_then_exit(server: ServerOptions, file: &Path) -> ServerOptions {
    server.command(sh_c(
        "stty -opost -echo; cat \"$1\"; exit 3",
        &[file.as_os_str()],
    ))
}

async fn start(server: ServerOptions) -> Parts {
    start_with(server, ClientOptions::default()).await
}

async fn start_with(server: ServerOptions, client: ClientOptions) -> Parts {
    launch(tmux(), server, client, SubscribeOptions::default())
        .await
        .expect("terminal starts")
}

/// Everything the stream carries until it has `len` bytes; a resync
/// fails the test (nothing may be skipped).
async fn collect(stream: &mut PaneStream, len: usize) -> Vec<u8> {
    let mut seen = Vec::with_capacity(len);
    while seen.len() < len {
        let event = tokio::time::timeout(STALL, stream.recv()).await;
        let event = event.unwrap_or_else(|_| {
            panic!(
                "no output for {STALL:?} with {} of {len} bytes in",
                seen.len()
            )
        });
        match event.expect("stream open") {
            PaneEvent::Output(bytes) => seen.extend_from_slice(&bytes),
            PaneEvent::Resync(_) => panic!("a resync after {} bytes", seen.len()),
        }
    }
    seen
}

/// How long a stream may stay silent while bytes are still owed.
const STALL: Duration = Duration::from_secs(15);

/// What is queued on the stream now, without waiting.
fn queued(stream: &mut PaneStream, into: &mut Vec<u8>) {
    while let Some(event) = stream.try_recv() {
        match event {
            PaneEvent::Output(bytes) => into.extend_from_slice(&bytes),
            PaneEvent::Resync(_) => panic!("a resync"),
        }
    }
}

#[tokio::test]
async fn every_byte_value_arrives_exactly_through_the_raw_path() {
    live(async |dir| {
        let data = all_bytes(300_000);
        let file = dir.path().join("bytes");
        std::fs::write(&file, &data).expect("write");
        for (relay, path) in [
            (Some(relay()), OutputPath::Raw),
            (None, OutputPath::Control),
        ] {
            // The program stays: a fast exit's tail is the raw path's alone
            // (control mode drops output it had queued for a pane that died,
            // `control_write_pending`; the screen model redraws from tmux).
            let server = opts(dir.path()).raw_relay(relay).command(sh_c(
                "stty -opost -echo; cat \"$1\"; exec sleep 60",
                &[file.as_os_str()],
            ));
            let Parts {
                server,
                client,
                pane,
                mut output,
                ..
            } = start(server).await;
            assert_eq!(client.output_path(pane), path);
            // On the raw path a client linked to the socket took the
            // starting `tmux -C`'s place: no process is left per terminal.
            assert_eq!(client.pid().is_none(), path == OutputPath::Raw, "{path}");
            // `stty` may echo nothing; the program's first bytes are the file's.
            let got = collect(&mut output, data.len()).await;
            assert_eq!(got.len(), data.len(), "{path}");
            assert!(got == data, "{path}: the bytes differ");
            server.kill().await.expect("kill");
        }
    })
    .await;
}

#[tokio::test]
async fn a_fast_exit_loses_nothing_on_the_raw_path() {
    live(async |dir| {
        let data = all_bytes(200_000);
        let file = dir.path().join("tail");
        std::fs::write(&file, &data).expect("write");
        for round in 0..5 {
            // The exit handshake keeps the pane until its output is in:
            // without it Linux may hand tmux the hang-up before the last
            // bytes `cat` wrote, and tmux, seeing none unread, closes the
            // pane without them (the hang this test once showed).
            let server = cat_then_exit(opts(dir.path()).raw_relay(Some(relay())), &file)
                .exit_handshake(true);
            let Parts {
                server,
                client,
                pane,
                mut output,
                ..
            } = start(server).await;
            assert_eq!(client.output_path(pane), OutputPath::Raw);
            // Nothing is read until the exit is known: every byte must be
            // queued by the time `wait_pane_exit` returns.
            let exit = tokio::time::timeout(STALL, wait_pane_exit(&client, pane))
                .await
                .unwrap_or_else(|_| panic!("round {round}: no exit in {STALL:?}"))
                .expect("exit");
            assert_eq!(exit, ExitStatus::Code(3));
            let mut got = Vec::new();
            queued(&mut output, &mut got);
            let whole = data.len() + MARKER.len();
            if got.len() < whole {
                // The queue is bounded: the rest follows once it drains.
                got.extend(collect(&mut output, whole - got.len()).await);
            }
            // The wrapper's marker follows the program's last byte.
            assert_eq!(&got[data.len()..], MARKER, "round {round}");
            got.truncate(data.len());
            assert!(
                got == data,
                "round {round}: {} of {} bytes",
                got.len(),
                data.len()
            );
            server.kill().await.expect("kill");
        }
    })
    .await;
}

#[tokio::test]
async fn a_stalled_reader_never_grows_tmux() {
    live(async |dir| {
        // 64 MiB through a subscriber that reads nothing until the end.
        let server = opts(dir.path()).raw_relay(Some(relay())).command(sh_c(
            "stty -opost; head -c 67108864 /dev/zero | tr '\\0' x; printf END",
            &[],
        ));
        let Parts {
            server,
            client,
            pane,
            mut output,
            ..
        } = start_with(server, ClientOptions::default().subscriber_capacity(16)).await;
        assert_eq!(client.output_path(pane), OutputPath::Raw);
        let tmux_pid = server.pid();
        let mut peak = 0;
        let exit = wait_pane_exit(&client, pane);
        tokio::pin!(exit);
        let exit = loop {
            tokio::select! {
                exit = &mut exit => break exit,
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    peak = peak.max(rss_kib(tmux_pid));
                }
            }
        };
        exit.expect("the program ran to its end: the pipe was drained");
        // tmux buffers at most a few pipe loads, never the 64 MiB.
        assert!(peak < 48 * 1024, "tmux grew to {peak} KiB");
        // The subscriber skipped what it could not take and is brought back
        // in sync: a resync, then the live end.
        let mut resynced = false;
        let mut tail = Vec::new();
        while let Some(event) = output.try_recv() {
            match event {
                PaneEvent::Resync(_) => resynced = true,
                PaneEvent::Output(bytes) => tail.extend_from_slice(&bytes),
            }
        }
        if !resynced {
            match tokio::time::timeout(Duration::from_secs(10), output.recv()).await {
                Ok(Some(PaneEvent::Resync(_))) => resynced = true,
                other => panic!("expected a resync, got {other:?}"),
            }
        }
        assert!(resynced);
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn without_a_usable_relay_output_rides_control_mode() {
    live(async |dir| {
        // A relay path tmux would rewrite (`%`) is refused, not half-used.
        let odd = dir.path().join("re%lay");
        std::fs::copy(relay(), &odd).expect("copy");
        for relay in [None, Some(odd), Some(dir.path().join("missing"))] {
            let server = opts(dir.path())
                .raw_relay(relay.clone())
                .command(sh_c("printf 'fallback\\n'; exec sleep 60", &[]));
            let Parts {
                server,
                client,
                pane,
                mut output,
                ..
            } = start(server).await;
            assert_eq!(client.output_path(pane), OutputPath::Control, "{relay:?}");
            let got = collect(&mut output, b"fallback\r\n".len()).await;
            assert_eq!(got, b"fallback\r\n");
            server.kill().await.expect("kill");
        }
    })
    .await;
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// build.rs links the resident relay as a static PIE on glibc Linux: its
/// ELF is position-independent (`ET_DYN`, its code placed at random) and
/// names no loader (no `PT_INTERP`), so no shared library is loaded and
/// relocated per terminal. A host without glibc's static library gets a
/// dynamic relay and a build warning: this test then fails, as it should
/// where the figures in docs/benchmarks.md are to hold.
#[test]
fn the_relay_is_a_static_pie() {
    let elf = std::fs::read(relay()).expect("the relay binary");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().expect("8 bytes"));
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF");
    assert_eq!(u16_at(16), 3, "ET_DYN: a position-independent executable");
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    let types: Vec<u32> = (0..usize::from(phnum))
        .map(|i| u32_at(phoff + i * phentsize))
        .collect();
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    assert!(
        !types.contains(&PT_INTERP),
        "the relay names a loader: {types:?}"
    );
    // A static PIE relocates itself from its own dynamic section.
    assert!(types.contains(&PT_DYNAMIC), "{types:?}");
}
