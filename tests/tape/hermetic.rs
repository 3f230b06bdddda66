//! Shell tapes whose screens do not depend on the machine (issue 45):
//! VHS's own golden text files for bash, zsh and fish match byte for byte,
//! and a zsh and a fish golden screen made here pass in another directory
//! under another host name and another user.

use std::path::Path;
use std::process::Command;

use super::{assert_passed, options, run, write_tape};
use crate::support::{installed, live};
use tmux_engine::tape;

/// VHS's tapes and goldens (`tests/tape/vhs/README.md`).
const VHS_SHELLS: &[(&str, &str, &str)] = &[
    (
        "bash",
        include_str!("vhs/bash.tape"),
        include_str!("vhs/bash.ascii"),
    ),
    (
        "zsh",
        include_str!("vhs/zsh.tape"),
        include_str!("vhs/zsh.ascii"),
    ),
    (
        "fish",
        include_str!("vhs/fish.tape"),
        include_str!("vhs/fish.ascii"),
    ),
];

#[tokio::test]
async fn vhs_s_own_shell_goldens_match_byte_for_byte() {
    for (shell, _, _) in VHS_SHELLS {
        assert!(installed(shell).is_some(), "{shell} is not installed");
    }
    live(async |dir| {
        // The tapes write `examples/shell/NAME.{gif,ascii}`, relative to
        // the tape.
        std::fs::create_dir_all(dir.path().join("examples/shell")).expect("mkdir");
        for (shell, tape, golden) in VHS_SHELLS {
            // The one line added: VHS sized its 1200x600 window by its
            // browser's font (15 rows then); the tape sets no size, and
            // this runner's default is 80x24.
            let text = format!("Set Size 80x15\n{tape}");
            let r = run(dir.path(), &format!("{shell}.tape"), &text).await;
            assert_passed(&r);
            let ascii = dir.path().join(format!("examples/shell/{shell}.ascii"));
            let ours = std::fs::read_to_string(&ascii).expect("the .ascii output");
            assert_eq!(
                ours, *golden,
                "{shell}: the output differs from VHS's golden"
            );
        }
    })
    .await;
}

/// A zsh and a fish tape: `$0` (fish: its path's name), an expansion, and
/// the prompt after it, snapshotted.
const SHELL_TAPES: &[(&str, &str)] = &[
    (
        "zsh",
        "Set Shell zsh\nSet Size 60x5\nType \"echo $0 $((6*7))\" Enter\nWait\nSnapshot zsh-screen\n",
    ),
    (
        "fish",
        "Set Shell fish\nSet Size 60x5\n\
         Type \"echo (basename (status fish-path)) (math 6 \\* 7)\" Enter\nWait\n\
         Snapshot fish-screen\n",
    ),
];

/// The goldens those tapes make (`NAME.txt`, `NAME.styled.txt`): VHS's
/// `> ` prompt (fish draws VHS's colour in the nearest of 16 under
/// `TERM=screen`), no host name, user, directory or greeting.
const GOLDENS: &[(&str, &str, &str)] = &[
    (
        "zsh-screen",
        "60x5 cursor 2:2 main\n |> echo $0 $((6*7))\n |zsh 42\n>|>\n |\n |\n",
        "{fg=#5b56e0}> {/}echo $0 $((6*7))\nzsh 42\n{fg=#5b56e0}> {/}\n\n\n",
    ),
    (
        "fish-screen",
        concat!(
            "60x5 cursor 2:2 main\n",
            " |> echo (basename (status fish-path)) (math 6 \\* 7)\n",
            " |fish 42\n>|>\n |\n |\n",
        ),
        concat!(
            "{fg=bright-black}> {/}echo (basename (status fish-path)) (math 6 \\* 7)\n",
            "fish 42\n{fg=bright-black}> {/}\n\n\n",
        ),
    ),
];

#[tokio::test]
async fn zsh_and_fish_goldens_pass_under_another_host_name_and_user() {
    for shell in ["zsh", "fish", "unshare", "hostname"] {
        assert!(installed(shell).is_some(), "{shell} is not installed");
    }
    live(async |dir| {
        let here = dir.path().join("here");
        std::fs::create_dir(&here).expect("mkdir");
        let mut paths = Vec::new();
        for (name, text) in SHELL_TAPES {
            paths.push(write_tape(&here, &format!("{name}.tape"), text));
        }
        let made = tape::run_files(
            &paths,
            &tape::Options {
                update: true,
                ..options(dir.path())
            },
        )
        .await;
        made.iter().for_each(assert_passed);
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        for (name, text, styled) in GOLDENS {
            for (file, expected) in [("txt", text), ("styled.txt", styled)] {
                let golden =
                    std::fs::read_to_string(here.join(format!("__snapshots__/{name}.{file}")))
                        .expect("the golden");
                assert_eq!(golden, *expected, "{name}.{file}");
                assert!(!golden.contains(&host), "{name} shows the host name {host}");
                assert!(!golden.contains("/tmp"), "{name} shows a directory");
            }
        }

        // The next machine: another directory, host name and user (a user
        // namespace, root in it to name the host, then uid 4242, which has
        // no passwd entry at all).
        let there = dir.path().join("there");
        copy_dir(&here, &there);
        let engine = env!("CARGO_BIN_EXE_tmux-engine");
        let out = Command::new("unshare")
            .args(["--user", "--map-root-user", "--uts", "--", "sh", "-c"])
            .arg(
                "hostname tape-elsewhere && exec unshare --user --map-user=4242 \
                 --map-group=4242 -- \"$0\" test zsh.tape fish.tape",
            )
            .arg(engine)
            .current_dir(&there)
            .env("TMUX_ENGINE_RUNTIME_DIR", dir.path().join("rt-elsewhere"))
            .output()
            .expect("unshare");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    })
    .await;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}
