//! Pictures without a browser: a tape's `Screenshot` and `Output` and
//! `tmux-engine render`, decoded back: dimensions, frame count, and the
//! colour of a red cell's pixel.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{assert_passed, run};
use crate::support::{live, test_dir};
use tmux_engine::picture::{Renderer, Style, Theme};

fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let file = std::fs::File::open(path).expect("png");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn rgb_at(pixels: &[u8], width: u32, x: u32, y: u32) -> [u8; 3] {
    let i = ((y * width + x) * 3) as usize;
    [pixels[i], pixels[i + 1], pixels[i + 2]]
}

/// Every frame composited as a player shows it: (frames, last canvas RGBA).
fn decode_gif(bytes: &[u8]) -> (usize, u16, u16, Vec<u8>) {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(bytes).expect("a GIF");
    let (w, h) = (decoder.width(), decoder.height());
    let mut canvas = vec![0u8; usize::from(w) * usize::from(h) * 4];
    let mut frames = 0;
    while let Some(frame) = decoder.read_next_frame().expect("a frame") {
        frames += 1;
        for y in 0..frame.height {
            for x in 0..frame.width {
                let src = (usize::from(y) * usize::from(frame.width) + usize::from(x)) * 4;
                let dst =
                    (usize::from(frame.top + y) * usize::from(w) + usize::from(frame.left + x)) * 4;
                canvas[dst..dst + 4].copy_from_slice(&frame.buffer[src..src + 4]);
            }
        }
    }
    (frames, w, h, canvas)
}

/// The centre of cell `row`, `col` in the default style.
fn cell_centre(row: u16, col: u16) -> (u32, u32) {
    let r = Renderer::new(Style::default());
    let (x, y) = r.cell_origin(row, col);
    let (w, h) = r.cell_size();
    (x + w / 2, y + h / 2)
}

#[tokio::test]
async fn a_screenshot_and_an_output_gif_show_the_red_cell() {
    live(async |dir| {
        let r = run(
            dir.path(),
            "red.tape",
            "Output red.gif\nSet Shell sh\nSet Size 20x4\n\
             Type \"clear; printf '\\033[41m  \\033[0m\\n'\"\nEnter\n\
             Expect Style \"  \" bg=red\nWait\nScreenshot red.png\n",
        )
        .await;
        assert_passed(&r);
        let (cw, ch) = Renderer::new(Style::default()).cell_size();
        let (w, h, pixels) = decode_png(&dir.path().join("red.png"));
        assert_eq!((w, h), (40 + 20 * cw, 40 + 4 * ch));
        let red = Theme::default().palette[1];
        let (x, y) = cell_centre(0, 0);
        assert_eq!(rgb_at(&pixels, w, x, y), red);
        let (x, y) = cell_centre(0, 5);
        assert_eq!(rgb_at(&pixels, w, x, y), Theme::default().background);
        let gif = std::fs::read(dir.path().join("red.gif")).expect("red.gif");
        let (frames, gw, gh, canvas) = decode_gif(&gif);
        assert_eq!((u32::from(gw), u32::from(gh)), (w, h));
        assert!(frames >= 2, "{frames}");
        let (x, y) = cell_centre(0, 1);
        let i = ((y * w + x) * 4) as usize;
        assert_eq!(canvas[i..i + 3], red, "the last frame shows the red cell");
    })
    .await;
}

