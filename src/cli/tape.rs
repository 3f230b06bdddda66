//! `tmux-engine test FILE.tape...` (tapes in parallel, JUnit, artifacts,
//! retries) and `tmux-engine render CAST --gif OUT | --png OUT [--at S]`
//! (pictures of a recording): thin over the library's `tape` and
//! `picture`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use tmux_engine::picture::{self, GifOptions, Style, Theme};
use tmux_engine::screen::asciicast::Recording;
use tmux_engine::tape::{self, Options};
use tmux_engine::{Error, Result};

/// `tmux-engine test`.
#[derive(Args, Debug)]
pub(crate) struct TestArgs {
    /// Tapes run at once (default: the number of cores).
    #[arg(short = 'j', long = "jobs")]
    jobs: Option<usize>,
    /// Rewrite `Snapshot` golden files instead of comparing with them.
    #[arg(long)]
    update: bool,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Where failed tapes' artifacts go (default target/tmux-engine-tapes).
    #[arg(long, value_name = "DIR")]
    artifacts: Option<PathBuf>,
    /// Further tries for tapes marked `Set Flaky true`.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// The tape files.
    #[arg(required = true, value_name = "FILE.tape")]
    tapes: Vec<PathBuf>,
}

/// `tmux-engine render`.
#[derive(Args, Debug)]
pub(crate) struct RenderArgs {
    /// An asciicast v2 recording (a fixture's or tape's `.cast`).
    cast: PathBuf,
    /// Write an animated GIF of the whole recording.
    #[arg(long, value_name = "OUT", required_unless_present = "png")]
    gif: Option<PathBuf>,
    /// Write a PNG of the screen at the end (or at --at).
    #[arg(long, value_name = "OUT")]
    png: Option<PathBuf>,
    /// The moment of the PNG, in seconds from the start.
    #[arg(long, value_name = "SECONDS", requires = "png")]
    at: Option<f64>,
    /// A built-in theme name or a VHS theme JSON.
    #[arg(long)]
    theme: Option<String>,
    /// The font size in pixels.
    #[arg(long, default_value_t = 22.0)]
    font_size: f32,
    /// The GIF's frame-rate cap.
    #[arg(long, default_value_t = 20)]
    fps: u32,
}

/// Runs the tapes; the exit code is 0 when all passed, 1 otherwise.
pub(crate) async fn test(args: TestArgs, out: &mut dyn Write) -> Result<bool> {
    let mut options = Options {
        update: args.update,
        retries: args.retries,
        ..Options::default()
    };
    if let Some(jobs) = args.jobs {
        options.jobs = jobs.max(1);
    }
    if let Some(dir) = args.artifacts {
        options.artifacts = dir;
    }
    let started = Instant::now();
    let results = tape::run_files(&args.tapes, &options).await;
    let seconds = started.elapsed().as_secs_f64();
    let io = |e| Error::io("writing stdout", e);
    for r in &results {
        let tries = if r.tries > 1 {
            format!(", {} tries", r.tries)
        } else {
            String::new()
        };
        let mark = if r.passed() { "ok  " } else { "FAIL" };
        writeln!(
            out,
            "{mark} {} ({:.2}s{tries})",
            r.path.display(),
            r.seconds
        )
        .map_err(io)?;
        for note in &r.notes {
            writeln!(out, "     {}", note.replace('\n', "\n     ")).map_err(io)?;
        }
        if let Some(f) = &r.failure {
            writeln!(out, "{f}").map_err(io)?;
        }
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, tape::junit(&results, seconds))
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    writeln!(out, "{}", tape::summary(&results)).map_err(io)?;
    Ok(results.iter().all(tmux_engine::tape::TapeResult::passed))
}

/// Renders a recording to a GIF and/or a PNG.
pub(crate) fn render(args: &RenderArgs, out: &mut dyn Write) -> Result<()> {
    // Read no more than the budget (and a byte to tell it was past).
    let mut text = String::new();
    std::fs::File::open(&args.cast)
        .and_then(|file| {
            file.take(tmux_engine::screen::asciicast::MAX_BYTES + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| Error::io(format!("reading {}", args.cast.display()), e))?;
    let recording = Recording::parse(&text)
        .map_err(|e| Error::InvalidInput(format!("{}: {e}", args.cast.display())))?;
    let theme = match &args.theme {
        Some(t) => Theme::parse(t).map_err(Error::InvalidInput)?,
        None => Theme::default(),
    };
    let style = Style {
        theme,
        font_size: args.font_size,
        ..Style::default()
    };
    let io = |e| Error::io("writing stdout", e);
    if let Some(path) = &args.gif {
        let options = GifOptions {
            style: style.clone(),
            fps: args.fps,
            ..GifOptions::default()
        };
        let file = std::fs::File::create(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let sum = picture::write_gif(&recording, &options, std::io::BufWriter::new(file))?;
        writeln!(
            out,
            "{}: {} frames, {}x{}, {:.1}s",
            path.display(),
            sum.frames,
            sum.width,
            sum.height,
            sum.seconds
        )
        .map_err(io)?;
    }
    if let Some(path) = &args.png {
        let screen = match args.at {
            Some(at) => picture::screen_at(&recording, at),
            None => recording.final_screen(),
        };
        picture::save_png(&screen, &style, path)?;
        writeln!(out, "{}", path.display()).map_err(io)?;
    }
    Ok(())
}
