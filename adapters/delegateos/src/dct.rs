//! Delegation Capability Tokens in the Signed JSON Token format
//! `delegateos-sjt-v1` (§3): creation, attenuation, serialization and
//! VERIFY_DCT (§10.1).
//!
//! A token's wire form is base64url of its RFC 8785 canonical JSON. Other
//! formats (DelegateOS 0.3's Biscuit backend) are `unsupported_token_format`;
//! a `version` other than `"1.0"` is `unsupported_token_version`
//! (decisions.md 178–180). We accept only the canonical form: decoding re-canonicalizes the parsed token and compares
//! bytes, so duplicate keys, `null`s, unknown fields, other number spellings
//! and whitespace are all `malformed_token`, and every accepted token has
//! exactly one serialization (which is what the gateway caches by).

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::base64url;
use crate::canonical::{canonicalize, parse_strict, MAX_SAFE_INTEGER};
use crate::capability::{Capability, CapabilityRequest};
use crate::denial::{DenialReason, DenialType};
use crate::ids::{ContractId, DelegationId};
use crate::principal::{Keypair, PrincipalId};
use crate::revocation::RevocationCheck;
use crate::signing;
use crate::timestamp::Timestamp;
use crate::version::TokenV10;

/// The SJT format tag.
pub const FORMAT: &str = "delegateos-sjt-v1";
/// Longest serialized token accepted (base64url characters).
pub const MAX_TOKEN_CHARS: usize = 128 * 1024;
/// Most attenuations a token may carry, whatever its `maxChainDepth` says:
/// it bounds the work of verifying a hostile token before any signature check.
pub const MAX_ATTENUATIONS: usize = 32;

/// The root block (§3.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authority {
    /// The tenant root that signs the authority block.
    pub issuer: PrincipalId,
    /// Who the token is delegated to.
    pub delegatee: PrincipalId,
    /// What it grants.
    pub capabilities: Vec<Capability>,
    /// The contract it is bound to.
    pub contract_id: ContractId,
    /// The delegation it carries.
    pub delegation_id: DelegationId,
    /// The delegation it descends from (`del_000000000000` for a root).
    pub parent_delegation_id: DelegationId,
    /// Its depth in the delegation chain (0 for a root).
    pub chain_depth: u32,
    /// How deep the chain may go.
    pub max_chain_depth: u32,
    /// The budget, in microcents.
    pub max_budget_microcents: u64,
    /// When it expires.
    pub expires_at: Timestamp,
    /// When it was issued.
    pub issued_at: Timestamp,
}

/// One attenuation block (§3.1). Absent fields inherit from the block before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attenuation {
    /// Who attenuates (the previous block's delegatee).
    pub attenuator: PrincipalId,
    /// Who it is delegated to.
    pub delegatee: PrincipalId,
    /// The new delegation.
    pub delegation_id: DelegationId,
    /// The contract (the authority's, restated).
    pub contract_id: ContractId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Narrower capabilities; `None` keeps the previous ones.
    pub allowed_capabilities: Option<Vec<Capability>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// A lower budget; `None` keeps the previous one.
    pub max_budget_microcents: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// An earlier expiry; `None` keeps the previous one.
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// A lower depth limit; `None` keeps the previous one.
    pub max_chain_depth: Option<u32>,
}

/// Which block a signature covers: `"authority"` or an attenuation index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Covers {
    /// The authority block.
    Authority,
    /// The attenuation at this index.
    Attenuation(u32),
}

impl Serialize for Covers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Covers::Authority => s.serialize_str("authority"),
            Covers::Attenuation(i) => s.serialize_u32(*i),
        }
    }
}

impl<'de> Deserialize<'de> for Covers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Index(u32),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Index(i) => Ok(Covers::Attenuation(i)),
            Raw::Name(n) if n == "authority" => Ok(Covers::Authority),
            Raw::Name(n) => Err(de::Error::custom(format!(
                "covers must be \"authority\" or an index, got {n:?}"
            ))),
        }
    }
}

/// A signature over one block (§3.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSignature {
    /// Who signed.
    pub signer: PrincipalId,
    /// Ed25519 signature over the block's canonical JSON (base64url).
    pub signature: String,
    /// Which block it covers.
    pub covers: Covers,
}

