//! Directories the engine trusts, checked the way tmux checks its socket
//! directory: owned by the user, no access for group or other, and refused
//! with [`Error::UnsafeDirectory`] otherwise.
//!
//! Why: without `XDG_RUNTIME_DIR` the runtime directory is a predictable
//! path under `/tmp`; another user who creates it first (mode 777) could
//! read sockets, replace server directories, or plant records. Pure checks
//! over `stat`; nothing here removes anything.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The sticky bit: in a shared directory (`/tmp`), only an entry's owner
/// may rename or remove it.
const STICKY: u32 = 0o1000;

/// Environment variable naming the runtime base: the directory that holds
/// every server directory the engine makes (a `Terminal`'s, a fixture's,
/// `run`'s, and the registry's `tmux-engine-registry-UID-HASH`).
pub const RUNTIME_DIR_ENV: &str = "TMUX_ENGINE_RUNTIME_DIR";

/// The runtime base, chosen but not touched: `named` (a caller's explicit
/// choice), else `$TMUX_ENGINE_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR` when
/// it is a directory this user may write, else `/tmp`; made absolute (a
/// relative socket path would depend on the cwd). The second value is true
/// when the base was named (by the caller or the variable), so it may be
/// created.
///
/// The one place every server's location starts from: [`runtime_base`]
/// for servers started directly, and the registry's runtime directory.
pub fn runtime_base_path(named: Option<&Path>) -> (PathBuf, bool) {
    let named = named.map(Path::to_owned).or_else(|| {
        std::env::var_os(RUNTIME_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let was_named = named.is_some();
    let base = named.unwrap_or_else(|| {
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| {
                dir.is_dir()
                    && rustix::fs::access(
                        dir,
                        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
                    )
                    .is_ok()
            })
            .unwrap_or_else(|| PathBuf::from("/tmp"))
    });
    let base = std::path::absolute(&base).unwrap_or(base);
    (base, was_named)
}

/// The runtime base of [`runtime_base_path`], created (mode 0700) when it
/// was named but is missing, and checked by [`check_parent`]: no one else
/// may replace what the engine creates in it.
///
/// # Errors
/// `IO` when it cannot be created; `UNSAFE_DIRECTORY` as [`check_parent`].
pub fn runtime_base(named: Option<&Path>) -> Result<PathBuf> {
    let (base, was_named) = runtime_base_path(named);
    if was_named {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&base)
            .map_err(|e| Error::io(format!("creating runtime directory {}", base.display()), e))?;
    }
    check_parent(&base)?;
    Ok(base)
}

fn unsafe_dir(path: &Path, reason: impl Into<String>) -> Error {
    Error::UnsafeDirectory {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates `path` (and missing parents) with mode 0700 unless it exists,
/// then checks it with [`check_private`].
///
/// # Errors
/// `IO` when it cannot be created; `UNSAFE_DIRECTORY` as
/// [`check_private`].
pub fn ensure_private(path: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?;
    check_private(path)
}

/// Checks that `path` is a directory (not a symlink), owned by the
/// effective user, with no permission bits for group or other: what tmux
/// demands of its socket directory.
///
/// # Errors
/// `UNSAFE_DIRECTORY` naming the path and what is wrong; `IO` when it
/// cannot be examined.
pub fn check_private(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::io(format!("examining directory {}", path.display()), e))?;
    if !meta.is_dir() {
        return Err(unsafe_dir(path, "not a directory (or a symlink)"));
    }
    if meta.uid() != me() {
        return Err(unsafe_dir(
            path,
            format!("owned by uid {}, not {}", meta.uid(), me()),
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(unsafe_dir(
            path,
            format!("mode {mode:04o} gives group or other access (want 0700)"),
        ));
    }
    Ok(())
}

/// Checks a directory that holds the engine's private directories (a
/// runtime base such as `$XDG_RUNTIME_DIR` or `/tmp`): owned by the user or
/// root, and writable by group or other only with the sticky bit (so no one
/// else can rename or remove what the engine creates in it).
///
/// # Errors
/// `UNSAFE_DIRECTORY` naming the path and what is wrong; `IO` when it
/// cannot be examined.
pub fn check_parent(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("examining directory {}", path.display()), e))?;
    if !meta.is_dir() {
        return Err(unsafe_dir(path, "not a directory"));
    }
    if meta.uid() != me() && meta.uid() != 0 {
        return Err(unsafe_dir(
            path,
            format!("owned by uid {}, neither {} nor root", meta.uid(), me()),
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 && mode & STICKY == 0 {
        return Err(unsafe_dir(
            path,
            format!("mode {mode:04o} lets group or other replace its entries (no sticky bit)"),
        ));
    }
    Ok(())
}

/// True when `path` (not followed if a symlink) belongs to the effective
/// user: what a reaper checks before touching anything.
pub fn owned_by_me(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.uid() == me())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn private_and_parent_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private(&dir).unwrap();
        assert!(owned_by_me(&dir));
        for (mode, private_ok, parent_ok) in [
            (0o700, true, true),
            (0o750, false, true),
            (0o705, false, true),
            (0o770, false, false),
            (0o777, false, false),
            (0o1777, false, true),
        ] {
            chmod(&dir, mode);
            let private = check_private(&dir);
            assert_eq!(private.is_ok(), private_ok, "{mode:o}: {private:?}");
            if let Err(e) = private {
                assert_eq!(e.code(), "UNSAFE_DIRECTORY");
                assert!(e.to_string().contains(&format!("{mode:04o}")), "{e}");
            }
            assert_eq!(check_parent(&dir).is_ok(), parent_ok, "{mode:o}");
        }
        // An existing unsafe directory is refused, not repaired.
        chmod(&dir, 0o777);
        assert_eq!(ensure_private(&dir).unwrap_err().code(), "UNSAFE_DIRECTORY");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        chmod(&dir, 0o700);
        assert_eq!(check_private(&link).unwrap_err().code(), "UNSAFE_DIRECTORY");
    }
}
