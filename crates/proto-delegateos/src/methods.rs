//! DelegateOS's JSON-RPC methods (§9): `delegateos/delegate`, `complete`
//! and `authorize` (a DCT in its params) are its own; the spec's names for
//! the gateway's settle, release, budget, delegation and revocation
//! methods are aliases of the neutral `dgw/*` ones.

use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse};
use delegateos::CapabilityRequest;
use serde::Deserialize;
use serde_json::{json, Value};

use dgw_core::budget::OnExpiry;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::{parse_params, Decision, MethodAnswer};

use crate::DelegateOs;

/// `delegateos/delegate` (§9.1).
pub const DELEGATE: &str = "delegateos/delegate";
/// `delegateos/complete` (§9.4).
pub const COMPLETE: &str = "delegateos/complete";
/// `delegateos/authorize`: the pipeline with the DCT in the params.
pub const AUTHORIZE: &str = "delegateos/authorize";

/// Its own methods.
pub const METHODS: &[&str] = &[dgw_core::issuing::METHOD, DELEGATE, COMPLETE, AUTHORIZE];

/// The spec's names for the gateway's methods.
pub const ALIASES: &[(&str, &str)] = &[
    ("delegateos/settle", "dgw/settle"),
    ("delegateos/release", "dgw/release"),
    ("delegateos/budget", "dgw/budget"),
    ("delegateos/delegation", "dgw/delegation"),
    ("delegateos/revoke", "dgw/revocations/submit"),
];

/// `delegateos/authorize` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthorizeParams {
    dct: String,
    namespace: String,
    action: String,
    resource: String,
    #[serde(default)]
    cost_microcents: u64,
}

impl DelegateOs {
    /// Answers one of [`METHODS`].
    pub(crate) async fn answer(
        &self,
        caller: &Caller,
        method: &str,
        params: Option<Value>,
    ) -> Result<MethodAnswer, GateError> {
        match method {
            DELEGATE => {
                let p: DelegateParams = parse_params(params)?;
                Ok(match self.gate.delegate(p).await? {
                    r @ DelegateResponse::Accept(_) => MethodAnswer::Done(json!(r)),
                    r @ DelegateResponse::Reject(_) => MethodAnswer::Refused(json!(r)),
                })
            }
            COMPLETE => {
                let p: CompleteParams = parse_params(params)?;
                Ok(MethodAnswer::Done(json!(self.gate.complete(p).await?)))
            }
            AUTHORIZE => self.authorize(parse_params(params)?).await,
            dgw_core::issuing::METHOD => {
                let params = params.unwrap_or_else(|| json!({}));
                Ok(MethodAnswer::Done(self.issue(caller, params)?))
            }
            other => Err(GateError::InvalidParams(format!("{other} is not served"))),
        }
    }

    async fn authorize(&self, p: AuthorizeParams) -> Result<MethodAnswer, GateError> {
        let request = CapabilityRequest {
            namespace: p.namespace,
            action: p.action,
            resource: p.resource,
        };
        let decision = self
            .gate
            .authorize(
                &p.dct,
                std::slice::from_ref(&request),
                p.cost_microcents,
                OnExpiry::Release,
            )
            .await?;
        Ok(match decision {
            Decision::Allowed(a) => MethodAnswer::Done(json!(a)),
            Decision::Denied(d) => MethodAnswer::Denied(d),
        })
    }

    /// `dgw/tokens/issue`.
    fn issue(&self, caller: &Caller, params: Value) -> Result<Value, GateError> {
        let issued = self.issuing.issue(&self.gate, caller, params)?;
        tracing::info!(
            tenant = %issued.tenant,
            delegation = %issued.delegation_id,
            to = %issued.to,
            admin = caller.admin_name().unwrap_or_default(),
            "token issued"
        );
        Ok(json!(issued))
    }
}
