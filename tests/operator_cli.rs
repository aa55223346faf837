//! Issue 37: revocation and issuance for operators, with the real binary.
//! `dgw token revoke` signs an entry offline, `dgw revoke` submits it (or,
//! as an administrator, revokes a token's block without its signer's key),
//! and `dgw token issue --via` / `dgw/tokens/issue` issue a DCT online by
//! attenuating the tenant's issuing delegation with the gateway's key.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};
use support::mcp::{secret_file, Files, McpHttp};
use support::*;

const ADMIN: &str = "operator-cli-admin-secret-0123456789";

fn admin_toml() -> String {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(ADMIN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

/// A gateway whose tenant `acme` (root seed 1) gave the gateway (key seed
/// 9) an issuing delegation for `docs:read:<files>/**`, 100,000 microcents,
/// an hour, depth 3; with the filesystem MCP server behind it and an admin.
struct Site {
    files: Files,
    root: delegateos::Keypair,
    root_key: PathBuf,
    gw: Gateway,
    admin_file: PathBuf,
}

impl Site {
    fn new() -> Site {
        Self::with_issuing(|files, root, gateway| {
            let cap = format!("docs:read:{}/**", files.root.display());
            root_token_for(root, gateway, &[cap.as_str()], 100_000, 3600, del(1)).encode()
        })
    }

    fn with_issuing(
        issuing: impl FnOnce(&Files, &delegateos::Keypair, &delegateos::Keypair) -> String,
    ) -> Site {
        let files = Files::new();
        let dir = files.dir.clone();
        let (root_key, root) = key_file(&dir, "root", 1);
        let (gateway_key, gateway) = key_file(&dir, "gateway", 9);
        let delegation = dir.join("acme-issuing.dct");
        std::fs::write(&delegation, issuing(&files, &root, &gateway)).unwrap();
        let config = dir.join("gateway.toml");
        std::fs::write(
            &config,
            format!(
                "data_dir = {data:?}\nkey_file = {gateway_key:?}\n[server]\nhttp = \"127.0.0.1:0\"\ngrpc = \"127.0.0.1:0\"\n\
                 [mcp]\nanonymous_sessions = true\n{admin}\n\
                 [[tenants]]\nname = \"acme\"\nroot = \"{root}\"\nissuing_delegation_file = {delegation:?}\n{upstream}",
                data = dir.join("data"),
                admin = admin_toml(),
                root = root.principal_id(),
                upstream = files.upstream_toml(),
            ),
        )
        .unwrap();
        let gw = Gateway::start(&config);
        let admin_file = secret_file(&dir, "admin.secret", ADMIN, 0o600);
        Site {
            files,
            root,
            root_key,
            gw,
            admin_file,
        }
    }

    fn rpc(&self) -> String {
        format!("http://{}/rpc", self.gw.addr)
    }

    fn cap(&self) -> String {
        format!("docs:read:{}/**", self.files.root.display())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.files.dir.join(name)
    }

    /// `dgw token issue --via` with `args` added, as the admin.
    fn issue_via(&self, args: &[&str]) -> Output {
        let rpc = self.rpc();
        let admin = self.admin_file.to_str().unwrap().to_owned();
        let mut all = vec![
            "token",
            "issue",
            "--via",
            rpc.as_str(),
            "--admin-token-file",
            admin.as_str(),
            "--tenant",
            "acme",
        ];
        all.extend_from_slice(args);
        run(&all)
    }

    fn authorize(&self, token: &str) -> Value {
        self.gw.call(
            "delegateos/authorize",
            json!({"dct": token, "namespace": "docs", "action": "read",
                   "resource": self.files.path("a.txt"), "costMicrocents": 10}),
        )
    }
}

fn principal(n: u8) -> String {
    seed(n).principal_id().to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn a_token_revoked_from_the_cli_is_denied_on_the_next_call() {
    let site = Site::new();
    let token = root_token(&site.root, &seed(2), &[site.cap().as_str()], 1000, 600).encode();
    assert_eq!(site.authorize(&token)["result"]["allowed"], true);

    // Signed offline with the root key: block 0 by default.
    let out = run(&[
        "token",
        "revoke",
        &token,
        "--key",
        site.root_key.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = json(&out);
    let ids = delegateos::Dct::decode(&token).unwrap().revocation_ids();
    assert_eq!(entry["revocationId"], ids[0]);
    assert_eq!(entry["revokedBy"], site.root.principal_id().to_string());
    let entry_file = write(&site.files.dir, "entry.json", &stdout(&out));

    // A tenant root's entry needs no admin secret.
    let out = run(&["revoke", &entry_file, "--gateway", &site.rpc()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["newlyRecorded"], true);
    let denied = site.authorize(&token);
    assert_eq!(denied["error"]["data"]["type"], "revoked", "{denied}");
}

#[test]
fn an_admin_revokes_a_token_without_its_signers_key() {
    let site = Site::new();
    let token = root_token(&site.root, &seed(2), &[site.cap().as_str()], 1000, 600).encode();
    assert_eq!(site.authorize(&token)["result"]["allowed"], true);

    // Without the admin secret: refused, nothing revoked.
    let out = run(&["revoke", "--token", &token, "--gateway", &site.rpc()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["data"]["type"], "admin_required");
    assert!(stderr(&out).contains("admin_required"), "{}", stderr(&out));
    assert_eq!(site.authorize(&token)["result"]["allowed"], true);

    // The secret from the environment, as every admin command takes it.
    let out = dgw()
        .args(["revoke", "--token", &token, "--gateway", &site.rpc()])
        .env("DGW_ADMIN_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(site.authorize(&token)["error"]["data"]["type"], "revoked");
}

#[test]
fn revocation_entries_by_the_wrong_key_revoke_nothing() {
    let site = Site::new();
    let dir = site.files.dir.clone();
    let token = root_token(&site.root, &seed(2), &[site.cap().as_str()], 1000, 600).encode();
    let (stranger_key, stranger) = key_file(&dir, "stranger", 7);

    // The CLI will not sign an entry that revokes nothing.
    let out = run(&[
        "token",
        "revoke",
        &token,
        "--key",
        stranger_key.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("signed no block"), "{}", stderr(&out));
    let out = run(&[
        "token",
        "revoke",
        &token,
        "--key",
        stranger_key.to_str().unwrap(),
        "--block",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("only its signer"), "{}", stderr(&out));
    let out = run(&[
        "token",
        "revoke",
        &token,
        "--key",
        site.root_key.to_str().unwrap(),
        "--block",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("1 block(s)"), "{}", stderr(&out));

    // Signed by hand with the wrong key and submitted: untrusted_revoker,
    // and the token still works.
    let ids = delegateos::Dct::decode(&token).unwrap().revocation_ids();
    let forged = delegateos::RevocationEntry::sign(
        &stranger,
        &ids[0],
        at(0),
        delegateos::RevocationScope::Block,
    )
    .unwrap();
    let file = write(&dir, "forged.json", &json!(forged).to_string());
    let out = run(&["revoke", &file, "--gateway", &site.rpc()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["data"]["type"], "untrusted_revoker");
    // A tampered signature is refused as invalid.
    let mut bad = json!(forged);
    bad["revokedBy"] = json!(site.root.principal_id().to_string());
    let file = write(&dir, "tampered.json", &bad.to_string());
    let out = run(&["revoke", &file, "--gateway", &site.rpc()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["data"]["type"], "invalid_revocation");
    // Not an entry at all: a usage error, nothing sent.
    let file = write(&dir, "junk.json", "{\"revocationId\": 1}");
    let out = run(&["revoke", &file, "--gateway", &site.rpc()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a revocation entry"));
    assert_eq!(site.authorize(&token)["result"]["allowed"], true);
}

#[test]
fn a_token_issued_online_works_on_json_rpc_and_mcp() {
    let site = Site::new();
    let out = site.issue_via(&[
        "--to",
        &principal(2),
        "--cap",
        &site.cap(),
        "--budget",
        "500",
        "--ttl",
        "10m",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let token = stdout(&out).trim().to_owned();
    let dct = delegateos::Dct::decode(&token).unwrap();
    // An attenuation of the issuing delegation, signed by the gateway.
    let t = dct.token();
    assert_eq!(t.attenuations.len(), 1);
    assert_eq!(
        t.attenuations[0].attenuator.to_string(),
        delegateos::Keypair::from_seed([9; 32])
            .principal_id()
            .to_string()
    );
    assert_eq!(t.attenuations[0].delegatee.to_string(), principal(2));

    let a = site.authorize(&token);
    assert_eq!(a["result"]["allowed"], true, "{a}");
    assert_eq!(a["result"]["tenant"], "acme");

    let mut mcp = McpHttp::connect(&site.gw.addr, Some(&token));
    let answer = mcp.call(
        "read_text_file",
        json!({"path": site.files.path("a.txt")}),
        None,
    );
    assert_eq!(
        support::mcp::text_of(&answer).trim(),
        "hello from a",
        "{answer}"
    );
    let denied = mcp.call("read_text_file", json!({"path": "/etc/passwd"}), None);
    assert_eq!(support::mcp::denial_type(&denied), "capability_not_granted");

    // Audited: who issued what, in the tamper-evident log.
    let mut found = false;
    for _ in 0..100 {
        let out = run(&["audit", "export", site.path("data/audit").to_str().unwrap()]);
        if stdout(&out).contains("\"token_issued\"") {
            let line = stdout(&out)
                .lines()
                .find(|l| l.contains("\"token_issued\""))
                .unwrap()
                .to_owned();
            let record: Value = serde_json::from_str(&line).unwrap();
            let event = &record["event"];
            assert_eq!(event["admin"], "token:ops", "{record}");
            assert_eq!(event["tenant"], "acme");
            assert_eq!(event["budgetMicrocents"], 500);
            assert!(!line.contains(ADMIN));
            found = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(found, "no token_issued record in the audit log");
}

#[test]
fn online_issuance_never_widens_the_issuing_delegation() {
    let site = Site::new();
    let to = principal(2);
    let wider: &[(&str, Vec<String>)] = &[
        (
            "a capability outside it",
            vec![
                "--cap".into(),
                "docs:write:/**".into(),
                "--budget".into(),
                "10".into(),
            ],
        ),
        (
            "a larger budget",
            vec![
                "--cap".into(),
                site.cap(),
                "--budget".into(),
                "100001".into(),
            ],
        ),
        (
            "a later expiry",
            vec![
                "--cap".into(),
                site.cap(),
                "--budget".into(),
                "10".into(),
                "--ttl".into(),
                "3h".into(),
            ],
        ),
        (
            "a deeper chain",
            vec![
                "--cap".into(),
                site.cap(),
                "--budget".into(),
                "10".into(),
                "--max-depth".into(),
                "9".into(),
            ],
        ),
    ];
    for (what, args) in wider {
        let mut all = vec!["--to", to.as_str()];
        all.extend(args.iter().map(String::as_str));
        let out = site.issue_via(&all);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
        assert_eq!(
            json(&out)["data"]["type"],
            "attenuation_violation",
            "{what}"
        );
    }
    // An unknown tenant has no issuing delegation.
    let out = run(&[
        "token",
        "issue",
        "--via",
        &site.rpc(),
        "--admin-token-file",
        site.admin_file.to_str().unwrap(),
        "--tenant",
        "other",
        "--to",
        &to,
        "--cap",
        &site.cap(),
        "--budget",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["code"], -32004);
}

#[test]
fn online_issuance_needs_an_admin_and_well_formed_params() {
    let site = Site::new();
    let params = json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()],
                        "budgetMicrocents": 10});
    // Loopback without a secret: not enough to create authority.
    let e = site.gw.err("dgw/tokens/issue", params.clone());
    assert_eq!(e["data"]["type"], "admin_required", "{e}");
    // A wrong secret: 401.
    let (status, answer) = site.gw.call_as(
        "Bearer not-the-secret-at-all-000000",
        "dgw/tokens/issue",
        params.clone(),
    );
    assert_eq!(status, 401, "{answer}");
    // A DCT holder is no admin either.
    let holder = root_token(&site.root, &seed(2), &[site.cap().as_str()], 1000, 600).encode();
    let (_, answer) = site
        .gw
        .call_as(&format!("DCT {holder}"), "dgw/tokens/issue", params.clone());
    assert_eq!(
        answer["error"]["data"]["type"], "admin_required",
        "{answer}"
    );

    let bearer = format!("Bearer {ADMIN}");
    let (_, ok) = site.gw.call_as(&bearer, "dgw/tokens/issue", params.clone());
    assert!(ok["result"]["token"].is_string(), "{ok}");
    assert_eq!(ok["result"]["revocationIds"].as_array().unwrap().len(), 2);

    let malformed = [
        json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()], "budgetMicrocents": "10"}),
        json!({"tenant": "acme", "to": "not a principal", "capabilities": [site.cap()], "budgetMicrocents": 10}),
        json!({"tenant": "acme", "to": principal(2), "capabilities": [], "budgetMicrocents": 10}),
        json!({"tenant": "acme", "to": principal(2), "capabilities": ["docs"], "budgetMicrocents": 10}),
        json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()], "budgetMicrocents": 10, "root": "x"}),
        json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()], "budgetMicrocents": 10,
               "expiresAt": "2020-01-01T00:00:00Z"}),
        json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()], "budgetMicrocents": 10,
               "delegationId": "del_zz"}),
        json!([1, 2]),
    ];
    for p in malformed {
        let (_, answer) = site.gw.call_as(&bearer, "dgw/tokens/issue", p.clone());
        assert_eq!(answer["error"]["code"], -32602, "{p}: {answer}");
    }
}

#[test]
fn a_revoked_issuing_delegation_issues_nothing() {
    let site = Site::new();
    let issuing = std::fs::read_to_string(site.path("acme-issuing.dct")).unwrap();
    let out = run(&[
        "token",
        "revoke",
        &issuing,
        "--key",
        site.root_key.to_str().unwrap(),
    ]);
    let entry = write(&site.files.dir, "issuing-entry.json", &stdout(&out));
    assert!(run(&["revoke", &entry, "--gateway", &site.rpc()])
        .status
        .success());
    let out = site.issue_via(&[
        "--to",
        &principal(2),
        "--cap",
        &site.cap(),
        "--budget",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["data"]["type"], "issuing_delegation_invalid");
}

#[test]
fn an_issuing_delegation_not_held_by_the_gateway_is_refused_at_start() {
    let files = Files::new();
    let dir = files.dir.clone();
    let (_, root) = key_file(&dir, "root", 1);
    // Issued to someone else than the gateway.
    let delegation = dir.join("wrong.dct");
    std::fs::write(
        &delegation,
        root_token(&root, &seed(2), &["docs:read:/**"], 10, 600).encode(),
    )
    .unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\nkey_file = {:?}\n[server]\nhttp = \"127.0.0.1:0\"\n[[tenants]]\nname = \"acme\"\nroot = \"{}\"\nissuing_delegation_file = {delegation:?}\n",
            dir.join("data"),
            dir.join("data/gateway.key"),
            root.principal_id()
        ),
    )
    .unwrap();
    let out = run(&["serve", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("tenants[0].issuing_delegation_file"), "{err}");
    assert!(err.contains("not by this gateway's key"), "{err}");
}

#[test]
fn a_holder_reads_its_own_budget_when_admin_tokens_exist() {
    let site = Site::new();
    let token = root_token_for(
        &site.root,
        &seed(2),
        &[site.cap().as_str()],
        1000,
        600,
        del(4),
    )
    .encode();
    assert_eq!(site.authorize(&token)["result"]["allowed"], true);
    let other = root_token_for(
        &site.root,
        &seed(3),
        &[site.cap().as_str()],
        1000,
        600,
        del(5),
    )
    .encode();
    let params = json!({"delegationId": del(4)});
    // No credential: admin_required (loopback alone reads nothing once
    // admin tokens exist).
    assert_eq!(
        site.gw.err("delegateos/budget", params.clone())["data"]["type"],
        "admin_required"
    );
    // Its own DCT, in the header as the README shows it, or in the params.
    let (_, own) = site
        .gw
        .call_as(&format!("DCT {token}"), "delegateos/budget", params.clone());
    assert_eq!(
        own["result"]["chains"][0][0]["reservedMicrocents"], 10,
        "{own}"
    );
    let own = site.gw.ok(
        "delegateos/budget",
        json!({"delegationId": del(4), "dct": token}),
    );
    assert_eq!(own["delegationId"], del(4).to_string());
    // Someone else's DCT reads nothing of it.
    let (_, theirs) = site
        .gw
        .call_as(&format!("DCT {other}"), "delegateos/budget", params.clone());
    assert_eq!(
        theirs["error"]["data"]["type"], "admin_required",
        "{theirs}"
    );
    // The admin reads everything.
    let (_, admin) = site
        .gw
        .call_as(&format!("Bearer {ADMIN}"), "delegateos/budget", params);
    assert!(admin["result"]["chains"].is_array(), "{admin}");
}

#[test]
fn admin_commands_take_the_secret_from_a_private_file() {
    let site = Site::new();
    let open = secret_file(&site.files.dir, "open.secret", ADMIN, 0o644);
    let out = run(&[
        "motebit",
        "unpin",
        "--gateway",
        &site.rpc(),
        "--admin-token-file",
        open.to_str().unwrap(),
        "some-id",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--admin-token-file"),
        "{}",
        stderr(&out)
    );
    // A secret the gateway does not list: 401, and what to do about it.
    let out = dgw()
        .args(["motebit", "unpin", "--gateway", &site.rpc(), "some-id"])
        .env("DGW_ADMIN_TOKEN", "not-a-listed-secret-00000000000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[[admin.tokens]] does not list it"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "motebit",
        "unpin",
        "--gateway",
        &site.rpc(),
        "--admin-token-file",
        site.admin_file.to_str().unwrap(),
        "34750f98-bd59-8cfc-946d-a45aaabe933b",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The gRPC twin: `CallProtocol` with `dgw/tokens/issue`, an admin in the
/// metadata; refusals typed in the status details.
#[tokio::test(flavor = "multi_thread")]
async fn online_issuance_over_grpc_call_protocol() {
    use delegate_gateway::grpc::pb;
    use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
    use tonic_types::StatusExt;

    let site = tokio::task::spawn_blocking(Site::new).await.unwrap();
    let mut client =
        DelegationGatewayClient::connect(format!("http://{}", site.gw.grpc.clone().unwrap()))
            .await
            .unwrap();
    let call = |params: Value, admin: Option<&str>| {
        let mut r = tonic::Request::new(pb::CallProtocolRequest {
            method: "dgw/tokens/issue".into(),
            params_json: params.to_string(),
        });
        if let Some(secret) = admin {
            r.metadata_mut()
                .insert("authorization", format!("Bearer {secret}").parse().unwrap());
        }
        r
    };
    let params = json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()],
                        "budgetMicrocents": 50});
    let reason = |s: &tonic::Status| {
        s.get_error_details()
            .error_info()
            .map(|i| i.reason.clone())
            .unwrap_or_default()
    };
    let refused = client
        .call_protocol(call(params.clone(), None))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert_eq!(reason(&refused), "ADMIN_REQUIRED");
    let mut wider = params.clone();
    wider["budgetMicrocents"] = json!(1_000_000);
    let refused = client
        .call_protocol(call(wider, Some(ADMIN)))
        .await
        .unwrap_err();
    assert_eq!(reason(&refused), "ATTENUATION_VIOLATION", "{refused:?}");

    let issued = client
        .call_protocol(call(params, Some(ADMIN)))
        .await
        .unwrap()
        .into_inner();
    let issued: Value = serde_json::from_str(&issued.result_json).unwrap();
    let token = issued["token"].as_str().unwrap().to_owned();
    let allowed = client
        .authorize(pb::AuthorizeRequest {
            credential_json: String::new(),
            dct: token,
            request: Some(pb::CapabilityRequest {
                namespace: "docs".into(),
                action: "read".into(),
                resource: site.files.path("a.txt"),
            }),
            cost_microcents: 50,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(allowed.tenant, "acme", "{allowed:?}");
    assert_eq!(allowed.amount_microcents, 50);
    tokio::task::spawn_blocking(move || drop(site))
        .await
        .unwrap();
}

/// A reload reads the issuing delegation again: a wrong file is refused
/// and the running one kept; a narrower one bounds issuance from then on.
#[test]
fn a_reload_reads_the_issuing_delegation_again() {
    let site = Site::new();
    let file = site.path("acme-issuing.dct");
    let bearer = format!("Bearer {ADMIN}");
    let issue = |budget: u64| {
        site.gw.call_as(
            &bearer,
            "dgw/tokens/issue",
            json!({"tenant": "acme", "to": principal(2), "capabilities": [site.cap()],
                   "budgetMicrocents": budget}),
        )
    };
    // Held by someone else than the gateway: the reload is refused whole.
    std::fs::write(
        &file,
        root_token(&site.root, &seed(2), &[site.cap().as_str()], 10, 600).encode(),
    )
    .unwrap();
    let (_, answer) = site.gw.call_as(&bearer, "dgw/reload", json!({}));
    assert_eq!(
        answer["error"]["data"]["type"], "config_invalid",
        "{answer}"
    );
    let detail = answer["error"]["message"].to_string() + &answer["error"]["data"].to_string();
    assert!(detail.contains("issuing_delegation_file"), "{answer}");
    assert!(issue(500).1["result"]["token"].is_string());

    // A narrower one: applied.
    let gateway = delegateos::Keypair::from_seed([9; 32]);
    std::fs::write(
        &file,
        root_token_for(
            &site.root,
            &gateway,
            &[site.cap().as_str()],
            100,
            600,
            del(8),
        )
        .encode(),
    )
    .unwrap();
    let (_, answer) = site.gw.call_as(&bearer, "dgw/reload", json!({}));
    assert!(answer["result"]["applied"].is_array(), "{answer}");
    let (_, answer) = issue(500);
    assert_eq!(
        answer["error"]["data"]["type"], "attenuation_violation",
        "{answer}"
    );
    assert!(issue(100).1["result"]["token"].is_string());
}
