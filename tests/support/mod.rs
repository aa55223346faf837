//! Helpers for the end-to-end tests: the real `dgw` binary, key files in
//! temp dirs, and the Node DelegateOS peer.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

pub mod audit;
pub mod console;
pub mod market;
pub mod mcp;
pub mod redis;
pub mod talos_caps;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use delegateos::{base64url, KeyFile, Keypair};
use serde_json::Value;

/// The `dgw` binary cargo built for these tests.
pub fn dgw() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dgw"))
}

/// Runs `dgw` with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    dgw().args(args).output().expect("dgw runs")
}

/// Runs `dgw` with `stdin` fed in.
pub fn run_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = dgw()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dgw runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The JSON a child printed, once it exited successfully.
pub fn json_of_success(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    json(o)
}

pub fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Writes a key file for a fixed seed, mode 0600, and returns its path.
pub fn key_file(dir: &Path, name: &str, seed: u8) -> (PathBuf, Keypair) {
    let key = Keypair::from_seed([seed; 32]);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, KeyFile::new(&key).to_json()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (path, key)
}

pub fn seed_b64(seed: u8) -> String {
    base64url::encode(&[seed; 32])
}

/// Runs the Node DelegateOS peer (`tests/interop/delegateos-peer.mjs`).
/// The tests need tests/setup.sh first, as the README says.
pub fn node_peer(command: &str, input: &Value) -> Value {
    node_script("interop/delegateos-peer.mjs", command, input)
}

/// Runs a Node script of `tests/` with `command`, `input` as JSON on its
/// standard input; the JSON it prints.
pub fn node_script(script: &str, command: &str, input: &Value) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    assert!(
        dir.join("node_modules/@noble/ed25519").exists(),
        "the Node peers' packages are missing: run tests/setup.sh (the README's test command does)"
    );
    let mut child = Command::new("node")
        .arg(dir.join(script))
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{script} failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Tokens and IDs for tests: fixed seeds, small IDs, times from now.
pub fn seed(n: u8) -> delegateos::Keypair {
    delegateos::Keypair::from_seed([n; 32])
}

pub fn del(n: u8) -> delegateos::DelegationId {
    delegateos::DelegationId::from_bytes([0, 0, 0, 0, 0, n])
}

pub fn ct(n: u8) -> delegateos::ContractId {
    delegateos::ContractId::from_bytes([0, 0, 0, 0, 0, n])
}

pub fn at(offset_secs: i64) -> delegateos::Timestamp {
    let now = time::OffsetDateTime::now_utc() + time::Duration::seconds(offset_secs);
    delegateos::Timestamp::from_instant(now)
}

pub fn root_token(
    root: &delegateos::Keypair,
    to: &delegateos::Keypair,
    caps: &[&str],
    budget: u64,
    expires_in: i64,
) -> delegateos::Dct {
    root_token_for(root, to, caps, budget, expires_in, del(1))
}

/// [`root_token`] for another delegation.
pub fn root_token_for(
    root: &delegateos::Keypair,
    to: &delegateos::Keypair,
    caps: &[&str],
    budget: u64,
    expires_in: i64,
    delegation: delegateos::DelegationId,
) -> delegateos::Dct {
    delegateos::Dct::create(
        root,
        delegateos::dct::CreateParams {
            delegatee: to.principal_id().clone(),
            capabilities: caps.iter().map(|c| c.parse().unwrap()).collect(),
            contract_id: ct(1),
            delegation_id: delegation,
            parent_delegation_id: delegateos::DelegationId::root_parent(),
            chain_depth: 0,
            max_chain_depth: 3,
            max_budget_microcents: budget,
            expires_at: at(expires_in),
            // An expired token was issued a minute before it expired.
            issued_at: at(expires_in.min(0) - 60),
        },
    )
    .unwrap()
}