/// A decoded token (§3.1). Holding one means it is well formed; it has not
/// been verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedJsonToken {
    /// The format tag (`delegateos-sjt-v1`).
    pub format: String,
    /// The root block.
    pub authority: Authority,
    /// Narrowing blocks, in order.
    pub attenuations: Vec<Attenuation>,
    /// One signature per block.
    pub signatures: Vec<TokenSignature>,
    /// `"1.0"` when DelegateOS 0.3's `setTokenVersion` stamped the token.
    /// Unsigned: it changes nothing (decisions.md 179).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<TokenV10>,
}

/// The serialized form of §3.2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerializedDct {
    /// The token, base64url of its canonical JSON.
    pub token: String,
    /// The format tag (`delegateos-sjt-v1`).
    pub format: String,
}

#[derive(Serialize)]
struct AuthorityPayload<'a> {
    authority: &'a Authority,
}

#[derive(Serialize)]
struct ChainPayload<'a> {
    authority: &'a Authority,
    attenuations: &'a [Attenuation],
}

/// What CREATE_DCT (§3.3) needs.
#[derive(Debug, Clone)]
pub struct CreateParams {
    /// Who the token is delegated to.
    pub delegatee: PrincipalId,
    /// What it grants.
    pub capabilities: Vec<Capability>,
    /// The contract it is bound to.
    pub contract_id: ContractId,
    /// The delegation it carries.
    pub delegation_id: DelegationId,
    /// The delegation it descends from.
    pub parent_delegation_id: DelegationId,
    /// Its depth in the delegation chain.
    pub chain_depth: u32,
    /// How deep the chain may go.
    pub max_chain_depth: u32,
    /// The budget, in microcents.
    pub max_budget_microcents: u64,
    /// When it expires.
    pub expires_at: Timestamp,
    /// When it was issued.
    pub issued_at: Timestamp,
}

/// What ATTENUATE_DCT (§3.4) needs; `None` inherits.
#[derive(Debug, Clone)]
pub struct AttenuateParams {
    /// Who it is delegated to.
    pub delegatee: PrincipalId,
    /// The new delegation.
    pub delegation_id: DelegationId,
    /// The contract (the token's).
    pub contract_id: ContractId,
    /// Narrower capabilities.
    pub allowed_capabilities: Option<Vec<Capability>>,
    /// A lower budget.
    pub max_budget_microcents: Option<u64>,
    /// An earlier expiry.
    pub expires_at: Option<Timestamp>,
    /// A lower depth limit.
    pub max_chain_depth: Option<u32>,
}

/// One level of a token's chain: the authority, then each attenuation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainLevel {
    /// The delegation of this level.
    pub delegation_id: DelegationId,
    /// The contract of this level.
    pub contract_id: ContractId,
    /// The budget in effect at this level.
    pub max_budget_microcents: u64,
    /// Who signed this level's block.
    pub signer: PrincipalId,
    /// This level's revocation ID.
    pub revocation_id: String,
}

/// The scope a verified token grants (§10.1 step 8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizedScope {
    /// The capabilities in effect.
    pub capabilities: Vec<Capability>,
    /// The budget left at the token's level.
    pub remaining_budget_microcents: u64,
    /// The token's depth.
    pub chain_depth: u32,
    /// How deep the chain may go.
    pub max_chain_depth: u32,
    /// The contract it is bound to.
    pub contract_id: ContractId,
    /// The delegation it carries.
    pub delegation_id: DelegationId,
}

/// The values in effect after walking some prefix of the chain (§10.1 step 4).
#[derive(Debug, Clone)]
struct Effective {
    capabilities: Vec<Capability>,
    budget: u64,
    expiry: Timestamp,
    max_depth: u32,
    /// The largest block index (0 = authority) any `maxChainDepth` so far allows.
    last_allowed_block: u64,
    delegatee: PrincipalId,
}

impl Effective {
    fn of(authority: &Authority) -> Result<Self, DenialReason> {
        if authority.chain_depth > authority.max_chain_depth {
            return Err(DenialReason::attenuation(format!(
                "authority chainDepth {} exceeds its maxChainDepth {}",
                authority.chain_depth, authority.max_chain_depth
            )));
        }
        Ok(Self {
            capabilities: authority.capabilities.clone(),
            budget: authority.max_budget_microcents,
            expiry: authority.expires_at.clone(),
            max_depth: authority.max_chain_depth,
            last_allowed_block: u64::from(authority.max_chain_depth - authority.chain_depth),
            delegatee: authority.delegatee.clone(),
        })
    }

