//! Agenta end to end: the real `dgw` between a buyer (these tests, paying
//! with DCTs) and a seller (`support::market`). Offers, purchases,
//! authenticated seller callbacks, settlement, attestations that verify,
//! DelegateOS sellers, idempotency, budget exactness under concurrency,
//! restarts, expiry, the gRPC twins. Conformance (schemas, states):
//! `agenta_conformance.rs`; hostile input: `agenta_security.rs`.

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::market::*;
use support::*;

#[test]
fn a_purchase_is_reserved_forwarded_reported_settled_and_attested() {
    let w = World::new(1000, "buyer_verified", 600);
    // The card lists the protocol, its schemas and the offer.
    let (status, card) = w.send("GET", "/.well-known/agent.json", None, b"");
    assert_eq!(status, 200);
    assert_eq!(card["offers"][0]["offer_id"], "offer.summarize-1");
    let schema = card["protocols"][0]["schemas"][1]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, served) = w.send("GET", &schema, None, b"");
    assert_eq!((status, served["type"].clone()), (200, json!("object")));

    let req = request(1, 300);
    let (status, answer) = w.buy(&req);
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["status"], "accepted");
    // The seller got dgw's callback with a fresh secret, never the buyer's.
    let forwarded = &w.seller.forwards()[0];
    let secret = w.secret_of("req-00000001");
    assert!(secret.len() >= 32, "at least 128 bits");
    assert_ne!(secret, "buyer-own-secret");
    assert!(forwarded["callback"]["url"]
        .as_str()
        .unwrap()
        .ends_with("/agenta/v0/execution-receipts"));
    let state = w.state("req-00000001");
    assert_eq!(state["status"], "accepted");
    assert_eq!(state["max_microcents"], 300_000_000);
    assert!(
        !state.to_string().contains(&secret),
        "the secret is never shown"
    );

    // Without the request's secret a receipt changes nothing.
    let done = completed(&req, "rcpt-done", json!("short"), 400);
    assert_eq!(w.report(None, &done).0, 401);
    assert_eq!(w.report(Some("not-the-secret"), &done).0, 401);
    assert_eq!(w.state("req-00000001")["status"], "accepted");

    let (status, _) = w.report(Some(&secret), &receipt(&req, "rcpt-work", "in_progress"));
    assert_eq!(status, 200);
    let (status, body) = w.report(Some(&secret), &receipt(&req, "rcpt-work2", "in_progress"));
    assert_eq!((status, code(&body)), (409, "invalid_state_transition"));
    // A result that breaks the output schema is refused and charges nothing.
    let (status, body) = w.report(Some(&secret), &completed(&req, "rcpt-bad", json!(42), 250));
    assert_eq!(
        (status, code(&body)),
        (422, "output_schema_violation"),
        "{body}"
    );
    assert_eq!(w.state("req-00000001")["status"], "in_progress");
    // Asking more than max_amount: charged max_amount, the attempt recorded.
    let (status, body) = w.report(Some(&secret), &done);
    assert_eq!(status, 200, "{body}");
    let state = w.state("req-00000001");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["charged_microcents"], 300_000_000);
    assert_eq!(state["overcharge_attempt"]["final_amount"], 400);
    assert_eq!(
        state["refused_receipts"][0]["code"],
        "output_schema_violation"
    );
    // The seller retrying its receipt changes nothing; another receipt
    // under the same ID is refused.
    let (status, _) = w.report(Some(&secret), &done);
    assert_eq!(status, 200);
    assert_eq!(w.state("req-00000001")["charged_microcents"], 300_000_000);
    let (status, body) = w.report(Some(&secret), &completed(&req, "rcpt-done", json!("x"), 1));
    assert_eq!((status, code(&body)), (409, "receipt_id_reused"));
    // A terminal request never changes again.
    let (status, body) = w.report(Some(&secret), &receipt(&req, "rcpt-late", "failed"));
    assert_eq!((status, code(&body)), (409, "invalid_state_transition"));

    // The attestation verifies with `dgw attestation verify`.
    let (a, c) = (w.dir.join("attestation.json"), w.dir.join("contract.json"));
    std::fs::write(&a, state["attestation"].to_string()).unwrap();
    std::fs::write(&c, state["contract"].to_string()).unwrap();
    let out = run(&[
        "attestation",
        "verify",
        a.to_str().unwrap(),
        "--contract",
        c.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("VALID"));
    assert_eq!(
        state["attestation"]["result"]["costMicrocents"],
        300_000_000
    );

    // The buyer verifies (buyer_verified): a failed verification shows.
    let verification = json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "verification_result",
        "verification_id": "ver-0000001", "request_id": "req-00000001", "receipt_id": "rcpt-done",
        "verifier_agent": {"agent_id": "buyer-agent", "organization_id": "globex"},
        "decision": "fail", "score": 0.1, "failure_reasons": ["digest_mismatch"],
        "checks": [{"check_id": "digest", "description": "artifact digest", "status": "fail"}],
        "verified_at": "2026-11-23T12:02:00Z"
    });
    let (status, body) = w.post(
        "/agenta/v0/verification-results",
        Some(&format!("Bearer {secret}")),
        &verification,
    );
    assert_eq!(
        (status, code(&body)),
        (401, "unauthorized"),
        "the seller is not the verifier"
    );
    let (status, body) = w.post(
        "/agenta/v0/verification-results",
        Some(&w.dct()),
        &verification,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["verification_failures"], json!(["digest_mismatch"]));

    // Operators see it: the settled amount, the receipts, the refusals.
    let (_, metrics) = w.gateway.http("GET", "/metrics", b"");
    let metrics = String::from_utf8(metrics).unwrap();
    let line = |needle: &str| {
        metrics
            .lines()
            .find(|l| l.contains(needle) && !l.starts_with('#'))
            .unwrap_or_else(|| panic!("no {needle} in {metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        line("dgw_protocol_settled_microcents_total{protocol=\"agenta\"}"),
        "300000000"
    );
    assert_eq!(
        line("dgw_protocol_events_total{protocol=\"agenta\",event=\"request_ended\"}"),
        "1"
    );
    assert!(metrics
        .contains("dgw_denials_total{protocol=\"agenta\",type=\"output_schema_violation\"} 1"));
    // Exported at zero from the start: counted means above it.
    assert_ne!(
        line("dgw_requests_total{front=\"http\",method=\"agenta\",outcome=\"denied\"}"),
        "0"
    );

    // The audit log tells the story, in order.
    let (_, audit) = w.gateway.call_as(
        &format!("Bearer {ADMIN}"),
        "dgw/audit",
        json!({"limit": 1000}),
    );
    let events: Vec<&str> = audit["result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["protocol"] == "agenta")
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "offer_registered",
            "execution_request",
            "execution_receipt",
            "execution_receipt",
            "execution_receipt",
            "request_ended",
            "verification_result"
        ],
        "{audit}"
    );

    // The remaining budget is enforced: 10 dollars less the 3 charged leave
    // 7, so 8 more do not fit.
    let (status, body) = w.buy(&request(2, 800));
    assert_eq!(
        (status, code(&body)),
        (402, "budget_authorization_missing"),
        "{body}"
    );
    assert_eq!(
        w.seller.forwards().len(),
        1,
        "a refused request is never forwarded"
    );
}

