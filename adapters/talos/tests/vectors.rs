//! Every file in the Talos reference SDK's `test_vectors/` (copied to
//! `tests/interop/`) is a test here; a file this list does not know fails
//! the run, so new vectors cannot be skipped silently.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use talos::capability::Capability;
use talos::frame::{self, Session};
use talos::keys::{parse_public_key, Issuers};
use talos::{authorize, Context, TalosDenial, TalosRequest};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/test_vectors")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(dir().join(rel)).unwrap()
}

fn json(rel: &str) -> Value {
    serde_json::from_str(&read(rel)).unwrap()
}

/// The vectors' issuer: seed 0, per meta.json.
fn issuers() -> Issuers {
    let meta = json("meta.json");
    let mut i = Issuers::new();
    i.insert(
        meta["peer_id"].as_str().unwrap(),
        parse_public_key(meta["public_key_hex"].as_str().unwrap()).unwrap(),
    );
    i
}

/// The vectors were made at Unix 1700000000-1700000110.
const NOW: i64 = 1_700_000_100;

fn ctx<'a>(issuers: &'a Issuers, revoked: &'a dyn Fn(&str) -> bool) -> Context<'a> {
    Context {
        issuers,
        now: NOW,
        revoked,
        known_tool: &|t| t == "weather",
    }
}

fn weather() -> TalosRequest {
    TalosRequest {
        tool: "weather".into(),
        method: "get".into(),
        resources: vec![],
    }
}

fn check_positive() {
    let issuers = issuers();
    let cap = Capability::from_text(&read("positive/capability.json")).unwrap();
    // Hash and canonical bytes as published.
    assert_eq!(
        cap.capability_hash(),
        read("positive/capability_hash.hex").trim()
    );
    assert_eq!(
        talos::canonical::jcs(&cap.to_value()),
        read("positive/capability_token_canonical.bytes").as_bytes()
    );
    assert_eq!(
        talos::canonical::jcs(&cap.signed_content()),
        read("positive/capability_content_canonical.bytes").as_bytes()
    );
    let sig = hex::decode(read("positive/capability_signature.hex").trim()).unwrap();
    assert_eq!(
        delegateos::base64url::encode(&sig),
        cap.to_value()["sig"].as_str().unwrap()
    );
    let never = |_: &str| false;
    let a = authorize(&cap, &weather(), &ctx(&issuers, &never)).unwrap();
    assert_eq!(a.scope.tool, "weather");
    // The request hash.
    let request = json("positive/mcp_request.json");
    assert_eq!(
        talos::canonical::jcs(&request),
        read("positive/mcp_request_canonical.bytes").as_bytes()
    );
    assert_eq!(
        talos::envelope::request_hash(request.as_object().unwrap()),
        read("positive/request_hash.hex").trim()
    );
    // Frames: signed by the peer, bound to the capability and the request.
    for f in [
        "positive/envelope_tool_call.json",
        "positive/mcp_message_frame.json",
    ] {
        let frame = frame::verify(&json(f)).unwrap();
        assert_eq!(
            frame.request_hash.as_deref(),
            Some(read("positive/request_hash.hex").trim())
        );
        assert_eq!(
            frame.capability_hash.as_deref(),
            Some(cap.capability_hash().as_str())
        );
        let mut session = Session::new();
        session.accept(&json(f), &ctx(&issuers, &never)).unwrap();
    }
    let response = frame::verify(&json("positive/mcp_response_frame.json")).unwrap();
    assert_eq!(response.kind, "MCP_RESPONSE");
    // A byte changed anywhere breaks the frame's signature.
    let mut tampered = json("positive/mcp_message_frame.json");
    tampered["correlation_id"] = json!("corr-uuid-100");
    assert_eq!(
        frame::verify(&tampered).unwrap_err().reason,
        TalosDenial::SignatureInvalid
    );
}

fn check_negative(name: &str) {
    let v = json(&format!("negative/{name}"));
    let expected = v["expected_denial"].as_str().unwrap();
    let issuers = issuers();
    let denial = match v["vector_type"].as_str().unwrap() {
        "capability" | "object" => {
            let revoked_hashes: Vec<String> = if name == "capability_revoked.json" {
                // The vector is revoked by whoever checks it: by its hash.
                vec![Capability::from_value(&v["input"])
                    .unwrap()
                    .capability_hash()]
            } else {
                vec![]
            };
            let revoked = move |n: &str| revoked_hashes.iter().any(|h| h == n);
            Capability::from_value(&v["input"])
                .and_then(|cap| authorize(&cap, &weather(), &ctx(&issuers, &revoked)).map(|_| ()))
                .unwrap_err()
        }
        "raw_string" => Capability::from_text(v["input"].as_str().unwrap()).unwrap_err(),
        "frame" => frame::verify(&v["input"]).unwrap_err(),
        other => panic!("vector type {other}"),
    };
    assert_eq!(denial.reason.as_str(), expected, "{name}: {denial}");
}

