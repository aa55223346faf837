//! A session's payer and budget: fixed at SESSION_PROPOSE (the router's
//! DCT or its paying trust domain), the session's own budget below the
//! payer's (the delegate's `session_budget_microcents`, or less if the
//! router asks), every task reserved at both (decision 114).

use super::*;

pub(super) fn text_proposal() -> Value {
    json!({"payload_mode": "text", "ttl_secs": 600, "trust_domain": "test-domain"})
}

pub(super) fn kind(a: &LdpEnvelope) -> &'static str {
    match &a.body {
        LdpMessageBody::TaskResult { .. } => "result",
        LdpMessageBody::TaskFailed { .. } => "failed",
        LdpMessageBody::TaskUpdate { .. } => "update",
        LdpMessageBody::SessionAccept { .. } => "accept",
        LdpMessageBody::SessionReject { .. } => "reject",
        _ => "other",
    }
}

/// The failure's or rejection's message, as the router reads it.
pub(super) fn why(a: &LdpEnvelope) -> String {
    match &a.body {
        LdpMessageBody::TaskFailed { error, .. } => format!("{} {}", error.code, error.message),
        LdpMessageBody::SessionReject { reason, error } => {
            format!(
                "{} {reason}",
                error.as_ref().map_or("", |e| e.code.as_str())
            )
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn a_session_spends_no_more_than_its_budget() {
    let w = World::with(10_000, 100, "session_budget_microcents = 250\n");
    let first = "a1111111-2222-4333-8444-555555555555";
    w.open(first);
    let kinds: Vec<&str> = (0..3)
        .map(|i| kind(&w.submit(first, &format!("t-{i}")).unwrap()))
        .collect();
    assert_eq!(kinds, ["result", "result", "failed"]);
    let failed = w.submit(first, "t-3").unwrap();
    assert!(why(&failed).contains("budget"), "{}", why(&failed));
    let record = w.gw().ok(
        "ldp/session",
        json!({"delegate": "echo", "session_id": first}),
    );
    assert_eq!(
        record["spending"],
        json!({"budget_microcents": 250, "spent_microcents": 200,
               "reserved_microcents": 0, "remaining_microcents": 50}),
        "{record}"
    );
    assert_eq!(record["payer"]["delegation_id"], json!(del(1).as_str()));

    // A router asking less than the delegate allows gets less.
    let second = "a2111111-2222-4333-8444-555555555555";
    let mut asked = text_proposal();
    asked["budget_microcents"] = json!(100);
    assert_eq!(kind(&w.propose(second, asked).unwrap()), "accept");
    assert_eq!(kind(&w.submit(second, "t-0").unwrap()), "result");
    assert_eq!(kind(&w.submit(second, "t-1").unwrap()), "failed");
    let record = w.gw().ok(
        "ldp/session",
        json!({"delegate": "echo", "session_id": second}),
    );
    assert_eq!(record["budget"]["budget_microcents"], 100, "{record}");

    // Each session's spend counts against the payer's DCT as well.
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 300"#),
        "{m}"
    );
}

/// 50 concurrent tasks on a session budget for 10, under a DCT that could
/// pay for all of them: exactly 10 pass.
#[test]
fn fifty_concurrent_tasks_on_a_session_budget_for_ten() {
    let w = World::with(100_000, 100, "session_budget_microcents = 1000\n");
    let session = "a3111111-2222-4333-8444-555555555555";
    w.open(session);
    assert_eq!(w.submit_at_once(session, 50), (10, 40));
    let record = w.gw().ok(
        "ldp/session",
        json!({"delegate": "echo", "session_id": session}),
    );
    assert_eq!(record["spending"]["spent_microcents"], 1000, "{record}");
    assert_eq!(record["spending"]["reserved_microcents"], 0, "{record}");
}

/// A session is paid by what opened it: a DCT of another delegation, no
/// DCT, or a DCT in a domain-paid session pays none of its tasks; a DCT
/// that grants no skill of the delegate, or from an unknown root, opens
/// no session.
#[test]
fn the_session_binds_its_payer() {
    let mut w = World::with(
        10_000,
        100,
        "[[ldp.domains]]\nname = \"test-domain\"\ntenant = \"acme\"\nbudget_microcents = 300\n",
    );
    let session = "a4111111-2222-4333-8444-555555555555";
    w.open(session);
    let paid_by_mine = w.client.clone();
    let other = |caps: &[&str], root: u8, delegation: u8| {
        let token = root_token_for(&seed(root), &seed(3), caps, 10_000, 3600, del(delegation));
        World::client_with(Some(&format!("DCT {}", token.encode())))
    };
    // Another delegation of the same tenant: refused, nothing charged.
    w.client = other(&["ldp:echo:echo"], 1, 2);
    let a = w.submit(session, "t-0").unwrap();
    assert_eq!(kind(&a), "failed");
    assert!(why(&a).contains("paid by delegation"), "{}", why(&a));
    // No DCT at all.
    w.client = World::client_with(None);
    let e = w.submit(session, "t-1").unwrap_err();
    assert!(
        e.contains("401") && e.contains("credential_required"),
        "{e}"
    );
    // The DCT that opened it still pays.
    w.client = paid_by_mine.clone();
    assert_eq!(kind(&w.submit(session, "t-2").unwrap()), "result");

    // A DCT granting no skill of this delegate, or of an unknown root:
    // SESSION_REJECT, the delegate never hears of the session.
    for (client, id, expect) in [
        (
            other(&["ldp:summarize:echo"], 1, 3),
            "a5111111-2222-4333-8444-555555555555",
            "grants no skill",
        ),
        (
            other(&["ldp:echo:echo"], 9, 4),
            "a5211111-2222-4333-8444-555555555555",
            "is not a trusted root",
        ),
    ] {
        w.client = client;
        let a = w.propose(id, text_proposal()).unwrap();
        assert_eq!(kind(&a), "reject", "{a:?}");
        assert!(why(&a).contains(expect), "{}", why(&a));
        let r = w
            .gw()
            .call("ldp/session", json!({"delegate": "echo", "session_id": id}));
        assert_eq!(r["error"]["data"]["type"], "invalid_params", "{r}");
    }

    // A session its trust domain pays takes no DCT.
    w.client = World::client_with(None);
    let domain_paid = "a6111111-2222-4333-8444-555555555555";
    w.open(domain_paid);
    assert_eq!(kind(&w.submit(domain_paid, "t-0").unwrap()), "result");
    w.client = paid_by_mine;
    let a = w.submit(domain_paid, "t-1").unwrap();
    assert_eq!(kind(&a), "failed");
    assert!(why(&a).contains("trust domain"), "{}", why(&a));
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 200"#),
        "{m}"
    );
}

/// A task ID names one paid task per session: submitting it again is
/// refused (its contract and attestation stay the first task's), and a
/// session's record stays the same size however many tasks it ran.
#[test]
fn a_task_id_pays_once_per_session() {
    let w = World::new(10_000, 100);
    let session = "a7111111-2222-4333-8444-555555555555";
    w.open(session);
    assert_eq!(kind(&w.submit(session, "t-1").unwrap()), "result");
    let params = json!({"delegate": "echo", "session_id": session, "task_id": "t-1"});
    let first = w.gw().ok("ldp/task", params.clone());
    let e = w.submit(session, "t-1").unwrap_err();
    assert!(
        e.contains("409") && e.contains("submitted in this session before"),
        "{e}"
    );
    assert_eq!(w.gw().ok("ldp/task", params), first);
    let size = |w: &World| {
        w.gw()
            .ok(
                "ldp/session",
                json!({"delegate": "echo", "session_id": session}),
            )
            .to_string()
            .len()
    };
    let before = size(&w);
    for i in 2..12 {
        assert_eq!(
            kind(&w.submit(session, &format!("t-{i}")).unwrap()),
            "result"
        );
    }
    // Only the task count's digits may grow.
    assert!(size(&w) <= before + 1, "{} > {before}", size(&w));
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 1100"#),
        "{m}"
    );
}

/// The reference client's delegation contract caps its own task: a task
/// costing more than its `max_cost_usd` is refused before anything is
/// reserved; within the cap it runs.
#[test]
fn a_routers_contract_caps_its_task() {
    use ldp_protocol::types::{BudgetPolicy, DelegationContract};
    let w = World::new(10_000, 100);
    let session = "a8111111-2222-4333-8444-555555555555";
    w.open(session);
    let capped = |task: &str, usd: f64| {
        let contract = DelegationContract::new("echo it", vec![]).with_budget(BudgetPolicy {
            max_tokens: None,
            max_cost_usd: Some(usd),
        });
        w.send(&w.message(
            session,
            LdpMessageBody::TaskSubmit {
                task_id: task.into(),
                skill: "echo".into(),
                input: json!({"text": task}),
                contract: Some(contract),
            },
        ))
        .unwrap()
    };
    // 100 microcents is 0.000001 USD.
    let a = capped("t-1", 0.000_000_5);
    assert_eq!(kind(&a), "failed");
    assert!(why(&a).contains("max_cost_usd"), "{}", why(&a));
    assert_eq!(kind(&capped("t-2", 0.000_001)), "result");
    let m = w.gw().metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 100"#),
        "{m}"
    );
}
