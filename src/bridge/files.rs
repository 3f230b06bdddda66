//! Files in and out of a terminal: `PUT /api/terminals/{t}/files?name=NAME`
//! writes the request's bytes into the terminal's working directory
//! (`Owned::working_directory`: its program's `/proc` cwd, else the
//! shell's OSC 7), `GET /api/terminals/{t}/files?path=PATH` streams a
//! file back (a path relative to that directory, or absolute).
//!
//! Only a principal that may write the terminal moves files (a read-only
//! token, or a share link without write, gets `403 READ_ONLY`): whoever
//! may type has a shell as the user already, so nothing here gives more.
//! What the rules guard against is the path, not the person:
//!
//! - an upload's name is one plain file name, created with `openat` in
//!   the directory opened once, `O_NOFOLLOW | O_EXCL` under a temporary
//!   name, then renamed into place (`RENAME_NOREPLACE` unless the request
//!   says `overwrite=true`): a symlink planted there is never written
//!   through, and a half-written file never shows under the name;
//! - a download is opened once and judged by `fstat` of that descriptor
//!   (a regular file only), so nothing can swap the file between check and
//!   read; symlinked directories on the way are followed, as the user's
//!   own `cat` would;
//! - both ways are bounded by [`BridgeConfig::max_file_size`] and streamed
//!   in chunks of [`CHUNK`]: memory never holds a file;
//! - an overwrite keeps the replaced file's permission bits (and its owner
//!   and group where the user may set them); a new file is created `0600`
//!   (the directory's default ACL and setgid group apply as the kernel
//!   applies them): an upload never widens who may read a file;
//! - a partial upload (`.tmux-engine-upload-HEX`) is removed when its
//!   request ends however it ends, and one a killed `serve` left is swept
//!   by that name pattern: before every upload into its directory, and at
//!   start in the working directories of the terminals serve finds
//!   ([`sweep`]).
//!
//! Every transfer is logged (owner, terminal, path, size).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use axum::Extension;
use axum::body::Body;
use axum::extract::{RawPathParams, RawQuery, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::info;

use super::AppState;
use super::api::ApiError;
use super::auth::Principal;
use crate::Error;

/// How much of a file is in memory at once, each way.
pub const CHUNK: usize = 64 << 10;

/// The default bound on one file, each way (`serve --max-file-size`).
pub(crate) const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;

/// The `tracing` target of the transfer log (on by default in the CLI).
pub const TRANSFER_LOG: &str = "tmux_engine::transfer";

/// The longest file name Linux takes (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// `PUT /api/terminals/{t}/files`'s query.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(super) struct UploadQuery {
    /// The file's name in the terminal's working directory: one plain
    /// name (no `/`, no NUL, not `.` or `..`).
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^/\x00]+$"))]
    name: String,
    /// Replace a regular file of that name (otherwise an existing one is
    /// `409 DUPLICATE_NAME`).
    #[serde(default)]
    overwrite: bool,
}

/// `GET /api/terminals/{t}/files`'s query.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(super) struct DownloadQuery {
    /// The file: relative to the terminal's working directory, or absolute.
    #[schemars(length(min = 1), regex(pattern = r"^[^\x00]+$"))]
    path: String,
}

/// An upload's answer.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Uploaded {
    /// Where the file is now (absolute).
    path: String,
    /// Its size in bytes.
    size: u64,
    /// A file of that name was replaced.
    replaced: bool,
}

/// Whether a request is an upload: the one body that is bytes, not JSON,
/// and may be larger than [`super::MAX_BODY`] (it is bounded here).
pub(super) fn is_upload(method: &Method, path: &str) -> bool {
    method == Method::PUT && path.starts_with("/api/terminals/") && path.ends_with("/files")
}

fn invalid(message: String) -> ApiError {
    ApiError::from(Error::InvalidInput(message))
}

