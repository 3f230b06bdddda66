//! The units' text, sans IO: the service unit running `serve` and the
//! socket unit holding its listening socket, every word quoted and escaped
//! for systemd, and the refusal of a secret among the flags. Apart from the
//! command (`mod.rs`) so that what a unit says is built and tested without
//! systemd, a home directory or a file written.

use std::path::Path;

use tmux_engine::{Error, Result};

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

/// A user name fit for `User=`: what useradd accepts, nothing that could
/// end the line or be read as a specifier.
pub(super) fn valid_user(user: &str) -> bool {
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
