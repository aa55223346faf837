//! Credentials on both sides of the MCP hop (issue 34): what dgw presents
//! to its upstreams (headers and bearer tokens from files or its
//! environment, a stdio server's environment and directory), and that
//! those secrets never come back out of dgw, while the caller's DCT never
//! goes upstream.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const KEY_A: &str = "sk-live-header-0123456789abcdef";
const TOKEN_B: &str = "bearer-token-fedcba9876543210";
const ENV_C: &str = "stdio-secret-5555aaaa7777";

/// The echo server on HTTP, accepting only requests whose `header` is a
/// line of `accepted`, logging every request to `log`.
fn guarded_echo(header: &str, accepted: &Path, log: &Path) -> (Killed, String) {
    let (server, port) = echo_server_on_port(&[
        "--require-header".as_ref(),
        header.as_ref(),
        accepted.as_os_str(),
        "--header-log".as_ref(),
        log.as_os_str(),
    ]);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

const RULES: &str = r#"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
[[upstreams.tools]]
name = "leak"
capability = "demo:leak"
fixed_resource = "leak"
[[upstreams.tools]]
name = "env_names"
open = true
[[upstreams.tools]]
name = "workdir"
open = true
"#;

#[test]
fn http_upstreams_get_their_header_and_bearer_and_the_secrets_never_come_back_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let accepted_a = secret_file(d, "accepted_a", KEY_A, 0o600);
    let accepted_b = secret_file(d, "accepted_b", &format!("Bearer {TOKEN_B}"), 0o600);
    let (log_a, log_b) = (d.join("a.log"), d.join("b.log"));
    let (_a, url_a) = guarded_echo("x-api-key", &accepted_a, &log_a);
    let (_b, url_b) = guarded_echo("authorization", &accepted_b, &log_b);
    let key_file = secret_file(d, "key_a", &format!("{KEY_A}\n"), 0o400);
    let extra = format!(
        r#"
[[upstreams]]
name = "a"
url = {url_a:?}
headers = [{{ name = "X-Api-Key", value_file = {key_file:?} }}, {{ name = "X-Client", value = "dgw-test" }}]
{RULES}
[[upstreams]]
name = "b"
url = {url_b:?}
bearer = {{ value_env = "DGW_TEST_TOKEN_B" }}
{RULES}
"#
    );
    let config = mcp_gateway_config(d, &[("acme", root.principal_id())], &extra);

    // `config check` names each credential and where it comes from, never
    // the value.
    let said = config_check_passes(dgw().env("DGW_TEST_TOKEN_B", TOKEN_B), &config);
    assert!(
        said.contains(&format!(
            "upstream a: header x-api-key = <redacted> from file {}",
            key_file.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(
            "upstream b: header authorization = <redacted> from environment variable DGW_TEST_TOKEN_B"
        ),
        "{said}"
    );
    assert!(!said.contains(KEY_A) && !said.contains(TOKEN_B), "{said}");

    let gw = Gateway::start_with_env(&config, &[("DGW_TEST_TOKEN_B", TOKEN_B)]);
    // Only upstream a's echo is granted.
    let token = root_token(&root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let mut names = mcp.tool_names(Some(&token));
    names.sort();
    assert!(names.contains(&"a__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"b__echo".to_owned()), "{names:?}");

    // Each upstream accepts dgw's credential.
    let a = mcp.call("a__echo", json!({"text": "to a"}), Some(&token));
    assert_eq!(text_of(&a), "to a");
    let a = mcp.call("b__echo", json!({"text": "to b"}), Some(&token));
    assert_eq!(text_of(&a), "to b");

    // A caller without the grant cannot make dgw use the credential.
    let denied = mcp.call("b__leak", json!({"name": "authorization"}), Some(&token));
    assert_eq!(denial_type(&denied), "capability_not_granted", "{denied}");
    let calls_b = |log: &Path| -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["body"]["method"] == "tools/call")
            .collect()
    };
    assert!(
        calls_b(&log_b)
            .iter()
            .all(|r| r["body"]["params"]["name"] != "leak"),
        "a denied call reached the upstream"
    );

    // An upstream that gives its secret away (in its answer and its
    // stderr, were it a process) has it scrubbed.
    let leaker = root_token(&root, &seed(2), &["demo:*:*"], 1000, 3600).encode();
    let a = mcp.call("a__leak", json!({"name": "x-api-key"}), Some(&leaker));
    assert_eq!(text_of(&a), "the value is <redacted>", "{a}");
    let a = mcp.call("b__leak", json!({"name": "authorization"}), Some(&leaker));
    assert_eq!(text_of(&a), "the value is Bearer <redacted>", "{a}");
    // The inline, non-credential header went too.
    assert!(calls_b(&log_a)
        .iter()
        .all(|r| r["headers"]["x-client"] == "dgw-test"));

    // The caller's DCT goes nowhere upstream, whether it came in the
    // Authorization header or in _delegateos.
    let mut in_params = McpHttp::connect(&gw.addr, None);
    in_params.next_id += 1;
    let (status, a) = in_params.post(
        &json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {
            "name": "a__echo", "arguments": {"text": "dct in params"},
            "_delegateos": {"dct": token}}}),
        None,
    );
    assert_eq!(status, 200, "{a}");
    assert_eq!(text_of(&a), "dct in params", "{a}");
    for log in [&log_a, &log_b] {
        let seen = std::fs::read(log).unwrap();
        assert!(
            !contains(&seen, &token),
            "the caller's DCT reached an upstream"
        );
        assert!(
            !contains(&seen, &leaker),
            "the caller's DCT reached an upstream"
        );
        assert!(!contains(&seen, "_delegateos"));
        assert!(!contains(&seen, "DCT "));
    }

    // Nothing dgw emitted holds a secret.
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!emitted.is_empty());
    for secret in [KEY_A, TOKEN_B] {
        assert!(!contains(&emitted, secret), "{secret} in dgw's output");
    }
}

