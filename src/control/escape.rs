//! `%output` byte escaping (tmux's `\ooo`) and vis-decoding of names.
//!
//! STUB: being written; see the issue brief.
