//! Live tests of `tmux::version` discovery against real and fake binaries.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tmux_engine::ErrorCode;
use tmux_engine::tmux::Tmux;
use tmux_engine::tmux::{MIN_VERSION, TMUX_ENV};

use crate::support::{test_dir, tmux};

/// Writes an executable script that prints `version` for `-V`.
fn fake_tmux(dir: &Path, version: &str) -> PathBuf {
    let path = dir.join("tmux");
    crate::support::write_script(&path, &format!("#!/bin/sh\necho '{version}'\n"));
    path
}

#[test]
fn real_tmux_is_supported() {
    let tmux = tmux();
    assert!(tmux.version() >= MIN_VERSION, "{}", tmux.version());
    assert!(tmux.path().is_absolute(), "{}", tmux.path().display());
}

#[test]
fn old_fake_tmux_is_too_old() {
    let tmp = test_dir();
    let fake = fake_tmux(tmp.path(), "tmux 3.1");
    let err = Tmux::at(&fake).expect_err("3.1 is too old");
    assert_eq!(err.code(), ErrorCode::TmuxTooOld);
    let text = err.to_string();
    assert!(
        text.contains("tmux 3.1 at ") && text.contains(&fake.display().to_string()),
        "{text}"
    );

    let err = Tmux::find(fake.as_os_str(), Some(TMUX_ENV)).expect_err("3.1 is too old");
    assert_eq!(err.code(), ErrorCode::TmuxTooOld);
}

#[test]
fn missing_or_bogus_tmux_is_missing() {
    let tmp = test_dir();
    let missing = tmp.path().join("no-such-tmux");
    let err = Tmux::find(missing.as_os_str(), Some(TMUX_ENV)).expect_err("missing");
    assert_eq!(err.code(), ErrorCode::TmuxMissing);
    let text = err.to_string();
    assert!(
        text.contains(&missing.display().to_string()) && text.contains(TMUX_ENV),
        "{text}"
    );

    let bogus = fake_tmux(tmp.path(), "screen 4.09");
    let err = Tmux::at(&bogus).expect_err("not tmux");
    assert_eq!(err.code(), ErrorCode::TmuxMissing);
    assert!(err.to_string().contains("not a tmux version"), "{err}");
}

/// Runs [`discover_child`] in a copy of this test binary with
/// `TMUX_ENGINE_TMUX` set, so the real environment lookup is tested without
/// mutating this process's environment under parallel tests.
fn discover_with_env(value: &OsStr) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "tmux::discovery::discover_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TMUX_ENV, value)
        .env("TMUX_ENGINE_TEST_CHILD", "1")
        .output()
        .expect("running the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        // The harness prints `test NAME ... ` on the same line.
        .find_map(|l| l.split_once("DISCOVERED ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("child printed no result:\n{stdout}"))
        .to_owned()
}

#[test]
#[ignore = "run by discover_reads_the_environment in a child process"]
fn discover_child() {
    if std::env::var_os("TMUX_ENGINE_TEST_CHILD").is_none() {
        return;
    }
    match Tmux::discover() {
        Ok(t) => println!("DISCOVERED ok {}", t.version()),
        Err(e) => println!("DISCOVERED {} {e}", e.code()),
    }
}

#[test]
fn discover_reads_the_environment() {
    let tmp = test_dir();
    let fake = fake_tmux(tmp.path(), "tmux 3.1");
    let got = discover_with_env(fake.as_os_str());
    assert!(got.starts_with("TMUX_TOO_OLD tmux 3.1 at "), "{got}");

    let missing = tmp.path().join("gone");
    let got = discover_with_env(missing.as_os_str());
    assert!(
        got.starts_with("TMUX_MISSING") && got.contains(TMUX_ENV),
        "{got}"
    );

    // A bare name is looked up on PATH.
    let got = discover_with_env(OsStr::new("tmux"));
    assert!(got.starts_with("ok "), "{got}");
}
