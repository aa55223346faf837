//! `dgw keygen` and `dgw token …`, driven as a user would: the real binary,
//! real key files, exit codes and output checked.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;

use delegateos::{RevocationEntry, RevocationScope, Timestamp};
use support::*;

const CONTRACT: &str = "ct_a1b2c3d4e5f6";

struct Setup {
    _dir: tempfile::TempDir,
    root: String,
    root_id: String,
    alice: String,
    alice_id: String,
    bob: String,
    bob_id: String,
    carol: String,
    carol_id: String,
    dave_id: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = Vec::new();
    for (i, name) in ["root", "alice", "bob", "carol", "dave"].iter().enumerate() {
        let (path, key) = key_file(dir.path(), name, i as u8 + 1);
        keys.push((
            path.to_str().unwrap().to_owned(),
            key.principal_id().to_string(),
        ));
    }
    Setup {
        root: keys[0].0.clone(),
        root_id: keys[0].1.clone(),
        alice: keys[1].0.clone(),
        alice_id: keys[1].1.clone(),
        bob: keys[2].0.clone(),
        bob_id: keys[2].1.clone(),
        carol: keys[3].0.clone(),
        carol_id: keys[3].1.clone(),
        dave_id: keys[4].1.clone(),
        _dir: dir,
    }
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o).trim().to_owned()
}

fn issue(s: &Setup, extra: &[&str]) -> String {
    let mut args = vec![
        "token",
        "issue",
        "--key",
        &s.root,
        "--to",
        &s.alice_id,
        "--cap",
        "docs:read:/project/**",
        "--cap",
        "docs:write:/project/out/*",
        "--contract",
        CONTRACT,
        "--delegation",
        "del_000000000001",
        "--budget",
        "10000",
        "--max-depth",
        "3",
    ];
    args.extend_from_slice(extra);
    ok(&run(&args))
}

fn chain_of_three(s: &Setup) -> String {
    let t0 = issue(s, &[]);
    let t1 = ok(&run(&[
        "token",
        "attenuate",
        &t0,
        "--key",
        &s.alice,
        "--to",
        &s.bob_id,
        "--cap",
        "docs:read:/project/src/**",
        "--budget",
        "5000",
        "--delegation",
        "del_000000000002",
        "--contract",
        CONTRACT,
    ]));
    let t2 = ok(&run(&[
        "token",
        "attenuate",
        &t1,
        "--key",
        &s.bob,
        "--to",
        &s.carol_id,
        "--ttl",
        "30m",
        "--max-depth",
        "1",
        "--delegation",
        "del_000000000003",
        "--contract",
        CONTRACT,
    ]));
    ok(&run(&[
        "token",
        "attenuate",
        &t2,
        "--key",
        &s.carol,
        "--to",
        &s.dave_id,
        "--cap",
        "docs:read:/project/src/*",
        "--budget",
        "2000",
        "--delegation",
        "del_000000000004",
        "--contract",
        CONTRACT,
    ]))
}

fn verify(s: &Setup, token: &str, resource: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "token",
        "verify",
        token,
        "--root",
        &s.root_id,
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        resource,
        "--json",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn denial_type(o: &std::process::Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    let j = json(o);
    assert_eq!(j["valid"], false);
    assert!(!j["denial"]["detail"].as_str().unwrap().is_empty());
    j["denial"]["type"].as_str().unwrap().to_owned()
}

#[test]
fn keygen_writes_a_private_key_file_and_prints_the_principal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.json");
    let o = run(&["keygen", "--out", path.to_str().unwrap()]);
    let id = ok(&o);
    assert_eq!(id.len(), 43);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["principalId"], id);
    // Never overwrites silently.
    let again = run(&["keygen", "--out", path.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("k.json"));
    // A readable key file is refused by every command that reads keys.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(&[
        "token",
        "issue",
        "--key",
        path.to_str().unwrap(),
        "--to",
        &id,
        "--cap",
        "a:b:c",
        "--contract",
        CONTRACT,
        "--delegation",
        "del_000000000001",
        "--budget",
        "1",
        "--max-depth",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("chmod 600"), "{}", stderr(&o));
}

