//! The reference's examples (copied to `tests/interop/` with their
//! license) and its crate (`ldp-protocol` 0.2.0): every example file is a
//! test, the signature vector holds, and the crate signs every
//! envelope as this adapter does.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use ldp::identity::IdentityCard;
use ldp::message::{Body, Envelope};
use ldp::mode::{negotiate, PayloadMode};
use ldp::session::{Session, Side, State};
use ldp::signing;
use serde_json::{json, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn json_file(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join(rel)).unwrap()).unwrap()
}

/// The example flow's messages, their `_comment` annotations removed
/// (they are the file's notes, not wire members).
fn flow() -> Vec<Envelope> {
    json_file("examples/session_flow.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.as_object_mut().unwrap().remove("_comment");
            Envelope::from_value(m).unwrap()
        })
        .collect()
}

#[test]
fn the_identity_card_example_validates() {
    let card = IdentityCard::from_value(json_file("examples/identity_card.json")).unwrap();
    assert_eq!(card.delegate_id, "ldp:delegate:qwen3-8b-reasoning");
    assert!(card.has_skill("reasoning") && !card.has_skill("coding"));
    assert_eq!(card.trust_domain.name, "research.internal");
    // Each rule breaks it.
    let base = json_file("examples/identity_card.json");
    for (pointer, value) in [
        ("/delegate_id", json!("qwen3")),
        ("/name", json!("")),
        ("/supported_payload_modes", json!(["semantic_frame"])),
        ("/capabilities/0/quality_hint", json!(1.5)),
        ("/capabilities/1/name", json!("reasoning")),
        ("/cost_profile", json!("cheap")),
        ("/context_window", json!(-1)),
    ] {
        let mut card = base.clone();
        *card.pointer_mut(pointer).unwrap() = value;
        assert!(IdentityCard::from_value(card).is_err(), "{pointer}");
    }
    let mut extra = base.clone();
    extra["owner"] = json!("x");
    assert!(IdentityCard::from_value(extra).is_err());
}

/// The example flow through the session machine, each message from its
/// side, and the negotiation the flow shows.
#[test]
fn the_session_flow_example_runs() {
    let messages = flow();
    assert_eq!(messages.len(), 6);
    let router = "ldp:delegate:router-alpha";
    let mut session = Session::new(0);
    for m in &messages {
        let side = if m.from == router {
            Side::Initiator
        } else {
            Side::Responder
        };
        session.apply(side, &m.body, 1).unwrap();
    }
    assert_eq!(session.state, State::Active);
    assert!(session.open_tasks.is_empty());
    assert_eq!(session.task_count, 1);
    let Body::Hello {
        supported_modes, ..
    } = &messages[0].body
    else {
        panic!()
    };
    let n = negotiate(
        supported_modes,
        &[PayloadMode::SemanticFrame, PayloadMode::Text],
    );
    let Body::SessionAccept {
        negotiated_mode, ..
    } = &messages[3].body
    else {
        panic!()
    };
    assert_eq!(n.mode, *negotiated_mode);
    assert!(messages[5].result_provenance().is_some());
}

/// The vector (from the reference): msg-005 with `test-secret`.
#[test]
fn the_reference_signature_vector() {
    let mut m = flow().remove(4);
    assert_eq!(m.message_id, "msg-005");
    assert_eq!(
        signing::sign(&m, b"test-secret"),
        "7106150332ed0a3e474a51ca683f65e89d3efba5fcb5e35f07fa6acf6a6d1201"
    );
    m.nonce = Some("00112233445566778899aabbccddeeff".into());
    assert_eq!(
        signing::sign(&m, b"test-secret"),
        "26d870087c224a81f61e0fb9f62ff2446f43ef312f8bc64d0f87d679ed561ff9"
    );
}

/// The crate signs each example message, with and without a nonce, and
/// parses what this adapter writes, to the same signature.
#[test]
fn the_crate_signs_as_we_do() {
    for mut m in flow() {
        for nonce in [None, Some("0f0e0d0c0b0a09080706050403020100".to_owned())] {
            m.nonce = nonce;
            let theirs: ldp_protocol::types::messages::LdpEnvelope =
                serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
            assert_eq!(
                ldp_protocol::sign_envelope(&theirs, "s3cret"),
                signing::sign(&m, b"s3cret"),
                "{}",
                m.body.kind()
            );
            // And what the crate signs, we verify.
            let mut signed = theirs.clone();
            ldp_protocol::apply_signature(&mut signed, "s3cret");
            let v = serde_json::to_value(&signed).unwrap();
            let back = Envelope::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
            signing::verify(&back, b"s3cret", false).unwrap();
        }
    }
}

#[test]
fn licenses_are_carried_and_every_file_is_known() {
    let mut files: Vec<String> = Vec::new();
    for e in walk(&dir()) {
        files.push(
            e.strip_prefix(dir())
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
    }
    files.sort();
    assert_eq!(
        files,
        [
            "LICENSE",
            "examples/identity_card.json",
            "examples/session_flow.json"
        ]
    );
}

fn walk(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .flat_map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

/// The crate's own server answers a whole session, its client's requests
/// shaped as its session manager sends them: every request and answer
/// parses here, each signature verifies, and the session machine follows.
#[tokio::test]
async fn the_crate_server_speaks_what_we_parse() {
    use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
    use ldp_protocol::types::payload::PayloadMode as Theirs;
    let server = ldp_protocol::LdpServer::echo_server("ldp:delegate:echo", "Echo")
        .with_signing_secret("s3cret");
    let card = IdentityCard::from_value(server.handle_identity_request()).unwrap();
    assert!(card.has_skill("echo"), "{card:?}");
    let me = "ldp:delegate:router";
    let session_id = "6f1c8a3e-0000-4000-8000-000000000001";
    let requests = [
        LdpMessageBody::Hello {
            delegate_id: me.into(),
            supported_modes: vec![Theirs::SemanticFrame, Theirs::Text],
        },
        LdpMessageBody::SessionPropose {
            config: json!({"payload_mode": "semantic_frame", "ttl_secs": 600, "trust_domain": card.trust_domain.name}),
        },
        LdpMessageBody::TaskSubmit {
            task_id: "t-1".into(),
            skill: "echo".into(),
            input: json!({"text": "hi"}),
            contract: None,
        },
        LdpMessageBody::SessionClose {
            reason: Some("done".into()),
        },
    ];
    let mut session = Session::new(0);
    for body in requests {
        let mut request = LdpEnvelope::new(session_id, me, &card.delegate_id, body, Theirs::Text);
        request.nonce = Some("00112233445566778899aabbccddeeff".into());
        ldp_protocol::apply_signature(&mut request, "s3cret");
        let ours = Envelope::from_value(serde_json::to_value(&request).unwrap()).unwrap();
        signing::verify(&ours, b"s3cret", false).unwrap();
        session.apply(Side::Initiator, &ours.body, 1).unwrap();
        let answer = server.handle_message(request).await.unwrap();
        let v = serde_json::to_value(&answer).unwrap();
        let answer = Envelope::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
        signing::verify(&answer, b"s3cret", false).unwrap();
        if session.state != State::Closed {
            session
                .apply(Side::Responder, &answer.body, 1)
                .unwrap_or_else(|e| panic!("{e}: {v}"));
        }
    }
    assert_eq!(session.state, State::Closed);
    assert_eq!(session.task_count, 1);
}
