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
//!
//! This file is the command: where the units go, the checks that need the
//! system, staging, `systemd-analyze` and `systemctl`; the units' text is
//! `unit.rs`.

mod unit;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use tmux_engine::{Error, Result};

use self::unit::{
    SOCKET_UNIT, UNIT, refuse_secrets, socket_text, split_listen, unit_text, valid_user,
};
use super::args::Global;
use super::report::CliError;
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

/// Checks that `path` is fit to hold a secret: this user's own regular
/// file, closed to group and others. Returns its absolute path (systemd
/// wants one).
///
/// # Errors
/// `UNSAFE_FILE` when it is another user's or open to others, `IO` when
/// it cannot be read.
fn private_file(path: &Path) -> Result<PathBuf> {
    let context = || format!("reading environment file {}", path.display());
    let absolute = std::fs::canonicalize(path).map_err(|e| Error::io(context(), e))?;
    let meta = std::fs::metadata(&absolute).map_err(|e| Error::io(context(), e))?;
    if !meta.is_file() {
        return Err(Error::UnsafeFile {
            path: absolute,
            reason: "not a regular file".to_owned(),
        });
    }
    crate::cli::secret_file::check(&absolute, &meta)?;
    Ok(absolute)
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