#[test]
fn protocol_level_failures_are_typed_and_change_nothing() {
    let w = World::new(1000, "buyer_verified", 600);
    // Schema: every violation with its pointer.
    let mut bad = request(1, 300);
    bad.as_object_mut().unwrap().remove("idempotency_key");
    bad["surprise"] = json!(1);
    let (status, body) = w.buy(&bad);
    assert_eq!((status, code(&body)), (400, "schema_validation_failure"));
    assert!(
        body["error"]["details"]["violations"]
            .as_array()
            .unwrap()
            .len()
            >= 2,
        "{body}"
    );
    // A body that is not JSON.
    let (status, body) = w.send(
        "POST",
        "/agenta/v0/execution-requests",
        Some(&w.dct()),
        b"{",
    );
    assert_eq!((status, code(&body)), (400, "schema_validation_failure"));
    // Only an administrator's secret registers offers: not anonymous, not
    // a buyer's DCT, not a secret that is no admin's.
    let v2 = offer(&w.seller, "2", "buyer_verified", 600);
    for auth in [None, Some(w.dct()), Some("Bearer not-the-admin".to_owned())] {
        let (status, body) = w.post("/agenta/v0/offers", auth.as_deref(), &v2);
        assert_eq!((status, code(&body)), (403, "admin_required"));
    }
    // The offer moved on: version 1 is no longer current.
    let admin = format!("Bearer {ADMIN}");
    let (status, _) = w.post("/agenta/v0/offers", Some(&admin), &v2);
    assert_eq!(status, 201);
    let (status, body) = w.buy(&request(1, 300));
    assert_eq!((status, code(&body)), (409, "offer_version_mismatch"));
    // A stored version is immutable.
    let mut changed = offer(&w.seller, "2", "buyer_verified", 600);
    changed["title"] = json!("Another title");
    let (status, body) = w.post("/agenta/v0/offers", Some(&admin), &changed);
    assert_eq!((status, code(&body)), (409, "offer_version_immutable"));
    let mut req = request(2, 300);
    req["offer_version"] = json!("2");
    // No DCT, a DCT for another offer, too little budget: no authorization.
    let (status, body) = w.post("/agenta/v0/execution-requests", None, &req);
    assert_eq!((status, code(&body)), (401, "budget_authorization_missing"));
    let other = root_token(
        &seed(1),
        &seed(2),
        &["agenta:execute:offer:other"],
        10_000_000_000,
        3600,
    )
    .encode();
    let (status, body) = w.post(
        "/agenta/v0/execution-requests",
        Some(&format!("DCT {other}")),
        &req,
    );
    assert_eq!((status, code(&body)), (402, "budget_authorization_missing"));
    req["payment"]["max_amount"] = json!(1100);
    let mut fresh = req.clone();
    fresh["idempotency_key"] = json!("idem-fresh-1");
    let (status, body) = w.buy(&fresh);
    assert_eq!(
        (status, code(&body)),
        (402, "budget_authorization_missing"),
        "{body}"
    );
    assert!(w.seller.forwards().is_empty());
    // The JSON-RPC twin answers with the same failure mode in data.type.
    let answer = w
        .gateway
        .call("agenta/getOffer", json!({"id": "offer.summarize-1"}));
    assert_eq!(answer["result"]["offer_version"], "2");
    let (_, answer) = w.gateway.call_as(
        &w.dct(),
        "agenta/execute",
        json!({"message": request(9, 300)}),
    );
    assert_eq!(
        answer["error"]["data"]["type"], "offer_version_mismatch",
        "{answer}"
    );
}

