//! Rewriting the audit log without the gateway key (issue 30, finding 3),
//! against the real `dgw`: a sealed record edited with every seal after it
//! removed and the chain recomputed, a log cut back to an earlier seal, a
//! cleanly stopped gateway's log with its end cut, a log with every seal
//! removed. Each is named by `dgw audit verify` (exit 1). The anchor kept
//! in the state store: `tests/audit_anchor.rs`.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::audit::*;
use support::*;

/// (c) SIGTERM under load: every record written is sealed by the shutdown
/// seal; cutting the end off is then named.
#[test]
fn a_gateway_stopped_under_load_seals_its_last_records_and_a_cut_end_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    let token = site.token();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let (addr, token, stop) = (gw.addr.clone(), token.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = c * 1_000_000;
                while !stop.load(Ordering::Relaxed) && try_authorize(&addr, &token, i).is_some() {
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(gw.terminate().success());
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let all = lines(&site.log());
    assert!(all.len() > 50, "the load reached the log: {}", all.len());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    assert!(
        !stdout(&verified).contains("not sealed"),
        "a clean stop leaves nothing unsealed: {}",
        said(&verified)
    );
    let last = &all.last().unwrap().r;
    assert!(is_seal(last), "the log ends with a seal: {:?}", last.event);
    assert_eq!(last.event["seal"]["kind"], "shutdown", "{:?}", last.event);

    // Its end cut off (the shutdown seal and the records before it).
    let cut = all.len() - 3;
    rechain(&site.log(), all[..cut].to_vec());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("does not end with the gateway's shutdown seal"),
        "{}",
        said(&verified)
    );
}

/// (a) A sealed record edited, every seal after it removed, the chain
/// recomputed: no key needed, and still named.
#[test]
fn a_sealed_record_rewritten_with_the_seals_after_it_removed_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    let token = site.token();
    traffic(&gw, &token, 2);
    let early = wait_for_seal(&site.log(), 4);
    traffic(&gw, &token, 3);
    // Sealed within a second, then more on top.
    let sealed = wait_for_seal(&site.log(), early + 1);
    traffic(&gw, &token, 1);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let settle = early
        + all[early..]
            .iter()
            .position(|l| l.r.event["event"] == "settle")
            .unwrap();
    assert!(settle < sealed, "a seal covers it");
    let mut kept: Vec<Line> = all[..=settle].to_vec();
    kept[settle].r.event["chargedMicrocents"] = json!(1);
    kept.extend(all[settle + 1..].iter().filter(|l| !is_seal(&l.r)).cloned());
    let last = all.last().unwrap().r.clone();
    rechain(&site.log(), kept);

    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!(
            "follow the last seal (record {early}): the log does not end with the gateway's shutdown seal"
        )),
        "{}",
        said(&verified)
    );
    // Against the anchor the store holds (the shutdown seal): the seals
    // removed, the log is shorter than it.
    let verified = site.verify(&["--expect-head", &format!("{}:{}", last.seq, last.hash)]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!("before the anchor (record {})", last.seq)),
        "{}",
        said(&verified)
    );
}

/// (b) The log cut back to an earlier seal: sealed records dropped.
#[test]
fn a_log_cut_back_to_an_earlier_seal_is_named() {
    let site = Site::new("");
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 2);
    let to = wait_for_seal(&site.log(), 4);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let after_first_run = records(&site.log()).len();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let last = all.last().unwrap().r.clone();
    let anchor = format!("{}:{}", last.seq, last.hash);

    // Back to a seal made while the gateway ran.
    assert!(is_seal(&all[to].r));
    rechain(&site.log(), all[..=to].to_vec());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("does not end with the gateway's shutdown seal"),
        "{}",
        said(&verified)
    );
    let verified = site.verify(&["--expect-head", &anchor]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("before the anchor"),
        "{}",
        said(&verified)
    );

    // Back to the first run's shutdown seal: a log at rest there looks
    // whole on its own; the anchor names the cut.
    rechain(&site.log(), all[..after_first_run].to_vec());
    let verified = site.verify(&["--expect-head", &anchor]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!(
            "the log ends at record {}, before the anchor (record {})",
            after_first_run - 1,
            last.seq
        )),
        "{}",
        said(&verified)
    );
}

/// Every seal removed and the chain recomputed.
#[test]
fn a_log_with_every_seal_removed_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 3);
    assert!(gw.terminate().success());
    let kept: Vec<Line> = lines(&site.log())
        .into_iter()
        .filter(|l| !is_seal(&l.r))
        .collect();
    rechain(&site.log(), kept);
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("no record is sealed"),
        "{}",
        said(&verified)
    );
}

/// A principal ID may begin with `-` (base64url): `--gateway` takes it as
/// a value, and the log sealed by another key is named, not refused as a
/// usage error.
#[test]
fn a_gateway_id_beginning_with_a_dash_is_taken() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 1);
    assert!(gw.terminate().success());
    let dashed = (0..=255u8)
        .map(|n| seed(n).principal_id().to_string())
        .find(|p| p.starts_with('-'))
        .expect("a seed whose principal begins with -");
    let log = site.log();
    let verified = run(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--gateway",
        &dashed,
    ]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("is not the gateway's signature"),
        "{}",
        said(&verified)
    );
}
