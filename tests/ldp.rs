//! LDP through the gateway, with the reference crate at both ends: its
//! `LdpClient` (a router) talks to dgw as if dgw were the delegate, and its
//! `LdpServer` (the echo delegate, behind a small HTTP listener here) is
//! the delegate. Every task is authorized and reserved with the router's
//! DCT, charged when its result comes back, and attested.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
use ldp_protocol::types::payload::PayloadMode;
use serde_json::{json, Value};
use support::*;

const SECRET: &str = "a-shared-secret-of-32-bytes-0123";
const ECHO: &str = "ldp:delegate:echo";
const ROUTER: &str = "ldp:delegate:router";

#[path = "ldp/delegate.rs"]
mod delegate;
use delegate::echo_delegate;
#[path = "ldp/scripted.rs"]
mod scripted;

struct World {
    rt: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
    config: std::path::PathBuf,
    gw: Option<Gateway>,
    client: ldp_protocol::LdpClient,
    url: String,
}

impl World {
    /// dgw in front of the echo delegate; the router's DCT pays
    /// `budget` for tasks of `cost` each.
    fn new(budget: u64, cost: u64) -> World {
        Self::with(budget, cost, "")
    }

    /// [`World::new`] with `extra` config.
    fn with(budget: u64, cost: u64, extra_config: &str) -> World {
        Self::before(budget, cost, extra_config, echo_delegate)
    }

    /// [`World::with`] before the delegate `start` starts (its URL).
    fn before(
        budget: u64,
        cost: u64,
        extra_config: &str,
        start: impl FnOnce(&tokio::runtime::Runtime) -> String,
    ) -> World {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let delegate = start(&rt);
        let tmp = tempfile::tempdir().unwrap();
        let root = seed(1);
        let extra = format!(
            "[ldp]\n[[ldp.delegates]]\nname = \"echo\"\nurl = {delegate:?}\nsecret = {SECRET:?}\n\
             trust_domain = \"test-domain\"\ntenant = \"acme\"\ncost_microcents = {cost}\nnonce = true\n\
             {extra_config}"
        );
        let config = gateway_config(tmp.path(), &[("acme", root.principal_id())], &extra);
        let gw = Gateway::start(&config);
        let token = root_token(&root, &seed(2), &["ldp:echo:echo"], budget, 3600).encode();
        let _ = std::fs::write(tmp.path().join("router.dct"), &token);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("authorization", format!("DCT {token}").parse().unwrap());
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        let url = format!("http://{}/ldp/echo", gw.addr);
        World {
            rt,
            _tmp: tmp,
            config,
            gw: Some(gw),
            client: ldp_protocol::LdpClient::with_http_client(http),
            url,
        }
    }

    fn gw(&self) -> &Gateway {
        self.gw.as_ref().unwrap()
    }

    /// A signed envelope from the router.
    fn message(&self, session: &str, body: LdpMessageBody) -> LdpEnvelope {
        Self::message_from(ROUTER, session, body)
    }

    /// A signed envelope from `from` (any holder of the shared secret).
    fn message_from(from: &str, session: &str, body: LdpMessageBody) -> LdpEnvelope {
        Self::signed(from, SECRET, session, body)
    }

    /// A signed envelope from `from`, with `secret`.
    fn signed(from: &str, secret: &str, session: &str, body: LdpMessageBody) -> LdpEnvelope {
        let mut e = LdpEnvelope::new(session, from, ECHO, body, PayloadMode::Text);
        e.nonce = Some(delegate_gateway::random::session_id().unwrap());
        ldp_protocol::apply_signature(&mut e, secret);
        e
    }

    fn send(&self, e: &LdpEnvelope) -> Result<LdpEnvelope, String> {
        self.rt.block_on(self.client.send_message(&self.url, e))
    }

    fn open(&self, session: &str) {
        let hello = LdpMessageBody::Hello {
            delegate_id: ROUTER.into(),
            supported_modes: vec![PayloadMode::Text],
        };
        let a = self.send(&self.message("", hello)).unwrap();
        assert!(
            matches!(a.body, LdpMessageBody::CapabilityManifest { .. }),
            "{a:?}"
        );
        let propose = LdpMessageBody::SessionPropose {
            config: json!({"payload_mode": "text", "ttl_secs": 600, "trust_domain": "test-domain"}),
        };
        let a = self.send(&self.message(session, propose)).unwrap();
        assert!(
            matches!(a.body, LdpMessageBody::SessionAccept { .. }),
            "{a:?}"
        );
    }

