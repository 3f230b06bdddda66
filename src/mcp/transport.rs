//! The line transport `mcp` serves on (stdio): one JSON-RPC message per
//! line, as rmcp's own, with two differences that bound a client that
//! floods it and tell it what went wrong:
//!
//! - at most `MAX_IN_FLIGHT` requests are unanswered at once: until one
//!   is answered (its answer written out), no further line is read, so a
//!   client that pipelines 200,000 calls waits in its pipe, not in this
//!   process's memory (rmcp spawns a task per request it reads);
//! - a line that is not JSON is answered with JSON-RPC's parse error
//!   (`-32700`, no id), and JSON that is not a message with invalid
//!   request (`-32600`, with its id when it has one); rmcp drops the first
//!   silently.
//!
//! A line longer than `MAX_LINE` is dropped unread (answered `-32600`).
//! No tool logic here.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests read but not yet answered, at most.
pub(crate) const MAX_IN_FLIGHT: usize = 32;

/// The longest line read (one message); a `send`'s text is the big one.
pub(crate) const MAX_LINE: usize = 4 << 20;

/// The UTF-8 byte order mark some clients put before a line.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// A line transport over a reader and a writer (stdin, stdout).
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of an oversized line.
    discarding: bool,
    write: Arc<tokio::sync::Mutex<W>>,
    /// One permit per request that may be in flight.
    slots: Arc<Semaphore>,
    /// The permit the next request will take (kept across a cancelled
    /// `receive`, which the service loop polls in a `select!`).
    held: Option<OwnedSemaphorePermit>,
    /// The ids of the requests in flight: answering one frees its slot.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading `read` and writing `write`.
    pub fn new(read: R, write: W) -> LineTransport<R, W> {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: Arc::new(tokio::sync::Mutex::new(write)),
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            held: None,
            in_flight: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// One line into `self.line`, never past [`MAX_LINE`]: `Some(true)`
    /// for a line, `Some(false)` for one too long (dropped), `None` at the
    /// end or on an error. Cancellation-safe: what was read stays in
    /// `self.line`.
    async fn read_line(&mut self) -> Option<bool> {
        loop {
            let (taken, done) = {
                let available = self.read.fill_buf().await.ok()?;
                if available.is_empty() {
                    return None;
                }
                let newline = available.iter().position(|&b| b == b'\n');
                let take = newline.map_or(available.len(), |at| at + 1);
                if !self.discarding && self.line.len() + take > MAX_LINE {
                    self.line.clear();
                    self.discarding = true;
                }
                if !self.discarding {
                    self.line.extend_from_slice(&available[..take]);
                }
                (take, newline.is_some())
            };
            self.read.consume(taken);
            if done {
                let whole = !self.discarding;
                self.discarding = false;
                return Some(whole);
            }
        }
    }

    /// Writes one message and its newline.
    async fn write(
        write: Arc<tokio::sync::Mutex<W>>,
        message: TxJsonRpcMessage<RoleServer>,
    ) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(&message).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        let mut write = write.lock().await;
        write.write_all(&bytes).await?;
        write.flush().await
    }

    /// Frees the slot of the request `id`, if it is in flight.
    fn release(in_flight: &Mutex<HashSet<RequestId>>, slots: &Semaphore, id: &RequestId) {
        let removed = in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        if removed {
            slots.add_permits(1);
        }
    }
}

/// What one line is.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer this error and read on.
    Refuse(ErrorData, Option<RequestId>),
    /// Nothing to do (blank, or a notification rmcp would ignore too).
    Skip,
}

fn parse(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Line::Refuse(
                ErrorData::parse_error(format!("parse error: {e}"), None),
                None,
            );
        }
    };
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(message) => Line::Message(Box::new(message)),
        // A notification is never answered, not even when unknown.
        Err(_) if id.is_none() => Line::Skip,
        Err(e) => Line::Refuse(
            ErrorData::invalid_request(format!("invalid request: {e}"), None),
            id,
        ),
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let (slots, in_flight) = (self.slots.clone(), self.in_flight.clone());
        async move {
            let answered = match &item {
                JsonRpcMessage::Response(response) => Some(response.id.clone()),
                JsonRpcMessage::Error(error) => error.id.clone(),
                _ => None,
            };
            let written = Self::write(write, item).await;
            // Freed once written: a client that does not read its answers
            // stops being read too.
            if let Some(id) = answered {
                Self::release(&in_flight, &slots, &id);
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.held.is_none() {
                self.held = Some(self.slots.clone().acquire_owned().await.ok()?);
            }
            let whole = self.read_line().await?;
            let line = if whole {
                parse(&self.line)
            } else {
                Line::Refuse(
                    ErrorData::invalid_request(
                        format!("message longer than {MAX_LINE} bytes"),
                        None,
                    ),
                    None,
                )
            };
            self.line.clear();
            match line {
                Line::Skip => {}
                Line::Refuse(error, id) => {
                    let answer = TxJsonRpcMessage::<RoleServer>::error(error, id);
                    Self::write(self.write.clone(), answer).await.ok()?;
                }
                Line::Message(message) => {
                    match &*message {
                        JsonRpcMessage::Request(request) => {
                            self.in_flight
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .insert(request.id.clone());
                            if let Some(permit) = self.held.take() {
                                permit.forget();
                            }
                        }
                        // A cancelled request may never be answered.
                        JsonRpcMessage::Notification(notification) => {
                            if let ClientNotification::CancelledNotification(cancelled) =
                                &notification.notification
                                && let Some(id) = &cancelled.params.request_id
                            {
                                Self::release(&self.in_flight, &self.slots, id);
                            }
                        }
                        _ => {}
                    }
                    return Some(*message);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_messages_refusals_or_nothing() {
        assert!(matches!(parse(b"\n"), Line::Skip));
        assert!(matches!(parse(b"  \r\n"), Line::Skip));
        match parse(b"not json\n") {
            Line::Refuse(error, None) => assert_eq!(error.code.0, -32700),
            _ => panic!("not refused"),
        }
        match parse(br#"{"jsonrpc":"2.0","id":7,"method":5}"#) {
            Line::Refuse(error, Some(id)) => {
                assert_eq!(error.code.0, -32600);
                assert_eq!(id, RequestId::Number(7));
            }
            _ => panic!("not refused"),
        }
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/unknown"}"#),
            Line::Skip | Line::Message(_)
        ));
        assert!(matches!(
            parse(b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n"),
            Line::Message(_)
        ));
    }
}