    /// Applies attenuation `index` (block `index + 1`), enforcing §10.1 4a–4f
    /// and the depth invariant of §8.2. The same rules serve creation (§3.4).
    fn apply(&mut self, index: usize, att: &Attenuation) -> Result<(), DenialReason> {
        let block = index as u64 + 1;
        if att.attenuator != self.delegatee {
            return Err(DenialReason::attenuation(format!(
                "attenuator mismatch: attenuation {index} is signed by {} but the delegatee is {}",
                att.attenuator, self.delegatee
            )));
        }
        if block > self.last_allowed_block {
            return Err(DenialReason::attenuation(format!(
                "chain depth exceeded: attenuation {index} goes past the maxChainDepth in effect"
            )));
        }
        if let Some(caps) = &att.allowed_capabilities {
            if let Some(wider) = caps.iter().find(|c| !c.is_covered_by(&self.capabilities)) {
                return Err(DenialReason::attenuation(format!(
                    "capability expansion: attenuation {index} allows {wider}, which the parent does not grant"
                )));
            }
            self.capabilities = caps.clone();
        }
        if let Some(budget) = att.max_budget_microcents {
            if budget > self.budget {
                return Err(DenialReason::attenuation(format!(
                    "budget expansion: attenuation {index} sets {budget} microcents, more than the parent's {}",
                    self.budget
                )));
            }
            self.budget = budget;
        }
        if let Some(expiry) = &att.expires_at {
            if *expiry > self.expiry {
                return Err(DenialReason::attenuation(format!(
                    "expiry expansion: attenuation {index} expires at {expiry}, after the parent's {}",
                    self.expiry
                )));
            }
            self.expiry = expiry.clone();
        }
        if let Some(depth) = att.max_chain_depth {
            if depth >= self.max_depth {
                return Err(DenialReason::attenuation(format!(
                    "chain depth expansion: attenuation {index} sets maxChainDepth {depth}, not below the parent's {}",
                    self.max_depth
                )));
            }
            self.max_depth = depth;
            self.last_allowed_block = self.last_allowed_block.min(block + u64::from(depth));
        }
        self.delegatee = att.delegatee.clone();
        Ok(())
    }
}

/// A decoded, well-formed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dct {
    token: SignedJsonToken,
}

/// A token whose signatures and attenuation chain have been verified
/// against trusted roots (§10.1 steps 1, 3, 4). What remains depends on the
/// moment and the request: revocation, expiry, budget and capability.
/// It does not depend on time, so a gateway may cache it by token bytes.
#[derive(Debug, Clone)]
pub struct VerifiedDct {
    dct: Dct,
    effective: Effective,
    levels: Vec<ChainLevel>,
}

/// How far in the future `issuedAt` may be (clock skew between issuer and gateway).
pub const ISSUED_AT_SKEW: time::Duration = time::Duration::seconds(60);

/// Refuses a format tag other than [`FORMAT`] as `unsupported_token_format`:
/// DelegateOS 0.3's `delegateos-biscuit-v1` (decisions.md 180) or any other.
pub fn check_format(format: &str) -> Result<(), DenialReason> {
    if format == FORMAT {
        return Ok(());
    }
    let shown = if format.len() <= 64 {
        format!("{format:?}")
    } else {
        format!("of {} bytes", format.len())
    };
    Err(DenialReason::new(
        DenialType::UnsupportedTokenFormat,
        format!("token format {shown} is not supported: dgw verifies only {FORMAT:?}"),
    ))
}

/// The typed refusals a token's JSON earns before its structure is read:
/// another format, or a version DelegateOS 0.3 stamped other than `"1.0"`.
fn check_format_and_version(value: &serde_json::Value) -> Result<(), DenialReason> {
    if let Some(serde_json::Value::String(format)) = value.get("format") {
        check_format(format)?;
    }
    match value.get("version") {
        None => Ok(()),
        Some(serde_json::Value::String(v)) if v == TokenV10::TEXT => Ok(()),
        Some(other) => {
            let text = other.to_string();
            let shown = if text.len() <= 64 {
                text
            } else {
                format!("of {} bytes", text.len())
            };
            Err(DenialReason::new(
                DenialType::UnsupportedTokenVersion,
                format!(
                    "token version {shown} is not supported: dgw verifies only \"{}\" (or none)",
                    TokenV10::TEXT
                ),
            ))
        }
    }
}

