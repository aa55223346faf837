//! The gRPC front end to end: the real binary, a tonic client, standard
//! health and reflection, a decision stream fed by the JSON-RPC front, and a
//! parity run of one scenario through both fronts.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;

use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
use delegate_gateway::grpc::pb::{self, DecisionOutcome};
use delegateos::{DelegationId, Keypair, RevocationEntry, RevocationScope};
use serde_json::{json, Value};
use support::*;
use tonic::transport::Channel;
use tonic::Code;
use tonic_types::StatusExt;

fn start(dir: &std::path::Path, root: &Keypair) -> Gateway {
    start_with(dir, root, "")
}

/// A gateway serving gRPC too, with `server` added to its `[server]` table.
fn start_with(dir: &std::path::Path, root: &Keypair, server: &str) -> Gateway {
    let config = gateway_config(
        dir,
        &[("acme", root.principal_id())],
        &format!("grpc = \"127.0.0.1:0\"\n{server}"),
    );
    Gateway::start(&config)
}

async fn client(gw: &Gateway) -> DelegationGatewayClient<Channel> {
    let addr = gw.grpc.as_ref().expect("the gateway serves gRPC");
    DelegationGatewayClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn ask(dct: &str, resource: &str, cost: u64) -> pb::AuthorizeRequest {
    pb::AuthorizeRequest {
        credential_json: String::new(),
        dct: dct.to_owned(),
        request: Some(pb::CapabilityRequest {
            namespace: "docs".into(),
            action: "read".into(),
            resource: resource.into(),
        }),
        cost_microcents: cost,
    }
}

/// `message` carrying `dct` as `authorization: DCT …` metadata: how a
/// holder proves it made a reservation.
fn held<T>(message: T, dct: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut()
        .insert("authorization", format!("DCT {dct}").parse().unwrap());
    r
}

/// The status's ErrorInfo: (reason, domain, metadata).
fn error_info(s: &tonic::Status) -> (String, String, std::collections::HashMap<String, String>) {
    let details = s.get_error_details();
    let info = details
        .error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {s:?}"));
    (
        info.reason.clone(),
        info.domain.clone(),
        info.metadata.clone(),
    )
}

fn denied(
    result: Result<tonic::Response<pb::AuthorizeResponse>, tonic::Status>,
    code: Code,
    reason: &str,
) -> tonic::Status {
    let s = result.expect_err("denied");
    assert_eq!(s.code(), code, "{s:?}");
    let (r, domain, _) = error_info(&s);
    assert_eq!(
        (r.as_str(), domain.as_str()),
        (reason, "delegateos"),
        "{s:?}"
    );
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn every_method_and_each_denial_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let (root, alice, bob) = (seed(1), seed(2), seed(3));
    let gw = start(dir.path(), &root);
    let mut c = client(&gw).await;

    // Delegate, then its replay.
    let contract = contract(&root, ct(1), &["docs:read"]);
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 1000, 3600);
    let delegate = |token: &delegateos::Dct, id: DelegationId| pb::DelegateRequest {
        contract_json: serde_json::to_vec(&contract).unwrap(),
        dct: token.encode(),
        dct_format: "delegateos-sjt-v1".into(),
        delegation_id: id.to_string(),
        parent_delegation_id: DelegationId::root_parent().to_string(),
    };
    let r = c
        .delegate(delegate(&t0, del(1)))
        .await
        .unwrap()
        .into_inner();
    assert!(r.accepted, "{r:?}");
    assert_eq!(r.delegation_id, del(1).to_string());
    let r = c
        .delegate(delegate(&t0, del(1)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.accepted, r.reason.as_str()), (false, "replay"));
    assert!(!r.details.is_empty());

    let d = c
        .get_delegation(pb::GetDelegationRequest {
            delegation_id: del(1).to_string(),
        })
        .await
        .unwrap()
        .into_inner()
        .delegation
        .unwrap();
    assert_eq!(d.status(), pb::DelegationStatus::Active);
    assert_eq!(d.to_principal, alice.principal_id().to_string());
    // Never the token itself: its capabilities, budget and expiry.
    assert_eq!(d.capabilities[0].resource, "/project/**");
    assert_eq!(d.budget_microcents, 1000);
    assert!(d.expire_time.is_some());
    assert!(d.create_time.is_some() && d.complete_time.is_none());

    // Authorize, settle, release, budgets.
    let token = t0.encode();
    let a = c
        .authorize(ask(&token, "/project/a", 300))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.amount_microcents, 300);
    assert_eq!(a.tenant, "acme");
    let scope = a.scope.unwrap();
    assert_eq!(scope.delegation_id, del(1).to_string());
    assert_eq!(scope.capabilities[0].resource, "/project/**");
    assert!(a.deadline_time.unwrap().seconds > 0);
    let s = c
        .settle(held(
            pb::SettleRequest {
                reservation_id: a.reservation_id.clone(),
                actual_microcents: 200,
            },
            &token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((s.charged_microcents, s.released_microcents), (200, 100));
    let b = c
        .authorize(ask(&token, "/project/b", 50))
        .await
        .unwrap()
        .into_inner();
    let r = c
        .release(held(
            pb::ReleaseRequest {
                reservation_id: b.reservation_id.clone(),
            },
            &token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.released_microcents, 50);
    let budget = c
        .get_budget(pb::GetBudgetRequest {
            delegation_id: del(1).to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    let level = &budget.chains[0].levels[0];
    assert_eq!(
        (
            level.budget_microcents,
            level.spent_microcents,
            level.reserved_microcents,
            level.remaining_microcents
        ),
        (1000, 200, 0, 800)
    );
    // Settling twice: the reservation is gone.
    let e = c
        .settle(held(
            pb::SettleRequest {
                reservation_id: a.reservation_id,
                actual_microcents: 1,
            },
            &token,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert_eq!(
        e.get_error_details().resource_info().unwrap().resource_type,
        "reservation"
    );

    // Complete with an attestation.
    let att = attestation(&alice, 1, del(1), json!({"words": 3}), 100, true);
    let done = c
        .complete(pb::CompleteRequest {
            delegation_id: del(1).to_string(),
            attestation_json: serde_json::to_vec(&att).unwrap(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.status(), pb::DelegationStatus::Completed, "{done:?}");
    assert_eq!(done.charged_microcents, 100);
    assert!(done.verification.unwrap().passed);
    // A forged one changes nothing.
    let mut forged = attestation(&alice, 2, del(1), json!({"words": 3}), 100, true);
    forged["result"]["costMicrocents"] = json!(1);
    let e = c
        .complete(pb::CompleteRequest {
            delegation_id: del(1).to_string(),
            attestation_json: serde_json::to_vec(&forged).unwrap(),
        })
        .await
        .unwrap_err();
    assert_ne!(e.code(), Code::Ok);

    // Each denial, mapped to its status and ErrorInfo reason.
    let s = denied(
        c.authorize(ask(&token, "/etc/passwd", 1)).await,
        Code::PermissionDenied,
        "CAPABILITY_NOT_GRANTED",
    );
    let (_, _, meta) = error_info(&s);
    assert_eq!(meta["requested_resource"], "/etc/passwd");
    assert_eq!(meta["granted"], "docs:read:/project/**");
    let expired = root_token(&root, &alice, &["docs:read:/**"], 1000, -5).encode();
    denied(
        c.authorize(ask(&expired, "/a", 1)).await,
        Code::PermissionDenied,
        "EXPIRED",
    );
    let stranger = root_token(&seed(9), &alice, &["docs:read:/**"], 1000, 60).encode();
    denied(
        c.authorize(ask(&stranger, "/a", 1)).await,
        Code::PermissionDenied,
        "INVALID_SIGNATURE",
    );
    denied(
        c.authorize(ask("@@@", "/a", 1)).await,
        Code::PermissionDenied,
        "MALFORMED_TOKEN",
    );
    denied(
        c.authorize(ask(&token, "/project/a", 10_000)).await,
        Code::ResourceExhausted,
        "BUDGET_EXCEEDED",
    );
    let narrower = attenuate(&t0, &alice, &bob, 2, Some(100), None);
    // Revoke (the exact signed bytes), then the block is denied.
    let rev = RevocationEntry::sign(
        &alice,
        &narrower.revocation_ids()[1],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    // Alice signed the block; her token (which carries it) proves she may.
    let r = c
        .revoke(held(
            pb::RevokeRequest {
                revocation_json: serde_json::to_vec(&rev).unwrap(),
            },
            &narrower.encode(),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(r.newly_recorded);
    assert_eq!(r.scope(), pb::RevocationScope::Block);
    denied(
        c.authorize(ask(&narrower.encode(), "/project/a", 1)).await,
        Code::PermissionDenied,
        "REVOKED",
    );

    // Malformed input: INVALID_ARGUMENT with the field named.
    let bad_field = |e: tonic::Status| {
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        e.get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field
            .clone()
    };
    let e = c
        .get_budget(pb::GetBudgetRequest {
            delegation_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad_field(e), "delegation_id");
    let mut bad = delegate(&t0, del(4));
    bad.contract_json = b"{\"a\":1,\"a\":2}".to_vec();
    assert_eq!(
        bad_field(c.delegate(bad).await.unwrap_err()),
        "contract_json"
    );
    let e = c
        .authorize(pb::AuthorizeRequest {
            credential_json: String::new(),
            dct: token.clone(),
            request: None,
            cost_microcents: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(bad_field(e), "request");
    let e = c
        .revoke(pb::RevokeRequest {
            revocation_json: b"[]".to_vec(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad_field(e), "revocation_json");
    let e = c
        .get_delegation(pb::GetDelegationRequest {
            delegation_id: del(9).to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_decisions_streams_what_the_json_rpc_front_decides() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let gw = start(dir.path(), &root);
    let mut c = client(&gw).await;
    let mut all = c
        .watch_decisions(pb::WatchDecisionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut denials = c
        .watch_decisions(pb::WatchDecisionsRequest {
            tenant: "acme".into(),
            delegation_id: del(1).to_string(),
            outcome: DecisionOutcome::Denied as i32,
        })
        .await
        .unwrap()
        .into_inner();
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let rpc = |resource: &str| {
        gw.call(
            "delegateos/authorize",
            json!({"dct": token, "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": 5}),
        )
    };
    assert!(rpc("/project/a").get("result").is_some());
    assert!(rpc("/etc/shadow").get("error").is_some());

    async fn next(s: &mut tonic::Streaming<pb::WatchDecisionsResponse>) -> pb::Decision {
        tokio::time::timeout(std::time::Duration::from_secs(10), s.message())
            .await
            .expect("a decision in time")
            .unwrap()
            .unwrap()
            .decision
            .unwrap()
    }
    let first = next(&mut all).await;
    assert_eq!(
        (first.kind.as_str(), first.outcome()),
        ("authorize", DecisionOutcome::Allowed)
    );
    assert_eq!(first.tenant, "acme");
    assert_eq!(first.chain_delegation_ids, vec![del(1).to_string()]);
    assert_eq!(first.request.unwrap().resource, "/project/a");
    assert!(first.reservation_id.starts_with("res_"));
    assert_eq!(first.cost_microcents, 5);
    // Its protocol and front; a DCT's authorization names no tool.
    assert_eq!(
        (
            first.protocol.as_str(),
            first.front.as_str(),
            first.tool.as_str()
        ),
        ("delegateos", "jsonrpc", "")
    );
    let second = next(&mut all).await;
    assert_eq!(second.outcome(), DecisionOutcome::Denied);
    assert_eq!(second.denial_type, "capability_not_granted");
    // The filtered watcher saw only the denial.
    let only = next(&mut denials).await;
    assert_eq!(only.denial_type, "capability_not_granted");
    assert_eq!(only.request.unwrap().resource, "/etc/shadow");
    // And a gRPC decision reaches the watcher too.
    c.authorize(ask(&token, "/project/b", 1)).await.unwrap();
    let third = next(&mut all).await;
    assert_eq!(third.request.unwrap().resource, "/project/b");
    assert_eq!(third.front, "grpc");

    // SIGTERM ends the streams and the gateway drains and exits 0.
    let mut gw = gw;
    assert!(gw.terminate().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_reflection_are_standard() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &seed(1));
    let url = format!("http://{}", gw.grpc.as_ref().unwrap());
    let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "delegate_gateway.v1.DelegationGateway"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("not a service list");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for wanted in [
        "delegate_gateway.v1.DelegationGateway",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&wanted.to_owned()), "{names:?}");
    }
    // The schema itself, so clients need no proto files.
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(
            "delegate_gateway.v1.DelegationGateway".into(),
        )),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::FileDescriptorResponse(files)) =
        answers.message().await.unwrap().unwrap().message_response
    else {
        panic!("no file descriptor");
    };
    assert!(!files.file_descriptor_proto.is_empty());

    // Older clients ask v1alpha, which lists the same services.
    {
        use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
        use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
        let channel = Channel::from_shared(format!("http://{}", gw.grpc.as_ref().unwrap()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut answers = ServerReflectionClient::new(channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .unwrap()
            .into_inner();
        let Some(MessageResponse::ListServicesResponse(list)) =
            answers.message().await.unwrap().unwrap().message_response
        else {
            panic!("not a service list");
        };
        assert!(list
            .service
            .iter()
            .any(|s| s.name == "delegate_gateway.v1.DelegationGateway"));
    }
}

/// One scenario, two fronts: each step's outcome and the final budgets, in
/// a front-neutral form.
#[derive(Debug, PartialEq)]
enum Step {
    Allowed { amount: u64, remaining_before: u64 },
    Denied(String),
    Settled { charged: u64, released: u64 },
    Released(u64),
    Budget(Vec<(String, u64, u64, u64, u64)>),
    Delegated { accepted: bool, reason: String },
}

struct Scenario {
    root: Keypair,
    t0: delegateos::Dct,
    child: delegateos::Dct,
    expired: delegateos::Dct,
    contract: delegateos::TaskContract,
}

impl Scenario {
    fn new() -> Self {
        let root = seed(1);
        let (alice, bob) = (seed(2), seed(3));
        let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 1000, 3600);
        let child = attenuate(&t0, &alice, &bob, 2, Some(300), None);
        let expired = root_token(&root, &alice, &["docs:read:/**"], 1000, -5);
        let contract = contract(&root, ct(1), &["docs:read"]);
        Self {
            root,
            t0,
            child,
            expired,
            contract,
        }
    }
}

fn run_json_rpc(gw: &Gateway, s: &Scenario) -> Vec<Step> {
    let mut steps = Vec::new();
    let authorize = |token: &delegateos::Dct,
                     resource: &str,
                     cost: u64|
     -> (Step, Option<String>) {
        let r = gw.call(
            "delegateos/authorize",
            json!({"dct": token.encode(), "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": cost}),
        );
        match r.get("result") {
            Some(a) => (
                Step::Allowed {
                    amount: a["amountMicrocents"].as_u64().unwrap(),
                    remaining_before: a["scope"]["remainingBudgetMicrocents"].as_u64().unwrap(),
                },
                Some(a["reservationId"].as_str().unwrap().to_owned()),
            ),
            None => (
                Step::Denied(r["error"]["data"]["type"].as_str().unwrap().to_owned()),
                None,
            ),
        }
    };
    let d = gw.ok(
        "delegateos/delegate",
        json!({"contract": s.contract, "dct": s.t0.encode(), "dctFormat": "delegateos-sjt-v1",
               "delegationId": del(1), "parentDelegationId": DelegationId::root_parent()}),
    );
    steps.push(Step::Delegated {
        accepted: d["accepted"].as_bool().unwrap(),
        reason: d["reason"].as_str().unwrap_or_default().to_owned(),
    });
    let (step, res) = authorize(&s.child, "/project/a", 250);
    steps.push(step);
    let settled = gw.ok(
        "delegateos/settle",
        json!({"reservationId": res.unwrap(), "actualMicrocents": 200, "dct": s.child.encode()}),
    );
    steps.push(Step::Settled {
        charged: settled["chargedMicrocents"].as_u64().unwrap(),
        released: settled["releasedMicrocents"].as_u64().unwrap(),
    });
    steps.push(authorize(&s.child, "/project/a", 200).0); // over the child's 300
    let (step, res) = authorize(&s.t0, "/project/b", 400);
    steps.push(step);
    let released = gw.ok(
        "delegateos/release",
        json!({"reservationId": res.unwrap(), "dct": s.t0.encode()}),
    );
    steps.push(Step::Released(
        released["releasedMicrocents"].as_u64().unwrap(),
    ));
    steps.push(authorize(&s.t0, "/etc/passwd", 1).0);
    steps.push(authorize(&s.expired, "/project/a", 1).0);
    let rev = RevocationEntry::sign(
        &s.root,
        &s.t0.revocation_ids()[0],
        at(0),
        RevocationScope::Chain,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    steps.push(authorize(&s.child, "/project/a", 1).0);
    let b = gw.ok("delegateos/budget", json!({"delegationId": del(2)}));
    steps.push(Step::Budget(
        b["chains"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|l: &Value| {
                (
                    l["delegationId"].as_str().unwrap().to_owned(),
                    l["budgetMicrocents"].as_u64().unwrap(),
                    l["spentMicrocents"].as_u64().unwrap(),
                    l["reservedMicrocents"].as_u64().unwrap(),
                    l["remainingMicrocents"].as_u64().unwrap(),
                )
            })
            .collect(),
    ));
    steps
}

async fn run_grpc(c: &mut DelegationGatewayClient<Channel>, s: &Scenario) -> Vec<Step> {
    let mut steps = Vec::new();
    async fn authorize(
        c: &mut DelegationGatewayClient<Channel>,
        token: &delegateos::Dct,
        resource: &str,
        cost: u64,
    ) -> (Step, Option<String>) {
        match c.authorize(ask(&token.encode(), resource, cost)).await {
            Ok(a) => {
                let a = a.into_inner();
                (
                    Step::Allowed {
                        amount: a.amount_microcents,
                        remaining_before: a.scope.unwrap().remaining_budget_microcents,
                    },
                    Some(a.reservation_id),
                )
            }
            Err(e) => (Step::Denied(error_info(&e).0.to_ascii_lowercase()), None),
        }
    }
    let d = c
        .delegate(pb::DelegateRequest {
            contract_json: serde_json::to_vec(&s.contract).unwrap(),
            dct: s.t0.encode(),
            dct_format: "delegateos-sjt-v1".into(),
            delegation_id: del(1).to_string(),
            parent_delegation_id: DelegationId::root_parent().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    steps.push(Step::Delegated {
        accepted: d.accepted,
        reason: d.reason,
    });
    let (step, res) = authorize(c, &s.child, "/project/a", 250).await;
    steps.push(step);
    let settled = c
        .settle(held(
            pb::SettleRequest {
                reservation_id: res.unwrap(),
                actual_microcents: 200,
            },
            &s.child.encode(),
        ))
        .await
        .unwrap()
        .into_inner();
    steps.push(Step::Settled {
        charged: settled.charged_microcents,
        released: settled.released_microcents,
    });
    steps.push(authorize(c, &s.child, "/project/a", 200).await.0);
    let (step, res) = authorize(c, &s.t0, "/project/b", 400).await;
    steps.push(step);
    let released = c
        .release(held(
            pb::ReleaseRequest {
                reservation_id: res.unwrap(),
            },
            &s.t0.encode(),
        ))
        .await
        .unwrap()
        .into_inner();
    steps.push(Step::Released(released.released_microcents));
    steps.push(authorize(c, &s.t0, "/etc/passwd", 1).await.0);
    steps.push(authorize(c, &s.expired, "/project/a", 1).await.0);
    let rev = RevocationEntry::sign(
        &s.root,
        &s.t0.revocation_ids()[0],
        at(0),
        RevocationScope::Chain,
    )
    .unwrap();
    c.revoke(pb::RevokeRequest {
        revocation_json: serde_json::to_vec(&rev).unwrap(),
    })
    .await
    .unwrap();
    steps.push(authorize(c, &s.child, "/project/a", 1).await.0);
    let b = c
        .get_budget(pb::GetBudgetRequest {
            delegation_id: del(2).to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    steps.push(Step::Budget(
        b.chains[0]
            .levels
            .iter()
            .map(|l| {
                (
                    l.delegation_id.clone(),
                    l.budget_microcents,
                    l.spent_microcents,
                    l.reserved_microcents,
                    l.remaining_microcents,
                )
            })
            .collect(),
    ));
    steps
}

#[tokio::test(flavor = "multi_thread")]
async fn one_scenario_through_both_fronts_decides_and_spends_alike() {
    let scenario = Scenario::new();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let over_json_rpc = start(a.path(), &scenario.root);
    let over_grpc = start(b.path(), &scenario.root);
    let via_json_rpc = run_json_rpc(&over_json_rpc, &scenario);
    let mut c = client(&over_grpc).await;
    let via_grpc = run_grpc(&mut c, &scenario).await;
    assert_eq!(via_json_rpc, via_grpc);
    // And the scenario means something: the steps decided differently.
    assert_eq!(
        via_grpc[..4],
        [
            Step::Delegated {
                accepted: true,
                reason: String::new()
            },
            Step::Allowed {
                amount: 250,
                remaining_before: 300
            },
            Step::Settled {
                charged: 200,
                released: 50
            },
            Step::Denied("budget_exceeded".into()),
        ]
    );
    assert_eq!(via_grpc[6], Step::Denied("capability_not_granted".into()));
    assert_eq!(via_grpc[7], Step::Denied("expired".into()));
    assert_eq!(via_grpc[8], Step::Denied("revoked".into()));
    assert_eq!(
        via_grpc[9],
        Step::Budget(vec![
            (del(1).to_string(), 1000, 200, 0, 800),
            (del(2).to_string(), 300, 200, 0, 100),
        ])
    );
    // Both fronts count their requests alike, under each front's method names.
    let json_rpc_names = [
        ("delegateos/delegate", "Delegate"),
        ("delegateos/authorize", "Authorize"),
        ("delegateos/settle", "Settle"),
        ("delegateos/release", "Release"),
        ("delegateos/revoke", "Revoke"),
        ("delegateos/budget", "GetBudget"),
    ];
    let counted_over_json_rpc: BTreeMap<_, _> = request_counts(&over_json_rpc, "jsonrpc")
        .into_iter()
        .map(|((method, outcome), n)| {
            let (_, name) = json_rpc_names
                .iter()
                .find(|(m, _)| *m == method)
                .unwrap_or_else(|| panic!("unexpected method {method}"));
            ((name.to_string(), outcome), n)
        })
        .collect();
    let counted_over_grpc = request_counts(&over_grpc, "grpc");
    assert_eq!(counted_over_json_rpc, counted_over_grpc);
    assert_eq!(
        counted_over_grpc[&("Authorize".to_owned(), "denied".to_owned())],
        4
    );
    assert_eq!(
        counted_over_grpc[&("Authorize".to_owned(), "ok".to_owned())],
        2
    );
}

/// `dgw_requests_total` of one front, by method and outcome.
fn request_counts(gw: &Gateway, front: &str) -> BTreeMap<(String, String), u64> {
    let mut counts = BTreeMap::new();
    for line in gw.metrics().lines() {
        let Some((labels, value)) = line
            .strip_prefix("dgw_requests_total{")
            .and_then(|rest| rest.split_once("} "))
        else {
            continue;
        };
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_else(|| panic!("no {key} in {line}"))
        };
        // Every method and outcome is exported at zero from the start:
        // only what was counted is compared.
        let n: u64 = value.parse().unwrap();
        if label("front") == front && n > 0 {
            counts.insert((label("method"), label("outcome")), n);
        }
    }
    counts
}

/// The Python interpreter of `tests/.venv` (made by `tests/setup.sh`).
fn python() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.venv/bin/python");
    assert!(
        p.exists(),
        "tests/.venv is missing: run tests/setup.sh (the README's test command does)"
    );
    p
}

#[test]
fn a_python_grpcio_client_generated_from_the_proto_works() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let gw = start(dir.path(), &root);
    let stubs = dir.path().join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    let proto = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let generated = std::process::Command::new(python())
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto.display()))
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg("delegate_gateway/v1/gateway.proto")
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/python_client.py");
    let out = std::process::Command::new(python())
        .arg(script)
        .arg(&stubs)
        .arg(gw.grpc.as_ref().unwrap())
        .arg(&token)
        .output()
        .unwrap();
    let out = json_of_success(&out);
    assert!(
        out["allowed"]["reservation_id"]
            .as_str()
            .unwrap()
            .starts_with("res_"),
        "{out}"
    );
    assert_eq!(out["allowed"]["tenant"], "acme");
    assert_eq!(out["allowed"]["scope_delegation_id"], del(1).to_string());
    assert!(out["allowed"]["deadline_seconds"].as_i64().unwrap() > 0);
    assert_eq!(out["settled"], json!({"charged": 120, "released": 180}));
    assert_eq!(out["budget"], json!({"spent": 120, "remaining": 880}));
    assert_eq!(
        out["denied"],
        json!({"code": "PERMISSION_DENIED", "reason": "CAPABILITY_NOT_GRANTED",
               "domain": "delegateos", "requested_resource": "/etc/passwd"})
    );
}

/// `buf lint` (STANDARD rules, `proto/buf.yaml`) passes on the proto, with
/// the `buf` binary from `tests/package.json` (its Linux x86-64 build: the
/// registry this project installs from carries only that one).
#[test]
fn the_proto_passes_buf_lint() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let buf = root.join("tests/node_modules/@bufbuild/buf-linux-x64/bin/buf");
    assert!(
        buf.exists(),
        "buf is missing: run tests/setup.sh (on Linux x86-64; elsewhere install buf 1.75.0 and run `buf lint proto`)"
    );
    let out = std::process::Command::new(buf)
        .args(["lint", "proto"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A request whose message never finishes arriving ends after
/// `server.request_timeout`, on both fronts.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_request_ends_after_the_request_timeout_on_both_fronts() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let gw = start_with(dir.path(), &root, "request_timeout = \"1s\"");
    // A decision stream opened now outlives the limit.
    let mut watch = client(&gw)
        .await
        .watch_decisions(pb::WatchDecisionsRequest::default())
        .await
        .unwrap()
        .into_inner();

    // JSON-RPC: a body shorter than its Content-Length.
    let started = Instant::now();
    let mut http = tokio::net::TcpStream::connect(&gw.addr).await.unwrap();
    http.write_all(
        format!("POST /rpc HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"jsonrpc\"", gw.addr).as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), http.read(&mut answer))
        .await
        .expect("answered before 10 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(answer.contains("\"type\":\"timeout\""), "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(1));

    // gRPC: a message frame that announces 100 bytes and sends 10.
    let started = Instant::now();
    let tcp = tokio::net::TcpStream::connect(gw.grpc.as_ref().unwrap())
        .await
        .unwrap();
    let (sender, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut sender = sender.ready().await.unwrap();
    let request = hyper::Request::post(format!(
        "http://{}/delegate_gateway.v1.DelegationGateway/Authorize",
        gw.grpc.as_ref().unwrap()
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    let (response, mut body) = sender.send_request(request, false).unwrap();
    let mut partial = vec![0, 0, 0, 0, 100];
    partial.extend_from_slice(&[0x0a; 10]);
    body.send_data(partial.into(), false).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .expect("answered before 10 s")
        .unwrap();
    // A failed call comes as headers alone ("trailers-only").
    assert_eq!(
        response.headers().get("grpc-status").map(|v| v.as_bytes()),
        Some(&b"1"[..]),
        "CANCELLED: {:?}",
        response.headers()
    );
    assert!(started.elapsed() >= Duration::from_secs(1));

    // Over two seconds later, the stream still delivers.
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    gw.ok(
        "delegateos/authorize",
        json!({"dct": token, "namespace": "docs", "action": "read", "resource": "/project/a", "costMicrocents": 5}),
    );
    let seen = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("a decision before 10 s")
        .unwrap()
        .expect("the stream is open");
    assert_eq!(
        seen.decision.unwrap().outcome,
        DecisionOutcome::Allowed as i32
    );
}

/// On SIGTERM, health watchers hear NOT_SERVING, their streams end, and the
/// gateway exits without waiting out the shutdown grace.
#[tokio::test(flavor = "multi_thread")]
async fn health_turns_not_serving_at_shutdown_and_watchers_do_not_hold_it_up() {
    use std::time::{Duration, Instant};
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    let dir = tempfile::tempdir().unwrap();
    let mut gw = start_with(dir.path(), &seed(1), "shutdown_grace = \"30s\"");
    let url = format!("http://{}", gw.grpc.as_ref().unwrap());
    let channel = Channel::from_shared(url).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel);
    let mut watchers = Vec::new();
    for service in ["", "delegate_gateway.v1.DelegationGateway"] {
        let mut stream = health
            .watch(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(first.status(), ServingStatus::Serving, "{service:?}");
        watchers.push(stream);
    }
    let started = Instant::now();
    let exited = tokio::task::spawn_blocking(move || gw.terminate());
    for stream in &mut watchers {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("a status before 10 s")
            .unwrap()
            .expect("NOT_SERVING before the stream ends");
        assert_eq!(next.status(), ServingStatus::NotServing);
    }
    assert!(exited.await.unwrap().success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}: the watchers held up the drain",
        started.elapsed()
    );
}

/// Issue 15: with admin tokens configured, the decision stream and
/// reservations of others need credentials over gRPC too.
#[tokio::test(flavor = "multi_thread")]
async fn grpc_callers_need_the_holder_token_or_an_admin_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    // sha256("grpc-admin-secret")
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(b"grpc-admin-secret")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let config = gateway_config(
        dir.path(),
        &[("acme", root.principal_id())],
        &format!(
            "grpc = \"127.0.0.1:0\"\n[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n"
        ),
    );
    let gw = Gateway::start(&config);
    let mut c = client(&gw).await;
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let stranger = root_token_for(&root, &seed(3), &["docs:read:/**"], 10, 3600, del(5)).encode();
    let a = c
        .authorize(ask(&token, "/project/a", 400))
        .await
        .unwrap()
        .into_inner();

    let e = c
        .watch_decisions(pb::WatchDecisionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert_eq!(error_info(&e).0, "ADMIN_REQUIRED");
    for caller in [None, Some(stranger.as_str())] {
        let release = pb::ReleaseRequest {
            reservation_id: a.reservation_id.clone(),
        };
        let request = match caller {
            Some(t) => held(release, t),
            None => tonic::Request::new(release),
        };
        let e = c.release(request).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        assert_eq!(error_info(&e).0, "NOT_RESERVATION_HOLDER");
    }
    let e = c
        .get_delegation(pb::GetDelegationRequest {
            delegation_id: del(1).to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(error_info(&e).0, "ADMIN_REQUIRED");
    let mut wrong = tonic::Request::new(pb::GetBudgetRequest {
        delegation_id: del(1).to_string(),
    });
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer nope".parse().unwrap());
    let e = c.get_budget(wrong).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert_eq!(error_info(&e).0, "INVALID_ADMIN_TOKEN");

    // The admin sees the budget (still reserved: nothing above changed it)
    // and the decision stream.
    let mut by_admin = tonic::Request::new(pb::GetBudgetRequest {
        delegation_id: del(1).to_string(),
    });
    by_admin
        .metadata_mut()
        .insert("authorization", "Bearer grpc-admin-secret".parse().unwrap());
    let budget = c.get_budget(by_admin).await.unwrap().into_inner();
    assert_eq!(budget.chains[0].levels[0].reserved_microcents, 400);
    let mut watch = tonic::Request::new(pb::WatchDecisionsRequest::default());
    watch
        .metadata_mut()
        .insert("authorization", "Bearer grpc-admin-secret".parse().unwrap());
    c.watch_decisions(watch).await.unwrap();

    // Revoking a block without a signed entry is for admins only.
    let block = delegateos::Dct::decode(&token).unwrap().revocation_ids()[0].clone();
    let e = c
        .revoke_block(pb::RevokeBlockRequest {
            revocation_id: block.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(error_info(&e).0, "ADMIN_REQUIRED");
    let mut by_admin = tonic::Request::new(pb::RevokeBlockRequest {
        revocation_id: block,
    });
    by_admin
        .metadata_mut()
        .insert("authorization", "Bearer grpc-admin-secret".parse().unwrap());
    assert!(
        c.revoke_block(by_admin)
            .await
            .unwrap()
            .into_inner()
            .newly_recorded
    );
    let e = c.authorize(ask(&token, "/project/a", 1)).await.unwrap_err();
    assert_eq!(error_info(&e).0, "REVOKED");
}

/// Issue 15: one connection may not open unbounded streams (each held
/// stream costs memory until request_timeout).
#[tokio::test(flavor = "multi_thread")]
async fn grpc_advertises_a_stream_limit_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let gw = start(dir.path(), &seed(1));
    let tcp = tokio::net::TcpStream::connect(gw.grpc.as_ref().unwrap())
        .await
        .unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while send.current_max_send_streams() != 100 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server's SETTINGS allow {} streams",
            send.current_max_send_streams()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        send = send.ready().await.unwrap();
    }
}

/// Issue 32: a protocol's methods answer alike through `CallProtocol`: a
/// DelegateOS `delegateos/authorize` denial is the pipeline's denial status
/// (as gRPC `Authorize` gives it), its allowed answer the JSON-RPC result,
/// and the spec's aliases of the gateway's methods are no protocol's.
#[tokio::test(flavor = "multi_thread")]
async fn protocol_methods_answer_through_call_protocol_as_through_json_rpc() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let gw = start(dir.path(), &root);
    let mut c = client(&gw).await;
    let t0 = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let call = |method: &str, params: Value| pb::CallProtocolRequest {
        method: method.into(),
        params_json: params.to_string(),
    };
    let asked = |resource: &str| json!({"dct": t0, "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": 5});
    let allowed = c
        .call_protocol(call("delegateos/authorize", asked("/project/a")))
        .await
        .unwrap()
        .into_inner();
    let allowed: Value = serde_json::from_str(&allowed.result_json).unwrap();
    assert_eq!(allowed["allowed"], true, "{allowed}");
    let refused = c
        .call_protocol(call("delegateos/authorize", asked("/etc/passwd")))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let (reason, domain, _) = error_info(&refused);
    assert_eq!(
        (reason.as_str(), domain.as_str()),
        ("CAPABILITY_NOT_GRANTED", "delegateos")
    );
    let via_authorize = c.authorize(ask(&t0, "/etc/passwd", 5)).await.unwrap_err();
    assert_eq!(error_info(&via_authorize).0, reason);
    // Bad params: the words JSON-RPC gives.
    let bad = c
        .call_protocol(call("delegateos/authorize", json!({"dct": t0})))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    // An alias names a gateway method, which has its own gRPC call.
    let alias = c
        .call_protocol(call("delegateos/settle", json!({})))
        .await
        .unwrap_err();
    assert_eq!(alias.code(), Code::InvalidArgument, "{alias:?}");
}

/// A decision made over gRPC is recorded with its front and protocol in
/// the audit log, and no tool (a DCT's `Authorize` names none; decision
/// 490).
#[tokio::test(flavor = "multi_thread")]
async fn a_grpc_decision_is_recorded_with_its_front() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let gw = start(dir.path(), &root);
    let mut c = client(&gw).await;
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    c.authorize(ask(&token, "/project/a", 10)).await.unwrap();
    let log = dir.path().join("data/audit");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let decision = support::audit::records(&log)
            .into_iter()
            .find(|r| r.event["event"] == "decision");
        if let Some(r) = decision {
            assert_eq!(
                (&r.event["front"], &r.event["protocol"], r.event.get("tool")),
                (&json!("grpc"), &json!("delegateos"), None),
                "{}",
                r.event
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no decision recorded");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
