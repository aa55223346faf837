//! The data directory is private to the gateway's user: it holds delegation
//! records, budgets and the journal, which name principals and capabilities
//! and must not be read or changed by anyone else on the host.
//!
//! At start the process umask becomes 077 (so sled, the journal and every
//! later file are created 0600 and directories 0700), the directory is
//! created 0700, and anything already in it that group or others may use is
//! tightened, with a warning: data written by an older dgw, or restored
//! from a backup, is not left readable.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Makes files the process creates from now on private (umask 077).
pub fn private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// What dgw makes in a data directory on its first start (the embedded
/// store, its journal, the audit log).
const STATE_ENTRIES: [&str; 3] = ["db", "journal", "audit"];

/// Whether `dir` has never held a gateway's state: only then may a missing
/// gateway key be created (a missing key later is a mistake, not a start).
pub fn is_new(dir: &Path) -> bool {
    !STATE_ENTRIES.iter().any(|e| dir.join(e).exists())
}

/// Why a missing gateway key is not replaced once the data directory holds
/// state ([`is_new`] is false): a new key is a new gateway identity (audit
/// seals, attestations). `serve` refuses with it, `config check` warns.
pub const GATEWAY_KEY_HINT: &str = "data_dir already holds state, so dgw will not make a new gateway identity: restore the key file or correct key_file";

/// Why a data directory could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("data_dir {0} is in use by another dgw process (a running `dgw serve` or `dgw mcp`): only one process may use a data directory. Give this one its own `data_dir`, or share state between processes with `[state] backend = \"redis\"` (each process still with its own data_dir)")]
    InUse(String),
    #[error("data_dir {path}: cannot lock {path}/dgw.lock: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Takes `dir` for this process (an exclusive `flock` on `dir/dgw.lock`,
/// released when the file is dropped or the process ends): a second
/// process on the same directory gets [`LockError::InUse`] before it reads
/// or writes anything there, not sled's bare `WouldBlock`.
pub fn lock(dir: &Path) -> Result<fs::File, LockError> {
    let io = |source| LockError::Io {
        path: dir.display().to_string(),
        source,
    };
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("dgw.lock"))
        .map_err(io)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            Err(LockError::InUse(dir.display().to_string()))
        }
        Err(e) => Err(io(e.into())),
    }
}

/// Creates `dir` (mode 0700) if needed and tightens what is already there;
/// returns how many entries were tightened.
pub fn prepare(dir: &Path) -> io::Result<usize> {
    private_umask();
    fs::create_dir_all(dir)?;
    let tightened = tighten(dir)?;
    if tightened > 0 {
        tracing::warn!(
            data_dir = %dir.display(),
            tightened,
            "data_dir held files others could read or write; made them private (0600, directories 0700)"
        );
    }
    Ok(tightened)
}

/// Removes group and other permissions below and at `path` (links are not
/// followed).
fn tighten(path: &Path) -> io::Result<usize> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(0);
    }
    let mut count = 0;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o700))?;
        count += 1;
    }
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            count += tighten(&entry?.path())?;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn old_readable_files_are_tightened_and_new_ones_are_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        fs::create_dir_all(dir.join("db")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("db"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(dir.join("db/conf"), b"x").unwrap();
        fs::set_permissions(dir.join("db/conf"), fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(prepare(&dir).unwrap(), 3);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("db")), 0o700);
        assert_eq!(mode(&dir.join("db/conf")), 0o600);
        // The umask now keeps new files private.
        fs::write(dir.join("new"), b"y").unwrap();
        assert_eq!(mode(&dir.join("new")), 0o600);
        assert_eq!(prepare(&dir).unwrap(), 0);
    }
}
