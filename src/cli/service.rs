//! `tmux-engine service install [--user] [-- SERVE FLAGS]` and `service
//! uninstall [--user]`: a systemd unit that runs `serve` at boot (or, with
//! `--user`, at login; with lingering, at boot too), so kept terminals
//! come back after a reboot. The unit is text this module
//! builds (`unit_text`, sans-IO) and writes; enabling it is `systemctl`'s
//! job, run unless `--no-enable`.
//!
//! The unit holds no secret: a `--token` among the flags is
//! refused, since the unit file, `systemctl show` (to every user) and
//! serve's `/proc/PID/cmdline` would all carry it; `--token-file` or an
//! `--environment-file` (0600, setting `TMUX_ENGINE_TOKEN`) take its place.
//! Every word is quoted and escaped, so no flag can add a line, the
//! service runs with `UMask=0077`, and the unit is checked by
//! `systemd-analyze verify` (where it exists) before it replaces the
//! installed one.

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
            // ListenStream= takes the rest of the line as it is (no
            // quotes): only specifiers are escaped; `install` refuses a
            // control character in it before the text is built.
            text.push_str(&format!(
                "ListenStream={}\nSocketMode=0600\n",
                path.replace('%', "%%")
            ));
            if let Some(user) = user {
                text.push_str(&format!("SocketUser={user}\n"));
            }
        }
        None => text.push_str(&format!(
            "ListenStream={}\nNoDelay=true\n",
            listen.replace('%', "%%")
        )),
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
    /// A file of `NAME=VALUE` lines the service reads at start
    /// (`EnvironmentFile=`), e.g. `TMUX_ENGINE_TOKEN=...`: this user's own,
    /// not readable by group or others (0600). The place for a secret,
    /// which the flags refuse.
    #[arg(long, value_name = "FILE")]
    environment_file: Option<PathBuf>,
    /// Flags for `serve` (after `--`); `--keep-history` is added unless
    /// given.
    #[arg(last = true)]
    serve: Vec<String>,
}

/// One word of `ExecStart=`, quoted as systemd reads it: always in
/// double quotes, `%` and `$` doubled (specifiers, variables), `\` and
/// `"` escaped, and every control character (a newline above all) written
/// as a C escape (`\n`, `\xNN`), which systemd unescapes: no word can
/// end its line.
pub(crate) fn exec_word(word: &str) -> String {
    quote(word, true)
}

/// One `Environment=` assignment, quoted like an `ExecStart=` word except
/// that `$` stays single (systemd expands no variables there).
fn env_word(assignment: &str) -> String {
    quote(assignment, false)
}

