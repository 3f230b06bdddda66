//! The hub state machine's unit tests over a real [`Stream`]: offsets,
//! resume, lag and coalesced snapshots, capture epochs, skips, exits and
//! resizes.

#![allow(clippy::unwrap_used)]

use super::*;

/// A hub over an empty stream holding at most `capacity` bytes.
fn hub(capacity: usize) -> (Stream, Hub) {
    let stream = Stream::new(capacity);
    let hub = Hub::new(&stream, Size { cols: 80, rows: 24 });
    (stream, hub)
}

/// The program prints `bytes`: into the stream, then fanned out.
fn print(stream: &Stream, hub: &mut Hub, bytes: &[u8], effects: &mut Vec<Effect>) {
    stream.push(Bytes::copy_from_slice(bytes));
    hub.catch_up(stream, effects);
}

/// A cursor at `offset` of the hub's stream.
fn at(hub: &Hub, offset: u64) -> Option<OutputCursor> {
    Some(OutputCursor {
        epoch: hub.cursor().epoch,
        offset,
    })
}

fn drain(rx: &mut mpsc::Receiver<ViewerEvent>) -> Vec<ViewerEvent> {
    let mut out = Vec::new();
    while let Ok(event) = rx.try_recv() {
        out.push(event);
    }
    out
}

fn out(offset: u64, bytes: &'static [u8]) -> ViewerEvent {
    ViewerEvent::Output {
        offset: Some(offset),
        bytes: Bytes::from_static(bytes),
    }
}

#[test]
fn live_viewers_share_chunks_with_offsets() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    let resume = at(&hub, 0);
    hub.join(tx, resume, &stream, &mut effects);
    assert!(effects.is_empty(), "a resume at offset 0 needs no capture");
    print(&stream, &mut hub, b"ab", &mut effects);
    print(&stream, &mut hub, b"cde", &mut effects);
    assert_eq!(drain(&mut rx), [out(0, b"ab"), out(2, b"cde")]);
    assert_eq!(hub.cursor().offset, 5);
}

#[test]
fn resume_inside_the_ring_replays_exactly_and_outside_snapshots() {
    let (stream, mut hub) = hub(4);
    let mut effects = Vec::new();
    for chunk in [&b"ab"[..], b"cd", b"ef"] {
        print(&stream, &mut hub, chunk, &mut effects);
    }
    // The ring holds "cdef" (offsets 2..6).
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, at(&hub, 3), &stream, &mut effects);
    assert_eq!(drain(&mut rx), [out(3, b"def")]);
    assert!(effects.is_empty());
    // Before the ring, or another stream: a snapshot (one capture).
    let (old, mut old_rx) = mpsc::channel(8);
    hub.join(old, at(&hub, 1), &stream, &mut effects);
    let (other, mut other_rx) = mpsc::channel(8);
    hub.join(
        other,
        Some(OutputCursor {
            epoch: hub.cursor().epoch ^ 1,
            offset: 3,
        }),
        &stream,
        &mut effects,
    );
    assert!(matches!(effects[..], [Effect::Capture(0)]));
    hub.snapshot(
        0,
        Some(Bytes::from_static(b"SCREEN")),
        &stream,
        &mut effects,
    );
    for rx in [&mut old_rx, &mut other_rx] {
        assert_eq!(
            drain(rx),
            [ViewerEvent::Snapshot {
                offset: 6,
                size: Size { cols: 80, rows: 24 },
                repaint: Bytes::from_static(b"SCREEN")
            }]
        );
    }
}