fn too_large(what: &str, size: u64, limit: u64) -> ApiError {
    invalid(format!(
        "{what} of {size} bytes is larger than the limit of {limit} (serve --max-file-size)"
    ))
    .with_status(StatusCode::PAYLOAD_TOO_LARGE)
}

fn io_error(context: String, errno: Errno) -> ApiError {
    let status = match errno {
        Errno::NOENT | Errno::NOTDIR => StatusCode::NOT_FOUND,
        Errno::ACCESS | Errno::PERM | Errno::ROFS => StatusCode::FORBIDDEN,
        _ => return ApiError::from(Error::io(context, std::io::Error::from(errno))),
    };
    invalid(format!("{context}: {}", std::io::Error::from(errno))).with_status(status)
}

/// Checks an upload's name: one plain file name.
fn check_name(name: &str) -> Result<(), ApiError> {
    let why = if name.is_empty() {
        "is empty"
    } else if name == "." || name == ".." {
        "is not a file name"
    } else if name.contains('/') {
        "has a '/': it must be a plain file name"
    } else if name.contains('\0') {
        "has a NUL"
    } else if name.len() > NAME_MAX {
        "is longer than 255 bytes"
    } else {
        return Ok(());
    };
    Err(invalid(format!("file name {name:?} {why}")))
}

/// The terminal's working directory; its lookup also proves that the
/// terminal exists and is the principal's (404 otherwise, either way).
async fn working_directory(
    state: &AppState,
    who: &Principal,
    target: &str,
) -> Result<Option<PathBuf>, ApiError> {
    Ok(state
        .registry
        .owner(&who.owner)
        .working_directory(target)
        .await?)
}

fn no_directory(target: &str) -> ApiError {
    ApiError::from(Error::Unsupported(format!(
        "terminal {target}'s working directory is not known (neither its program's nor an \
         OSC 7 report)"
    )))
    .with_status(StatusCode::CONFLICT)
}

fn terminal(path: &RawPathParams) -> String {
    path.iter()
        .find(|(name, _)| *name == "t")
        .map(|(_, value)| value.to_owned())
        .unwrap_or_default()
}

fn query<T: serde::de::DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    serde_urlencoded::from_str(query.unwrap_or_default())
        .map_err(|e| invalid(format!("query: {e}")))
}

/// The name prefix of an upload's temporary file.
pub(crate) const PARTIAL_PREFIX: &str = ".tmux-engine-upload-";

/// A partial upload untouched this long is no live upload's: a live one
/// writes at least every `--header-timeout` (the longest pause a body may
/// take, 10 s by default) or is cut.
const PARTIAL_STALE: std::time::Duration = std::time::Duration::from_secs(120);

/// Removes the partial uploads a killed `serve` left in `dir`: this
/// user's regular files named [`PARTIAL_PREFIX`]`HEX`, untouched for
/// [`PARTIAL_STALE`]. Returns how many went. Errors only skip files:
/// sweeping is housekeeping, never a reason to refuse an upload.
pub(crate) fn sweep(dir: &OwnedFd) -> usize {
    let Ok(mut entries) = rustix::fs::Dir::read_from(dir) else {
        return 0;
    };
    let me = rustix::process::geteuid().as_raw();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut removed = 0;
    while let Some(Ok(entry)) = entries.next() {
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        let Some(hex) = name.strip_prefix(PARTIAL_PREFIX) else {
            continue;
        };
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let modified = u64::try_from(stat.st_mtime).unwrap_or(0);
        if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && stat.st_uid == me
            && now.saturating_sub(modified) >= PARTIAL_STALE.as_secs()
            && rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Sweeps `path` (a terminal's working directory) as [`sweep`] does.
pub(crate) fn sweep_path(path: &Path) -> usize {
    match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(dir) => sweep(&dir),
        Err(_) => 0,
    }
}

/// The temporary file of an upload, removed unless it was renamed.
struct Temporary<'a> {
    dir: &'a OwnedFd,
    name: String,
    kept: bool,
}

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = rustix::fs::unlinkat(self.dir, &self.name, AtFlags::empty());
        }
    }
}

