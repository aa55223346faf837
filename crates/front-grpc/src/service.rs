//! `DelegationGateway` over the gatekeeper: parse the request (signed
//! artifacts from their exact bytes), call the gatekeeper, map the result
//! with [`convert`](super::convert) and [`status`](super::status).

use std::future::Future;
use std::sync::Arc;

use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse, RevokeParams};
use delegateos::{CapabilityRequest, DelegationId};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

use super::pb::delegation_gateway_server::DelegationGateway;
use super::pb::{self, DecisionOutcome};
use super::{convert, status};
use dgw_core::budget::OnExpiry;
use dgw_core::caller::{Authenticator, Caller};
use dgw_core::gatekeeper::{DecisionEvent, GateError, Gatekeeper};
use dgw_core::protocol::{Call, Decision, Denial, Found, MethodAnswer, Registry};
use dgw_core::telemetry::{Outcome, RequestRecord};
use dgw_net::connections::{Busy, ConnInfo};
use dgw_oauth::{Challenge, ProtectedResource};

/// Decisions buffered per watcher before the stream waits for the client.
const WATCH_BUFFER: usize = 256;

/// The gRPC front.
pub struct GrpcFront {
    gate: Arc<Gatekeeper>,
    protocols: Arc<Registry>,
    max_message_bytes: usize,
    /// Who is calling, from the `authorization` metadata.
    auth: Authenticator,
    /// Becomes true at shutdown, ending every watch stream so the server
    /// can drain.
    stopping: watch::Receiver<bool>,
    stop: Arc<watch::Sender<bool>>,
    /// `[oauth]`: a refusal that calls for a challenge carries it.
    oauth: Option<ProtectedResource>,
}

impl GrpcFront {
    pub fn new(
        gate: Arc<Gatekeeper>,
        protocols: Arc<Registry>,
        max_message_bytes: usize,
        auth: Authenticator,
    ) -> Self {
        let (stop, stopping) = watch::channel(false);
        Self {
            gate,
            protocols,
            max_message_bytes,
            auth,
            stopping,
            stop: Arc::new(stop),
            oauth: None,
        }
    }

    /// An authorization's denial, with its challenge under `[oauth]`.
    fn denied(&self, d: &Denial) -> Failure {
        let requested = d.requested.as_ref().map(|r| serde_json::json!(r));
        self.challenged(
            (status::denial(d), Outcome::Denied),
            Challenge::for_refusal(d.kind.as_str(), requested.as_ref()),
        )
    }

    /// Refusals carry OAuth challenges (`[oauth]` configured).
    pub fn with_oauth(mut self, oauth: Option<ProtectedResource>) -> Self {
        self.oauth = oauth;
        self
    }

    /// `failure` as `[oauth]` answers it: a refusal for want of a
    /// credential, or of a good one, is `UNAUTHENTICATED` (one too narrow
    /// stays `PERMISSION_DENIED`) with the challenge in `www-authenticate`
    /// metadata (docs/oauth.md); without `[oauth]`, unchanged.
    fn challenged(&self, failure: Failure, challenge: Option<Challenge>) -> Failure {
        let (Some(oauth), Some(challenge)) = (&self.oauth, challenge) else {
            return failure;
        };
        let (status, outcome) = failure;
        let mut status = match challenge {
            Challenge::InsufficientScope(_) => status,
            Challenge::Missing | Challenge::InvalidToken => Status::with_details(
                Code::Unauthenticated,
                status.message().to_owned(),
                status.details().to_vec().into(),
            ),
        };
        if let Ok(value) = oauth.www_authenticate("grpc", &challenge).parse() {
            status.metadata_mut().insert("www-authenticate", value);
        }
        (status, outcome)
    }

    /// Ends every watch stream (called when the server shuts down).
    pub fn stopper(&self) -> Arc<watch::Sender<bool>> {
        self.stop.clone()
    }

    /// The caller behind a request's `authorization` metadata.
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Failure> {
        let value = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        let subject = request
            .extensions()
            .get::<ConnInfo>()
            .and_then(ConnInfo::subject);
        self.auth.caller(value, subject).map_err(|e| {
            let failure = (status::unauthenticated(&e), Outcome::Denied);
            self.challenged(failure, Challenge::for_refusal(e.kind(), None))
        })
    }

