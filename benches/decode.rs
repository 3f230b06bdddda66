//! Decode throughput: `ControlCodec` + parser against a plain memchr line
//! split of the same bytes, measured in one run so the ratio is stable
//! across machines. Target: decode >= 0.25 x split.
//!
//! The input is a 64 MiB output-heavy transcript built in memory: realistic
//! terminal text (SGR colours, cursor moves, UTF-8, `\r\n`, progress bars
//! redrawn with `\r`) cut into `%output` lines the way tmux cuts pty reads
//! (at most 2730 source bytes per line), escaped with `escape_output`, with
//! reply blocks and notifications mixed in.
//!
//! Run with `cargo bench --bench decode`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tmux_engine::control::escape::escape_output;
use tmux_engine::control::{ControlCodec, Event, Notification};
use tokio_util::codec::Decoder;

const TRANSCRIPT_BYTES: usize = 64 << 20;
const READ_CHUNK: usize = 64 << 10;
/// tmux's largest `%output` piece seen on 3.3a (V28).
const MAX_PIECE: usize = 2730;
const ITERATIONS: usize = 9;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "cargo",
    "build",
    "target",
    "release",
    "warning",
    "unused",
    "variable",
    "src/main.rs",
    "déjà-vu",
    "naïve",
    "€100",
    "日本語",
    "😀",
    "Größe",
    "fn",
    "impl",
    "let",
    "match",
    "=>",
    "Compiling",
    "tokio",
    "v1.54.1",
    "Finished",
    "in",
    "0.42s",
    "error[E0308]:",
    "expected",
    "found",
    "-->",
    "|",
    "^^^^",
    "README.md",
    "drwxr-xr-x",
    "user",
    "4096",
    "Jan",
    "12:00",
];

/// What the panes print.
#[derive(Clone, Copy)]
enum Text {
    /// An interactive mix: colour prompts, compiler output, progress bars,
    /// `ls -l`, a full-screen app. About one escape per 18 bytes; a real
    /// `ls --color` + `git log -p` capture from tmux 3.3a had one per 14.
    Terminal,
    /// Plain uncoloured log lines: only the `\r\n` is escaped.
    PlainLog,
}