/// `PUT /api/terminals/{t}/files?name=NAME[&overwrite=true]`: the body's
/// bytes into the working directory; `201` with [`Uploaded`].
pub(super) async fn upload(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    path: RawPathParams,
    RawQuery(raw): RawQuery,
    request: Request,
) -> Result<Response, ApiError> {
    let target = terminal(&path);
    if who.read_only {
        return Err(ApiError::from(Error::ReadOnly(target)));
    }
    let UploadQuery { name, overwrite } = query(raw.as_deref())?;
    check_name(&name)?;
    let limit = state.config.max_file_size;
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if let Some(size) = announced.filter(|size| *size > limit) {
        return Err(too_large("the upload", size, limit));
    }
    let cwd = working_directory(&state, &who, &target)
        .await?
        .ok_or_else(|| no_directory(&target))?;
    let shown = cwd.join(&name).display().to_string();
    let dir = rustix::fs::open(
        &cwd,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_error(format!("opening {}", cwd.display()), e))?;
    // A killed serve's leftovers go before another partial file joins them.
    let swept = sweep(&dir);
    if swept > 0 {
        info!(target: TRANSFER_LOG, dir = %cwd.display(), swept, "removed partial uploads");
    }
    let existing = match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => None,
        Err(e) => return Err(io_error(format!("looking at {shown}"), e)),
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                return Err(invalid(format!(
                    "{shown} is a symbolic link: an upload never writes through one"
                )));
            }
            FileType::RegularFile if overwrite => Some(stat),
            FileType::RegularFile => return Err(exists(&shown)),
            _ => return Err(invalid(format!("{shown} exists and is not a regular file"))),
        },
    };
    let mut random = [0u8; 8];
    getrandom::fill(&mut random)
        .map_err(|e| ApiError::from(Error::io("drawing a name", std::io::Error::other(e))))?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut temporary = Temporary {
        dir: &dir,
        name: format!("{PARTIAL_PREFIX}{hex}"),
        kept: false,
    };
    let replaced = existing.is_some();
    let fd = rustix::fs::openat(
        &dir,
        &temporary.name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io_error(format!("creating a file in {}", cwd.display()), e))?;
    if let Some(stat) = &existing {
        // The replaced file's owner and group first (a chown clears the
        // set-id bits), where the user may; then its permission bits.
        let _ = rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(stat.st_uid)),
            Some(rustix::fs::Gid::from_raw(stat.st_gid)),
        );
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(stat.st_mode & 0o7777))
            .map_err(|e| io_error(format!("keeping the mode of {shown}"), e))?;
    }
    let mut file = tokio::fs::File::from_std(std::fs::File::from(fd));
    let mut size = 0u64;
    let mut body = request.into_body().into_data_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| invalid(format!("reading the upload: {e}")))?;
        size += chunk.len() as u64;
        if size > limit {
            return Err(too_large("the upload", size, limit));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::from(Error::io(format!("writing {shown}"), e)))?;
    }
    let written = async {
        file.flush().await?;
        file.sync_all().await
    };
    written
        .await
        .map_err(|e| ApiError::from(Error::io(format!("writing {shown}"), e)))?;
    drop(file);
    let flags = if overwrite {
        RenameFlags::empty()
    } else {
        RenameFlags::NOREPLACE
    };
    match rustix::fs::renameat_with(&dir, &temporary.name, &dir, &name, flags) {
        Ok(()) => temporary.kept = true,
        Err(Errno::EXIST) => return Err(exists(&shown)),
        Err(e) => return Err(io_error(format!("renaming into {shown}"), e)),
    }
    info!(target: TRANSFER_LOG, owner = %who.owner, terminal = %target, path = %shown, size, "upload");
    state.audit(
        crate::audit::Act::new("upload", who.owner.as_str())
            .terminal(&target)
            .bytes(size)
            .detail(&shown),
    );
    let answer = Uploaded {
        path: shown,
        size,
        replaced,
    };
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

