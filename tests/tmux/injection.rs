//! No caller text can inject a tmux command: hostile payloads go through
//! `quote` (via `TmuxCommand`) as arguments, both over a real `tmux -C`
//! connection and through `Server::run`, and as session names. A successful
//! injection would run `touch CANARY`.

use std::path::Path;
use std::time::Duration;

use tmux_engine::tmux::{Server, TmuxCommand};

use crate::support::{Control, live, opts, poll, sh_c, start_server, tmux};

const WAIT: Duration = Duration::from_secs(10);

fn payloads(canary: &Path) -> Vec<Vec<u8>> {
    let c = canary.display();
    let texts = [
        format!("x; run-shell \"touch {c}\""),
        format!("x\nrun-shell 'touch {c}'"),
        format!("x\rrun-shell 'touch {c}'"),
        format!("x\r\nrun-shell 'touch {c}'\n"),
        format!("$(touch {c})"),
        format!("`touch {c}`"),
        "'\"\\".to_owned(),
        "\\".to_owned(),
        "\"".to_owned(),
        format!("\"; run-shell \"touch {c}\"; \""),
        format!("'; run-shell 'touch {c}'; '"),
        format!("\\\"; run-shell \\\"touch {c}\\\""),
        format!("{{ run-shell \"touch {c}\" }}"),
        format!("}} ; run-shell \"touch {c}\" ; {{"),
        format!("#(touch {c})"),
        "#{session_name} #{pane_id} ## #".to_owned(),
        format!("%if 1\nrun-shell \"touch {c}\"\n%endif"),
        format!("# comment\nrun-shell \"touch {c}\""),
        "~root ~/x $HOME ${HOME} $".to_owned(),
        "100% %H %% %Y-%m-%d %s".to_owned(),
        format!("-b x; run-shell \"touch {c}\""),
        format!("x;\\;run-shell \"touch {c}\";"),
        ";".to_owned(),
        String::new(),
        "\u{1b}[31mred\u{1b}[0m \u{7f} é".to_owned(),
    ];
    let mut all: Vec<Vec<u8>> = texts.into_iter().map(String::into_bytes).collect();
    all.push((1..=255).collect());
    all.push(b"\xff\xfe invalid utf-8 \xc3".to_vec());
    all
}

fn printable(p: &[u8]) -> bool {
    p.iter().all(|b| (0x20..0x7f).contains(b))
}

/// Waits for a legitimate `run-shell -b` to run, so an injected one (queued
/// earlier) has had its chance too, then checks the canary.
async fn assert_no_canary(server: &Server, dir: &Path, canary: &Path) {
    let sentinel = dir.join("sentinel");
    let touch = format!("touch '{}'", sentinel.display());
    let run = TmuxCommand::new("run-shell").flag("-b").format_arg(touch);
    server.run(&run).await.expect("run-shell");
    poll("the sentinel run-shell", WAIT, || async {
        sentinel.exists().then_some(())
    })
    .await;
    assert!(
        !canary.exists(),
        "a payload injected a command: {} exists",
        canary.display()
    );
    std::fs::remove_file(&sentinel).expect("remove sentinel");
}

