//! `tmux-engine service install [--user] [-- SERVE FLAGS]` and `service
//! uninstall [--user]`: a systemd unit that runs `serve` at boot (or, with
//! `--user`, at login; with lingering, at boot too), so kept terminals
//! come back after a reboot (issue 26). The unit is text this module
//! builds (`unit_text`, sans-IO) and writes; enabling it is `systemctl`'s
//! job, run unless `--no-enable`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use tmux_engine::{Error, Result};

use super::args::Global;
use super::report::CliError;

/// The unit's file name.
pub(crate) const UNIT: &str = "tmux-engine.service";

/// The socket unit's file name: systemd holds the listening socket and
/// passes it to `serve` (`LISTEN_FDS`), so a restart refuses no connection
/// (they wait in the backlog for the next serve).
pub(crate) const SOCKET_UNIT: &str = "tmux-engine.socket";

/// `serve`'s default `--listen`, which the socket unit listens on when
/// the flags name none.
const DEFAULT_LISTEN: &str = "127.0.0.1:7681";

/// Splits `--listen ADDR` (or `--listen=ADDR`) out of `serve`'s flags:
/// the socket unit listens there, and `serve` takes that socket instead.
pub(crate) fn split_listen(flags: &[String]) -> (String, Vec<String>) {
    let mut listen = DEFAULT_LISTEN.to_owned();
    let mut rest = Vec::new();
    let mut words = flags.iter();
    while let Some(word) = words.next() {
        if word == "--listen" {
            if let Some(value) = words.next() {
                listen.clone_from(value);
            }
        } else if let Some(value) = word.strip_prefix("--listen=") {
            value.clone_into(&mut listen);
        } else {
            rest.push(word.clone());
        }
    }
    (listen, rest)
}

/// The socket unit's text for `serve --listen LISTEN`: `ADDR:PORT`, or
/// `unix:PATH` (created 0600, owned by `user` for a system unit).
pub(crate) fn socket_text(listen: &str, user: Option<&str>) -> String {
    let mut text = String::from(
        "[Unit]\n\
         Description=tmux-engine serve's listening socket (passed to serve: restarts refuse no connection)\n\n\
         [Socket]\n",
    );
    match listen.strip_prefix("unix:") {
        Some(path) => {
            text.push_str(&format!(
                "ListenStream={}\nSocketMode=0600\n",
                exec_word(path)
            ));
            if let Some(user) = user {
                text.push_str(&format!("SocketUser={user}\n"));
            }
        }
        None => text.push_str(&format!("ListenStream={listen}\nNoDelay=true\n")),
    }
    text.push_str(&format!(
        "Service={UNIT}\n\n\
         [Install]\n\
         WantedBy=sockets.target\n"
    ));
    text
}

/// `service`'s subcommands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum ServiceCommand {
    /// Write (and enable) a systemd unit running `serve` with these flags.
    Install(ServiceArgs),
    /// Disable and remove the unit.
    Uninstall(ServiceArgs),
}

/// Where the unit goes and what `serve` gets.
#[derive(Args, Debug, Clone)]
pub(crate) struct ServiceArgs {
    /// A user unit (~/.config/systemd/user), started at login (at boot
    /// with `loginctl enable-linger`), instead of a system one
    /// (/etc/systemd/system) run as this user.
    #[arg(long)]
    user: bool,
    /// Write the unit into this directory instead (no systemctl).
    #[arg(long, value_name = "DIR")]
    unit_dir: Option<PathBuf>,
    /// Do not run `systemctl enable --now` / `disable --now`.
    #[arg(long)]
    no_enable: bool,
    /// Flags for `serve` (after `--`); `--keep-history` is added unless
    /// given.
    #[arg(last = true)]
    serve: Vec<String>,
}

/// One word of `ExecStart=`, quoted as systemd reads it: `%` and `$` are
/// doubled, and a word with blanks, quotes or backslashes is put in double
/// quotes with `\` and `"` escaped.
pub(crate) fn exec_word(word: &str) -> String {
    let word = word.replace('%', "%%").replace('$', "$$");
    if word.is_empty()
        || word
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'))
    {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word
    }
}

