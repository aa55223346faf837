//! LDP messages, signatures and sessions, breach by breach: every type
//! parses and round-trips, unknown types and malformed bodies are refused
//! with their reason, every signed header field is covered (and the body
//! only with dgw's payload digest), every (state, sender, type) is legal
//! exactly where the lifecycle says.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use ldp::message::{Body, Envelope, TYPES};
use ldp::session::{Session, Side, State};
use ldp::{signing, Reason};
use serde_json::{json, Value};

fn body_of(kind: &str) -> Value {
    match kind {
        "HELLO" => {
            json!({"type": kind, "delegate_id": "ldp:delegate:a", "supported_modes": ["text"]})
        }
        "CAPABILITY_MANIFEST" => json!({"type": kind, "capabilities": {"skills": ["reasoning"]}}),
        "SESSION_PROPOSE" => {
            json!({"type": kind, "config": {"preferred_payload_modes": ["text"], "ttl_secs": 60, "required_trust_domain": null}})
        }
        "SESSION_ACCEPT" => json!({"type": kind, "session_id": "s-1", "negotiated_mode": "text"}),
        "SESSION_REJECT" => json!({"type": kind, "reason": "trust domain"}),
        "TASK_SUBMIT" => {
            json!({"type": kind, "task_id": "t-1", "skill": "reasoning", "input": {"task_type": "qa", "instruction": "x"}})
        }
        "TASK_UPDATE" => json!({"type": kind, "task_id": "t-1", "progress": 0.5, "message": null}),
        "TASK_RESULT" => json!({"type": kind, "task_id": "t-1", "output": {"a": 1}, "provenance": {
            "produced_by": "ldp:delegate:b", "model_version": "m-1", "payload_mode_used": "text",
            "confidence": null, "verified": false, "session_id": null, "timestamp": null}}),
        "TASK_FAILED" => {
            json!({"type": kind, "task_id": "t-1", "error": {"code": "e", "category": "runtime",
            "message": "m", "severity": "error", "retryable": true}})
        }
        "TASK_CANCEL" => json!({"type": kind, "task_id": "t-1"}),
        "ATTESTATION" => json!({"type": kind, "claim": {"k": "v"}, "evidence": []}),
        "SESSION_CLOSE" => json!({"type": kind, "reason": null}),
        _ => unreachable!(),
    }
}

fn envelope(body: Value) -> Value {
    json!({"message_id": "m-1", "session_id": "s-1", "from": "ldp:delegate:a", "to": "ldp:delegate:b",
           "body": body, "payload_mode": "text", "timestamp": "2026-03-09T10:00:04Z", "provenance": null})
}

fn reason(v: Value) -> Reason {
    Envelope::from_value(v).unwrap_err().reason
}

#[test]
fn every_type_round_trips_and_every_breach_is_named() {
    for kind in TYPES {
        let e = Envelope::from_value(envelope(body_of(kind))).unwrap();
        assert_eq!(e.body.kind(), kind);
        let again = Envelope::from_value(serde_json::to_value(&e).unwrap()).unwrap();
        assert_eq!(again, e, "{kind}");
        // An unknown member in the body, and each required one missing.
        let mut extra = body_of(kind);
        extra["surprise"] = json!(1);
        assert_eq!(
            reason(envelope(extra)),
            Reason::Malformed,
            "{kind} + surprise"
        );
        for member in body_of(kind).as_object().unwrap().keys() {
            let mut less = body_of(kind);
            less.as_object_mut().unwrap().remove(member);
            let optional = matches!(
                (kind, member.as_str()),
                ("TASK_UPDATE", "progress" | "message") | ("SESSION_CLOSE", "reason")
            );
            let r = Envelope::from_value(envelope(less));
            if member == "type" {
                assert_eq!(r.unwrap_err().reason, Reason::Malformed);
            } else if kind == "TASK_RESULT" && member == "provenance" {
                assert_eq!(r.unwrap_err().reason, Reason::MissingProvenance);
            } else if optional {
                assert!(r.is_ok(), "{kind} without {member}");
            } else {
                assert_eq!(
                    r.unwrap_err().reason,
                    Reason::Malformed,
                    "{kind} without {member}"
                );
            }
        }
    }
    assert_eq!(
        reason(envelope(json!({"type": "TASK_STEAL"}))),
        Reason::UnknownType
    );
    assert_eq!(reason(envelope(json!({"type": 7}))), Reason::Malformed);
    assert_eq!(reason(json!({"body": body_of("HELLO")})), Reason::Malformed);
    let mut e = envelope(body_of("HELLO"));
    e["payload_mode"] = json!("telepathy");
    assert_eq!(reason(e), Reason::Malformed);
    let mut e = envelope(body_of("HELLO"));
    e["extra"] = json!(true);
    assert_eq!(reason(e), Reason::Malformed);
    assert_eq!(
        Envelope::parse(b"{not json").unwrap_err().reason,
        Reason::Malformed
    );
    assert_eq!(
        Envelope::parse(&vec![b' '; ldp::MAX_MESSAGE_BYTES + 1])
            .unwrap_err()
            .reason,
        Reason::Malformed
    );
}

