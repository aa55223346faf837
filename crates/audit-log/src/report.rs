//! What reading the chain back found (`verify`, and the scan under it and
//! under the writer's start): the types both fill and read, in a module of
//! their own so neither uses the other for them.

/// Something wrong with the log, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `file:line`.
    pub at: String,
    pub message: String,
}

/// What a verification found.
#[derive(Debug, Default)]
pub struct Report {
    pub segments: usize,
    pub records: u64,
    /// The first and last sequence numbers read.
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// The last valid seal (which covers itself).
    pub sealed_through: Option<u64>,
    /// Whether the log ends with the gateway's shutdown seal.
    pub closed: bool,
    pub problems: Vec<Problem>,
}

impl Report {
    /// Records after the last valid seal (not signed yet: the writer seals
    /// every `seal_interval`, at exit, and at the start after a crash).
    pub fn unsealed(&self) -> u64 {
        match (self.last, self.sealed_through) {
            (Some(last), Some(sealed)) => last.saturating_sub(sealed),
            (Some(_), None) => self.records,
            _ => 0,
        }
    }
}
