//! `upload T FILE` and `download T PATH`: files in and out of a
//! terminal's working directory through a running `serve`'s routes
//! (`PUT`/`GET /api/terminals/{t}/files`), found as `link` finds it
//! (`serve.json` in the state directory, or `--url` and
//! `$TMUX_ENGINE_TOKEN`). Going through serve keeps one set of rules
//! (names, symlinks, the size limit, read-only tokens) and one log of
//! every transfer. Both ways stream in chunks: a file is never in memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use axum::body::Body;
use clap::Args;
use futures_util::StreamExt;
use serde_json::Value;
use tmux_engine::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::args::Global;
use super::report::{CliError, EXIT_ERROR, write_line};
use super::serve_api::{Serve, find_serve};

/// How much of a file is read at once.
const CHUNK: usize = 64 << 10;

/// Where serve is and how to reach it (both commands).
#[derive(Args, Debug, Clone)]
pub(crate) struct ServeAt {
    /// The serve: `http://HOST:PORT[/BASE]` or `unix:PATH[ /BASE]`
    /// [default: the one that last started on the state directory].
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The Host header to send over a Unix socket (one of serve's
    /// --allow-host names) [default: the one serve recorded].
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
}

/// `upload`'s arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct UploadArgs {
    /// Terminal id or name.
    target: String,
    /// The local file to send.
    file: PathBuf,
    /// Its name in the terminal's working directory [default: FILE's].
    #[arg(long)]
    name: Option<String>,
    /// Replace a file of that name there.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    serve: ServeAt,
}

/// `download`'s arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct DownloadArgs {
    /// Terminal id or name.
    target: String,
    /// The file: relative to the terminal's working directory, or absolute.
    path: String,
    /// Where to write it (`-`: stdout) [default: PATH's name, here].
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    serve: ServeAt,
}

/// One serve, found.
async fn find(global: &Global, at: &ServeAt) -> Result<Serve, CliError> {
    find_serve(global, at.url.clone(), at.host.clone()).await
}

/// `application/x-www-form-urlencoded`'s escaping of one query value.
fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Sends one request with `body` and returns the response (any status).
async fn send(
    serve: &Serve,
    method: &str,
    path: &str,
    body: Body,
    length: Option<u64>,
) -> Result<axum::http::Response<hyper::body::Incoming>, Error> {
    let content = length.map(|length| ("application/octet-stream", Some(length)));
    let (host, token) = (serve.host.as_deref(), serve.token.as_str());
    super::serve_api::send(&serve.target, host, token, (method, path), body, content).await
}

/// A refusal's answer as the CLI's error: serve's code and message.
async fn refusal(response: axum::http::Response<hyper::body::Incoming>) -> CliError {
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
        .await
        .unwrap_or_default();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let message = answer["error"]["message"]
        .as_str()
        .map_or_else(|| format!("serve answered {status}"), str::to_owned);
    CliError {
        code: known_code(answer["error"]["code"].as_str().unwrap_or("IO")),
        message,
        exit: EXIT_ERROR,
    }
}

/// Serve's code as one of the engine's stable codes (`IO` for another).
fn known_code(code: &str) -> &'static str {
    [
        "UNAUTHORIZED",
        "READ_ONLY",
        "FORBIDDEN_SCOPE",
        "INVALID_INPUT",
        "NO_TERMINAL",
        "DUPLICATE_NAME",
        "UNSUPPORTED",
        "FORBIDDEN_ORIGIN",
        "UNSUPPORTED_MEDIA_TYPE",
    ]
    .into_iter()
    .find(|known| *known == code)
    .unwrap_or("IO")
}

