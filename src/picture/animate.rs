//! An asciicast recording to an animated GIF: the output replayed into the
//! screen model, a frame whenever the screen changed (at most `fps` a
//! second, each shown until the next one), the spans between a `hide` and
//! a `show` marker left out, and long pauses shortened to `max_idle`.
//! Frames are the changed rectangle only, each with its own exact palette
//! (glyph shades are limited so a screen fits 256 colours).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

use super::draw::{Image, Renderer, Style};
use crate::screen::Emulator;
use crate::screen::Screen;
use crate::screen::asciicast::{EventKind, Recording};
use crate::vocab::Size;
use crate::{Error, Result};

/// The marker that starts a hidden span (a tape's `Hide`).
pub(crate) const HIDE_MARKER: &str = "hide";
/// The marker that ends it (`Show`).
pub(crate) const SHOW_MARKER: &str = "show";

/// How a recording becomes a GIF.
#[derive(Clone, Debug)]
pub struct GifOptions {
    /// How frames are drawn.
    pub style: Style,
    /// The frame-rate cap (default 20, at most 50: GIF delays are 1/100 s).
    pub fps: u32,
    /// Pauses longer than this many seconds are shortened to it.
    pub max_idle: f64,
    /// How long the last frame stays, in seconds.
    pub hold: f64,
}

impl Default for GifOptions {
    fn default() -> GifOptions {
        GifOptions {
            style: Style::default(),
            fps: 20,
            max_idle: 2.0,
            hold: 1.5,
        }
    }
}

/// What a GIF came out as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GifSummary {
    /// Frames written.
    pub frames: usize,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// How long one loop plays, in seconds.
    pub seconds: f64,
}

/// The screen a player shows `seconds` into the recording.
pub fn screen_at(recording: &Recording, seconds: f64) -> Screen {
    let mut emulator = Emulator::new(recording.header.size, 0);
    for event in recording.events.iter().take_while(|e| e.time <= seconds) {
        apply(&mut emulator, event.kind, &event.data);
    }
    emulator.screen()
}

/// The size a resize event's `COLSxROWS` names, if it is one.
fn resized(data: &str) -> Option<Size> {
    let (c, r) = data.split_once('x')?;
    Size::new(c.parse().ok()?, r.parse().ok()?).ok()
}

fn apply(emulator: &mut Emulator, kind: EventKind, data: &str) {
    match kind {
        EventKind::Output => emulator.process(data.as_bytes()),
        EventKind::Resize => {
            if let Some(size) = resized(data) {
                emulator.set_size(size);
            }
        }
        EventKind::Input | EventKind::Marker => {}
    }
}

/// Writes `recording` as an animated GIF (looping forever).
///
/// # Errors
/// `IO` when writing fails; `INVALID_INPUT` for a picture too big for GIF
/// (65535 pixels a side) or past [`MAX_PIXELS`](super::MAX_PIXELS).
pub fn write_gif(
    recording: &Recording,
    options: &GifOptions,
    out: impl Write,
) -> Result<GifSummary> {
    let fps = f64::from(options.fps.clamp(1, 50));
    let interval = 1.0 / fps;
    let mut renderer = Renderer::new(options.style.clone()).with_levels(4);
    // Every size the recording takes, before anything is drawn.
    renderer.check_size(recording.header.size.cols, recording.header.size.rows)?;
    for event in &recording.events {
        if event.kind == EventKind::Resize
            && let Some(size) = resized(&event.data)
        {
            renderer.check_size(size.cols, size.rows)?;
        }
    }
    let mut emulator = Emulator::new(recording.header.size, 0);
    let mut gif = GifWriter::new(out);
    // Shown time = recorded time - shift (hidden spans, shortened pauses).
    let mut shift = 0.0;
    let mut last_time = 0.0;
    let mut hidden_since: Option<f64> = None;
    let mut last_frame = f64::NEG_INFINITY;
    // Since when the screen differs from the last frame (shown time).
    let mut dirty: Option<f64> = Some(0.0);
    for event in &recording.events {
        let gap = event.time - last_time;
        if hidden_since.is_none() && gap > options.max_idle {
            shift += gap - options.max_idle;
        }
        last_time = event.time;
        let now = event.time - shift;
        if let Some(since) = dirty
            && hidden_since.is_none()
        {
            let due = since.max(last_frame + interval);
            if now > due {
                gif.frame(&renderer.draw(&emulator.screen()), due)?;
                last_frame = due;
                dirty = None;
            }
        }
        match event.kind {
            EventKind::Marker if event.data == HIDE_MARKER && hidden_since.is_none() => {
                if let Some(since) = dirty.take() {
                    let at = since.max(last_frame + interval).min(now.max(last_frame));
                    gif.frame(&renderer.draw(&emulator.screen()), at)?;
                    last_frame = at;
                }
                hidden_since = Some(event.time);
            }
            EventKind::Marker if event.data == SHOW_MARKER => {
                if let Some(from) = hidden_since.take() {
                    shift += event.time - from;
                    dirty = Some(event.time - shift);
                }
            }
            EventKind::Output | EventKind::Resize => {
                apply(&mut emulator, event.kind, &event.data);
                if hidden_since.is_none() && dirty.is_none() {
                    dirty = Some(now);
                }
            }
            EventKind::Input | EventKind::Marker => {}
        }
    }
    let end = last_time - shift;
    if let Some(since) = dirty
        && hidden_since.is_none()
    {
        let due = since.max(last_frame + interval);
        gif.frame(&renderer.draw(&emulator.screen()), due)?;
        last_frame = due;
    }
    let stop = end.max(last_frame) + options.hold.max(0.01);
    gif.finish(stop)
}