#[test]
fn a_stdio_upstream_gets_its_env_and_cwd_and_nothing_else_of_dgws_environment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let root = seed(1);
    let expected = secret_file(&d, "expected", ENV_C, 0o600);
    let value = secret_file(&d, "value", &format!("{ENV_C}\n"), 0o600);
    let work = d.join("work");
    std::fs::create_dir(&work).unwrap();
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        r#"
[[upstreams]]
name = "local"
command = ["node", {echo:?}, "--require-env", "SERVICE_TOKEN", {expected:?}]
cwd = {work:?}
env = [{{ name = "SERVICE_TOKEN", value_file = {value:?} }}, {{ name = "MODE", value = "test" }}, {{ name = "FROM_DGW", value_env = "DGW_TEST_PASSED" }}]
{RULES}
"#
    );
    let config = mcp_gateway_config(&d, &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start_with_env(
        &config,
        &[
            ("DGW_TEST_PASSED", "passed-on"),
            ("DGW_TEST_CANARY", "must-not-reach-children"),
        ],
    );
    let mut mcp = McpHttp::connect(&gw.addr, None);
    // The server exits unless SERVICE_TOKEN is set right: it answers.
    let a = mcp.call("env_names", json!({}), None);
    let names: Vec<String> = serde_json::from_str(&text_of(&a)).unwrap();
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "SERVICE_TOKEN",
        "MODE",
        "FROM_DGW",
    ];
    assert!(
        names.iter().all(|n| allowed.contains(&n.as_str())),
        "{names:?}"
    );
    for n in ["SERVICE_TOKEN", "MODE", "FROM_DGW", "PATH"] {
        assert!(names.contains(&n.to_owned()), "{n} missing: {names:?}");
    }
    let a = mcp.call("workdir", json!({}), None);
    assert_eq!(text_of(&a), work.display().to_string());

    let leaker = root_token(&root, &seed(2), &["demo:*:*"], 1000, 3600).encode();
    let a = mcp.call("leak", json!({"name": "SERVICE_TOKEN"}), Some(&leaker));
    assert_eq!(text_of(&a), "the value is <redacted>", "{a}");
    // Its stderr line ("leaking …") reached the log scrubbed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&gw.stderr_log)
        .unwrap()
        .contains("leaking <redacted>")
    {
        assert!(Instant::now() < deadline, "the stderr line never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!contains(&emitted, ENV_C), "the secret is in dgw's output");
}

#[test]
fn a_stdio_upstream_without_its_env_does_not_start() {
    // The control for the test above: the server really exits without it.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let expected = secret_file(d, "expected", ENV_C, 0o600);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        "[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}, \"--require-env\", \"SERVICE_TOKEN\", {expected:?}]\n{RULES}\n[mcp]\nready_timeout = \"2s\"\n"
    );
    let config = gateway_config(d, &[("acme", seed(1).principal_id())], &extra);
    let gw = Gateway::start_with_env(&config, &[("SERVICE_TOKEN", ENV_C)]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&gw.stderr_log)
        .unwrap()
        .contains("SERVICE_TOKEN is not set right")
    {
        assert!(Instant::now() < deadline, "the server did not refuse");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn secret_files_must_be_private_and_credentials_never_inline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let open = secret_file(d, "open.key", KEY_A, 0o644);
    let base = "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
    let out = config_check_in(
        d,
        &format!("{base}headers = [{{ name = \"X-Api-Key\", value_file = {open:?} }}]\n"),
    );
    let said = stderr(&out);
    assert!(!out.status.success());
    assert!(
        said.contains(&format!(
            "secret file {} has mode 0644: it must be 0600, 0400 or 0440",
            open.display()
        )),
        "{said}"
    );
    assert!(!said.contains(KEY_A), "{said}");
    for (name, value) in [
        ("Authorization", "Bearer x"),
        ("X-Api-Key", "k"),
        ("Cookie", "a=b"),
        ("x-upstream-token", "t"),
        ("X-Client-Secret", "s"),
        ("Proxy-Authorization", "Basic x"),
    ] {
        let out = config_check_in(
            d,
            &format!("{base}headers = [{{ name = {name:?}, value = {value:?} }}]\n"),
        );
        let said = stderr(&out);
        assert!(!out.status.success(), "{name} inline accepted");
        assert!(
            said.contains("carries a credential: give it with value_file or value_env"),
            "{said}"
        );
    }
    // A value that would smuggle a second header is refused.
    let out = config_check_in(
        d,
        &format!("{base}headers = [{{ name = \"X-Client\", value = \"a\\r\\nX-Evil: 1\" }}]\n"),
    );
    assert!(
        stderr(&out).contains("control character"),
        "{}",
        stderr(&out)
    );
    let out = config_check_in(
        d,
        &format!("{base}bearer = {{ value_env = \"DGW_TEST_SURELY_UNSET\" }}\n"),
    );
    assert!(
        stderr(&out).contains("environment variable DGW_TEST_SURELY_UNSET is not set"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_rotated_key_is_taken_by_reload_without_dropping_calls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let old = "old-key-000000000000";
    let new = "new-key-111111111111";
    let accepted = secret_file(d, "accepted", old, 0o600);
    let log = d.join("a.log");
    let (_a, url) = guarded_echo("x-api-key", &accepted, &log);
    let key_file = secret_file(d, "key", old, 0o600);
    let extra = format!(
        "[[upstreams]]\nname = \"a\"\nurl = {url:?}\nheaders = [{{ name = \"X-Api-Key\", value_file = {key_file:?} }}]\n{RULES}"
    );
    let config = mcp_gateway_config(d, &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:echo:*"], 1_000_000, 3600).encode();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (addr, token, stop) = (gw.addr.clone(), token.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut mcp = McpHttp::connect(&addr, None);
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let a = mcp.call("echo", json!({"text": format!("call {n}")}), Some(&token));
                assert_eq!(text_of(&a), format!("call {n}"), "call {n} failed: {a}");
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // The upstream accepts both while the key rotates, then only the new.
    replace(&accepted, &format!("{old}\n{new}\n"));
    std::fs::write(&key_file, new).unwrap();
    std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&gw.stderr_log)
        .unwrap()
        .contains("configuration reloaded")
    {
        assert!(Instant::now() < deadline, "no reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The traffic is one client's calls in turn: once the upstream saw the
    // new key, every later call carries it, and the old one may go.
    while !std::fs::read_to_string(&log).unwrap().contains(new) {
        assert!(
            Instant::now() < deadline,
            "the new key never reached the upstream"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    replace(&accepted, new);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = traffic.join().expect("every call succeeded");
    assert!(n > 5, "only {n} calls");
    // The last calls carried the new key.
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["headers"]["x-api-key"], new);
}

/// Runs the SDK's stdio client on `dgw mcp` launched with `launch`.
fn sdk_stdio(launch: &Value, calls: &Value) -> Value {
    let out = std::process::Command::new("node")
        .arg(tests_dir().join("mcp/sdk-stdio-client.mjs"))
        .arg(launch.to_string())
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn dgw_mcp_launched_by_the_sdk_host_from_elsewhere_runs_every_call_under_its_dct() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let root = seed(1);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!("[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n{RULES}");
    let config = gateway_config(&d, &[("acme", root.principal_id())], &extra);
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let session = root_token(&root, &seed(2), &["demo:echo:*"], 1000, 3600);
    let narrower = attenuate(&session, &seed(2), &seed(3), 2, Some(500), None);
    let other_root = seed(9);
    let wider = root_token(&other_root, &seed(2), &["demo:*:*"], 1000, 3600);
    let launch = json!({
        "command": env!("CARGO_BIN_EXE_dgw"),
        "args": ["mcp", "--config", config],
        "env": {"DGW_DCT": session.encode()},
        "cwd": elsewhere,
    });
    let out = sdk_stdio(
        &launch,
        &json!([
            {"name": "echo", "arguments": {"text": "from a host"}},
            {"name": "leak", "arguments": {"name": "PATH"}},
            {"name": "echo", "arguments": {"text": "narrower"}, "delegateos": {"dct": narrower.encode()}},
            {"name": "leak", "arguments": {"name": "PATH"}, "delegateos": {"dct": wider.encode()}},
        ]),
    );
    let calls = &out["calls"];
    assert_eq!(
        calls[0]["result"]["content"][0]["text"], "from a host",
        "{out}"
    );
    assert_eq!(
        calls[1]["error"]["data"]["type"], "capability_not_granted",
        "{out}"
    );
    assert_eq!(
        calls[2]["result"]["content"][0]["text"], "narrower",
        "{out}"
    );
    assert_eq!(
        calls[3]["error"]["data"]["type"], "session_credential_mismatch",
        "{out}"
    );
    // Nothing was made in the directory it was launched from.
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // The same from a file (0600), with DGW_DCT absent.
    let file = secret_file(&d, "session.dct", &session.encode(), 0o600);
    let launch = json!({
        "command": env!("CARGO_BIN_EXE_dgw"),
        "args": ["mcp", "--config", config, "--dct-file", file],
        "env": {},
        "cwd": elsewhere,
    });
    let out = sdk_stdio(
        &launch,
        &json!([{"name": "echo", "arguments": {"text": "from a file"}}]),
    );
    assert_eq!(
        out["calls"][0]["result"]["content"][0]["text"], "from a file",
        "{out}"
    );
}

#[test]
fn a_second_process_on_a_data_directory_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = gateway_config(d, &[("acme", seed(1).principal_id())], "");
    let _gw = Gateway::start(&config);
    let out = dgw()
        .args(["mcp", "--config", config.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "data_dir {} is in use by another dgw process",
            d.join("data").display()
        )),
        "{said}"
    );
    assert!(said.contains("Give this one its own `data_dir`"), "{said}");
    assert!(!said.contains("WouldBlock"), "{said}");
}

/// Writes `text` to `path` whole, as an operator's tooling would (a file
/// beside it, renamed over it): the upstream that re-reads the file on
/// every request never sees it empty halfway through.
fn replace(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}