/// `upload T FILE`: prints where the file went (the answer with --json).
///
/// # Errors
/// `INVALID_INPUT` without a serve or token, or for a FILE that is not a
/// regular file; serve's refusal (its code); `IO` on the way.
pub(crate) async fn upload(
    global: &Global,
    args: UploadArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let serve = find(global, &args.serve).await?;
    let context = || format!("reading {}", args.file.display());
    let file = tokio::fs::File::open(&args.file)
        .await
        .map_err(|e| Error::io(context(), e))?;
    let metadata = file.metadata().await.map_err(|e| Error::io(context(), e))?;
    if !metadata.is_file() {
        return Err(
            Error::InvalidInput(format!("{} is not a regular file", args.file.display())).into(),
        );
    }
    let name = match &args.name {
        Some(name) => name.clone(),
        None => args
            .file
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let size = metadata.len();
    let chunks = futures_util::stream::try_unfold((file, size), |(mut file, left)| async move {
        if left == 0 {
            return Ok(None);
        }
        let mut buffer = vec![0u8; usize::try_from(left).unwrap_or(CHUNK).min(CHUNK)];
        let got = file.read(&mut buffer).await?;
        if got == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        buffer.truncate(got);
        Ok::<_, std::io::Error>(Some((
            bytes::Bytes::from(buffer),
            (file, left - got as u64),
        )))
    });
    let path = format!(
        "/api/terminals/{}/files?name={}{}",
        escape(&args.target),
        escape(&name),
        if args.overwrite {
            "&overwrite=true"
        } else {
            ""
        }
    );
    let response = send(&serve, "PUT", &path, Body::from_stream(chunks), Some(size)).await?;
    if !response.status().is_success() {
        return Err(refusal(response).await);
    }
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
        .await
        .map_err(|e| Error::io("reading serve's answer", std::io::Error::other(e)))?;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if global.json {
        return Ok(write_line(out, &answer.to_string())?);
    }
    Ok(write_line(
        out,
        &format!(
            "{} ({} bytes)",
            answer["path"].as_str().unwrap_or(""),
            answer["size"]
        ),
    )?)
}

/// `download T PATH`: the file into `-o` (default: its name here, never
/// replaced without `--overwrite`), or stdout with `-o -`.
///
/// # Errors
/// `INVALID_INPUT` without a serve or token; `DUPLICATE_NAME` for an
/// output that exists; serve's refusal (its code); `IO` on the way (a
/// partial output file is removed).
pub(crate) async fn download(
    global: &Global,
    args: DownloadArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let serve = find(global, &args.serve).await?;
    let output = match &args.output {
        Some(path) if path.as_os_str() == "-" => None,
        Some(path) => Some(path.clone()),
        None => Some(PathBuf::from(
            Path::new(&args.path)
                .file_name()
                .ok_or_else(|| Error::InvalidInput(format!("{:?} names no file", args.path)))?,
        )),
    };
    let path = format!(
        "/api/terminals/{}/files?path={}",
        escape(&args.target),
        escape(&args.path)
    );
    let response = send(&serve, "GET", &path, Body::empty(), None).await?;
    if !response.status().is_success() {
        return Err(refusal(response).await);
    }
    let mut body = Body::new(response.into_body()).into_data_stream();
    let Some(output) = output else {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| Error::io("reading", std::io::Error::other(e)))?;
            out.write_all(&chunk)
                .map_err(|e| Error::io("writing stdout", e))?;
        }
        return Ok(out.flush().map_err(|e| Error::io("writing stdout", e))?);
    };
    let shown = output.display().to_string();
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true);
    if args.overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(&output).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::DuplicateName(format!("{shown} exists: --overwrite replaces it"))
        } else {
            Error::io(format!("creating {shown}"), e)
        }
    })?;
    let copied = async {
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(std::io::Error::other)?;
            size += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        Ok::<u64, std::io::Error>(size)
    };
    match copied.await {
        Ok(size) if !global.json => Ok(write_line(out, &format!("{shown} ({size} bytes)"))?),
        Ok(size) => Ok(write_line(
            out,
            &serde_json::json!({"path": shown, "size": size}).to_string(),
        )?),
        Err(e) => {
            let _ = std::fs::remove_file(&output);
            Err(Error::io(format!("downloading into {shown}"), e).into())
        }
    }
}
