//! The state directory's records: layout, atomic rewrites, corrupt files.

use std::os::unix::fs::PermissionsExt;

/// A temporary directory of mode 0700: a state directory must be
/// private (`tempfile` makes 0755 ones).
fn private_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap()
}

use super::*;
use crate::vocab::RestartPolicy;

fn record(name: &str) -> TerminalRecord {
    TerminalRecord::new(
        TerminalId::mint().unwrap(),
        OwnerId::new("owner").unwrap(),
        "stub",
        SpawnSpec::new()
            .name(name)
            .role("repl")
            .restart(RestartPolicy::OnAttach)
            .command(["bash", "-l"])
            .env("A", "1"),
        serde_json::json!({ "socket": "/tmp/x.sock" }),
    )
}

#[test]
fn write_then_load_round_trips_and_sorts_by_creation() {
    let dir = private_tempdir();
    let state = StateDir::open(dir.path().join("state")).unwrap();
    let mode = fs::metadata(dir.path().join("state/terminals"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let mut first = record("one");
    first.created_ms = 10;
    let mut second = record("two");
    second.created_ms = 5;
    // Two in one millisecond keep their order by the nanoseconds, not
    // by their (random) ids.
    let mut third = record("three");
    third.created_ms = 10;
    third.created_ns = first.created_ns + 1;
    if third.id < first.id {
        std::mem::swap(&mut third.id, &mut first.id);
    }
    std::mem::swap(&mut first.created_ns, &mut third.created_ns);
    for rec in [&first, &second, &third] {
        state.write(rec).unwrap();
    }
    let loaded = state.load_all().unwrap();
    assert!(loaded.corrupt.is_empty());
    assert_eq!(
        loaded.records,
        [&second, &third, &first].map(|r| Arc::new(r.clone()))
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(state.record_path(&first.id)).unwrap()).unwrap();
    for key in [
        "id",
        "owner",
        "name",
        "role",
        "restart",
        "kind",
        "created_ms",
        "created_ns",
        "locator",
    ] {
        assert!(json.get(key).is_some(), "record lacks {key}: {json}");
    }
}

#[test]
fn rewrite_is_atomic_and_leaves_no_temp_files() {
    let dir = private_tempdir();
    let state = StateDir::open(dir.path()).unwrap();
    let mut rec = record("main");
    state.write(&rec).unwrap();
    rec.locator = serde_json::json!({ "socket": "/tmp/y.sock" });
    state.write(&rec).unwrap();
    let names: Vec<String> = fs::read_dir(dir.path().join("terminals"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![format!("{}.json", rec.id)]);
    assert_eq!(state.load_all().unwrap().records, [Arc::new(rec.clone())]);
    state.remove(&rec.id).unwrap();
    state.remove(&rec.id).unwrap();
    assert!(state.load_all().unwrap().records.is_empty());
}

#[test]
fn corrupt_files_are_reported_and_skipped() {
    let dir = private_tempdir();
    let state = StateDir::open(dir.path()).unwrap();
    let good = record("good");
    state.write(&good).unwrap();
    let terminals = dir.path().join("terminals");
    fs::write(terminals.join("t-1-0000000000000000.json"), b"{ not json").unwrap();
    let mut renamed = record("renamed");
    renamed.id = TerminalId::mint().unwrap();
    fs::write(
        terminals.join("t-2-0000000000000000.json"),
        serde_json::to_vec(&renamed).unwrap(),
    )
    .unwrap();
    let mut future = record("future");
    future.version = RECORD_VERSION + 1;
    state.write(&future).unwrap();
    fs::write(terminals.join(".tmp-half"), b"{").unwrap();
    fs::write(terminals.join("README"), b"ignored").unwrap();
    let loaded = state.load_all().unwrap();
    assert_eq!(loaded.records, [Arc::new(good)]);
    let mut errors: Vec<String> = loaded.corrupt.iter().map(|c| c.error.clone()).collect();
    errors.sort();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("does not match its file name"))
    );
    assert!(errors.iter().any(|e| e.contains("not this engine's")));
    assert!(errors.iter().any(|e| e.contains("key must be a string")));
    // Moved aside, each still naming the id its file carried, and
    // reported again by the next load with nothing moved twice.
    for corrupt in &loaded.corrupt {
        assert!(corrupt.path.to_string_lossy().ends_with(".json.corrupt"));
        assert!(corrupt.path.exists());
        assert!(corrupt.id.is_some());
    }
    assert!(!terminals.join("t-1-0000000000000000.json").exists());
    let again = state.load_all().unwrap();
    assert_eq!(again.corrupt.len(), 3);
    assert_eq!(again.records.len(), 1);
    assert_eq!(again.claimed_ids().len(), 4);
}

/// A record write cut short leaves its temp file: a reap removes it once
/// it is older than the grace, never a younger one (a write in flight).
#[test]
fn stale_temp_files_are_removed_by_age() {
    let dir = private_tempdir();
    let state = StateDir::open(dir.path()).unwrap();
    let temp = dir.path().join("terminals").join(".tmp-cut");
    fs::write(&temp, b"{").unwrap();
    assert!(
        state
            .remove_stale_temps(std::time::Duration::from_secs(3600))
            .is_empty()
    );
    assert!(temp.exists());
    let removed = state.remove_stale_temps(std::time::Duration::ZERO);
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(!temp.exists());
}

#[test]
fn a_scan_sees_what_another_process_changed_and_reads_only_that() {
    let dir = private_tempdir();
    let mine = StateDir::open(dir.path().join("state")).unwrap();
    // Another process: its own handle, so its own cache.
    let theirs = StateDir::open(dir.path().join("state")).unwrap();
    let (one, two) = (record("one"), record("two"));
    theirs.write(&one).unwrap();
    theirs.write(&two).unwrap();
    // Scans begun long after the directory's last change may stand for it.
    let later = || SystemTime::now() + std::time::Duration::from_secs(5);
    let ids = |loaded: &LoadedRecords| {
        let mut ids: Vec<String> = loaded
            .records
            .iter()
            .filter_map(|r| r.spec.name.clone())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&mine.load_all_at(later()).unwrap()), ["one", "two"]);
    // Their rename (a rewrite), a new spawn and a kill all show.
    let mut renamed = two.clone();
    renamed.spec.name = Some("deux".to_owned());
    theirs.write(&renamed).unwrap();
    theirs.write(&record("three")).unwrap();
    theirs.remove(&one.id).unwrap();
    assert_eq!(ids(&mine.load_all_at(later()).unwrap()), ["deux", "three"]);
    // A corrupt file written in place: the directory changed (a new
    // file), so it is read and set aside.
    fs::write(mine.record_path(&one.id), b"{not json").unwrap();
    let loaded = mine.load_all_at(later()).unwrap();
    assert_eq!(
        (ids(&loaded), loaded.corrupt.len()),
        (vec!["deux".to_owned(), "three".to_owned()], 1)
    );
    // A scan right after a change reads again (nothing kept for it), and
    // still answers the same.
    theirs.write(&record("four")).unwrap();
    assert_eq!(ids(&mine.load_all().unwrap()), ["deux", "four", "three"]);
    assert_eq!(ids(&mine.load_all().unwrap()), ["deux", "four", "three"]);
}