#[test]
fn issue_inspect_verify_a_root_token() {
    let s = setup();
    let token = issue(&s, &["--ttl", "2h"]);
    let inspect = run(&["token", "inspect", &token, "--json"]);
    let j = json(&inspect);
    assert_eq!(j["format"], "delegateos-sjt-v1");
    assert_eq!(j["authority"]["issuer"], s.root_id);
    assert_eq!(j["authority"]["maxBudgetMicrocents"], 10000);
    assert_eq!(j["revocationIds"].as_array().unwrap().len(), 1);
    let issued = Timestamp::parse(j["authority"]["issuedAt"].as_str().unwrap()).unwrap();
    let expires = Timestamp::parse(j["authority"]["expiresAt"].as_str().unwrap()).unwrap();
    assert_eq!((expires.instant() - issued.instant()).whole_seconds(), 7200);
    // Human form names the parts.
    let human = ok(&run(&["token", "inspect", &token]));
    assert!(
        human.contains("docs:read:/project/**") && human.contains("del_000000000001"),
        "{human}"
    );

    let o = verify(&s, &token, "/project/a.md", &[]);
    ok(&o);
    let j = json(&o);
    assert_eq!(j["valid"], true);
    assert_eq!(j["scope"]["remainingBudgetMicrocents"], 10000);
    assert_eq!(j["scope"]["delegationId"], "del_000000000001");
    assert_eq!(j["scope"]["chainDepth"], 0);
    let human = ok(&run(&[
        "token",
        "verify",
        &token,
        "--root",
        &s.root_id,
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        "/project/a.md",
    ]));
    assert!(human.starts_with("ALLOWED"), "{human}");
}

#[test]
fn a_chain_of_three_attenuations_from_the_command_line() {
    let s = setup();
    let token = chain_of_three(&s);
    let j = json(&run(&["token", "inspect", &token, "--json"]));
    assert_eq!(j["attenuations"].as_array().unwrap().len(), 3);
    let ids: Vec<String> = j["revocationIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 4);
    // Standard input, and the {"token","format"} object, both work.
    let o = run_with_stdin(
        &[
            "token",
            "verify",
            "-",
            "--root",
            &s.root_id,
            "--namespace",
            "docs",
            "--action",
            "read",
            "--resource",
            "/project/src/x.rs",
            "--spent",
            "500",
            "--json",
        ],
        &format!("{token}\n"),
    );
    let j = json(&o);
    assert_eq!(j["scope"]["chainDepth"], 3);
    assert_eq!(j["scope"]["remainingBudgetMicrocents"], 1500);
    assert_eq!(j["scope"]["maxChainDepth"], 1);
    assert_eq!(j["scope"]["delegationId"], "del_000000000004");
    let object = serde_json::json!({"token": token, "format": "delegateos-sjt-v1"}).to_string();
    assert_eq!(
        json(&verify(&s, &object, "/project/src/x.rs", &[]))["valid"],
        true
    );

    // Every denial type, through the command line.
    assert_eq!(
        denial_type(&verify(&s, "bm90IGEgdG9rZW4", "/project/src/x.rs", &[])),
        "malformed_token"
    );
    assert_eq!(
        denial_type(&verify(
            &s,
            &token,
            "/project/src/x.rs",
            &["--revoked", &ids[2]]
        )),
        "revoked"
    );
    let stranger = delegateos::Keypair::from_seed([42; 32])
        .principal_id()
        .to_string();
    let o = run(&[
        "token",
        "verify",
        &token,
        "--root",
        &stranger,
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        "/project/src/x.rs",
        "--json",
    ]);
    assert_eq!(denial_type(&o), "invalid_signature");
    assert_eq!(
        denial_type(&verify(
            &s,
            &token,
            "/project/src/x.rs",
            &["--now", "2099-01-01T00:00:00Z"]
        )),
        "expired"
    );
    assert_eq!(
        denial_type(&verify(
            &s,
            &token,
            "/project/src/x.rs",
            &["--spent", "2000"]
        )),
        "budget_exceeded"
    );
    assert_eq!(
        denial_type(&verify(&s, &token, "/project/src/deep/x.rs", &[])),
        "capability_not_granted"
    );
    assert_eq!(
        denial_type(&verify(&s, &token, "/project/src/../../etc/passwd", &[])),
        "capability_not_granted"
    );
}

/// Principal and revocation IDs are base64url and may start with `-`: the
/// command line must take them as values, not flags.
#[test]
fn ids_that_start_with_a_dash_are_values() {
    let s = setup();
    let token = issue(&s, &[]);
    // A principal ID that starts with '-' (found by trying seeds).
    let dashed = (0u8..=255)
        .map(|n| {
            delegateos::Keypair::from_seed([n; 32])
                .principal_id()
                .to_string()
        })
        .find(|id| id.starts_with('-'))
        .expect("some seed gives a leading dash");
    let o = verify(
        &s,
        &token,
        "/project/a.md",
        &["--revoked", "-not-a-real-id-000000000000000000000000000"],
    );
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&[
        "token",
        "verify",
        &token,
        "--root",
        &dashed,
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        "/project/a.md",
        "--json",
    ]);
    assert_eq!(denial_type(&o), "invalid_signature");
}