fn check_safe_integer(what: &str, value: u64) -> Result<(), DenialReason> {
    if value > MAX_SAFE_INTEGER {
        return Err(DenialReason::malformed(format!(
            "{what} {value} is above 2^53-1 and cannot be signed exactly"
        )));
    }
    Ok(())
}

/// A token issued after it expires never had a moment of validity: it is
/// malformed, whatever the clock says (decisions.md).
fn check_validity_window(authority: &Authority) -> Result<(), DenialReason> {
    if authority.issued_at > authority.expires_at {
        return Err(DenialReason::malformed(format!(
            "issuedAt {} is after expiresAt {}",
            authority.issued_at, authority.expires_at
        )));
    }
    Ok(())
}

impl Dct {
    /// CREATE_DCT (§3.3): a root token signed by `issuer`.
    pub fn create(issuer: &Keypair, params: CreateParams) -> Result<Self, DenialReason> {
        let authority = Authority {
            issuer: issuer.principal_id().clone(),
            delegatee: params.delegatee,
            capabilities: params.capabilities,
            contract_id: params.contract_id,
            delegation_id: params.delegation_id,
            parent_delegation_id: params.parent_delegation_id,
            chain_depth: params.chain_depth,
            max_chain_depth: params.max_chain_depth,
            max_budget_microcents: params.max_budget_microcents,
            expires_at: params.expires_at,
            issued_at: params.issued_at,
        };
        check_safe_integer("maxBudgetMicrocents", authority.max_budget_microcents)?;
        check_validity_window(&authority)?;
        Effective::of(&authority)?;
        let signature = signing::sign(
            issuer,
            &AuthorityPayload {
                authority: &authority,
            },
        )
        .map_err(DenialReason::malformed)?;
        let token = SignedJsonToken {
            format: FORMAT.to_owned(),
            signatures: vec![TokenSignature {
                signer: authority.issuer.clone(),
                signature,
                covers: Covers::Authority,
            }],
            authority,
            attenuations: Vec::new(),
            version: None,
        };
        Ok(Self { token })
    }

    /// ATTENUATE_DCT (§3.4): appends an attenuation signed by `attenuator`,
    /// refusing any widening with the denial verification would give it.
    pub fn attenuate(
        &self,
        attenuator: &Keypair,
        params: AttenuateParams,
    ) -> Result<Self, DenialReason> {
        if self.token.attenuations.len() >= MAX_ATTENUATIONS {
            return Err(DenialReason::attenuation(format!(
                "a token carries at most {MAX_ATTENUATIONS} attenuations"
            )));
        }
        if let Some(budget) = params.max_budget_microcents {
            check_safe_integer("maxBudgetMicrocents", budget)?;
        }
        let attenuation = Attenuation {
            attenuator: attenuator.principal_id().clone(),
            delegatee: params.delegatee,
            delegation_id: params.delegation_id,
            contract_id: params.contract_id,
            allowed_capabilities: params.allowed_capabilities,
            max_budget_microcents: params.max_budget_microcents,
            expires_at: params.expires_at,
            max_chain_depth: params.max_chain_depth,
        };
        let mut effective = self.effective_chain()?;
        effective.apply(self.token.attenuations.len(), &attenuation)?;

        let mut token = self.token.clone();
        token.attenuations.push(attenuation);
        let index = token.attenuations.len() - 1;
        let signature = signing::sign(
            attenuator,
            &ChainPayload {
                authority: &token.authority,
                attenuations: &token.attenuations,
            },
        )
        .map_err(DenialReason::malformed)?;
        token.signatures.push(TokenSignature {
            signer: attenuator.principal_id().clone(),
            signature,
            covers: Covers::Attenuation(index as u32),
        });
        Ok(Self { token })
    }

    /// Walks the attenuation chain without checking signatures.
    fn effective_chain(&self) -> Result<Effective, DenialReason> {
        let mut effective = Effective::of(&self.token.authority)?;
        for (i, att) in self.token.attenuations.iter().enumerate() {
            effective.apply(i, att)?;
        }
        Ok(effective)
    }

