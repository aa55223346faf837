//! The rounds of one logical 2026-07-28 call (issue 33). An upstream that
//! needs the caller's input answers `resultType: "input_required"` with a
//! `requestState`; the caller re-sends the call with its answers and that
//! state. dgw remembers a digest of each state it passed out, bound to the
//! credential and tool of the call, so the fulfilled retry is the same
//! logical call, already charged: enforced again, charged nothing. A retry
//! with a state dgw never passed out (forged), already used (replayed),
//! expired, or passed out to another credential or tool is refused. The
//! state itself passes through untouched: only the upstream reads it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use blake2::{Blake2b, Digest};
use dgw_core::caller::HolderDigest;

/// Most states remembered at once; past it the one expiring soonest is
/// forgotten (its retry is then refused, never charged twice).
pub const MAX_STATES: usize = 10_000;

/// How long a passed-out state may be used.
pub const STATE_TTL: Duration = Duration::from_secs(600);

type Key = [u8; 32];

struct Entry {
    holder: HolderDigest,
    tool: String,
    expires: Instant,
}

/// Why a retry's `requestState` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateRefusal {
    #[error("dgw did not pass out this requestState, or it was used already or expired: start the call again")]
    Unknown,
    #[error("this requestState was passed out to another credential")]
    OtherCredential,
    #[error("this requestState was passed out for another tool")]
    OtherTool,
}

impl StateRefusal {
    pub fn kind(self) -> &'static str {
        match self {
            StateRefusal::Unknown => "request_state_unknown",
            StateRefusal::OtherCredential => "request_state_credential_mismatch",
            StateRefusal::OtherTool => "request_state_tool_mismatch",
        }
    }
}

/// The states passed out and not yet used.
#[derive(Default)]
pub struct RequestStates {
    states: Mutex<HashMap<Key, Entry>>,
}

fn key(state: &str) -> Key {
    let mut h = Blake2b::<blake2::digest::consts::U32>::new();
    h.update(state.as_bytes());
    h.finalize().into()
}

impl RequestStates {
    /// Remembers `state`, passed out on `holder`'s call of `tool`.
    pub fn remember(&self, state: &str, holder: HolderDigest, tool: &str) {
        self.remember_at(state, holder, tool, Instant::now());
    }

    fn remember_at(&self, state: &str, holder: HolderDigest, tool: &str, now: Instant) {
        let mut states = self.lock();
        if states.len() >= MAX_STATES {
            states.retain(|_, e| e.expires > now);
        }
        if states.len() >= MAX_STATES {
            let soonest = states
                .iter()
                .min_by_key(|(_, e)| e.expires)
                .map(|(k, _)| *k);
            if let Some(k) = soonest {
                states.remove(&k);
            }
        }
        states.insert(
            key(state),
            Entry {
                holder,
                tool: tool.to_owned(),
                expires: now + STATE_TTL,
            },
        );
    }

    /// Takes `state` for `holder`'s retry of `tool`: used up when it
    /// matches; left for its own holder when it does not.
    pub fn take(&self, state: &str, holder: &HolderDigest, tool: &str) -> Result<(), StateRefusal> {
        self.take_at(state, holder, tool, Instant::now())
    }

    fn take_at(
        &self,
        state: &str,
        holder: &HolderDigest,
        tool: &str,
        now: Instant,
    ) -> Result<(), StateRefusal> {
        let mut states = self.lock();
        let k = key(state);
        let e = states.get(&k).ok_or(StateRefusal::Unknown)?;
        if e.expires <= now {
            states.remove(&k);
            return Err(StateRefusal::Unknown);
        }
        if !e.holder.matches(holder) {
            return Err(StateRefusal::OtherCredential);
        }
        if e.tool != tool {
            return Err(StateRefusal::OtherTool);
        }
        states.remove(&k);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(s: &str) -> HolderDigest {
        HolderDigest::of(s)
    }

    #[test]
    fn a_state_is_taken_once_by_its_own_credential_and_tool() {
        let s = RequestStates::default();
        s.remember("st", holder("a"), "t");
        assert_eq!(
            s.take("forged", &holder("a"), "t"),
            Err(StateRefusal::Unknown)
        );
        assert_eq!(
            s.take("st", &holder("b"), "t"),
            Err(StateRefusal::OtherCredential)
        );
        assert_eq!(
            s.take("st", &holder("a"), "u"),
            Err(StateRefusal::OtherTool)
        );
        assert_eq!(s.take("st", &holder("a"), "t"), Ok(()));
        assert_eq!(s.take("st", &holder("a"), "t"), Err(StateRefusal::Unknown));
    }

    #[test]
    fn states_expire_and_stay_bounded() {
        let s = RequestStates::default();
        let now = Instant::now();
        s.remember_at("old", holder("a"), "t", now);
        let later = now + STATE_TTL + Duration::from_secs(1);
        assert_eq!(
            s.take_at("old", &holder("a"), "t", later),
            Err(StateRefusal::Unknown)
        );
        for i in 0..MAX_STATES + 10 {
            s.remember_at(
                &format!("s{i}"),
                holder("a"),
                "t",
                now + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(s.lock().len(), MAX_STATES);
        // The soonest-expiring went first; the newest stays.
        assert_eq!(
            s.take_at(&format!("s{}", MAX_STATES + 9), &holder("a"), "t", now),
            Ok(())
        );
        assert_eq!(
            s.take_at("s0", &holder("a"), "t", now),
            Err(StateRefusal::Unknown)
        );
    }
}