#[test]
fn a_full_viewer_is_skipped_then_gets_one_coalesced_snapshot() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (fast, mut fast_rx) = mpsc::channel(64);
    let (slow, mut slow_rx) = mpsc::channel(1);
    let (slow2, mut slow2_rx) = mpsc::channel(1);
    let start = at(&hub, 0);
    hub.join(fast, start, &stream, &mut effects);
    let slow_id = hub.join(slow, start, &stream, &mut effects);
    let slow2_id = hub.join(slow2, start, &stream, &mut effects);
    for _ in 0..3 {
        print(&stream, &mut hub, b"x", &mut effects);
    }
    assert_eq!(drain(&mut fast_rx).len(), 3, "the fast viewer keeps pace");
    let watched: Vec<u64> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::WatchRoom(id, _) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(watched, [slow_id, slow2_id], "each lagging viewer once");
    effects.clear();
    assert_eq!(drain(&mut slow_rx), [out(0, b"x")]);
    assert_eq!(drain(&mut slow2_rx), [out(0, b"x")]);
    hub.room(slow_id, &mut effects);
    hub.room(slow2_id, &mut effects);
    assert!(
        matches!(effects[..], [Effect::Capture(0)]),
        "one capture for both"
    );
    effects.clear();
    hub.snapshot(0, Some(Bytes::from_static(b"S")), &stream, &mut effects);
    let got = drain(&mut slow_rx);
    assert!(matches!(got[..], [ViewerEvent::Snapshot { offset: 3, .. }]));
    print(&stream, &mut hub, b"z", &mut effects);
    assert_eq!(drain(&mut slow_rx), [out(3, b"z")], "live after it");
}

#[test]
fn exit_reaches_every_viewer_and_ends_them() {
    let (stream, mut hub) = hub(16);
    let mut effects = Vec::new();
    let (tx, _rx) = mpsc::channel(1);
    let start = at(&hub, 0);
    hub.join(tx, start, &stream, &mut effects);
    effects.clear();
    hub.exited(ExitStatus::Code(3), true, &mut effects);
    assert!(matches!(
        effects[..],
        [Effect::Deliver(_, ViewerEvent::Exit(ExitStatus::Code(3)))]
    ));
    assert_eq!(hub.viewers(), 0);
}

#[test]
fn a_capture_from_before_a_discontinuity_never_stands_in_for_a_fresh_one() {
    let (stream, mut hub) = hub(64);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, None, &stream, &mut effects);
    assert!(matches!(effects[..], [Effect::Capture(0)]));
    effects.clear();
    // The server dies and is rebuilt while the join's capture runs.
    hub.discontinuity(&mut effects);
    assert!(
        matches!(effects[..], [Effect::Capture(1)]),
        "a fresh capture is asked for: {effects:?}"
    );
    effects.clear();
    // The stale answer (failed, or the old screen) changes nothing.
    hub.snapshot(0, None, &stream, &mut effects);
    hub.snapshot(0, Some(Bytes::from_static(b"OLD")), &stream, &mut effects);
    print(&stream, &mut hub, b"new", &mut effects);
    assert_eq!(drain(&mut rx), [], "still waiting for the fresh repaint");
    // "new" arrived while the fresh capture ran: it is asked once more
    // (an overtaken capture is not exact), and that one repaints.
    effects.clear();
    hub.snapshot(1, Some(Bytes::from_static(b"NEW?")), &stream, &mut effects);
    assert!(matches!(effects[..], [Effect::Capture(1)]), "{effects:?}");
    assert_eq!(drain(&mut rx), []);
    hub.snapshot(1, Some(Bytes::from_static(b"NEW")), &stream, &mut effects);
    print(&stream, &mut hub, b"!", &mut effects);
    assert_eq!(
        drain(&mut rx),
        [
            ViewerEvent::Snapshot {
                offset: 3,
                size: Size { cols: 80, rows: 24 },
                repaint: Bytes::from_static(b"NEW")
            },
            out(3, b"!")
        ]
    );
}

#[test]
fn a_viewer_not_live_at_the_final_exit_gets_the_final_screen_first() {
    let (stream, mut hub) = hub(64);
    let mut effects = Vec::new();
    let start = at(&hub, 0);
    let (live, _live_rx) = mpsc::channel(8);
    let (slow, _slow_rx) = mpsc::channel(1);
    hub.join(live, start, &stream, &mut effects);
    hub.join(slow, start, &stream, &mut effects);
    print(&stream, &mut hub, b"a", &mut effects);
    print(&stream, &mut hub, b"b", &mut effects);
    effects.clear();
    hub.exited(ExitStatus::Code(0), true, &mut effects);
    assert!(
        matches!(
            &effects[..],
            [
                Effect::Deliver(_, ViewerEvent::Exit(ExitStatus::Code(0))),
                Effect::Farewell { viewers, offset: 2, exit: ExitStatus::Code(0), .. },
            ] if viewers.len() == 1
        ),
        "{effects:?}"
    );
    assert_eq!(hub.viewers(), 0);
}

