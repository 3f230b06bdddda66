//! What CI reads of a tape run: JUnit XML (one `testcase` per tape, its
//! failure with file, line and screen) and the one summary line
//! `N passed, N failed`.

use std::fmt::Write as _;

use super::TapeResult;
use crate::vocab::escape_markup;

/// The summary line: `3 passed, 1 failed`.
pub fn summary(results: &[TapeResult]) -> String {
    let passed = results.iter().filter(|r| r.passed()).count();
    format!("{passed} passed, {} failed", results.len() - passed)
}

/// The results as a JUnit XML report (`testsuites` > one `testsuite` >
/// a `testcase` per tape), as CI systems read it.
pub fn junit(results: &[TapeResult], seconds: f64) -> String {
    let failures = results.iter().filter(|r| !r.passed()).count();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"tmux-engine test\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{seconds:.3}\">",
        results.len()
    );
    let _ = writeln!(
        xml,
        "  <testsuite name=\"tapes\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{seconds:.3}\">",
        results.len()
    );
    for r in results {
        let _ = write!(
            xml,
            "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" time=\"{:.3}\"",
            escape_markup(&r.name),
            escape_markup(&r.path.display().to_string()),
            escape_markup(&r.path.display().to_string()),
            r.seconds
        );
        if r.passed() && r.notes.is_empty() {
            xml.push_str("/>\n");
            continue;
        }
        xml.push_str(">\n");
        if let Some(f) = &r.failure {
            let first = f.to_string();
            let message = first.lines().next().unwrap_or("");
            let _ = writeln!(
                xml,
                "      <failure message=\"{}\" type=\"tape\">{}</failure>",
                escape_markup(message),
                escape_markup(&first)
            );
        }
        if !r.notes.is_empty() {
            let _ = writeln!(
                xml,
                "      <system-out>{}</system-out>",
                escape_markup(&r.notes.join("\n"))
            );
        }
        xml.push_str("    </testcase>\n");
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tape::Failure;
    use std::path::PathBuf;

    fn result(name: &str, failure: Option<&str>) -> TapeResult {
        TapeResult {
            path: PathBuf::from(format!("t/{name}.tape")),
            name: name.to_owned(),
            failure: failure.map(|m| Failure {
                at: None,
                message: m.to_owned(),
                screen: None,
                artifacts: Vec::new(),
            }),
            tries: 1,
            seconds: 0.5,
            notes: Vec::new(),
        }
    }

    #[test]
    fn junit_counts_and_escapes() {
        let results = [result("a", None), result("b", Some("x <y> & \"z\"\u{1}"))];
        let xml = junit(&results, 1.0);
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(
            xml.contains("<testcase name=\"a\" classname=\"t/a.tape\""),
            "{xml}"
        );
        assert!(
            xml.contains("message=\"x &lt;y&gt; &amp; &quot;z&quot;\u{fffd}\""),
            "{xml}"
        );
        assert_eq!(summary(&results), "1 passed, 1 failed");
    }
}
