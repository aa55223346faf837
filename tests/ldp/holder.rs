//! Who may end a session or its tasks (issue 30, finding 2): routers share
//! one secret per delegate, so `from` proves nothing. SESSION_CLOSE and
//! TASK_CANCEL are bound to the credential that pays the session (the
//! paying DCT's delegation); administrators close a session with
//! `ldp/session/close` (decisions 145-146).

use super::budget::kind;
use super::scripted::Answer;
use super::*;

const MALLORY: &str = "ldp:delegate:mallory";
const ADMIN: &str = "ldp-test-admin-secret-0123456789abcdef";

fn admin_config() -> String {
    format!(
        "session_budget_microcents = 100000\n\
         [[ldp.domains]]\nname = \"test-domain\"\ntenant = \"acme\"\nbudget_microcents = 100000\n{}",
        admin_token()
    )
}

fn admin_token() -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(ADMIN.as_bytes()));
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

impl World {
    /// `e` sent by a router whose client presents `authorization`.
    fn send_as(&self, authorization: Option<&str>, e: &LdpEnvelope) -> Result<LdpEnvelope, String> {
        let client = World::client_with(authorization);
        self.rt.block_on(client.send_message(&self.url, e))
    }

    fn state(&self, session: &str) -> Value {
        self.gw()
            .call_as(
                &format!("Bearer {ADMIN}"),
                "ldp/session",
                json!({"delegate": "echo", "session_id": session}),
            )
            .1["result"]["session"]["state"]
            .clone()
    }
}

fn close_body() -> LdpMessageBody {
    LdpMessageBody::SessionClose {
        reason: Some("mine now".into()),
    }
}

fn cancel_body(task: &str) -> LdpMessageBody {
    LdpMessageBody::TaskCancel {
        task_id: task.into(),
    }
}

/// The attack: another router holding the shared secret, with no
/// DCT (or another delegation's, or claiming the payer's `from`), closes a
/// session someone else pays for, or cancels its tasks. All refused;
/// nothing changes: the session, its tasks, its budget, the delegate's
/// work; the payer goes on. An administrator closes it by method.
#[test]
fn only_the_payer_ends_its_session_or_its_tasks() {
    let (w, delegate) = World::scripted(10_000, 100, &admin_config());
    let session = "d1111111-2222-4333-8444-555555555555";
    w.open(session);
    // One task open at the delegate (an update), one in flight.
    let p = w.submit_async(session, "t-open");
    assert!(delegate.wait_held("t-open", || p.is_finished()));
    assert!(delegate.answer("t-open", Answer::Update));
    assert_eq!(kind(&w.finish(p).unwrap()), "update");
    let in_flight = w.submit_async(session, "t-flight");
    assert!(delegate.wait_held("t-flight", || in_flight.is_finished()));
    assert_eq!(w.spending(session), (0, 200));

    let other_dct = format!(
        "DCT {}",
        root_token_for(&seed(1), &seed(3), &["ldp:echo:echo"], 10_000, 3600, del(2)).encode()
    );
    let attempts: [(Option<&str>, &str, &str); 4] = [
        (None, MALLORY, "credential_required"),
        (None, ROUTER, "credential_required"),
        (Some(&other_dct), MALLORY, "not_session_payer"),
        (Some(&other_dct), ROUTER, "not_session_payer"),
    ];
    for (authorization, from, expect) in attempts {
        for body in [close_body(), cancel_body("t-open"), cancel_body("t-flight")] {
            let what = body_kind(&body);
            let a = w.send_as(authorization, &World::message_from(from, session, body));
            let e = match a {
                Ok(a) => panic!(
                    "{what} from {from} with {:?} was taken: {a:?}; the session is now {}",
                    authorization.map(|_| "another delegation's DCT"),
                    w.state(session)
                ),
                Err(e) => e,
            };
            assert!(e.contains(expect), "{what} from {from}: {e}");
        }
    }
    // Nothing changed: the session, its tasks, what it holds.
    assert_eq!(w.state(session), "ACTIVE");
    assert_eq!(w.spending(session), (0, 200));
    assert!(delegate.holds("t-flight"));
    assert!(delegate.answer("t-flight", Answer::Result));
    assert_eq!(kind(&w.finish(in_flight).unwrap()), "result");
    let a = w.run_task(&delegate, session, "t-next", Answer::Result);
    assert_eq!(kind(&a.unwrap()), "result");
    assert_eq!(w.spending(session), (200, 100));

    // The administrator's method: refused without an admin secret (the
    // payer's DCT and Mallory's alike), done with one.
    let params = json!({"delegate": "echo", "session_id": session, "reason": "abuse"});
    let r = w.gw().call("ldp/session/close", params.clone());
    assert_eq!(r["error"]["data"]["type"], "admin_required", "{r}");
    let mine = format!(
        "DCT {}",
        std::fs::read_to_string(w._tmp.path().join("router.dct")).unwrap()
    );
    for authorization in [&mine, &other_dct] {
        let (_, r) = w
            .gw()
            .call_as(authorization, "ldp/session/close", params.clone());
        assert_eq!(r["error"]["data"]["type"], "admin_required", "{r}");
    }
    assert_eq!(w.state(session), "ACTIVE");
    let (_, r) = w.gw().call_as(
        &format!("Bearer {ADMIN}"),
        "ldp/session/close",
        params.clone(),
    );
    assert_eq!(r["result"]["state"], "CLOSED", "{r}");
    assert_eq!(r["result"]["cancelled_tasks"], json!(["t-open"]), "{r}");
    assert_eq!(w.state(session), "CLOSED");
    assert_eq!(w.spending(session), (200, 0));
    let e = w.submit(session, "t-late").unwrap_err();
    assert!(e.contains("409"), "{e}");
    // Closing it again is refused, as is an unknown session.
    let (_, r) = w
        .gw()
        .call_as(&format!("Bearer {ADMIN}"), "ldp/session/close", params);
    assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    let (_, r) = w.gw().call_as(
        &format!("Bearer {ADMIN}"),
        "ldp/session/close",
        json!({"delegate": "echo", "session_id": "nope"}),
    );
    assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    let (_, events) = w
        .gw()
        .call_as(&format!("Bearer {ADMIN}"), "dgw/audit", json!({}));
    let events = events["result"]["events"].to_string();
    assert!(events.contains("token:ops"), "{events}");
}

