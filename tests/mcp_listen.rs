//! `subscriptions/listen` of 2026-07-28 callers through dgw (issue 33,
//! decision 451), to the official TypeScript SDK v2's strict modern
//! handler (tests/mcp/conformance-upstream.mjs `--modern-only`, whose
//! `POST /touch` publishes change events): the filter narrowed to what the
//! caller's credential may read, only the notifications asked for, under
//! the caller's subscription ID; a flood dropped and counted; a few open
//! per credential, freed when the caller goes.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const RULES: &str = r#"
[[upstreams.resources]]
uri = "test://static-*"
capability = "docs:read"
"#;

struct Setup {
    _dir: tempfile::TempDir,
    _upstream: Killed,
    upstream: String,
    gw: Gateway,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = Command::new(node22());
    upstream
        .arg(tests_dir().join("mcp/conformance-upstream.mjs"))
        .arg("--modern-only");
    let (child, port) = spawn_listening(upstream, "listening ");
    let extra = format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n{RULES}"
    );
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], &extra);
    let gw = Gateway::start(&config);
    Setup {
        _dir: dir,
        _upstream: child,
        upstream: format!("127.0.0.1:{port}"),
        gw,
    }
}

/// Publishes change events on the upstream (outside MCP).
fn touch(upstream: &str, query: &str) {
    let (status, _, _) = http_exchange(upstream, "POST", &format!("/touch?{query}"), &[], b"");
    assert_eq!(status, 204);
}

fn token(n: u8, grants: &[&str]) -> String {
    format!(
        "DCT {}",
        root_token(&seed(1), &seed(n), grants, 1_000, 3600).encode()
    )
}

/// An open listen: the raw socket its event stream comes on.
struct Listen {
    stream: TcpStream,
    buf: Vec<u8>,
    /// How far `buf` was read into events.
    read: usize,
}

impl Listen {
    fn open(addr: &str, auth: &str, id: u64, notifications: Value) -> Listen {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"notifications": notifications, "_meta": stateless_meta()}})
        .to_string();
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: {auth}\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        Listen {
            stream,
            buf: Vec::new(),
            read: 0,
        }
    }

    /// The next event's message (or the JSON body of an answer that is no
    /// stream), waiting up to `wait`.
    fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        loop {
            let text = String::from_utf8_lossy(&self.buf[self.read..]).into_owned();
            if self.read == 0 {
                if let Some(end) = text.find("\r\n\r\n") {
                    let head = text[..end].to_ascii_lowercase();
                    if head.contains("content-type: application/json") {
                        let len: usize = head
                            .split("content-length: ")
                            .nth(1)
                            .and_then(|v| v.lines().next()?.trim().parse().ok())
                            .unwrap_or(0);
                        let body = &self.buf[end + 4..];
                        if body.len() >= len {
                            self.read = self.buf.len();
                            return serde_json::from_slice(&body[..len]).ok();
                        }
                    }
                }
            }
            if let Some(start) = text.find("data: ") {
                if let Some(len) = text[start..].find('\n') {
                    self.read += text[..start + len].len() + 1;
                    let data = &text[start + "data: ".len()..start + len];
                    return Some(serde_json::from_str(data).unwrap());
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => {}
            }
        }
    }

    /// Everything that comes within `wait`.
    fn drain(&mut self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut all = Vec::new();
        while let Some(m) = self.next(deadline.saturating_duration_since(Instant::now())) {
            all.push(m);
        }
        all
    }
}

