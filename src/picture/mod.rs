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
pub use draw::{MAX_PIXELS, Renderer, Style};
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
/// `IO` when the file cannot be written; `INVALID_INPUT` for a picture
/// past [`MAX_PIXELS`].
pub fn save_png(screen: &Screen, style: &Style, path: &Path) -> Result<()> {
    let mut renderer = Renderer::new(style.clone());
    let size = screen.size();
    renderer.check_size(size.cols, size.rows)?;
    let image = renderer.draw(screen);
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::screen::asciicast::Recording;

    /// A 1000x131 cast with a 512 px font asked for
    /// 53 GB and aborted; a padding of 100,000 the same. Both are a clear
    /// error now, before anything is allocated; a usual picture passes.
    #[test]
    fn pictures_past_the_pixel_budget_are_refused() {
        let big_font = Style {
            font_size: 512.0,
            ..Style::default()
        };
        let padded = Style {
            padding: 100_000,
            ..Style::default()
        };
        for style in [big_font, padded] {
            let error = Renderer::new(style.clone())
                .check_size(1000, 131)
                .unwrap_err();
            assert_eq!(error.code(), crate::ErrorCode::InvalidInput);
            assert!(error.to_string().contains("budget"), "{error}");
            let cast = Recording::parse(
                "{\"version\": 2, \"width\": 1000, \"height\": 131}\n[0.1, \"o\", \"hi\"]\n",
            )
            .unwrap();
            let options = GifOptions {
                style,
                ..GifOptions::default()
            };
            let refused = write_gif(&cast, &options, Vec::new()).unwrap_err();
            assert_eq!(refused.code(), crate::ErrorCode::InvalidInput);
        }
        Renderer::new(Style::default()).check_size(80, 24).unwrap();
        // The largest allowed screen fits at the default font size.
        Renderer::new(Style::default())
            .check_size(1000, 131)
            .unwrap();
    }
}