#[test]
fn a_resize_is_told_once_per_change_then_repainted() {
    let (stream, mut hub) = hub(16);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, at(&hub, 0), &stream, &mut effects);
    print(&stream, &mut hub, b"ab", &mut effects);
    assert!(effects.is_empty(), "{effects:?}");
    let wide = Size {
        cols: 100,
        rows: 30,
    };
    hub.resized(wide, &mut effects);
    hub.resized(wide, &mut effects);
    assert_eq!(drain(&mut rx), [out(0, b"ab"), ViewerEvent::Resize(wide)]);
    // One capture, after the resize, repaints the viewer at the new size.
    let [Effect::Capture(epoch)] = effects[..] else {
        panic!("{effects:?}");
    };
    effects.clear();
    hub.snapshot(epoch, Some(Bytes::from_static(b"R")), &stream, &mut effects);
    assert_eq!(
        drain(&mut rx),
        [ViewerEvent::Snapshot {
            offset: 2,
            size: wide,
            repaint: Bytes::from_static(b"R"),
        }]
    );
    // No resume replays bytes from before it.
    let (late, mut late_rx) = mpsc::channel(8);
    hub.join(late, at(&hub, 0), &stream, &mut effects);
    assert!(drain(&mut late_rx).is_empty());
    assert!(matches!(effects[..], [Effect::Capture(_)]), "{effects:?}");
}

#[test]
fn a_capture_asked_for_before_a_resize_repaints_nobody() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, None, &stream, &mut effects);
    let [Effect::Capture(before)] = effects[..] else {
        panic!("{effects:?}");
    };
    effects.clear();
    let narrow = Size { cols: 46, rows: 47 };
    hub.resized(narrow, &mut effects);
    let [Effect::Capture(after)] = effects[..] else {
        panic!("{effects:?}");
    };
    assert_ne!(before, after);
    effects.clear();
    // The old width's screen, answered late: ignored.
    hub.snapshot(
        before,
        Some(Bytes::from_static(b"80")),
        &stream,
        &mut effects,
    );
    assert!(drain(&mut rx).is_empty());
    hub.snapshot(
        after,
        Some(Bytes::from_static(b"46")),
        &stream,
        &mut effects,
    );
    assert_eq!(
        drain(&mut rx),
        [ViewerEvent::Snapshot {
            offset: 0,
            size: narrow,
            repaint: Bytes::from_static(b"46"),
        }]
    );
}

#[test]
fn a_capture_that_output_overtook_is_asked_again_before_it_repaints() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, None, &stream, &mut effects);
    assert!(matches!(effects.as_slice(), [Effect::Capture(0)]));
    effects.clear();
    // The echo of a command arrives while the capture runs: the capture
    // may show the screen from before it, so it must not be tagged with
    // the offset after it.
    print(&stream, &mut hub, b"echo one-2", &mut effects);
    hub.snapshot(
        0,
        Some(Bytes::from_static(b"old screen")),
        &stream,
        &mut effects,
    );
    assert!(drain(&mut rx).is_empty(), "a stale screen was delivered");
    assert!(matches!(effects.as_slice(), [Effect::Capture(0)]));
    effects.clear();
    // The second capture ran with no output beside it: exact.
    hub.snapshot(
        0,
        Some(Bytes::from_static(b"new screen")),
        &stream,
        &mut effects,
    );
    let events = drain(&mut rx);
    assert!(
        matches!(events.as_slice(), [ViewerEvent::Snapshot { offset: 10, repaint, .. }] if repaint == &Bytes::from_static(b"new screen")),
        "{events:?}"
    );
}

