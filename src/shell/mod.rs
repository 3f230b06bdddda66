//! Shell integration: the engine starts bash, zsh, POSIX `sh` and fish
//! with a small rc of its own that sources the user's usual one (fish
//! reads its own first) and then makes the shell mark its prompts and
//! commands with OSC 133 (`A` prompt
//! start, `B` prompt end, `C` command start, `D;status` command end), as
//! VS Code, iTerm2, WezTerm and kitty read them. The marks arrive in the
//! pane's byte stream before any terminal emulation ([`marks`] finds
//! them), so a send can return exactly a command's output and its exit
//! status. The rc also keeps commands typed with a leading space out of
//! the history (`HISTCONTROL=ignorespace`, `HIST_IGNORE_SPACE`), which is
//! how `history: false` sends stay out of it (fish keeps them out by
//! itself).
//!
//! Which shell a terminal runs is chosen per spawn: the spawn's `SHELL`
//! in its `env` ([`find_shell`]), else the engine's pinned shell.
//!
//! | file       | job                                                    |
//! |------------|--------------------------------------------------------|
//! | `mod.rs`   | which shells, the rc files, the argv and environment   |
//! | `marks.rs` | finding OSC 133 marks in a byte stream                 |
//! | `span.rs`  | a command the marks delimit: its span, its echo        |
//! | `literal.rs` | text typed at a prompt as its bytes, never as keys   |

pub mod literal;
pub mod marks;
pub mod span;
pub mod tracker;

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A shell the engine can integrate with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellKind {
    /// GNU bash (`--rcfile`; `PROMPT_COMMAND`, `PS0`).
    Bash,
    /// zsh (`ZDOTDIR`; `precmd`, `preexec`).
    Zsh,
    /// A POSIX sh such as dash (`ENV`; the marks live in `PS1`, so there
    /// is no `C` mark: a command's output is what follows its echo).
    Sh,
    /// fish 3.x (`--init-command`; the `fish_prompt`, `fish_preexec`,
    /// `fish_postexec` and `fish_cancel` events, `B` after `fish_prompt`).
    Fish,
}

impl ShellKind {
    /// The kind of the shell at `path`, by its file name (`bash`, `zsh`,
    /// `sh`, `dash`, `ash`, `fish`); `None` for any other (tcsh, a REPL,
    /// ...).
    pub fn of(path: &Path) -> Option<ShellKind> {
        match path.file_name()?.to_str()? {
            "bash" => Some(ShellKind::Bash),
            "zsh" => Some(ShellKind::Zsh),
            "sh" | "dash" | "ash" => Some(ShellKind::Sh),
            "fish" => Some(ShellKind::Fish),
            _ => None,
        }
    }
}

/// The shell a spawn's `SHELL` names: an absolute path to an executable
/// file, or a name found in the engine's `PATH` (`zsh`). This is how a
/// spawn picks its interactive shell on every face (MCP, HTTP, the CLI's
/// `--env SHELL=...`, the library's `SpawnSpec::env`).
///
/// # Errors
/// `INVALID_INPUT` when it names no executable file.
pub fn find_shell(named: &str) -> Result<PathBuf> {
    let path = Path::new(named);
    let found = if path.is_absolute() {
        let executable = rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok();
        (path.is_file() && executable).then(|| path.to_owned())
    } else if named.contains('/') || named.is_empty() {
        None
    } else {
        which::which(named).ok()
    };
    found.ok_or_else(|| {
        Error::InvalidInput(format!(
            "env SHELL {named:?} is no executable shell (an absolute path, or a name in PATH)"
        ))
    })
}

/// The user's shell, as tmux itself picks it (`getshell`): `$SHELL` when
/// it names an absolute executable file, else the login shell the user's
/// `/etc/passwd` entry names, else `/bin/sh`. Without the fallbacks a
/// process started with no `$SHELL` (a CI runner, a systemd unit, `env -i`)
/// would leave the choice to tmux, which takes the same login shell but
/// without the engine's integration, so no send would see a mark.
/// (`/etc/passwd` is read as a file: accounts only NSS knows, LDAP say,
/// get `/bin/sh` rather than their shell.)
pub fn user_shell() -> PathBuf {
    let usable = |path: PathBuf| {
        let executable = rustix::fs::access(&path, rustix::fs::Access::EXEC_OK).is_ok();
        (path.is_absolute() && path.is_file() && executable).then_some(path)
    };
    if let Some(shell) = std::env::var_os("SHELL")
        .map(PathBuf::from)
        .and_then(usable)
    {
        return shell;
    }
    let uid = rustix::process::getuid().as_raw();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| login_shell(&passwd, uid))
        .and_then(usable)
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The shell field of `uid`'s line in a `passwd(5)` text.
fn login_shell(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let [_, _, id, _, _, _, shell] = fields[..] else {
            return None;
        };
        (id.parse() == Ok(uid) && !shell.is_empty()).then(|| PathBuf::from(shell))
    })
}

