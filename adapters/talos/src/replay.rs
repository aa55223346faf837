//! §6: the replay cache. Each session remembers the last 10,000 correlation
//! IDs (least recently seen evicted first). A pure data structure; the
//! gateway persists what it records so a restart does not reopen the window.

use std::collections::{HashMap, VecDeque};

/// Correlation IDs remembered per session.
pub const PER_SESSION: usize = 10_000;

/// Correlation IDs seen, per session.
#[derive(Debug, Default)]
pub struct ReplayCache {
    sessions: HashMap<String, Session>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Session {
    /// (ID, tick of that use), oldest first; an entry whose tick is not the
    /// ID's latest is stale and skipped.
    order: VecDeque<(String, u64)>,
    seen: HashMap<String, u64>,
    tick: u64,
}

impl ReplayCache {
    /// A cache of [`PER_SESSION`] IDs per session.
    pub fn new() -> Self {
        Self::with_capacity(PER_SESSION)
    }

    /// A cache keeping `capacity` IDs per session.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            sessions: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records `correlation_id` in `session`; false when it was already
    /// there (a replay). A replay counts as a use, so it stays remembered.
    pub fn record(&mut self, session: &str, correlation_id: &str) -> bool {
        let capacity = self.capacity;
        let s = self.sessions.entry(session.to_owned()).or_default();
        s.tick += 1;
        let tick = s.tick;
        let fresh = s.seen.insert(correlation_id.to_owned(), tick).is_none();
        s.order.push_back((correlation_id.to_owned(), tick));
        while s.seen.len() > capacity {
            let Some((id, t)) = s.order.pop_front() else {
                break;
            };
            if s.seen.get(&id) == Some(&t) {
                s.seen.remove(&id);
            }
        }
        if s.order.len() > 2 * capacity + 16 {
            let seen = &s.seen;
            s.order.retain(|(id, t)| seen.get(id) == Some(t));
        }
        fresh
    }

    /// Whether `correlation_id` is remembered in `session`.
    pub fn contains(&self, session: &str, correlation_id: &str) -> bool {
        self.sessions
            .get(session)
            .is_some_and(|s| s.seen.contains_key(correlation_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_are_caught_per_session_and_the_oldest_are_forgotten() {
        let mut c = ReplayCache::with_capacity(3);
        assert!(c.record("s", "a"));
        assert!(!c.record("s", "a"));
        assert!(c.record("t", "a"), "another session");
        for id in ["b", "c", "d"] {
            assert!(c.record("s", id));
        }
        // Capacity 3: "a" (least recently used) is gone, b c d remain.
        assert!(!c.contains("s", "a"));
        assert!(c.contains("s", "b") && c.contains("s", "d"));
        // Using "b" again keeps it; "c" becomes the oldest.
        assert!(!c.record("s", "b"));
        assert!(c.record("s", "e"));
        assert!(!c.contains("s", "c"));
        assert!(c.contains("s", "b"));
    }
}
