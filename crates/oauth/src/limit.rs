//! The token endpoint's rate limits (issue 35): a fixed window of requests
//! per key (a source address, an authenticated client), with a bounded
//! number of keys, so neither guessing secrets nor minting tokens can run
//! at line rate, and the table itself cannot grow without bound.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many requests per `window` per key.
#[derive(Debug)]
pub struct RateLimit {
    per_window: u32,
    window: Duration,
    max_keys: usize,
    counts: Mutex<HashMap<String, (Instant, u32)>>,
}

impl RateLimit {
    pub fn new(per_window: u32, window: Duration, max_keys: usize) -> Self {
        Self {
            per_window,
            window,
            max_keys,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request of `key` at `now`; whether it is within the limit.
    /// A new key when the table is full (after dropping ended windows) is
    /// refused: a flood of sources is limited as one.
    pub fn allow(&self, key: &str, now: Instant) -> bool {
        let mut counts = match self.counts.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((start, n)) = counts.get_mut(key) {
            if now.duration_since(*start) >= self.window {
                *start = now;
                *n = 0;
            }
            *n += 1;
            return *n <= self.per_window;
        }
        if counts.len() >= self.max_keys {
            let window = self.window;
            counts.retain(|_, (start, _)| now.duration_since(*start) < window);
            if counts.len() >= self.max_keys {
                return false;
            }
        }
        counts.insert(key.to_owned(), (now, 1));
        self.per_window >= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_gets_its_window_and_the_table_is_bounded() {
        let limit = RateLimit::new(3, Duration::from_secs(60), 2);
        let t0 = Instant::now();
        assert!((0..3).all(|_| limit.allow("a", t0)));
        assert!(!limit.allow("a", t0));
        assert!(limit.allow("b", t0));
        // Full: a third key is refused while the others' windows run…
        assert!(!limit.allow("c", t0 + Duration::from_secs(1)));
        // …and taken once they end, as is "a" again.
        let later = t0 + Duration::from_secs(61);
        assert!(limit.allow("c", later));
        assert!(limit.allow("a", later));
    }
}