#[test]
fn signatures_cover_every_header_field_and_with_a_digest_the_payload() {
    let secret = b"shared";
    for bind in [false, true] {
        let mut e = Envelope::from_value(envelope(body_of("TASK_SUBMIT"))).unwrap();
        e.nonce = Some("00112233445566778899aabbccddeeff".into());
        signing::apply(&mut e, secret, bind);
        signing::verify(&e, secret, bind).unwrap();
        assert!(signing::verify(&e, b"other", false).is_err());
        type Tamper = fn(&mut Envelope);
        let header: [(&str, Tamper); 7] = [
            ("from", |e| e.from.push('x')),
            ("to", |e| e.to.push('x')),
            ("session_id", |e| e.session_id.push('x')),
            ("timestamp", |e| e.timestamp = "2026-03-09T10:00:05Z".into()),
            ("message_id", |e| e.message_id.push('x')),
            ("nonce", |e| e.nonce = None),
            ("task_id", |e| {
                if let Body::TaskSubmit { task_id, .. } = &mut e.body {
                    task_id.push('x')
                }
            }),
        ];
        for (field, tamper) in header {
            let mut t = e.clone();
            tamper(&mut t);
            assert_eq!(
                signing::verify(&t, secret, false).unwrap_err().reason,
                Reason::BadSignature,
                "{field}"
            );
        }
        // The input: covered only with the digest (the reference's HMAC does not).
        let mut t = e.clone();
        if let Body::TaskSubmit { input, .. } = &mut t.body {
            *input = json!({"instruction": "something else"});
        }
        assert_eq!(signing::verify(&t, secret, false).is_err(), bind);
        // Stripping the digest breaks the signature too.
        if bind {
            let mut t = e.clone();
            t.payload_digest = None;
            assert!(signing::verify(&t, secret, false).is_err());
        }
    }
    let mut e = Envelope::from_value(envelope(body_of("HELLO"))).unwrap();
    assert_eq!(
        signing::verify(&e, b"k", false).unwrap_err().reason,
        Reason::BadSignature
    );
    signing::apply(&mut e, b"k", false);
    assert_eq!(
        signing::verify(&e, b"k", true).unwrap_err().reason,
        Reason::BadSignature
    );
    let mut upper = e.clone();
    upper.signature = upper.signature.map(|s| s.to_uppercase());
    assert!(signing::verify(&upper, b"k", false).is_err());
    let mut other = e.clone();
    other.signature_algorithm = Some("hmac-sha1".into());
    assert_eq!(
        signing::verify(&other, b"k", false).unwrap_err().reason,
        Reason::UnsupportedAlgorithm
    );
}