    /// The reference client sending `Authorization: <authorization>`, or nothing.
    fn client_with(authorization: Option<&str>) -> ldp_protocol::LdpClient {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(a) = authorization {
            headers.insert("authorization", a.parse().unwrap());
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        ldp_protocol::LdpClient::with_http_client(http)
    }

    /// SESSION_PROPOSE of `config`, the delegate's (or dgw's) answer.
    fn propose(&self, session: &str, config: Value) -> Result<LdpEnvelope, String> {
        let propose = LdpMessageBody::SessionPropose { config };
        self.send(&self.message(session, propose))
    }

    /// `n` tasks submitted at once: how many came back as results, how
    /// many as failures.
    fn submit_at_once(&self, session: &str, n: usize) -> (usize, usize) {
        let messages: Vec<LdpEnvelope> = (0..n)
            .map(|i| {
                self.message(
                    session,
                    LdpMessageBody::TaskSubmit {
                        task_id: format!("t-{i}"),
                        skill: "echo".into(),
                        input: json!({"i": i}),
                        contract: None,
                    },
                )
            })
            .collect();
        let answers = self.rt.block_on(async {
            let tasks: Vec<_> = messages
                .into_iter()
                .map(|m| {
                    let (client, url) = (self.client.clone(), self.url.clone());
                    tokio::spawn(async move { client.send_message(&url, &m).await })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap().unwrap());
            }
            out
        });
        let count = |f: fn(&LdpMessageBody) -> bool| answers.iter().filter(|a| f(&a.body)).count();
        (
            count(|b| matches!(b, LdpMessageBody::TaskResult { .. })),
            count(|b| matches!(b, LdpMessageBody::TaskFailed { .. })),
        )
    }

    fn submit(&self, session: &str, task: &str) -> Result<LdpEnvelope, String> {
        self.send(&self.message(
            session,
            LdpMessageBody::TaskSubmit {
                task_id: task.into(),
                skill: "echo".into(),
                input: json!({"text": task}),
                contract: None,
            },
        ))
    }
}

#[test]
fn a_router_runs_a_session_through_dgw_charged_and_attested() {
    let w = World::new(1000, 100);
    // dgw serves the delegate's card as its own endpoint.
    let (status, card) = w
        .gw()
        .http("GET", "/ldp/echo/.well-known/ldp-identity", b"");
    let card: Value = serde_json::from_slice(&card).unwrap();
    assert_eq!(status, 200);
    assert_eq!(card["delegate_id"], ECHO);
    assert_eq!(card["endpoint"], json!(w.url));
    let fetched = w.rt.block_on(w.client.fetch_identity_card(&w.url)).unwrap();
    assert_eq!(fetched.delegate_id, ECHO);
    // dgw's own card lists the delegates; the reference client reads it.
    let base = format!("http://{}", w.gw().addr);
    let own =
        w.rt.block_on(w.client.fetch_identity_wellknown(&base))
            .unwrap();
    assert_eq!(own.delegate_id, "ldp:delegate:dgw");
    assert!(own.capabilities.iter().any(|c| c.name == "echo"));
    assert_eq!(own.metadata["ldp.delegate.echo"], w.url);
    let (_, own) = w.gw().http("GET", "/.well-known/ldp-identity", b"");
    ldp::identity::IdentityCard::from_value(serde_json::from_slice(&own).unwrap()).unwrap();

    let session = "11111111-2222-4333-8444-555555555555";
    w.open(session);
    let a = w.submit(session, "t-1").unwrap();
    let LdpMessageBody::TaskResult {
        output, provenance, ..
    } = &a.body
    else {
        panic!("{a:?}")
    };
    assert_eq!(output["echo"]["text"], "t-1");
    assert_eq!(provenance.produced_by, ECHO);
    // The answer is the delegate's, still verifiable by the router.
    assert!(ldp_protocol::verify_envelope(
        &a,
        SECRET,
        a.signature.as_deref().unwrap()
    ));
    let a = w.send(&w.message(
        session,
        LdpMessageBody::SessionClose {
            reason: Some("done".into()),
        },
    ));
    assert!(a.is_ok(), "{a:?}");

    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 100"#),
        "{m}"
    );
    assert!(
        m.contains(r#"dgw_protocol_settled_microcents_total{protocol="ldp"} 100"#),
        "{m}"
    );
    let record = w.gw().ok(
        "ldp/session",
        json!({"delegate": "echo", "session_id": session}),
    );
    assert_eq!(record["session"]["state"], "CLOSED", "{record}");
    assert_eq!(record["session"]["task_count"], 1);
    let task = w.gw().ok(
        "ldp/task",
        json!({"delegate": "echo", "session_id": session, "task_id": "t-1"}),
    );
    assert_eq!(task["reservation"], Value::Null, "settled: {task}");
    let attestation = task["attestation"].as_str().unwrap().to_owned();
    // The attestation as an LDP ATTESTATION body, which verifies.
    let body = w.gw().ok(
        "ldp/attestation",
        json!({"delegate": "echo", "session_id": session, "task_id": "t-1"}),
    );
    assert_eq!(body["type"], "ATTESTATION");
    assert_eq!(body["claim"]["attestation_id"], json!(attestation));
    let key_file = std::fs::read(w._tmp.path().join("data/gateway.key")).unwrap();
    let gateway = delegateos::KeyFile::parse(&key_file).unwrap().public_key();
    assert_eq!(
        body["evidence"]["principal"],
        json!(delegateos::PrincipalId::from_key(&gateway).as_str())
    );
    assert_eq!(body["evidence"]["result"]["costMicrocents"], 100);
    // It verifies against the task's contract, as any DelegateOS attestation.
    let contract = w.gw().ok(
        "ldp/contract",
        json!({"delegate": "echo", "session_id": session, "task_id": "t-1"}),
    );
    assert_eq!(body["evidence"]["contractId"], contract["id"]);
    assert_eq!(body["evidence"]["delegationId"], json!(del(1).as_str()));
    assert_attestation_verifies(w._tmp.path(), "task", &body["evidence"], &contract);
    let events = w.gw().ok("dgw/audit", json!({}))["events"]
        .as_array()
        .unwrap()
        .clone();
    let result = events.iter().find(|e| e["event"] == "result").unwrap();
    assert_eq!(result["attestation"], json!(attestation));
}

#[test]
fn breaches_are_refused_and_nothing_is_charged() {
    let w = World::new(1000, 100);
    let session = "21111111-2222-4333-8444-555555555555";
    // A task before any session.
    let e = w.submit(session, "t-0").unwrap_err();
    assert!(e.contains("409") && e.contains("illegal_in_state"), "{e}");
    w.open(session);
    // A replayed message.
    let m = w.message(
        session,
        LdpMessageBody::TaskSubmit {
            task_id: "t-1".into(),
            skill: "echo".into(),
            input: json!({}),
            contract: None,
        },
    );
    w.send(&m).unwrap();
    let e = w.send(&m).unwrap_err();
    assert!(e.contains("409") && e.contains("replay"), "{e}");
    // Signed with another secret.
    let mut forged = LdpEnvelope::new(
        session,
        ROUTER,
        ECHO,
        LdpMessageBody::TaskCancel {
            task_id: "t-1".into(),
        },
        PayloadMode::Text,
    );
    ldp_protocol::apply_signature(&mut forged, "not-the-shared-secret-at-all-000");
    let e = w.send(&forged).unwrap_err();
    assert!(e.contains("401") && e.contains("bad_signature"), "{e}");
    // A stale timestamp.
    let mut stale = LdpEnvelope::new(
        session,
        ROUTER,
        ECHO,
        LdpMessageBody::TaskCancel {
            task_id: "t-1".into(),
        },
        PayloadMode::Text,
    );
    stale.timestamp = "2026-01-01T00:00:00Z".into();
    ldp_protocol::apply_signature(&mut stale, SECRET);
    let e = w.send(&stale).unwrap_err();
    assert!(e.contains("stale_timestamp"), "{e}");
    // An unsigned HELLO (the reference server would take it).
    let hello = LdpEnvelope::new(
        "",
        ROUTER,
        ECHO,
        LdpMessageBody::Hello {
            delegate_id: ROUTER.into(),
            supported_modes: vec![PayloadMode::Text],
        },
        PayloadMode::Text,
    );
    let e = w.send(&hello).unwrap_err();
    assert!(e.contains("401") && e.contains("bad_signature"), "{e}");
    // A message for another delegate.
    let mut misaddressed = LdpEnvelope::new(
        session,
        ROUTER,
        "ldp:delegate:other",
        LdpMessageBody::TaskCancel {
            task_id: "t-1".into(),
        },
        PayloadMode::Text,
    );
    ldp_protocol::apply_signature(&mut misaddressed, SECRET);
    assert!(w
        .send(&misaddressed)
        .unwrap_err()
        .contains("wrong_recipient"));
    // A session outside the delegate's trust domain: dgw rejects it itself.
    let propose = LdpMessageBody::SessionPropose {
        config: json!({"payload_mode": "text", "ttl_secs": 60, "trust_domain": "elsewhere"}),
    };
    let a = w
        .send(&w.message("31111111-2222-4333-8444-555555555555", propose))
        .unwrap();
    assert!(
        matches!(a.body, LdpMessageBody::SessionReject { .. }),
        "{a:?}"
    );
    // A task in a payload mode the session did not negotiate (text).
    let mut framed = LdpEnvelope::new(
        session,
        ROUTER,
        ECHO,
        LdpMessageBody::TaskSubmit {
            task_id: "t-9".into(),
            skill: "echo".into(),
            input: json!({}),
            contract: None,
        },
        PayloadMode::SemanticFrame,
    );
    ldp_protocol::apply_signature(&mut framed, SECRET);
    let e = w.send(&framed).unwrap_err();
    assert!(e.contains("409") && e.contains("no_fallback_mode"), "{e}");
    // An ATTESTATION carrying a forged DelegateOS attestation.
    let forged = LdpMessageBody::Attestation {
        claim: json!({"type": "delegateos.attestation"}),
        evidence: json!({"id": "att_000000000001"}),
    };
    let e = w.send(&w.message(session, forged)).unwrap_err();
    assert!(e.contains("400") && e.contains("malformed"), "{e}");
    // A delegate's result without provenance: refused, and not charged.
    let e = w.submit(session, "no-provenance-1").unwrap_err();
    assert!(e.contains("502") && e.contains("missing_provenance"), "{e}");
    // Only t-1 was charged.
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 100"#),
        "{m}"
    );
}