fn quote(word: &str, variables: bool) -> String {
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('"');
    for c in word.chars() {
        match c {
            '%' => quoted.push_str("%%"),
            '$' if variables => quoted.push_str("$$"),
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => {
                let mut buf = [0; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    quoted.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Refuses a secret among `serve`'s flags: in the unit it is readable by
/// whoever reads the file, in `ExecStart` `systemctl show` prints it to
/// every user, and serve's argv is in `/proc/PID/cmdline`.
///
/// # Errors
/// `INVALID_INPUT` naming `--token-file` and `--environment-file`.
pub(crate) fn refuse_secrets(flags: &[String]) -> Result<()> {
    if flags
        .iter()
        .any(|flag| flag == "--token" || flag.starts_with("--token="))
    {
        return Err(Error::InvalidInput(
            "refusing --token in a service unit: the unit, `systemctl show` and serve's \
             command line would show it to other users; pass --token-file FILE (0600) to \
             serve, or put TMUX_ENGINE_TOKEN=... in a 0600 file named by \
             `service install --environment-file FILE`"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Checks that `path` is fit to hold a secret: this user's own regular
/// file, closed to group and others. Returns its absolute path (systemd
/// wants one).
///
/// # Errors
/// `UNSAFE_FILE` when it is another user's or open to others, `IO` when
/// it cannot be read.
fn private_file(path: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let context = || format!("reading environment file {}", path.display());
    let absolute = std::fs::canonicalize(path).map_err(|e| Error::io(context(), e))?;
    let meta = std::fs::metadata(&absolute).map_err(|e| Error::io(context(), e))?;
    let unsafe_file = |reason: String| Error::UnsafeFile {
        path: absolute.clone(),
        reason,
    };
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() {
        return Err(unsafe_file("not a regular file".to_owned()));
    }
    if meta.uid() != me {
        return Err(unsafe_file(format!(
            "owned by uid {}, not by this user (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_file(format!(
            "mode {:o} lets group or others at it: chmod 600 it",
            meta.mode() & 0o777
        )));
    }
    Ok(absolute)
}

/// A user name fit for `User=`: what useradd accepts, nothing that could
/// end the line or be read as a specifier.
fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The unit's text: `serve` from `binary` with `flags`, as `user` (a
/// system unit) or for the user manager (`user` is `None`), with the
/// state directory when one was named.
pub(crate) fn unit_text(
    binary: &Path,
    flags: &[String],
    user: Option<&str>,
    state_dir: Option<&Path>,
    environment_file: Option<&Path>,
) -> String {
    let mut exec = vec![exec_word(&binary.to_string_lossy()), exec_word("serve")];
    // The socket unit listens; serve takes its socket (LISTEN_FDS).
    let (_, flags) = split_listen(flags);
    let flags = flags.as_slice();
    exec.extend(flags.iter().map(|flag| exec_word(flag)));
    if !flags.iter().any(|flag| flag == "--keep-history") {
        exec.push(exec_word("--keep-history"));
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
         TimeoutStopSec=20\n\
         # Files serve makes (uploads, histories, sockets) are its user's alone.\n\
         UMask=0077\n",
    );
    if let Some(user) = user {
        text.push_str(&format!("User={user}\n"));
    }
    if let Some(dir) = state_dir {
        text.push_str(&format!(
            "Environment={}\n",
            env_word(&format!("TMUX_ENGINE_STATE_DIR={}", dir.display()))
        ));
    }
    if let Some(file) = environment_file {
        // EnvironmentFile= takes the rest of the line as a path, unquoted:
        // `private_file` gave an absolute one; a control character in it is
        // refused by `install` before the text is built.
        text.push_str(&format!(
            "EnvironmentFile={}\n",
            file.display().to_string().replace('%', "%%")
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

/// Builds, checks and places the units (then enables them unless told
/// not to), returning their paths (service, socket). Both are written
/// beside their place in a private directory, verified there, and only
/// then renamed over the installed ones: a unit systemd would refuse
/// never replaces a good one.
fn install(global: &Global, args: &ServiceArgs) -> Result<(PathBuf, PathBuf)> {
    refuse_secrets(&args.serve)?;
    let dir = unit_dir(args)?;
    let binary =
        std::env::current_exe().map_err(|error| Error::io("finding this program", error))?;
    let user = if args.user {
        None
    } else {
        let user = std::env::var("USER")
            .ok()
            .filter(|user| !user.is_empty())
            .unwrap_or_else(|| rustix::process::getuid().as_raw().to_string());
        if !valid_user(&user) {
            return Err(Error::InvalidInput(format!(
                "USER {user:?} is not a user name systemd's User= can hold"
            )));
        }
        Some(user)
    };
    let environment_file = match &args.environment_file {
        Some(file) => {
            let file = private_file(file)?;
            if file.to_string_lossy().chars().any(char::is_control) {
                return Err(Error::InvalidInput(format!(
                    "environment file {:?}: a control character in its path",
                    file.display()
                )));
            }
            Some(file)
        }
        None => None,
    };
    let (listen, _) = split_listen(&args.serve);
    if listen.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::InvalidInput(format!(
            "--listen {listen:?}: a blank or control character"
        )));
    }
    let text = unit_text(
        &binary,
        &args.serve,
        user.as_deref(),
        global.state_dir.as_deref(),
        environment_file.as_deref(),
    );
    std::fs::create_dir_all(&dir)
        .map_err(|error| Error::io(format!("creating {}", dir.display()), error))?;
    let path = dir.join(UNIT);
    let socket = dir.join(SOCKET_UNIT);
    let staging = Staging::new(&dir)?;
    let staged = staging.0.join(UNIT);
    let staged_socket = staging.0.join(SOCKET_UNIT);
    write_private(&staged, &text)?;
    write_private(&staged_socket, &socket_text(&listen, user.as_deref()))?;
    verify(&staged)?;
    verify(&staged_socket)?;
    for (from, to) in [(&staged_socket, &socket), (&staged, &path)] {
        std::fs::rename(from, to)
            .map_err(|error| Error::io(format!("writing {}", to.display()), error))?;
    }
    drop(staging);
    if !args.no_enable && args.unit_dir.is_none() {
        systemctl(args.user, &["daemon-reload"])?;
        systemctl(args.user, &["enable", "--now", SOCKET_UNIT, UNIT])?;
    }
    Ok((path, socket))
}

/// A private directory beside the unit's place, removed with what is
/// left in it.
struct Staging(PathBuf);

impl Staging {
    fn new(dir: &Path) -> Result<Staging> {
        use std::os::unix::fs::DirBuilderExt;
        let path = dir.join(format!(".tmux-engine-unit-{}", std::process::id()));
        // A leftover of an earlier run of this pid: ours to clear.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|error| Error::io(format!("creating {}", path.display()), error))?;
        Ok(Staging(path))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `text` to a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let context = || format!("writing {}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| Error::io(context(), error))?;
    file.write_all(text.as_bytes())
        .map_err(|error| Error::io(context(), error))
}

/// Runs `systemd-analyze verify` on the unit where the tool exists: a
/// unit it rejects is an error, never a reported success.
fn verify(unit: &Path) -> Result<()> {
    let output = match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(Error::io("running systemd-analyze verify", error)),
    };
    if output.status.success() {
        return Ok(());
    }
    Err(Error::InvalidInput(format!(
        "systemd-analyze verify rejects the unit ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// Installs or uninstalls the unit, printing its path.
///
/// # Errors
/// `INVALID_INPUT` without a place for a user unit, for a `--token` among
/// the flags or a unit `systemd-analyze verify` rejects; `UNSAFE_FILE`
/// for an environment file others can read; `IO` writing or removing it
/// or when `systemctl` fails.
pub(crate) fn run(
    global: &Global,
    command: ServiceCommand,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let failed = |error| Error::io("writing the output", error);
    match command {
        ServiceCommand::Install(args) => {
            let (path, socket) = install(global, &args)?;
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_are_quoted_for_systemd() {
        assert_eq!(exec_word("--port"), "\"--port\"");
        assert_eq!(exec_word("a b"), "\"a b\"");
        assert_eq!(exec_word("50%"), "\"50%%\"");
        assert_eq!(exec_word("$HOME"), "\"$$HOME\"");
        assert_eq!(exec_word("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(exec_word("a\\b"), "\"a\\\\b\"");
        assert_eq!(exec_word(""), "\"\"");
    }

    /// A flag with a newline once wrote its own line into the
    /// unit; now it is one escaped word on the `ExecStart=` line.
    #[test]
    fn no_word_can_add_a_line() {
        let evil = "x\n[Service]\nExecStartPre=/bin/rm -rf /\r\u{7}";
        assert_eq!(
            exec_word(evil),
            "\"x\\n[Service]\\nExecStartPre=/bin/rm -rf /\\x0d\\x07\""
        );
        let text = unit_text(
            Path::new("/bin/te"),
            &[evil.to_owned()],
            None,
            Some(Path::new("/s\n[Install]")),
            None,
        );
        assert_eq!(text.matches("[Service]\n").count(), 1, "{text}");
        assert_eq!(text.matches("[Install]\n").count(), 1, "{text}");
        assert!(!text.contains("\nExecStartPre"), "{text}");
    }

    #[test]
    fn a_token_on_the_command_line_is_refused() {
        for flags in [
            vec!["--token".to_owned(), "s3cret".to_owned()],
            vec!["--token=s3cret".to_owned()],
        ] {
            let error = refuse_secrets(&flags).unwrap_err();
            let text = error.to_string();
            assert!(text.contains("--token-file"), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        refuse_secrets(&["--token-file".to_owned(), "/x".to_owned()]).unwrap();
    }

    #[test]
    fn a_user_unit_runs_serve_with_kept_history() {
        let text = unit_text(
            Path::new("/opt/te/tmux-engine"),
            &["--listen".to_owned(), "127.0.0.1:7681".to_owned()],
            None,
            Some(Path::new("/home/a/$state")),
            Some(Path::new("/home/a/serve.env")),
        );
        // The socket unit listens; serve takes its socket.
        assert!(
            text.contains("ExecStart=\"/opt/te/tmux-engine\" \"serve\" \"--keep-history\"\n"),
            "{text}"
        );
        assert!(text.contains("Type=notify\n") && text.contains("WatchdogSec="));
        assert!(text.contains("Requires=tmux-engine.socket\n"));
        assert!(text.contains("WantedBy=default.target\n"));
        assert!(text.contains("Environment=\"TMUX_ENGINE_STATE_DIR=/home/a/$state\"\n"));
        assert!(text.contains("EnvironmentFile=/home/a/serve.env\n"));
        assert!(text.contains("UMask=0077\n"));
        assert!(!text.contains("User="));
        let system = unit_text(
            Path::new("/bin/te"),
            &["--keep-history".to_owned()],
            Some("a"),
            None,
            None,
        );
        assert!(system.contains("User=a\n"));
        assert!(system.contains("WantedBy=multi-user.target\n"));
        assert_eq!(system.matches("--keep-history").count(), 1);
        assert!(!system.contains("EnvironmentFile"));
    }

    #[test]
    fn user_names_are_checked() {
        assert!(valid_user("alice"));
        assert!(valid_user("build-bot_2.x"));
        assert!(!valid_user(""));
        assert!(!valid_user("a\nExecStart=/x"));
        assert!(!valid_user("%h"));
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
