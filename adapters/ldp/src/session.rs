//! The session state machine (spec "Session Lifecycle"):
//!
//! ```text
//! INITIATING → PROPOSED → ACTIVE → CLOSED
//!                  ↓         ↓
//!               FAILED    SUSPENDED → ACTIVE (resume)
//! ```
//!
//! Which message is legal from whom in which state, the tasks open in a
//! session, and expiry after `ttl_secs` of inactivity. No LDP message
//! suspends a session: the gateway does (its delegate unreachable, its
//! budget spent) and resumes it; a suspended session takes no new task but
//! still takes the answers to tasks already submitted, and a close.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::message::{Body, SessionConfig};
use crate::mode::{negotiate, Negotiated, PayloadMode};
use crate::{Reason, Refusal};

/// Most tasks open at once in one session.
pub const MAX_OPEN_TASKS: usize = 1024;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The router that opened the session.
    Initiator,
    /// The delegate.
    Responder,
}

/// A session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Handshake (HELLO, CAPABILITY_MANIFEST).
    Initiating,
    /// SESSION_PROPOSE sent.
    Proposed,
    /// Accepted: tasks flow.
    Active,
    /// Held by the gateway: no new task.
    Suspended,
    /// Closed by either side, or expired.
    Closed,
    /// Rejected.
    Failed,
}

/// A session as the gateway keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Where it is.
    pub state: State,
    /// Seconds of inactivity it lives.
    pub ttl_secs: u64,
    /// Unix seconds of the last message.
    pub last_used: i64,
    /// The proposal's configuration.
    pub config: Option<SessionConfig>,
    /// The mode and fallback chain, once negotiated.
    pub payload: Option<Negotiated>,
    /// Tasks submitted and not yet ended.
    pub open_tasks: BTreeSet<String>,
    /// Tasks submitted in all.
    pub task_count: u64,
}

fn illegal(kind: &str, from: Side, state: State) -> Refusal {
    Refusal::new(
        Reason::IllegalInState,
        format!("{kind} from the {from:?} is not legal in a {state:?} session").to_lowercase(),
    )
}

impl Session {
    /// A session in its handshake at `now` (Unix seconds).
    pub fn new(now: i64) -> Self {
        Self {
            state: State::Initiating,
            ttl_secs: 3600,
            last_used: now,
            config: None,
            payload: None,
            open_tasks: BTreeSet::new(),
            task_count: 0,
        }
    }

    /// Whether its TTL has passed at `now` (only a live session expires).
    pub fn is_expired(&self, now: i64) -> bool {
        matches!(
            self.state,
            State::Active | State::Suspended | State::Proposed
        ) && now.saturating_sub(self.last_used) >= self.ttl_secs as i64
    }

