//! Agenta end to end: the real `dgw` between a buyer (these tests, paying
//! with DCTs) and a seller written here (a small HTTP server that answers
//! forwarded requests with receipts, or fails on demand). Offers, purchases,
//! authenticated seller callbacks, the state machine, settlement,
//! attestations that verify, idempotency, budget exactness under
//! concurrency, restarts and expiry.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sha2::Digest;
use support::*;

/// The administrator's secret of every gateway here.
const ADMIN: &str = "ops-secret-0123456789";

/// What the seller answers a forwarded request with.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Accept,
    Fail,
    /// A first receipt with this status (a completed one with its result).
    Reply(&'static str),
}

/// A seller: every forwarded request it received, and how it answers.
struct Seller {
    url: String,
    received: Arc<Mutex<Vec<Value>>>,
    /// The `Authorization` header of each, in the same order.
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
    mode: Arc<Mutex<Mode>>,
}

impl Seller {
    fn start() -> Seller {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/agenta", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let mode = Arc::new(Mutex::new(Mode::Accept));
        let (r, a, m) = (received.clone(), authorizations.clone(), mode.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (r, a, m) = (r.clone(), a.clone(), m.clone());
                std::thread::spawn(move || serve_one(stream, &r, &a, &m));
            }
        });
        Seller {
            url,
            received,
            authorizations,
            mode,
        }
    }

    fn forwards(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

fn serve_one(
    mut stream: std::net::TcpStream,
    received: &Mutex<Vec<Value>>,
    authorizations: &Mutex<Vec<Option<String>>>,
    mode: &Mutex<Mode>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
            if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_owned());
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request: Value = serde_json::from_slice(&body).unwrap();
    let mut inbox = received.lock().unwrap();
    inbox.push(request.clone());
    authorizations.lock().unwrap().push(authorization);
    drop(inbox);
    let (status, answer) = match *mode.lock().unwrap() {
        Mode::Accept => ("200 OK", receipt(&request, "rcpt-accept", "accepted")),
        Mode::Fail => ("503 Service Unavailable", json!({})),
        Mode::Reply("completed") => ("200 OK", completed(&request, "rcpt-first", json!("s"), 250)),
        Mode::Reply(status) => ("200 OK", receipt(&request, "rcpt-first", status)),
    };
    let body = answer.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A receipt for `request` (as the seller received it).
fn receipt(request: &Value, id: &str, status: &str) -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "execution_receipt",
        "receipt_id": id, "request_id": request["request_id"],
        "offer_id": request["offer_id"], "offer_version": request["offer_version"],
        "seller_agent_id": "seller-agent", "buyer_agent_id": "buyer-agent",
        "status": status, "issued_at": "2026-11-23T12:01:00Z"
    })
}

fn completed(request: &Value, id: &str, summary: Value, amount: u64) -> Value {
    let mut r = receipt(request, id, "completed");
    r["result"] = json!({ "summary": summary });
    r["artifacts"] = json!([{"artifact_type": "result_payload", "uri": "https://seller.example/r/1",
                             "digest": "sha256:00ff"}]);
    r["financials"] = json!({"currency": "USD", "final_amount": amount});
    r
}

fn offer(seller: &Seller, version: &str, mode: &str, max_seconds: u64) -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "offer",
        "offer_id": "offer.summarize-1", "offer_version": version,
        "seller_agent": {"agent_id": "seller-agent", "organization_id": "initech",
                         "endpoint": seller.url},
        "title": "Summarize a document", "description": "Returns a summary.",
        "input_schema": {"type": "object", "required": ["text"]},
        "output_schema": {"type": "object", "required": ["summary"],
                          "properties": {"summary": {"type": "string"}}},
        "pricing": {"pricing_model": "fixed", "currency": "USD", "amount": 250},
        "service_levels": {"target_completion_seconds": 1, "max_completion_seconds": max_seconds},
        "verification_policy": {"mode": mode, "required_artifacts": ["result_payload"],
                                "pass_criteria": ["a summary"]},
        "valid_from": "2026-11-01T00:00:00Z"
    })
}

fn request(n: usize, max_amount: u64) -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "execution_request",
        "request_id": format!("req-{n:08}"), "offer_id": "offer.summarize-1", "offer_version": "1",
        "buyer_agent": {"agent_id": "buyer-agent", "organization_id": "globex"},
        "seller_agent_id": "seller-agent", "input": {"text": "a long text"},
        "payment": {"currency": "USD", "max_amount": max_amount,
                    "payment_authorization_id": format!("pay-{n:08}")},
        "execution_constraints": {"deadline_at": "2099-01-01T00:00:00Z"},
        "callback": {"url": "https://buyer.example/receipts", "auth_reference": "buyer-own-secret"},
        "idempotency_key": format!("idem-{n:08}"), "requested_at": "2026-11-23T12:00:00Z"
    })
}

/// A gateway with Agenta (USD: a cent is a million microcents), the
/// tenant `acme`, and the offer registered.
struct World {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    gateway: Gateway,
    seller: Seller,
    token: String,
}

