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
    let codec = ControlCodec::with_max_line_length(max);
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