/// Frames waiting for their delay (known once the next frame's time is).
struct GifWriter<W: Write> {
    out: Option<W>,
    encoder: Option<gif::Encoder<W>>,
    previous: Option<Image>,
    /// The frame written last but not yet timed, and when it shows.
    pending: Option<(gif::Frame<'static>, f64)>,
    frames: usize,
    size: (u32, u32),
}

fn gif_error(e: gif::EncodingError) -> Error {
    Error::io("encoding GIF", std::io::Error::other(e))
}

impl<W: Write> GifWriter<W> {
    fn new(out: W) -> GifWriter<W> {
        GifWriter {
            out: Some(out),
            encoder: None,
            previous: None,
            pending: None,
            frames: 0,
            size: (0, 0),
        }
    }

    fn frame(&mut self, image: &Image, at: f64) -> Result<()> {
        if self.encoder.is_none() {
            let (w, h) = (dim(image.width)?, dim(image.height)?);
            let out = self
                .out
                .take()
                .ok_or_else(|| Error::InvalidInput("GIF written".into()))?;
            let mut encoder = gif::Encoder::new(out, w, h, &[]).map_err(gif_error)?;
            encoder
                .set_repeat(gif::Repeat::Infinite)
                .map_err(gif_error)?;
            self.encoder = Some(encoder);
            self.size = (image.width, image.height);
        }
        let rect = match &self.previous {
            Some(prev) if prev.width == image.width && prev.height == image.height => {
                match changed(prev, image) {
                    Some(rect) => rect,
                    None => return Ok(()),
                }
            }
            _ => (0, 0, image.width, image.height),
        };
        let frame = encode(image, rect)?;
        self.flush(at)?;
        self.pending = Some((frame, at));
        self.previous = Some(image.clone());
        Ok(())
    }

    /// Writes the pending frame, shown until `until`.
    fn flush(&mut self, until: f64) -> Result<()> {
        if let (Some((mut frame, at)), Some(encoder)) = (self.pending.take(), &mut self.encoder) {
            let cs = ((until * 100.0).round() - (at * 100.0).round()).max(1.0);
            frame.delay = cs.min(f64::from(u16::MAX)) as u16;
            encoder.write_frame(&frame).map_err(gif_error)?;
            self.frames += 1;
        }
        Ok(())
    }

