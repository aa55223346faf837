//! `resolve_path = true` tool rules: resolve a path argument the way the
//! kernel will when the upstream opens it, authorize the resolved path, and
//! forward the resolved path. A grant is a set of strings; the filesystem
//! follows links. Without this, a DCT for `/files/sub/**` reads
//! `/files/secret.txt` through `/files/sub/link -> ../secret.txt`.
//!
//! The longest prefix of the path that exists is resolved with
//! `realpath` (every link followed); the components after it, which do not
//! exist yet, are appended as they are. What remains open is a link created
//! at one of those components between the check and the upstream's open:
//! docs/security.md says so.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path argument could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{0:?} is not an absolute path")]
    NotAbsolute(String),
    #[error("{path:?} is not canonical: it {why}")]
    NotCanonical {
        path: String,
        why: delegateos::resource::ResourceError,
    },
    #[error("cannot resolve {path:?}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{0:?} resolves to a path that is not UTF-8")]
    NotUtf8(String),
}

/// `path` with every link in its existing prefix followed.
pub fn resolve(path: &str) -> Result<String, ResolveError> {
    delegateos::resource::check(path).map_err(|why| ResolveError::NotCanonical {
        path: path.to_owned(),
        why,
    })?;
    if !path.starts_with('/') {
        return Err(ResolveError::NotAbsolute(path.to_owned()));
    }
    let mut existing = PathBuf::from(path);
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    let resolved = loop {
        match std::fs::canonicalize(&existing) {
            Ok(p) => break p,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(20) => {
                // ENOENT, or ENOTDIR: a component is missing or a file.
                match (
                    existing.file_name().map(ToOwned::to_owned),
                    existing.parent(),
                ) {
                    (Some(name), Some(parent)) => {
                        missing.push(name);
                        existing = parent.to_owned();
                    }
                    _ => {
                        return Err(ResolveError::Io {
                            path: path.to_owned(),
                            source: e,
                        })
                    }
                }
            }
            Err(source) => {
                return Err(ResolveError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    };
    let mut full = resolved;
    for name in missing.iter().rev() {
        full.push(name);
    }
    debug_assert!(Path::new(&full)
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_))));
    full.into_os_string()
        .into_string()
        .map_err(|_| ResolveError::NotUtf8(path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_followed_and_missing_tails_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let root_s = root.to_str().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("secret.txt"), b"s").unwrap();
        symlink("../secret.txt", root.join("sub/link")).unwrap();
        symlink("..", root.join("sub/dirlink")).unwrap();
        let r = |p: &str| resolve(&format!("{root_s}{p}")).unwrap();
        assert_eq!(r("/sub/link"), format!("{root_s}/secret.txt"));
        assert_eq!(r("/sub/dirlink"), root_s);
        assert_eq!(
            r("/sub/dirlink/new/file.txt"),
            format!("{root_s}/new/file.txt")
        );
        assert_eq!(r("/sub/plain.txt"), format!("{root_s}/sub/plain.txt"));
        assert!(matches!(
            resolve("relative/x"),
            Err(ResolveError::NotAbsolute(_))
        ));
        assert!(matches!(
            resolve(&format!("{root_s}/sub/../secret.txt")),
            Err(ResolveError::NotCanonical { .. })
        ));
        // A file used as a directory: the tail is kept, the upstream fails.
        assert_eq!(r("/secret.txt/x"), format!("{root_s}/secret.txt/x"));
    }
}