    /// §10.1 step 1: base64url → canonical JSON → typed token.
    pub fn decode(serialized: &str) -> Result<Self, DenialReason> {
        if serialized.len() > MAX_TOKEN_CHARS {
            return Err(DenialReason::malformed(format!(
                "token is {} characters, more than {MAX_TOKEN_CHARS}",
                serialized.len()
            )));
        }
        let bytes = base64url::decode(serialized.trim_end_matches(['\n', '\r']))
            .map_err(|e| DenialReason::malformed(format!("token is not base64url: {e}")))?;
        let value = parse_strict(&bytes, MAX_TOKEN_CHARS)
            .map_err(|e| DenialReason::malformed(format!("token is not JSON: {e}")))?;
        check_format_and_version(&value)?;
        let token: SignedJsonToken = serde_json::from_value(value)
            .map_err(|e| DenialReason::malformed(format!("token structure: {e}")))?;
        check_format(&token.format)?;
        if token.attenuations.len() > MAX_ATTENUATIONS {
            return Err(DenialReason::malformed(format!(
                "token has {} attenuations, more than {MAX_ATTENUATIONS}",
                token.attenuations.len()
            )));
        }
        check_safe_integer("maxBudgetMicrocents", token.authority.max_budget_microcents)?;
        check_validity_window(&token.authority)?;
        for att in &token.attenuations {
            if let Some(b) = att.max_budget_microcents {
                check_safe_integer("maxBudgetMicrocents", b)?;
            }
        }
        let caps = token.authority.capabilities.iter().chain(
            token
                .attenuations
                .iter()
                .filter_map(|a| a.allowed_capabilities.as_ref())
                .flatten(),
        );
        for cap in caps {
            cap.validate().map_err(DenialReason::malformed)?;
        }
        let canonical = canonicalize(&token).map_err(DenialReason::malformed)?;
        if canonical != bytes {
            return Err(DenialReason::malformed(
                "token is not the RFC 8785 canonical form of its own content",
            ));
        }
        Ok(Self { token })
    }

    /// §3.2: base64url of the canonical JSON.
    pub fn encode(&self) -> String {
        let bytes = canonicalize(&self.token).expect("a decoded or created token canonicalizes");
        base64url::encode(&bytes)
    }

    /// The §3.2 object `{token, format}`.
    pub fn to_serialized(&self) -> SerializedDct {
        SerializedDct {
            token: self.encode(),
            format: FORMAT.to_owned(),
        }
    }

    /// The token's content.
    pub fn token(&self) -> &SignedJsonToken {
        &self.token
    }

    /// Revocation IDs (§3.5): authority first, then each attenuation in order.
    pub fn revocation_ids(&self) -> Vec<String> {
        std::iter::once(signing::hash_id(&self.token.authority))
            .chain(self.token.attenuations.iter().map(signing::hash_id))
            .map(|r| r.expect("token blocks canonicalize"))
            .collect()
    }

    /// The delegatee of the last block: who holds this token.
    pub fn holder(&self) -> &PrincipalId {
        self.token
            .attenuations
            .last()
            .map_or(&self.token.authority.delegatee, |a| &a.delegatee)
    }

    /// The delegation ID of the last block.
    pub fn delegation_id(&self) -> &DelegationId {
        self.token
            .attenuations
            .last()
            .map_or(&self.token.authority.delegation_id, |a| &a.delegation_id)
    }

    /// The contract ID of the last block.
    pub fn contract_id(&self) -> &ContractId {
        self.token
            .attenuations
            .last()
            .map_or(&self.token.authority.contract_id, |a| &a.contract_id)
    }

    /// §10.1 steps 3 and 4: signatures against the trusted roots, then the
    /// attenuation chain.
    pub fn verify_chain(self, trusted_roots: &[PrincipalId]) -> Result<VerifiedDct, DenialReason> {
        let levels = self.levels();
        self.verify_chain_with(trusted_roots, levels)
    }