    fn finish(mut self, stop: f64) -> Result<GifSummary> {
        self.flush(stop)?;
        let encoder = self
            .encoder
            .take()
            .ok_or_else(|| Error::InvalidInput("the recording has no frame".into()))?;
        let mut out = encoder.into_inner().map_err(gif_error)?;
        out.flush().map_err(|e| Error::io("writing GIF", e))?;
        Ok(GifSummary {
            frames: self.frames,
            width: self.size.0,
            height: self.size.1,
            seconds: stop,
        })
    }
}

fn dim(px: u32) -> Result<u16> {
    u16::try_from(px).map_err(|_| Error::InvalidInput(format!("{px} pixels is too big for a GIF")))
}

/// The rectangle (x, y, w, h) where `b` differs from `a`.
fn changed(a: &Image, b: &Image) -> Option<(u32, u32, u32, u32)> {
    let w = a.width as usize;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
    for (i, (pa, pb)) in a
        .pixels
        .chunks_exact(3)
        .zip(b.pixels.chunks_exact(3))
        .enumerate()
    {
        if pa != pb {
            let (x, y) = (i % w, i / w);
            x0 = x0.min(x);
            y0 = y0.min(y);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    (x0 != usize::MAX).then(|| {
        (
            x0 as u32,
            y0 as u32,
            (x1 - x0 + 1) as u32,
            (y1 - y0 + 1) as u32,
        )
    })
}

/// One frame of the rectangle, with an exact palette when it has at most
/// 256 colours (always, for a screen of a few colours), else quantized.
fn encode(image: &Image, (x, y, w, h): (u32, u32, u32, u32)) -> Result<gif::Frame<'static>> {
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for row in y..y + h {
        let start = ((row * image.width + x) * 3) as usize;
        rgb.extend_from_slice(&image.pixels[start..start + (w * 3) as usize]);
    }
    let mut index: HashMap<[u8; 3], u8> = HashMap::new();
    let mut palette = Vec::new();
    let mut buffer = Vec::with_capacity((w * h) as usize);
    let mut exact = true;
    for px in rgb.chunks_exact(3) {
        let key = [px[0], px[1], px[2]];
        let next = index.len();
        let i = match index.get(&key) {
            Some(&i) => i,
            None if next < 256 => {
                index.insert(key, next as u8);
                palette.extend_from_slice(&key);
                next as u8
            }
            None => {
                exact = false;
                break;
            }
        };
        buffer.push(i);
    }
    let (fw, fh) = (dim(w)?, dim(h)?);
    let mut frame = if exact {
        gif::Frame {
            width: fw,
            height: fh,
            buffer: Cow::Owned(buffer),
            palette: Some(palette),
            ..gif::Frame::default()
        }
    } else {
        gif::Frame::from_rgb_speed(fw, fh, &rgb, 10)
    };
    frame.left = dim(x)?;
    frame.top = dim(y)?;
    frame.dispose = gif::DisposalMethod::Keep;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast(events: &str) -> Recording {
        let text = format!("{{\"version\":2,\"width\":10,\"height\":2}}\n{events}");
        Recording::parse(&text).expect("cast")
    }

    #[test]
    fn frames_follow_changes_and_skip_hidden_spans() {
        let rec = cast(
            "[0.0,\"o\",\"a\"]\n[0.5,\"o\",\"b\"]\n[1.0,\"m\",\"hide\"]\n[1.1,\"o\",\"x\"]\n[1.2,\"o\",\"y\"]\n[3.0,\"m\",\"show\"]\n[3.5,\"o\",\"c\"]\n",
        );
        let mut out = Vec::new();
        let sum = write_gif(&rec, &GifOptions::default(), &mut out).expect("gif");
        // a, ab, abxy (at show), abxyc.
        assert_eq!(sum.frames, 4, "{sum:?}");
        // The hidden 2 s are gone: c at 1.5 s, held 1.5 s.
        assert!((sum.seconds - 3.0).abs() < 0.05, "{sum:?}");
        let mut decoder = gif::DecodeOptions::new()
            .read_info(&out[..])
            .expect("decodes");
        let mut n = 0;
        while decoder.read_next_frame().expect("frame").is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
    }

    #[test]
    fn the_frame_rate_is_capped() {
        let events: String = (0..100)
            .map(|i| format!("[{:.3},\"o\",\"{}\"]\n", f64::from(i) * 0.001, i % 10))
            .collect();
        let sum = write_gif(&cast(&events), &GifOptions::default(), Vec::new()).expect("gif");
        assert!(sum.frames <= 3, "{sum:?}");
    }

    #[test]
    fn screen_at_replays_up_to_the_time() {
        let rec = cast("[0.0,\"o\",\"a\"]\n[1.0,\"o\",\"b\"]\n");
        assert_eq!(screen_at(&rec, 0.5).row(0), Some("a"));
        assert_eq!(screen_at(&rec, 1.0).row(0), Some("ab"));
    }
}
