//! Key pinning, trust on first use (motebit-delegation "Key pinning"): the
//! first key dgw verifies for a `motebit_id` is pinned in the gateway's
//! state; another key for that ID later is refused (`key_mismatch`) until
//! an administrator pins a key again (`dgw motebit pin`, `motebit/pin`).
//!
//! Who may make a pin matters as much as the pin (issue 30): a delegate
//! chooses the ids and keys of the hops it adds, so a chain's word pins
//! only the id a configured delegator itself named (its root token's
//! delegate), and only once the whole request is authorized. A configured
//! delegator's key is the configured one, never a pin. A mismatch refuses
//! the request and writes nothing, so naming someone else's id cuts no one
//! off. Decisions 157-159.

use std::sync::Arc;

use dgw_core::state::{RecordStore, StorageError};
use motebit::token::DelegationToken;
use motebit::{Failure, Reason};
use serde_json::{json, Value};

use super::MotebitConfig;

/// The record space of pins, keyed by `motebit_id`.
pub const SPACE: &str = "motebit_pins";

/// The pins, over the gateway's record store.
#[derive(Clone)]
pub struct Pins {
    records: Arc<dyn RecordStore>,
}

/// A pin as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Pin {
    /// The pinned key, hex.
    pub public_key: String,
    /// Who pinned it: `first_use` or `admin:<name>`.
    pub by: String,
    /// When, epoch ms.
    pub at: u64,
    /// Set by versions before issue 30, which severed an ID when another
    /// key was presented for it: such a pin refuses every key until an
    /// administrator pins again. Nothing sets it now.
    pub severed_by: Option<String>,
}

impl Pin {
    /// Whether this pin lets `key_hex` through for `motebit_id`.
    fn admits(&self, motebit_id: &str, key_hex: &str) -> Result<(), PinError> {
        if self.severed_by.is_some() {
            return Err(Failure::new(
                Reason::KeyMismatch,
                format!("{motebit_id:?} was severed (another key was presented for it) until an administrator pins a key"),
            )
            .into());
        }
        if self.public_key != key_hex {
            return Err(Failure::new(
                Reason::KeyMismatch,
                format!("{motebit_id:?} is pinned to another key (an administrator re-pins after a rotation)"),
            )
            .into());
        }
        Ok(())
    }

