//! Colour themes: the background, foreground, cursor and the 16 ANSI
//! colours a picture is drawn with, by name (a few built in) or as a VHS
//! theme JSON (`{"background": "#..", "red": "#..", "brightRed": ..}`).
//! The 256-colour cube and grey ramp are computed, as xterm does.

use crate::screen::Color;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// The colours of a picture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Its name.
    pub name: String,
    /// The default background.
    pub background: Rgb,
    /// The default foreground.
    pub foreground: Rgb,
    /// The block cursor.
    pub cursor: Rgb,
    /// ANSI 0-15: black, red, green, yellow, blue, magenta, cyan, white,
    /// then their bright forms.
    pub palette: [Rgb; 16],
}

/// The built-in themes: (name, background, foreground, cursor, palette).
const BUILT_IN: &[(&str, u32, u32, u32, [u32; 16])] = &[
    (
        "tmux-engine",
        0x171717,
        0xdddddd,
        0xf0f0f0,
        [
            0x282a2e, 0xe5534b, 0x57ab5a, 0xc69026, 0x539bf5, 0xb083f0, 0x39c5cf, 0xc5c8c6,
            0x666666, 0xff6a69, 0x6bc46d, 0xdaaa3f, 0x6cb6ff, 0xdcbdfb, 0x56d4dd, 0xffffff,
        ],
    ),
    (
        "Dracula",
        0x282a36,
        0xf8f8f2,
        0xf8f8f2,
        [
            0x21222c, 0xff5555, 0x50fa7b, 0xf1fa8c, 0xbd93f9, 0xff79c6, 0x8be9fd, 0xf8f8f2,
            0x6272a4, 0xff6e6e, 0x69ff94, 0xffffa5, 0xd6acff, 0xff92df, 0xa4ffff, 0xffffff,
        ],
    ),
    (
        "Catppuccin Mocha",
        0x1e1e2e,
        0xcdd6f4,
        0xf5e0dc,
        [
            0x45475a, 0xf38ba8, 0xa6e3a1, 0xf9e2af, 0x89b4fa, 0xf5c2e7, 0x94e2d5, 0xbac2de,
            0x585b70, 0xf38ba8, 0xa6e3a1, 0xf9e2af, 0x89b4fa, 0xf5c2e7, 0x94e2d5, 0xa6adc8,
        ],
    ),
    (
        "Solarized Dark",
        0x002b36,
        0x839496,
        0x93a1a1,
        [
            0x073642, 0xdc322f, 0x859900, 0xb58900, 0x268bd2, 0xd33682, 0x2aa198, 0xeee8d5,
            0x002b36, 0xcb4b16, 0x586e75, 0x657b83, 0x839496, 0x6c71c4, 0x93a1a1, 0xfdf6e3,
        ],
    ),
    (
        "Solarized Light",
        0xfdf6e3,
        0x657b83,
        0x586e75,
        [
            0x073642, 0xdc322f, 0x859900, 0xb58900, 0x268bd2, 0xd33682, 0x2aa198, 0xeee8d5,
            0x002b36, 0xcb4b16, 0x586e75, 0x657b83, 0x839496, 0x6c71c4, 0x93a1a1, 0xfdf6e3,
        ],
    ),
];

/// The VHS theme JSON keys of the 16 colours, in palette order.
const JSON_KEYS: [&str; 16] = [
    "black",
    "red",
    "green",
    "yellow",
    "blue",
    "magenta",
    "cyan",
    "white",
    "brightBlack",
    "brightRed",
    "brightGreen",
    "brightYellow",
    "brightBlue",
    "brightMagenta",
    "brightCyan",
    "brightWhite",
];

/// VHS's themes (`scripts/vhs-themes` writes the file from VHS's
/// `themes.json`): a line each, name, TAB, background, foreground, cursor
/// and the 16 colours in hex.
const VHS_THEMES: &str = include_str!("vhs_themes.txt");

/// One of VHS's themes by its name.
fn vhs_theme(name: &str) -> Option<Theme> {
    let lines = || VHS_THEMES.lines().filter_map(|line| line.split_once('\t'));
    let (name, colours) = lines()
        .find(|(n, _)| *n == name)
        .or_else(|| lines().find(|(n, _)| n.eq_ignore_ascii_case(name)))?;
    let colours: Vec<Rgb> = colours
        .split(' ')
        .map(|hex| u32::from_str_radix(hex, 16).ok().map(rgb))
        .collect::<Option<_>>()?;
    let [background, foreground, cursor, palette @ ..] = colours.as_slice() else {
        return None;
    };
    Some(Theme {
        name: name.to_owned(),
        background: *background,
        foreground: *foreground,
        cursor: *cursor,
        palette: palette.try_into().ok()?,
    })
}

fn rgb(v: u32) -> Rgb {
    let [_, r, g, b] = v.to_be_bytes();
    [r, g, b]
}

impl Default for Theme {
    fn default() -> Theme {
        Theme::named("tmux-engine").unwrap_or_else(|| unreachable!("built in"))
    }
}

