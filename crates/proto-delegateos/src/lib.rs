//! DelegateOS on the protocol seam: DCTs under `Authorization: DCT`, or in
//! a request's `params._delegateos` (§11.3), verified by the gatekeeper's
//! DCT verification (the pivot model's own verifier, shared with every
//! protocol whose endpoints are paid with a DCT); its `/revocations`
//! endpoint for peers, its JSON-RPC methods (§9) and `dgw/tokens/issue`.

pub mod methods;
pub mod module;

use std::sync::Arc;

use async_trait::async_trait;
use delegateos::messages::{McpDelegateos, MCP_FIELD};
use serde_json::{json, Map, Value};

use dgw_core::gatekeeper::{GateError, Gatekeeper};
use dgw_core::protocol::{
    admitting, Admits, Call, Credentials, Decision, Denial, Grant, Hosts, HttpAnswer, HttpRequest,
    MethodAnswer, Presented, Protocol, ProtocolId,
};

/// Its name.
pub const ID: ProtocolId = dgw_core::gatekeeper::DELEGATEOS;

/// The DelegateOS protocol.
pub struct DelegateOs {
    gate: Arc<Gatekeeper>,
    /// `dgw/tokens/issue`: the gateway's key and the tenants' issuing delegations.
    issuing: Arc<dgw_core::issuing::Issuing>,
}

impl DelegateOs {
    pub fn new(gate: Arc<Gatekeeper>, issuing: Arc<dgw_core::issuing::Issuing>) -> Self {
        Self { gate, issuing }
    }
}

/// The `_delegateos` member of a request's params, when present.
fn take_field(params: &mut Map<String, Value>) -> Result<Option<McpDelegateos>, Denial> {
    let Some(raw) = params.remove(MCP_FIELD) else {
        return Ok(None);
    };
    let field: McpDelegateos = serde_json::from_value(raw)
        .map_err(|e| Denial::malformed(ID, format!("{MCP_FIELD}: {e}")))?;
    field.check_format().map_err(|r| Denial::pipeline(ID, r))?;
    Ok(Some(field))
}

/// How far before a peer's `since` entries are served again: `since`
/// filters on the signer's `revokedAt`, which another replica may record
/// later than it says (docs/decisions.md 125).
const SINCE_OVERLAP: time::Duration = time::Duration::minutes(5);

impl DelegateOs {
    /// `GET /revocations[?since=<RFC 3339>]`: the v0.2 `revocationEndpoint`
    /// (spec §4.3), every signed entry (those revoked at or after `since`
    /// less five minutes), for peers that are not dgw to poll.
    fn revocations(&self, request: &HttpRequest<'_>) -> HttpAnswer {
        if request.method != "GET" {
            return HttpAnswer::new(
                405,
                json!({"error": {"type": "method_not_allowed", "message": "GET /revocations"}}),
            );
        }
        if !self.gate.revocations().is_current() {
            return HttpAnswer::new(
                503,
                json!({"error": {"type": "state_unavailable",
                    "message": "the revocation feed is lost; the list may be incomplete"}}),
            );
        }
        let since = request
            .query
            .unwrap_or_default()
            .split('&')
            .find_map(|pair| pair.strip_prefix("since="));
        let from = match since
            .map(|s| delegateos::Timestamp::parse(&s.replace("%3A", ":").replace("%2B", "+")))
        {
            None => None,
            Some(Ok(t)) => Some(t.instant() - SINCE_OVERLAP),
            Some(Err(e)) => {
                return HttpAnswer::new(
                    400,
                    json!({"error": {"type": "invalid_params",
                        "message": format!("since must be an RFC 3339 time: {e}")}}),
                )
            }
        };
        let entries: Vec<_> = self
            .gate
            .revocations()
            .signed_entries()
            .into_iter()
            .filter(|e| from.is_none_or(|from| e.revoked_at.instant() >= from))
            .collect();
        let as_of = delegateos::Timestamp::from_instant(time::OffsetDateTime::now_utc());
        HttpAnswer::new(200, json!({"revocations": entries, "asOf": as_of}))
    }
}

impl Protocol for DelegateOs {
    fn id(&self) -> ProtocolId {
        ID
    }

    fn admits(self: Arc<Self>) -> Option<Arc<dyn Admits>> {
        Some(admitting(self))
    }

    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        Some(self)
    }
}

#[async_trait]
impl Hosts for DelegateOs {
    fn http_paths(&self) -> &'static [&'static str] {
        &["/revocations"]
    }

    fn methods(&self) -> &'static [&'static str] {
        methods::METHODS
    }

    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        methods::ALIASES
    }

    async fn answer_method(
        &self,
        caller: &dgw_core::caller::Caller,
        method: &str,
        params: Option<Value>,
    ) -> Result<MethodAnswer, GateError> {
        self.answer(caller, method, params).await
    }

    async fn serve_http(&self, request: HttpRequest<'_>) -> HttpAnswer {
        if request.path == "/revocations" {
            self.revocations(&request)
        } else {
            HttpAnswer::not_found()
        }
    }
}

/// DCTs, as the request carried them (`_delegateos`, or a header's).
#[async_trait]
impl Credentials for DelegateOs {
    type Credential = McpDelegateos;
    type Granted = ();

    fn scheme(&self) -> Option<&'static str> {
        Some("DCT")
    }

    fn read_header(&self, credentials: &str) -> Result<Presented<McpDelegateos>, Denial> {
        let field = McpDelegateos {
            dct: credentials.to_owned(),
            format: None,
            delegation_id: None,
            contract_id: None,
        };
        Ok(Presented::new(credentials, field))
    }

    async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Presented<McpDelegateos>>, Denial> {
        let Some(Value::Object(params)) = request.get_mut("params") else {
            return Ok(None);
        };
        Ok(take_field(params)?.map(|f| Presented::new(f.dct.clone(), f)))
    }

    async fn grant(
        &self,
        field: &McpDelegateos,
        _: &str,
        _call: &Call<'_>,
    ) -> Result<Decision<Grant<()>>, GateError> {
        let grant = match self.gate.dct_grant(&field.dct) {
            Ok(g) => g.map_context(drop),
            Err(d) => return Ok(Decision::Denied(d)),
        };
        // `_delegateos.delegationId` and `contractId`, when given, must name
        // the token's own.
        let last = grant.chain.last();
        if let (Some(named), Some(own)) = (&field.delegation_id, last) {
            if named != own {
                return Ok(Decision::Denied(Denial::protocol(
                    ID,
                    "delegation_mismatch",
                    format!(
                        "_delegateos.delegationId is {named} but the DCT's delegation is {own}"
                    ),
                )));
            }
        }
        if let Some(named) = &field.contract_id {
            let own = self.gate.contract_of(&field.dct);
            if own.as_ref() != Some(named) {
                return Ok(Decision::Denied(Denial::protocol(
                    ID,
                    "delegation_mismatch",
                    format!(
                        "_delegateos.contractId is {named} but the DCT's contract is {}",
                        own.map(|c| c.to_string()).unwrap_or_default()
                    ),
                )));
            }
        }
        Ok(Decision::Allowed(grant))
    }

    async fn standing(
        &self,
        field: &McpDelegateos,
    ) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        self.gate
            .standing(&field.dct)
            .await
            .map(|scope| Some(scope.capabilities))
            .map_err(|d| *d)
    }
}
