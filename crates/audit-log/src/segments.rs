//! Segment files: `<first seq, 20 digits>.jsonl` in the log's directory,
//! read in name order.

use std::path::{Path, PathBuf};

use crate::AuditError;

pub(crate) const SUFFIX: &str = ".jsonl";

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
    move |source| AuditError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The file name of the segment whose first record is `seq`.
pub(crate) fn name(seq: u64) -> String {
    format!("{seq:020}{SUFFIX}")
}

/// The segments in `dir`, oldest first, with their first sequence numbers.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, AuditError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let file = entry.file_name();
        let Some(stem) = file.to_str().and_then(|f| f.strip_suffix(SUFFIX)) else {
            continue;
        };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(seq) = stem.parse::<u64>() {
                out.push((seq, entry.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}
