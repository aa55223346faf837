//! Agenta at the security boundary: hostile input (oversized, replayed
//! payment authorizations, stray and cross-request receipts, traversal-shaped
//! paths, foreign DCTs), administrators only by secret, and buyers'
//! callbacks called only on listed hosts. The real `dgw` and a seller
//! written in the tests.

mod support;

use serde_json::{json, Value};
use support::market::*;
use support::*;

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
    assert_eq!(lookup(&w, "req-00000002"), 404, "nothing kept (issue 30)");
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
fn receipts_reach_a_buyer_callback_only_on_an_allowed_host() {
    let buyer = Seller::start();
    let w = World::with(
        1000,
        "buyer_verified",
        600,
        &format!(
            "buyer_callback_hosts = [{:?}]",
            buyer.url.trim_end_matches("/agenta")
        ),
    );
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

/// The delegation every purchase here is paid from: what it has spent and
/// holds reserved.
fn budget_of(w: &World) -> Value {
    let (status, body) = w.gateway.call_as(
        &format!("Bearer {ADMIN}"),
        "delegateos/budget",
        json!({"delegationId": del(1)}),
    );
    assert_eq!(status, 200, "{body}");
    body["result"]["chains"][0][0].clone()
}

/// `GET` of a request, with the buyer's DCT: the status.
fn lookup(w: &World, request_id: &str) -> u16 {
    let path = format!("/agenta/v0/execution-requests/{request_id}");
    w.send("GET", &path, Some(&w.dct()), b"").0
}

/// Stored bytes of one kind of Agenta record, as the gauge says.
fn stored_bytes(w: &World, kind: &str) -> Option<f64> {
    gauge(
        &w.gateway.metrics(),
        &format!("dgw_protocol_stored_bytes{{protocol=\"agenta\",kind=\"{kind}\"}}"),
    )
}

const KINDS: [&str; 5] = [
    "offer",
    "request",
    "open",
    "idempotency",
    "payment_authorization",
];

/// Issue 30, finding 4: requests that end at once (a reused
/// `payment_authorization_id`, oversized `metadata`, a seller that is down)
/// leave nothing behind: not a byte of state, not a microcent of budget,
/// across a restart. With budget for 4 purchases, 24 refused requests of up
/// to 400 KiB each.
#[test]
fn refused_requests_leave_no_state_and_no_charge() {
    let mut w = World::new(1200, "buyer_verified", 600);
    assert_eq!(w.buy(&request(1, 300)).0, 202);
    let budget = budget_of(&w);
    let data = w.dir.join("data");
    w.gateway.terminate();
    let before = stored(&data);
    w.gateway = Gateway::start(&w.gateway.config.clone());
    // The gauges, once the first sweep set them (checked at the end).
    let started = std::time::Instant::now();
    while stored_bytes(&w, "request").is_none() && started.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let gauges: Vec<Option<f64>> = KINDS.iter().map(|k| stored_bytes(&w, k)).collect();

    let big = "x".repeat(400 << 10);
    let mut refused = Vec::new();
    for n in 100..108 {
        let mut r = request(n, 300);
        r["payment"]["payment_authorization_id"] = json!("pay-00000001");
        r["metadata"] = json!({ "note": big });
        refused.push(("oversized metadata", r.clone(), w.buy(&r)));
    }
    for n in 200..208 {
        let mut r = request(n, 300);
        r["payment"]["payment_authorization_id"] = json!("pay-00000001");
        refused.push(("a reused payment authorization", r.clone(), w.buy(&r)));
    }
    *w.seller.mode.lock().unwrap() = Mode::Fail;
    for n in 300..308 {
        let r = request(n, 300);
        refused.push(("a seller that is down", r.clone(), w.buy(&r)));
    }
    *w.seller.mode.lock().unwrap() = Mode::Accept;
    for (why, _, (status, body)) in &refused {
        assert!(*status >= 400, "{why}: {status} {body}");
    }
    assert_eq!(budget_of(&w), budget, "the budget is as it was");
    w.gateway.terminate();
    let after = stored(&data);
    assert_eq!(after, before, "the refused requests changed the state");
    w.gateway = Gateway::start(&w.gateway.config.clone());

    for (why, r, (status, body)) in &refused {
        let id = r["request_id"].as_str().unwrap();
        assert_eq!(lookup(&w, id), 404, "{why}: {id} was kept");
        let expected = match *why {
            "oversized metadata" => (413, "member_too_large"),
            "a reused payment authorization" => (402, "budget_authorization_missing"),
            _ => (502, "upstream_dependency_failed"),
        };
        assert_eq!((*status, code(body)), expected, "{why}: {body}");
    }
    let (_, body) = &refused[0].2;
    assert_eq!(
        body["error"]["details"]["violations"][0]["pointer"],
        "/metadata"
    );
    assert_eq!(w.state("req-00000001")["status"], "accepted");
    // A request the seller never took keeps no answer: once the seller is
    // back, the same request is bought.
    let again = &refused[16].1;
    assert_eq!(w.buy(again).0, 202);
    // One more purchase grows each kind of record by about one record's
    // size, once the gauges show it (the sweep refreshes them).
    let gauges: Vec<f64> = gauges
        .into_iter()
        .map(|g| g.expect("a dgw_protocol_stored_bytes gauge for each kind"))
        .collect();
    let started = std::time::Instant::now();
    while stored_bytes(&w, "open").unwrap_or(0.0) < 1.5 * gauges[2] {
        assert!(started.elapsed().as_secs() < 10, "{}", w.gateway.metrics());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for (kind, was) in KINDS.iter().zip(&gauges) {
        let now = stored_bytes(&w, kind).unwrap();
        let most = if *kind == "offer" {
            *was
        } else {
            2.0 * was + 64.0
        };
        assert!(now <= most, "{kind}: {was} bytes before, {now} after");
    }
}

/// Issue 30, finding 4: how many requests are stored is capped
/// (`max_stored_requests`): at the cap a new request is refused with
/// `too_many_stored_requests`, nothing stored, nothing reserved, nothing
/// forwarded. `retention` after a request ended, the sweep forgets it, its
/// idempotency key and its payment authorization, which frees its place.
/// On each backend that stores Agenta records: sled, memory, Redis.
fn cap_and_retention(w: &World) {
    assert_eq!(w.buy(&request(1, 300)).0, 202);
    assert_eq!(w.buy(&request(2, 300)).0, 202);
    let budget = budget_of(w);
    let full: Vec<(u16, Value)> = (3..13).map(|n| w.buy(&request(n, 300))).collect();
    for (status, body) in &full {
        assert_eq!(
            (*status, code(body)),
            (429, "too_many_stored_requests"),
            "{body}"
        );
    }
    assert_eq!(lookup(w, "req-00000003"), 404);
    assert_eq!(budget_of(w), budget, "nothing reserved");
    assert_eq!(w.seller.forwards().len(), 2, "nothing forwarded");
    // Request 1 ends; two seconds later it is forgotten, with its keys.
    let req = request(1, 300);
    let secret = w.secret_of("req-00000001");
    let done = completed(&req, "rcpt-done", json!("s"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
    assert_eq!(
        lookup(w, "req-00000001"),
        200,
        "kept while the retention runs"
    );
    let started = std::time::Instant::now();
    while lookup(w, "req-00000001") != 404 {
        assert!(started.elapsed().as_secs() < 20, "never forgotten");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Its idempotency key and payment authorization are free again, and
    // its place: the same request is a new purchase, forwarded again.
    let (status, body) = w.buy(&req);
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        w.seller.forwards().len(),
        3,
        "bought anew, not answered from the key"
    );
    // Full again.
    assert_eq!(w.buy(&request(4, 300)).0, 429);
    let mut reuse = request(5, 300);
    reuse["payment"]["payment_authorization_id"] = json!("pay-00000002");
    assert_eq!(w.buy(&reuse).0, 402, "request 2's binding holds");
    assert_eq!(w.seller.forwards().len(), 3);
}

/// A data dir from before issue 30: an ended request without `ended_ms`
/// (forgotten `retention` after its deadline), and an idempotency key and a
/// payment authorization (in its old form, the request ID alone) whose
/// request is not there, as a crash could leave them: the sweep drops them,
/// and the purchase they blocked goes through.
#[test]
fn records_from_before_issue_30_are_swept() {
    use dgw_core::state::RecordStore;
    let mut w = World::with(10_000, "buyer_verified", 3, "retention = \"1s\"");
    let req = request(2, 300);
    assert_eq!(w.buy(&req).0, 202);
    let done = completed(&req, "rcpt-done", json!("s"), 250);
    assert_eq!(w.report(Some(&w.secret_of("req-00000002")), &done).0, 200);
    w.gateway.terminate();
    with_sled(&w.dir.join("data"), |_, records, runtime| {
        runtime.block_on(async {
            let was = records
                .get("agenta_requests", "req-00000002")
                .await
                .unwrap()
                .unwrap();
            let mut old = was.clone();
            old.as_object_mut().unwrap().remove("ended_ms").unwrap();
            assert!(records
                .replace("agenta_requests", "req-00000002", &was, &old)
                .await
                .unwrap());
            let claim = json!({"digest": "sha256:00", "delegation_id": "elsewhere",
                               "request_id": "req-00000001", "answer": null});
            assert!(records
                .insert_new("agenta_idempotency", "globex\nidem-00000001", &claim)
                .await
                .unwrap());
            assert!(records
                .insert_new(
                    "agenta_payment_authorizations",
                    "acme\npay-00000001",
                    &json!("req-00000001")
                )
                .await
                .unwrap());
        })
    });
    w.gateway = Gateway::start(&w.gateway.config.clone());
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    loop {
        let (status, body) = w.buy(&request(1, 300));
        if status == 202 {
            break;
        }
        answers.push(code(&body).to_owned());
        assert!(
            started.elapsed().as_secs() < 20,
            "still blocked: {answers:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        answers.first().map(String::as_str),
        Some("idempotency_conflict")
    );
    while lookup(&w, "req-00000002") != 404 {
        assert!(started.elapsed().as_secs() < 20, "never forgotten");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn stored_requests_are_capped_and_forgotten_after_the_retention_on_sled() {
    let w = World::with(
        10_000,
        "buyer_verified",
        600,
        "max_stored_requests = 2\nretention = \"2s\"",
    );
    cap_and_retention(&w);
}

#[test]
fn stored_requests_are_capped_and_forgotten_after_the_retention_in_memory() {
    let w = World::started(
        10_000,
        "buyer_verified",
        600,
        "max_stored_requests = 2\nretention = \"2s\"",
        Gateway::start_ephemeral,
    );
    cap_and_retention(&w);
}

#[test]
fn stored_requests_are_capped_and_forgotten_after_the_retention_on_redis() {
    let redis = support::redis::RedisServer::start();
    let w = World::with(
        10_000,
        "buyer_verified",
        600,
        &format!(
            "max_stored_requests = 2\nretention = \"2s\"\n\
             [state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"agenta30\"\n",
            redis.url()
        ),
    );
    cap_and_retention(&w);
}

/// Issue 30, finding 4: every free-form member is bounded (`input`,
/// `metadata`, a receipt's `result`, URLs), each by its own key; a breach
/// is 413 `member_too_large` naming the member, and changes nothing.
#[test]
fn oversized_free_form_members_are_refused_by_name() {
    let w = World::with(
        10_000,
        "buyer_verified",
        600,
        "max_input_bytes = 1000\nmax_metadata_bytes = 100\nmax_string_bytes = 200\nmax_result_bytes = 500",
    );
    let breaches = [
        ("/input", json!({"text": "a".repeat(1000)})),
        (
            "/metadata",
            json!({"a": "b".repeat(60), "c": "d".repeat(60)}),
        ),
        (
            "/callback/url",
            json!({"url": format!("https://buyer.example/{}", "p".repeat(200))}),
        ),
        (
            "/requested_at",
            json!(format!("2026-11-23T12:00:00.{}Z", "0".repeat(200))),
        ),
    ];
    for (n, (pointer, value)) in breaches.iter().enumerate() {
        let mut r = request(n + 10, 300);
        let member = pointer.trim_start_matches('/').split('/').next().unwrap();
        r[member] = value.clone();
        let (status, body) = w.buy(&r);
        assert_eq!(
            (status, code(&body)),
            (413, "member_too_large"),
            "{pointer}: {body}"
        );
        let at = body["error"]["details"]["violations"][0]["pointer"]
            .as_str()
            .unwrap();
        assert!(at.starts_with(pointer), "{pointer}: {body}");
        assert_eq!(lookup(&w, r["request_id"].as_str().unwrap()), 404);
    }
    assert!(w.seller.forwards().is_empty());
    // Just within every bound: bought.
    let mut r = request(1, 300);
    r["input"] = json!({"text": "a".repeat(900)});
    r["metadata"] = json!({"a": "b".repeat(80)});
    assert_eq!(w.buy(&r).0, 202);
    // A receipt with too large a result is refused and changes nothing.
    let secret = w.secret_of("req-00000001");
    let done = completed(&r, "rcpt-big", json!("s".repeat(600)), 250);
    let (status, body) = w.report(Some(&secret), &done);
    assert_eq!((status, code(&body)), (413, "member_too_large"), "{body}");
    assert_eq!(w.state("req-00000001")["status"], "accepted");
    let done = completed(&r, "rcpt-done", json!("s"), 250);
    assert_eq!(w.report(Some(&secret), &done).0, 200);
}

/// Issue 30, finding 6: buyer callbacks are matched to
/// `buyer_callback_hosts` by origin (scheme, host and port), not by host:
/// another port or scheme on an allowed host is never called, and a bare
/// host means `https` on 443.
#[test]
fn buyer_callbacks_are_called_only_at_an_allowed_origin() {
    let buyer = Seller::start();
    let elsewhere = Seller::start();
    let origin = buyer.url.trim_end_matches("/agenta").to_owned();
    let w = World::with(
        10_000,
        "buyer_verified",
        600,
        &format!("buyer_callback_hosts = [\"{origin}\", \"localhost\"]"),
    );
    let callbacks = [
        (1, buyer.url.clone(), true),
        // The same host, another port: the host alone matched before.
        (2, elsewhere.url.clone(), false),
        // A bare host is https on 443, not http on any port.
        (3, elsewhere.url.replace("127.0.0.1", "localhost"), false),
        // Another scheme at the allowed host and port.
        (4, buyer.url.replace("http://", "https://"), false),
    ];
    for (n, url, _) in &callbacks {
        let mut req = request(*n, 300);
        req["callback"] = json!({"url": url, "auth_reference": "buyer-own-secret"});
        assert_eq!(w.buy(&req).0, 202);
        let id = req["request_id"].as_str().unwrap().to_owned();
        let done = completed(&req, "rcpt-done", json!("s"), 250);
        assert_eq!(w.report(Some(&w.secret_of(&id)), &done).0, 200);
    }
    // Every receipt has been passed on, or not, by then.
    let started = std::time::Instant::now();
    while buyer.forwards().len() < 2 && started.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let to = |s: &Seller| -> Vec<Value> {
        s.forwards()
            .iter()
            .map(|r| r["request_id"].clone())
            .collect()
    };
    assert_eq!(
        (to(&elsewhere), elsewhere.connections()),
        (vec![], 0),
        "a callback at another port of an allowed host was called"
    );
    assert_eq!(
        to(&buyer),
        vec![json!("req-00000001"), json!("req-00000001")],
        "the allowed origin, each receipt once"
    );
    assert_eq!(
        buyer.connections(),
        2,
        "https at the allowed host and port is another origin"
    );
}