/// Exactly N tasks of cost c pass on a budget of N·c, under 50
/// concurrent submits; the others get a TASK_FAILED and nothing forwarded.
#[test]
fn fifty_concurrent_tasks_on_a_budget_for_ten() {
    let w = World::new(1000, 100);
    let session = "41111111-2222-4333-8444-555555555555";
    w.open(session);
    let (results, failed) = w.submit_at_once(session, 50);
    assert_eq!((results, failed), (10, 40));
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 1000"#),
        "{m}"
    );
}

/// A restart between two tasks of one session loses nothing; an idle
/// session expires.
#[test]
fn sessions_survive_a_restart_and_expire() {
    let mut w = World::new(1000, 100);
    let session = "51111111-2222-4333-8444-555555555555";
    w.open(session);
    w.submit(session, "t-1").unwrap();
    assert!(w.gw.as_mut().unwrap().terminate().success());
    w.gw = Some(Gateway::start(&w.config));
    w.url = format!("http://{}/ldp/echo", w.gw().addr);
    let a = w.submit(session, "t-2").unwrap();
    assert!(matches!(a.body, LdpMessageBody::TaskResult { .. }), "{a:?}");
    let record = w.gw().ok(
        "ldp/session",
        json!({"delegate": "echo", "session_id": session}),
    );
    assert_eq!(record["session"]["task_count"], 2, "{record}");
    // A session of one second, idle for two.
    let short = "61111111-2222-4333-8444-555555555555";
    let propose = LdpMessageBody::SessionPropose {
        config: json!({"payload_mode": "text", "ttl_secs": 1, "trust_domain": "test-domain"}),
    };
    w.send(&w.message(short, propose)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let e = w.submit(short, "t-3").unwrap_err();
    assert!(e.contains("410") && e.contains("session_expired"), "{e}");
}

/// The `[[admin.tokens]]` entry of an administrator whose secret is `admin`.
fn admin_token(admin: &str) -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(admin.as_bytes()));
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

