//! The one error every state backend reports.

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
}