#[test]
fn under_a_steady_flood_an_overtaken_capture_is_delivered_after_a_few_tries() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(64);
    hub.join(tx, None, &stream, &mut effects);
    let mut captures = 0;
    loop {
        effects.clear();
        print(&stream, &mut hub, b"y\n", &mut effects);
        hub.snapshot(
            0,
            Some(Bytes::from_static(b"screen")),
            &stream,
            &mut effects,
        );
        let events = drain(&mut rx);
        if let Some(ViewerEvent::Snapshot { offset, .. }) = events.first() {
            // Tagged where the last capture was asked for, then the bytes
            // that overtook it: the screen may lack them, so they follow.
            let asked = hub.cursor().offset - 2;
            assert_eq!(*offset, asked);
            assert_eq!(events[1..], [out(asked, b"y\n")]);
            break;
        }
        captures += 1;
        assert!(captures <= MAX_OVERTAKEN, "the viewer never got a snapshot");
    }
    assert_eq!(captures, MAX_OVERTAKEN);
}

#[test]
fn a_resume_ahead_of_the_hub_or_behind_a_restart_snapshots() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    print(&stream, &mut hub, b"old program\r\n", &mut effects);
    // Ahead of the end (a count the stream never reached).
    let (ahead, mut ahead_rx) = mpsc::channel(8);
    hub.join(ahead, at(&hub, 99), &stream, &mut effects);
    assert!(matches!(effects[..], [Effect::Capture(0)]), "{effects:?}");
    hub.snapshot(0, Some(Bytes::from_static(b"S")), &stream, &mut effects);
    assert!(matches!(
        drain(&mut ahead_rx)[..],
        [ViewerEvent::Snapshot { offset: 13, .. }]
    ));
    // The program restarts: the old bytes are still held, but they do not
    // lead up to the new program's screen, so they are never replayed.
    effects.clear();
    hub.discontinuity(&mut effects);
    print(&stream, &mut hub, b"new", &mut effects);
    let (back, mut back_rx) = mpsc::channel(8);
    hub.join(back, at(&hub, 4), &stream, &mut effects);
    assert_eq!(drain(&mut back_rx), [], "replayed across a restart");
    // From the restart on, a resume replays.
    let (fresh, mut fresh_rx) = mpsc::channel(8);
    hub.join(fresh, at(&hub, 13), &stream, &mut effects);
    assert_eq!(drain(&mut fresh_rx), [out(13, b"new")]);
}

#[test]
fn a_skip_in_the_stream_repaints_the_viewers() {
    let (stream, mut hub) = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, at(&hub, 0), &stream, &mut effects);
    print(&stream, &mut hub, b"ab", &mut effects);
    // The backend's subscription lagged: output between is missing.
    stream.skipped();
    stream.push(Bytes::from_static(b"cd"));
    hub.catch_up(&stream, &mut effects);
    assert!(matches!(effects[..], [Effect::Capture(1)]), "{effects:?}");
    assert_eq!(drain(&mut rx), [out(0, b"ab")], "nothing across the skip");
    hub.snapshot(1, Some(Bytes::from_static(b"S")), &stream, &mut effects);
    print(&stream, &mut hub, b"e", &mut effects);
    let events = drain(&mut rx);
    assert!(
        matches!(
            &events[..],
            [
                ViewerEvent::Snapshot { offset: 4, .. },
                ViewerEvent::Output {
                    offset: Some(4),
                    ..
                }
            ]
        ),
        "{events:?}"
    );
    // A resume from before the skip cannot be replayed.
    let (late, mut late_rx) = mpsc::channel(8);
    hub.join(late, at(&hub, 1), &stream, &mut effects);
    assert_eq!(drain(&mut late_rx), []);
}

#[test]
fn a_hub_the_ring_left_behind_repaints_instead_of_skipping_bytes() {
    let (stream, mut hub) = hub(4);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, at(&hub, 0), &stream, &mut effects);
    // More than the ring holds arrives before the hub reads again.
    stream.push(Bytes::from_static(b"abc"));
    stream.push(Bytes::from_static(b"defg"));
    hub.catch_up(&stream, &mut effects);
    assert_eq!(drain(&mut rx), []);
    assert!(matches!(effects[..], [Effect::Capture(1)]), "{effects:?}");
    assert_eq!(hub.cursor().offset, 7);
}