/// With admin tokens configured, a router reads the sessions its DCT paid
/// in, and no others.
#[test]
fn routers_read_their_own_sessions() {
    let admin = "ldp-test-admin-secret-0123456789abcdef";
    let w = World::with(1000, 100, &admin_token(admin));
    let session = "71111111-2222-4333-8444-555555555555";
    w.open(session);
    w.submit(session, "t-1").unwrap();
    let mine = format!(
        "DCT {}",
        std::fs::read_to_string(w._tmp.path().join("router.dct")).unwrap()
    );
    let params = json!({"delegate": "echo", "session_id": session});
    let (_, r) = w.gw().call_as(&mine, "ldp/session", params.clone());
    assert_eq!(r["result"]["session"]["task_count"], 1, "{r}");
    let (_, r) = w.gw().call_as(&mine, "ldp/sessions", json!({}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 1, "{r}");
    let theirs = format!(
        "DCT {}",
        root_token_for(&seed(1), &seed(3), &["ldp:echo:echo"], 10, 3600, del(2)).encode()
    );
    let (_, r) = w.gw().call_as(&theirs, "ldp/session", params.clone());
    assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    let (_, r) = w.gw().call_as(&theirs, "ldp/sessions", json!({}));
    assert_eq!(r["result"]["sessions"], json!([]), "{r}");
    let r = w.gw().call("ldp/session", params.clone());
    assert_eq!(r["error"]["data"]["type"], "admin_required", "{r}");
    let (_, r) = w
        .gw()
        .call_as(&format!("Bearer {admin}"), "ldp/session", params);
    assert_eq!(r["result"]["session"]["task_count"], 1, "{r}");
}

/// A router without a DCT, in a trust domain a tenant pays for
/// (`[[ldp.domains]]`): its tasks are reserved against the domain's
/// budget, exactly as many as it holds.
#[test]
fn a_paying_trust_domain_stands_in_for_a_dct() {
    let mut w = World::with(
        1000,
        100,
        "[[ldp.domains]]\nname = \"test-domain\"\ntenant = \"acme\"\nbudget_microcents = 300\n",
    );
    w.client = ldp_protocol::LdpClient::new();
    let session = "81111111-2222-4333-8444-555555555555";
    w.open(session);
    let kinds: Vec<&str> = (0..4)
        .map(
            |i| match w.submit(session, &format!("t-{i}")).unwrap().body {
                LdpMessageBody::TaskResult { .. } => "result",
                LdpMessageBody::TaskFailed { .. } => "failed",
                _ => "other",
            },
        )
        .collect();
    assert_eq!(kinds, ["result", "result", "result", "failed"]);
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 300"#),
        "{m}"
    );
}

