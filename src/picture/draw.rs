//! A [`Screen`] to pixels: every cell's background, its glyph in the
//! embedded DejaVu Sans Mono (bold for bold cells), underline, dim, reverse
//! video, wide characters over two cells, and the block cursor. Glyphs are
//! rasterized once per (character, weight) and kept, so the frames of a
//! GIF cost a blit each.

use std::collections::HashMap;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};

use super::theme::{Rgb, Theme};
use crate::screen::{Attributes, Screen};

/// The most pixels one picture may have (a hostile cast must not abort
/// the process): 64 Mi, 192 MiB as
/// RGB. The largest allowed screen (131,072 cells) fits at the default
/// font size; a 512 px font or a padding of 100,000 would ask for tens of
/// GB and abort the process, so they are refused first.
pub const MAX_PIXELS: u64 = 64 << 20;

/// How a picture is drawn.
#[derive(Clone, Debug)]
pub struct Style {
    /// The colours.
    pub theme: Theme,
    /// The font size in pixels (VHS `FontSize`; default 22).
    pub font_size: f32,
    /// Pixels around the cells (default 20).
    pub padding: u32,
    /// The row height as a multiple of the font's (default 1.0).
    pub line_height: f32,
    /// Whether the cursor is drawn (when the program shows it).
    pub cursor: bool,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            theme: Theme::default(),
            font_size: 22.0,
            padding: 20,
            line_height: 1.0,
            cursor: true,
        }
    }
}

/// An RGB picture, row-major, 3 bytes a pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub pixels: Vec<u8>,
}

impl Image {
    fn new(width: u32, height: u32, fill: Rgb) -> Image {
        let len = (width as usize) * (height as usize);
        Image {
            width,
            height,
            pixels: fill.repeat(len),
        }
    }

    /// The pixel at `x`, `y`; `None` outside.
    pub fn pixel(&self, x: u32, y: u32) -> Option<Rgb> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = ((y as usize) * (self.width as usize) + x as usize) * 3;
        Some([self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]])
    }

    fn put(&mut self, x: u32, y: u32, c: Rgb) {
        if x < self.width && y < self.height {
            let i = ((y as usize) * (self.width as usize) + x as usize) * 3;
            self.pixels[i..i + 3].copy_from_slice(&c);
        }
    }

    fn fill(&mut self, x: u32, y: u32, w: u32, h: u32, c: Rgb) {
        for yy in y..(y + h).min(self.height) {
            for xx in x..(x + w).min(self.width) {
                self.put(xx, yy, c);
            }
        }
    }
}

/// A rasterized glyph: coverage (0-255) at offsets from the cell's corner.
struct Glyph {
    dots: Vec<(i32, i32, u8)>,
}

/// Draws screens in one style, keeping glyphs between pictures.
pub struct Renderer {
    style: Style,
    regular: FontRef<'static>,
    bold: FontRef<'static>,
    cell_w: u32,
    cell_h: u32,
    baseline: f32,
    /// Coverage levels a GIF can afford (`None`: 256).
    levels: Option<u8>,
    glyphs: HashMap<(char, bool), Option<Glyph>>,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("style", &self.style)
            .field("cell", &(self.cell_w, self.cell_h))
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// A renderer for `style`.
    pub fn new(style: Style) -> Renderer {
        // The crate's own bytes: a parse failure is a build defect.
        let regular = FontRef::try_from_slice(dejavu::sans_mono::regular())
            .expect("the embedded DejaVu Sans Mono parses");
        let bold = FontRef::try_from_slice(dejavu::sans_mono::bold())
            .expect("the embedded DejaVu Sans Mono Bold parses");
        let size = style.font_size.clamp(4.0, 512.0);
        let scaled = regular.as_scaled(PxScale::from(size));
        let natural = scaled.ascent() - scaled.descent() + scaled.line_gap();
        let cell_h = (natural * style.line_height.clamp(0.5, 10.0))
            .ceil()
            .max(1.0);
        let cell_w = scaled.h_advance(regular.glyph_id('M')).ceil().max(1.0);
        let baseline = ((cell_h - natural) / 2.0 + scaled.ascent()).round();
        Renderer {
            style,
            regular,
            bold,
            cell_w: cell_w as u32,
            cell_h: cell_h as u32,
            baseline,
            levels: None,
            glyphs: HashMap::new(),
        }
    }

