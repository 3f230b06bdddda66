//! Pictures of terminals without a browser: a [`Screen`] drawn to a PNG
//! with an embedded monospace font (DejaVu Sans Mono through `ab_glyph`,
//! no system fonts), and an asciicast recording to an animated GIF, frames
//! at the cast's timestamps (`gif`).
//!
//! Layout: `theme` (colours), `draw` (cells to pixels), `animate` (a cast
//! to GIF frames). This module uses the screen model only; it never starts
//! a terminal.

mod animate;
mod draw;
mod theme;

pub use animate::{GifOptions, GifSummary, screen_at, write_gif};
pub(crate) use animate::{HIDE_MARKER, SHOW_MARKER};
pub(crate) use draw::Image;
pub use draw::{Renderer, Style};
pub use theme::Theme;

use std::io::Write;
use std::path::Path;

use crate::screen::Screen;
use crate::{Error, Result};

/// Encodes an image as an 8-bit RGB PNG.
///
/// # Errors
/// `IO` when writing fails.
pub(crate) fn write_png(image: &Image, out: impl Write) -> Result<()> {
    let fail = |e: png::EncodingError| Error::io("encoding PNG", std::io::Error::other(e));
    let mut encoder = png::Encoder::new(out, image.width, image.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    let mut writer = encoder.write_header().map_err(fail)?;
    writer.write_image_data(&image.pixels).map_err(fail)?;
    writer.finish().map_err(fail)
}

/// Draws `screen` in `style` and writes it to `path` as a PNG.
///
/// # Errors
/// `IO` when the file cannot be written.
pub fn save_png(screen: &Screen, style: &Style, path: &Path) -> Result<()> {
    let image = Renderer::new(style.clone()).draw(screen);
    let file = create(path)?;
    write_png(&image, std::io::BufWriter::new(file))
}

/// Creates `path` and the directories above it.
pub(crate) fn create(path: &Path) -> Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    std::fs::File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))
}