    /// The credential of a protocol without a scheme (an envelope), in the
    /// members it adds to a JSON-RPC request.
    async fn credential_in_json(&self, text: &str) -> Result<Found, Failure> {
        let parsed = delegateos::canonical::parse_strict(text.as_bytes(), self.max_message_bytes);
        let Ok(serde_json::Value::Object(mut members)) = parsed else {
            return Err(invalid("credential_json", "must be a JSON object"));
        };
        match self.protocols.take_from_params(&mut members).await {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(invalid(
                "credential_json",
                "carries no registered protocol's credential",
            )),
            Err(d) => Err((status::denial(&d), Outcome::Denied)),
        }
    }

    /// The credential the `authorization` metadata carries under a
    /// protocol's scheme.
    fn credential_in_metadata(&self, caller: &Caller) -> Result<Found, Failure> {
        match caller.presented() {
            Some((scheme, credentials)) => self
                .protocols
                .from_scheme(scheme, credentials)
                .ok_or_else(|| invalid("authorization", "names no protocol's scheme"))?
                .map_err(|d| (status::denial(&d), Outcome::Denied)),
            None => Err(self.challenged(
                invalid(
                    "dct",
                    "is required (or a protocol's credential in credential_json or the authorization metadata)",
                ),
                Some(Challenge::Missing),
            )),
        }
    }

    /// A signed artifact from its exact JSON bytes.
    fn signed<T: DeserializeOwned>(&self, field: &str, bytes: &[u8]) -> Result<T, Failure> {
        let value = delegateos::canonical::parse_strict(bytes, self.max_message_bytes)
            .map_err(|e| invalid(field, e))?;
        serde_json::from_value(value).map_err(|e| invalid(field, e))
    }