    /// Limits glyph coverage to `levels` shades (GIF palettes hold 256
    /// colours; 4 shades of each colour pair keep a screen within that).
    pub fn with_levels(mut self, levels: u8) -> Renderer {
        self.levels = Some(levels.max(2));
        self.glyphs.clear();
        self
    }

    /// One cell's size in pixels.
    pub fn cell_size(&self) -> (u32, u32) {
        (self.cell_w, self.cell_h)
    }

    /// The style.
    pub fn style(&self) -> &Style {
        &self.style
    }

    /// The columns and rows that fit a picture of `width` x `height`
    /// pixels (VHS's `Set Width`/`Set Height`), at least 1x1.
    pub fn grid_for(&self, width: u32, height: u32) -> (u16, u16) {
        let inner = |px: u32, cell: u32| {
            let n = px.saturating_sub(self.style.padding.saturating_mul(2)) / cell;
            u16::try_from(n.clamp(1, 1000)).unwrap_or(1000)
        };
        (inner(width, self.cell_w), inner(height, self.cell_h))
    }

    /// The pixel rectangle of a cell: (x, y) of its top-left corner.
    pub fn cell_origin(&self, row: u16, col: u16) -> (u32, u32) {
        (
            self.style.padding + u32::from(col) * self.cell_w,
            self.style.padding + u32::from(row) * self.cell_h,
        )
    }

    /// Checks that a screen of `cols` x `rows` drawn in this style stays
    /// within [`MAX_PIXELS`], before anything is allocated.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the picture's size, the budget and what to
    /// lower.
    pub fn check_size(&self, cols: u16, rows: u16) -> crate::Result<()> {
        let pad = u64::from(self.style.padding);
        let width = 2 * pad + u64::from(cols) * u64::from(self.cell_w);
        let height = 2 * pad + u64::from(rows) * u64::from(self.cell_h);
        if width.saturating_mul(height) > MAX_PIXELS || width > u64::from(u32::MAX) {
            return Err(crate::Error::InvalidInput(format!(
                "a picture of {width}x{height} pixels ({cols}x{rows} cells) is past the \
                 budget of {MAX_PIXELS} pixels: lower the font size, the padding or the size"
            )));
        }
        Ok(())
    }

    /// Draws a screen.
    pub fn draw(&mut self, screen: &Screen) -> Image {
        let size = screen.size();
        let pad = self.style.padding;
        let width = 2 * pad + u32::from(size.cols) * self.cell_w;
        let height = 2 * pad + u32::from(size.rows) * self.cell_h;
        let mut image = Image::new(width, height, self.style.theme.background);
        let cursor = screen.cursor();
        let show_cursor = self.style.cursor && screen.cursor_visible();
        for row in 0..size.rows {
            let Some(cells) = screen.row_cells(row) else {
                continue;
            };
            for (col, cell) in (0..size.cols).zip(cells) {
                if cell.wide_continuation {
                    continue;
                }
                let wide = cells
                    .get(usize::from(col) + 1)
                    .is_some_and(|next| next.wide_continuation);
                let at_cursor = show_cursor && cursor.row == row && cursor.col == col;
                let (fg, bg) = self.colors(&cell.attributes, at_cursor);
                let (x, y) = self.cell_origin(row, col);
                let span = if wide { 2 } else { 1 };
                image.fill(x, y, span * self.cell_w, self.cell_h, bg);
                if let Some(c) = cell.text.chars().next()
                    && c != ' '
                {
                    self.glyph(&mut image, c, cell.attributes.bold, (x, y), span, fg, bg);
                }
                if cell.attributes.underline {
                    let uy = y + (self.baseline as u32 + 2).min(self.cell_h - 1);
                    let thick = (self.cell_h / 16).max(1);
                    image.fill(x, uy, span * self.cell_w, thick, fg);
                }
            }
        }
        image
    }

    fn colors(&self, attrs: &Attributes, at_cursor: bool) -> (Rgb, Rgb) {
        let theme = &self.style.theme;
        let mut fg = theme.resolve(attrs.fg, true);
        let mut bg = theme.resolve(attrs.bg, false);
        if attrs.inverse {
            std::mem::swap(&mut fg, &mut bg);
        }
        if attrs.dim {
            fg = blend(bg, fg, 128);
        }
        if at_cursor {
            (theme.background, theme.cursor)
        } else {
            (fg, bg)
        }
    }

