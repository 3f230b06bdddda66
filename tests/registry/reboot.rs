//! Issue 26: terminals that come back after a reboot, with their history.
//! A reboot is simulated on real tmux: every tmux server SIGKILLed, the
//! runtime directory emptied, the boot id the engine reads changed (its
//! test seam, `RegistryConfig::boot_id_file`), a new engine opened on the
//! same state directory.

use std::path::{Path, PathBuf};

use tmux_engine::registry::{
    HOST_RESTARTED, OwnerId, ReadRequest, Registry, RegistryConfig, RestartPolicy, TerminalStatus,
};

use tmux_engine::verbs::{SearchRequest, search};

use super::{Cleanup, WAIT, assert_clean, backend_with, runtime, sh};
use crate::support::poll;

/// A search of terminal `name` for `regex`.
fn find(name: &str, regex: &str) -> SearchRequest {
    SearchRequest {
        terminal: Some(name.to_owned()),
        regex: regex.to_owned(),
        ..SearchRequest::default()
    }
}

/// SIGKILLs every tmux server under `runtime` and every process of its
/// panes (relays included: they name the directory), as a power cut
/// would, and returns once each of them is dead. A process SIGKILLed is
/// not gone yet when `kill` returns: on a loaded machine a pane's wrapper
/// still ran when the next engine looked, and that engine rightly called
/// its terminal running.
pub(super) async fn sigkill_servers(runtime: &Path) {
    let victims = processes_under(runtime);
    for pid in &victims {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    poll("the killed processes to die", WAIT, || async {
        victims
            .iter()
            .all(|&pid| {
                // Gone, or a zombie: it runs nothing any more.
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|stat| {
                        let state = stat.rsplit_once(") ")?.1.chars().next()?;
                        Some(!matches!(state, 'Z' | 'X' | 'x'))
                    })
                    .is_none_or(|alive| !alive)
            })
            .then_some(())
    })
    .await;
}

/// The tmux servers under `runtime` (their command line names it) and the
/// processes of their panes (`TMUX` in their environment names it).
fn processes_under(runtime: &Path) -> Vec<u32> {
    let needle = runtime.to_string_lossy().into_owned();
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let read = |file: &str| {
                std::fs::read(entry.path().join(file))
                    .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
                    .unwrap_or_default()
            };
            let cmdline = read("cmdline");
            let server = cmdline.contains("tmux") && cmdline.contains(&needle);
            let pane = read("environ").contains(&format!("TMUX={needle}"));
            (pid != me && (server || pane)).then_some(pid)
        })
        .collect()
}

/// A test's directory (its servers killed when the guard drops) and a
/// boot id file in it saying `boot_id`: where each test's engines run.
fn host(boot_id: &str) -> (tempfile::TempDir, Cleanup, PathBuf) {
    let dir = crate::support::test_dir();
    let guard = Cleanup(runtime(dir.path()));
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, format!("{boot_id}\n")).unwrap();
    (dir, guard, boot)
}

/// A registry on `dir`'s state directory reading its boot id from `boot`.
async fn engine(dir: &Path, boot: &Path) -> Registry {
    let config = RegistryConfig::default()
        .state_dir(dir.join("state"))
        .boot_id_file(boot);
    Registry::open_with(config, backend_with(dir, "/bin/sh"))
        .await
        .unwrap()
        .0
}

fn history_of(dir: &Path, id: &str) -> PathBuf {
    dir.join("state").join("history").join(id)
}

/// The kept meta's working directory, once written.
fn kept_cwd(dir: &Path, id: &str) -> Option<PathBuf> {
    let text = std::fs::read(history_of(dir, id).join("meta.json")).ok()?;
    let meta: serde_json::Value = serde_json::from_slice(&text).ok()?;
    meta["cwd"].as_str().map(PathBuf::from)
}

