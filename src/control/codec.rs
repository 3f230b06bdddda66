//! Frames the `tmux -C` byte stream into lines and folds reply blocks.
//!
//! STUB: being written; see the issue brief.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

use super::Event;

/// The control-mode decoder.
#[derive(Debug, Default)]
pub struct ControlCodec {}

impl ControlCodec {
    /// A codec with the default line limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the line limit.
    pub fn with_max_line_length(self, _max: usize) -> Self {
        self
    }
}

impl Decoder for ControlCodec {
    type Item = Event;
    type Error = std::io::Error;

    fn decode(&mut self, _src: &mut BytesMut) -> Result<Option<Event>, std::io::Error> {
        Ok(None)
    }
}