/// How to start an integrated shell: its argv and the environment it adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Integration {
    /// The shell and its arguments.
    pub words: Vec<OsString>,
    /// Variables to set for it (`ZDOTDIR`, `ENV`).
    pub env: Vec<(String, String)>,
}

/// Where the rc files of a registry with runtime directory `runtime` go:
/// beside it, `tmux-engine-shell-UID`. Their text is the same for every
/// terminal, so one directory serves all and nothing is left per
/// terminal (the runtime directory itself holds only servers).
pub fn rc_dir(runtime: &Path) -> PathBuf {
    let uid = rustix::process::getuid().as_raw();
    runtime
        .parent()
        .unwrap_or(runtime)
        .join(format!("tmux-engine-shell-{uid}"))
}

/// Writes the rc files for `shell` into `dir` (created 0700 if missing,
/// and refused unless it is ours and private, as it holds code the shell
/// runs; each file replaced whole, so a shell starting meanwhile never
/// reads half of one) and returns how to start it; `None` when `shell` is
/// not one the engine integrates with.
///
/// # Errors
/// `UNSAFE_DIRECTORY` when `dir` is not private, `IO` when it or a file
/// cannot be written.
pub fn prepare(shell: &Path, dir: &Path) -> Result<Option<Integration>> {
    let Some(kind) = ShellKind::of(shell) else {
        return Ok(None);
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    crate::tmux::dirs::check_private(dir)?;
    let path = |name: &str| -> PathBuf { dir.join(name) };
    let text = |path: &Path| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::InvalidInput(format!("{} is not UTF-8", path.display())))
    };
    let program = shell.as_os_str().to_owned();
    let integration = match kind {
        ShellKind::Bash => {
            let rc = path("bashrc");
            write_private(&rc, BASH_RC)?;
            Integration {
                words: vec![program, "--rcfile".into(), rc.into_os_string(), "-i".into()],
                env: Vec::new(),
            }
        }
        ShellKind::Zsh => {
            write_private(&path(".zshenv"), ZSH_ENV)?;
            write_private(&path(".zshrc"), ZSH_RC)?;
            Integration {
                words: vec![program, "-i".into()],
                env: vec![("ZDOTDIR".to_owned(), text(dir)?)],
            }
        }
        ShellKind::Sh => {
            let rc = path("shrc");
            write_private(&rc, SH_RC)?;
            Integration {
                words: vec![program, "-i".into()],
                env: vec![("ENV".to_owned(), text(&rc)?)],
            }
        }
        ShellKind::Fish => {
            // After the user's config.fish (fish reads it first), so the
            // prompt wrapped is theirs.
            let rc = path("rc.fish");
            write_private(&rc, FISH_RC)?;
            let init = format!("source {}", fish_quote(&text(&rc)?));
            Integration {
                words: vec![program, "-i".into(), "-C".into(), init.into()],
                env: Vec::new(),
            }
        }
    };
    Ok(Some(integration))
}

/// `text` as one fish word: single quotes, `\\` and `'` escaped (the only
/// escapes fish reads inside them).
fn fish_quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Writes `text` to `path` (0600) through a temporary file and a rename.
fn write_private(path: &Path, text: &str) -> Result<()> {
    if std::fs::read(path).is_ok_and(|held| held == text.as_bytes()) {
        return Ok(());
    }
    let failed = |e| Error::io(format!("writing {}", path.display()), e);
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// `te-download FILE`, in every rc (POSIX sh, so one text serves bash, zsh
/// and dash; an alias, since dash takes no `-` in a function's name):
/// prints an OSC 8 link to the file (`file://` and its absolute path, `%`,
/// space, `#`, `?` and `\` escaped), which the page turns into a download
/// of it (`web/files.js`); a name with control characters is refused, as
/// it would end the escape sequence early.
macro_rules! te_download {
    () => {
        r#"__te_download() {
  if [ "$#" -ne 1 ]; then echo 'usage: te-download FILE' >&2; return 2; fi
  case $1 in /*) __te_p=$1 ;; *) __te_p=$PWD/$1 ;; esac
  if [ ! -f "$__te_p" ]; then printf 'te-download: %s: no such regular file\n' "$1" >&2; unset __te_p; return 1; fi
  if [ "$(printf '%s' "$__te_p" | tr -d '\040-\176\200-\377'; echo x)" != x ]; then printf 'te-download: %s: control characters in the name\n' "$1" >&2; unset __te_p; return 1; fi
  __te_u=$(printf '%s' "$__te_p" | sed 's/%/%25/g; s/ /%20/g; s/#/%23/g; s/?/%3F/g; s/\\/%5C/g')
  printf '\033]8;;file://%s\033\\%s\033]8;;\033\\\n' "$__te_u" "${__te_p##*/}"
  unset __te_p __te_u
}
alias te-download=__te_download
"#
    };
}

