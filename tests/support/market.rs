//! An Agenta marketplace for the end-to-end tests: a seller written here
//! (a small HTTP server that answers forwarded requests with receipts, or
//! fails on demand, and records what it received), messages, and a gateway
//! with Agenta and the offer registered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sha2::Digest;

use super::*;

/// The administrator's secret of every gateway here.
pub const ADMIN: &str = "ops-secret-0123456789";

/// What the seller answers a forwarded request with.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Accept,
    Fail,
    /// A first receipt with this status (a completed one with its result).
    Reply(&'static str),
}

/// A seller: every forwarded request it received, and how it answers.
pub struct Seller {
    pub url: String,
    pub received: Arc<Mutex<Vec<Value>>>,
    /// The `Authorization` header of each, in the same order.
    pub authorizations: Arc<Mutex<Vec<Option<String>>>>,
    pub mode: Arc<Mutex<Mode>>,
    /// Connections accepted (HTTP or not).
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl Seller {
    pub fn start() -> Seller {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/agenta", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let mode = Arc::new(Mutex::new(Mode::Accept));
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (r, a, m) = (received.clone(), authorizations.clone(), mode.clone());
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (r, a, m) = (r.clone(), a.clone(), m.clone());
                std::thread::spawn(move || serve_one(stream, &r, &a, &m));
            }
        });
        Seller {
            url,
            received,
            authorizations,
            mode,
            connections,
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn forwards(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

pub fn serve_one(
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
pub fn receipt(request: &Value, id: &str, status: &str) -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "execution_receipt",
        "receipt_id": id, "request_id": request["request_id"],
        "offer_id": request["offer_id"], "offer_version": request["offer_version"],
        "seller_agent_id": "seller-agent", "buyer_agent_id": "buyer-agent",
        "status": status, "issued_at": "2026-11-23T12:01:00Z"
    })
}

pub fn completed(request: &Value, id: &str, summary: Value, amount: u64) -> Value {
    let mut r = receipt(request, id, "completed");
    r["result"] = json!({ "summary": summary });
    r["artifacts"] = json!([{"artifact_type": "result_payload", "uri": "https://seller.example/r/1",
                             "digest": "sha256:00ff"}]);
    r["financials"] = json!({"currency": "USD", "final_amount": amount});
    r
}

pub fn offer(seller: &Seller, version: &str, mode: &str, max_seconds: u64) -> Value {
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

pub fn request(n: usize, max_amount: u64) -> Value {
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
pub struct World {
    pub _dir: tempfile::TempDir,
    pub dir: std::path::PathBuf,
    pub gateway: Gateway,
    pub seller: Seller,
    pub token: String,
}

impl World {
    pub fn new(budget_cents: u64, mode: &str, max_seconds: u64) -> World {
        Self::with(budget_cents, mode, max_seconds, "")
    }

    /// [`World::new`] with more keys in `[agenta]`.
    pub fn with(budget_cents: u64, mode: &str, max_seconds: u64, agenta: &str) -> World {
        Self::started(budget_cents, mode, max_seconds, agenta, Gateway::start)
    }

    /// [`World::with`], the gateway started by `start` (`Gateway::start_ephemeral`:
    /// state in memory).
    pub fn started(
        budget_cents: u64,
        mode: &str,
        max_seconds: u64,
        agenta: &str,
        start: fn(&std::path::Path) -> Gateway,
    ) -> World {
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
        let gateway = start(&config);
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

    pub fn send(&self, method: &str, path: &str, auth: Option<&str>, body: &[u8]) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let (status, _, body) = http_exchange(&self.gateway.addr, method, path, &headers, body);
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    pub fn post(&self, path: &str, auth: Option<&str>, body: &Value) -> (u16, Value) {
        self.send("POST", path, auth, body.to_string().as_bytes())
    }

    pub fn dct(&self) -> String {
        format!("DCT {}", self.token)
    }

    pub fn buy(&self, body: &Value) -> (u16, Value) {
        self.post("/agenta/v0/execution-requests", Some(&self.dct()), body)
    }

    pub fn state(&self, request_id: &str) -> Value {
        let (status, body) = self.send(
            "GET",
            &format!("/agenta/v0/execution-requests/{request_id}"),
            Some(&self.dct()),
            b"",
        );
        assert_eq!(status, 200, "{body}");
        body
    }

    pub fn secret_of(&self, request_id: &str) -> String {
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

    pub fn report(&self, secret: Option<&str>, receipt: &Value) -> (u16, Value) {
        let auth = secret.map(|s| format!("Bearer {s}"));
        self.post("/agenta/v0/execution-receipts", auth.as_deref(), receipt)
    }
}

/// The Agenta record spaces and the DelegateOS trees a purchase writes to.
pub const STORED: &[&str] = &[
    "agenta_offers",
    "agenta_requests",
    "agenta_open",
    "agenta_idempotency",
    "agenta_payment_authorizations",
    "contracts",
    "attestations",
];

/// What a stopped gateway's sled state holds in each of [`STORED`]:
/// (records, bytes of their keys and JSON).
pub fn stored(
    data_dir: &std::path::Path,
) -> std::collections::BTreeMap<&'static str, (usize, usize)> {
    use dgw_core::state::RecordStore;
    with_sled(data_dir, |storage, records, runtime| {
        let mut out = std::collections::BTreeMap::new();
        for space in STORED {
            let sizes: Vec<usize> = match *space {
                "contracts" | "attestations" => {
                    let tree = if *space == "contracts" {
                        &storage.trees.contracts
                    } else {
                        &storage.trees.attestations
                    };
                    tree.iter()
                        .map(|kv| {
                            let (k, v) = kv.unwrap();
                            k.len() + v.len()
                        })
                        .collect()
                }
                _ => runtime
                    .block_on(records.scan(space))
                    .unwrap()
                    .iter()
                    .map(|(k, v)| k.len() + v.to_string().len())
                    .collect(),
            };
            out.insert(*space, (sizes.len(), sizes.iter().sum()));
        }
        out
    })
}

/// Runs `f` over a stopped gateway's sled state, then waits until sled's
/// lock on the data dir is let go again, so the gateway can start over it.
pub fn with_sled<T>(
    data_dir: &std::path::Path,
    f: impl FnOnce(
        &dgw_state_sled::Storage,
        &dgw_state_sled::SledRecords,
        &tokio::runtime::Runtime,
    ) -> T,
) -> T {
    let db = data_dir.join("db");
    let storage = dgw_state_sled::Storage::open(&db).unwrap();
    let records = dgw_state_sled::SledRecords::new(storage.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = f(&storage, &records, &runtime);
    runtime.block_on(storage.sync()).unwrap();
    drop((records, storage, runtime));
    // sled's flush thread holds the database until it sees the handle gone.
    let started = std::time::Instant::now();
    loop {
        let file = std::fs::File::open(db.join("db")).unwrap();
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            break;
        }
        assert!(started.elapsed().as_secs() < 10, "sled kept its lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    out
}

/// A gauge's value in Prometheus text (`None`: no such series).
pub fn gauge(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// Every way to break a message by its schema: each required member of
/// each object the example has, removed; at each object whose
/// `additionalProperties` is `false`, an unknown member; where it is a
/// schema, a member of a type it refuses. (pointer, broken message).
pub fn breaches(schema: &Value, example: &Value) -> Vec<(String, Value)> {
    pub fn walk(
        schema: &Value,
        node: &Value,
        at: &str,
        root: &Value,
        out: &mut Vec<(String, Value)>,
    ) {
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

pub fn schema_of(t: agenta::MessageType) -> Value {
    serde_json::from_str(t.schema_text()).unwrap()
}