/// One line of what a busy terminal shows.
fn terminal_line(rng: &mut Rng, text: Text, out: &mut Vec<u8>) {
    let kind = match text {
        Text::Terminal => rng.below(6),
        Text::PlainLog => 5,
    };
    match kind {
        0 => {
            // A coloured shell prompt and a command.
            out.extend_from_slice(b"\x1b[1;32muser@host\x1b[0m:\x1b[1;34m~/src/project\x1b[0m$ ");
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
            out.push(b' ');
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
        }
        1 => {
            // Compiler output with colours.
            out.extend_from_slice(b"\x1b[0m\x1b[1m\x1b[33mwarning\x1b[0m\x1b[1m: ");
            for _ in 0..rng.below(8) + 3 {
                out.extend_from_slice(rng.pick(WORDS).as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(b"\x1b[0m");
        }
        2 => {
            // A progress bar redrawn in place.
            for step in 0..4 {
                let done = step * 10;
                out.extend_from_slice(b"\r\x1b[K[");
                out.extend(std::iter::repeat_n(b'=', done));
                out.extend(std::iter::repeat_n(b' ', 40 - done));
                out.extend_from_slice(format!("] {}%", step * 25).as_bytes());
            }
        }
        3 => {
            // `ls -l`-like columns with UTF-8 names.
            out.extend_from_slice(
                format!(
                    "drwxr-xr-x  2 user user {:>6} Jan  1 12:{:02} {}",
                    rng.below(100_000),
                    rng.below(60),
                    rng.pick(WORDS)
                )
                .as_bytes(),
            );
        }
        4 => {
            // A full-screen app: cursor addressing and attributes.
            out.extend_from_slice(
                format!("\x1b[{};{}H\x1b[7m", rng.below(50) + 1, rng.below(200) + 1).as_bytes(),
            );
            for _ in 0..rng.below(6) + 2 {
                out.extend_from_slice(rng.pick(WORDS).as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(b"\x1b[27m\x1b[?25h");
        }
        _ => {
            // Plain log text.
            for _ in 0..rng.below(12) + 4 {
                out.extend_from_slice(rng.pick(WORDS).as_bytes());
                out.push(b' ');
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// The transcript: mostly `%output`, with replies and notifications.
fn transcript(text: Text) -> Vec<u8> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(TRANSCRIPT_BYTES + (1 << 20));
    let mut read = Vec::new();
    let mut number = 300u32;
    while out.len() < TRANSCRIPT_BYTES {
        // One pty read of a few KiB, cut into pieces like tmux does.
        read.clear();
        let want = 1024 + rng.below(7 * 1024);
        while read.len() < want {
            terminal_line(&mut rng, text, &mut read);
        }
        let pane = rng.below(4);
        for piece in read.chunks(MAX_PIECE) {
            out.extend_from_slice(format!("%output %{pane} ").as_bytes());
            out.extend_from_slice(&escape_output(piece));
            out.push(b'\n');
        }
        if rng.below(16) == 0 {
            number += 1;
            out.extend_from_slice(format!("%begin 1796008296 {number} 1\n").as_bytes());
            for i in 0..rng.below(5) {
                out.extend_from_slice(format!("%{i} 1234 0 sh 0 2,0 80x24\n").as_bytes());
            }
            out.extend_from_slice(format!("%end 1796008296 {number} 1\n").as_bytes());
            out.extend_from_slice(b"%layout-change @1 020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2} 020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2} *\n");
            out.extend_from_slice(b"%window-renamed @1 cargo build\n");
        }
    }
    out
}

fn split_lines(buf: &[u8]) -> usize {
    let mut lines = 0;
    let mut rest = buf;
    while let Some(at) = memchr::memchr(b'\n', rest) {
        black_box(&rest[..at]);
        lines += 1;
        rest = &rest[at + 1..];
    }
    lines
}

#[derive(Default, Debug, PartialEq)]
struct Tally {
    events: usize,
    output_bytes: usize,
    replies: usize,
    malformed: usize,
}

impl Tally {
    fn add(&mut self, event: Event) {
        self.events += 1;
        match &event {
            Event::Notification(Notification::Output { data, .. }) => {
                self.output_bytes += data.len();
            }
            Event::Reply(_) => self.replies += 1,
            Event::Malformed(_) => self.malformed += 1,
            _ => {}
        }
        black_box(event);
    }
}

/// Decodes a buffer already in memory, like the split does: no read copies.
fn decode_in_memory(mut src: BytesMut) -> Tally {
    let mut codec = ControlCodec::new();
    let mut tally = Tally::default();
    while let Ok(Some(event)) = codec.decode(&mut src) {
        tally.add(event);
    }
    tally
}

/// Decodes the buffer fed in pipe-sized reads, as `FramedRead` would.
fn decode_all(buf: &[u8]) -> Tally {
    let mut codec = ControlCodec::new();
    let mut src = BytesMut::with_capacity(2 * READ_CHUNK);
    let mut tally = Tally::default();
    for chunk in buf.chunks(READ_CHUNK) {
        src.extend_from_slice(chunk);
        while let Ok(Some(event)) = codec.decode(&mut src) {
            tally.add(event);
        }
    }
    tally
}

fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..ITERATIONS {
        let start = Instant::now();
        let value = f();
        best = best.min(start.elapsed());
        last = Some(value);
    }
    (best, last.expect("ITERATIONS > 0"))
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

/// Measures one transcript; returns decode/split.
fn scenario(name: &str, text: Text) -> f64 {
    let data = transcript(text);
    let escapes = data.iter().filter(|&&b| b == b'\\').count();
    // Alternate the two so both see the same machine (the host is shared).
    let (mut split_time, mut decode_time, mut memory_time) =
        (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut lines, mut tally) = (0, Tally::default());
    for _ in 0..ITERATIONS {
        let start = Instant::now();
        lines = split_lines(&data);
        split_time = split_time.min(start.elapsed());
        let start = Instant::now();
        tally = decode_all(&data);
        decode_time = decode_time.min(start.elapsed());
        // The same buffer the split reads, copied in before the clock starts.
        let src = BytesMut::from(&data[..]);
        let start = Instant::now();
        let in_memory = decode_in_memory(src);
        memory_time = memory_time.min(start.elapsed());
        assert_eq!(in_memory, tally, "both decodes see the same events");
    }
    assert_eq!(
        tally.malformed, 0,
        "the generated transcript must decode cleanly"
    );
    let split = mb_per_s(data.len(), split_time);
    let decode = mb_per_s(data.len(), decode_time);
    println!("== {name}");
    println!(
        "transcript: {:.1} MiB, {lines} lines, {} events, {} replies, {:.1} MiB of pane output, \
         one escape per {:.1} bytes",
        data.len() as f64 / (1 << 20) as f64,
        tally.events,
        tally.replies,
        tally.output_bytes as f64 / (1 << 20) as f64,
        data.len() as f64 / escapes.max(1) as f64,
    );
    println!("memchr line split:   {split:>9.1} MB/s  (best of {ITERATIONS}: {split_time:?})");
    println!("codec+parse decode:  {decode:>9.1} MB/s  (best of {ITERATIONS}: {decode_time:?})");
    println!(
        "ratio decode/split:  {:>9.3}  (fed in {} KiB reads, as from a pipe)",
        decode / split,
        READ_CHUNK >> 10
    );
    let memory = mb_per_s(data.len(), memory_time);
    println!("in-memory decode:    {memory:>9.1} MB/s  (best of {ITERATIONS}: {memory_time:?})");
    println!(
        "ratio in-memory/split: {:>7.3}  (the same buffer, no read copies)",
        memory / split
    );

    // Where the time goes: copying reads into the codec's buffer, and
    // unescaping the payloads alone.
    let (copy_time, ()) = best(|| {
        let mut src = BytesMut::with_capacity(2 * READ_CHUNK);
        for chunk in data.chunks(READ_CHUNK) {
            src.extend_from_slice(chunk);
            black_box(&src);
            src.clear();
        }
    });
    let payloads: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter_map(|l| l.strip_prefix(b"%output "))
        .filter_map(|l| l.iter().position(|&b| b == b' ').map(|p| &l[p + 1..]))
        .collect();
    let (unescape_time, ()) = best(|| {
        let mut out = BytesMut::with_capacity(1 << 20);
        for p in &payloads {
            tmux_engine::control::escape::unescape_output(p, &mut out).expect("valid");
            if out.len() > (1 << 19) {
                out.clear();
            }
        }
        black_box(&out);
    });
    println!("  of which: chunk copy {copy_time:?}, unescape alone {unescape_time:?}");
    decode / split
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`-ish flags;
    // only measure when run as a benchmark.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let terminal = scenario(
        "terminal output (colour, TUI, progress bars)",
        Text::Terminal,
    );
    let plain = scenario("plain log text (only \\r\\n escaped)", Text::PlainLog);
    println!(
        "== ratio decode/split: terminal {terminal:.3}, plain log {plain:.3} (target >= 0.25)"
    );
}
