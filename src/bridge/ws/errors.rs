//! How a WebSocket session's failures map to its close: a send that
//! failed, a read that broke (by tungstenite's typed error, never its
//! text).

use tracing::debug;

use super::{BUDGET_SPENT, End, MAX_CLIENT_MESSAGE};
use crate::bridge::frames::close;

/// A failed send: a full write buffer is the budget spent (1008); any
/// other failure is a connection gone.
pub(super) fn send_error(error: axum::Error) -> End {
    match error.into_inner().downcast::<tungstenite::Error>() {
        Ok(error) if matches!(*error, tungstenite::Error::WriteBufferFull(_)) => {
            End::Close(close::POLICY, BUDGET_SPENT.to_owned())
        }
        _ => End::ClientGone,
    }
}

/// A broken read, by tungstenite's typed error (axum boxes it): a
/// too-large message closes 1009, a text frame that is not UTF-8 1007,
/// any other protocol violation 1002; a broken connection has no one to
/// tell.
pub(super) fn client_error(error: axum::Error) -> End {
    use tungstenite::error::ProtocolError;
    let error = match error.into_inner().downcast::<tungstenite::Error>() {
        Ok(error) => *error,
        Err(other) => {
            debug!(error = %other, "websocket read failed");
            return End::ClientGone;
        }
    };
    match error {
        tungstenite::Error::Capacity(_) => End::Close(
            close::TOO_BIG,
            format!("message larger than {MAX_CLIENT_MESSAGE} bytes"),
        ),
        tungstenite::Error::Utf8(_) => {
            End::Close(close::INVALID_DATA, "text frame is not UTF-8".to_owned())
        }
        // The peer closed TCP without a close frame: it is gone.
        tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
            End::ClientGone
        }
        tungstenite::Error::Protocol(violation) => {
            End::Close(close::PROTOCOL_ERROR, violation.to_string())
        }
        tungstenite::Error::AttackAttempt => {
            End::Close(close::PROTOCOL_ERROR, "attack attempt".to_owned())
        }
        other => {
            debug!(error = %other, "websocket read failed");
            End::ClientGone
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(error: tungstenite::Error) -> Option<u16> {
        match client_error(axum::Error::new(error)) {
            End::Close(code, _) => Some(code),
            End::ClientGone | End::ClientClosed => None,
        }
    }

    #[test]
    fn read_errors_map_to_close_codes_by_type() {
        use tungstenite::error::{CapacityError, ProtocolError};
        let cases = [
            (
                tungstenite::Error::Utf8("bad".into()),
                Some(close::INVALID_DATA),
            ),
            (
                tungstenite::Error::Capacity(CapacityError::MessageTooLong {
                    size: 2,
                    max_size: 1,
                }),
                Some(close::TOO_BIG),
            ),
            (
                tungstenite::Error::Protocol(ProtocolError::NonZeroReservedBits),
                Some(close::PROTOCOL_ERROR),
            ),
            (
                tungstenite::Error::Protocol(ProtocolError::UnmaskedFrameFromClient),
                Some(close::PROTOCOL_ERROR),
            ),
            (
                tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake),
                None,
            ),
            (tungstenite::Error::ConnectionClosed, None),
            (
                tungstenite::Error::Io(std::io::ErrorKind::BrokenPipe.into()),
                None,
            ),
        ];
        for (error, want) in cases {
            let shown = error.to_string();
            assert_eq!(code(error), want, "{shown}");
        }
    }
}
