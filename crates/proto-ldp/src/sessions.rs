//! LDP sessions as dgw keeps them, in the gateway's record store (so a
//! restart or another replica loses nothing): the session machine's
//! state, the reservation of each open task, the router. Changed only by
//! compare-and-swap.

use std::sync::Arc;

use ldp::session::Session;
use serde::{Deserialize, Serialize};

use dgw_core::state::{RecordStore, StorageError};

/// The record space of sessions, keyed `{delegate}/{session_id}`.
pub const SPACE: &str = "ldp_sessions";

/// The record space of tasks, one record each (so a session's record
/// stays the same size however many tasks it runs).
pub const TASKS: &str = "ldp_tasks";

/// What dgw holds of one task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Its reservation while it is open.
    #[serde(default)]
    pub reservation: Option<String>,
    /// The DelegateOS contract it is done under.
    #[serde(default)]
    pub contract: Option<String>,
    /// The attestation of its result.
    #[serde(default)]
    pub attestation: Option<String>,
    /// Its TASK_SUBMIT waits on the delegate: the delegate's answer ends
    /// the reservation, not a cancel (decision 143).
    #[serde(default)]
    pub in_flight: bool,
    /// Cancelled (TASK_CANCEL, its session closed or expired): a result
    /// that comes after is withheld from the router.
    #[serde(default)]
    pub cancelled: bool,
}

/// A session's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The delegate it is with (its name in the config).
    pub delegate: String,
    /// The router that opened it.
    pub router: String,
    /// The router's trust domain, as its proposal named it (else the
    /// delegate's).
    #[serde(default)]
    pub domain: String,
    /// The machine.
    pub session: Session,
    /// Who pays its tasks (and may read it), fixed at SESSION_PROPOSE;
    /// none in a session an older dgw opened (it takes no task).
    #[serde(default)]
    pub payer: Option<Payer>,
    /// Its own budget, when it has one.
    #[serde(default)]
    pub budget: Option<SessionBudget>,
}

/// The sessions.
#[derive(Clone)]
pub struct Sessions {
    records: Arc<dyn RecordStore>,
}

fn key(delegate: &str, session_id: &str) -> String {
    format!("{delegate}/{session_id}")
}

/// A task's key: the session ID length-prefixed, since routers choose
/// both IDs and either may hold a `/`.
fn task_key(delegate: &str, session_id: &str, task_id: &str) -> String {
    format!("{delegate}/{}:{session_id}/{task_id}", session_id.len())
}

fn unreadable(e: serde_json::Error) -> StorageError {
    StorageError::Backend(format!("an LDP record is unreadable: {e}"))
}