#[test]
fn render_draws_a_cast_as_gif_and_png() {
    let dir = test_dir();
    let cast = dir.path().join("demo.cast");
    std::fs::write(
        &cast,
        "{\"version\":2,\"width\":12,\"height\":3}\n[0.0,\"o\",\"one\"]\n[0.5,\"o\",\"\\r\\n\\u001b[41mtwo\\u001b[0m\"]\n[1.0,\"o\",\"\\r\\nthree\"]\n",
    )
    .expect("cast");
    let gif = dir.path().join("demo.gif");
    let png = dir.path().join("at.png");
    let out = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .arg("render")
        .arg(&cast)
        .arg("--gif")
        .arg(&gif)
        .arg("--png")
        .arg(&png)
        .args(["--at", "0.6"])
        .stdin(Stdio::null())
        .output()
        .expect("render");
    assert!(out.status.success(), "{out:?}");
    let (cw, ch) = Renderer::new(Style::default()).cell_size();
    let (frames, w, h, canvas) = decode_gif(&std::fs::read(&gif).expect("gif"));
    assert_eq!(frames, 3);
    assert_eq!((u32::from(w), u32::from(h)), (40 + 12 * cw, 40 + 3 * ch));
    let red = Theme::default().palette[1];
    // "two" on red: the cell's corner pixel is background, not glyph.
    let r = Renderer::new(Style::default());
    let (x, y) = r.cell_origin(1, 0);
    let i = (((y + 1) * u32::from(w) + x + 1) * 4) as usize;
    assert_eq!(canvas[i..i + 3], red);
    // At 0.6 s "three" is not there yet; "two" is.
    let (pw, _, pixels) = decode_png(&png);
    assert_eq!(rgb_at(&pixels, pw, x + 1, y + 1), red);
    let (x3, y3) = r.cell_origin(2, 0);
    let row3: Vec<[u8; 3]> = (0..cw * 5)
        .map(|dx| rgb_at(&pixels, pw, x3 + dx, y3 + ch / 2))
        .collect();
    assert!(
        row3.iter().all(|p| *p == Theme::default().background),
        "row 3 is empty at 0.6 s"
    );
    // A bad theme is refused by name.
    let bad = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .arg("render")
        .arg(&cast)
        .arg("--png")
        .arg(&png)
        .args(["--theme", "Nope"])
        .output()
        .expect("render");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown theme \"Nope\""),
        "{bad:?}"
    );
}

/// `asciinema cat` (Debian's asciinema; `.ci/run` installs it) reads the
/// casts the engine writes: a tape's `Output` and a failure's artifact.
/// It wants a terminal (it opens `/dev/tty`), so a tape runs it.
#[tokio::test]
async fn asciinema_reads_every_cast_the_engine_writes() {
    live(async |dir| {
        assert!(
            which::which("asciinema").is_ok(),
            "asciinema is not installed (.ci/run installs it)"
        );
        let body = "Set Shell sh\nType \"printf 'caf\\303\\251 \\033[31mred\\033[0m\\n'\"\nEnter\nWait+Screen /^café red$/\n";
        assert_passed(&run(dir.path(), "out.tape", &format!("Output out.cast\n{body}")).await);
        let failed = run(dir.path(), "bad.tape", &format!("{body}Expect@200ms /absent/\n")).await;
        assert!(!failed.passed());
        for (name, cast) in [("cat-out.tape", "out.cast"), ("cat-bad.tape", "artifacts/bad/bad.cast")] {
            assert!(dir.path().join(cast).exists(), "{cast}");
            let r = run(
                dir.path(),
                name,
                &format!(
                    "Set Shell \"asciinema cat {cast}\"\nExpect /^café red$/\n\
                     Expect Style \"red\" fg=red\nExpect Exit 0\n"
                ),
            )
            .await;
            assert_passed(&r);
        }
    })
    .await;
}

