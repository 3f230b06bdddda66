//! Text inside HTML or XML attributes and content: the page's embedded
//! options and a tape run's JUnit report escape the same way.

/// `text` with `&`, `<`, `>`, `"` and `'` as entities, and the control
/// characters XML 1.0 forbids (all below U+0020 but tab, newline and
/// carriage return) as U+FFFD: safe in an attribute quoted either way and
/// in content.
pub(crate) fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if u32::from(c) < 0x20 => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_and_forbidden_controls() {
        assert_eq!(escape_markup(r#"a"<b>&'"#), "a&quot;&lt;b&gt;&amp;&#39;");
        assert_eq!(escape_markup("x\u{1}y\tz\n"), "x\u{fffd}y\tz\n");
    }
}
