//! The one failure every store reports: the state traits' (`state`) and
//! the budget stores' (`budget::LedgerError::Storage`) alike. A leaf of its
//! own, so `budget` (the vocabulary) and `state` (the traits over it) can
//! both use it while `state` uses `budget` and never the reverse.

/// A storage failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The backend failed (an I/O error, a lost connection).
    #[error("storage: {0}")]
    Backend(String),
    #[error("stored value under {key:?} in {tree} is unreadable: {problem}")]
    Corrupt {
        tree: &'static str,
        key: String,
        problem: String,
    },
    #[error("storage is shutting down")]
    Closed,
    /// The shared state cannot be reached now (a Redis down or cut off):
    /// decisions that need it are refused until it is back.
    #[error("state unavailable: {0}")]
    Unavailable(String),
}