impl World {
    fn new(budget_cents: u64, mode: &str, max_seconds: u64) -> World {
        Self::with(budget_cents, mode, max_seconds, "")
    }

    /// [`World::new`] with more keys in `[agenta]`.
    fn with(budget_cents: u64, mode: &str, max_seconds: u64, agenta: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        let root = seed(1);
        let config = gateway_config(
            &path,
            &[("acme", root.principal_id())],
            &format!(
                "grpc = \"127.0.0.1:0\"\n[budget]\nsnapshot_interval = \"1s\"\n[agenta]\ntenant = \"acme\"\n{agenta}\n\
                 [agenta.currencies]\nUSD = 1000000\n\
                 [[admin.tokens]]\nname = \"ops\"\nsha256 = \"{}\"\n",
                hex::encode(sha2::Sha256::digest(ADMIN.as_bytes()))
            ),
        );
        let gateway = Gateway::start(&config);
        let seller = Seller::start();
        let token = root_token(
            &root,
            &seed(2),
            &["agenta:execute:offer:offer.summarize-1"],
            budget_cents * 1_000_000,
            3600,
        )
        .encode();
        let world = World {
            _dir: dir,
            dir: path,
            gateway,
            seller,
            token,
        };
        let (status, _) = world.post(
            "/agenta/v0/offers",
            Some(&format!("Bearer {ADMIN}")),
            &offer(&world.seller, "1", mode, max_seconds),
        );
        assert_eq!(status, 201);
        world
    }

    fn send(&self, method: &str, path: &str, auth: Option<&str>, body: &[u8]) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let (status, _, body) = http_exchange(&self.gateway.addr, method, path, &headers, body);
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    fn post(&self, path: &str, auth: Option<&str>, body: &Value) -> (u16, Value) {
        self.send("POST", path, auth, body.to_string().as_bytes())
    }

    fn dct(&self) -> String {
        format!("DCT {}", self.token)
    }

    fn buy(&self, body: &Value) -> (u16, Value) {
        self.post("/agenta/v0/execution-requests", Some(&self.dct()), body)
    }

    fn state(&self, request_id: &str) -> Value {
        let (status, body) = self.send(
            "GET",
            &format!("/agenta/v0/execution-requests/{request_id}"),
            Some(&self.dct()),
            b"",
        );
        assert_eq!(status, 200, "{body}");
        body
    }