#[test]
fn attenuate_refuses_every_widening() {
    let s = setup();
    let token = issue(&s, &[]);
    let base = [
        "token",
        "attenuate",
        &token,
        "--to",
        &s.bob_id,
        "--delegation",
        "del_000000000002",
        "--contract",
        CONTRACT,
        "--json",
    ];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("attenuator mismatch", vec!["--key", &s.bob]),
        (
            "capability expansion",
            vec!["--key", &s.alice, "--cap", "docs:read:/**"],
        ),
        (
            "capability expansion",
            vec!["--key", &s.alice, "--cap", "docs:read:/projectSECRET/**"],
        ),
        (
            "capability expansion",
            vec!["--key", &s.alice, "--cap", "docs:delete:/project/**"],
        ),
        (
            "budget expansion",
            vec!["--key", &s.alice, "--budget", "10001"],
        ),
        ("expiry expansion", vec!["--key", &s.alice, "--ttl", "3h"]),
        (
            "expiry expansion",
            vec!["--key", &s.alice, "--expires", "2099-01-01T00:00:00Z"],
        ),
        (
            "chain depth expansion",
            vec!["--key", &s.alice, "--max-depth", "3"],
        ),
    ];
    for (detail, extra) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra);
        let o = run(&args);
        assert_eq!(denial_type(&o), "attenuation_violation", "{detail}");
        assert!(
            json(&o)["denial"]["detail"]
                .as_str()
                .unwrap()
                .starts_with(detail),
            "{}",
            stdout(&o)
        );
    }
    // Past the depth limit.
    let mut t = token;
    let keys = [&s.alice, &s.bob, &s.carol];
    let ids = [&s.bob_id, &s.carol_id, &s.dave_id];
    for i in 0..3 {
        t = ok(&run(&[
            "token",
            "attenuate",
            &t,
            "--key",
            keys[i],
            "--to",
            ids[i],
            "--delegation",
            &format!("del_00000000001{i}"),
            "--contract",
            CONTRACT,
        ]));
    }
    let (dave, _) = key_file(s._dir.path(), "dave", 5);
    let o = run(&[
        "token",
        "attenuate",
        &t,
        "--key",
        dave.to_str().unwrap(),
        "--to",
        &s.root_id,
        "--delegation",
        "del_000000000020",
        "--contract",
        CONTRACT,
        "--json",
    ]);
    assert_eq!(denial_type(&o), "attenuation_violation");
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    let s = setup();
    let token = issue(&s, &[]);
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "token",
            "verify",
            &token,
            "--root",
            "not-a-key",
            "--namespace",
            "docs",
            "--action",
            "read",
            "--resource",
            "x",
        ],
        vec![
            "token",
            "verify",
            &token,
            "--root",
            &s.root_id,
            "--namespace",
            "docs",
            "--action",
            "read",
            "--resource",
            "x",
            "--now",
            "tuesday",
        ],
        vec![
            "token",
            "verify",
            &token,
            "--namespace",
            "docs",
            "--action",
            "read",
            "--resource",
            "x",
        ],
        vec!["token", "inspect", "@@@"],
        vec![
            "token",
            "issue",
            "--key",
            &s.root,
            "--to",
            &s.alice_id,
            "--cap",
            "docs-read",
            "--contract",
            CONTRACT,
            "--delegation",
            "del_000000000001",
            "--budget",
            "1",
            "--max-depth",
            "1",
        ],
        vec![
            "token",
            "issue",
            "--key",
            &s.root,
            "--to",
            &s.alice_id,
            "--cap",
            "docs:read:*",
            "--contract",
            "ct_1",
            "--delegation",
            "del_000000000001",
            "--budget",
            "1",
            "--max-depth",
            "1",
        ],
        vec![
            "token",
            "issue",
            "--key",
            &s.root,
            "--to",
            &s.alice_id,
            "--cap",
            "docs:read:*",
            "--contract",
            CONTRACT,
            "--delegation",
            "del_000000000001",
            "--budget",
            "1",
            "--max-depth",
            "1",
            "--ttl",
            "soon",
        ],
        vec![
            "token",
            "issue",
            "--key",
            &s.root,
            "--to",
            &s.alice_id,
            "--cap",
            "docs:read:*",
            "--contract",
            CONTRACT,
            "--delegation",
            "del_000000000001",
            "--budget",
            "9007199254740993",
            "--max-depth",
            "1",
        ],
        vec![
            "token",
            "attenuate",
            &token,
            "--key",
            "/nonexistent/key.json",
            "--to",
            &s.bob_id,
            "--delegation",
            "del_000000000002",
            "--contract",
            CONTRACT,
        ],
        vec![
            "token",
            "attenuate",
            &token,
            "--key",
            &s.alice,
            "--to",
            &s.bob_id,
            "--delegation",
            "del_000000000002",
            "--contract",
            CONTRACT,
            "--ttl",
            "1m",
            "--expires",
            "2026-01-01T00:00:00Z",
        ],
    ];
    for args in cases {
        let o = run(&args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}\nstdout: {}\nstderr: {}",
            stdout(&o),
            stderr(&o)
        );
        assert!(!stderr(&o).trim().is_empty(), "{args:?} printed no message");
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn revocation_entries_round_trip_with_the_block_signer() {
    let s = setup();
    let token = chain_of_three(&s);
    let j = json(&run(&["token", "inspect", &token, "--json"]));
    let id = j["revocationIds"][1].as_str().unwrap();
    let alice = delegateos::Keypair::from_seed([2; 32]);
    let entry = RevocationEntry::sign(
        &alice,
        id,
        Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
        RevocationScope::Chain,
    )
    .unwrap();
    entry.verify().unwrap();
    assert_eq!(
        denial_type(&verify(
            &s,
            &token,
            "/project/src/x.rs",
            &["--revoked", &entry.revocation_id]
        )),
        "revoked"
    );
}

