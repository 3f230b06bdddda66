//! `src/control/` tested: the codec on recorded transcripts and arbitrary
//! bytes, and the control client against real tmux (pipelining, input as
//! a stream, the raw output path, letting go of an idle link).

mod client;
mod codec_fixtures;
mod codec_props;
mod direct_link;
mod idle_link;
mod input_stream;
mod raw_path;