/// The whole table: each type, from each side, in each state, is legal
/// exactly where the lifecycle says.
#[test]
fn every_message_is_legal_exactly_where_the_lifecycle_says() {
    let states = [
        State::Initiating,
        State::Proposed,
        State::Active,
        State::Suspended,
        State::Closed,
        State::Failed,
    ];
    let mut legal = 0;
    for state in states {
        for side in [Side::Initiator, Side::Responder] {
            for kind in TYPES {
                let body = Envelope::from_value(envelope(body_of(kind))).unwrap().body;
                let mut s = Session::new(0);
                s.state = state;
                s.open_tasks.insert("t-1".into());
                let expected = matches!(
                    (state, side, kind),
                    (
                        State::Initiating,
                        Side::Initiator,
                        "HELLO" | "SESSION_PROPOSE"
                    ) | (State::Initiating, Side::Responder, "CAPABILITY_MANIFEST")
                        | (
                            State::Proposed,
                            Side::Responder,
                            "SESSION_ACCEPT" | "SESSION_REJECT"
                        )
                        | (State::Proposed, _, "SESSION_CLOSE")
                        | (
                            State::Active | State::Suspended,
                            Side::Initiator,
                            "TASK_CANCEL"
                        )
                        | (
                            State::Active | State::Suspended,
                            Side::Responder,
                            "TASK_UPDATE" | "TASK_RESULT" | "TASK_FAILED"
                        )
                        | (State::Active, _, "ATTESTATION")
                        | (State::Active | State::Suspended, _, "SESSION_CLOSE")
                );
                let got = s.apply(side, &body, 1);
                // TASK_SUBMIT of an open task is refused; a new one is legal.
                let got_submit =
                    if kind == "TASK_SUBMIT" && state == State::Active && side == Side::Initiator {
                        let mut s = Session::new(0);
                        s.state = State::Active;
                        s.apply(side, &body, 1).is_ok()
                    } else {
                        false
                    };
                assert_eq!(
                    got.is_ok() || got_submit,
                    expected || got_submit,
                    "{state:?} {side:?} {kind}"
                );
                if let Err(e) = &got {
                    assert_eq!(e.reason, Reason::IllegalInState);
                }
                legal += usize::from(expected || got_submit);
            }
        }
    }
    assert_eq!(legal, 22);
}

#[test]
fn tasks_ttl_and_suspension() {
    let submit = |id: &str| Body::TaskSubmit {
        task_id: id.into(),
        skill: "s".into(),
        input: json!({}),
        contract: None,
    };
    let result = |id: &str| {
        Envelope::from_value(envelope({
            let mut b = body_of("TASK_RESULT");
            b["task_id"] = json!(id);
            b
        }))
        .unwrap()
        .body
    };
    let propose = Envelope::from_value(envelope(body_of("SESSION_PROPOSE")))
        .unwrap()
        .body;
    let accept = Envelope::from_value(envelope(body_of("SESSION_ACCEPT")))
        .unwrap()
        .body;
    let mut s = Session::new(0);
    s.apply(Side::Initiator, &propose, 0).unwrap();
    assert_eq!(s.ttl_secs, 60);
    s.apply(Side::Responder, &accept, 1).unwrap();
    s.apply(Side::Initiator, &submit("a"), 2).unwrap();
    assert_eq!(
        s.apply(Side::Initiator, &submit("a"), 3)
            .unwrap_err()
            .reason,
        Reason::IllegalInState
    );
    assert_eq!(
        s.apply(Side::Responder, &result("b"), 3)
            .unwrap_err()
            .reason,
        Reason::IllegalInState
    );
    // Suspended: no new task, but the open one's result and a close.
    s.suspend().unwrap();
    assert_eq!(
        s.apply(Side::Initiator, &submit("c"), 4)
            .unwrap_err()
            .reason,
        Reason::IllegalInState
    );
    s.apply(Side::Responder, &result("a"), 5).unwrap();
    assert!(s.open_tasks.is_empty());
    s.resume(6).unwrap();
    s.apply(Side::Initiator, &submit("c"), 7).unwrap();
    // Idle past the TTL: expired, closed, and so for good.
    assert!(!s.is_expired(66) && s.is_expired(67));
    assert_eq!(
        s.apply(Side::Responder, &result("c"), 67)
            .unwrap_err()
            .reason,
        Reason::SessionExpired
    );
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        s.apply(Side::Responder, &result("c"), 68)
            .unwrap_err()
            .reason,
        Reason::IllegalInState
    );
    assert!(s.resume(68).is_err());
}