    /// Streams the decisions that pass `filter` until the client goes away,
    /// the server stops, or a reload removes or changes the admin
    /// credential that opened the stream (`opened_by`).
    fn watch(
        &self,
        filter: Filter,
        opened_by: OpenedBy,
        busy: Option<Busy>,
    ) -> ReceiverStream<Result<pb::WatchDecisionsResponse, Status>> {
        let mut decisions = self.gate.subscribe();
        let mut stopping = self.stopping.clone();
        let mut admins = self.auth.admin_changes();
        admins.mark_unchanged();
        let auth = self.auth.clone();
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        tokio::spawn(async move {
            // The connection is not idle while the stream is open.
            let _busy = busy;
            let mut missed = 0u64;
            // A reload between the call's authentication and the
            // subscription above.
            if !opened_by.still_admin(&auth) {
                let _ = tx.send(Err(status::credential_withdrawn())).await;
                return;
            }
            loop {
                let next = tokio::select! {
                    // Before a decision: one made after the reload never
                    // reaches a credential the reload took away.
                    biased;
                    changed = admins.changed() => {
                        if changed.is_ok() && opened_by.still_admin(&auth) {
                            continue;
                        }
                        None
                    }
                    () = tx.closed() => return,
                    _ = stopping.wait_for(|s| *s) => return,
                    next = decisions.recv() => Some(next),
                };
                let Some(next) = next else {
                    let _ = tx.send(Err(status::credential_withdrawn())).await;
                    return;
                };
                match next {
                    Ok(event) if filter.matches(&event) => {
                        let message = pb::WatchDecisionsResponse {
                            decision: Some(convert::decision(&event)),
                            missed,
                        };
                        if tx.send(Ok(message)).await.is_err() {
                            return;
                        }
                        missed = 0;
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(n)) => missed += n,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        ReceiverStream::new(rx)
    }
}

/// Marks the request's connection busy (not idle, not to be shed) while
/// the guard lives.
fn busy<T>(request: &Request<T>) -> Option<Busy> {
    request.extensions().get::<ConnInfo>().map(ConnInfo::busy)
}

/// A failed call: its status, and how `dgw_requests_total` counts it.
type Failure = (Status, Outcome);

/// Malformed input in `field`.
fn invalid(field: &str, description: impl ToString) -> Failure {
    (
        status::bad_field(field, description.to_string()),
        Outcome::Error,
    )
}

fn gate_failure(e: &GateError) -> Failure {
    (status::gate_error(e), e.outcome())
}

fn delegation_id(field: &str, text: &str) -> Result<DelegationId, Failure> {
    DelegationId::parse(text).map_err(|e| invalid(field, e))
}

/// The methods of `delegate_gateway.v1`, as [`counted`] names them in
/// `dgw_requests_total{front="grpc"}`.
pub const METHODS: &[&str] = &[
    "Delegate",
    "Complete",
    "Revoke",
    "RevokeBlock",
    "Authorize",
    "Settle",
    "Release",
    "GetBudget",
    "GetDelegation",
    "CallProtocol",
    "WatchDecisions",
];

/// Runs one call, counted and logged as every front counts its requests
/// (`dgw_requests_total{front="grpc"}`, one info line), also when the
/// client goes away before the answer.
async fn counted<T>(
    method: &'static str,
    call: impl Future<Output = Result<(T, Outcome), Failure>>,
) -> Result<Response<T>, Status> {
    debug_assert!(
        METHODS.contains(&method),
        "{method} is missing from METHODS"
    );
    let record = RequestRecord::start("grpc", method);
    let (result, outcome) = match call.await {
        Ok((message, outcome)) => (Ok(Response::new(message)), outcome),
        Err((status, outcome)) => (Err(status), outcome),
    };
    record.end(outcome);
    result
}

/// The credential a stream was opened with, to authenticate again when
/// the administrators change.
struct OpenedBy {
    authorization: Option<Vec<u8>>,
    subject: Option<String>,
    /// How it was recognised (`token:ops`).
    admin: Option<String>,
}

impl OpenedBy {
    /// Whether the same credential still makes the same administrator.
    fn still_admin(&self, auth: &Authenticator) -> bool {
        auth.caller(self.authorization.as_deref(), self.subject.as_deref())
            .is_ok_and(|c| c.is_admin() && c.admin_name() == self.admin)
    }
}

/// What a watcher asked for.
struct Filter {
    tenant: String,
    delegation: Option<DelegationId>,
    outcome: DecisionOutcome,
}

impl Filter {
    fn matches(&self, e: &DecisionEvent) -> bool {
        (self.tenant.is_empty() || e.tenant.as_deref() == Some(self.tenant.as_str()))
            && self.delegation.as_ref().is_none_or(|d| e.chain.contains(d))
            && match self.outcome {
                DecisionOutcome::Unspecified => true,
                DecisionOutcome::Allowed => e.allowed,
                DecisionOutcome::Denied => !e.allowed,
            }
    }
}

#[tonic::async_trait]
impl DelegationGateway for GrpcFront {
    async fn delegate(
        &self,
        request: Request<pb::DelegateRequest>,
    ) -> Result<Response<pb::DelegateResponse>, Status> {
        let _busy = busy(&request);
        counted("Delegate", async {
            let r = request.into_inner();
            let params = DelegateParams {
                contract: self.signed("contract_json", &r.contract_json)?,
                dct: r.dct,
                dct_format: r.dct_format,
                delegation_id: delegation_id("delegation_id", &r.delegation_id)?,
                parent_delegation_id: delegation_id(
                    "parent_delegation_id",
                    &r.parent_delegation_id,
                )?,
            };
            let response = self
                .gate
                .delegate(params)
                .await
                .map_err(|e| gate_failure(&e))?;
            Ok(match response {
                DelegateResponse::Accept(a) => (
                    pb::DelegateResponse {
                        accepted: true,
                        delegation_id: a.delegation_id.to_string(),
                        reason: String::new(),
                        details: String::new(),
                    },
                    Outcome::Ok,
                ),
                DelegateResponse::Reject(r) => (
                    pb::DelegateResponse {
                        accepted: false,
                        delegation_id: String::new(),
                        reason: r.reason,
                        details: r.details,
                    },
                    Outcome::Denied,
                ),
            })
        })
        .await
    }

    async fn complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::CompleteResponse>, Status> {
        let _busy = busy(&request);
        counted("Complete", async {
            let r = request.into_inner();
            let params = CompleteParams {
                delegation_id: delegation_id("delegation_id", &r.delegation_id)?,
                attestation: self.signed("attestation_json", &r.attestation_json)?,
            };
            let c = self
                .gate
                .complete(params)
                .await
                .map_err(|e| gate_failure(&e))?;
            Ok((convert::completion(&c), Outcome::Ok))
        })
        .await
    }

    async fn revoke(
        &self,
        request: Request<pb::RevokeRequest>,
    ) -> Result<Response<pb::RevokeResponse>, Status> {
        let _busy = busy(&request);
        counted("Revoke", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let params = RevokeParams {
                revocation: self.signed("revocation_json", &r.revocation_json)?,
            };
            let rev = self
                .gate
                .revoke(&caller, params)
                .await
                .map_err(|e| gate_failure(&e))?;
            Ok((convert::revocation(&rev), Outcome::Ok))
        })
        .await
    }

    async fn revoke_block(
        &self,
        request: Request<pb::RevokeBlockRequest>,
    ) -> Result<Response<pb::RevokeBlockResponse>, Status> {
        let _busy = busy(&request);
        counted("RevokeBlock", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let rev = self
                .gate
                .revoke_by_admin(&caller, &r.revocation_id)
                .await
                .map_err(|e| gate_failure(&e))?;
            let message = pb::RevokeBlockResponse {
                revocation_id: rev.revocation_id,
                newly_recorded: rev.newly_recorded,
                revoked_delegation_ids: rev
                    .revoked_delegations
                    .iter()
                    .map(|d| d.to_string())
                    .collect(),
            };
            Ok((message, Outcome::Ok))
        })
        .await
    }

    async fn authorize(
        &self,
        request: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        let _busy = busy(&request);
        counted("Authorize", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let asked = r.request.ok_or_else(|| invalid("request", "is required"))?;
            let asked = CapabilityRequest {
                namespace: asked.namespace,
                action: asked.action,
                resource: asked.resource,
            };
            // The DCT in the message (the pivot's own path), else any
            // protocol's credential in the `authorization` metadata.
            if !r.dct.is_empty() {
                let requests = std::slice::from_ref(&asked);
                return match self
                    .gate
                    .authorize(&r.dct, requests, r.cost_microcents, OnExpiry::Release)
                    .await
                {
                    Ok(Decision::Allowed(a)) => Ok((convert::authorization(&a), Outcome::Ok)),
                    Ok(Decision::Denied(d)) => Err(self.denied(&d)),
                    Err(e) => Err(gate_failure(&e)),
                };
            }
            let found = if r.credential_json.is_empty() {
                self.credential_in_metadata(&caller)?
            } else {
                let carried = self.credential_in_json(&r.credential_json).await?;
                // The metadata's half of a two-part credential (a bearer
                // token) combines with the JSON's delegation.
                match caller.presented() {
                    Some(_) => {
                        let header = self.credential_in_metadata(&caller)?;
                        self.protocols.combine(&header, &carried).unwrap_or(carried)
                    }
                    None => carried,
                }
            };
            let call = Call::one(&asked, r.cost_microcents, "grpc");
            match self
                .gate
                .authorize_with(&found, &call, OnExpiry::Release)
                .await
            {
                Ok(Decision::Allowed((a, _))) => Ok((convert::authorization(&a), Outcome::Ok)),
                Ok(Decision::Denied(d)) => Err(self.denied(&d)),
                Err(e) => Err(gate_failure(&e)),
            }
        })
        .await
    }

    async fn settle(
        &self,
        request: Request<pb::SettleRequest>,
    ) -> Result<Response<pb::SettleResponse>, Status> {
        let _busy = busy(&request);
        counted("Settle", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let s = self
                .gate
                .settle(&caller, &r.reservation_id, r.actual_microcents)
                .await
                .map_err(|e| gate_failure(&e))?;
            Ok((convert::settlement(&s), Outcome::Ok))
        })
        .await
    }

