//! The rounds of one logical 2026-07-28 call (issue 33). An upstream that
//! needs the caller's input answers `resultType: "input_required"` with a
//! `requestState`; the caller re-sends the call with its answers and that
//! state. dgw remembers a digest of each state it passed out, bound to the
//! credential and tool of the call, so the fulfilled retry is the same
//! logical call, already charged: enforced again, charged nothing. A retry
//! with a state dgw never passed out (forged), already used (replayed),
//! expired, or passed out to another credential or tool is refused. The
//! state itself passes through untouched: only the upstream reads it.
//! Replicas sharing a state backend share the table ([`Shared`]), so a
//! retry may reach any of them (decision 452).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blake2::{Blake2b, Digest};
use dgw_core::caller::HolderDigest;
use dgw_core::state::{Capped, RecordStore};
use serde_json::{json, Value};

/// The record space of the shared table.
const SPACE: &str = "mcp_request_states";

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
    #[error("the state backend that keeps passed-out requestStates did not answer: try again")]
    Unavailable,
}

impl StateRefusal {
    pub fn kind(self) -> &'static str {
        match self {
            StateRefusal::Unknown => "request_state_unknown",
            StateRefusal::OtherCredential => "request_state_credential_mismatch",
            StateRefusal::OtherTool => "request_state_tool_mismatch",
            StateRefusal::Unavailable => "request_state_unavailable",
        }
    }
}

/// The states passed out and not yet used: this replica's own table, or
/// the one replicas share.
#[derive(Default)]
pub struct RequestStates {
    states: Mutex<HashMap<Key, Entry>>,
    shared: Option<Shared>,
}

fn key(state: &str) -> Key {
    let mut h = Blake2b::<blake2::digest::consts::U32>::new();
    h.update(state.as_bytes());
    h.finalize().into()
}

impl RequestStates {
    /// A table kept in `records`, which every replica sharing them reads.
    pub fn shared(records: Arc<dyn RecordStore>) -> Self {
        Self {
            shared: Some(Shared {
                records,
                remembered: AtomicU64::new(0),
            }),
            ..Self::default()
        }
    }

    /// Remembers `state`, passed out on `holder`'s call of `tool`.
    pub async fn remember(&self, state: &str, holder: HolderDigest, tool: &str) {
        match &self.shared {
            Some(shared) => shared.remember(&key(state), holder, tool).await,
            None => self.remember_at(state, holder, tool, Instant::now()),
        }
    }

    /// Takes `state` for `holder`'s retry of `tool`: used up when it
    /// matches; left for its own holder when it does not.
    pub async fn take(
        &self,
        state: &str,
        holder: &HolderDigest,
        tool: &str,
    ) -> Result<(), StateRefusal> {
        match &self.shared {
            Some(shared) => shared.take(&key(state), holder, tool).await,
            None => self.take_at(state, holder, tool, Instant::now()),
        }
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

/// The table in the state backend: one record per state, under the hex
/// of its digest, holding the credential's digest, the tool and when it
/// expires (Unix ms). At most [`MAX_STATES`] (the backend's atomic cap);
/// full, the expired go first, then the one expiring soonest.
struct Shared {
    records: Arc<dyn RecordStore>,
    /// States remembered, so every so often one also sweeps.
    remembered: AtomicU64,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A record's expiry, when it is one of ours.
fn expires_of(record: &Value) -> Option<u64> {
    record.get("expiresMs").and_then(Value::as_u64)
}

impl Shared {
    async fn remember(&self, key: &Key, holder: HolderDigest, tool: &str) {
        let id = hex::encode(key);
        let record = json!({
            "holder": hex::encode(holder.0),
            "tool": tool,
            "expiresMs": unix_ms() + STATE_TTL.as_millis() as u64,
        });
        let sweep = self.remembered.fetch_add(1, Ordering::Relaxed) % 64 == 63;
        for attempt in 0..3 {
            if sweep || attempt > 0 {
                self.make_room(attempt > 1).await;
            }
            match self
                .records
                .insert_capped(SPACE, &id, &record, MAX_STATES)
                .await
            {
                Ok(Capped::Inserted | Capped::Taken) => return,
                Ok(Capped::Full) => continue,
                Err(e) => {
                    // Its retry is then refused as unknown: charged again
                    // as a new call, never free.
                    tracing::warn!(error = %e, "could not keep a requestState passed out");
                    return;
                }
            }
        }
        tracing::warn!("the shared requestState table stayed full; one was not kept");
    }

    /// Forgets the expired states; with `evict`, also the one expiring
    /// soonest.
    async fn make_room(&self, evict: bool) {
        let Ok(all) = self.records.scan(SPACE).await else {
            return;
        };
        let now = unix_ms();
        let mut soonest: Option<(u64, &str)> = None;
        for (id, record) in &all {
            match expires_of(record) {
                Some(at) if at > now => {
                    if soonest.is_none_or(|(s, _)| at < s) {
                        soonest = Some((at, id));
                    }
                }
                _ => {
                    let _ = self.records.remove(SPACE, id).await;
                }
            }
        }
        if let (true, Some((_, id))) = (evict, soonest) {
            let _ = self.records.remove(SPACE, id).await;
        }
    }

    async fn take(&self, key: &Key, holder: &HolderDigest, tool: &str) -> Result<(), StateRefusal> {
        let id = hex::encode(key);
        let unavailable = |e: dgw_core::state::StorageError| {
            tracing::warn!(error = %e, "could not read the shared requestState table");
            StateRefusal::Unavailable
        };
        let record = self
            .records
            .get(SPACE, &id)
            .await
            .map_err(unavailable)?
            .ok_or(StateRefusal::Unknown)?;
        if expires_of(&record).is_none_or(|at| at <= unix_ms()) {
            let _ = self.records.remove(SPACE, &id).await;
            return Err(StateRefusal::Unknown);
        }
        let bound = record
            .get("holder")
            .and_then(Value::as_str)
            .and_then(|h| hex::decode(h).ok())
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .map(HolderDigest);
        if !bound.is_some_and(|b| b.matches(holder)) {
            return Err(StateRefusal::OtherCredential);
        }
        if record.get("tool").and_then(Value::as_str) != Some(tool) {
            return Err(StateRefusal::OtherTool);
        }
        // Only one retry removes it: a replay racing on another replica
        // finds it gone.
        if self.records.remove(SPACE, &id).await.map_err(unavailable)? {
            Ok(())
        } else {
            Err(StateRefusal::Unknown)
        }
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
        s.remember_at("st", holder("a"), "t", Instant::now());
        assert_eq!(
            s.take_at("forged", &holder("a"), "t", Instant::now()),
            Err(StateRefusal::Unknown)
        );
        assert_eq!(
            s.take_at("st", &holder("b"), "t", Instant::now()),
            Err(StateRefusal::OtherCredential)
        );
        assert_eq!(
            s.take_at("st", &holder("a"), "u", Instant::now()),
            Err(StateRefusal::OtherTool)
        );
        assert_eq!(s.take_at("st", &holder("a"), "t", Instant::now()), Ok(()));
        assert_eq!(
            s.take_at("st", &holder("a"), "t", Instant::now()),
            Err(StateRefusal::Unknown)
        );
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