impl Theme {
    /// A built-in theme by name (case-insensitive), else one of VHS's
    /// (its `themes.json`: exactly as VHS names it, else ignoring case).
    pub fn named(name: &str) -> Option<Theme> {
        let Some(&(name, bg, fg, cursor, palette)) =
            BUILT_IN.iter().find(|t| t.0.eq_ignore_ascii_case(name))
        else {
            return vhs_theme(name);
        };
        Some(Theme {
            name: name.to_owned(),
            background: rgb(bg),
            foreground: rgb(fg),
            cursor: rgb(cursor),
            palette: palette.map(rgb),
        })
    }

    /// The names of the built-in themes.
    pub fn names() -> impl Iterator<Item = &'static str> {
        BUILT_IN.iter().map(|t| t.0)
    }

    /// A theme as `Set Theme` takes it: a built-in name, or a VHS theme
    /// JSON object (missing colours fall back to the default theme's;
    /// `purple` is taken for `magenta`).
    ///
    /// # Errors
    /// A message naming an unknown theme or a bad colour.
    pub fn parse(text: &str) -> Result<Theme, String> {
        let text = text.trim();
        if !text.starts_with('{') {
            return Theme::named(text).ok_or_else(|| {
                format!(
                    "unknown theme {text:?} (built in: {}; any of VHS's themes by name; or a JSON object)",
                    Theme::names().collect::<Vec<_>>().join(", ")
                )
            });
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("theme JSON: {e}"))?;
        let mut theme = Theme::default();
        let get = |key: &str| -> Result<Option<Rgb>, String> {
            match value.get(key).and_then(serde_json::Value::as_str) {
                None => Ok(None),
                Some(hex) => hex_color(hex)
                    .map(Some)
                    .ok_or_else(|| format!("theme {key}: bad colour {hex:?}")),
            }
        };
        theme.name = value
            .get("name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("custom")
            .to_owned();
        for (i, key) in JSON_KEYS.iter().enumerate() {
            let alt = match *key {
                "magenta" => "purple",
                "brightMagenta" => "brightPurple",
                other => other,
            };
            if let Some(c) = get(key)?.or(get(alt)?) {
                theme.palette[i] = c;
            }
        }
        if let Some(c) = get("background")? {
            theme.background = c;
        }
        if let Some(c) = get("foreground")? {
            theme.foreground = c;
        }
        if let Some(c) = get("cursor")?.or(get("cursorColor")?) {
            theme.cursor = c;
        }
        Ok(theme)
    }

    /// The colour a cell colour is drawn in; `Default` is the theme's
    /// foreground or background as `fg` says.
    pub fn resolve(&self, color: Color, fg: bool) -> Rgb {
        match color {
            Color::Default if fg => self.foreground,
            Color::Default => self.background,
            Color::Indexed(i) if i < 16 => self.palette[usize::from(i)],
            Color::Indexed(i) if i < 232 => {
                const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
                let i = usize::from(i - 16);
                [LEVELS[i / 36], LEVELS[i / 6 % 6], LEVELS[i % 6]]
            }
            Color::Indexed(i) => {
                let grey = 8 + (i - 232) * 10;
                [grey, grey, grey]
            }
            Color::Rgb(r, g, b) => [r, g, b],
        }
    }
}

fn hex_color(text: &str) -> Option<Rgb> {
    let hex = text.strip_prefix('#')?;
    if hex.len() != 6 {
        return None;
    }
    u32::from_str_radix(hex, 16).ok().map(rgb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn themes_by_name_and_json() {
        let d = Theme::parse("dracula").expect("built in");
        assert_eq!(d.background, [0x28, 0x2a, 0x36]);
        let j = Theme::parse(r##"{"name":"x","background":"#000001","purple":"#0a0b0c"}"##)
            .expect("json");
        assert_eq!(j.background, [0, 0, 1]);
        assert_eq!(j.palette[5], [10, 11, 12]);
        assert!(
            Theme::parse("Nope")
                .expect_err("unknown")
                .contains("Dracula")
        );
        assert!(Theme::parse(r#"{"red":"blue"}"#).is_err());
    }

    #[test]
    fn every_vhs_theme_is_known_by_its_name() {
        // VHS's examples/settings/set-theme-name.tape.
        let latte = Theme::parse("Catppuccin Latte").expect("one of VHS's");
        assert_eq!(latte.background, [0xef, 0xf1, 0xf5]);
        assert_eq!(latte.palette[1], [0xd2, 0x0f, 0x39]);
        assert_eq!(
            Theme::parse("catppuccin latte").expect("any case").name,
            "Catppuccin Latte"
        );
        let lines = VHS_THEMES.lines().count();
        assert!(lines > 300, "{lines}");
        for line in VHS_THEMES.lines() {
            let (name, _) = line.split_once('\t').expect("name TAB colours");
            assert!(vhs_theme(name).is_some(), "{line}");
        }
    }

    #[test]
    fn the_256_colours_are_xterms() {
        let t = Theme::default();
        assert_eq!(t.resolve(Color::Indexed(196), true), [255, 0, 0]);
        assert_eq!(t.resolve(Color::Indexed(232), true), [8, 8, 8]);
        assert_eq!(t.resolve(Color::Indexed(1), false), t.palette[1]);
        assert_eq!(t.resolve(Color::Default, false), t.background);
    }
}