    fn secret_of(&self, request_id: &str) -> String {
        let forwarded = self
            .seller
            .forwards()
            .into_iter()
            .find(|f| f["request_id"] == request_id)
            .expect("forwarded");
        forwarded["callback"]["auth_reference"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn report(&self, secret: Option<&str>, receipt: &Value) -> (u16, Value) {
        let auth = secret.map(|s| format!("Bearer {s}"));
        self.post("/agenta/v0/execution-receipts", auth.as_deref(), receipt)
    }
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

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
    assert!(
        metrics.contains("dgw_requests_total{front=\"http\",method=\"agenta\",outcome=\"denied\"}")
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
    assert_eq!(w.state("req-00000002")["status"], "failed");
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
fn loopback_without_admin_tokens_cannot_register_offers() {
    // Decision 62: loopback reads, it never changes what others rely on.
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        "[agenta]\ntenant = \"acme\"\n[agenta.currencies]\nUSD = 1000000\n",
    );
    let gateway = Gateway::start(&config);
    let seller = Seller::start();
    let body = offer(&seller, "1", "buyer_verified", 600).to_string();
    let (status, _, body) = http_exchange(
        &gateway.addr,
        "POST",
        "/agenta/v0/offers",
        &[],
        body.as_bytes(),
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, code(&body)), (403, "admin_required"));
    let (status, _) = gateway.http("GET", "/agenta/v0/offers/offer.summarize-1", b"");
    assert_eq!(status, 404, "nothing was registered");
}

#[test]
fn hostile_input_is_refused_and_changes_nothing() {
    let w = World::new(10_000, "buyer_verified", 600);
    // Oversized: refused by the front before Agenta reads it.
    let big = vec![b' '; 2 << 20];
    let (status, body) = w.send(
        "POST",
        "/agenta/v0/execution-requests",
        Some(&w.dct()),
        &big,
    );
    assert_eq!(
        (status, body["error"]["data"]["type"].clone()),
        (413, json!("body_too_large"))
    );
    // A payment authorization is bound to one request: reused, refused.
    assert_eq!(w.buy(&request(1, 300)).0, 202);
    let mut reused = request(2, 300);
    reused["payment"]["payment_authorization_id"] = json!("pay-00000001");
    let (status, body) = w.buy(&reused);
    assert_eq!(
        (status, code(&body)),
        (402, "budget_authorization_missing"),
        "{body}"
    );
    assert_eq!(w.state("req-00000002")["status"], "failed");
    assert_eq!(w.seller.forwards().len(), 1, "never forwarded");
    // A receipt for a request that does not exist looks like a bad secret.
    let secret = w.secret_of("req-00000001");
    let mut stray = receipt(&request(1, 300), "rcpt-stray", "in_progress");
    stray["request_id"] = json!("req-99999999");
    assert_eq!(w.report(Some(&secret), &stray).0, 401);
    // One request's secret does not move another's.
    assert_eq!(w.buy(&request(3, 300)).0, 202);
    let other = receipt(&request(3, 300), "rcpt-other", "in_progress");
    assert_eq!(w.report(Some(&secret), &other).0, 401);
    assert_eq!(w.state("req-00000003")["status"], "accepted");
    // Paths that are not endpoints, and reading without a credential.
    for path in [
        "/agenta/v0/execution-requests/../offers",
        "/agenta/v0/schemas/../../etc/passwd",
        "/agenta/v0/nothing",
    ] {
        assert_eq!(w.send("GET", path, None, b"").0, 404, "{path}");
    }
    assert_eq!(w.send("GET", "/agenta/v0/offers", None, b"").0, 405);
    assert_eq!(
        w.send("DELETE", "/agenta/v0/offers/offer.summarize-1", None, b"")
            .0,
        405
    );
    let (status, _) = w.send(
        "GET",
        "/agenta/v0/execution-requests/req-00000001",
        None,
        b"",
    );
    assert_eq!(status, 401);
    // A DCT of another tenant's root pays nothing here.
    let stranger = root_token(
        &seed(9),
        &seed(2),
        &["agenta:execute:offer:offer.summarize-1"],
        10_000_000_000,
        3600,
    )
    .encode();
    let (status, body) = w.post(
        "/agenta/v0/execution-requests",
        Some(&format!("DCT {stranger}")),
        &request(4, 300),
    );
    assert_eq!((status, code(&body)), (402, "budget_authorization_missing"));
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

/// Every way to break a message by its schema: each required member of
/// each object the example has, removed; at each object whose
/// `additionalProperties` is `false`, an unknown member; where it is a
/// schema, a member of a type it refuses. (pointer, broken message).
fn breaches(schema: &Value, example: &Value) -> Vec<(String, Value)> {
    fn walk(schema: &Value, node: &Value, at: &str, root: &Value, out: &mut Vec<(String, Value)>) {
        let mut changed = |what: String, change: &dyn Fn(&mut serde_json::Map<String, Value>)| {
            let mut broken = root.clone();
            change(broken.pointer_mut(at).unwrap().as_object_mut().unwrap());
            out.push((what, broken));
        };
        if let (Some(props), Some(obj)) = (
            schema.get("properties").and_then(Value::as_object),
            node.as_object(),
        ) {
            let required = schema.get("required").and_then(Value::as_array);
            for key in required.into_iter().flatten().filter_map(Value::as_str) {
                if obj.contains_key(key) {
                    changed(format!("{at}/{key} removed"), &|o| {
                        o.remove(key);
                    });
                }
            }
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => changed(format!("{at}/unexpected_member"), &|o| {
                    o.insert("unexpected_member".into(), json!(1));
                }),
                Some(Value::Object(_)) => changed(format!("{at}/unexpected_member typed"), &|o| {
                    o.insert("unexpected_member".into(), json!({"an": "object"}));
                }),
                _ => {}
            }
            for (key, sub) in props {
                if let Some(child) = obj.get(key) {
                    walk(sub, child, &format!("{at}/{key}"), root, out);
                }
            }
        }
        if let (Some(items), Some(first)) =
            (schema.get("items"), node.as_array().and_then(|a| a.first()))
        {
            walk(items, first, &format!("{at}/0"), root, out);
        }
    }
    let mut out = Vec::new();
    walk(schema, example, "", example, &mut out);
    out
}

fn schema_of(t: agenta::MessageType) -> Value {
    serde_json::from_str(t.schema_text()).unwrap()
}

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

#[test]
fn receipts_reach_a_buyer_callback_only_on_an_allowed_host() {
    let w = World::with(
        1000,
        "buyer_verified",
        600,
        "buyer_callback_hosts = [\"127.0.0.1\"]",
    );
    let buyer = Seller::start();
    let mut req = request(1, 300);
    req["callback"] = json!({"url": buyer.url, "auth_reference": "buyer-own-secret"});
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000001");
    let done = completed(&req, "rcpt-done", json!("short"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
    let started = std::time::Instant::now();
    while buyer.forwards().len() < 2 {
        assert!(started.elapsed().as_secs() < 10, "{:?}", buyer.forwards());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let statuses: Vec<Value> = buyer
        .forwards()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert!(statuses.contains(&json!("accepted")) && statuses.contains(&json!("completed")));
    assert!(buyer
        .authorizations
        .lock()
        .unwrap()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer buyer-own-secret")));
    // A callback on a host not in the list (the same server, named
    // otherwise) is never called.
    let mut req = request(2, 300);
    req["callback"] = json!({"url": buyer.url.replace("127.0.0.1", "localhost")});
    assert_eq!(w.buy(&req).0, 202);
    let secret = w.secret_of("req-00000002");
    let done = completed(&req, "rcpt-done", json!("short"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(buyer.forwards().len(), 2, "nothing more");
}
