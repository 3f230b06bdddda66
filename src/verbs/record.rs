//! `record`: a terminal's output as an asciicast v2 recording (what
//! `asciinema play` and asciinema-player read), written with the one
//! asciicast writer ([`crate::screen::asciicast`]): the screen as it is
//! when recording starts, then every output event and resize, until the
//! terminal's output ends or the caller stops it.

use std::future::Future;
use std::io::Write;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Serialize;
use tokio::time::Instant;

use crate::control::client::PaneEvent as OutputEvent;
use crate::registry::Owned;
use crate::screen::asciicast::{Header, Writer};
use crate::vocab::Size;
use crate::{Error, Result};

/// Bytes a recording takes at most unless told otherwise (its events stop
/// there, `truncated`).
pub const DEFAULT_RECORD_LIMIT: u64 = 64 * 1024 * 1024;

/// What `record` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RecordAnswer {
    /// Bytes written.
    pub written: u64,
    /// Whether events were left out at the size limit.
    pub truncated: bool,
}

/// Records `target` into `out` until its output ends or `stop` resolves.
///
/// # Errors
/// The registry's (`NO_TERMINAL`, `TERMINAL_DEAD`, ...), or `IO` writing.
pub async fn record<W: Write>(
    owned: Owned<'_>,
    target: &str,
    out: W,
    limit: u64,
    stop: impl Future<Output = ()>,
) -> Result<RecordAnswer> {
    let failed = |e| Error::io("writing the recording", e);
    let (snapshot, mut stream) = owned.snapshot_and_output(target).await?;
    let size = Size {
        cols: snapshot.width,
        rows: snapshot.height,
    };
    let started = Instant::now();
    let mut writer = Writer::new(out, &Header::now(size), limit).map_err(failed)?;
    writer
        .output(started.elapsed(), &snapshot.to_ansi())
        .map_err(failed)?;
    tokio::pin!(stop);
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            () = &mut stop => None,
        };
        match event {
            Some(OutputEvent::Output(bytes)) => writer.output(started.elapsed(), &bytes),
            // Output was skipped: the snapshot redraws what it left.
            Some(OutputEvent::Resync(snapshot)) => {
                let now = Size {
                    cols: snapshot.width,
                    rows: snapshot.height,
                };
                writer
                    .resize(started.elapsed(), now)
                    .and_then(|()| writer.output(started.elapsed(), &snapshot.to_ansi()))
            }
            None => break,
        }
        .map_err(failed)?;
    }
    let answer = RecordAnswer {
        written: writer.written(),
        truncated: writer.truncated(),
    };
    writer.finish().map_err(failed)?;
    Ok(answer)
}
