//! The shells VHS knows, started as VHS starts them (its `shell.go`): the
//! same arguments and the same prompt, so a tape's screen is VHS's screen
//! and the same on every machine. A shell's own default prompt shows the
//! host name, the user or the working directory (zsh's `%m%# `, fish's
//! `user@host cwd>` and its greeting), and `/bin/bash` would be `$0`:
//! none of that belongs on a golden screen.

use crate::fixture::{Fixture, FixtureBuilder};

/// VHS's prompt colour, `#5B56E0`.
const BASH_PS1: &str = "\\[\\e[38;2;90;86;224m\\]> \\[\\e[0m\\]";
const ZSH_PROMPT: &str = "%F{#5B56E0}> %F{reset_color}";
const FISH_NO_GREETING: &str = "function fish_greeting; end";
const FISH_PROMPT: &str =
    "function fish_prompt; set_color 5B56E0; echo -n \"> \"; set_color normal; end";

/// How VHS starts a shell: its argv (found on `PATH`, so `$0` is the bare
/// name, as VHS gives it) and environment.
struct Known {
    argv: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// The shells VHS knows, by name.
const KNOWN: &[Known] = &[
    Known {
        argv: &["bash", "--noprofile", "--norc", "--login", "+o", "history"],
        env: &[("PS1", BASH_PS1), ("BASH_SILENCE_DEPRECATION_WARNING", "1")],
    },
    Known {
        argv: &["zsh", "--histnostore", "--no-rcs"],
        env: &[("PROMPT", ZSH_PROMPT)],
    },
    Known {
        argv: &[
            "fish",
            "--login",
            "--no-config",
            "--private",
            "-C",
            FISH_NO_GREETING,
            "-C",
            FISH_PROMPT,
        ],
        env: &[],
    },
];

fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.argv[0] == name)
}

/// The fixture for `Set Shell shell`: a shell VHS knows as VHS starts it,
/// `sh` as the fixture's pinned `sh -i`, a command line through `sh -c
/// 'exec ...'`, any other word as a program on `PATH`.
pub(crate) fn builder(shell: &str) -> FixtureBuilder {
    if let Some(Known { argv, env }) = known(shell) {
        let mut builder = Fixture::builder(argv[0]).args(argv[1..].iter().copied());
        for &(key, value) in *env {
            builder = builder.env(key, value);
        }
        return builder;
    }
    match shell {
        "sh" => Fixture::sh(),
        _ if shell.contains(char::is_whitespace) => Fixture::script(format!("exec {shell}")),
        _ => Fixture::builder(shell),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vhs_shells_start_by_name_with_vhs_prompts() {
        let bash = known("bash").expect("bash");
        // `$0` is the word tmux executes: the bare name, as in VHS.
        assert_eq!(bash.argv[0], "bash");
        assert!(bash.env.contains(&("PS1", BASH_PS1)));
        let fish = known("fish").expect("fish");
        assert!(fish.argv.contains(&FISH_NO_GREETING) && fish.argv.contains(&"--private"));
        assert_eq!(known("zsh").expect("zsh").env, &[("PROMPT", ZSH_PROMPT)]);
        assert!(known("nu").is_none());
    }
}
