//! The configuration's JSON Schema (issue 37): `dgw config schema` prints
//! what `config/schema.json` ships, every shipped config validates against
//! it and names it for editors, and it refuses what dgw refuses to read.

// Test helpers outside #[test] functions (the OTLP receiver, the schema's
// reader): a failure should stop the test loudly, and clippy's
// allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("config/schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn as_json(toml_text: &str) -> Value {
    let value: toml::Value = toml::from_str(toml_text).unwrap();
    serde_json::to_value(value).unwrap()
}

fn breaches(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The shipped file is what the binary prints: regenerate it with
/// `dgw config schema > config/schema.json`.
#[test]
fn the_shipped_schema_is_what_the_binary_prints() {
    let out = run(&["config", "schema"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shipped = std::fs::read_to_string(root().join("config/schema.json")).unwrap();
    assert!(
        stdout(&out) == shipped,
        "config/schema.json is stale: run `dgw config schema > config/schema.json`"
    );
}

/// Every config the repository ships (config/, config/examples/, deploy/,
/// the Kubernetes ConfigMap's) validates, and each file names the schema
/// on its first line as taplo (Even Better TOML) reads it.
#[test]
fn every_shipped_config_validates_against_the_schema() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["config", "config/examples", "deploy", "deploy/compose"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 3, "{files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let named = first
            .strip_prefix("#:schema ")
            .unwrap_or_else(|| panic!("{}: no #:schema line first", file.display()));
        let target = file.parent().unwrap().join(named.trim());
        assert_eq!(
            std::fs::canonicalize(&target).unwrap(),
            std::fs::canonicalize(root().join("config/schema.json")).unwrap(),
            "{}",
            file.display()
        );
        let found = breaches(&validator, &as_json(&text));
        assert!(found.is_empty(), "{}: {found:?}", file.display());
    }
    // The ConfigMap's gateway.toml, an indented block in YAML.
    let yaml = std::fs::read_to_string(root().join("deploy/kubernetes/dgw.yaml")).unwrap();
    let embedded = embedded_toml(&yaml, "gateway.toml: |");
    assert!(embedded.contains("[server]"), "{embedded}");
    let found = breaches(&validator, &as_json(&embedded));
    assert!(found.is_empty(), "deploy/kubernetes/dgw.yaml: {found:?}");
}

/// The block scalar after `key` in `yaml`, unindented.
fn embedded_toml(yaml: &str, key: &str) -> String {
    let mut lines = yaml
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(key));
    let head = lines.next().expect("the key");
    let outer = head.len() - head.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > outer)
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The schema is no rubber stamp: a misspelt key, a wrong type, an unknown
/// section and a missing `[server]` fail it, as they fail `dgw config check`.
#[test]
fn the_schema_refuses_what_dgw_refuses() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let good =
        "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n";
    assert!(breaches(&validator, &as_json(good)).is_empty());
    let dir = tempfile::tempdir().unwrap();
    for (bad, at) in [
        (good.replace("[server]", "[server]\nhtp = 1"), "htp"),
        (
            good.replace("[server]", "[server]\nworkers = \"four\""),
            "workers",
        ),
        (
            format!("{good}[telemetry]\notlp_endpoint = 4318\n"),
            "otlp_endpoint",
        ),
        (format!("{good}[tracing]\nx = 1\n"), "tracing"),
        (
            good.replace("[server]\nhttp = \"127.0.0.1:0\"\n", ""),
            "server",
        ),
        (
            format!("{good}[[upstreams]]\nname = \"a\"\ncomand = [\"x\"]\n"),
            "comand",
        ),
        // A protocol's section has its module's schema (issue 32).
        (
            format!("{good}[ldp]\nfreshness_secs = 300\n"),
            "freshness_secs",
        ),
        (format!("{good}[ldp]\nfreshness = 300\n"), "freshness"),
        (format!("{good}[agenta]\ntenant = 7\n"), "tenant"),
        (format!("{good}[talos]\nissuer = []\n"), "issuer"),
        (format!("{good}[motebit]\naudience = 7\n"), "audience"),
        // No keys yet: any is refused (at the table, as jsonschema says it).
        (format!("{good}[delegateos]\ntrusted = 1\n"), "/delegateos"),
    ] {
        let found = breaches(&validator, &as_json(&bad));
        assert!(!found.is_empty(), "the schema took {bad:?}");
        assert!(found.iter().any(|f| f.contains(at)), "{at}: {found:?}");
        let out = config_check_in(dir.path(), &bad);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
    // The former key is refused with what to write instead (decision 300).
    let out = config_check_in(dir.path(), &format!("{good}[ldp]\nfreshness_secs = 300\n"));
    assert!(
        stderr(&out).contains("`ldp.freshness_secs`: is replaced by `ldp.freshness`, a duration: write freshness = \"300s\""),
        "{}",
        stderr(&out)
    );
}

/// `dgw config check` lists every file and command problem at once, each
/// naming its key, and exits 2; fixed, the same config is valid.
#[test]
fn config_check_lists_every_finding_by_its_key() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A data_dir that holds state: a missing gateway key is no first start.
    std::fs::create_dir_all(d.join("data/db")).unwrap();
    let (tenant_key, _) = key_file(d, "acme.key", 1);
    let (gateway_key, _) = key_file(d, "data/gateway.key", 2);
    let open_secret = mcp::secret_file(d, "open-secret", "s3cr3t-value", 0o644);
    let toml = |fixed: bool| {
        let pick = |good: &str, bad: &str| {
            if fixed {
                good.to_owned()
            } else {
                bad.to_owned()
            }
        };
        format!(
            "data_dir = \"data\"\nkey_file = {key_file:?}\n[server]\nhttp = \"127.0.0.1:0\"\n\
             [server.tls]\ncert_file = {cert:?}\nkey_file = {tls_key:?}\n\
             [[tenants]]\nname = \"acme\"\nroot_key_file = {tenant:?}\n\
             [[upstreams]]\nname = \"files\"\ncommand = [{program:?}, \"/srv\"]\n\
             [[upstreams]]\nname = \"web\"\nurl = \"https://127.0.0.1:9/mcp\"\nca_file = {ca:?}\n\
             headers = [{{ name = \"Authorization\", value_file = {secret:?} }}]\n\
             [state]\nbackend = \"redis\"\nurl = \"rediss://127.0.0.1:1\"\nca_file = {state_ca:?}\n",
            key_file = pick(gateway_key.to_str().unwrap(), "data/gatway.key"),
            cert = pick("tls/cert.pem", "tls/missing-cert.pem"),
            tls_key = pick("tls/key.pem", "tls/missing-key.pem"),
            tenant = pick(tenant_key.to_str().unwrap(), "acme-rot.key"),
            program = pick("sh", "no-such-mcp-server-dgw"),
            ca = pick("tls/cert.pem", "tls/missing-ca.pem"),
            secret = pick("secret", open_secret.to_str().unwrap()),
            state_ca = pick("tls/cert.pem", "tls/missing-redis-ca.pem"),
        )
    };
    let out = config_check_in(d, &toml(false));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for key in [
        "`key_file`",
        "`server.tls.cert_file`",
        "`server.tls.key_file`",
        "`tenants[0].root_key_file`",
        "`upstreams[0].command`",
        "`upstreams[1].ca_file`",
        "`upstreams[1].headers[0].value_file`",
        "`state.ca_file`",
    ] {
        assert!(err.contains(key), "{key} missing from: {err}");
    }
    assert!(err.contains("8 findings"), "{err}");
    assert!(err.contains("not on PATH"), "{err}");
    assert!(err.contains("0644") || err.contains("644"), "{err}");
    assert!(!err.contains("s3cr3t-value"), "a secret was echoed: {err}");
    // Fixed: a certificate and key, a private secret, a program on PATH.
    std::fs::create_dir_all(d.join("tls")).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(d.join("tls/cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(d.join("tls/key.pem"), cert.signing_key.serialize_pem()).unwrap();
    mcp::secret_file(d, "secret", "Bearer abc", 0o600);
    let out = config_check_in(d, &toml(true));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("valid"), "{}", stdout(&out));
    // A program named by a path must be an executable file.
    std::fs::write(d.join("server.sh"), "#!/bin/sh\n").unwrap();
    let by_path = toml(true).replace("[\"sh\",", "[\"./server.sh\",");
    let out = config_check_in(d, &by_path);
    assert!(
        stderr(&out).contains("`upstreams[0].command`")
            && stderr(&out).contains("not an executable file"),
        "{}",
        stderr(&out)
    );
    std::fs::set_permissions(d.join("server.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(config_check_in(d, &by_path).status.code(), Some(0));
}
