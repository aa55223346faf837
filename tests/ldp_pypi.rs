//! LDP through dgw with the PyPI reference, `ldp-protocol` 0.2.0 (its
//! `LdpRouter`/`LdpClient` and its `LdpDelegate`, in Python from
//! `tests/.venv`): a PyPI router to a PyPI delegate, a PyPI router to the
//! crate's delegate, the crate's router to a PyPI delegate, each a whole
//! session charged to the router's DCT and attested; and every refusal of
//! tests/ldp.rs sent from the PyPI client.
//!
//! The PyPI package sends every member of its one body model, those of
//! other message types as `null`, predates nonces, addresses HELLO and
//! SESSION_PROPOSE to the URL it posts to, and its delegate names its own
//! session ID on SESSION_ACCEPT (docs/adapters/ldp.md, "The PyPI package").

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
use ldp_protocol::types::payload::PayloadMode;
use serde_json::{json, Value};
use support::*;

const SECRET: &str = "a-shared-secret-of-32-bytes-0123";
/// The crate's echo delegate.
const ECHO: &str = "ldp:delegate:echo";
/// The PyPI package's delegate.
const PYPI: &str = "ldp:delegate:pypi";
const ROUTER: &str = "ldp:delegate:router";

#[path = "ldp/delegate.rs"]
mod delegate;
#[path = "ldp/pypi.rs"]
mod pypi;

/// Which reference serves as the delegate.
#[derive(Clone, Copy, PartialEq)]
enum Peer {
    Pypi,
    /// The PyPI delegate accepting every session under this one ID.
    PypiAcceptingAs(&'static str),
    Crate,
}

struct World {
    rt: tokio::runtime::Runtime,
    tmp: tempfile::TempDir,
    gw: Gateway,
    pypi: Option<pypi::PypiDelegate>,
    /// The delegate's name at dgw.
    name: &'static str,
    /// Its delegate ID.
    id: &'static str,
    /// The router's DCT.
    token: String,
    /// The delegate's endpoint through dgw.
    url: String,
}

impl World {
    /// dgw in front of `peer`; the router's DCT pays `budget` for tasks of
    /// `cost` each.
    fn new(peer: Peer, budget: u64, cost: u64) -> World {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let (pypi, delegate_url, name, id, nonce) = match peer {
            Peer::Pypi | Peer::PypiAcceptingAs(_) => {
                let fixed = match peer {
                    Peer::PypiAcceptingAs(id) => Some(id),
                    _ => None,
                };
                let d = pypi::PypiDelegate::start(tmp.path(), PYPI, SECRET, "test-domain", fixed);
                let url = d.url.clone();
                (Some(d), url, "pypi", PYPI, false)
            }
            Peer::Crate => (None, delegate::echo_delegate(&rt), "echo", ECHO, true),
        };
        let root = seed(1);
        let extra = format!(
            "[ldp]\n[[ldp.delegates]]\nname = {name:?}\nurl = {delegate_url:?}\nsecret = {SECRET:?}\n\
             trust_domain = \"test-domain\"\ntenant = \"acme\"\ncost_microcents = {cost}\nnonce = {nonce}\n"
        );
        let config = gateway_config(tmp.path(), &[("acme", root.principal_id())], &extra);
        let gw = Gateway::start(&config);
        let token = root_token(
            &root,
            &seed(2),
            &[&format!("ldp:echo:{name}")],
            budget,
            3600,
        );
        let url = format!("http://{}/ldp/{name}", gw.addr);
        World {
            rt,
            tmp,
            gw,
            pypi,
            name,
            id,
            token: token.encode(),
            url,
        }
    }

    /// What the PyPI router script needs.
    fn router_input(&self) -> Value {
        json!({"url": self.url, "secret": SECRET, "dct": self.token, "router_id": ROUTER,
               "trust_domain": "test-domain", "skill": "echo"})
    }