/// `dgw admin-token new` prints a secret and the config entry holding only
/// its SHA-256.
#[test]
fn admin_token_new_prints_a_secret_and_its_digest() {
    use sha2::Digest;
    let out = run(&["admin-token", "new", "--name", "ops"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    let secret = lines.next().unwrap();
    assert_eq!(secret.len(), 43, "256 bits of base64url: {secret}");
    let digest: String = sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let rest: Vec<&str> = lines.collect();
    assert_eq!(
        rest,
        [
            "[[admin.tokens]]",
            "name = \"ops\"",
            &format!("sha256 = \"{digest}\""),
        ]
    );
    let again = run(&["admin-token", "new", "--name", "ops"]);
    assert_ne!(stdout(&again).lines().next().unwrap(), secret);
    let bad = run(&["admin-token", "new", "--name", "a\"b"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `dgw config check` validates without starting anything.
#[test]
fn config_check_names_the_key_at_fault() {
    let ok = run(&[
        "config",
        "check",
        concat!(env!("CARGO_MANIFEST_DIR"), "/config/gateway.toml"),
    ]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("valid"), "{}", stdout(&ok));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "data_dir = \"d\"\nkey_file = \"k\"\n[server]\nhttp = \"x\"\n",
    )
    .unwrap();
    let out = run(&["config", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`server.http`"), "{}", stderr(&out));
    // A TLS file that cannot be read is caught too.
    let tls = dir.path().join("tls.toml");
    std::fs::write(
        &tls,
        "data_dir = \"d\"\nkey_file = \"k\"\n[server]\nhttp = \"127.0.0.1:0\"\n[server.tls]\ncert_file = \"/nonexistent.pem\"\nkey_file = \"/nonexistent.key\"\n",
    )
    .unwrap();
    let out = run(&["config", "check", tls.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nonexistent.pem"), "{}", stderr(&out));
}
