//! Properties of the codec on arbitrary input: it never panics, never fails
//! the stream, and chunking never changes what it yields.

use proptest::prelude::*;
use tmux_engine::control::{ControlCodec, Event};

use crate::support::{decode, decode_chunks_with, fixtures};

/// Splits `input` at the given (sorted, deduplicated) cut points.
fn cut<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut pieces = Vec::new();
    let mut last = 0;
    for p in points {
        pieces.push(&input[last..p]);
        last = p;
    }
    pieces.push(&input[last..]);
    pieces
}

fn decode_with(max: usize, chunks: &[&[u8]]) -> Vec<Event> {
    decode_limited(ControlCodec::with_max_line_length(max), max, chunks)
}

/// Decodes with `codec` (its line limit `max`), checking the buffer stays
/// bounded.
fn decode_limited(codec: ControlCodec, max: usize, chunks: &[&[u8]]) -> Vec<Event> {
    decode_chunks_with(codec, chunks.iter().copied(), |buf, chunk| {
        assert!(
            buf.len() <= max + 8 + chunk.len(),
            "buffer bounded by the line limit"
        );
    })
}

/// Bytes that look like control mode often enough to reach deep states.
fn protocolish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"%begin 1 2 1\n".to_vec()),
        Just(b"%end 1 2 1\n".to_vec()),
        Just(b"%error 1 2 1\n".to_vec()),
        Just(b"%output %1 ".to_vec()),
        Just(b"%pause %1\n".to_vec()),
        Just(b"%exit".to_vec()),
        Just(b"\x1bP1000p".to_vec()),
        Just(b"\x1b\\".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\\0".to_vec()),
        Just(b"%layout-change @1 b25d,80x24,0,0,0 ".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn codec_never_panics_on_arbitrary_bytes(
        input in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        max in 1usize..64,
    ) {
        let _ = decode_with(max, &cut(&input, &cuts));
    }

    #[test]
    fn chunking_never_changes_protocolish_streams(
        input in protocolish(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        max in prop_oneof![Just(16usize), Just(1 << 20)],
    ) {
        let whole = decode_with(max, &[&input]);
        prop_assert_eq!(decode_with(max, &cut(&input, &cuts)), whole);
    }

    #[test]
    fn chunking_never_changes_streams_with_dropped_blocks(
        input in protocolish(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        lines in 0usize..4,
        bytes in 0usize..200,
    ) {
        let codec = || ControlCodec::with_max_line_length(64).with_block_limits(lines, bytes);
        let whole = decode_limited(codec(), 64, &[&input]);
        prop_assert_eq!(decode_limited(codec(), 64, &cut(&input, &cuts)), whole);
    }

    #[test]
    fn chunking_never_changes_fixtures(
        index in any::<prop::sample::Index>(),
        cuts in proptest::collection::vec(any::<usize>(), 1..24),
    ) {
        let all = fixtures();
        let (name, bytes) = &all[index.index(all.len())];
        let whole = decode(bytes);
        let chunks = cut(bytes, &cuts);
        prop_assert_eq!(decode_with(1 << 20, &chunks), whole, "{}", name);
    }
}

/// The soak target: the codec and parser properties above with many more
/// cases, outside CI. `cargo test --test tests soak -- --ignored
/// --nocapture`; `SOAK_CASES` sets the cases per property (default
/// 100 000). Prints how many ran; any panic fails it.
#[test]
#[ignore = "soak target, run by hand: cargo test --test tests soak -- --ignored"]
fn soak_codec_and_parser() {
    use proptest::test_runner::{Config, TestRunner};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cases: u32 = std::env::var("SOAK_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let ran = AtomicUsize::new(0);
    let count = || {
        ran.fetch_add(1, Ordering::Relaxed);
    };
    let mut runner = TestRunner::new(config.clone());
    runner
        .run(
            &(
                proptest::collection::vec(any::<u8>(), 0..600),
                proptest::collection::vec(any::<usize>(), 0..8),
                1usize..64,
                0usize..8,
                0usize..400,
            ),
            |(input, cuts, max, lines, bytes)| {
                count();
                let codec = ControlCodec::with_max_line_length(max).with_block_limits(lines, bytes);
                let _ = decode_limited(codec, max, &cut(&input, &cuts));
                Ok(())
            },
        )
        .expect("codec on arbitrary bytes");
    let mut runner = TestRunner::new(config.clone());
    runner
        .run(
            &(
                protocolish(),
                proptest::collection::vec(any::<usize>(), 0..12),
                prop_oneof![Just(16usize), Just(1 << 20)],
            ),
            |(input, cuts, max)| {
                count();
                let whole = decode_with(max, &[&input]);
                prop_assert_eq!(decode_with(max, &cut(&input, &cuts)), whole);
                Ok(())
            },
        )
        .expect("chunking on protocol-like streams");
    let mut runner = TestRunner::new(config);
    runner
        .run(
            &prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..200),
                protocolish(),
            ],
            |line| {
                count();
                let _ = tmux_engine::control::parse_line(&bytes::Bytes::from(line));
                Ok(())
            },
        )
        .expect("parser on arbitrary lines");
    let ran = ran.into_inner();
    eprintln!("soak: {ran} cases over 3 properties, none panicked");
    assert!(ran >= 3 * cases as usize);
}