/// The unit's text: `serve` from `binary` with `flags`, as `user` (a
/// system unit) or for the user manager (`user` is `None`), with the
/// state directory when one was named.
pub(crate) fn unit_text(
    binary: &Path,
    flags: &[String],
    user: Option<&str>,
    state_dir: Option<&Path>,
) -> String {
    let mut exec = vec![exec_word(&binary.to_string_lossy()), "serve".to_owned()];
    // The socket unit listens; serve takes its socket (LISTEN_FDS).
    let (_, flags) = split_listen(flags);
    let flags = flags.as_slice();
    exec.extend(flags.iter().map(|flag| exec_word(flag)));
    if !flags.iter().any(|flag| flag == "--keep-history") {
        exec.push("--keep-history".to_owned());
    }
    let mut text = format!(
        "[Unit]\n\
         Description=tmux-engine serve: persistent terminals, back after a reboot\n\
         After=network.target\n\
         Requires={SOCKET_UNIT}\n\
         After={SOCKET_UNIT}\n\n\
         [Service]\n\
         # serve says READY=1 once it serves, and pings the watchdog.\n\
         Type=notify\n\
         NotifyAccess=main\n\
         WatchdogSec=30\n\
         # SIGTERM drains: viewers get 1012, requests finish, within 10 s (+5 s).\n\
         TimeoutStopSec=20\n",
    );
    if let Some(user) = user {
        text.push_str(&format!("User={user}\n"));
    }
    if let Some(dir) = state_dir {
        text.push_str(&format!(
            "Environment={}\n",
            exec_word(&format!("TMUX_ENGINE_STATE_DIR={}", dir.display()))
        ));
    }
    text.push_str(&format!(
        "ExecStart={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         # Terminals outlive serve: stopping it leaves their servers running.\n\
         KillMode=process\n\n\
         [Install]\n\
         WantedBy={}\n",
        exec.join(" "),
        if user.is_some() {
            "multi-user.target"
        } else {
            "default.target"
        }
    ));
    text
}

/// Where the unit goes.
fn unit_dir(args: &ServiceArgs) -> Result<PathBuf> {
    if let Some(dir) = &args.unit_dir {
        return Ok(dir.clone());
    }
    if !args.user {
        return Ok(PathBuf::from("/etc/systemd/system"));
    }
    let env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| PathBuf::from(home).join(".config")))
        .map(|config| config.join("systemd/user"))
        .ok_or_else(|| Error::InvalidInput("no HOME for a user unit: pass --unit-dir".to_owned()))
}

/// Runs `systemctl [--user] ARGS`, reporting a failure as an error.
fn systemctl(user: bool, args: &[&str]) -> Result<()> {
    let mut command = std::process::Command::new("systemctl");
    if user {
        command.arg("--user");
    }
    let status = command
        .args(args)
        .status()
        .map_err(|error| Error::io("running systemctl", error))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::io(
            format!("systemctl {}", args.join(" ")),
            std::io::Error::other(format!("exited with {status}")),
        ))
    }
}