    fn to_json(&self) -> Value {
        json!({"public_key": self.public_key, "by": self.by, "at": self.at,
               "severed_by": self.severed_by})
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            public_key: v.get("public_key")?.as_str()?.to_owned(),
            by: v.get("by")?.as_str()?.to_owned(),
            at: v.get("at")?.as_u64()?,
            severed_by: v
                .get("severed_by")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

/// Why a pin check could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The key is refused.
    #[error(transparent)]
    Refused(#[from] Failure),
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Pins {
    /// The pins in `records`.
    pub fn new(records: Arc<dyn RecordStore>) -> Self {
        Self { records }
    }

    /// The pin of `motebit_id`.
    pub async fn get(&self, motebit_id: &str) -> Result<Option<Pin>, StorageError> {
        Ok(self
            .records
            .get(SPACE, motebit_id)
            .await?
            .as_ref()
            .and_then(Pin::from_json))
    }

    /// Checks `key_hex` (lowercase hex, already verified) against the pin
    /// of `motebit_id`, writing nothing: `true` when it is pinned to this
    /// key, `false` when nothing is pinned for it.
    pub async fn admit(&self, motebit_id: &str, key_hex: &str) -> Result<bool, PinError> {
        match self.get(motebit_id).await? {
            None => Ok(false),
            Some(pin) => pin.admits(motebit_id, key_hex).map(|()| true),
        }
    }

    /// Pins `key_hex` for `motebit_id` when nothing is pinned for it (first
    /// use, once what used it was authorized or verified); the pin already
    /// there must be this key. A mismatch writes nothing.
    pub async fn first_use(
        &self,
        motebit_id: &str,
        key_hex: &str,
        now: u64,
    ) -> Result<(), PinError> {
        let pin = Pin {
            public_key: key_hex.to_owned(),
            by: "first_use".into(),
            at: now,
            severed_by: None,
        };
        if self
            .records
            .insert_new(SPACE, motebit_id, &pin.to_json())
            .await?
        {
            return Ok(());
        }
        match self.get(motebit_id).await? {
            Some(pin) => pin.admits(motebit_id, key_hex),
            // Unpinned meanwhile by an administrator: the next use pins.
            None => Ok(()),
        }
    }

    /// Checks the ids and keys of a delegation chain, writing nothing; the
    /// first-use pin to write once the request is authorized, if any.
    ///
    /// - One id with two keys in the chain is refused.
    /// - A configured delegator's id must have its configured key; its
    ///   pins are neither read nor written.
    /// - Every other id must match its pin, if it has one.
    /// - Only the root token's delegate, named by a configured delegator,
    ///   is pinned on first use; a deeper hop's id is its delegator's
    ///   word, which pins nothing.
    pub async fn check_chain(
        &self,
        chain: &[DelegationToken],
        config: &MotebitConfig,
    ) -> Result<Result<Option<(String, String)>, Failure>, StorageError> {
        let mut parties: Vec<(&str, &str)> = Vec::new();
        for t in chain {
            for (id, key) in [
                (&t.delegator_id, &t.delegator_public_key),
                (&t.delegate_id, &t.delegate_public_key),
            ] {
                match parties.iter().find(|(seen, _)| *seen == id.as_str()) {
                    Some((_, k)) if *k == key.as_str() => {}
                    Some(_) => {
                        return Ok(Err(Failure::new(
                            Reason::KeyMismatch,
                            format!("{id:?} appears in the delegation chain with two keys"),
                        )))
                    }
                    None => parties.push((id, key)),
                }
            }
        }
        let mut unseen = Vec::new();
        for (id, key) in parties {
            if let Some(configured) = config.key_of(id) {
                if motebit::encoding::key_hex(configured) != key {
                    return Ok(Err(Failure::new(
                        Reason::KeyMismatch,
                        format!(
                            "{id:?} is a configured delegator, and this is not its configured key"
                        ),
                    )));
                }
                continue;
            }
            match self.admit(id, key).await {
                Ok(true) => {}
                Ok(false) => unseen.push(id),
                Err(PinError::Refused(f)) => return Ok(Err(f)),
                Err(PinError::Storage(e)) => return Err(e),
            }
        }
        Ok(Ok(chain.first().and_then(|root| {
            unseen
                .contains(&root.delegate_id.as_str())
                .then(|| (root.delegate_id.clone(), root.delegate_public_key.clone()))
        })))
    }

    /// An administrator pins `key_hex` for `motebit_id` (clearing a
    /// severance); the previous pin, if any.
    pub async fn pin(
        &self,
        motebit_id: &str,
        key_hex: &str,
        by: &str,
        now: u64,
    ) -> Result<Option<Pin>, StorageError> {
        let pin = Pin {
            public_key: key_hex.to_owned(),
            by: format!("admin:{by}"),
            at: now,
            severed_by: None,
        };
        loop {
            match self.records.get(SPACE, motebit_id).await? {
                None => {
                    if self
                        .records
                        .insert_new(SPACE, motebit_id, &pin.to_json())
                        .await?
                    {
                        return Ok(None);
                    }
                }
                Some(old) => {
                    if self
                        .records
                        .replace(SPACE, motebit_id, &old, &pin.to_json())
                        .await?
                    {
                        return Ok(Pin::from_json(&old));
                    }
                }
            }
        }
    }

    /// Forgets the pin of `motebit_id` (the next key seen is pinned).
    pub async fn unpin(&self, motebit_id: &str) -> Result<bool, StorageError> {
        self.records.remove(SPACE, motebit_id).await
    }

    /// The pinned key of `motebit_id`, unless severed (for verdicts).
    pub async fn pinned_key(&self, motebit_id: &str) -> Result<Option<String>, StorageError> {
        Ok(self.get(motebit_id).await?.map(|p| p.public_key))
    }
}

impl super::Motebit {
    /// The key dgw holds for `motebit_id`: a configured delegator's
    /// configured key, else its pin.
    pub(super) async fn known_key(&self, motebit_id: &str) -> Result<Option<String>, StorageError> {
        if let Some(key) = self.config.load().key_of(motebit_id) {
            return Ok(Some(motebit::encoding::key_hex(key)));
        }
        self.pins.pinned_key(motebit_id).await
    }

    /// Writes a first-use pin for an authorized request. The request goes
    /// on whatever happens here: a pin another request made meanwhile
    /// (another key) stays, and refuses the next request with this key.
    pub(super) async fn pin_first_use(&self, motebit_id: &str, key_hex: &str) {
        match self
            .pins
            .first_use(motebit_id, key_hex, super::now_ms())
            .await
        {
            Ok(()) => {}
            Err(PinError::Refused(f)) => {
                tracing::warn!(motebit_id, detail = %f.detail, "another key was pinned first");
            }
            Err(PinError::Storage(e)) => {
                tracing::error!(motebit_id, error = %e, "writing a first-use pin failed");
            }
        }
    }
}