/// bash: the user's rc as bash would read it, then the marks. `D` and
/// `A` (with the working directory as OSC 7 between them, its host left
/// empty: this machine) come from `PROMPT_COMMAND` (first, so `$?` is the command's), `B`
/// ends `PS1`, `C` is `PS0` (printed once a command line is read). `C` and
/// `D` carry `EPOCHREALTIME` (bash 5+; empty before, which reads as no
/// time), `PS0`'s expanded as it is printed.
const BASH_RC: &str = concat!(
    r#"# tmux-engine shell integration (bash); see docs/shell-integration.md
[ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
[ -r "$HOME/.bashrc" ] && . "$HOME/.bashrc"
case ":$HISTCONTROL:" in *:ignorespace:*|*:ignoreboth:*) ;; *) HISTCONTROL="ignorespace${HISTCONTROL:+:$HISTCONTROL}" ;; esac
__tmux_engine_prompt() { local s=$?; printf '\033]133;D;%s;t=%s\007\033]7;file://%s\007\033]133;A\007' "$s" "$EPOCHREALTIME" "$PWD"; return $s; }
PROMPT_COMMAND="__tmux_engine_prompt${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
PS1="${PS1}\[\033]133;B\007\]"
PS0="${PS0}\033]133;C;t=\${EPOCHREALTIME}\007"
"#,
    te_download!()
);

/// zsh: `ZDOTDIR` points here for the engine's files, and back at the
/// user's for theirs.
const ZSH_ENV: &str = r#"# tmux-engine shell integration (zsh); see docs/shell-integration.md
__tmux_engine_dir="$ZDOTDIR"
ZDOTDIR="${__tmux_engine_user_zdotdir:-$HOME}"
[ -r "$ZDOTDIR/.zshenv" ] && . "$ZDOTDIR/.zshenv"
__tmux_engine_user_zdotdir="$ZDOTDIR"
ZDOTDIR="$__tmux_engine_dir"
"#;

const ZSH_RC: &str = concat!(
    r#"# tmux-engine shell integration (zsh); see docs/shell-integration.md
ZDOTDIR="$__tmux_engine_user_zdotdir"
[ -r "$ZDOTDIR/.zshrc" ] && . "$ZDOTDIR/.zshrc"
setopt HIST_IGNORE_SPACE
zmodload -F zsh/datetime p:EPOCHREALTIME 2>/dev/null
__tmux_engine_precmd() { local s=$?; printf '\033]133;D;%s;t=%s\007\033]7;file://%s\007\033]133;A\007' "$s" "$EPOCHREALTIME" "$PWD"; return $s; }
__tmux_engine_preexec() { printf '\033]133;C;t=%s\007' "$EPOCHREALTIME"; }
typeset -ga precmd_functions preexec_functions
precmd_functions=(__tmux_engine_precmd $precmd_functions)
preexec_functions+=(__tmux_engine_preexec)
PS1="${PS1}%{$(printf '\033]133;B\007')%}"
"#,
    te_download!()
);

/// POSIX sh: the user's `$HOME/.shrc` (what `ENV` would have named), then
/// the marks in `PS1`, whose `$?` dash and others expand, and a `B` after
/// `PS2`: with no `C` mark, that is how the engine knows a continuation
/// prompt (printed as a heredoc or loop is read) is not a command's output.
const SH_RC: &str = concat!(
    r#"# tmux-engine shell integration (POSIX sh); see docs/shell-integration.md
[ -r "$HOME/.shrc" ] && . "$HOME/.shrc"
__te_esc=$(printf '\033'); __te_bel=$(printf '\007')
PS1="${__te_esc}]133;D;\$?${__te_bel}${__te_esc}]7;file://\${PWD}${__te_bel}${__te_esc}]133;A${__te_bel}${PS1:-\$ }${__te_esc}]133;B${__te_bel}"
PS2="${PS2-> }${__te_esc}]133;B${__te_bel}"
unset __te_esc __te_bel
"#,
    te_download!()
);