    fn verify_chain_with(
        self,
        trusted_roots: &[PrincipalId],
        levels: Vec<ChainLevel>,
    ) -> Result<VerifiedDct, DenialReason> {
        let t = &self.token;
        if t.signatures.len() != t.attenuations.len() + 1 {
            return Err(DenialReason::signature(format!(
                "token has {} signatures for {} blocks",
                t.signatures.len(),
                t.attenuations.len() + 1
            )));
        }
        // 3a. The authority, by a trusted root.
        let first = &t.signatures[0];
        if first.covers != Covers::Authority {
            return Err(DenialReason::signature(
                "signatures[0] does not cover the authority",
            ));
        }
        if first.signer != t.authority.issuer {
            return Err(DenialReason::signature(
                "signatures[0] is not by the authority's issuer",
            ));
        }
        if !trusted_roots.contains(&t.authority.issuer) {
            return Err(DenialReason::signature(format!(
                "issuer {} is not a trusted root",
                t.authority.issuer
            )));
        }
        signing::verify(
            &t.authority.issuer,
            &AuthorityPayload {
                authority: &t.authority,
            },
            &first.signature,
        )
        .map_err(|e| DenialReason::signature(format!("authority signature: {e}")))?;
        // 3b. Each attenuation, by its attenuator, over everything before it.
        for (i, att) in t.attenuations.iter().enumerate() {
            let sig = &t.signatures[i + 1];
            if sig.covers != Covers::Attenuation(i as u32) {
                return Err(DenialReason::signature(format!(
                    "signatures[{}] does not cover attenuation {i}",
                    i + 1
                )));
            }
            if sig.signer != att.attenuator {
                return Err(DenialReason::signature(format!(
                    "signatures[{}] is not by attenuation {i}'s attenuator",
                    i + 1
                )));
            }
            signing::verify(
                &att.attenuator,
                &ChainPayload {
                    authority: &t.authority,
                    attenuations: &t.attenuations[..=i],
                },
                &sig.signature,
            )
            .map_err(|e| DenialReason::signature(format!("attenuation {i} signature: {e}")))?;
        }
        // 4. The chain narrows monotonically.
        let effective = self.effective_chain()?;
        Ok(VerifiedDct {
            dct: self,
            effective,
            levels,
        })
    }

    fn levels(&self) -> Vec<ChainLevel> {
        let t = &self.token;
        let ids = self.revocation_ids();
        let mut budget = t.authority.max_budget_microcents;
        let mut levels = vec![ChainLevel {
            delegation_id: t.authority.delegation_id.clone(),
            contract_id: t.authority.contract_id.clone(),
            max_budget_microcents: budget,
            signer: t.authority.issuer.clone(),
            revocation_id: ids[0].clone(),
        }];
        for (i, att) in t.attenuations.iter().enumerate() {
            budget = att.max_budget_microcents.unwrap_or(budget);
            levels.push(ChainLevel {
                delegation_id: att.delegation_id.clone(),
                contract_id: att.contract_id.clone(),
                max_budget_microcents: budget,
                signer: att.attenuator.clone(),
                revocation_id: ids[i + 1].clone(),
            });
        }
        levels
    }
}

/// What VERIFY_DCT checks a token against (§10.1).
pub struct VerificationContext<'a> {
    /// The principals whose tokens are trusted (one per tenant).
    pub trusted_roots: &'a [PrincipalId],
    /// Revocations to check every block against.
    pub revocations: &'a dyn RevocationCheck,
    /// The time of the check.
    pub now: &'a Timestamp,
    /// Already spent against the token's effective budget.
    pub spent_microcents: u64,
    /// What is asked.
    pub request: &'a CapabilityRequest,
}

/// VERIFY_DCT (§10.1), all steps in order.
pub fn verify(
    serialized: &str,
    ctx: &VerificationContext<'_>,
) -> Result<AuthorizedScope, DenialReason> {
    let verified = verify_token(serialized, ctx.trusted_roots, ctx.revocations)?;
    verified.authorize_after_revocation(ctx.now, ctx.spent_microcents, ctx.request)
}

/// §10.1 steps 1–4 in order (decode, revocation, signatures, chain): the
/// part of VERIFY_DCT that depends only on the token, the roots and the
/// revocations. The result may be cached by token bytes, as long as
/// [`VerifiedDct::authorize`] (which checks revocation again) is used on it.
pub fn verify_token(
    serialized: &str,
    trusted_roots: &[PrincipalId],
    revocations: &dyn RevocationCheck,
) -> Result<VerifiedDct, DenialReason> {
    let dct = Dct::decode(serialized)?;
    let levels = dct.levels();
    check_revocations(&levels, revocations)?;
    dct.verify_chain_with(trusted_roots, levels)
}