/// Installs or uninstalls the unit, printing its path.
///
/// # Errors
/// `INVALID_INPUT` without a place for a user unit, `IO` writing or
/// removing it or when `systemctl` fails.
pub(crate) fn run(
    global: &Global,
    command: ServiceCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let failed = |error| Error::io("writing the output", error);
    match command {
        ServiceCommand::Install(args) => {
            let dir = unit_dir(&args)?;
            let binary = std::env::current_exe()
                .map_err(|error| Error::io("finding this program", error))?;
            let user = (!args.user).then(|| {
                std::env::var("USER")
                    .ok()
                    .filter(|user| !user.is_empty())
                    .unwrap_or_else(|| rustix::process::getuid().as_raw().to_string())
            });
            let text = unit_text(
                &binary,
                &args.serve,
                user.as_deref(),
                global.state_dir.as_deref(),
            );
            std::fs::create_dir_all(&dir)
                .map_err(|error| Error::io(format!("creating {}", dir.display()), error))?;
            let (listen, _) = split_listen(&args.serve);
            let socket = dir.join(SOCKET_UNIT);
            std::fs::write(&socket, socket_text(&listen, user.as_deref()))
                .map_err(|error| Error::io(format!("writing {}", socket.display()), error))?;
            let path = dir.join(UNIT);
            std::fs::write(&path, text)
                .map_err(|error| Error::io(format!("writing {}", path.display()), error))?;
            if !args.no_enable && args.unit_dir.is_none() {
                systemctl(args.user, &["daemon-reload"])?;
                systemctl(args.user, &["enable", "--now", SOCKET_UNIT, UNIT])?;
            }
            writeln!(out, "{}", path.display()).map_err(failed)?;
            writeln!(out, "{}", socket.display()).map_err(failed)?;
        }
        ServiceCommand::Uninstall(args) => {
            let dir = unit_dir(&args)?;
            if !args.no_enable && args.unit_dir.is_none() {
                // Already disabled or never enabled is fine: the file goes.
                let _ = systemctl(args.user, &["disable", "--now", UNIT, SOCKET_UNIT]);
            }
            let path = dir.join(UNIT);
            for unit in [&path, &dir.join(SOCKET_UNIT)] {
                match std::fs::remove_file(unit) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => {
                        return Err(Error::io(format!("removing {}", unit.display()), error).into());
                    }
                }
            }
            if !args.no_enable && args.unit_dir.is_none() {
                let _ = systemctl(args.user, &["daemon-reload"]);
            }
            writeln!(out, "{}", path.display()).map_err(failed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_are_quoted_for_systemd() {
        assert_eq!(exec_word("--port"), "--port");
        assert_eq!(exec_word("a b"), "\"a b\"");
        assert_eq!(exec_word("50%"), "50%%");
        assert_eq!(exec_word("$HOME"), "$$HOME");
        assert_eq!(exec_word("say \"hi\""), "\"say \\\"hi\\\"\"");
    }

    #[test]
    fn a_user_unit_runs_serve_with_kept_history() {
        let text = unit_text(
            Path::new("/opt/te/tmux-engine"),
            &["--listen".to_owned(), "127.0.0.1:7681".to_owned()],
            None,
            Some(Path::new("/home/a/state")),
        );
        // The socket unit listens; serve takes its socket.
        assert!(text.contains("ExecStart=/opt/te/tmux-engine serve --keep-history\n"));
        assert!(text.contains("Type=notify\n") && text.contains("WatchdogSec="));
        assert!(text.contains("Requires=tmux-engine.socket\n"));
        assert!(text.contains("WantedBy=default.target\n"));
        assert!(text.contains("Environment=TMUX_ENGINE_STATE_DIR=/home/a/state\n"));
        assert!(!text.contains("User="));
        let system = unit_text(
            Path::new("/bin/te"),
            &["--keep-history".to_owned()],
            Some("a"),
            None,
        );
        assert!(system.contains("User=a\n"));
        assert!(system.contains("WantedBy=multi-user.target\n"));
        assert_eq!(system.matches("--keep-history").count(), 1);
    }

    #[test]
    fn the_socket_unit_listens_where_serve_was_told_to() {
        let flags = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let (listen, rest) = split_listen(&flags(&["--listen=[::1]:9", "--pool", "2"]));
        assert_eq!(
            (listen.as_str(), rest),
            ("[::1]:9", flags(&["--pool", "2"]))
        );
        let (listen, rest) = split_listen(&flags(&["--base-path", "/t"]));
        assert_eq!(
            (listen.as_str(), rest),
            ("127.0.0.1:7681", flags(&["--base-path", "/t"]))
        );
        let tcp = socket_text("127.0.0.1:7681", None);
        assert!(tcp.contains("ListenStream=127.0.0.1:7681\n"), "{tcp}");
        assert!(tcp.contains("Service=tmux-engine.service\n"), "{tcp}");
        let unix = socket_text("unix:/run/te/serve.sock", Some("a"));
        assert!(unix.contains("ListenStream=/run/te/serve.sock\nSocketMode=0600\nSocketUser=a\n"));
    }
}
