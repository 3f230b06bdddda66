//! The hub state machine's unit tests: offsets, resume, lag and
//! coalesced snapshots, capture epochs, exits and resizes.

#![allow(clippy::unwrap_used)]

use super::*;

fn hub(capacity: usize) -> Hub {
    Hub::new(StreamId::from_raw(7), capacity, Size { cols: 80, rows: 24 })
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
    let mut hub = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    let resume = Resume::new(hub.stream().clone(), 0);
    hub.join(tx, Some(&resume), &mut effects);
    assert!(effects.is_empty(), "a resume at offset 0 needs no capture");
    hub.output(Bytes::from_static(b"ab"), &mut effects);
    hub.output(Bytes::from_static(b"cde"), &mut effects);
    assert_eq!(drain(&mut rx), [out(0, b"ab"), out(2, b"cde")]);
    assert_eq!(hub.offset(), 5);
}

#[test]
fn resume_inside_the_ring_replays_exactly_and_outside_snapshots() {
    let mut hub = hub(4);
    let mut effects = Vec::new();
    for chunk in [&b"ab"[..], b"cd", b"ef"] {
        hub.output(Bytes::copy_from_slice(chunk), &mut effects);
    }
    // The ring holds "cdef" (offsets 2..6).
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(
        tx,
        Some(&Resume::new(hub.stream().clone(), 3)),
        &mut effects,
    );
    assert_eq!(drain(&mut rx), [out(3, b"def")]);
    assert!(effects.is_empty());
    // Before the ring, or another stream: a snapshot (one capture).
    let (old, mut old_rx) = mpsc::channel(8);
    hub.join(
        old,
        Some(&Resume::new(hub.stream().clone(), 1)),
        &mut effects,
    );
    let (other, mut other_rx) = mpsc::channel(8);
    hub.join(
        other,
        Some(&Resume::new(StreamId::from_raw(8), 3)),
        &mut effects,
    );
    assert!(matches!(effects[..], [Effect::Capture(0)]));
    hub.snapshot(0, Some(Bytes::from_static(b"SCREEN")), &mut effects);
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
    let mut hub = hub(1024);
    let mut effects = Vec::new();
    let (fast, mut fast_rx) = mpsc::channel(64);
    let (slow, mut slow_rx) = mpsc::channel(1);
    let (slow2, mut slow2_rx) = mpsc::channel(1);
    let start = Resume::new(hub.stream().clone(), 0);
    hub.join(fast, Some(&start), &mut effects);
    let slow_id = hub.join(slow, Some(&start), &mut effects);
    let slow2_id = hub.join(slow2, Some(&start), &mut effects);
    for _ in 0..3 {
        hub.output(Bytes::from_static(b"x"), &mut effects);
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
    hub.snapshot(0, Some(Bytes::from_static(b"S")), &mut effects);
    let got = drain(&mut slow_rx);
    assert!(matches!(got[..], [ViewerEvent::Snapshot { offset: 3, .. }]));
    hub.output(Bytes::from_static(b"z"), &mut effects);
    assert_eq!(drain(&mut slow_rx), [out(3, b"z")], "live after it");
}

#[test]
fn exit_reaches_every_viewer_and_ends_them() {
    let mut hub = hub(16);
    let mut effects = Vec::new();
    let (tx, _rx) = mpsc::channel(1);
    let start = Resume::new(hub.stream().clone(), 0);
    hub.join(tx, Some(&start), &mut effects);
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
    let mut hub = hub(64);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, None, &mut effects);
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
    hub.snapshot(0, None, &mut effects);
    hub.snapshot(0, Some(Bytes::from_static(b"OLD")), &mut effects);
    hub.output(Bytes::from_static(b"new"), &mut effects);
    assert_eq!(drain(&mut rx), [], "still waiting for the fresh repaint");
    // "new" arrived while the fresh capture ran: it is asked once more
    // (an overtaken capture is not exact), and that one repaints.
    effects.clear();
    hub.snapshot(1, Some(Bytes::from_static(b"NEW?")), &mut effects);
    assert!(matches!(effects[..], [Effect::Capture(1)]), "{effects:?}");
    assert_eq!(drain(&mut rx), []);
    hub.snapshot(1, Some(Bytes::from_static(b"NEW")), &mut effects);
    hub.output(Bytes::from_static(b"!"), &mut effects);
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
    let mut hub = hub(64);
    let mut effects = Vec::new();
    let start = Resume::new(hub.stream().clone(), 0);
    let (live, _live_rx) = mpsc::channel(8);
    let (slow, _slow_rx) = mpsc::channel(1);
    hub.join(live, Some(&start), &mut effects);
    hub.join(slow, Some(&start), &mut effects);
    hub.output(Bytes::from_static(b"a"), &mut effects);
    hub.output(Bytes::from_static(b"b"), &mut effects);
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
fn resize_is_told_once_per_change() {
    let mut hub = hub(16);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(
        tx,
        Some(&Resume::new(hub.stream().clone(), 0)),
        &mut effects,
    );
    hub.resized(
        Size {
            cols: 100,
            rows: 30,
        },
        &mut effects,
    );
    hub.resized(
        Size {
            cols: 100,
            rows: 30,
        },
        &mut effects,
    );
    assert_eq!(
        drain(&mut rx),
        [ViewerEvent::Resize(Size {
            cols: 100,
            rows: 30
        })]
    );
}

#[test]
fn a_capture_that_output_overtook_is_asked_again_before_it_repaints() {
    let mut hub = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(8);
    hub.join(tx, None, &mut effects);
    assert!(matches!(effects.as_slice(), [Effect::Capture(0)]));
    effects.clear();
    // The echo of a command arrives while the capture runs: the capture
    // may show the screen from before it, so it must not be tagged with
    // the offset after it.
    hub.output(Bytes::from_static(b"echo one-2"), &mut effects);
    hub.snapshot(0, Some(Bytes::from_static(b"old screen")), &mut effects);
    assert!(drain(&mut rx).is_empty(), "a stale screen was delivered");
    assert!(matches!(effects.as_slice(), [Effect::Capture(0)]));
    effects.clear();
    // The second capture ran with no output beside it: exact.
    hub.snapshot(0, Some(Bytes::from_static(b"new screen")), &mut effects);
    let events = drain(&mut rx);
    assert!(
        matches!(events.as_slice(), [ViewerEvent::Snapshot { offset: 10, repaint, .. }] if repaint == &Bytes::from_static(b"new screen")),
        "{events:?}"
    );
}

#[test]
fn under_a_steady_flood_an_overtaken_capture_is_delivered_after_a_few_tries() {
    let mut hub = hub(1024);
    let mut effects = Vec::new();
    let (tx, mut rx) = mpsc::channel(64);
    hub.join(tx, None, &mut effects);
    let mut captures = 0;
    loop {
        effects.clear();
        hub.output(Bytes::from_static(b"y\n"), &mut effects);
        hub.snapshot(0, Some(Bytes::from_static(b"screen")), &mut effects);
        let events = drain(&mut rx);
        if let Some(ViewerEvent::Snapshot { offset, .. }) = events.first() {
            // Tagged where the last capture was asked for, then the bytes
            // that overtook it: the screen may lack them, so they follow.
            let asked = hub.offset() - 2;
            assert_eq!(*offset, asked);
            assert_eq!(events[1..], [out(asked, b"y\n")]);
            break;
        }
        captures += 1;
        assert!(captures <= MAX_OVERTAKEN, "the viewer never got a snapshot");
    }
    assert_eq!(captures, MAX_OVERTAKEN);
}