    async fn release(
        &self,
        request: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::ReleaseResponse>, Status> {
        let _busy = busy(&request);
        counted("Release", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let released = self
                .gate
                .release(&caller, &r.reservation_id)
                .await
                .map_err(|e| gate_failure(&e))?;
            let message = pb::ReleaseResponse {
                reservation_id: r.reservation_id,
                released_microcents: released,
            };
            Ok((message, Outcome::Ok))
        })
        .await
    }

    async fn get_budget(
        &self,
        request: Request<pb::GetBudgetRequest>,
    ) -> Result<Response<pb::GetBudgetResponse>, Status> {
        let _busy = busy(&request);
        counted("GetBudget", async {
            let caller = self.caller(&request)?;
            let id = delegation_id("delegation_id", &request.into_inner().delegation_id)?;
            let report = self
                .gate
                .budget(&caller, &id)
                .await
                .map_err(|e| gate_failure(&e))?;
            Ok((convert::budget(&report), Outcome::Ok))
        })
        .await
    }

    async fn get_delegation(
        &self,
        request: Request<pb::GetDelegationRequest>,
    ) -> Result<Response<pb::GetDelegationResponse>, Status> {
        let _busy = busy(&request);
        counted("GetDelegation", async {
            let caller = self.caller(&request)?;
            let id = delegation_id("delegation_id", &request.into_inner().delegation_id)?;
            let d = self
                .gate
                .delegation(&caller, &id)
                .await
                .map_err(|e| gate_failure(&e))?;
            let message = pb::GetDelegationResponse {
                delegation: Some(convert::delegation(&d)),
            };
            Ok((message, Outcome::Ok))
        })
        .await
    }