/// A signed contract needing `required` capabilities.
pub fn contract(
    root: &delegateos::Keypair,
    id: delegateos::ContractId,
    required: &[&str],
) -> delegateos::TaskContract {
    let draft = serde_json::json!({
        "task": {"title": "Count words", "description": "Count the words", "inputs": {},
                 "outputSchema": {"type": "object", "required": ["words"]}},
        "verification": {"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["words"]}},
        "constraints": {"maxBudgetMicrocents": 1000, "deadline": "2099-01-01T00:00:00Z", "maxChainDepth": 3,
                        "requiredCapabilities": required}
    });
    delegateos::contract::ContractDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(
            root,
            id,
            at(0),
            &delegateos::CheckFunctionRegistry::with_builtins(),
        )
        .unwrap()
}

/// A signed completion attestation, as JSON.
pub fn attestation(
    by: &delegateos::Keypair,
    id: u8,
    delegation: delegateos::DelegationId,
    output: Value,
    cost: u64,
    success: bool,
) -> Value {
    let draft = serde_json::json!({
        "contractId": ct(1), "delegationId": delegation, "type": "completion",
        "result": {"success": success, "output": output, "costMicrocents": cost, "durationMs": 5},
    });
    let att = delegateos::attestation::AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(
            by,
            delegateos::AttestationId::from_bytes([0, 0, 0, 0, 0, id]),
            at(0),
        )
        .unwrap();
    serde_json::to_value(att).unwrap()
}

/// `token` attenuated by `by` to `to` as delegation `id`, optionally with a
/// lower budget and fewer capabilities.
pub fn attenuate(
    token: &delegateos::Dct,
    by: &delegateos::Keypair,
    to: &delegateos::Keypair,
    id: u8,
    budget: Option<u64>,
    caps: Option<&[&str]>,
) -> delegateos::Dct {
    token
        .attenuate(
            by,
            delegateos::dct::AttenuateParams {
                delegatee: to.principal_id().clone(),
                delegation_id: del(id),
                contract_id: ct(1),
                allowed_capabilities: caps.map(|c| c.iter().map(|c| c.parse().unwrap()).collect()),
                max_budget_microcents: budget,
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap()
}

/// `token` attenuated by `by` to `to` (delegation 2) with a capability
/// wider than the token's (`docs:read:/**`), validly signed: forged below the
/// engine's own checks, to prove the verifier refuses it.
pub fn widened_attenuation(
    token: &delegateos::Dct,
    by: &delegateos::Keypair,
    to: &delegateos::Keypair,
) -> String {
    let mut t = token.token().clone();
    let mut widened = attenuate(token, by, to, 2, None, None).token().attenuations[0].clone();
    widened.allowed_capabilities = Some(vec!["docs:read:/**".parse().unwrap()]);
    t.attenuations.push(widened);
    t.signatures.push(delegateos::dct::TokenSignature {
        signer: by.principal_id().clone(),
        signature: String::new(),
        covers: delegateos::dct::Covers::Attenuation(0),
    });
    let payload = serde_json::json!({"authority": t.authority, "attenuations": t.attenuations});
    t.signatures[1].signature = delegateos::signing::sign(by, &payload).unwrap();
    delegateos::base64url::encode(&delegateos::canonical::canonicalize(&t).unwrap())
}

/// A running `dgw serve` on a free loopback port, with its own data dir.
pub struct Gateway {
    child: Option<std::process::Child>,
    pub addr: String,
    /// The gRPC address, when the config has `[server] grpc`.
    pub grpc: Option<String>,
    pub config: PathBuf,
    pub stderr_log: PathBuf,
}

/// Writes a gateway config in `dir` trusting `roots`; `extra` is appended.
pub fn gateway_config(
    dir: &Path,
    roots: &[(&str, &delegateos::PrincipalId)],
    extra: &str,
) -> PathBuf {
    let mut toml = format!(
        "data_dir = {:?}\nkey_file = {:?}\n[server]\nhttp = \"127.0.0.1:0\"\n{extra}\n",
        dir.join("data"),
        dir.join("data/gateway.key")
    );
    for (name, root) in roots {
        toml.push_str(&format!(
            "[[tenants]]\nname = {name:?}\nroot = \"{root}\"\n"
        ));
    }
    let path = dir.join("gateway.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// [`gateway_config`] for MCP clients that present their DCT per call (in
/// `_delegateos` or a header on each request), not at `initialize`: their
/// sessions are anonymous, which a gateway allows only when told to.
pub fn mcp_gateway_config(
    dir: &Path,
    roots: &[(&str, &delegateos::PrincipalId)],
    extra: &str,
) -> PathBuf {
    gateway_config(
        dir,
        roots,
        &format!("{extra}\n[mcp]\nanonymous_sessions = true\n"),
    )
}

impl Gateway {
    /// Starts `dgw serve --config CONFIG` and waits for it to listen.
    pub fn start(config: &Path) -> Gateway {
        Self::start_as(dgw(), config)
    }

    /// [`Gateway::start`] with `env` added to dgw's environment.
    pub fn start_with_env(config: &Path, env: &[(&str, &str)]) -> Gateway {
        let mut command = dgw();
        command.envs(env.iter().copied());
        Self::start_as(command, config)
    }

    /// [`Gateway::start`] run from `cwd` (relative paths in the config still
    /// resolve in its own directory).
    pub fn start_in(config: &Path, cwd: &Path) -> Gateway {
        let mut command = dgw();
        command.current_dir(cwd);
        Self::start_as(command, config)
    }

    /// Starts `dgw serve --ephemeral --config CONFIG`: state in memory.
    pub fn start_ephemeral(config: &Path) -> Gateway {
        let mut command = dgw();
        command.arg("serve").arg("--ephemeral");
        Self::start_command(command, config)
    }

    /// Starts `dgw serve ARGS --config CONFIG`.
    pub fn start_args(config: &Path, args: &[&str]) -> Gateway {
        let mut command = dgw();
        command.arg("serve").args(args);
        Self::start_command(command, config)
    }

    /// [`Gateway::start`] with at most `n` open descriptors (hard limit).
    pub fn start_with_descriptors(config: &Path, n: u32) -> Gateway {
        let mut command = Command::new("prlimit");
        command
            .arg(format!("--nofile={n}:{n}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_dgw"));
        Self::start_as(command, config)
    }

    /// Runs `command serve --config CONFIG` (`command` runs dgw).
    fn start_as(mut command: Command, config: &Path) -> Gateway {
        command.arg("serve");
        Self::start_command(command, config)
    }

    /// Runs `command --config CONFIG` (`command` runs `dgw serve`).
    fn start_command(mut command: Command, config: &Path) -> Gateway {
        use std::io::BufRead;
        let stderr_log = config.with_extension(format!("stderr.{}.log", std::process::id()));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_log)
            .unwrap();
        let mut child = command
            .args(["--config", config.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("dgw serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "dgw did not start: {}",
                    std::fs::read_to_string(&stderr_log).unwrap_or_default()
                )
            });
        let rest = line.strip_prefix("dgw listening ").expect("listening line");
        let field = |name: &str| {
            rest.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .map(str::to_owned)
        };
        Gateway {
            child: Some(child),
            addr: field("http=").expect("an http address"),
            grpc: field("grpc="),
            config: config.to_owned(),
            stderr_log,
        }
    }

    /// Sends a raw HTTP request and returns (status, body).
    pub fn http(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        http_request(&self.addr, method, path, body)
    }

    /// Sends one JSON-RPC request and returns the whole response object.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, bytes) = self.http("POST", "/rpc", body.to_string().as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Sends one JSON-RPC request with an `Authorization` header and
    /// returns (HTTP status, response object).
    pub fn call_as(&self, authorization: &str, method: &str, params: Value) -> (u16, Value) {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, _, bytes) = http_exchange(
            &self.addr,
            "POST",
            "/rpc",
            &[("Authorization", authorization)],
            body.to_string().as_bytes(),
        );
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    /// The `result` of a call that must succeed.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// The `error` of a call that must fail.
    pub fn err(&self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// The Prometheus text.
    pub fn metrics(&self) -> String {
        let (status, body) = self.http("GET", "/metrics", b"");
        assert_eq!(status, 200);
        String::from_utf8(body).unwrap()
    }

    /// The process ID, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Resident memory in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// SIGKILL: no chance to flush or drain.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
        c.wait().unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A minimal HTTP/1.1 client (one request per connection).
pub fn http_request(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let (status, _, body) = http_exchange(addr, method, path, &[], body);
    (status, body)
}

/// An HTTP response's status, headers (names lowercased) and body.
pub type HttpResponse = (u16, Vec<(String, String)>, Vec<u8>);

/// Sends one request with extra headers on its own connection (a
/// `Content-Type` among them replaces the default, JSON).
pub fn http_exchange(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    // JSON unless the caller names another type (a form post).
    let typed = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{}Content-Length: {}\r\nConnection: close\r\n{}\r\n",
        if typed { "" } else { "Content-Type: application/json\r\n" },
        body.len(),
        headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect::<String>()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("headers end");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    // dgw always answers with Content-Length, never chunked.
    (status, headers, response[split + 4..].to_vec())
}

/// The principal ID of the gateway key in `data_dir`.
pub fn gateway_principal(data_dir: &Path) -> String {
    delegateos::KeyFile::parse(&std::fs::read(data_dir.join("gateway.key")).unwrap())
        .unwrap()
        .principal_id()
        .to_string()
}

/// `dgw audit verify LOG --gateway GATEWAY`.
pub fn audit_verify(log: &Path, gateway: &str) -> Output {
    run(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--gateway",
        gateway,
    ])
}

/// `command config check CONFIG` (`command` runs dgw), which must pass:
/// all it said, stdout then stderr.
pub fn config_check_passes(command: &mut Command, config: &Path) -> String {
    let out = command
        .args(["config", "check", config.to_str().unwrap()])
        .output()
        .unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{said}");
    said
}

/// `dgw config check` on `toml`, written as `gateway.toml` in `dir` and
/// checked from there (relative paths resolve in `dir`).
pub fn config_check_in(dir: &Path, toml: &str) -> Output {
    std::fs::write(dir.join("gateway.toml"), toml).unwrap();
    dgw()
        .current_dir(dir)
        .args(["config", "check", "gateway.toml"])
        .output()
        .unwrap()
}

/// A `dgw-load` server (`--serve-upstream` or `--serve-floor`) on a free
/// loopback port, killed on drop.
pub struct LoadServer {
    child: std::process::Child,
    pub addr: String,
}

impl LoadServer {
    /// Runs `dgw-load FLAG 127.0.0.1:0` and reads its address after `said`.
    pub fn start(flag: &str, said: &str) -> Self {
        Self::start_with(flag, &[], said)
    }

    /// [`LoadServer::start`] with more arguments.
    pub fn start_with(flag: &str, args: &[&str], said: &str) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_dgw-load"))
            .args([flag, "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("dgw-load runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix(said)
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self { child, addr }
    }
}

impl Drop for LoadServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dgw attestation verify ATTESTATION --contract CONTRACT` accepts
/// `attestation` against `contract` (both written as files named by `name`
/// in `dir`).
pub fn assert_attestation_verifies(dir: &Path, name: &str, attestation: &Value, contract: &Value) {
    let (att_file, contract_file) = (
        dir.join(format!("att-{name}.json")),
        dir.join(format!("contract-{name}.json")),
    );
    std::fs::write(&att_file, attestation.to_string()).unwrap();
    std::fs::write(&contract_file, contract.to_string()).unwrap();
    let out = run(&[
        "attestation",
        "verify",
        att_file.to_str().unwrap(),
        "--contract",
        contract_file.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(json(&out)["valid"], true);
}