    fn spent(&self) -> String {
        let m = self.gw.metrics();
        m.lines()
            .find(|l| l.starts_with(r#"dgw_budget_spent_microcents{tenant="acme"}"#))
            .unwrap_or("none")
            .to_owned()
    }

    /// The session as dgw holds it.
    fn session(&self, session: &str) -> Value {
        self.gw.ok(
            "ldp/session",
            json!({"delegate": self.name, "session_id": session}),
        )
    }

    /// The session is closed, each of `tasks` was charged `cost` to the
    /// router's DCT, and each has a gateway-signed attestation that
    /// `dgw attestation verify` accepts against the task's contract.
    fn assert_charged_and_attested(&self, session: &str, tasks: &[&str], cost: u64) {
        let record = self.session(session);
        assert_eq!(record["session"]["state"], "CLOSED", "{record}");
        assert_eq!(record["payer"]["delegation_id"], json!(del(1).as_str()));
        let total = cost * tasks.len() as u64;
        assert_eq!(
            self.spent(),
            format!(r#"dgw_budget_spent_microcents{{tenant="acme"}} {total}"#)
        );
        for task in tasks {
            let at = json!({"delegate": self.name, "session_id": session, "task_id": task});
            let t = self.gw.ok("ldp/task", at.clone());
            assert_eq!(t["reservation"], Value::Null, "settled: {t}");
            let body = self.gw.ok("ldp/attestation", at.clone());
            assert_eq!(body["type"], "ATTESTATION");
            assert_eq!(body["claim"]["attestation_id"], t["attestation"]);
            assert_eq!(body["evidence"]["result"]["costMicrocents"], cost);
            assert_eq!(body["evidence"]["delegationId"], json!(del(1).as_str()));
            let contract = self.gw.ok("ldp/contract", at);
            assert_attestation_verifies(self.tmp.path(), task, &body["evidence"], &contract);
        }
    }

    /// The crate's router (its `LdpClient`), sending `token` as its DCT:
    /// `body` in `session`, with a nonce, signed; the answer's signature
    /// checked by the crate.
    fn crate_send(
        &self,
        client: &ldp_protocol::LdpClient,
        session: &str,
        body: LdpMessageBody,
        mode: PayloadMode,
    ) -> Result<LdpEnvelope, String> {
        let mut e = LdpEnvelope::new(session, ROUTER, self.id, body, mode);
        e.nonce = Some(delegate_gateway::random::session_id().unwrap());
        ldp_protocol::apply_signature(&mut e, SECRET);
        let answer = self.rt.block_on(client.send_message(&self.url, &e));
        if let Ok(a) = &answer {
            let signature = a.signature.as_deref().expect("a signed answer");
            assert!(ldp_protocol::verify_envelope(a, SECRET, signature), "{a:?}");
        }
        answer
    }

    /// What the PyPI delegate received: each signed and verified by the
    /// package's own `verify_envelope`, addressed to it; their types.
    fn pypi_received(&self) -> Vec<(String, Value)> {
        let received = self.pypi.as_ref().unwrap().received();
        received
            .iter()
            .map(|r| {
                assert_eq!(r["verified"], true, "the PyPI delegate refused {r}");
                assert_eq!(r["envelope"]["to"], self.id, "{r}");
                let body = &r["envelope"]["body"];
                (body["type"].as_str().unwrap().to_owned(), body.clone())
            })
            .collect()
    }
}

/// The crate's `LdpClient` presenting `token` as its DCT.
fn crate_router(token: &str) -> ldp_protocol::LdpClient {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", format!("DCT {token}").parse().unwrap());
    ldp_protocol::LdpClient::with_http_client(
        reqwest::Client::builder()
            .default_headers(headers)
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap(),
    )
}

/// The exchanges of the PyPI router's messages: (message type, answer
/// type or refusal), each answer's signature verified by the package.
fn messages(out: &Value) -> Vec<(String, String)> {
    out["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "POST")
        .map(|e| {
            let sent = e["request"]["body"]["type"].as_str().unwrap().to_owned();
            let answer = if e["status"] == 200 {
                assert_eq!(e["answer_verified"], true, "unverifiable answer: {e}");
                e["answer_type"].as_str().unwrap().to_owned()
            } else {
                format!("{} {}", e["status"], e["response"]["error"]["type"])
            };
            (sent, answer)
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The PyPI router's whole session through dgw, to either delegate.
fn pypi_router_session(peer: Peer) {
    let w = World::new(peer, 1000, 100);
    let out = pypi::router("session", &w.router_input());
    // LdpRouter read the delegate's card through dgw.
    assert_eq!(out["discovered"][0]["delegate_id"], w.id, "{out}");
    assert_eq!(out["discovered"][0]["capabilities"][0]["name"], "echo");
    assert_eq!(out["negotiated"], "semantic_frame", "{out}");
    for (task, text) in [("first", "first"), ("fallback", "fallback")] {
        assert_eq!(out[task]["output"]["echo"]["text"], text, "{out}");
        assert_eq!(out[task]["provenance"]["produced_by"], w.id, "{out}");
    }
    // Back up from the fallback: refused by dgw, never forwarded.
    assert_eq!(out["back_up"]["status"], 409, "{out}");
    assert_eq!(out["back_up"]["type"], "no_fallback_mode", "{out}");
    assert_eq!(out["close"]["answer"], "SESSION_CLOSE", "{out}");
    assert_eq!(
        messages(&out),
        pairs(&[
            ("HELLO", "CAPABILITY_MANIFEST"),
            ("SESSION_PROPOSE", "SESSION_ACCEPT"),
            ("TASK_SUBMIT", "TASK_RESULT"),
            ("TASK_SUBMIT", "TASK_RESULT"),
            ("TASK_SUBMIT", "409 \"no_fallback_mode\""),
            ("SESSION_CLOSE", "SESSION_CLOSE"),
        ])
    );
    let session = out["session_id"].as_str().unwrap();
    let record = w.session(session);
    assert_eq!(record["session"]["payload"]["mode"], "text", "{record}");
    assert_eq!(record["session"]["task_count"], 2, "{record}");
    let first = out["first"]["task_id"].as_str().unwrap();
    let fallback = out["fallback"]["task_id"].as_str().unwrap();
    w.assert_charged_and_attested(session, &[first, fallback], 100);
    if peer == Peer::Pypi {
        let modes: Vec<Value> = w
            .pypi_received()
            .into_iter()
            .filter(|(kind, _)| kind == "TASK_SUBMIT")
            .map(|(_, b)| b["input"]["text"].clone())
            .collect();
        assert_eq!(modes, [json!("first"), json!("fallback")]);
    }
}

#[test]
fn a_pypi_router_runs_a_whole_session_through_dgw_to_a_pypi_delegate() {
    pypi_router_session(Peer::Pypi);
}

#[test]
fn a_pypi_router_runs_a_whole_session_through_dgw_to_the_crate_delegate() {
    pypi_router_session(Peer::Crate);
}

/// The crate's router (its `LdpClient`, nonces on) to the PyPI delegate
/// (no nonces): dgw signs toward it without one, and passes its answers
/// back, which the crate verifies.
#[test]
fn the_crate_router_runs_a_whole_session_through_dgw_to_a_pypi_delegate() {
    let w = World::new(Peer::Pypi, 1000, 100);
    let client = crate_router(&w.token);
    let send = |session: &str, body, mode| w.crate_send(&client, session, body, mode);
    let card = w.rt.block_on(client.fetch_identity_card(&w.url)).unwrap();
    assert_eq!(card.delegate_id, PYPI);
    let hello = LdpMessageBody::Hello {
        delegate_id: ROUTER.into(),
        supported_modes: vec![PayloadMode::SemanticFrame, PayloadMode::Text],
    };
    let a = send("", hello, PayloadMode::Text).unwrap();
    assert!(
        matches!(a.body, LdpMessageBody::CapabilityManifest { .. }),
        "{a:?}"
    );
    let proposed = "c1111111-2222-4333-8444-555555555555";
    let propose = LdpMessageBody::SessionPropose {
        config: json!({"preferred_payload_modes": ["semantic_frame", "text"], "ttl_secs": 600,
                       "trust_domain": "test-domain"}),
    };
    let a = send(proposed, propose, PayloadMode::Text).unwrap();
    let LdpMessageBody::SessionAccept {
        session_id,
        negotiated_mode,
    } = &a.body
    else {
        panic!("{a:?}")
    };
    assert_eq!(*negotiated_mode, PayloadMode::SemanticFrame);
    // The PyPI delegate names a session of its own; dgw keeps it by that.
    assert_ne!(session_id, proposed);
    let session = session_id.clone();
    let r = w.gw.err(
        "ldp/session",
        json!({"delegate": "pypi", "session_id": proposed}),
    );
    assert_eq!(r["data"]["type"], "invalid_params", "{r}");
    let task = |id: &str| LdpMessageBody::TaskSubmit {
        task_id: id.into(),
        skill: "echo".into(),
        input: json!({"text": id}),
        contract: None,
    };
    for (id, mode) in [
        ("t-1", PayloadMode::SemanticFrame),
        ("t-2", PayloadMode::Text),
    ] {
        let a = send(&session, task(id), mode).unwrap();
        let LdpMessageBody::TaskResult {
            output, provenance, ..
        } = &a.body
        else {
            panic!("{a:?}")
        };
        assert_eq!(output["echo"]["text"], id);
        assert_eq!(provenance.produced_by, PYPI);
        assert_eq!(provenance.payload_mode_used, mode);
    }
    let e = send(&session, task("t-3"), PayloadMode::SemanticFrame).unwrap_err();
    assert!(e.contains("409") && e.contains("no_fallback_mode"), "{e}");
    let a = send(
        &session,
        LdpMessageBody::SessionClose {
            reason: Some("done".into()),
        },
        PayloadMode::Text,
    )
    .unwrap();
    assert!(
        matches!(a.body, LdpMessageBody::SessionClose { .. }),
        "{a:?}"
    );
    w.assert_charged_and_attested(&session, &["t-1", "t-2"], 100);
    let kinds: Vec<String> = w.pypi_received().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            "HELLO",
            "SESSION_PROPOSE",
            "TASK_SUBMIT",
            "TASK_SUBMIT",
            "SESSION_CLOSE"
        ]
    );
}

/// Every refusal of tests/ldp.rs, sent by the PyPI client to dgw in front
/// of the PyPI delegate: nothing but the one good task is charged.
#[test]
fn the_ldp_denials_replayed_from_the_pypi_client() {
    let w = World::new(Peer::Pypi, 1000, 100);
    let out = pypi::router("denials", &w.router_input());
    let refused = |step: &str, status: u16, kind: &str| {
        assert_eq!(
            (&out[step]["status"], &out[step]["type"]),
            (&json!(status), &json!(kind)),
            "{step}: {}",
            out[step]
        );
    };
    refused("task_before_session", 409, "illegal_in_state");
    assert_eq!(out["negotiated"], "text", "{out}");
    assert_eq!(out["first_send"]["answer"], "TASK_RESULT", "{out}");
    refused("replay", 409, "replay");
    refused("tampered_signature", 401, "bad_signature");
    refused("tampered_field", 401, "bad_signature");
    refused("other_secret", 401, "bad_signature");
    refused("unsigned_hello", 401, "bad_signature");
    refused("stale_timestamp", 400, "stale_timestamp");
    refused("future_timestamp", 400, "stale_timestamp");
    refused("unparseable_timestamp", 400, "stale_timestamp");
    refused("wrong_recipient", 400, "wrong_recipient");
    refused("mode_outside_chain", 409, "no_fallback_mode");
    refused("forged_attestation", 400, "malformed");
    // The delegate's result without provenance: not passed on, not charged.
    refused("no_provenance", 502, "delegate_answer_invalid");
    assert!(
        out["no_provenance"]["message"]
            .as_str()
            .unwrap()
            .starts_with("missing_provenance"),
        "{out}"
    );
    refused("foreign_member_with_value", 400, "malformed");
    assert!(
        out["foreign_member_with_value"]["message"]
            .as_str()
            .unwrap()
            .contains("task_id"),
        "{out}"
    );
    // A foreign trust domain: dgw's own SESSION_REJECT, which the package
    // reads (and which verifies with the shared secret).
    let foreign = &out["foreign_trust_domain"];
    assert_eq!(foreign["type"], "ConnectionError", "{foreign}");
    assert!(
        foreign["message"]
            .as_str()
            .unwrap()
            .contains("Session rejected [TRUST_VIOLATION]"),
        "{foreign}"
    );
    let rejects = messages(&out)
        .into_iter()
        .filter(|(_, a)| a == "SESSION_REJECT")
        .count();
    assert_eq!(rejects, 1);
    // Only t-1 was charged; nothing refused reached the delegate.
    assert_eq!(
        w.spent(),
        r#"dgw_budget_spent_microcents{tenant="acme"} 100"#
    );
    let tasks: Vec<Value> = w
        .pypi_received()
        .into_iter()
        .filter(|(kind, _)| kind != "HELLO" && kind != "SESSION_PROPOSE")
        .map(|(kind, body)| json!([kind, body["task_id"], body["input"]]))
        .collect();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert_eq!(tasks[0], json!(["TASK_SUBMIT", "t-1", {"text": "t-1"}]));
    assert_eq!(tasks[1][2], json!({"no_provenance": true}));
}

/// 50 tasks at once from the PyPI client on a DCT for 10: exactly 10
/// results; the others dgw's own signed TASK_FAILED, which the package
/// reads as a failure.
#[test]
fn fifty_concurrent_pypi_tasks_on_a_budget_for_ten() {
    let w = World::new(Peer::Pypi, 1000, 100);
    let out = pypi::router("concurrent", &w.router_input());
    let outcomes = out["outcomes"].as_array().unwrap();
    let results = outcomes.iter().filter(|o| o["status"] == 200).count();
    let denied = outcomes
        .iter()
        .filter(|o| {
            o["type"] == "RuntimeError"
                && o["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("Task failed [DENIED]")
        })
        .count();
    assert_eq!((results, denied), (10, 40), "{out}");
    let answers = messages(&out);
    let failed = answers.iter().filter(|(_, a)| a == "TASK_FAILED").count();
    assert_eq!(failed, 40);
    assert_eq!(
        w.spent(),
        r#"dgw_budget_spent_microcents{tenant="acme"} 1000"#
    );
    let session = out["session_id"].as_str().unwrap();
    let record = w.session(session);
    assert_eq!(record["session"]["open_tasks"], json!([]), "{record}");
}

/// A delegate accepting a proposal under the ID of a session dgw already
/// holds (another router's) does not get it: its answer is refused, the
/// session keeps its payer, its state and its tasks, the proposal leaves
/// nothing behind.
#[test]
fn a_delegate_cannot_accept_a_proposal_into_an_existing_session() {
    const TAKEN: &str = "d1111111-2222-4333-8444-555555555555";
    let w = World::new(Peer::PypiAcceptingAs(TAKEN), 1000, 100);
    let propose = || LdpMessageBody::SessionPropose {
        config: json!({"payload_mode": "text", "ttl_secs": 600, "trust_domain": "test-domain"}),
    };
    let task = |id: &str| LdpMessageBody::TaskSubmit {
        task_id: id.into(),
        skill: "echo".into(),
        input: json!({"text": id}),
        contract: None,
    };
    let mine = crate_router(&w.token);
    let a = w
        .crate_send(&mine, "p-1", propose(), PayloadMode::Text)
        .unwrap();
    assert!(
        matches!(&a.body, LdpMessageBody::SessionAccept { session_id, .. } if session_id == TAKEN),
        "{a:?}"
    );
    let a = w
        .crate_send(&mine, TAKEN, task("t-1"), PayloadMode::Text)
        .unwrap();
    assert!(matches!(a.body, LdpMessageBody::TaskResult { .. }), "{a:?}");
    // Another router, paying with another delegation.
    let token = root_token_for(&seed(1), &seed(3), &["ldp:echo:pypi"], 1000, 3600, del(2));
    let theirs = crate_router(&token.encode());
    let e = w
        .crate_send(&theirs, "p-2", propose(), PayloadMode::Text)
        .unwrap_err();
    assert!(
        e.contains("502") && e.contains("delegate_answer_invalid") && e.contains("exists"),
        "{e}"
    );
    let record = w.session(TAKEN);
    assert_eq!(record["session"]["state"], "ACTIVE", "{record}");
    assert_eq!(record["session"]["task_count"], 1, "{record}");
    assert_eq!(record["payer"]["delegation_id"], json!(del(1).as_str()));
    for gone in ["p-1", "p-2"] {
        let r = w.gw.err(
            "ldp/session",
            json!({"delegate": "pypi", "session_id": gone}),
        );
        assert_eq!(r["data"]["type"], "invalid_params", "{r}");
    }
    // Their DCT pays nothing in it.
    let a = w
        .crate_send(&theirs, TAKEN, task("t-2"), PayloadMode::Text)
        .unwrap();
    assert!(matches!(a.body, LdpMessageBody::TaskFailed { .. }), "{a:?}");
    assert_eq!(
        w.spent(),
        r#"dgw_budget_spent_microcents{tenant="acme"} 100"#
    );
}
