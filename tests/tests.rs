//! The one integration-test binary.

mod codec_fixtures;
mod codec_props;
mod decode_cli;
mod support;