/// The spec's fallback example in a session: semantic_frame negotiated
/// with [text] to fall back to; a task in text falls back; no way back up.
#[test]
fn a_session_falls_back_down_its_chain() {
    use ldp::mode::PayloadMode::{SemanticFrame, SemanticGraph, Text};
    let propose = Envelope::from_value(envelope(json!({"type": "SESSION_PROPOSE", "config": {
        "preferred_payload_modes": ["semantic_graph", "semantic_frame", "text"]}})))
    .unwrap()
    .body;
    let accept = Envelope::from_value(envelope(
        json!({"type": "SESSION_ACCEPT", "session_id": "s",
        "negotiated_mode": "semantic_frame"}),
    ))
    .unwrap()
    .body;
    let mut s = Session::new(0);
    s.apply(Side::Initiator, &propose, 0).unwrap();
    s.apply(Side::Responder, &accept, 0).unwrap();
    let payload = s.payload.clone().unwrap();
    assert_eq!(
        (payload.mode, payload.fallback_chain.clone()),
        (SemanticFrame, vec![Text])
    );
    s.use_mode(SemanticFrame).unwrap();
    assert_eq!(
        s.use_mode(SemanticGraph).unwrap_err().reason,
        Reason::NoFallback
    );
    s.use_mode(Text).unwrap();
    assert_eq!(s.payload.as_ref().unwrap().mode, Text);
    assert_eq!(
        s.use_mode(SemanticFrame).unwrap_err().reason,
        Reason::NoFallback
    );
    s.use_mode(Text).unwrap();
}

/// dgw's `budget_microcents` in a proposal: a whole number of microcents
/// or nothing.
#[test]
fn a_proposal_may_cap_its_session_budget() {
    let propose = |config: serde_json::Value| {
        Envelope::from_value(envelope(
            json!({"type": "SESSION_PROPOSE", "config": config}),
        ))
    };
    let e = propose(json!({"payload_mode": "text", "budget_microcents": 250})).unwrap();
    let Body::SessionPropose { config } = &e.body else {
        panic!("{e:?}")
    };
    assert_eq!(config.budget_microcents, Some(250));
    let again = Envelope::from_value(serde_json::to_value(&e).unwrap()).unwrap();
    assert_eq!(again, e);
    for bad in [json!(-1), json!("250"), json!(2.5)] {
        let r = propose(json!({"payload_mode": "text", "budget_microcents": bad}));
        assert_eq!(r.unwrap_err().reason, Reason::Malformed, "{bad}");
    }
}

/// The reference's delegation contract on a TASK_SUBMIT, typed: as its
/// client sends it, and its dollar cap against a task's cost.
#[test]
fn a_task_contract_is_read_and_its_cap_holds() {
    use ldp::message::DelegationContract;
    let contract = json!({
        "contract_id": "c-1", "objective": "summarize", "success_criteria": ["<=300 words"],
        "policy": {"failure_policy": "fail_closed", "budget": {"max_cost_usd": 0.01},
                   "safety_constraints": []},
        "created_at": "2026-03-09T10:00:04Z"
    });
    let submit = json!({"type": "TASK_SUBMIT", "task_id": "t", "skill": "s", "input": "x",
                        "contract": contract});
    let e = Envelope::from_value(envelope(submit.clone())).unwrap();
    let Body::TaskSubmit {
        contract: Some(c), ..
    } = &e.body
    else {
        panic!("{e:?}")
    };
    assert_eq!(serde_json::to_value(c).unwrap(), contract);
    // 0.01 USD = 1,000,000 microcents.
    assert!(c.admits_cost(1_000_000) && !c.admits_cost(1_000_001));
    let mut odd = submit.clone();
    odd["contract"]["policy"]["budget"]["max_cost_usd"] = json!(-1.0);
    let e = Envelope::from_value(envelope(odd)).unwrap();
    let Body::TaskSubmit {
        contract: Some(c), ..
    } = &e.body
    else {
        panic!()
    };
    assert!(!c.admits_cost(0));
    let mut extra = submit;
    extra["contract"]["policy"]["surprise"] = json!(1);
    let r = Envelope::from_value(envelope(extra));
    assert_eq!(r.unwrap_err().reason, Reason::Malformed);
    let uncapped: DelegationContract = serde_json::from_value(json!({
        "contract_id": "c", "objective": "o", "success_criteria": [], "created_at": "t"
    }))
    .unwrap();
    assert!(uncapped.admits_cost(u64::MAX));
}

proptest::proptest! {
    /// A cap that admits a cost admits every smaller one.
    #[test]
    fn a_cap_admits_every_smaller_cost(cap in 0.0f64..1e6, cost in 0u64..u64::MAX, less in 0u64..u64::MAX) {
        let c: ldp::message::DelegationContract = serde_json::from_value(json!({
            "contract_id": "c", "objective": "o", "success_criteria": [], "created_at": "t",
            "policy": {"budget": {"max_cost_usd": cap}}
        })).unwrap();
        if c.admits_cost(cost) {
            proptest::prop_assert!(c.admits_cost(cost.min(less)));
        }
    }
}