    /// Draws `c` in a cell (or two) at `origin`; a character the font
    /// lacks is drawn as a box, so it is seen to be there.
    #[allow(clippy::too_many_arguments)]
    fn glyph(
        &mut self,
        image: &mut Image,
        c: char,
        bold: bool,
        origin: (u32, u32),
        span: u32,
        fg: Rgb,
        bg: Rgb,
    ) {
        if !self.glyphs.contains_key(&(c, bold)) {
            let glyph = self.rasterize(c, bold);
            self.glyphs.insert((c, bold), glyph);
        }
        let (x, y) = origin;
        match self.glyphs.get(&(c, bold)) {
            Some(Some(glyph)) => {
                for &(dx, dy, cov) in &glyph.dots {
                    let (px, py) = (x as i32 + dx, y as i32 + dy);
                    if px >= 0 && py >= 0 {
                        image.put(px as u32, py as u32, blend(bg, fg, cov));
                    }
                }
            }
            _ => {
                let w = span * self.cell_w;
                let (bx, by, bw, bh) = (x + 2, y + 3, w.saturating_sub(4), self.cell_h - 6);
                image.fill(bx, by, bw, 1, fg);
                image.fill(bx, by + bh, bw, 1, fg);
                image.fill(bx, by, 1, bh, fg);
                image.fill(bx + bw, by, 1, bh + 1, fg);
            }
        }
    }

    fn rasterize(&self, c: char, bold: bool) -> Option<Glyph> {
        let font = if bold { &self.bold } else { &self.regular };
        let id = font.glyph_id(c);
        if id.0 == 0 {
            return None;
        }
        let scale = PxScale::from(self.style.font_size.clamp(4.0, 512.0));
        let outline =
            font.outline_glyph(id.with_scale_and_position(scale, point(0.0, self.baseline)));
        let Some(outline) = outline else {
            // A glyph with no outline (a space of another name) draws nothing.
            return Some(Glyph { dots: Vec::new() });
        };
        let bounds = outline.px_bounds();
        let mut dots = Vec::new();
        let levels = self.levels;
        outline.draw(|gx, gy, cov| {
            let mut cov = (cov.clamp(0.0, 1.0) * 255.0).round() as u8;
            if let Some(n) = levels {
                let step = 255 / u16::from(n - 1);
                let q = (u16::from(cov) + step / 2) / step * step;
                cov = u8::try_from(q.min(255)).unwrap_or(255);
            }
            if cov > 0 {
                dots.push((
                    bounds.min.x as i32 + gx as i32,
                    bounds.min.y as i32 + gy as i32,
                    cov,
                ));
            }
        });
        Some(Glyph { dots })
    }
}

/// `a` toward `b` by `t`/255.
fn blend(a: Rgb, b: Rgb, t: u8) -> Rgb {
    let t = u16::from(t);
    let mix = |x: u8, y: u8| ((u16::from(x) * (255 - t) + u16::from(y) * t + 127) / 255) as u8;
    [mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2])]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Size;

    #[test]
    fn a_red_cell_is_red_and_text_is_drawn() {
        let screen =
            Screen::from_ansi(Size { cols: 10, rows: 2 }, b"\x1b[41m  \x1b[0m AB\x1b[?25l");
        let mut r = Renderer::new(Style::default());
        let image = r.draw(&screen);
        let (cw, ch) = r.cell_size();
        assert_eq!(image.width, 40 + 10 * cw);
        assert_eq!(image.height, 40 + 2 * ch);
        let (x, y) = r.cell_origin(0, 0);
        let red = Theme::default().palette[1];
        assert_eq!(image.pixel(x + cw / 2, y + ch / 2), Some(red));
        // Glyph pixels of "A" differ from the background.
        let (ax, ay) = r.cell_origin(0, 3);
        let bg = Theme::default().background;
        let inked = (0..cw)
            .flat_map(|dx| (0..ch).map(move |dy| (dx, dy)))
            .filter(|&(dx, dy)| image.pixel(ax + dx, ay + dy) != Some(bg))
            .count();
        assert!(inked > 10, "{inked}");
    }
}
