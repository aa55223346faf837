//! What a command reads: a file, or standard input for `-`, bounded.

use std::io::Read;

use super::CommandError;

/// Largest input file read.
const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Reads a file, or standard input for `-`, up to 16 MiB.
pub fn read_file(path: &str, what: &str) -> Result<Vec<u8>, CommandError> {
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin()
            .take(MAX_INPUT_BYTES)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT_BYTES).read_to_end(&mut bytes))
    };
    result.map_err(|e| CommandError(format!("cannot read {what} from {path}: {e}")))?;
    Ok(bytes)
}