/// Why a session change did not happen.
#[derive(Debug, thiserror::Error)]
pub enum Change<E> {
    /// The change refused (nothing written).
    #[error("{0}")]
    Refused(E),
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Sessions {
    /// Sessions in `records`.
    pub fn new(records: Arc<dyn RecordStore>) -> Self {
        Self { records }
    }

    /// The session `session_id` with `delegate`.
    pub async fn get(
        &self,
        delegate: &str,
        session_id: &str,
    ) -> Result<Option<Record>, StorageError> {
        match self.records.get(SPACE, &key(delegate, session_id)).await? {
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                StorageError::Backend(format!("an LDP session record is unreadable: {e}"))
            }),
            None => Ok(None),
        }
    }

    /// Stores a new session; `false` if the ID is taken.
    pub async fn create(&self, session_id: &str, record: &Record) -> Result<bool, StorageError> {
        let value =
            serde_json::to_value(record).map_err(|e| StorageError::Backend(e.to_string()))?;
        self.records
            .insert_new(SPACE, &key(&record.delegate, session_id), &value)
            .await
    }

    /// Forgets a session that never opened (its proposal answered under
    /// another ID).
    pub async fn remove(&self, delegate: &str, session_id: &str) -> Result<(), StorageError> {
        self.records
            .remove(SPACE, &key(delegate, session_id))
            .await
            .map(drop)
    }

    /// Changes a session by `change` (retried on a concurrent change): the
    /// record as changed, with what `change` returned.
    pub async fn update<T, E>(
        &self,
        delegate: &str,
        session_id: &str,
        mut change: impl FnMut(&mut Record) -> Result<T, E>,
    ) -> Result<Option<(Record, T)>, Change<E>> {
        let k = key(delegate, session_id);
        loop {
            let Some(old) = self.records.get(SPACE, &k).await? else {
                return Ok(None);
            };
            let mut record: Record = serde_json::from_value(old.clone()).map_err(|e| {
                StorageError::Backend(format!("an LDP session record is unreadable: {e}"))
            })?;
            let out = change(&mut record).map_err(Change::Refused)?;
            let new =
                serde_json::to_value(&record).map_err(|e| StorageError::Backend(e.to_string()))?;
            if self.records.replace(SPACE, &k, &old, &new).await? {
                return Ok(Some((record, out)));
            }
        }
    }

    /// What dgw holds of a task.
    pub async fn task(
        &self,
        delegate: &str,
        session_id: &str,
        task_id: &str,
    ) -> Result<Option<TaskRecord>, StorageError> {
        let k = task_key(delegate, session_id, task_id);
        match self.records.get(TASKS, &k).await? {
            Some(v) => serde_json::from_value(v).map(Some).map_err(unreadable),
            None => Ok(None),
        }
    }

    /// Stores a new task's record; `false` if the session had a task of
    /// that ID before.
    pub async fn create_task(
        &self,
        delegate: &str,
        session_id: &str,
        task_id: &str,
        record: &TaskRecord,
    ) -> Result<bool, StorageError> {
        let value = serde_json::to_value(record).map_err(unreadable)?;
        let k = task_key(delegate, session_id, task_id);
        self.records.insert_new(TASKS, &k, &value).await
    }

    /// Forgets a task that never opened.
    pub async fn remove_task(
        &self,
        delegate: &str,
        session_id: &str,
        task_id: &str,
    ) -> Result<(), StorageError> {
        let k = task_key(delegate, session_id, task_id);
        self.records.remove(TASKS, &k).await.map(drop)
    }

    /// Changes a task's record by `change` (an empty one if there is none;
    /// retried on a concurrent change); the record as changed.
    pub async fn update_task(
        &self,
        delegate: &str,
        session_id: &str,
        task_id: &str,
        mut change: impl FnMut(&mut TaskRecord),
    ) -> Result<TaskRecord, StorageError> {
        let k = task_key(delegate, session_id, task_id);
        loop {
            let old = self.records.get(TASKS, &k).await?;
            let mut record: TaskRecord = match &old {
                Some(v) => serde_json::from_value(v.clone()).map_err(unreadable)?,
                None => TaskRecord::default(),
            };
            change(&mut record);
            let new = serde_json::to_value(&record).map_err(unreadable)?;
            let done = match &old {
                Some(old) => self.records.replace(TASKS, &k, old, &new).await?,
                None => self.records.insert_new(TASKS, &k, &new).await?,
            };
            if done {
                return Ok(record);
            }
        }
    }

    /// Every session, with its ID.
    pub async fn all(&self) -> Result<Vec<(String, Record)>, StorageError> {
        Ok(self
            .records
            .scan(SPACE)
            .await?
            .into_iter()
            .filter_map(|(k, v)| {
                let id = k.split_once('/')?.1.to_owned();
                Some((id, serde_json::from_value(v).ok()?))
            })
            .collect())
    }
}

/// Who pays a session's tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payer {
    /// The delegation of the DCT presented with SESSION_PROPOSE; every
    /// task presents a DCT of it again (checked afresh: revocation, expiry).
    Delegation {
        /// Its ID.
        delegation_id: String,
    },
    /// The router's paying trust domain (`[[ldp.domains]]`), no DCT.
    Domain {
        /// Its name.
        name: String,
    },
}

impl Payer {
    /// The delegation, when a DCT pays.
    pub fn delegation(&self) -> Option<&str> {
        match self {
            Payer::Delegation { delegation_id } => Some(delegation_id),
            Payer::Domain { .. } => None,
        }
    }
}

/// A session's own budget: a level below its payer's last one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionBudget {
    /// The level's name under the payer's last level.
    pub level: String,
    /// Its ledger key (for reports).
    pub key: String,
    /// The most the session may spend.
    pub budget_microcents: u64,
}