/// In a session its trust domain pays (no DCT), the router that opened it
/// is known only by `from`: another `from` is refused, the opener's is
/// taken (what a holder of the shared secret can still do is in
/// docs/security.md, row 15c).
#[test]
fn a_domain_paid_session_ends_only_by_its_opener() {
    let (mut w, delegate) = World::scripted(10_000, 100, &admin_config());
    w.client = World::client_with(None);
    let session = "d2111111-2222-4333-8444-555555555555";
    w.open(session);
    let a = w.run_task(&delegate, session, "t-1", Answer::Update);
    assert_eq!(kind(&a.unwrap()), "update");
    let mine = format!(
        "DCT {}",
        std::fs::read_to_string(w._tmp.path().join("router.dct")).unwrap()
    );
    for (authorization, body) in [
        (None, close_body()),
        (None, cancel_body("t-1")),
        (Some(mine.as_str()), close_body()),
    ] {
        let e = w
            .send_as(authorization, &World::message_from(MALLORY, session, body))
            .unwrap_err();
        assert!(e.contains("403") && e.contains("not_session_payer"), "{e}");
    }
    // A DCT does not end a session the domain pays, even from its opener.
    let e = w
        .send_as(
            Some(&mine),
            &World::message_from(ROUTER, session, close_body()),
        )
        .unwrap_err();
    assert!(e.contains("not_session_payer"), "{e}");
    assert_eq!(w.state(session), "ACTIVE");
    assert!(w.close(session).is_ok());
    assert_eq!(w.state(session), "CLOSED");
}

fn body_kind(b: &LdpMessageBody) -> &'static str {
    match b {
        LdpMessageBody::SessionClose { .. } => "SESSION_CLOSE",
        LdpMessageBody::TaskCancel { .. } => "TASK_CANCEL",
        _ => "other",
    }
}

const MINE: &str = "router-a-own-secret-0123456789ab";
const HERS: &str = "mallory-own-secret-0123456789abc";

