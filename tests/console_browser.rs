//! The operator console in a real browser (issue 38): Debian's headless
//! `chromium` with `chromium-driver`, driven by Selenium from PyPI
//! (`tests/console/browser.py`, in `tests/.venv`), against a real `dgw`
//! with an MCP upstream (the SDK echo server, offering a tool named
//! `<img src=x onerror=alert(1)>`) and real MCP calls from the tests' own
//! client: sign in, a budget bar that moves, a denial found by its reason
//! and opened to its audit entry, a revocation and the next call denied,
//! sign-out; the live decision stream refreshing its table without a
//! reload after a real call; every control of every page named for screen
//! readers and reached by Tab; every page readable 480 and 420 wide
//! (nothing wider than the window, no text under 12 px); and the hostile
//! cases (the tool name shown as text, a
//! cross-site post refused, pages closed without a session, the cookie
//! unreadable from script, a forged cookie refused). Screenshots of every
//! page go to a temporary directory (the current ones are kept in
//! docs/console/).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::json;
use support::audit::{admin_toml, ADMIN};
use support::mcp::{echo_server_on_port, tests_dir, McpHttp};
use support::*;

#[test]
fn an_operator_answers_who_spends_what_was_denied_and_cuts_an_agent_off() {
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            std::path::Path::new(tool).exists(),
            "{tool} is missing: apt-get install chromium chromium-driver (tests/setup.sh)"
        );
    }
    let python = tests_dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "tests/.venv is missing: run tests/setup.sh"
    );

    let dir = tempfile::tempdir().unwrap();
    let shots = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (_upstream, port) = echo_server_on_port(&["--hostile-name".as_ref()]);
    let extra = format!(
        r#"{admin}
[console]
enabled = true
[[upstreams]]
name = "web"
url = "http://127.0.0.1:{port}/mcp"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 1000000
"#,
        admin = admin_toml()
    );
    // The agents present their DCT with each call (anonymous sessions).
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let agent = root_token(&root, &seed(2), &["demo:echo:*"], 10_000_000, 3600).encode();
    let narrow =
        root_token_for(&root, &seed(3), &["demo:other:*"], 10_000_000, 3600, del(2)).encode();

    let mut browser = Command::new(&python)
        .arg(tests_dir().join("console/browser.py"))
        .env("DGW_CONSOLE_URL", format!("http://{}", gw.addr))
        .env("DGW_CONSOLE_ADMIN", ADMIN)
        .env("DGW_CONSOLE_TOKEN", &agent)
        .env("DGW_CONSOLE_SHOTS", shots.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_browser = browser.stdin.take().unwrap();
    let from_browser = BufReader::new(browser.stdout.take().unwrap());
    let mut done = false;
    let mut calls = 100;
    for line in from_browser.lines() {
        let line = line.unwrap();
        match line.strip_prefix("CALL ") {
            Some(which) => {
                let token = if which == "narrow" { &narrow } else { &agent };
                // Any status: a denied call may be refused before JSON-RPC.
                calls += 1;
                let call = json!({"jsonrpc": "2.0", "id": calls, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "from the test"}}});
                // A session of its own: anonymous sessions end when idle,
                // and the browser may take longer than that between calls.
                let mut mcp = McpHttp::connect(&gw.addr, None);
                let (_, answer) = mcp.post(&call, Some(token));
                writeln!(to_browser, "{answer}").unwrap();
                to_browser.flush().unwrap();
            }
            None => done |= line == "DONE",
        }
    }
    let status = browser.wait().unwrap();
    assert!(
        status.success() && done,
        "the browser test failed (its stderr is above)"
    );
    // Refreshing the docs' screenshots (docs/console.md says how).
    if let Ok(to) = std::env::var("DGW_CONSOLE_SCREENSHOTS_TO") {
        for entry in std::fs::read_dir(shots.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(
                entry.path(),
                std::path::Path::new(&to).join(entry.file_name()),
            )
            .unwrap();
        }
    }
    for page in [
        "signin",
        "budgets",
        "decisions",
        "delegations",
        "audit",
        "upstreams",
        "budgets-narrow",
    ] {
        let shot = shots.path().join(format!("{page}.png"));
        let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
        assert!(bytes.starts_with(b"\x89PNG"), "{page}.png is not a PNG");
        // The docs show the current screenshot of every page.
        let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("docs/console/{page}.png"));
        assert!(kept.exists(), "{} is missing", kept.display());
    }
}