    async fn call_protocol(
        &self,
        request: Request<pb::CallProtocolRequest>,
    ) -> Result<Response<pb::CallProtocolResponse>, Status> {
        let _busy = busy(&request);
        counted("CallProtocol", async {
            let caller = self.caller(&request)?;
            let r = request.into_inner();
            let protocol = self
                .protocols
                .serving(&r.method)
                .ok_or_else(|| invalid("method", "no registered protocol serves it"))?;
            let params = if r.params_json.is_empty() {
                serde_json::json!({})
            } else {
                let parsed = delegateos::canonical::parse_strict(
                    r.params_json.as_bytes(),
                    self.max_message_bytes,
                );
                match parsed {
                    Ok(v @ serde_json::Value::Object(_)) => v,
                    _ => return Err(invalid("params_json", "must be a JSON object")),
                }
            };
            let answer = protocol
                .answer_method(&caller, &r.method, Some(params))
                .await
                .map_err(|e| (status::protocol_error(protocol.id.name, &e), e.outcome()))?;
            let (result, outcome) = match answer {
                MethodAnswer::Done(v) => (v, Outcome::Ok),
                MethodAnswer::Refused(v) => (v, Outcome::Denied),
                MethodAnswer::Denied(d) => return Err((status::denial(&d), Outcome::Denied)),
            };
            let message = pb::CallProtocolResponse {
                result_json: result.to_string(),
            };
            Ok((message, outcome))
        })
        .await
    }

    type WatchDecisionsStream = ReceiverStream<Result<pb::WatchDecisionsResponse, Status>>;

    async fn watch_decisions(
        &self,
        request: Request<pb::WatchDecisionsRequest>,
    ) -> Result<Response<Self::WatchDecisionsStream>, Status> {
        // Counted when the stream opens; its decisions are counted where
        // they are made.
        let busy = busy(&request);
        counted("WatchDecisions", async {
            let caller = self.caller(&request)?;
            if !caller.is_admin() {
                return Err(gate_failure(&GateError::Forbidden {
                    kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
                    detail: "WatchDecisions needs an admin token".into(),
                }));
            }
            let opened_by = OpenedBy {
                authorization: request
                    .metadata()
                    .get("authorization")
                    .map(|v| v.as_bytes().to_vec()),
                subject: request
                    .extensions()
                    .get::<ConnInfo>()
                    .and_then(ConnInfo::subject)
                    .map(str::to_owned),
                admin: caller.admin_name(),
            };
            let r = request.into_inner();
            let filter = Filter {
                tenant: r.tenant,
                delegation: match r.delegation_id.as_str() {
                    "" => None,
                    text => Some(delegation_id("delegation_id", text)?),
                },
                outcome: DecisionOutcome::try_from(r.outcome).map_err(|_| {
                    invalid("outcome", format!("{} is not a DecisionOutcome", r.outcome))
                })?,
            };
            Ok((self.watch(filter, opened_by, busy), Outcome::Ok))
        })
        .await
    }
}
