//! `tmux-engine test` as CI runs it: the built binary, its exit code, the
//! summary line, the JUnit report's counts, the artifacts of a failure and
//! retries of a flaky tape.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::{options, write_tape};
use crate::support::live;
use tmux_engine::tape;

fn engine_test(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .env("TMUX_ENGINE_RUNTIME_DIR", dir.join("rt"))
        .current_dir(dir)
        .arg("test")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running tmux-engine test")
}

/// The value of `name="..."` in the first element named `element`.
fn attribute(xml: &str, element: &str, name: &str) -> String {
    let start = xml.find(&format!("<{element} ")).expect(element);
    let tag = &xml[start..start + xml[start..].find('>').expect("tag end")];
    let key = format!(" {name}=\"");
    let from = tag.find(&key).expect(name) + key.len();
    tag[from..from + tag[from..].find('"').expect("quote")].to_owned()
}

#[tokio::test]
async fn junit_summary_and_artifacts_of_a_run_with_a_failure() {
    live(async |dir| {
        let d = dir.path();
        std::fs::create_dir_all(d.join("rt")).expect("rt");
        write_tape(d, "one.tape", "Set Shell sh\nType \"echo one\"\nEnter\nExpect /^one$/\n");
        write_tape(d, "two.tape", "Set Shell sh\nType \"echo two\"\nEnter\nExpect /^two$/\n");
        write_tape(
            d,
            "bad.tape",
            "Set Shell sh\nType \"printf '\\033[41m  \\033[0m red\\n'\"\nEnter\nExpect@300ms /^blue$/\n",
        );
        let out = engine_test(
            d,
            &["-j", "3", "--junit", "report.xml", "--artifacts", "arts", "one.tape", "two.tape", "bad.tape"],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(stdout.lines().last(), Some("2 passed, 1 failed"), "{stdout}");
        assert!(stdout.contains("bad.tape:4: Expect@300ms /^blue$/"), "{stdout}");
        let xml = std::fs::read_to_string(d.join("report.xml")).expect("report.xml");
        assert_eq!(attribute(&xml, "testsuites", "tests"), "3", "{xml}");
        assert_eq!(attribute(&xml, "testsuites", "failures"), "1", "{xml}");
        assert_eq!(attribute(&xml, "testsuite", "tests"), "3", "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
        assert!(xml.contains("bad.tape:4"), "{xml}");
        // The failure's recording, screen and picture.
        let arts = d.join("arts/bad");
        let cast = std::fs::read_to_string(arts.join("bad.cast")).expect("cast");
        let rec = tmux_engine::screen::asciicast::Recording::parse(&cast).expect("a cast");
        assert!(rec.final_screen().text().contains("red"));
        let txt = std::fs::read_to_string(arts.join("bad.txt")).expect("screen text");
        assert!(txt.contains("|   red"), "{txt}");
        let png = std::fs::File::open(arts.join("bad.png")).expect("png");
        let info = png::Decoder::new(std::io::BufReader::new(png)).read_info().expect("decodes");
        assert!(info.info().width > 80 * 8, "{}", info.info().width);
        // Passing tapes leave nothing.
        assert!(!d.join("arts/one").exists());
        let ok = engine_test(d, &["one.tape"]);
        assert_eq!(ok.status.code(), Some(0), "{ok:?}");
        assert_eq!(String::from_utf8_lossy(&ok.stdout).lines().last(), Some("1 passed, 0 failed"));
    })
    .await;
}

#[tokio::test]
async fn retries_apply_to_tapes_marked_flaky() {
    live(async |dir| {
        let d = dir.path();
        // Fails the first time (no marker yet), passes once the marker is there.
        let body = "Set Shell sh\nType \"if [ -e marker-NAME ]; then echo pass; else touch marker-NAME; echo fail; fi\"\n\
                    Enter\nExpect@300ms /^pass$/\n";
        let flaky = write_tape(d, "flaky.tape", &format!("Set Flaky true\n{}", body.replace("NAME", "f")));
        let steady = write_tape(d, "steady.tape", &body.replace("NAME", "s"));
        let mut opts = options(d);
        opts.retries = 2;
        let results = tape::run_files(&[flaky, steady], &opts).await;
        assert!(results[0].passed(), "{:?}", results[0].failure);
        assert_eq!(results[0].tries, 2);
        assert!(results[0].notes[0].starts_with("try 1 of 3 failed"), "{:?}", results[0].notes);
        assert!(!results[1].passed(), "not marked flaky: no retry");
        assert_eq!(results[1].tries, 1);
        assert_eq!(tape::summary(&results), "1 passed, 1 failed");
        let xml = tape::junit(&results, 1.0);
        assert!(xml.contains("failures=\"1\""), "{xml}");
    })
    .await;
}
