//! Live tests of the control client against a real tmux: pipelining, reply
//! matching, server loss, deadlines, flow control and exact bytes.

use std::time::Duration;

use futures_util::future::join_all;
use tmux_engine::Error;
use tmux_engine::ErrorCode;
use tmux_engine::control::Notification;
use tmux_engine::control::client::{ClientOptions, ControlClient, Delivery, PaneEvent, PaneStream};
use tmux_engine::control::client::{Snapshot, SubscribeOptions};
use tmux_engine::control::wait_pane_exit;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::Server;
use tmux_engine::tmux::TmuxCommand;
use tmux_engine::tmux::process;
use tmux_engine::vocab::PaneId;

use crate::support::{live, opts, poll, test_dir, tmux};

fn cmd(name: &'static str) -> TmuxCommand {
    TmuxCommand::new(name)
}

/// A launched server and its control client (killed when dropped).
struct Term {
    server: Server,
    client: ControlClient,
}

impl Term {
    fn server(&self) -> &Server {
        &self.server
    }

    fn client(&self) -> &ControlClient {
        &self.client
    }

    fn pane(&self) -> PaneId {
        PaneId(0)
    }

    /// Kills the server (and so the connection), removing its directory.
    async fn kill(self) -> tmux_engine::Result<()> {
        let killed = self.server.kill().await;
        let _ = tokio::time::timeout(Duration::from_secs(2), self.client.closed()).await;
        killed
    }
}

async fn start(
    dir: &std::path::Path,
    command: &[&str],
    client: ClientOptions,
) -> (Term, PaneStream) {
    let mut server = opts(dir);
    server.command = command.iter().map(Into::into).collect();
    let parts = launch(tmux(), server, client, SubscribeOptions::default())
        .await
        .expect("terminal starts");
    let Parts {
        server,
        client,
        output,
        ..
    } = parts;
    (Term { server, client }, output)
}

/// Reads the stream until `want` has been seen in the output bytes.
async fn read_until(stream: &mut PaneStream, want: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    while !seen.windows(want.len()).any(|w| w == want) {
        match stream.recv().await.expect("stream open") {
            PaneEvent::Output(bytes) => seen.extend_from_slice(&bytes),
            PaneEvent::Resync(snap) => seen.extend_from_slice(&snap.to_ansi()),
        }
    }
    seen
}