fn exists(shown: &str) -> ApiError {
    ApiError::from(Error::DuplicateName(format!(
        "{shown} exists: overwrite=true replaces it"
    )))
}

/// Opens `path` once for reading and judges that descriptor: a regular
/// file, its size. `O_NONBLOCK` so a FIFO's open does not wait for a
/// writer (it is refused by its type right after).
fn open_regular(path: &Path) -> Result<(OwnedFd, u64), ApiError> {
    let shown = path.display();
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_error(format!("opening {shown}"), e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| io_error(format!("reading {shown}"), e))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(invalid(format!("{shown} is a directory"))),
        other => {
            return Err(invalid(format!(
                "{shown} is not a regular file ({other:?})"
            )));
        }
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty())
        .map_err(|e| io_error(format!("reading {shown}"), e))?;
    Ok((fd, u64::try_from(stat.st_size).unwrap_or(0)))
}

/// `GET /api/terminals/{t}/files?path=PATH`: the file's bytes
/// (`application/octet-stream`, `Content-Disposition: attachment`).
pub(super) async fn download(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    path: RawPathParams,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let target = terminal(&path);
    if who.read_only {
        return Err(ApiError::from(Error::ReadOnly(target)));
    }
    let DownloadQuery { path: asked } = query(raw.as_deref())?;
    if asked.is_empty() || asked.contains('\0') {
        return Err(invalid(format!("path {asked:?} is empty or has a NUL")));
    }
    let cwd = working_directory(&state, &who, &target).await?;
    let asked = PathBuf::from(asked);
    let full = if asked.is_absolute() {
        asked
    } else {
        cwd.ok_or_else(|| no_directory(&target))?.join(asked)
    };
    let (fd, size, full) =
        tokio::task::spawn_blocking(move || open_regular(&full).map(|(fd, size)| (fd, size, full)))
            .await
            .map_err(|_| {
                ApiError::from(Error::Cancelled("the server is shutting down".to_owned()))
            })??;
    let limit = state.config.max_file_size;
    if size > limit {
        return Err(too_large(&full.display().to_string(), size, limit));
    }
    info!(target: TRANSFER_LOG, owner = %who.owner, terminal = %target, path = %full.display(), size, "download");
    state.audit(
        crate::audit::Act::new("download", who.owner.as_str())
            .terminal(&target)
            .bytes(size)
            .detail(full.display().to_string()),
    );
    let file = tokio::fs::File::from_std(std::fs::File::from(fd));
    // Exactly the size fstat saw: a file that grows is cut there, one that
    // shrinks ends the body early (the client sees it short of its length).
    let chunks = futures_util::stream::try_unfold((file, size), |(mut file, left)| async move {
        if left == 0 {
            return Ok(None);
        }
        let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        let mut buffer = vec![0u8; want];
        let got = file.read(&mut buffer).await?;
        if got == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        buffer.truncate(got);
        Ok(Some((
            bytes::Bytes::from(buffer),
            (file, left - got as u64),
        )))
    });
    let name = full
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut response = Response::new(Body::from_stream(chunks));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    if let Ok(value) = HeaderValue::from_str(&disposition(&name)) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// `attachment; filename="ASCII"; filename*=UTF-8''PERCENT` (RFC 6266).
fn disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["a", "log.txt", ".hidden", "...", "a b", "ü"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", ".", "..", "a/b", "/a", "a\0b", &"x".repeat(256)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(is_upload(&Method::PUT, "/api/terminals/x/files"));
        assert!(!is_upload(&Method::POST, "/api/terminals/x/files"));
        assert!(!is_upload(&Method::PUT, "/api/terminals/x/send"));
        assert_eq!(
            disposition("a\"b ü.txt"),
            "attachment; filename=\"a_b _.txt\"; filename*=UTF-8''a%22b%20%C3%BC.txt"
        );
    }
}
