//! Execution receipts (execution-ledger §11): parsed from untrusted JSON
//! into typed form (the JSON kept as received, since the signature covers
//! it), verified one by one, as nested chains, and as flat sequences.

use std::collections::BTreeMap;

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use serde_json::Value;

use crate::encoding::{self, is_lower_hex};
use crate::{Failure, Reason, MAX_ARTIFACT_BYTES, MAX_CHAIN_DEPTH, SUITE};

/// A receipt's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The work was done.
    Completed,
    /// The run did not yield its outcome (the worker's verdict).
    Failed,
    /// A policy boundary refused it (no permitted work completed).
    Denied,
}

impl Status {
    /// As the receipt writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Denied => "denied",
        }
    }
}

/// The members of execution-receipt-v1.json, each typed; unknown ones
/// refused (`additionalProperties: false`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    task_id: String,
    motebit_id: String,
    #[serde(default)]
    public_key: Option<String>,
    device_id: String,
    submitted_at: f64,
    completed_at: f64,
    status: Status,
    result: String,
    #[allow(dead_code)]
    tools_used: Vec<String>,
    #[allow(dead_code)]
    memories_formed: u64,
    prompt_hash: String,
    result_hash: String,
    #[serde(default)]
    delegation_receipts: Option<Vec<Value>>,
    #[serde(default)]
    relay_task_id: Option<String>,
    #[serde(default)]
    delegated_scope: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    source_digest: Option<SourceDigest>,
    #[serde(default)]
    #[allow(dead_code)]
    source_projection: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    invocation_origin: Option<InvocationOrigin>,
    /// Absent on legacy bodies: such a receipt is refused `wrong_suite`.
    #[serde(default)]
    suite: Option<String>,
    signature: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SourceDigest {
    algorithm: String,
    value: String,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum InvocationOrigin {
    UserTap,
    AiLoop,
    Scheduled,
    AgentToAgent,
}

/// A signed execution receipt with its nested receipts.
#[derive(Debug, Clone)]
pub struct Receipt {
    /// The task.
    pub task_id: String,
    /// Who executed it.
    pub motebit_id: String,
    /// The embedded key, as written.
    pub public_key: Option<String>,
    /// The signing device.
    pub device_id: String,
    /// Epoch milliseconds.
    pub submitted_at: f64,
    /// Epoch milliseconds.
    pub completed_at: f64,
    /// How it ended.
    pub status: Status,
    /// The output or the error.
    pub result: String,
    /// `hex(SHA-256(prompt))`.
    pub prompt_hash: String,
    /// `hex(SHA-256(result))`.
    pub result_hash: String,
    /// The relay task it is bound to.
    pub relay_task_id: Option<String>,
    /// The scope it was done under.
    pub delegated_scope: Option<String>,
    /// As written (absent on a legacy body).
    pub suite: Option<String>,
    /// Base64url.
    pub signature: String,
    /// Its sub-delegations' receipts.
    pub delegations: Vec<Receipt>,
    /// The receipt as received: what its signature covers.
    pub raw: Value,
}

impl Receipt {
    /// Parses untrusted bytes (size-limited, duplicate keys refused).
    pub fn parse(json: &[u8]) -> Result<Self, Failure> {
        let value = delegateos::canonical::parse_strict(json, MAX_ARTIFACT_BYTES)
            .map_err(|e| Failure::malformed(e.to_string()))?;
        Self::from_value(&value)
    }

    /// The receipt `value` is, nested receipts included.
    pub fn from_value(value: &Value) -> Result<Self, Failure> {
        Self::at_depth(value, 0)
    }

    fn at_depth(value: &Value, depth: usize) -> Result<Self, Failure> {
        if depth > MAX_CHAIN_DEPTH {
            return Err(Failure::new(
                Reason::TooDeep,
                format!("delegation_receipts nest deeper than {MAX_CHAIN_DEPTH}"),
            ));
        }
        let f: Fields = serde_json::from_value(value.clone())
            .map_err(|e| Failure::malformed(format!("receipt: {e}")))?;
        for (name, v) in [
            ("task_id", &f.task_id),
            ("motebit_id", &f.motebit_id),
            ("device_id", &f.device_id),
        ] {
            if v.is_empty() {
                return Err(Failure::malformed(format!("receipt: {name} is empty")));
            }
        }
        let delegations = f
            .delegation_receipts
            .iter()
            .flatten()
            .map(|child| Self::at_depth(child, depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Receipt {
            task_id: f.task_id,
            motebit_id: f.motebit_id,
            public_key: f.public_key,
            device_id: f.device_id,
            submitted_at: f.submitted_at,
            completed_at: f.completed_at,
            status: f.status,
            result: f.result,
            prompt_hash: f.prompt_hash,
            result_hash: f.result_hash,
            relay_task_id: f.relay_task_id,
            delegated_scope: f.delegated_scope,
            suite: f.suite,
            signature: f.signature,
            delegations,
            raw: value.clone(),
        })
    }

    /// Whether the signature verifies with `key` under the receipt suite
    /// (the signature alone: the reference's `verifyExecutionReceipt`).
    pub fn signature_verifies(&self, key: &VerifyingKey) -> bool {
        self.suite.as_deref() == Some(SUITE)
            && encoding::signing_bytes(&self.raw)
                .is_ok_and(|m| encoding::verifies(key, &m, &self.signature))
    }

    /// Whether `result_hash` is `hex(SHA-256(result))`.
    pub fn result_hash_binds(&self) -> bool {
        encoding::sha256_hex(self.result.as_bytes()) == self.result_hash
    }

    /// The embedded key, as the gateway accepts one.
    pub fn embedded_key(&self) -> Result<VerifyingKey, Failure> {
        match &self.public_key {
            Some(k) => encoding::parse_key(k),
            None => Err(Failure::new(
                Reason::UnknownSigner,
                "the receipt embeds no public_key and no key is known for its motebit_id",
            )),
        }
    }

    /// This receipt alone, as the gateway accepts one, with `key`: the
    /// suite, lowercase 64-hex hashes, an embedded key (if any) that is
    /// `key`, the signature, `result_hash` binding `result`, and
    /// `completed_at` not before `submitted_at`.
    pub fn verify_with(&self, key: &VerifyingKey) -> Result<(), Failure> {
        if self.suite.as_deref() != Some(SUITE) {
            return Err(Failure::new(Reason::WrongSuite, suite_detail(&self.suite)));
        }
        if let Some(embedded) = &self.public_key {
            if encoding::parse_key(embedded)? != *key {
                return Err(Failure::new(
                    Reason::KeyMismatch,
                    "the embedded public_key is not the signer's known key",
                ));
            }
        }
        for (name, h) in [
            ("prompt_hash", &self.prompt_hash),
            ("result_hash", &self.result_hash),
        ] {
            if h.len() != 64 || !is_lower_hex(h) {
                return Err(Failure::new(
                    Reason::HashInconsistent,
                    format!("{name} must be 64 lowercase hex digits (SHA-256)"),
                ));
            }
        }
        if !self.signature_verifies(key) {
            return Err(Failure::new(
                Reason::BadSignature,
                format!(
                    "the signature of receipt {:?} does not verify",
                    self.task_id
                ),
            ));
        }
        if !self.result_hash_binds() {
            return Err(Failure::new(
                Reason::HashInconsistent,
                "result_hash is not hex(SHA-256(result))",
            ));
        }
        if self.completed_at < self.submitted_at {
            return Err(Failure::new(
                Reason::OutOfOrder,
                "completed_at is before submitted_at",
            ));
        }
        Ok(())
    }
}

/// Why a suite is refused, for people.
pub(crate) fn suite_detail(suite: &Option<String>) -> String {
    match suite {
        Some(s) => format!("suite must be {SUITE}, not {s:?}"),
        None => format!("suite is absent (it must be {SUITE})"),
    }
}

/// Where the key a receipt was verified with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The caller's known keys (binds the key to the `motebit_id`).
    External,
    /// The receipt's own `public_key` (integrity only).
    Embedded,
}

impl KeySource {
    /// As reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeySource::External => "external",
            KeySource::Embedded => "embedded",
        }
    }
}

