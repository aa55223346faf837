//! Agenta conformance over the wire: every schema's full example accepted
//! and every breach of it refused; every pair of states as the manifest
//! publishes. The real `dgw` and a seller written in the tests.

mod support;

use serde_json::{json, Value};
use support::market::*;

#[test]
fn every_schema_example_passes_and_every_breach_of_it_is_refused_over_the_wire() {
    use agenta::MessageType;
    let w = World::new(100_000, "buyer_verified", 600);
    let admin = format!("Bearer {ADMIN}");
    let expect_refused = |what: &str, (status, body): (u16, Value)| {
        assert_eq!(
            (status, code(&body)),
            (400, "schema_validation_failure"),
            "{what}: {body}"
        );
    };

    // An offer with every optional member.
    let mut full_offer = offer(&w.seller, "2", "buyer_verified", 600);
    let extra = json!({
        "capabilities": ["summarize"], "terms_url": "https://seller.example/terms",
        "valid_until": "2099-01-01T00:00:00Z",
        "execution_window": {"not_before": "2026-01-01T00:00:00Z", "not_after": "2099-01-01T00:00:00Z"},
        "rate_limits": {"max_requests_per_minute": 60, "max_concurrent_executions": 4},
        "allowed_buyer_agents": ["buyer-agent"], "metadata": {"tier": "gold"}
    });
    full_offer
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    full_offer["seller_agent"]["display_name"] = json!("Summaries");
    full_offer["pricing"]["unit"] = json!("document");
    full_offer["service_levels"]["supports_cancellation"] = json!(true);
    let cases = breaches(&schema_of(MessageType::Offer), &full_offer);
    assert!(cases.len() >= 25, "{}", cases.len());
    for (what, broken) in &cases {
        expect_refused(what, w.post("/agenta/v0/offers", Some(&admin), broken));
    }
    assert_eq!(
        w.post("/agenta/v0/offers", Some(&admin), &full_offer).0,
        201
    );

    // A request with every optional member.
    let mut full_request = request(1, 300);
    full_request["offer_version"] = json!("2");
    let extra = json!({
        "correlation_id": "corr-0001", "parent_request_id": "req-parent-1", "priority": "high",
        "verification_requirements": {"require_verification": true,
            "required_artifacts": ["result_payload"], "minimum_score": 0.5},
        "metadata": {"team": "research"}
    });
    full_request
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    full_request["buyer_agent"]["display_name"] = json!("Buyer");
    full_request["payment"]["escrow_required"] = json!(false);
    full_request["execution_constraints"]["max_budget"] = json!(300);
    let cases = breaches(&schema_of(MessageType::ExecutionRequest), &full_request);
    assert!(cases.len() >= 20, "{}", cases.len());
    for (what, broken) in &cases {
        expect_refused(what, w.buy(broken));
    }
    assert!(
        w.seller.forwards().is_empty(),
        "nothing broken was forwarded"
    );
    let (status, body) = w.buy(&full_request);
    assert_eq!(status, 202, "{body}");

    // A receipt with every optional member.
    let secret = w.secret_of("req-00000001");
    let mut full_receipt = receipt(&full_request, "rcpt-progress", "in_progress");
    let extra = json!({
        "execution_id": "exec-0001", "status_reason": "working",
        "result": {"partial": "so far"},
        "artifacts": [{"artifact_type": "logs", "uri": "https://seller.example/logs/1",
                       "digest": "sha256:00ff", "description": "logs"}],
        "usage": {"input_units": 1, "output_units": 2, "compute_seconds": 0.5},
        "financials": {"currency": "USD", "final_amount": 0, "payment_capture_id": "cap-000001"},
        "error": {"code": "verification_pending", "message": "not yet", "retryable": true,
                  "details": {}},
        "next_action": {"type": "await_verification", "by": "seller",
                        "deadline_at": "2099-01-01T00:00:00Z"},
        "metadata": {"step": 1}
    });
    full_receipt
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let cases = breaches(&schema_of(MessageType::ExecutionReceipt), &full_receipt);
    assert!(cases.len() >= 15, "{}", cases.len());
    for (what, broken) in &cases {
        let answer = w.report(Some(&secret), broken);
        if what == "/request_id removed" {
            // Without it there is no request to find the secret of.
            assert_eq!(answer.0, 401, "{what}");
        } else {
            expect_refused(what, answer);
        }
    }
    assert_eq!(
        w.state("req-00000001")["status"],
        "accepted",
        "no breach moved it"
    );
    assert_eq!(w.report(Some(&secret), &full_receipt).0, 200);
    let done = completed(&full_request, "rcpt-done", json!("short"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);

    // A verification with every optional member.
    let full_verification = json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "verification_result",
        "verification_id": "ver-0000001", "request_id": "req-00000001", "receipt_id": "rcpt-done",
        "execution_id": "exec-0001",
        "verifier_agent": {"agent_id": "buyer-agent", "organization_id": "globex",
                           "display_name": "Buyer"},
        "decision": "pass", "score": 0.9, "summary": "fine",
        "checks": [{"check_id": "len", "description": "short", "status": "pass", "message": "ok"}],
        "evidence": [{"artifact_type": "result_payload", "uri": "https://buyer.example/e/1",
                      "digest": "sha256:00ff"}],
        "failure_reasons": [], "verified_at": "2026-11-23T12:02:00Z", "metadata": {"by": "ci"}
    });
    let cases = breaches(
        &schema_of(MessageType::VerificationResult),
        &full_verification,
    );
    assert!(cases.len() >= 15, "{}", cases.len());
    for (what, broken) in &cases {
        expect_refused(
            what,
            w.post("/agenta/v0/verification-results", Some(&w.dct()), broken),
        );
    }
    assert!(w.state("req-00000001")["verifications"]
        .as_array()
        .unwrap()
        .is_empty());
    let (status, body) = w.post(
        "/agenta/v0/verification-results",
        Some(&w.dct()),
        &full_verification,
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn every_transition_over_the_wire_is_as_the_manifest_publishes() {
    let manifest: Value = serde_json::from_str(agenta::MANIFEST).unwrap();
    let allowed: Vec<&str> = manifest["state_transitions"]["allowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let statuses = [
        "accepted",
        "in_progress",
        "completed",
        "failed",
        "cancelled",
        "expired",
        "rejected",
    ];
    let w = World::new(1_000_000, "buyer_verified", 600);
    let mut n = 0;
    let mut buy_answered = |first: &'static str| {
        n += 1;
        *w.seller.mode.lock().unwrap() = Mode::Reply(first);
        let req = request(n, 300);
        let (status, body) = w.buy(&req);
        assert!(status == 200 || status == 202, "{first}: {body}");
        let id = req["request_id"].as_str().unwrap().to_owned();
        assert_eq!(
            w.state(&id)["status"],
            first,
            "a first answer lands as sent"
        );
        req
    };
    let (mut tried, mut moved) = (0, 0);
    for from in statuses {
        for to in statuses {
            let req = buy_answered(from);
            let id = req["request_id"].as_str().unwrap();
            let next = if to == "completed" {
                completed(&req, "rcpt-next", json!("s"), 250)
            } else {
                receipt(&req, "rcpt-next", to)
            };
            let (status, body) = w.report(Some(&w.secret_of(id)), &next);
            if allowed.contains(&format!("{from}->{to}").as_str()) {
                moved += 1;
                assert_eq!(status, 200, "{from}->{to}: {body}");
                assert_eq!(w.state(id)["status"], to);
            } else {
                assert_eq!(
                    (status, code(&body)),
                    (409, "invalid_state_transition"),
                    "{from}->{to}"
                );
                assert_eq!(w.state(id)["status"], from, "{from}->{to} changed nothing");
            }
            tried += 1;
        }
    }
    assert_eq!(
        (tried, moved),
        (49, 9),
        "every pair, the nine published ones allowed"
    );
}