/// set-buffer, save-buffer, display-message and send-keys with `p` as an
/// argument; `via_control` picks the connection.
async fn exercise(
    server: &Server,
    control: &mut Control,
    via_control: bool,
    i: usize,
    p: &[u8],
    dir: &Path,
) {
    let buffer = format!("inj{i}");
    let saved = dir.join(format!("saved{i}-{via_control}"));
    let cmds = [
        TmuxCommand::new("set-buffer").opt("-b", &buffer).arg(p),
        TmuxCommand::new("save-buffer")
            .opt("-b", &buffer)
            .arg(saved.as_os_str().as_encoded_bytes()),
        TmuxCommand::new("display-message")
            .flag("-p")
            .format_time_arg(p),
        TmuxCommand::new("send-keys")
            .target(server.first_pane().id)
            .flag("-l")
            .arg(p),
    ];
    let mut display = String::new();
    for cmd in cmds {
        // tmux creates no buffer for empty data (set-buffer succeeds and
        // does nothing), and typing nothing is nothing.
        if p.is_empty() && cmd.argv()[0] != "display-message" {
            continue;
        }
        assert!(!cmd.line().contains(['\n', '\r']));
        let reply = if via_control {
            let block = control.cmd(cmd.line()).await;
            assert!(block.ok, "{} failed: {}", cmd.line(), block.text());
            block.text()
        } else {
            server
                .run(&cmd)
                .await
                .unwrap_or_else(|e| panic!("{} failed: {e}", cmd.line()))
                .strip_suffix('\n')
                .map(str::to_owned)
                .unwrap_or_default()
        };
        if cmd.argv()[0] == "display-message" {
            display = reply;
        }
    }
    if p.is_empty() {
        assert_eq!(display, "", "display-message of an empty argument");
        return;
    }
    let got = std::fs::read(&saved).expect("saved buffer");
    assert_eq!(
        got,
        p,
        "set-buffer/save-buffer changed {:?}",
        String::from_utf8_lossy(p)
    );
    if printable(p) {
        assert_eq!(display.as_bytes(), p, "display-message changed the text");
    }
}

#[tokio::test]
async fn hostile_arguments_stay_arguments() {
    live(async |tmp| {
        let canary = tmp.path().join("CANARY");
        let server = start_server({
            // Raw mode, so typed control characters are not signals.
            opts(tmp.path()).command(sh_c("stty raw -echo; exec cat > /dev/null", &[]))
        })
        .await;
        let mut control = Control::attach(&server).await;
        for (i, p) in payloads(&canary).iter().enumerate() {
            exercise(&server, &mut control, true, i, p, tmp.path()).await;
            exercise(&server, &mut control, false, i, p, tmp.path()).await;
        }

        // Several arguments: in argv form tmux would end the command at
        // `x;` and run the rest as a new command.
        let c = canary.display().to_string();
        let keys = TmuxCommand::new("send-keys")
            .target(server.first_pane().id)
            .flag("-l")
            .arg("x;")
            .arg("run-shell")
            .arg(format!("touch {c}"));
        server.run(&keys).await.expect("send-keys via argv");
        let block = control.cmd(keys.line()).await;
        assert!(block.ok, "{}", block.text());

        // The reason for format_time_arg: display-message text is expanded
        // as a format and then by strftime.
        let plain = TmuxCommand::new("display-message")
            .flag("-p")
            .arg("#{session_name} %%");
        let block = control.cmd(plain.line()).await;
        assert_eq!(block.text(), "main %");

        assert_no_canary(&server, tmp.path(), &canary).await;
        control.close().await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn hostile_session_names_stay_names() {
    live(async |tmp| {
        let canary = tmp.path().join("CANARY");
        let c = canary.display();
        let names = [
            format!("x; run-shell \"touch {c}\""),
            format!("x$(touch {c})"),
            format!("{{ run-shell \"touch {c}\" }}"),
            format!("#(touch {c})"),
            format!("x' ; run-shell 'touch {c}"),
        ];
        for name in &names {
            let server = Server::start(tmux(), opts(tmp.path()).session(name.clone()))
                .await
                .unwrap_or_else(|e| panic!("starting {name:?}: {e}"));
            let has = TmuxCommand::new("has-session").target(server.session());
            server.run(&has).await.expect("has-session via argv");
            let mut control = Control::attach(&server).await;
            let block = control.cmd(has.line()).await;
            assert!(block.ok, "{}", block.text());
            let shown = TmuxCommand::new("display-message")
                .flag("-p")
                .target(format!("{}:", server.session()))
                .arg("#{session_name}");
            assert_eq!(control.cmd(shown.line()).await.text(), *name);
            assert_no_canary(&server, tmp.path(), &canary).await;
            control.close().await;
            server.kill().await.expect("kill");
        }
    })
    .await;
}