/// Keys known for `motebit_id`s.
pub type KnownKeys = BTreeMap<String, VerifyingKey>;

/// One node of a verified receipt tree.
#[derive(Debug, Clone)]
pub struct ChainNode {
    /// The receipt's task.
    pub task_id: String,
    /// Its signer.
    pub motebit_id: String,
    /// Where the key came from (`None`: no key at all).
    pub key_source: Option<KeySource>,
    /// The key used, hex.
    pub key: Option<String>,
    /// Why this receipt itself failed (its children aside).
    pub failure: Option<Failure>,
    /// Its nested receipts.
    pub delegations: Vec<ChainNode>,
}

impl ChainNode {
    /// Whether this receipt and every nested one verified.
    pub fn verified(&self) -> bool {
        self.failure.is_none() && self.delegations.iter().all(ChainNode::verified)
    }

    /// The first failure in the tree, depth first, with the task it is in.
    pub fn first_failure(&self) -> Option<(&str, &Failure)> {
        if let Some(f) = &self.failure {
            return Some((&self.task_id, f));
        }
        self.delegations.iter().find_map(ChainNode::first_failure)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "task_id": self.task_id,
            "motebit_id": self.motebit_id,
            "verified": self.failure.is_none(),
            "keySource": self.key_source.map(KeySource::as_str),
            "publicKey": self.key,
            "error": self.failure.as_ref().map(|f| serde_json::json!({"type": f.reason.as_str(), "message": f.detail})),
            "delegations": self.delegations.iter().map(ChainNode::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Verifies a receipt and every nested one: each with the key known for
/// its `motebit_id` first, else its embedded key (reported as such).
pub fn verify_chain(receipt: &Receipt, known: &KnownKeys) -> ChainNode {
    let (key, key_source) = match known.get(&receipt.motebit_id) {
        Some(k) => (Ok(*k), Some(KeySource::External)),
        None => match receipt.embedded_key() {
            Ok(k) => (Ok(k), Some(KeySource::Embedded)),
            Err(e) => (Err(e), None),
        },
    };
    let failure = match &key {
        Ok(k) => receipt.verify_with(k).err(),
        Err(e) => Some(e.clone()),
    };
    ChainNode {
        task_id: receipt.task_id.clone(),
        motebit_id: receipt.motebit_id.clone(),
        key_source,
        key: key.ok().map(|k| encoding::key_hex(&k)),
        failure,
        delegations: receipt
            .delegations
            .iter()
            .map(|d| verify_chain(d, known))
            .collect(),
    }
}

/// Verifies a flat sequence (each receipt with its signer's key): every
/// receipt as [`Receipt::verify_with`] accepts it, and each submitted no
/// earlier than the previous one completed. Empty is valid. The error
/// names the index of the first receipt that failed.
pub fn verify_sequence(entries: &[(Receipt, VerifyingKey)]) -> Result<(), (usize, Failure)> {
    for (i, (receipt, key)) in entries.iter().enumerate() {
        receipt.verify_with(key).map_err(|f| (i, f))?;
    }
    for (i, pair) in entries.windows(2).enumerate() {
        let (prev, next) = (&pair[0].0, &pair[1].0);
        if prev.completed_at > next.submitted_at {
            return Err((
                i + 1,
                Failure::new(
                    Reason::OutOfOrder,
                    format!(
                        "receipt {} was submitted at {} before receipt {i} completed at {}",
                        i + 1,
                        next.submitted_at,
                        prev.completed_at
                    ),
                ),
            ));
        }
    }
    Ok(())
}