#[tokio::test]
async fn pipelined_commands_get_their_own_replies_in_order() {
    live(async |dir| {
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client().clone();
        // 300 commands in flight at once, every third one failing: each
        // caller must get exactly its own answer.
        let calls = (0..300).map(|i| {
            let client = client.clone();
            async move {
                if i % 3 == 0 {
                    let bad = cmd("has-session").target(format!("=nosuch{i}"));
                    match client.command(&bad).await {
                        Err(Error::Command { message, .. }) => {
                            assert!(message.contains(&format!("nosuch{i}")), "{message}");
                        }
                        other => panic!("command {i}: expected a tmux error, got {other:?}"),
                    }
                } else {
                    let ok = cmd("display-message")
                        .flag("-p")
                        .format_time_arg(format!("reply {i}"));
                    let reply = client.command(&ok).await.expect("reply");
                    assert_eq!(reply.text(), format!("reply {i}"));
                }
            }
        });
        join_all(calls).await;
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn hook_blocks_with_flags_0_do_not_take_a_reply() {
    live(async |dir| {
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client();
        // A hook's commands run with this client and print flags-0 blocks.
        let hook = cmd("set-hook")
            .flag("-g")
            .arg("after-new-window")
            .arg("display-message -p from-hook");
        client.command(&hook).await.expect("set-hook");
        let new_window = cmd("new-window").flag("-d").arg("cat");
        let after = cmd("display-message").flag("-p").arg("mine");
        let (a, b) = tokio::join!(client.command(&new_window), client.command(&after));
        a.expect("new-window");
        assert_eq!(b.expect("display").text(), "mine");
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn replies_keep_utf8_because_the_client_runs_with_u() {
    live(async |dir| {
        let (term, _stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let reply = term
            .client()
            .command(&cmd("display-message").flag("-p").arg("é € 😀"))
            .await
            .expect("reply");
        assert_eq!(reply.text(), "é € 😀");
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_stopped_server_is_unresponsive_and_replies_stay_matched_after() {
    live(async |dir| {
        let client_opts = ClientOptions::default().command_timeout(Duration::from_millis(300));
        let (term, _stream) = start(dir.path(), &["cat"], client_opts).await;
        let server_pid = term.server().pid();
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let late = cmd("display-message").flag("-p").arg("late");
        let err = term
            .client()
            .command(&late)
            .await
            .expect_err("no answer while stopped");
        assert_eq!(err.code(), ErrorCode::Unresponsive, "{err}");
        process::signal(server_pid, rustix::process::Signal::CONT).expect("SIGCONT");
        // The late reply arrives now and is dropped; the next one is ours.
        let next = cmd("display-message").flag("-p").arg("next");
        assert_eq!(
            term.client().command(&next).await.expect("reply").text(),
            "next"
        );
        term.kill().await.expect("kill");
    })
    .await;
}

/// Awaits `run`, which must fail `UNRESPONSIVE`; how long it took (at
/// least as long as the command's own wait).
async fn overdue(what: &str, run: impl Future<Output = tmux_engine::Result<()>>) -> Duration {
    let began = tokio::time::Instant::now();
    let err = run.await.expect_err(what);
    assert_eq!(err.code(), ErrorCode::Unresponsive, "{what}: {err}");
    began.elapsed()
}

/// The reply watchdog keeps one timer per client (`watchdog.rs`): every
/// caller is still told it is overdue, none before its own deadline, for a
/// write, for commands sent together or once it had gone idle, and for one
/// still waiting for an in-flight slot; once the server runs again every
/// late reply is dropped and writes and replies meet their own callers.
#[tokio::test]
async fn every_overdue_write_and_command_is_unresponsive_after_its_own_timeout() {
    live(async |dir| {
        let timeout = Duration::from_millis(300);
        let client_opts = ClientOptions::default()
            .command_timeout(timeout)
            .max_in_flight(3);
        let (term, mut stream) = start(dir.path(), &["cat"], client_opts).await;
        let client = term.client().clone();
        let server_pid = term.server().pid();
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let say = |text: &'static str| {
            let client = client.clone();
            async move {
                let command = cmd("display-message").flag("-p").arg(text);
                client.command(&command).await.map(drop)
            }
        };
        let write = overdue("a write", client.send_bytes(PaneId(0), b"lost")).await;
        assert!(write >= timeout, "{write:?}");
        // Two at once (the watchdog had nothing to wait for before them).
        let (one, two) = tokio::join!(overdue("one", say("one")), overdue("two", say("two")));
        assert!(one >= timeout && two >= timeout, "{one:?} {two:?}");
        // All three slots are held by unanswered commands: this one waits
        // for a slot, and is overdue all the same.
        let queued = overdue("one waiting for a slot", say("queued")).await;
        assert!(queued >= timeout, "{queued:?}");
        process::signal(server_pid, rustix::process::Signal::CONT).expect("SIGCONT");
        let next = cmd("display-message").flag("-p").arg("next");
        assert_eq!(client.command(&next).await.expect("reply").text(), "next");
        client
            .send_bytes(PaneId(0), b"\rback\r")
            .await
            .expect("write");
        let seen = read_until(&mut stream, b"back").await;
        assert!(seen.windows(4).any(|w| w == b"back"), "{seen:?}");
        term.kill().await.expect("kill");
    })
    .await;
}

/// The reply watchdog keeps a timer only while a command is pending, on
/// both links (the engine linked to the socket itself, and a `tmux -C`
/// process): none once a client is attached, none after an answered
/// command, one while a stopped server leaves a command unanswered (which
/// is still told it is overdue), none again once that command was told.
/// Observed through the client's state, not by timing.
#[tokio::test]
async fn an_idle_client_keeps_no_reply_timer_on_either_link() {
    live(async |dir| {
        let mut server = opts(dir.path());
        server.command = vec!["cat".into()];
        let server = crate::support::start_server(server).await;
        let timeout = Duration::from_millis(300);
        let client_opts = || ClientOptions::default().command_timeout(timeout);
        let (linked, _) = ControlClient::attach(server.handle(), client_opts(), &[])
            .await
            .expect("attached");
        let process = ControlClient::spawn(server.handle().control_command(), client_opts())
            .await
            .expect("tmux -C attached");
        assert!(process.pid().is_some(), "a tmux -C process");
        let say = |client: &ControlClient, text: &'static str| {
            let client = client.clone();
            async move {
                let command = cmd("display-message").flag("-p").arg(text);
                client.command(&command).await.map(|reply| reply.text())
            }
        };
        for (link, client) in [("linked", &linked), ("tmux -C", &process)] {
            assert!(!client.reply_timer_armed(), "{link}: a timer once attached");
            assert_eq!(say(client, "x").await.expect("reply"), "x");
            assert!(!client.reply_timer_armed(), "{link}: a timer once answered");
            process::signal(server.pid(), rustix::process::Signal::STOP).expect("SIGSTOP");
            let pending = tokio::spawn(say(client, "late"));
            poll(
                &format!("{link}: the pending command's timer"),
                Duration::from_secs(10),
                || async { client.reply_timer_armed().then_some(()) },
            )
            .await;
            let overdue = pending
                .await
                .expect("task")
                .expect_err("no answer while stopped");
            assert_eq!(overdue.code(), ErrorCode::Unresponsive, "{link}: {overdue}");
            // Told, the command still holds its place in the FIFO until
            // tmux answers it, but nobody waits: no timer.
            assert!(!client.reply_timer_armed(), "{link}: a timer once told");
            process::signal(server.pid(), rustix::process::Signal::CONT).expect("SIGCONT");
            assert_eq!(say(client, "next").await.expect("reply"), "next");
            assert!(
                !client.reply_timer_armed(),
                "{link}: a timer once caught up"
            );
        }
        drop((linked, process));
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_fails_pending_commands_and_ends_streams_with_the_reason() {
    live(async |dir| {
        let (term, mut stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client().clone();
        let server_pid = term.server().pid();
        // Stopped, the server cannot answer: the command stays pending.
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let pending = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .command(&cmd("display-message").flag("-p").arg("x"))
                    .await
            }
        });
        process::signal(server_pid, rustix::process::Signal::KILL).expect("SIGKILL");
        let err = pending.await.expect("task").expect_err("server died");
        assert_eq!(err.code(), ErrorCode::ServerGone, "{err}");
        assert!(stream.recv().await.is_none(), "the pane stream ends");
        let reason = stream.close_reason().expect("a reason");
        assert!(reason.contains("server exited unexpectedly"), "{reason}");
        assert_eq!(client.closed().await, reason);
        let after = client
            .command(&cmd("display-message").flag("-p").arg("y"))
            .await
            .expect_err("closed");
        assert_eq!(after.code(), ErrorCode::ServerGone);
        term.kill().await.expect("kill cleans up the directory");
    })
    .await;
}

#[tokio::test]
async fn send_bytes_delivers_every_byte_exactly() {
    live(async |dir| {
        let out = dir.path().join("received");
        let script = format!(
            "stty raw -echo; echo ready; head -c 20480 > {}; echo done; exec sleep 60",
            out.display()
        );
        let (term, mut stream) =
            start(dir.path(), &["sh", "-c", &script], ClientOptions::default()).await;
        let mut payload: Vec<u8> = (0..=255u8).cycle().take(256 * 16).collect();
        payload.extend((0..16384u32).map(|i| (i * 7 % 251) as u8));
        assert_eq!(payload.len(), 20480);
        // The program switches the tty to raw mode first; wait for that.
        read_until(&mut stream, b"ready").await;
        term.client()
            .send_bytes(term.pane(), &payload)
            .await
            .expect("send");
        read_until(&mut stream, b"done").await;
        assert_eq!(std::fs::read(&out).expect("written"), payload);
        term.kill().await.expect("kill");
    })
    .await;
}

/// A queued write (`send_bytes_queued`) returns once its line is on its
/// way: keystrokes, a write too long for one line (waited for whole) and
/// more keystrokes reach the program in the order they were queued; the
/// answers, looked at afterwards, are in; a line tmux refuses is queued
/// all the same and its answer says why; a stopped server's answer is
/// overdue, told when it is looked at, not by the watchdog.
#[tokio::test]
async fn queued_writes_arrive_in_order_and_answer_when_looked_at() {
    live(async |dir| {
        let timeout = Duration::from_millis(500);
        let client_opts = ClientOptions::default().command_timeout(timeout);
        let script = "stty raw -echo; echo ready; exec cat";
        let (term, mut stream) = start(dir.path(), &["sh", "-c", script], client_opts).await;
        read_until(&mut stream, b"ready").await;
        let client = term.client();
        let long: Vec<u8> = b"0123456789".repeat(20);
        let mut answers = Vec::new();
        for part in [&b"one-"[..], b"two-", &long, b"-three"] {
            answers.push(
                client
                    .send_bytes_queued(term.pane(), part)
                    .await
                    .expect("queued"),
            );
        }
        let seen = read_until(&mut stream, b"-three").await;
        let mut want = b"one-two-".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"-three");
        assert!(seen.windows(want.len()).any(|w| w == want), "{seen:?}");
        for answer in answers {
            answer.answered().await.expect("answered");
        }
        // No such pane: queued, refused in the answer.
        let refused = client
            .send_bytes_queued(PaneId(999), b"x")
            .await
            .expect("queued");
        let error = refused.answered().await.expect_err("no such pane");
        assert_eq!(error.code(), ErrorCode::CommandFailed, "{error}");
        // A stopped server: queued at once, overdue when looked at.
        let server_pid = term.server().pid();
        process::signal(server_pid, rustix::process::Signal::STOP).expect("SIGSTOP");
        let stalled = client
            .send_bytes_queued(term.pane(), b"late")
            .await
            .expect("queued");
        let late = overdue("a queued write", stalled.answered()).await;
        process::signal(server_pid, rustix::process::Signal::CONT).expect("SIGCONT");
        assert!(late >= timeout, "{late:?}");
        read_until(&mut stream, b"late").await;
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_gets_the_pane_paused_then_a_resync() {
    live(async |dir| {
        let client_opts = {
            // The observer below must not skip the %pause it waits for.
            ClientOptions::default()
                .subscriber_capacity(8)
                .event_capacity(1 << 16)
        };
        let (term, mut stream) = start(
            dir.path(),
            &["sh", "-c", "read go; exec yes tick"],
            client_opts,
        )
        .await;
        // Observe from before the flood starts, so the %pause is not missed.
        let mut events = term.client().subscribe_events();
        term.client()
            .send_bytes(term.pane(), b"\r")
            .await
            .expect("start the flood");
        // Not reading `stream`: its queue fills, the client pauses the pane.
        loop {
            match events.recv().await {
                Ok(Notification::Pause { pane }) if pane == term.pane() => break,
                Ok(_) => {}
                Err(e) => panic!("events ended or lagged: {e}"),
            }
        }
        // The program keeps running while paused (no backpressure from us).
        let pid = term.server().first_pane().pid;
        assert!(process::is_alive(pid));
        // Catching up: the queued output, then one resync, then live output.
        let mut resync = None;
        let mut live_after = 0;
        while live_after < 3 {
            match stream.recv().await.expect("stream open") {
                PaneEvent::Resync(snap) => resync = Some(snap),
                PaneEvent::Output(bytes) if resync.is_some() => {
                    assert!(!bytes.is_empty(), "no empty output events");
                    live_after += 1;
                }
                PaneEvent::Output(_) => {}
            }
        }
        let snap = resync.expect("a resync before live output");
        assert_eq!((snap.width, snap.height), (80, 24));
        assert_eq!(snap.screen.len(), 24);
        assert!(snap.screen.iter().any(|line| line.starts_with(b"tick")));
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn pane_exit_is_pushed_with_code_or_signal() {
    live(async |dir| {
        let (term, _stream) = start(
            dir.path(),
            &["sh", "-c", "exit 7"],
            ClientOptions::default(),
        )
        .await;
        let exit = wait_pane_exit(term.client(), term.pane())
            .await
            .expect("exit");
        assert_eq!(exit.shell_status(), 7);
        term.kill().await.expect("kill");

        let dir = test_dir();
        let (term, _stream) = start(dir.path(), &["sleep", "30"], ClientOptions::default()).await;
        let pid = term.server().first_pane().pid;
        let waiter = tokio::spawn({
            let client = term.client().clone();
            let pane = term.pane();
            async move { wait_pane_exit(&client, pane).await }
        });
        process::signal(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let exit = waiter.await.expect("task").expect("exit");
        assert_eq!(exit.shell_status(), 128 + 15);
        term.kill().await.expect("kill");
    })
    .await;
}

/// Every complete `<n=DIGITS>` marker in `bytes`, in order.
fn counters(bytes: &[u8]) -> Vec<u64> {
    let mut found = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest.windows(3).position(|w| w == b"<n=") {
        rest = &rest[at + 3..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && rest.get(digits) == Some(&b'>') {
            let text = std::str::from_utf8(&rest[..digits]).expect("ASCII digits");
            found.push(text.parse().expect("a counter fits u64"));
        }
    }
    found
}

/// What a pane stream carried: output before its first resync, then each
/// resync with the live output that followed it.
#[derive(Default)]
struct Seen {
    before: Vec<u8>,
    resyncs: Vec<(Snapshot, Vec<u8>)>,
}

impl Seen {
    fn take(&mut self, event: PaneEvent) {
        match event {
            PaneEvent::Resync(snap) => self.resyncs.push((snap, Vec::new())),
            PaneEvent::Output(bytes) => match self.resyncs.last_mut() {
                None => self.before.extend_from_slice(&bytes),
                Some((_, after)) => after.extend_from_slice(&bytes),
            },
        }
    }

    /// The newest counter of live output after a resync.
    fn last_live(&self) -> Option<u64> {
        self.resyncs
            .iter()
            .rev()
            .find_map(|(_, after)| counters(after).last().copied())
    }

    /// The newest counter the first resync's snapshot shows.
    fn shown(&self) -> Option<u64> {
        self.resyncs
            .first()
            .and_then(|(snap, _)| newest_shown(snap))
    }

    /// Asserts at least one resync, each of `pane`, and after each the live
    /// output takes up exactly where its snapshot ends, with no gap until
    /// the next; returns the first snapshot's newest counter. The lag under
    /// test makes the first; on a loaded machine the engine may fall behind
    /// the flood again later, and tmux then pauses (and the engine resyncs)
    /// again, as it should: each of those must be seamless too.
    fn assert_seamless_resyncs(&self, pane: PaneId, who: &str) -> u64 {
        assert!(!self.resyncs.is_empty(), "{who}: no resync");
        for (snap, after) in &self.resyncs {
            assert_eq!(snap.pane, pane);
            let newest = newest_shown(snap)
                .unwrap_or_else(|| panic!("{who}: the snapshot shows numbered lines"));
            let live = counters(after);
            if let Some(first) = live.first() {
                assert_eq!(*first, newest + 1, "{who}: {live:?}");
            }
            assert!(
                live.windows(2).all(|w| w[1] == w[0] + 1),
                "{who}: gap in live output {live:?}"
            );
        }
        assert!(
            self.resyncs
                .iter()
                .any(|(_, after)| !counters(after).is_empty()),
            "{who}: no live output after a resync"
        );
        self.shown().expect("a first resync")
    }
}

/// The newest counter `snap` shows.
fn newest_shown(snap: &Snapshot) -> Option<u64> {
    let lines = snap.history.iter().chain(&snap.screen);
    lines.flat_map(|line| counters(line)).max()
}

#[tokio::test]
async fn tmux_pauses_a_lagging_engine_by_itself_and_the_reader_resyncs() {
    // How long the engine stops reading. tmux pauses a pane when the oldest
    // output it could not write is `pause-after` seconds old, so the lag is
    // real time: under a second to fill the pipe, then over a second more.
    const LAG: Duration = Duration::from_secs(3);
    live(async |dir| {
        let client_opts = {
            // Any %pause is then tmux's own, never the engine's.
            // The streams never lag: no resync but the ones under test.
            ClientOptions::default()
                .pause_after(Some(1))
                .pane_pause(false)
                .subscriber_capacity(1 << 16)
                .event_capacity(1 << 16)
        };
        // Numbered lines of ~0.5 KB every few ms: enough to fill the pipe
        // to the engine quickly, little enough for the engine to keep up.
        let program = "read go; pad=$(printf '%0500d' 0); i=0; \
                       while :; do i=$((i+1)); printf '<n=%d>%s\\n' $i $pad; sleep 0.002; done";
        let (term, mut stream) = start(dir.path(), &["sh", "-c", program], client_opts).await;
        // A second client that takes no output keeps tmux reading the pane
        // while the engine lags, as a user attached with a terminal would.
        // With the engine as its only client, tmux rather stops reading the
        // pane once the pipe is full, and then pauses only if an output
        // block happened to be left queued (3 times in 5 here).
        let mut observer = crate::support::Control::attach(term.server()).await;
        assert!(observer.cmd("refresh-client -f no-output").await.ok);
        let mut events = term.client().subscribe_events();
        term.client()
            .send_bytes(term.pane(), b"\r")
            .await
            .expect("start the output");
        let mut seen = Seen {
            before: read_until(&mut stream, b"<n=5>").await,
            ..Seen::default()
        };
        // A subscriber that joins with a snapshot just as the engine stalls:
        // its capture is written only after the lag, so tmux has paused the
        // pane by then and drops output until the engine continues it.
        let mut late = term.client().subscribe_pane(
            term.pane(),
            SubscribeOptions::default().snapshot_first(true),
        );

        // The engine lags for real: its reader runs on this thread only
        // (current-thread runtime), so blocking the thread stops every read
        // of tmux's stdout. Stopping the `tmux -C` process would not: the
        // server writes to that pipe itself (`control_start` in control.c).
        assert_eq!(
            tokio::runtime::Handle::current().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::CurrentThread
        );
        std::thread::sleep(LAG);

        // Catching up: what the pipe held, one resync, then live output,
        // watched for 200 lines more so that a second resync would show.
        tokio::time::timeout(Duration::from_secs(20), async {
            while seen
                .shown()
                .zip(seen.last_live())
                .is_none_or(|(s, n)| n < s + 200)
            {
                seen.take(stream.recv().await.expect("stream open"));
            }
        })
        .await
        .expect("a resync and live output after the lag");
        let shown = seen.assert_seamless_resyncs(term.pane(), "subscriber");
        let streamed = counters(&seen.before).into_iter().max().expect("output");
        // The snapshot shows lines printed while the pane was paused, which
        // the stream never carried.
        assert!(
            shown > streamed + 1,
            "snapshot up to {shown}, stream up to {streamed}"
        );

        // The late subscriber sees everything up to there too: its first
        // capture predates what tmux dropped, so only a second one may count.
        // It may still be behind the first stream: its own resync's capture
        // is a command of its own, answered in turn behind what tmux had
        // queued (on a loaded machine, after the lines watched above).
        let last = seen.last_live();
        let mut late_seen = Seen::default();
        tokio::time::timeout(Duration::from_secs(20), async {
            while late_seen.last_live() < last {
                late_seen.take(late.recv().await.expect("late stream open"));
            }
        })
        .await
        .expect("the late stream catches up");
        assert!(late_seen.before.is_empty(), "output before its snapshot");
        late_seen.assert_seamless_resyncs(term.pane(), "late subscriber");

        // tmux paused the pane, and the engine continued it. On a loaded
        // machine the engine may fall behind the flood again after the
        // window watched above: a later pause, not yet continued, is tmux
        // doing its job; every pause but the newest must be continued.
        let (mut pauses, mut continues) = (0, 0);
        loop {
            match events.try_recv() {
                Ok(Notification::Pause { pane }) if pane == term.pane() => pauses += 1,
                Ok(Notification::Continue { pane }) if pane == term.pane() => continues += 1,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
                Err(e) => panic!("events ended or lagged: {e}"),
            }
        }
        assert!(
            pauses >= 1 && continues >= 1 && pauses - continues <= 1,
            "{pauses} pauses, {continues} continues"
        );
        observer.close().await;
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn detach_resolves_with_no_tmux_c_left_and_the_handshake_lock_free() {
    live(async |dir| {
        let (term, mut stream) = start(dir.path(), &["cat"], ClientOptions::default()).await;
        let client = term.client().clone();
        let pid = client.pid().expect("tmux -C has a pid");
        client
            .send_bytes(term.pane(), b"hello\r")
            .await
            .expect("typed");
        read_until(&mut stream, b"hello").await;
        let other = client.clone();

        let reason = client.detach().await;
        // Nothing of the client is left: `tmux -C` has exited and been reaped...
        assert!(!process::is_alive(pid), "tmux -C {pid} outlived its detach");
        // ...the handshake lock is free (flock locks belong to the open file,
        // so this contends like another engine would)...
        let lock =
            std::fs::File::open(term.server().control_lock()).expect("the handshake lock file");
        lock.try_lock().expect("the handshake lock is released");
        drop(lock);
        // ...every handle sees it closed, and the pane stream has ended.
        assert_eq!(other.closed_reason().as_deref(), Some(reason.as_str()));
        assert_eq!(other.closed().await, reason);
        while stream.recv().await.is_some() {}
        // The server runs on, with no client attached.
        assert!(term.server().is_alive());
        let socket = term.server().socket().to_owned();
        poll(
            "the server to drop the client",
            Duration::from_secs(10),
            || {
                let socket = socket.clone();
                async move {
                    let out = std::process::Command::new("tmux")
                        .arg("-S")
                        .arg(&socket)
                        .args(["list-clients", "-F", "#{client_pid}"])
                        .output()
                        .expect("running tmux list-clients");
                    assert!(out.status.success(), "the server is gone: {out:?}");
                    out.stdout.is_empty().then_some(())
                }
            },
        )
        .await;
        term.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn a_lossless_subscriber_that_stopped_reading_does_not_hold_a_detach_up() {
    live(async |dir| {
        let mut server = opts(dir.path());
        // Floods once told to, so the start's own commands get answers.
        server.command = ["/bin/sh", "-c", "read go; exec yes"]
            .iter()
            .map(Into::into)
            .collect();
        let client_opts = ClientOptions::default()
            .command_timeout(Duration::from_millis(200))
            .pause_after(None)
            .pane_pause(false)
            .subscriber_capacity(2);
        let lossless = SubscribeOptions::default()
            .delivery(Delivery::Lossless)
            .snapshot_first(false);
        let Parts {
            server,
            client,
            output: stream,
            ..
        } = launch(tmux(), server, client_opts, lossless)
            .await
            .expect("terminal starts");
        let term = Term { server, client };
        term.client()
            .send_bytes(term.pane(), b"go\r")
            .await
            .expect("typed");
        // Never read: the reader blocks on the full stream, so replies stop.
        poll("the reader to block", Duration::from_secs(10), || async {
            let probe = cmd("display-message").flag("-p").arg("x");
            match term.client().command(&probe).await {
                Err(error) if error.code() == ErrorCode::Unresponsive => Some(()),
                _ => None,
            }
        })
        .await;
        let pid = term.client().pid().expect("tmux -C has a pid");
        term.client().detach().await;
        assert!(!process::is_alive(pid), "tmux -C {pid} outlived its detach");
        drop(stream);
        term.kill().await.expect("kill");
    })
    .await;
}