#[test]
fn an_idempotency_key_answers_once_and_forwards_once() {
    let w = Arc::new(World::new(100_000, "buyer_verified", 600));
    let req = request(1, 300);
    let (s1, a1) = w.buy(&req);
    let (s2, a2) = w.buy(&req);
    assert_eq!((s1, &a1), (s2, &a2), "the same answer");
    assert_eq!(w.seller.forwards().len(), 1);
    let mut other = req.clone();
    other["input"] = json!({"text": "another text"});
    let (status, body) = w.buy(&other);
    assert_eq!((status, code(&body)), (409, "idempotency_conflict"));
    // A refusal that recorded nothing keeps no answer: the same request is
    // evaluated afresh once the offer it names exists.
    let mut early = request(3, 300);
    early["offer_version"] = json!("2");
    let (status, body) = w.buy(&early);
    assert_eq!((status, code(&body)), (409, "offer_version_mismatch"));
    let admin = format!("Bearer {ADMIN}");
    let v2 = offer(&w.seller, "2", "buyer_verified", 600);
    assert_eq!(w.post("/agenta/v0/offers", Some(&admin), &v2).0, 201);
    let (status, body) = w.buy(&early);
    assert_eq!(status, 202, "{body}");
    // A recorded request keeps its answer even though its offer moved on.
    assert_eq!(w.buy(&req), (s1, a1));
    assert_eq!(w.seller.forwards().len(), 2);
    // 50 concurrent duplicates of a new request: one forward, one answer.
    let mut req = request(2, 300);
    req["offer_version"] = json!("2");
    let answers: Vec<(u16, Value)> = (0..50)
        .map(|_| {
            let (w, req) = (w.clone(), req.clone());
            std::thread::spawn(move || w.buy(&req))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(answers.iter().all(|a| *a == answers[0]), "{:?}", answers[0]);
    assert_eq!(answers[0].0, 202);
    assert_eq!(w.seller.forwards().len(), 3, "exactly one more forward");
}

#[test]
fn a_hundred_concurrent_purchases_against_a_budget_for_ten_forward_exactly_ten() {
    // 10 purchases of 3 dollars fit in 30.
    let w = Arc::new(World::new(3000, "buyer_verified", 600));
    let answers: Vec<u16> = (0..100)
        .map(|n| {
            let w = w.clone();
            std::thread::spawn(move || w.buy(&request(n, 300)).0)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(
        answers.iter().filter(|s| **s == 202).count(),
        10,
        "{answers:?}"
    );
    assert_eq!(answers.iter().filter(|s| **s == 402).count(), 90);
    assert_eq!(w.seller.forwards().len(), 10);
    // Each settles at most what it reserved: the sum stays within budget.
    let mut charged = 0;
    for f in w.seller.forwards() {
        let id = f["request_id"].as_str().unwrap().to_owned();
        let (status, _) = w.report(
            Some(&w.secret_of(&id)),
            &completed(&f, "rcpt-done", json!("s"), 300),
        );
        assert_eq!(status, 200);
        charged += w.state(&id)["charged_microcents"].as_u64().unwrap();
    }
    assert_eq!(
        charged, 3_000_000_000,
        "ten settlements of 300 cents, the whole budget"
    );
}

#[test]
fn a_restart_between_request_and_receipt_loses_nothing_and_a_failed_seller_releases() {
    let mut w = World::new(1000, "buyer_verified", 600);
    let req = request(1, 300);
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000001");
    w.gateway.kill();
    w.gateway = Gateway::start(&w.gateway.config.clone());
    assert_eq!(w.state("req-00000001")["status"], "accepted");
    let (status, body) = w.report(
        Some(&secret),
        &completed(&req, "rcpt-done", json!("s"), 200),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(w.state("req-00000001")["charged_microcents"], 200_000_000);
    // A seller that fails: upstream_dependency_failed, the reservation
    // released (8 of the 10 dollars are left, and fit again afterwards).
    *w.seller.mode.lock().unwrap() = Mode::Fail;
    let (status, body) = w.buy(&request(2, 800));
    assert_eq!(
        (status, code(&body)),
        (502, "upstream_dependency_failed"),
        "{body}"
    );
    // Nothing of it is kept (issue 30): the seller never took it.
    let (status, _) = w.send(
        "GET",
        "/agenta/v0/execution-requests/req-00000002",
        Some(&w.dct()),
        b"",
    );
    assert_eq!(status, 404);
    *w.seller.mode.lock().unwrap() = Mode::Accept;
    assert_eq!(
        w.buy(&request(3, 800)).0,
        202,
        "the failed request's budget came back"
    );
}

#[test]
fn a_request_past_its_deadline_expires_and_releases_its_reservation() {
    // The offer promises completion within 1 s; the protocol sweep runs
    // every snapshot interval (1 s here).
    let w = World::new(500, "buyer_verified", 1);
    let req = request(1, 300);
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000001");
    let started = std::time::Instant::now();
    while w.state("req-00000001")["status"] != "expired" {
        assert!(started.elapsed().as_secs() < 30, "never expired");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (status, body) = w.report(
        Some(&secret),
        &completed(&req, "rcpt-late", json!("s"), 300),
    );
    assert_eq!(
        (status, code(&body)),
        (409, "invalid_state_transition"),
        "{body}"
    );
    assert_eq!(w.state("req-00000001")["charged_microcents"], 0);
    // The 3 dollars came back: 3 more fit in the 5.
    assert_eq!(w.buy(&request(2, 300)).0, 202);
}

#[test]
fn a_delegateos_seller_reports_with_a_signed_attestation_that_round_trips() {
    let w = World::new(1000, "seller_attested", 600);
    let req = request(1, 300);
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000001");
    // The seller reads its contract with its secret…
    let (status, state) = w.send(
        "GET",
        "/agenta/v0/execution-requests/req-00000001",
        Some(&format!("Bearer {secret}")),
        b"",
    );
    assert_eq!(status, 200);
    let contract = &state["contract"];
    // …and signs what it did, in DelegateOS terms.
    let seller = seed(5);
    let draft = json!({
        "contractId": contract["id"], "delegationId": state["delegation_id"], "type": "completion",
        "result": {"success": true, "output": {"result": {"summary": "short"}, "evidence": {}},
                   "costMicrocents": 200_000_000, "durationMs": 1500}
    });
    let signed = delegateos::attestation::AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(
            &seller,
            delegateos::AttestationId::from_bytes([7; 6]),
            at(0),
        )
        .unwrap();
    let signed = serde_json::to_value(&signed).unwrap();
    let path = "/agenta/v0/execution-requests/req-00000001/attestation";
    // Forged (changed after signing) or for another contract: refused, no change.
    let mut forged = signed.clone();
    forged["result"]["costMicrocents"] = json!(1);
    let (status, body) = w.post(path, Some(&format!("Bearer {secret}")), &forged);
    assert_eq!(
        (status, code(&body)),
        (422, "attestation_invalid"),
        "{body}"
    );
    let (status, _) = w.post(path, None, &signed);
    assert_eq!(status, 401);
    assert_eq!(w.state("req-00000001")["status"], "accepted");
    // Through the JSON-RPC twin.
    let answer = w.gateway.call(
        "agenta/postAttestation",
        json!({"id": "req-00000001", "auth_reference": secret, "attestation": signed}),
    );
    assert_eq!(answer["result"]["status"], "completed", "{answer}");
    let state = w.state("req-00000001");
    assert_eq!(state["charged_microcents"], 200_000_000);
    // The receipt it became names the attestation as its evidence, and the
    // gateway's attestation carries the same result and cost.
    let receipt = &state["receipts"][1];
    assert_eq!(
        receipt["artifacts"][0]["uri"],
        format!(
            "urn:delegateos:attestation:{}",
            signed["id"].as_str().unwrap()
        )
    );
    let ours = &state["attestation"];
    assert_eq!(
        ours["result"]["output"]["result"],
        signed["result"]["output"]["result"]
    );
    assert_eq!(
        ours["result"]["costMicrocents"],
        signed["result"]["costMicrocents"]
    );
    assert_eq!(ours["result"]["success"], true);
}

/// The gRPC twins: `CallProtocol` with the buyer's DCT in the metadata
/// buys as the HTTP endpoint does; a refusal is PERMISSION_DENIED with an
/// ErrorInfo in Agenta's domain.
#[tokio::test(flavor = "multi_thread")]
async fn the_grpc_twins_buy_and_refuse_as_http_does() {
    use delegate_gateway::grpc::pb;
    use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
    use tonic_types::StatusExt;

    let w = tokio::task::spawn_blocking(|| World::new(1000, "buyer_verified", 600))
        .await
        .unwrap();
    let addr = w.gateway.grpc.clone().expect("gRPC is on");
    let mut client = DelegationGatewayClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let call = |method: &str, params: Value| {
        let mut r = tonic::Request::new(pb::CallProtocolRequest {
            method: method.into(),
            params_json: params.to_string(),
        });
        r.metadata_mut()
            .insert("authorization", w.dct().parse().unwrap());
        r
    };
    let offer = client
        .call_protocol(call("agenta/getOffer", json!({"id": "offer.summarize-1"})))
        .await
        .unwrap()
        .into_inner();
    let offer: Value = serde_json::from_str(&offer.result_json).unwrap();
    assert_eq!(offer["offer_version"], "1");
    let bought = client
        .call_protocol(call("agenta/execute", json!({"message": request(1, 300)})))
        .await
        .unwrap()
        .into_inner();
    let bought: Value = serde_json::from_str(&bought.result_json).unwrap();
    assert_eq!(bought["status"], "accepted");
    assert_eq!(w.seller.forwards().len(), 1);
    let mut stale = request(2, 300);
    stale["offer_version"] = json!("0");
    let refused = client
        .call_protocol(call("agenta/execute", json!({"message": stale})))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let details = refused.get_error_details();
    let info = details.error_info().expect("an ErrorInfo");
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("OFFER_VERSION_MISMATCH", "agenta")
    );
    let unknown = client
        .call_protocol(call("agenta/nothing", json!({})))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
    let malformed = client
        .call_protocol(tonic::Request::new(pb::CallProtocolRequest {
            method: "agenta/getOffer".into(),
            params_json: "[1]".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(malformed.code(), tonic::Code::InvalidArgument);
    tokio::task::spawn_blocking(move || drop(w)).await.unwrap();
}

#[test]
fn offers_are_preloaded_from_files_and_a_bad_one_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let seller = Seller::start();
    let file = dir.path().join("offer.json");
    std::fs::write(
        &file,
        offer(&seller, "7", "buyer_verified", 600).to_string(),
    )
    .unwrap();
    let section = |file: &std::path::Path| {
        format!(
            "[agenta]\ntenant = \"acme\"\n[agenta.currencies]\nUSD = 1000000\n\
             [[agenta.offers]]\nfile = {:?}\n",
            file
        )
    };
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        &section(&file),
    );
    let gateway = Gateway::start(&config);
    let (status, body) = gateway.http("GET", "/agenta/v0/offers/offer.summarize-1", b"");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, body["offer_version"].clone()), (200, json!("7")));
    drop(gateway);
    // An offer in an unknown currency: the gateway does not start, and says which file.
    let bad = dir.path().join("bad-offer.json");
    let mut o = offer(&seller, "8", "buyer_verified", 600);
    o["pricing"]["currency"] = json!("EUR");
    std::fs::write(&bad, o.to_string()).unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        &section(&bad),
    );
    let out = dgw()
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("bad-offer.json") && err.contains("EUR"),
        "{err}"
    );
}

/// The operator console's "Upstreams & protocols" page shows Agenta's own
/// panel (through its registration; the console names no protocol): the
/// offer with its current version and the requests counted by state, read
/// from the store.
#[test]
fn the_console_shows_agentas_offers_and_requests_by_state() {
    let w = World::with(1000, "buyer_verified", 600, "[console]\nenabled = true\n");
    let cookie = support::console::sign_in(&w.gateway.addr, ADMIN);
    let rows = support::console::panel(&w.gateway.addr, &cookie, "Agenta");
    assert!(
        rows.contains(&("requests".into(), "none kept".into())),
        "{rows:?}"
    );
    for n in 1..=3 {
        let req = request(n, 300);
        assert_eq!(w.buy(&req).0, 202);
    }
    // One of the three completed by its seller.
    let req = request(3, 300);
    let (status, _) = w.report(
        Some(&w.secret_of("req-00000003")),
        &completed(&req, "rcpt-done", json!("s"), 50),
    );
    assert_eq!(status, 200);
    assert_eq!(w.state("req-00000003")["status"], "completed");
    let rows = support::console::panel(&w.gateway.addr, &cookie, "Agenta");
    for row in [
        ("offers", "1 registered"),
        (
            "offer offer.summarize-1",
            "current version 1 (1 registered)",
        ),
        ("requests accepted", "2"),
        ("requests completed", "1"),
    ] {
        assert!(
            rows.contains(&(row.0.into(), row.1.into())),
            "{row:?} in {rows:?}"
        );
    }
}