/// A caller listens to three resources and the tool list; its credential
/// reads one of them: dgw asks the upstream for that one only, and the
/// caller gets only its updates and the tool list's changes, under its own
/// subscription ID, while another caller's listen to the other resource
/// gets that one's.
#[test]
fn a_listen_gets_only_what_its_credential_may_read_and_asked_for() {
    let s = setup();
    let mine = token(2, &["docs:read:test://static-text"]);
    let theirs = token(3, &["docs:read:test://static-binary"]);
    let asked = json!({"toolsListChanged": true,
        "resourceSubscriptions": ["test://static-text", "test://static-binary", "test://watched-resource"]});
    let mut a = Listen::open(&s.gw.addr, &mine, 41, asked.clone());
    let mut b = Listen::open(&s.gw.addr, &theirs, 42, asked);
    let ack = a.next(Duration::from_secs(20)).expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://static-text"]}),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        41
    );
    let ack = b.next(Duration::from_secs(20)).expect("an acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["test://static-binary"])
    );

    touch(&s.upstream, "uri=test://static-binary");
    touch(&s.upstream, "uri=test://watched-resource");
    touch(&s.upstream, "uri=test://static-text&lists=1");
    let got = a.drain(Duration::from_secs(3));
    let methods: Vec<(String, Value)> = got
        .iter()
        .map(|m| {
            (
                m["method"].as_str().unwrap().to_owned(),
                m["params"]["uri"].clone(),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            (
                "notifications/resources/updated".to_owned(),
                json!("test://static-text")
            ),
            ("notifications/tools/list_changed".to_owned(), Value::Null),
        ],
        "{got:?}"
    );
    assert!(got
        .iter()
        .all(|m| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 41));
    let got = b.drain(Duration::from_secs(1));
    assert!(
        got.iter()
            .filter(|m| m["method"] == "notifications/resources/updated")
            .all(|m| m["params"]["uri"] == "test://static-binary"),
        "{got:?}"
    );
    assert!(got
        .iter()
        .any(|m| m["params"]["uri"] == "test://static-binary"));
}

/// A credential that may read none of what it names is acknowledged with
/// nothing and the stream ends; a listen that does not accept an event
/// stream, or whose filter is malformed, is refused, typed.
#[test]
fn a_listen_for_nothing_readable_or_malformed_is_answered_at_once() {
    let s = setup();
    let nobody = token(2, &["docs:read:test://nothing-here"]);
    let mut l = Listen::open(
        &s.gw.addr,
        &nobody,
        7,
        json!({"resourceSubscriptions": ["test://static-text"]}),
    );
    let ack = l.next(Duration::from_secs(20)).unwrap();
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");
    let end = l.next(Duration::from_secs(5)).unwrap();
    assert_eq!(end["id"], 7, "{end}");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");

    let mut body = json!({"jsonrpc": "2.0", "id": 8, "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}}});
    let (_, a) = stateless_post(&s.gw.addr, &[("Authorization", &nobody)], &mut body, None);
    assert_eq!(a["error"]["data"]["type"], "event_stream_required", "{a}");
    for bad in [
        json!("all"),
        json!({"resourceSubscriptions": ["../../etc/passwd", 5]}),
    ] {
        let mut l = Listen::open(&s.gw.addr, &nobody, 9, bad.clone());
        let a = l.next(Duration::from_secs(20)).unwrap_or(Value::Null);
        assert_eq!(a["error"]["data"]["type"], "invalid_params", "{bad}: {a}");
    }
}

/// A credential holds at most 4 listens; one freed by its caller going
/// away is available again at once (long before an unread stream would
/// be closed). An upstream flooding listens their callers do not read
/// grows nothing: past the queue its notifications are dropped and
/// counted.
#[test]
fn a_listen_flood_is_dropped_and_listens_are_bounded_per_credential() {
    let s = setup();
    let auth = token(2, &["docs:read:test://static-text"]);
    let asked = json!({"resourceSubscriptions": ["test://static-text"]});
    let mut held: Vec<Listen> = (0..4)
        .map(|i| Listen::open(&s.gw.addr, &auth, i, asked.clone()))
        .collect();
    for l in &mut held {
        assert!(l.next(Duration::from_secs(20)).is_some());
    }
    let mut fifth = Listen::open(&s.gw.addr, &auth, 5, asked.clone());
    let a = fifth.next(Duration::from_secs(20)).unwrap();
    assert_eq!(a["error"]["data"]["type"], "too_many_listens", "{a}");

    // One caller goes: its listen is closed and its place is free again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut again = Listen::open(&s.gw.addr, &auth, 6, asked.clone());
        let a = again.next(Duration::from_secs(20)).unwrap();
        if a["method"] == "notifications/subscriptions/acknowledged" {
            break;
        }
        assert_eq!(a["error"]["data"]["type"], "too_many_listens", "{a}");
        assert!(
            Instant::now() < deadline,
            "the gone caller's listen was never freed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // 2 000 updates of 10 KB each (20 MB) to listeners that read nothing.
    touch(&s.upstream, "uri=test://static-text&n=2000&pad=10000");
    let deadline = Instant::now() + Duration::from_secs(60);
    let dropped = || {
        s.gw.metrics()
            .lines()
            .filter(|l| {
                l.starts_with("dgw_mcp_relay_dropped_total") && l.contains("upstream=\"up\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    while dropped() < 1000.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(dropped() >= 1000.0, "{}", s.gw.metrics());
}
