//! The audit log's anchor in the state store (issue 30, finding 3),
//! against the real `dgw`: a log that ends before the anchor a running
//! gateway holds is named; a gateway started on a log cut or rewritten
//! while it was down refuses to start and seals nothing over it (sled and
//! Redis); a gateway killed with SIGKILL and restarted seals what it left
//! with a recovery seal and verifies.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::json;
use support::audit::*;
use support::redis::RedisServer;
use support::*;

/// A running gateway's log cut before its anchor: `--gateway-url` asks
/// the gateway for the anchor (never opening its store) and names the cut;
/// the untouched log passes the same check.
#[test]
fn a_log_that_ends_before_the_anchor_is_named_from_the_running_gateway() {
    let site = Site::new("");
    let gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 3);
    let h = anchored_past(&gw, 5);
    let seq = h["anchor"]["seq"].as_u64().unwrap();
    assert_eq!(h["sealedRecords"], seq + 1, "{h}");
    let all = lines(&site.log());
    assert_eq!(all[seq as usize].r.hash, h["anchor"]["head"], "{h}");
    assert!(is_seal(&all[seq as usize].r));
    assert!(
        gw.metrics()
            .contains(&format!("dgw_audit_sealed_records {}", seq + 1)),
        "{}",
        gw.metrics()
    );
    let url = format!("http://{}/rpc", gw.addr);
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));

    rechain(&site.log(), all[..seq as usize - 2].to_vec());
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!("before the anchor (record {seq})")),
        "{}",
        said(&verified)
    );
    // Without an admin secret, the gateway does not say.
    let anonymous = dgw()
        .args([
            "audit",
            "verify",
            site.log().to_str().unwrap(),
            "--gateway",
            &site.gateway(),
            "--gateway-url",
            &url,
        ])
        .env_remove("DGW_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(anonymous.status.code(), Some(2), "{}", said(&anonymous));
    // An anchor that is not SEQ:HASH is a usage error, not a verdict.
    for bad in [
        "12",
        "x:y",
        &format!("12:{}", "A".repeat(64)),
        &format!("12:{}", "a".repeat(63)),
    ] {
        let refused = site.verify(&["--expect-head", bad]);
        assert_eq!(refused.status.code(), Some(2), "{bad}: {}", said(&refused));
        assert!(
            stderr(&refused).contains("is not SEQ:HASH"),
            "{}",
            said(&refused)
        );
    }
}

/// SIGKILL leaves records unsealed; the restart seals them with a
/// recovery seal, and the log verifies while it runs and after it stops.
#[test]
fn a_gateway_killed_and_restarted_seals_the_tail_and_verifies() {
    let site = Site::new("[audit]\nseal_interval = \"1h\"\n");
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 3);
    gw.kill();
    let killed = records(&site.log());
    assert!(
        !killed.is_empty() && !is_seal(killed.last().unwrap()),
        "unsealed at the kill"
    );
    let gw = Gateway::start(&site.config);
    let all = records(&site.log());
    let recovery = &all[killed.len() + 1];
    assert_eq!(all[killed.len()].event["event"], "recovered");
    assert_eq!(recovery.event["seal"]["kind"], "recovery", "{all:#?}");
    assert_eq!(recovery.event["seal"]["from"], 0);
    traffic(&gw, &token, 1);
    let url = format!("http://{}/rpc", gw.addr);
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    let mut gw = gw;
    assert!(gw.terminate().success());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
}

/// Cut or rewritten while dgw was down: it refuses to start, writes
/// nothing, and the log stays as found (evidence). Moved aside, a new log
/// starts with `--new-audit-log`, chained to the anchor.
fn refuses_a_log_tampered_while_down(site: &Site) {
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 3);
    let to = wait_for_seal(&site.log(), 6);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let last = all.last().unwrap().r.clone();

    // Cut back to a seal made while it ran.
    rechain(&site.log(), all[..=to].to_vec());
    let before = snapshot(&site.log());
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains(&format!(
            "the log ends at record {to}, before the anchor (record {})",
            last.seq
        )),
        "{}",
        said(&refused)
    );
    assert_eq!(snapshot(&site.log()), before, "nothing written");

    // Rewritten: the anchor's record is not what the store holds.
    let mut edited = all.clone();
    edited[1].r.event["edited"] = json!(true);
    rechain(&site.log(), edited);
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains(&format!("record {} is not the anchor", last.seq)),
        "{}",
        said(&refused)
    );

    // The way out: the log moved aside, a new one after the anchor.
    let aside = site.dir.path().join("audit.tampered");
    std::fs::rename(site.log(), &aside).unwrap();
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains("--new-audit-log"),
        "{}",
        said(&refused)
    );
    let mut gw = Gateway::start_args(&site.config, &["--new-audit-log"]);
    traffic(&gw, &token, 1);
    assert!(gw.terminate().success());
    let fresh = records(&site.log());
    assert_eq!(fresh[0].seq, last.seq + 1);
    assert_eq!(fresh[0].prev, last.hash);
    assert_eq!(fresh[0].event["event"], "new_log");
    let verified = site.verify(&["--expect-head", &format!("{}:{}", last.seq, last.hash)]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    // And a plain restart continues it.
    let mut gw = Gateway::start(&site.config);
    let stopped = gw.terminate();
    assert!(
        stopped.success(),
        "{stopped}: {}",
        std::fs::read_to_string(&gw.stderr_log).unwrap()
    );
}

#[test]
fn a_gateway_started_on_a_log_tampered_while_down_refuses_sled() {
    refuses_a_log_tampered_while_down(&Site::new(""));
}

#[test]
fn a_gateway_started_on_a_log_tampered_while_down_refuses_redis() {
    let redis = RedisServer::start();
    let site = Site::new(&format!(
        "[state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"dgw\"\n",
        redis.url()
    ));
    refuses_a_log_tampered_while_down(&site);
}