/// Without a DCT and outside any paying domain: no session.
#[test]
fn no_dct_and_no_paying_domain_is_no_session() {
    let mut w = World::new(1000, 100);
    w.client = ldp_protocol::LdpClient::new();
    let session = "91111111-2222-4333-8444-555555555555";
    let e = w
        .propose(
            session,
            json!({"payload_mode": "text", "trust_domain": "test-domain"}),
        )
        .unwrap_err();
    assert!(
        e.contains("401") && e.contains("credential_required"),
        "{e}"
    );
    let e = w.submit(session, "t-1").unwrap_err();
    assert!(e.contains("409") && e.contains("no session"), "{e}");
}

#[path = "ldp/budget.rs"]
mod budget;
#[path = "ldp/cancel.rs"]
mod cancel;
#[path = "ldp/holder.rs"]
mod holder;
#[path = "ldp/interleavings.rs"]
mod interleavings;

/// The operator console's "Upstreams & protocols" page shows LDP's own
/// panel (through its registration; the console names no protocol): its
/// sessions counted by state, overall and per delegate, with open tasks.
#[test]
fn the_console_shows_ldps_sessions_by_state() {
    let admin = "ldp-console-admin-secret-0123456789abcdef";
    let w = World::with(
        1000,
        100,
        &format!("{}[console]\nenabled = true\n", admin_token(admin)),
    );
    let addr = w.gw().addr.clone();
    let cookie = support::console::sign_in(&addr, admin);
    let rows = support::console::panel(&addr, &cookie, "LDP");
    assert_eq!(rows, [("sessions".to_owned(), "none kept".to_owned())]);
    w.open("71111111-2222-4333-8444-555555555551");
    w.open("71111111-2222-4333-8444-555555555552");
    let rows = support::console::panel(&addr, &cookie, "LDP");
    assert_eq!(
        rows,
        [
            ("sessions".to_owned(), "2 active".to_owned()),
            (
                "delegate echo".to_owned(),
                "2 active; 0 open tasks".to_owned()
            ),
        ]
    );
}