fn check_revocations(
    levels: &[ChainLevel],
    revocations: &dyn RevocationCheck,
) -> Result<(), DenialReason> {
    for (i, level) in levels.iter().enumerate() {
        let id = &level.revocation_id;
        if revocations.is_block_revoked(id, &level.signer) {
            let block = if i == 0 {
                "the authority block".to_owned()
            } else {
                format!("attenuation {}", i - 1)
            };
            return Err(DenialReason::new(
                DenialType::Revoked,
                format!("{block} (revocation ID {id}) has been revoked"),
            ));
        }
    }
    Ok(())
}

impl VerifiedDct {
    /// §10.1 steps 2 and 5–8 for a token whose chain is already verified.
    pub fn authorize(
        &self,
        revocations: &dyn RevocationCheck,
        now: &Timestamp,
        spent_microcents: u64,
        request: &CapabilityRequest,
    ) -> Result<AuthorizedScope, DenialReason> {
        check_revocations(&self.levels, revocations)?;
        self.authorize_after_revocation(now, spent_microcents, request)
    }

    /// §10.1 steps 2, 5 and 6: what holds for any request (revocation,
    /// expiry, budget), for callers such as delegation that have no
    /// capability request to match.
    pub fn check_standing(
        &self,
        revocations: &dyn RevocationCheck,
        now: &Timestamp,
        spent_microcents: u64,
    ) -> Result<AuthorizedScope, DenialReason> {
        check_revocations(&self.levels, revocations)?;
        self.check_time_and_budget(now, spent_microcents)?;
        Ok(self.scope(spent_microcents))
    }

    fn check_time_and_budget(
        &self,
        now: &Timestamp,
        spent_microcents: u64,
    ) -> Result<(), DenialReason> {
        let e = &self.effective;
        // Before 5: a token from the future (beyond clock skew) is not yet
        // valid; the spec has no not-before, so `issuedAt` serves as one.
        let issued_at = &self.dct.token.authority.issued_at;
        if issued_at.instant() > now.instant() + ISSUED_AT_SKEW {
            return Err(DenialReason::new(
                DenialType::TokenNotYetValid,
                format!("token is issued at {issued_at}, in the future; it is now {now}"),
            ));
        }
        // 5. Expiry.
        if *now > e.expiry {
            return Err(DenialReason::new(
                DenialType::Expired,
                format!("token expired at {}; it is now {now}", e.expiry),
            ));
        }
        // 6. Budget.
        if spent_microcents >= e.budget {
            return Err(DenialReason::new(
                DenialType::BudgetExceeded,
                format!(
                    "{spent_microcents} of {} microcents already spent",
                    e.budget
                ),
            ));
        }
        Ok(())
    }

    fn authorize_after_revocation(
        &self,
        now: &Timestamp,
        spent_microcents: u64,
        request: &CapabilityRequest,
    ) -> Result<AuthorizedScope, DenialReason> {
        self.check_time_and_budget(now, spent_microcents)?;
        // 7. Capability.
        let e = &self.effective;
        if !e.capabilities.iter().any(|c| c.grants(request)) {
            return Err(DenialReason {
                kind: DenialType::CapabilityNotGranted,
                detail: format!("no granted capability covers {request}"),
                granted: Some(e.capabilities.clone()),
            });
        }
        // 8. The scope.
        Ok(self.scope(spent_microcents))
    }

    fn scope(&self, spent_microcents: u64) -> AuthorizedScope {
        let (e, dct) = (&self.effective, &self.dct);
        AuthorizedScope {
            capabilities: e.capabilities.clone(),
            remaining_budget_microcents: e.budget.saturating_sub(spent_microcents),
            chain_depth: dct.token.authority.chain_depth + dct.token.attenuations.len() as u32,
            max_chain_depth: e.max_depth,
            contract_id: dct.contract_id().clone(),
            delegation_id: dct.delegation_id().clone(),
        }
    }

    /// The token.
    pub fn dct(&self) -> &Dct {
        &self.dct
    }

    /// Each level of the chain, authority first, with its effective budget.
    pub fn levels(&self) -> &[ChainLevel] {
        &self.levels
    }

    /// The capabilities in effect.
    pub fn capabilities(&self) -> &[Capability] {
        &self.effective.capabilities
    }

    /// The effective budget.
    pub fn budget_microcents(&self) -> u64 {
        self.effective.budget
    }

    /// The effective expiry.
    pub fn expires_at(&self) -> &Timestamp {
        &self.effective.expiry
    }
}
