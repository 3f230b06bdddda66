//! The `tmux-engine` command line.

fn main() {}
