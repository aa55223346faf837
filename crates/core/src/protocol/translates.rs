//! A protocol's translation job: its messages as DelegateOS contracts and
//! attestations, and back.

use delegateos::attestation::{Attestation, AttestationDraft};
use delegateos::contract::ContractDraft;
use serde_json::Value;

/// Why a protocol message could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Translation {
    /// The protocol has no such messages.
    #[error("this protocol has no {0} to translate")]
    Unsupported(&'static str),
    /// The message is not valid in its protocol: the reason, as its
    /// specification names it, and where.
    #[error("{reason}: {detail}")]
    Invalid {
        reason: &'static str,
        detail: String,
    },
}

/// What a protocol translates; each message kind it lacks stays
/// [`Translation::Unsupported`].
pub trait Translates: Send + Sync {
    /// Its task or offer (an offer it brokers, a delegated task) as a
    /// DelegateOS contract draft, which the gateway signs and records.
    fn to_contract(&self, _task: &Value) -> Result<ContractDraft, Translation> {
        Err(Translation::Unsupported("contracts"))
    }

    /// Its receipt or result (a seller's execution receipt, an agent's
    /// signed receipt) as a DelegateOS attestation draft, which the gateway
    /// signs.
    fn to_attestation(&self, _receipt: &Value) -> Result<AttestationDraft, Translation> {
        Err(Translation::Unsupported("receipts"))
    }

    /// And back: a DelegateOS attestation as its receipt, so DelegateOS
    /// agents can answer in this protocol.
    fn receipt_of(&self, _attestation: &Attestation) -> Result<Value, Translation> {
        Err(Translation::Unsupported("receipts"))
    }
}