/// With routers listed, each with a secret of its own (and a pinned trust
/// domain), `from` is known: another router can neither sign as the
/// opener nor end its session, nor open one in a domain not its own; the
/// delegate's secret is no router's any more, and answers are signed to
/// each router with its secret.
#[test]
fn per_router_secrets_tell_routers_apart() {
    let config = format!(
        "[[ldp.delegates.routers]]\nid = {ROUTER:?}\nsecret = {MINE:?}\ntrust_domain = \"test-domain\"\n\
         [[ldp.delegates.routers]]\nid = {MALLORY:?}\nsecret = {HERS:?}\ntrust_domain = \"elsewhere\"\n\
         [[ldp.domains]]\nname = \"test-domain\"\ntenant = \"acme\"\nbudget_microcents = 100000\n{}",
        admin_token()
    );
    let (mut w, delegate) = World::scripted(10_000, 100, &config);
    w.client = World::client_with(None);
    let session = "d3111111-2222-4333-8444-555555555555";
    let hello = |from: &str| LdpMessageBody::Hello {
        delegate_id: from.into(),
        supported_modes: vec![PayloadMode::Text],
    };
    let propose = || LdpMessageBody::SessionPropose {
        config: json!({"payload_mode": "text", "ttl_secs": 600, "trust_domain": "test-domain"}),
    };
    let verifies = |a: &LdpEnvelope, secret: &str| {
        ldp_protocol::verify_envelope(a, secret, a.signature.as_deref().unwrap_or(""))
    };
    // The delegate's secret signs for no router now; an unlisted router
    // is refused.
    let e = w
        .send(&World::message_from(ROUTER, "", hello(ROUTER)))
        .unwrap_err();
    assert!(e.contains("401") && e.contains("bad_signature"), "{e}");
    let stranger = "ldp:delegate:stranger";
    let e = w
        .send(&World::signed(stranger, MINE, "", hello(stranger)))
        .unwrap_err();
    assert!(e.contains("401") && e.contains("unknown_router"), "{e}");
    // The router opens a session its domain pays; answers are signed to it.
    let a = w
        .send(&World::signed(ROUTER, MINE, "", hello(ROUTER)))
        .unwrap();
    assert!(verifies(&a, MINE) && !verifies(&a, SECRET), "{a:?}");
    let a = w
        .send(&World::signed(ROUTER, MINE, session, propose()))
        .unwrap();
    assert_eq!(kind(&a), "accept", "{a:?}");
    assert!(verifies(&a, MINE), "{a:?}");
    // Mallory, with her own secret: not as the router, not as herself.
    let e = w
        .send(&World::signed(ROUTER, HERS, session, close_body()))
        .unwrap_err();
    assert!(e.contains("401") && e.contains("bad_signature"), "{e}");
    let e = w
        .send(&World::signed(MALLORY, HERS, session, close_body()))
        .unwrap_err();
    assert!(e.contains("403") && e.contains("not_session_payer"), "{e}");
    // Nor does she open a session in the router's domain.
    let theirs = "d4111111-2222-4333-8444-555555555555";
    let a = w
        .send(&World::signed(MALLORY, HERS, theirs, propose()))
        .unwrap();
    assert_eq!(kind(&a), "reject", "{a:?}");
    assert!(verifies(&a, HERS), "{a:?}");
    // The router's task and its close go through.
    let task = LdpMessageBody::TaskSubmit {
        task_id: "t-1".into(),
        skill: "echo".into(),
        input: json!({"text": "t-1"}),
        contract: None,
    };
    let m = World::signed(ROUTER, MINE, session, task);
    let (client, url) = (w.client.clone(), w.url.clone());
    let p =
        w.rt.spawn(async move { client.send_message(&url, &m).await });
    assert!(delegate.wait_held("t-1", || p.is_finished()));
    assert!(delegate.answer("t-1", Answer::Result));
    let a = w.finish(p).unwrap();
    assert_eq!(kind(&a), "result", "{a:?}");
    assert!(verifies(&a, MINE), "{a:?}");
    assert_eq!(w.state(session), "ACTIVE");
    let a = w
        .send(&World::signed(ROUTER, MINE, session, close_body()))
        .unwrap();
    assert!(verifies(&a, MINE), "{a:?}");
    assert_eq!(w.state(session), "CLOSED");
}

/// A router's secret is its own: not the delegate's, not another
/// router's, at least 16 bytes; its ID an LDP delegate ID, listed once.
#[test]
fn a_routers_secret_must_be_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let config = |routers: &str| {
        format!(
            "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[ldp]\n[[ldp.delegates]]\nname = \"echo\"\n\
             url = \"http://127.0.0.1:9\"\nsecret = {SECRET:?}\ntrust_domain = \"d\"\ntenant = \"acme\"\n\
             cost_microcents = 1\n{routers}[[tenants]]\nname = \"acme\"\nroot = \"{}\"\n",
            seed(1).principal_id()
        )
    };
    let router = |id: &str, secret: &str| {
        format!("[[ldp.delegates.routers]]\nid = {id:?}\nsecret = {secret:?}\n")
    };
    let ok = config_check_in(tmp.path(), &config(&router(ROUTER, MINE)));
    assert!(ok.status.success(), "{}", stderr(&ok));
    for (routers, expect) in [
        (router(ROUTER, SECRET), "routers[0].secret"),
        (
            router(ROUTER, MINE) + &router(MALLORY, MINE),
            "routers[1].secret",
        ),
        (router(ROUTER, "short"), "at least 16 bytes"),
        (router("router", MINE), "routers[0].id"),
        (
            router(ROUTER, MINE) + &router(ROUTER, HERS),
            "routers[1].id",
        ),
    ] {
        let out = config_check_in(tmp.path(), &config(&routers));
        assert!(!out.status.success(), "{routers} was taken");
        assert!(stderr(&out).contains(expect), "{}", stderr(&out));
    }
}
