//! `[motebit]`: the delegators whose delegation tokens dgw honours (the
//! roots of every Motebit caller's authority), their tenants and budgets,
//! and the audience callers' bearer tokens must name.

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;

/// The audience of bearer tokens by default: the one the reference MCP
/// client mints for calls to a Motebit service (`task:submit`).
pub const DEFAULT_AUDIENCE: &str = "task:submit";

/// The section as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawMotebit {
    #[serde(default)]
    audience: Option<String>,
    #[serde(default)]
    delegators: Vec<RawDelegator>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDelegator {
    motebit_id: String,
    public_key: String,
    tenant: String,
    budget_microcents: u64,
}

/// A delegator whose tokens root Motebit callers' authority.
#[derive(Debug, Clone)]
pub struct Delegator {
    /// Its `motebit_id`.
    pub motebit_id: String,
    /// Its key: a root token must be signed by exactly it.
    pub key: VerifyingKey,
    /// The tenant its delegations spend for.
    pub tenant: String,
    /// The budget each of its root delegation tokens gets.
    pub budget_microcents: u64,
}

/// The section, validated.
#[derive(Debug, Clone)]
pub struct MotebitConfig {
    /// What callers' bearer tokens must have as `aud`.
    pub audience: String,
    /// The trusted delegators.
    pub delegators: Vec<Delegator>,
}

impl Default for MotebitConfig {
    fn default() -> Self {
        Self {
            audience: DEFAULT_AUDIENCE.to_owned(),
            delegators: Vec::new(),
        }
    }
}

impl MotebitConfig {
    /// The configured key of the delegator `motebit_id`, if it is one:
    /// its key for dgw, whatever a pin or a chain says.
    pub fn key_of(&self, motebit_id: &str) -> Option<&VerifyingKey> {
        self.delegators
            .iter()
            .find(|d| d.motebit_id == motebit_id)
            .map(|d| &d.key)
    }
}

impl RawMotebit {
    /// Validated; an error names the key and the problem.
    pub fn validate(self) -> Result<MotebitConfig, (String, String)> {
        let audience = self.audience.unwrap_or_else(|| DEFAULT_AUDIENCE.to_owned());
        if audience.is_empty() || audience.len() > 128 {
            return Err(("motebit.audience".into(), "must be 1 to 128 bytes".into()));
        }
        let mut delegators: Vec<Delegator> = Vec::new();
        for (i, d) in self.delegators.into_iter().enumerate() {
            let key = |field: &str| format!("motebit.delegators[{i}].{field}");
            if d.motebit_id.is_empty() || d.motebit_id.len() > 256 {
                return Err((key("motebit_id"), "must be 1 to 256 bytes".into()));
            }
            if delegators.iter().any(|x| x.motebit_id == d.motebit_id) {
                return Err((
                    key("motebit_id"),
                    format!("{:?} is listed twice", d.motebit_id),
                ));
            }
            let public = motebit::encoding::parse_key(&d.public_key).map_err(|_| {
                (
                    key("public_key"),
                    "must be an Ed25519 public key: 64 lowercase hex digits".to_owned(),
                )
            })?;
            if d.tenant.is_empty() {
                return Err((key("tenant"), "must name a tenant".into()));
            }
            delegators.push(Delegator {
                motebit_id: d.motebit_id,
                key: public,
                tenant: d.tenant,
                budget_microcents: d.budget_microcents,
            });
        }
        Ok(MotebitConfig {
            audience,
            delegators,
        })
    }
}