    /// Applies a message from `from` at `now`: the new state, or why the
    /// message is not legal (nothing changes then). An expired session is
    /// closed and refuses the message.
    pub fn apply(&mut self, from: Side, body: &Body, now: i64) -> Result<State, Refusal> {
        if self.is_expired(now) {
            self.state = State::Closed;
            return Err(Refusal::new(
                Reason::SessionExpired,
                format!(
                    "the session was idle longer than its ttl_secs ({})",
                    self.ttl_secs
                ),
            ));
        }
        let kind = body.kind();
        let next = match (self.state, from, body) {
            (State::Initiating, Side::Initiator, Body::Hello { .. })
            | (State::Initiating, Side::Responder, Body::CapabilityManifest { .. }) => {
                State::Initiating
            }
            (State::Initiating, Side::Initiator, Body::SessionPropose { config }) => {
                self.ttl_secs = config.ttl_secs;
                self.config = Some(config.clone());
                State::Proposed
            }
            (
                State::Proposed,
                Side::Responder,
                Body::SessionAccept {
                    negotiated_mode,
                    fallback_chain,
                    ..
                },
            ) => {
                // The chain the responder gave, else the initiator's
                // implemented preferences below the negotiated mode.
                let preferences = self
                    .config
                    .as_ref()
                    .map(SessionConfig::preferences)
                    .unwrap_or_default();
                let chain = fallback_chain.clone().unwrap_or_else(|| {
                    negotiate(&preferences, &preferences)
                        .fallback_chain
                        .into_iter()
                        .chain(std::iter::once(PayloadMode::Text))
                        .filter(|m| m.number() < negotiated_mode.number())
                        .fold(Vec::new(), |mut v, m| {
                            if !v.contains(&m) {
                                v.push(m);
                            }
                            v
                        })
                });
                self.payload = Some(Negotiated {
                    mode: *negotiated_mode,
                    fallback_chain: chain,
                });
                State::Active
            }
            (State::Proposed, Side::Responder, Body::SessionReject { .. }) => State::Failed,
            (State::Active, Side::Initiator, Body::TaskSubmit { task_id, .. }) => {
                if self.open_tasks.contains(task_id) {
                    return Err(Refusal::new(
                        Reason::IllegalInState,
                        format!("task {task_id:?} is already open in this session"),
                    ));
                }
                if self.open_tasks.len() >= MAX_OPEN_TASKS {
                    return Err(Refusal::new(
                        Reason::IllegalInState,
                        format!("a session may have at most {MAX_OPEN_TASKS} open tasks"),
                    ));
                }
                self.open_tasks.insert(task_id.clone());
                self.task_count += 1;
                State::Active
            }
            (
                State::Active | State::Suspended,
                Side::Responder,
                Body::TaskUpdate { task_id, .. },
            )
            | (
                State::Active | State::Suspended,
                Side::Responder,
                Body::TaskResult { task_id, .. },
            )
            | (
                State::Active | State::Suspended,
                Side::Responder,
                Body::TaskFailed { task_id, .. },
            )
            | (State::Active | State::Suspended, Side::Initiator, Body::TaskCancel { task_id }) => {
                if !self.open_tasks.contains(task_id) {
                    return Err(Refusal::new(
                        Reason::IllegalInState,
                        format!("task {task_id:?} is not open in this session"),
                    ));
                }
                if !matches!(body, Body::TaskUpdate { .. }) {
                    self.open_tasks.remove(task_id);
                }
                self.state
            }
            (State::Active, _, Body::Attestation { .. }) => State::Active,
            (State::Active | State::Suspended | State::Proposed, _, Body::SessionClose { .. }) => {
                State::Closed
            }
            (state, from, _) => return Err(illegal(kind, from, state)),
        };
        self.state = next;
        self.last_used = now;
        Ok(next)
    }

    /// A task in `mode`: the session's mode, or one of its fallback chain,
    /// which the session then falls back to (spec "Mid-session fallback":
    /// down the chain, never back up). Nothing changes on a refusal.
    pub fn use_mode(&mut self, mode: PayloadMode) -> Result<(), Refusal> {
        let Some(payload) = &mut self.payload else {
            return Ok(());
        };
        if payload.mode == mode {
            return Ok(());
        }
        if !payload.fallback_chain.contains(&mode) {
            return Err(Refusal::new(
                Reason::NoFallback,
                format!(
                    "payload mode {} is neither the session's ({}) nor in its fallback chain",
                    mode.as_str(),
                    payload.mode.as_str()
                ),
            ));
        }
        while payload.mode != mode {
            payload.fall_back();
        }
        Ok(())
    }

    /// The gateway holds an active session (no new task).
    pub fn suspend(&mut self) -> Result<(), Refusal> {
        match self.state {
            State::Active => {
                self.state = State::Suspended;
                Ok(())
            }
            s => Err(Refusal::new(
                Reason::IllegalInState,
                format!("a {s:?} session cannot be suspended"),
            )),
        }
    }

    /// The gateway releases a suspended session, unless it expired.
    pub fn resume(&mut self, now: i64) -> Result<(), Refusal> {
        if self.is_expired(now) {
            self.state = State::Closed;
            return Err(Refusal::new(
                Reason::SessionExpired,
                "the session expired while suspended",
            ));
        }
        match self.state {
            State::Suspended => {
                self.state = State::Active;
                self.last_used = now;
                Ok(())
            }
            s => Err(Refusal::new(
                Reason::IllegalInState,
                format!("a {s:?} session cannot be resumed"),
            )),
        }
    }
}
