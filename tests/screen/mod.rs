//! `src/screen/` tested: the screen model against tmux.

mod screen_model;