/// fish 3.x: the user's config is read already (`--init-command` runs
/// after it). `D;status` from `fish_postexec` (whose `$status` is the
/// command's) and `fish_cancel` (Ctrl-C at the prompt: no command), OSC 7
/// and `A` from the `fish_prompt` event (before the prompt is drawn), `B`
/// from a `fish_prompt` wrapping the user's, `C` from `fish_preexec`.
/// fish keeps lines typed with a leading space out of its history itself.
/// An empty line runs no command and fires neither exec event: `A B`
/// follow the last `D` with no `C`, which the tracker reads as no command.
const FISH_RC: &str = r#"# tmux-engine shell integration (fish); see docs/shell-integration.md
function __tmux_engine_postexec --on-event fish_postexec
    printf '\e]133;D;%s;d=%s\a' $status $CMD_DURATION
end
function __tmux_engine_cancel --on-event fish_cancel
    printf '\e]133;D;130\a'
end
function __tmux_engine_prompt --on-event fish_prompt
    printf '\e]7;file://%s\a\e]133;A\a' $PWD
end
function __tmux_engine_preexec --on-event fish_preexec
    printf '\e]133;C\a'
end
if functions -q fish_prompt
    functions -c fish_prompt __tmux_engine_user_prompt
else
    function __tmux_engine_user_prompt
        printf '%s> ' (prompt_pwd)
    end
end
function fish_prompt
    __tmux_engine_user_prompt
    printf '\e]133;B\a'
end
function te-download --description 'te-download FILE: a download link to FILE'
    if test (count $argv) -ne 1
        echo 'usage: te-download FILE' >&2
        return 2
    end
    set -l p $argv[1]
    string match -q -- '/*' $p; or set p $PWD/$p
    if not test -f $p
        printf 'te-download: %s: no such regular file\n' $argv[1] >&2
        return 1
    end
    if string match -qr -- '[[:cntrl:]]' $p
        printf 'te-download: %s: control characters in the name\n' $argv[1] >&2
        return 1
    end
    set -l u (string replace -a -- '%' '%25' $p | string replace -a -- ' ' '%20' | string replace -a -- '#' '%23' | string replace -a -- '?' '%3F' | string replace -a -- '\\' '%5C')
    printf '\e]8;;file://%s\e\\\\%s\e]8;;\e\\\\\n' $u (basename -- $p)
end
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_login_shell_is_read_from_the_users_passwd_line() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # a comment\n\
                      svc:x:998:998::/nonexistent:\n\
                      ada:x:1000:1000:Ada,,,:/home/ada:/usr/bin/zsh\n";
        assert_eq!(login_shell(passwd, 0), Some(PathBuf::from("/bin/bash")));
        assert_eq!(
            login_shell(passwd, 1000),
            Some(PathBuf::from("/usr/bin/zsh"))
        );
        // No shell field: the caller's fallback, not an empty path.
        assert_eq!(login_shell(passwd, 998), None);
        assert_eq!(login_shell(passwd, 4242), None);
    }

    #[test]
    fn fish_words_are_quoted() {
        assert_eq!(fish_quote("/a b/c"), "'/a b/c'");
        assert_eq!(fish_quote(r"it's\x"), r"'it\'s\\x'");
    }

    #[test]
    fn a_spawns_shell_is_a_path_or_a_name_in_path() {
        assert_eq!(find_shell("/bin/sh").unwrap(), PathBuf::from("/bin/sh"));
        assert!(find_shell("sh").unwrap().is_absolute());
        for bad in [
            "/nonexistent/zsh",
            "no-such-shell-here",
            "bin/sh",
            "",
            "/tmp",
        ] {
            let error = find_shell(bad).unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad}");
        }
    }

    #[test]
    fn known_shells_get_files_others_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("shell");
        assert_eq!(prepare(Path::new("/usr/bin/tcsh"), &dir).unwrap(), None);
        assert!(!dir.exists());
        let fish = prepare(Path::new("/usr/bin/fish"), &dir).unwrap().unwrap();
        let rc = dir.join("rc.fish");
        assert_eq!(fish.words[1..3], ["-i", "-C"]);
        assert_eq!(fish.words[3], format!("source '{}'", rc.display()).as_str());
        let bash = prepare(Path::new("/bin/bash"), &dir).unwrap().unwrap();
        assert_eq!(bash.words[1], "--rcfile");
        let sh = prepare(Path::new("/bin/dash"), &dir).unwrap().unwrap();
        assert_eq!(sh.env[0].0, "ENV");
        let zsh = prepare(Path::new("/usr/bin/zsh"), &dir).unwrap().unwrap();
        assert_eq!(zsh.env[0].0, "ZDOTDIR");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let mode = std::fs::metadata(dir.join("bashrc"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