fn check_replay() {
    let v = json("replay/duplicate.json");
    let issuers = issuers();
    let never = |_: &str| false;
    let mut session = Session::new();
    let frames = v["input"].as_array().unwrap();
    session.accept(&frames[0], &ctx(&issuers, &never)).unwrap();
    let e = session
        .accept(&frames[1], &ctx(&issuers, &never))
        .unwrap_err();
    assert_eq!(e.reason.as_str(), v["expected_denial"].as_str().unwrap());
}

fn check_session(name: &str) {
    let v = json(&format!("session/{name}"));
    let issuers = issuers();
    let never = |_: &str| false;
    let mut session = Session::new();
    match name {
        "cache_pair.json" => {
            assert_eq!(v["expected_result"], "ACCEPT");
            for f in v["inputs"].as_array().unwrap() {
                session.accept(f, &ctx(&issuers, &never)).unwrap();
            }
        }
        "followup_without_cache.json" => {
            let e = session
                .accept(&v["input"], &ctx(&issuers, &never))
                .unwrap_err();
            assert_eq!(e.reason.as_str(), v["expected_denial"].as_str().unwrap());
        }
        other => panic!("unknown session vector {other}"),
    }
}

fn check_py_generated() {
    let v = json("py_generated/interop.json");
    let cap = Capability::from_value(&v["signed_capability"]).unwrap();
    let key = parse_public_key(v["public_key"].as_str().unwrap()).unwrap();
    assert!(cap.signature_valid(&key));
    // The Python reference hashes the signed content; the TS SDK the whole token.
    assert_eq!(cap.content_hash(), v["capability_hash"].as_str().unwrap());
    assert!(cap.has_hash(v["capability_hash"].as_str().unwrap()));
    for (field, hash) in [
        ("mcp_request", "request_hash"),
        ("mcp_response", "response_hash"),
    ] {
        assert_eq!(
            talos::canonical::sha256_hex(&v[field]),
            v[hash].as_str().unwrap(),
            "{field}"
        );
    }
    let b = &v["base64url_test"];
    assert_eq!(
        delegateos::base64url::encode(&hex::decode(b["hex"].as_str().unwrap()).unwrap()),
        b["base64url"].as_str().unwrap()
    );
    let c = &v["canonical_json_test"];
    assert_eq!(
        String::from_utf8(talos::canonical::jcs(&c["object"])).unwrap(),
        c["canonical"].as_str().unwrap()
    );
    // Its scope, `tools/filesystem/read` with `paths`, reads as tool
    // filesystem, method read, under /data.
    let scope = cap.scope.clone().unwrap();
    assert!(scope.covers("filesystem", "read", &["/data/test.txt".into()]));
    assert!(!scope.covers("filesystem", "read", &["/etc/passwd".into()]));
}

fn check_ts_generated() {
    let v = json("ts_generated/interop.json");
    let cap = Capability::from_value(&v["capability"]).unwrap();
    let key = parse_public_key(v["public_key_hex"].as_str().unwrap()).unwrap();
    assert!(cap.signature_valid(&key));
    // Its scope `read:files` is neither grammar: it grants nothing.
    assert!(cap.scope.is_err());
    // Its frame names a peer with no key in its ID and placeholder hashes:
    // refused.
    let e = frame::verify(&v["frame"]).unwrap_err();
    assert_eq!(e.reason, TalosDenial::SignatureInvalid);
}

#[test]
fn every_vector_file() {
    let mut files: Vec<String> = Vec::new();
    for entry in walk(&dir()) {
        files.push(entry.strip_prefix(dir()).unwrap().display().to_string());
    }
    files.sort();
    let mut positive_done = false;
    for f in &files {
        match f.as_str() {
            "meta.json" => {}
            p if p.starts_with("positive/") => {
                if !positive_done {
                    check_positive();
                    positive_done = true;
                }
            }
            p if p.starts_with("negative/") => check_negative(&p["negative/".len()..]),
            "replay/duplicate.json" => check_replay(),
            p if p.starts_with("session/") => check_session(&p["session/".len()..]),
            "py_generated/interop.json" => check_py_generated(),
            "ts_generated/interop.json" => check_ts_generated(),
            other => panic!("a vector file no test reads: {other}"),
        }
    }
    assert_eq!(files.len(), 23, "{files:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
