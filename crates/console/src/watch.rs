//! What the console follows while it runs: the decision stream (the live
//! decisions page), and samples of what each budget node has spent, for
//! its spend rate over the last 15 minutes. All bounded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use dgw_core::gatekeeper::{DecisionEvent, Gatekeeper};

/// Decisions kept for the live page.
pub const LIVE_DECISIONS: usize = 500;
/// Budget nodes whose spend is sampled.
const SAMPLED_NODES: usize = 4096;
/// The spend-rate window.
pub const RATE_WINDOW: Duration = Duration::from_secs(15 * 60);

/// One node's spend samples: (Unix ms, spent microcents), oldest first.
type Samples = VecDeque<(u64, u64)>;

#[derive(Default)]
struct Seen {
    live: VecDeque<Arc<DecisionEvent>>,
    samples: BTreeMap<String, Samples>,
}

/// The console's followers.
#[derive(Default)]
pub struct Watch {
    seen: Mutex<Seen>,
}

fn lock(m: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watch {
    /// Follows `gate`'s decisions until the watch is dropped.
    pub fn follow(self: &Arc<Self>, gate: &Gatekeeper) {
        let mut rx = gate.subscribe();
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let event = match rx.recv().await {
                    Ok(e) => e,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                let Some(watch) = weak.upgrade() else {
                    return;
                };
                watch.saw(event);
            }
        });
    }

    fn saw(&self, event: Arc<DecisionEvent>) {
        let mut seen = lock(&self.seen);
        seen.live.push_back(event);
        while seen.live.len() > LIVE_DECISIONS {
            seen.live.pop_front();
        }
    }

    /// The live decisions, newest first.
    pub fn live(&self) -> Vec<Arc<DecisionEvent>> {
        lock(&self.seen).live.iter().rev().cloned().collect()
    }

    /// Records `spent` for `node` at `now_ms`; its spend rate over the
    /// window, in microcents per second (`None`: not sampled long enough).
    pub fn sample(&self, node: &str, spent: u64, now_ms: u64) -> Option<f64> {
        let mut seen = lock(&self.seen);
        if !seen.samples.contains_key(node) && seen.samples.len() >= SAMPLED_NODES {
            return None;
        }
        let samples = seen.samples.entry(node.to_owned()).or_default();
        let window = RATE_WINDOW.as_millis() as u64;
        while samples
            .front()
            .is_some_and(|(t, _)| now_ms.saturating_sub(*t) > window)
        {
            samples.pop_front();
        }
        if samples
            .back()
            .is_none_or(|(t, _)| now_ms.saturating_sub(*t) >= 1_000)
        {
            samples.push_back((now_ms, spent));
        }
        let (t0, s0) = *samples.front()?;
        let elapsed = now_ms.saturating_sub(t0);
        if elapsed < 1_000 {
            return None;
        }
        Some(spent.saturating_sub(s0) as f64 / (elapsed as f64 / 1000.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spend_rate_is_over_the_window() {
        let w = Watch::default();
        assert_eq!(w.sample("a", 0, 1_000_000), None);
        // 10 s later, 100 spent: 10 per second.
        assert_eq!(w.sample("a", 100, 1_010_000), Some(10.0));
        // Past the window, the old samples no longer count.
        let later = 1_010_000 + RATE_WINDOW.as_millis() as u64 + 5_000;
        assert_eq!(w.sample("a", 100, later), None);
        assert_eq!(w.sample("a", 130, later + 10_000), Some(3.0));
    }
}
