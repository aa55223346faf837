//! Key files on disk: written with mode 0600, refused when others can read them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use delegateos::{KeyFile, Keypair};

/// Why a key file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read key file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write key file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "key file {path} is readable by group or others (mode {mode:03o}); run `chmod 600 {path}`"
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("key file {path}: {source}")]
    Invalid {
        path: PathBuf,
        source: delegateos::principal::PrincipalError,
    },
    #[error("{key}: key file {path} does not exist; {hint}")]
    Missing {
        key: String,
        path: PathBuf,
        hint: &'static str,
    },
    #[error(
        "{key}: the directory of {path} does not exist; dgw creates directories only inside data_dir"
    )]
    NoDirectory { key: String, path: PathBuf },
    #[error(transparent)]
    Random(#[from] crate::random::RandomError),
}

/// A new keypair from the operating system's randomness.
pub fn generate() -> Result<Keypair, KeyFileError> {
    Ok(Keypair::from_seed(crate::random::bytes()?))
}

/// Reads a key file, refusing one that group or others may read.
pub fn read(path: &Path) -> Result<Keypair, KeyFileError> {
    let read_err = |source| KeyFileError::Read {
        path: path.to_owned(),
        source,
    };
    let mode = fs::metadata(path).map_err(read_err)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    let bytes = fs::read(path).map_err(read_err)?;
    KeyFile::parse(&bytes).map_err(|source| KeyFileError::Invalid {
        path: path.to_owned(),
        source,
    })
}

/// Writes a new key file with mode 0600. Refuses to replace an existing file
/// unless `overwrite`; the file is created with its final mode, never
/// readable by others even for a moment.
pub fn write(path: &Path, key: &Keypair, overwrite: bool) -> Result<(), KeyFileError> {
    let write_err = |source| KeyFileError::Write {
        path: path.to_owned(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).mode(0o600);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(write_err)?;
    // An existing file keeps its old mode on truncate: set it explicitly.
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(write_err)?;
    file.write_all(KeyFile::new(key).to_json().as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .map_err(write_err)
}

/// Reads a key file, or creates it (mode 0600) when `create` allows.
///
/// A missing key is never made by surprise: a typo in a path must not give a
/// tenant a new root or the gateway a new identity. `key` names the config
/// key the path came from, for the error. A missing parent directory is
/// created only inside `data_dir` (the gateway's own directory), never
/// elsewhere.
pub fn read_or_create(
    path: &Path,
    create: Create,
    key: &str,
    data_dir: &Path,
) -> Result<Keypair, KeyFileError> {
    if path.exists() {
        return read(path);
    }
    if let Create::Never { hint } = create {
        return Err(KeyFileError::Missing {
            key: key.to_owned(),
            path: path.to_owned(),
            hint,
        });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            if !lexically_within(dir, data_dir) {
                return Err(KeyFileError::NoDirectory {
                    key: key.to_owned(),
                    path: path.to_owned(),
                });
            }
            fs::create_dir_all(dir).map_err(|source| KeyFileError::Write {
                path: path.to_owned(),
                source,
            })?;
        }
    }
    let key_pair = generate()?;
    write(path, &key_pair, false)?;
    tracing::warn!(
        key,
        path = %path.display(),
        principal = %key_pair.principal_id(),
        "created a new key file"
    );
    Ok(key_pair)
}

/// Whether a missing key file may be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Yes: the config asks for it, or this is the data directory's first start.
    IfMissing,
    /// No; the error ends with `hint`, what the operator can do.
    Never { hint: &'static str },
}

/// `inner` is `outer` or below it, comparing the paths as written (made
/// absolute against the current directory; `..` never counts as inside).
fn lexically_within(inner: &Path, outer: &Path) -> bool {
    let absolute = |p: &Path| match std::env::current_dir() {
        Ok(cwd) if p.is_relative() => cwd.join(p),
        _ => p.to_owned(),
    };
    let (inner, outer) = (absolute(inner), absolute(outer));
    let up = |p: &Path| {
        p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    };
    !up(&inner) && !up(&outer) && inner.starts_with(&outer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_and_refuse_open_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        let key = generate().unwrap();
        write(&path, &key, false).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(read(&path).unwrap().principal_id(), key.principal_id());
        assert!(matches!(
            write(&path, &key, false),
            Err(KeyFileError::Write { .. })
        ));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            read(&path),
            Err(KeyFileError::Permissions { mode: 0o640, .. })
        ));
        write(&path, &key, true).unwrap();
        assert!(read(&path).is_ok());
    }
}