/// `render` reads asciicast v2 as Debian's asciinema writes it and v3 as
/// asciinema 3 does (written here by hand: Debian ships asciinema 2), and
/// refuses v1 naming its version.
#[test]
fn render_reads_casts_of_every_version() {
    use tmux_engine::screen::asciicast::Recording;
    let dir = test_dir();
    let v2 = dir.path().join("v2.cast");
    let rec = Command::new("asciinema")
        .args(["rec", "-q", "-c", "printf 'ok \\033[31mred\\033[0m\\n'"])
        .arg(&v2)
        .stdin(Stdio::null())
        .output()
        .expect("asciinema is not installed (.ci/run installs it)");
    assert!(rec.status.success(), "{rec:?}");
    let v3 = dir.path().join("v3.cast");
    std::fs::write(
        &v3,
        "{\"version\": 3, \"term\": {\"cols\": 20, \"rows\": 3, \"type\": \"xterm-256color\"}, \"timestamp\": 1700000000}\n\
         # written by hand as asciinema 3 writes it: intervals, not times\n\
         [0.2, \"o\", \"ok \\u001b[31mred\\u001b[0m\\r\\n\"]\n\
         [0.1, \"m\", \"\"]\n\
         [0.3, \"x\", \"0\"]\n",
    )
    .expect("v3 cast");
    for cast in [&v2, &v3] {
        let text = std::fs::read_to_string(cast).expect("cast");
        let screen = Recording::parse(&text).expect("parses").final_screen();
        assert!(screen.text().starts_with("ok red"), "{}", screen.text());
        let png = cast.with_extension("png");
        let out = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
            .arg("render")
            .arg(cast)
            .arg("--png")
            .arg(&png)
            .stdin(Stdio::null())
            .output()
            .expect("render");
        assert!(out.status.success(), "{}: {out:?}", cast.display());
        let (w, h, pixels) = decode_png(&png);
        let r = Renderer::new(Style::default());
        let (cw, ch) = r.cell_size();
        assert_eq!(
            (w, h),
            (
                40 + screen.size().cols as u32 * cw,
                40 + screen.size().rows as u32 * ch
            )
        );
        // Some pixel of "red" (columns 3-5 of row 0) is the theme's red.
        let red = Theme::default().palette[1];
        let (x, y) = r.cell_origin(0, 3);
        let found = (0..3 * cw)
            .flat_map(|dx| (0..ch).map(move |dy| (dx, dy)))
            .any(|(dx, dy)| rgb_at(&pixels, w, x + dx, y + dy) == red);
        assert!(found, "{}: no red glyph pixel", cast.display());
    }
    let v1 = dir.path().join("v1.cast");
    std::fs::write(
        &v1,
        r#"{"version": 1, "width": 20, "height": 3, "stdout": [[0.1, "hi"]]}"#,
    )
    .expect("v1 cast");
    let out = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .arg("render")
        .arg(&v1)
        .arg("--png")
        .arg(dir.path().join("v1.png"))
        .stdin(Stdio::null())
        .output()
        .expect("render");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("asciicast version 1 is not read"), "{err}");
}

/// Pictures and casts have a budget: a 1000x131 cast drawn with a 512 px
/// font asked for 53 GB and aborted the process (SIGABRT), a resize to it
/// the same, and `Set Padding 100000` before a `Screenshot` too. Each is
/// a clear `INVALID_INPUT` now (exit 1), before anything is allocated; a
/// cast past the byte budget is refused before it is parsed.
#[tokio::test]
async fn pictures_and_casts_past_their_budget_are_clear_errors() {
    let dir = test_dir();
    let big = dir.path().join("big.cast");
    std::fs::write(
        &big,
        "{\"version\":2,\"width\":1000,\"height\":131}\n[0.1,\"o\",\"hi\"]\n",
    )
    .expect("cast");
    let grows = dir.path().join("grows.cast");
    std::fs::write(
        &grows,
        "{\"version\":2,\"width\":10,\"height\":3}\n[0.1,\"o\",\"hi\"]\n[0.2,\"r\",\"1000x131\"]\n",
    )
    .expect("cast");
    let huge = dir.path().join("huge.cast");
    {
        let mut file = std::fs::File::create(&huge).expect("cast");
        std::io::Write::write_all(&mut file, b"{\"version\":2,\"width\":10,\"height\":3}\n")
            .expect("writing");
        let line = b"[0.1,\"o\",\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]\n";
        let block: Vec<u8> = line.repeat(16_384);
        let budget = tmux_engine::screen::asciicast::MAX_BYTES;
        let mut written = 0;
        while written <= budget {
            std::io::Write::write_all(&mut file, &block).expect("writing");
            written += block.len() as u64;
        }
    }
    let render = |cast: &Path, args: &[&str], picture: &str| {
        Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
            .arg("render")
            .arg(cast)
            .arg(picture)
            .arg(dir.path().join("out"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("render")
    };
    for (cast, args, picture, says) in [
        (&big, &["--font-size", "512"][..], "--png", "budget"),
        (&big, &["--font-size", "512"][..], "--gif", "budget"),
        (&grows, &["--font-size", "512"][..], "--gif", "budget"),
        (&huge, &[][..], "--gif", "budget"),
    ] {
        let out = render(cast, args, picture);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{} {args:?} {picture}: {stderr}",
            cast.display()
        );
        assert!(stderr.contains(says), "{stderr}");
    }
    live(async |dir| {
        let r = run(
            dir.path(),
            "padded.tape",
            "Set Shell sh\nSet Padding 100000\nScreenshot padded.png\n",
        )
        .await;
        let failure = r.failure.expect("a picture past the budget fails the tape");
        assert!(failure.message.contains("budget"), "{failure}");
        assert!(!dir.path().join("padded.png").exists());
    })
    .await;
}