/// The kept bytes of `id`, read from its segments as another process
/// sees them.
fn kept_bytes(dir: &Path, id: &str) -> Vec<u8> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(history_of(dir, id))
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
                .collect()
        })
        .unwrap_or_default();
    segments.sort();
    segments
        .iter()
        .flat_map(|path| std::fs::read(path).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_reboot_brings_kept_terminals_back_with_their_history() {
    crate::support::within(async {
        // The first engine: `mcp --keep-history`, a process of its own,
        // SIGKILLed below; it reads the kernel's boot id.
        let cli = crate::cli::Cli::new();
        let dir_path = cli.state().parent().unwrap().to_owned();
        let dir = dir_path.as_path();
        let boot = dir.join("boot_id");
        std::fs::write(&boot, "a-boot-after-the-reboot\n").unwrap();
        let owner = OwnerId::new("tester").unwrap();
        let one = crate::mcp::Mcp::start_in(&cli, &["--keep-history"], "/bin/sh").await;
        let script = "i=1; while [ $i -le 10000 ]; do echo \"line $i\"; i=$((i+1)); done; \
                      echo MARKER-END; exec sleep 1000";
        let printer = one
            .ok(
                "terminal_spawn",
                serde_json::json!({"name": "printer", "command": ["/bin/sh", "-c", script]}),
            )
            .await;
        let printer_id = printer["id"].as_str().unwrap().to_owned();
        let work = dir.canonicalize().unwrap().join("work");
        std::fs::create_dir(&work).unwrap();
        let shell = one
            .ok(
                "terminal_spawn",
                serde_json::json!({
                    "name": "shell",
                    "cwd": dir,
                    "restart": "on-attach",
                    "resume_command": "echo resumed-$((6*7))",
                }),
            )
            .await;
        let shell_id = shell["id"].as_str().unwrap().to_owned();
        one.ok(
            "terminal_send",
            serde_json::json!({"terminal": "shell", "text": "cd work && echo moved-on",
                               "submit": true, "wait": "command"}),
        )
        .await;
        let mut expected: Vec<u8> = (1..=10_000)
            .flat_map(|n| format!("line {n}\r\n").into_bytes())
            .collect();
        expected.extend_from_slice(b"MARKER-END\r\n");
        // On disk within the loss window (nothing flushes it early), as
        // another process reads the files.
        poll("the printer's output on disk", WAIT, || async {
            kept_bytes(dir, &printer_id)
                .windows(expected.len())
                .any(|w| w == expected)
                .then_some(())
        })
        .await;
        poll("the shell's directory in its meta", WAIT, || async {
            (kept_cwd(dir, &shell_id) == Some(work.clone())).then_some(())
        })
        .await;
        let page = one
            .ok(
                "terminal_read",
                serde_json::json!({"terminal": "printer", "count": 1}),
            )
            .await;
        let before: tmux_engine::registry::OutputCursor =
            page["next_cursor"].as_str().unwrap().parse().unwrap();
        // The reboot: the engine and every server die without a word, the
        // runtime directory is new, the boot id another.
        one.kill();
        sigkill_servers(&cli.runtime()).await;
        std::fs::remove_dir_all(cli.runtime()).unwrap();

        let two = engine(dir, &boot).await;
        let owned = || two.owner(&owner);
        for name in ["printer", "shell"] {
            let status = owned().show(name).await.unwrap().status;
            assert_eq!(
                status,
                TerminalStatus::Gone {
                    reason: HOST_RESTARTED.to_owned()
                },
                "{name}"
            );
        }
        // Every line and the marker, byte for byte, from the kept history;
        // a cursor from before the reboot reads the same bytes.
        let kept = owned().output_since("printer", None).await.unwrap();
        assert!(
            kept.bytes.windows(expected.len()).any(|w| w == expected),
            "kept history lacks the printed lines"
        );
        let tail = owned().output_since("printer", Some(before)).await.unwrap();
        assert_eq!(tail.gap, None);
        assert!(tail.bytes.is_empty(), "{:?}", tail.bytes);
        let page = owned()
            .read(
                "printer",
                ReadRequest {
                    offset: 0,
                    count: Some(2),
                },
            )
            .await
            .unwrap();
        assert_eq!(page.lines, ["line 10000", "MARKER-END"]);
        // Issue 44 item 4: search reads the kept history of a gone
        // terminal, from its first line.
        let first = search(owned(), &find("printer", "^line 1$")).await.unwrap();
        assert_eq!(first.matches.len(), 1, "{first:?}");
        assert_eq!(first.matches[0].line, 0, "{first:?}");
        assert!(!first.ranges[0].older_output, "{first:?}");

        // The on-attach shell comes back at its attach: old lines above
        // the marked line, a prompt in its last directory, then the resume
        // command.
        let probed = owned().probe("shell").await.unwrap();
        assert!(probed.recreated, "{probed:?}");
        let text = poll("the resume command's output", WAIT, || async {
            let page = owned()
                .read(
                    "shell",
                    ReadRequest {
                        offset: 0,
                        count: Some(100),
                    },
                )
                .await
                .ok()?;
            let text = page.lines.join("\n");
            text.contains("resumed-42").then_some(text)
        })
        .await;
        let marked = text.find("── restored from ").expect("the marked line");
        let moved = text.find("moved-on").expect("the old output");
        let resumed = text.rfind("resumed-42").unwrap();
        assert!(moved < marked && marked < resumed, "{text}");
        assert_eq!(
            owned().working_directory("shell").await.unwrap(),
            Some(work.clone())
        );
        let snapshot = owned().show("shell").await.unwrap();
        assert!(snapshot.restored_ms.is_some(), "{snapshot:?}");
        // And the restored terminal's: its first line is the kept
        // history's, searched in the new stream.
        let moved = search(owned(), &find("shell", "^moved-on$")).await.unwrap();
        assert_eq!(moved.matches.len(), 1, "{moved:?}");
        // Kill removes the files.
        for name in ["printer", "shell"] {
            let id = owned().show(name).await.unwrap().id;
            owned().kill(name).await.unwrap();
            assert!(!history_of(dir, id.as_str()).exists(), "{name}");
        }
        two.dispose().await.unwrap();
        assert_clean(&cli.runtime()).await;
    })
    .await;
}

/// A crash (the server SIGKILLed, the machine up) is not a reboot: the
/// terminal is recreated as before, with another reason.
#[tokio::test]
async fn a_crash_is_told_apart_from_a_reboot() {
    crate::support::within(async {
        let (dir, _guard, boot) = host("same-boot");
        let owner = OwnerId::new("alice").unwrap();
        let one = engine(dir.path(), &boot).await;
        one.owner(&owner)
            .spawn(
                sh("echo crash-me; exec sleep 1000")
                    .name("t")
                    .keep_history(true)
                    .restart(RestartPolicy::OnAttach),
            )
            .await
            .unwrap();
        one.shutdown().await;
        drop(one);
        sigkill_servers(&runtime(dir.path())).await;
        let two = engine(dir.path(), &boot).await;
        let status = poll("the crash to show", WAIT, || async {
            let status = two.owner(&owner).show("t").await.unwrap().status;
            (!status.is_running()).then_some(status)
        })
        .await;
        let TerminalStatus::Gone { reason } = &status else {
            panic!("{status:?}");
        };
        assert_ne!(reason, HOST_RESTARTED);
        assert!(two.owner(&owner).probe("t").await.unwrap().recreated);
        two.dispose().await.unwrap();
        assert_clean(&runtime(dir.path())).await;
    })
    .await;
}

/// A full disk (a small tmpfs as the state directory) fails a spawn that
/// keeps its history with a clear error, and leaves no record behind,
/// torn or whole.
#[tokio::test]
async fn a_full_disk_is_a_clear_error_and_no_torn_record() {
    crate::support::within(async {
        let dir = crate::support::test_dir();
        let _guard = Cleanup(runtime(dir.path()));
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let _unmount = crate::support::full_disk(&state, "256k");
        let (registry, _) = Registry::open_with(
            RegistryConfig::default().state_dir(&state),
            backend_with(dir.path(), "/bin/sh"),
        )
        .await
        .unwrap();
        // Fill it.
        let filler = state.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut file, &block).is_ok() {}
        drop(file);
        let owner = OwnerId::new("alice").unwrap();
        let error = registry
            .owner(&owner)
            .spawn(sh("exec sleep 1000").keep_history(true))
            .await
            .unwrap_err();
        assert_eq!(error.code(), "IO", "{error}");
        assert!(error.to_string().contains("No space left"), "{error}");
        let records: Vec<_> = std::fs::read_dir(state.join("terminals"))
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name())
            .collect();
        assert!(records.is_empty(), "{records:?}");
        let histories = std::fs::read_dir(state.join("history"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        assert_eq!(histories, 0);
        registry.dispose().await.unwrap();
        assert_clean(&runtime(dir.path())).await;
    })
    .await;
}

/// `record: true` writes an asciicast v2 recording beside the kept
/// history, which reads back as the program's output.
#[tokio::test]
async fn record_writes_an_asciicast_beside_the_history() {
    crate::support::within(async {
        let (dir, _guard, boot) = host("a-boot");
        let owner = OwnerId::new("alice").unwrap();
        let registry = engine(dir.path(), &boot).await;
        let spawned = registry
            .owner(&owner)
            .spawn(sh("echo recorded-$((6*7)); exec sleep 1000").record(true))
            .await
            .unwrap();
        let kept = history_of(dir.path(), spawned.id.as_str());
        let output = poll("the recording", WAIT, || async {
            let cast = std::fs::read_dir(&kept)
                .ok()?
                .flatten()
                .find(|entry| entry.file_name().to_string_lossy().ends_with(".cast"))?;
            let text = std::fs::read_to_string(cast.path()).ok()?;
            let recording = tmux_engine::screen::asciicast::Recording::parse(&text).ok()?;
            let output = recording.output();
            output.contains("recorded-42").then_some(output)
        })
        .await;
        assert!(!output.contains("$((6*7))"), "{output}");
        registry
            .owner(&owner)
            .kill(spawned.id.as_str())
            .await
            .unwrap();
        assert!(!kept.exists());
        registry.dispose().await.unwrap();
        assert_clean(&runtime(dir.path())).await;
    })
    .await;
}

/// `service install` writes a unit running `serve --keep-history` with the
/// flags given, which `systemd-analyze verify` accepts where it exists;
/// `service uninstall` removes it.
#[test]
fn service_install_writes_a_unit_systemd_accepts() {
    let cli = crate::cli::Cli::new();
    let units = crate::support::test_dir();
    let dir = units.path().to_string_lossy().into_owned();
    let printed = cli.ok(&[
        "service",
        "install",
        "--user",
        "--unit-dir",
        &dir,
        "--",
        "--listen",
        "127.0.0.1:7681",
    ]);
    let unit = units.path().join("tmux-engine.service");
    let socket = units.path().join("tmux-engine.socket");
    assert_eq!(
        printed.trim(),
        format!("{}\n{}", unit.display(), socket.display())
    );
    let text = std::fs::read_to_string(&unit).unwrap();
    // The socket unit listens (--listen goes there); serve takes its socket.
    let exec = format!(
        "ExecStart=\"{}\" \"serve\" \"--keep-history\"\n",
        env!("CARGO_BIN_EXE_tmux-engine")
    );
    let listens = std::fs::read_to_string(&socket).unwrap();
    assert!(
        listens.contains("ListenStream=127.0.0.1:7681\n"),
        "{listens}"
    );
    assert!(text.contains(&exec), "{text}");
    assert!(text.contains("UMask=0077\n"), "{text}");
    assert!(text.contains("WantedBy=default.target\n"), "{text}");
    assert!(text.contains("KillMode=process\n"), "{text}");
    let verify = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output();
    if let Ok(verify) = verify {
        assert!(
            verify.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
    }
    cli.ok(&["service", "uninstall", "--user", "--unit-dir", &dir]);
    assert!(!unit.exists() && !socket.exists());
}

/// Issue 46, item 6: `service install -- --token T` once wrote T into a
/// 0644 unit (and `ExecStart`, which `systemctl show` prints to every
/// user); a newline in a flag wrote its own line. Now the token is
/// refused, an environment file must be private, every word stays on its
/// line (systemd-analyze accepts the unit), and the unit is 0600.
#[test]
fn service_install_keeps_secrets_and_lines_out_of_the_unit() {
    use std::os::unix::fs::PermissionsExt;
    let cli = crate::cli::Cli::new();
    let units = crate::support::test_dir();
    let dir = units.path().to_string_lossy().into_owned();
    let unit = units.path().join("tmux-engine.service");
    for token in [&["--token", "s3cret-token"][..], &["--token=s3cret-token"]] {
        let mut args = vec!["service", "install", "--user", "--unit-dir", &dir, "--"];
        args.extend_from_slice(token);
        let output = cli.run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains("--token-file"), "{stderr}");
        assert!(!stderr.contains("s3cret-token"), "{stderr}");
        assert!(!unit.exists());
    }
    let env = units.path().join("serve.env");
    std::fs::write(&env, "TMUX_ENGINE_TOKEN=s3cret-token-0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    let env_arg = env.to_string_lossy().into_owned();
    let output = cli.run(&[
        "service",
        "install",
        "--user",
        "--unit-dir",
        &dir,
        "--environment-file",
        &env_arg,
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("UNSAFE_FILE") || stderr.contains("group or others"),
        "{stderr}"
    );
    assert!(!unit.exists());
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    cli.ok(&[
        "service",
        "install",
        "--user",
        "--unit-dir",
        &dir,
        "--environment-file",
        &env_arg,
        "--",
        "--page-option",
        "fontFamily=x\nExecStartPre=/bin/false",
    ]);
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
    assert!(!text.contains("\nExecStartPre"), "{text}");
    assert!(
        text.contains(&format!("EnvironmentFile={env_arg}\n")),
        "{text}"
    );
    assert!(text.contains("UMask=0077\n"), "{text}");
    let mode = std::fs::metadata(&unit).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "unit mode {mode:o}");
    if let Ok(verify) = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
    {
        assert!(
            verify.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
    }
    // Nothing of the staging is left beside the unit.
    let left: Vec<_> = std::fs::read_dir(units.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    // The service, the socket and the environment file.
    assert_eq!(left.len(), 3, "{left:?}");
}

/// Two engines holding one kept terminal: one writes its history (a
/// lock), so its bytes are kept once, not once per engine.
#[tokio::test]
async fn two_engines_write_a_history_once() {
    crate::support::within(async {
        let (dir, _guard, boot) = host("a-boot");
        let owner = OwnerId::new("alice").unwrap();
        let one = engine(dir.path(), &boot).await;
        let spawned = one
            .owner(&owner)
            .spawn(sh("read x; echo once-$x; exec sleep 1000").keep_history(true))
            .await
            .unwrap();
        let id = spawned.id.to_string();
        let two = engine(dir.path(), &boot).await;
        // Attached by the second engine too (its stream sees every byte).
        two.owner(&owner).output_end(&id).await.unwrap();
        one.owner(&owner)
            .write(&id, bytes::Bytes::from_static(b"2\r"))
            .await
            .unwrap();
        poll("the output on disk", WAIT, || async {
            let kept = kept_bytes(dir.path(), &id);
            kept.windows(6).any(|w| w == b"once-2").then_some(())
        })
        .await;
        // Every writer writes what it has when it stops.
        one.shutdown().await;
        two.shutdown().await;
        let kept = kept_bytes(dir.path(), &id);
        assert_eq!(kept.windows(6).filter(|w| *w == b"once-2").count(), 1);
        let three = engine(dir.path(), &boot).await;
        three.owner(&owner).kill(&id).await.unwrap();
        three.dispose().await.unwrap();
        assert_clean(&runtime(dir.path())).await;
    })
    .await;
}
