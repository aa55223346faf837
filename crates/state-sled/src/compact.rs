//! Giving disk space back. sled does not shrink its file when data is
//! deleted: a burst of reservations that all ended leaves the data
//! directory as large as at its peak. At start, when the database file is
//! much larger than what it holds, it is rewritten: exported into a fresh
//! database beside it, which then replaces it.
//!
//! The swap survives a crash at any step: `db.compacting` is complete only
//! once it holds the `COMPLETE` marker; `db.old` is the original until the
//! new one is in place. [`recover`] finishes or undoes an interrupted swap
//! before the database is opened.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Rewrite when the file is over this size ...
const MIN_SIZE: u64 = 4 << 20;
/// ... and this many times what it holds.
const WASTE_RATIO: u64 = 4;

const MARKER: &str = "COMPLETE";

fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}

/// Finishes or undoes a swap a crash interrupted.
pub fn recover(dir: &Path) -> io::Result<()> {
    let (new, old) = (beside(dir, "compacting"), beside(dir, "old"));
    if new.exists() {
        if new.join(MARKER).exists() && !dir.exists() {
            fs::rename(&new, dir)?;
        } else {
            fs::remove_dir_all(&new)?;
        }
    }
    if old.exists() {
        if dir.exists() {
            fs::remove_dir_all(&old)?;
        } else {
            fs::rename(&old, dir)?;
        }
    }
    let marker = dir.join(MARKER);
    if marker.exists() {
        fs::remove_file(marker)?;
    }
    Ok(())
}

/// Bytes of keys and values in every tree.
fn live_bytes(db: &sled::Db) -> sled::Result<u64> {
    let mut total = 0u64;
    for name in db.tree_names() {
        for item in db.open_tree(name)?.iter() {
            let (k, v) = item?;
            total += (k.len() + v.len()) as u64;
        }
    }
    Ok(total)
}

/// Whether `db` wastes enough space to be rewritten.
pub fn worth_it(db: &sled::Db) -> sled::Result<bool> {
    let size = db.size_on_disk()?;
    Ok(size > MIN_SIZE && size > WASTE_RATIO.saturating_mul(live_bytes(db)?.max(1)))
}

/// Rewrites the (closed) database in `dir` into a fresh one that replaces
/// it; `open` opens a database at a path as the gateway does.
pub fn rewrite(dir: &Path, open: impl Fn(&Path) -> sled::Result<sled::Db>) -> io::Result<()> {
    let (new, old) = (beside(dir, "compacting"), beside(dir, "old"));
    if new.exists() {
        fs::remove_dir_all(&new)?;
    }
    {
        let from = open(dir).map_err(io::Error::other)?;
        let to = open(&new).map_err(io::Error::other)?;
        to.import(from.export());
        to.flush().map_err(io::Error::other)?;
    }
    let marker = fs::File::create(new.join(MARKER))?;
    marker.sync_all()?;
    fs::rename(dir, &old)?;
    fs::rename(&new, dir)?;
    fs::remove_dir_all(&old)?;
    fs::remove_file(dir.join(MARKER))?;
    Ok(())
}
