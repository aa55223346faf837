//! Docs are tests (issue 37): every `sh` block in README.md and
//! docs/**/*.md either runs here as written, its output checked against
//! [`CHECKS`], or says in its fence why it cannot run here:
//! ```` ```sh (not run here: REASON) ````. A block that is neither fails
//! the test, as does a block that fails or whose checked output changed.
//!
//! How a document runs: its runnable blocks in order, in one bash session
//! (`set -euo pipefail`), in a temporary directory laid out like the
//! repository's root (config/, docs/, adapters/ and tests/ linked in, the
//! rest fresh), in a network namespace of its own (`unshare -rn`), so the
//! documented ports (8080, 8081) are free and nothing outside is reached.
//! `dgw` on PATH and `cargo run … --bin dgw -- ARGS` run the dgw this test
//! was built with. A line that starts a gateway (`dgw serve …`, `cargo run
//! … -- serve …`) runs in the background, as a reader's other shell would,
//! after the gateways it started before are stopped; the next line runs
//! once it listens. The lines in [`LINE_SKIPS`] are not run, and are
//! listed with their reason, as are the blocks not run.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A runnable block's checks: the block is the one in `doc` whose first
/// line is `first_line`; each of `expect` must appear in what it printed.
struct Check {
    doc: &'static str,
    first_line: &'static str,
    expect: &'static [&'static str],
}

const CHECKS: &[Check] = &[
    Check {
        doc: "README.md",
        first_line: "cargo run --release --bin dgw -- serve --config config/gateway.toml",
        expect: &[],
    },
    Check {
        doc: "README.md",
        first_line: "dgw() { cargo run -q --release --bin dgw -- \"$@\"; }",
        expect: &[
            "\"allowed\":true",
            "\"settled\":true",
            "\"chargedMicrocents\":80",
            "\"spentMicrocents\":80",
            "dgw_requests_total{",
        ],
    },
    Check {
        doc: "README.md",
        first_line: "dgw admin-token new --name ops     # prints the secret, then the [[admin.tokens]] entry for the config",
        expect: &["[[admin.tokens]]", "name = \"ops\"", "sha256 = \""],
    },
    Check {
        doc: "README.md",
        first_line: "npm ci --prefix tests     # the reference filesystem MCP server, among the test packages",
        expect: &["\"text\":\"hello\\n\""],
    },
    Check {
        doc: "README.md",
        first_line: "ROOT=$(dgw keygen --out root.key)    # prints the root's principal ID",
        expect: &["\"revocationIds\"", "\"valid\": true", "\"remainingBudgetMicrocents\": 1000"],
    },
    Check {
        doc: "README.md",
        first_line: "dgw contract new --title \"Summarize\" --output-schema @docs/examples/schema.json \\",
        expect: &[
            "\"valid\": true",
            "\"passed\": true",
            "\"verifiedChildren\": []",
            "\"kind\": \"receipt\"",
            "\"integrity\": \"verified\"",
        ],
    },
    Check {
        doc: "README.md",
        first_line: "GATEWAY=$(dgw keygen --out gw.key)        # an existing gateway: the `gateway` its start line logs",
        expect: &["\"allowed\":true", "\"tenant\":\"acme\""],
    },
    Check {
        doc: "README.md",
        first_line: "dgw token revoke \"$(cat narrower)\" --key alice.key > entry.json    # the block Alice signed",
        expect: &["\"newlyRecorded\": true", "\"type\":\"revoked\""],
    },
    Check {
        doc: "docs/operations.md",
        first_line: "dgw config check config/gateway.toml",
        expect: &["config/gateway.toml: valid (http 127.0.0.1:8080, grpc 127.0.0.1:50051, 1 tenant(s), 0 upstream(s), 0 admin token(s), TLS off, traces off)"],
    },
];

/// Lines of runnable blocks that are not run here, with the reason.
const LINE_SKIPS: &[(&str, &str)] = &[
    (
        "tests/setup.sh && cargo nextest run --workspace",
        "it is the test run this runner is part of",
    ),
    (
        "npm ci --prefix tests     # the reference filesystem MCP server, among the test packages",
        "tests/setup.sh installed tests/node_modules before the tests ran",
    ),
];

/// A fenced `sh` block.
struct Block {
    doc: String,
    line: usize,
    /// Why it is not run here, when its fence says so.
    not_run: Option<String>,
    lines: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/**/*.md, relative to the repository.
fn documents() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut paths = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut paths);
    let mut docs: Vec<String> = paths
        .iter()
        .map(|p| p.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    docs.sort();
    docs
}

/// The `sh` blocks of a document.
fn blocks(doc: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        // A fence, not an inline code span that opens a line.
        let fence = line
            .trim_start()
            .strip_prefix("```")
            .filter(|rest| !rest.contains('`'));
        match (&mut open, fence) {
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some(b), None) => b.lines.push(line.to_owned()),
            (None, Some(info)) => {
                let info = info.trim();
                let lang = info.split_whitespace().next().unwrap_or("");
                if ["sh", "bash", "shell", "console"].contains(&lang) {
                    let not_run = info
                        .split_once("(not run here:")
                        .map(|(_, r)| r.trim_end_matches(')').trim().to_owned());
                    if let Some(r) = &not_run {
                        assert!(!r.is_empty(), "{doc}:{}: say why it is not run", i + 1);
                    }
                    open = Some(Block {
                        doc: doc.to_owned(),
                        line: i + 1,
                        not_run,
                        lines: Vec::new(),
                    });
                } else {
                    // Another language's block: skip to its end.
                    open = Some(Block {
                        doc: String::new(),
                        line: 0,
                        not_run: None,
                        lines: Vec::new(),
                    });
                }
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{doc}: a code block is not closed");
    out.into_iter().filter(|b| b.line > 0).collect()
}

fn check_of(b: &Block) -> Option<&'static Check> {
    let first = b.lines.first().map(String::as_str).unwrap_or("");
    CHECKS
        .iter()
        .find(|c| c.doc == b.doc && c.first_line == first)
}

/// Whether a line starts a gateway.
fn starts_gateway(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("dgw serve ") || (l.starts_with("cargo run ") && l.contains(" -- serve "))
}

/// The bash script that runs a document's runnable blocks.
fn script(blocks: &[&Block], skipped: &mut Vec<String>) -> String {
    let mut s = String::from(
        r#"set -euo pipefail
__pids=()
__stop() { for p in "${__pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; __pids=(); }
trap __stop EXIT
__serve() {
  __stop
  local out; out=$(mktemp serve.XXXXXX.out)
  eval "exec $1" > "$out" 2> "$out.err" &
  __pids+=($!)
  for _ in $(seq 1 600); do
    if grep -q '^dgw listening' "$out"; then return 0; fi
    if ! kill -0 "${__pids[-1]}" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "the gateway started by: $1 did not listen:" >&2; cat "$out.err" >&2; exit 1
}
"#,
    );
    for (n, b) in blocks.iter().enumerate() {
        writeln!(
            s,
            "printf '\\n@@block {n}\\n'; printf '\\n@@block {n}\\n' >&2"
        )
        .unwrap();
        for line in &b.lines {
            if let Some((_, why)) = LINE_SKIPS.iter().find(|(l, _)| l == line) {
                skipped.push(format!("{}:{}: line `{line}`: {why}", b.doc, b.line));
                continue;
            }
            if starts_gateway(line) {
                let command = line.split(" #").next().unwrap().trim();
                writeln!(s, "__serve {}", shell_quote(command)).unwrap();
            } else {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    s.push_str("printf '\\n@@end\\n'\n");
    s
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A directory laid out like the repository's root, with `dgw` and the
/// `cargo` that runs it on `.bin/`.
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["docs", "adapters", "tests"] {
        std::os::unix::fs::symlink(repo().join(name), dir.path().join(name)).unwrap();
    }
    // Copied, not linked: its files name `../data`, which must be the
    // site's, not the repository's.
    copy_dir(&repo().join("config"), &dir.path().join("config"));
    let bin = dir.path().join(".bin");
    std::fs::create_dir(&bin).unwrap();
    let dgw = env!("CARGO_BIN_EXE_dgw");
    std::os::unix::fs::symlink(dgw, bin.join("dgw")).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n# The docs runner's cargo: `cargo run [-q] [--release] --bin dgw -- ARGS` runs the dgw under test.\n\
             while [ $# -gt 0 ]; do case \"$1\" in\n\
             run|-q|--release) shift;;\n\
             --bin) [ \"$2\" = dgw ] || exit 97; shift 2;;\n\
             --) shift; exec {dgw:?} \"$@\";;\n\
             *) echo \"docs runner: cargo $* is not run here\" >&2; exit 97;;\n\
             esac; done\nexit 97\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// What each block printed, by its number in the script.
fn sections(stdout: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for line in stdout.lines() {
        if let Some(n) = line.strip_prefix("@@block ") {
            out.push((n.parse().unwrap(), String::new()));
        } else if line == "@@end" {
            break;
        } else if let Some((_, text)) = out.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

#[test]
fn every_command_block_runs_as_written_or_says_why_not() {
    for tool in ["unshare", "ip", "curl", "jq", "node", "bash"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "the docs runner needs {tool} (tests/setup.sh lists what the tests need)"
        );
    }
    let mut skipped = Vec::new();
    let mut unchecked = Vec::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in documents() {
        let all = blocks(&doc);
        let mut runnable = Vec::new();
        for b in &all {
            match (&b.not_run, check_of(b)) {
                (Some(why), _) => skipped.push(format!("{}:{}: {why}", b.doc, b.line)),
                (None, Some(_)) => runnable.push(b),
                (None, None) => unchecked.push(format!(
                    "{}:{} (first line `{}`)",
                    b.doc,
                    b.line,
                    b.lines.first().map(String::as_str).unwrap_or("")
                )),
            }
        }
        if runnable.is_empty() {
            continue;
        }
        let site = site();
        let text = script(&runnable, &mut skipped);
        std::fs::write(site.path().join(".docs.sh"), &text).unwrap();
        let path = format!(
            "{}:{}",
            site.path().join(".bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("unshare")
            .args(["-rn", "sh", "-c", "ip link set lo up && exec bash .docs.sh"])
            .current_dir(site.path())
            .env("PATH", path)
            .env_remove("DGW_ADMIN_TOKEN")
            .env_remove("DGW_DCT")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let printed = sections(&stdout);
        let last = printed.last().map(|(n, _)| *n);
        if !out.status.success() {
            let b = last.map(|n| runnable[n]);
            failures.push(format!(
                "{doc}: the block at line {} failed (exit {:?}):\n--- stdout\n{}\n--- stderr\n{}",
                b.map_or(0, |b| b.line),
                out.status.code(),
                printed.last().map(|(_, t)| t.as_str()).unwrap_or(""),
                stderr.rsplit("@@block").next().unwrap_or("")
            ));
            continue;
        }
        for (n, text) in &printed {
            let b = runnable[*n];
            ran += 1;
            for want in check_of(b).unwrap().expect {
                if !text.contains(want) {
                    failures.push(format!(
                        "{doc}: the block at line {} no longer prints {want:?}; it printed:\n{text}",
                        b.line
                    ));
                }
            }
        }
    }
    eprintln!("docs runner: {ran} block(s) ran; not run here:");
    for s in &skipped {
        eprintln!("  {s}");
    }
    if !unchecked.is_empty() {
        failures.push(format!(
            "command blocks neither checked in tests/docs.rs CHECKS nor marked ```sh (not run here: REASON):\n  {}",
            unchecked.join("\n  ")
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every check still names a block: a check whose block was rewritten
    // or removed must be updated with it.
    for c in CHECKS {
        assert!(
            blocks(c.doc).iter().any(|b| b.not_run.is_none()
                && b.lines.first().map(String::as_str) == Some(c.first_line)),
            "tests/docs.rs checks a block of {} starting `{}` that is gone",
            c.doc,
            c.first_line
        );
    }
}

/// The Agenta walk-through's files (docs/examples/agenta, docs/adapters/agenta.md)
/// are what a gateway accepts: the offer registered (its endpoint pointed
/// at a seller started here), the request paid, the receipt settled, the
/// verification recorded.
#[test]
fn the_agenta_example_files_are_accepted_as_written() {
    use support::market::{World, ADMIN};
    let read = |name: &str| -> serde_json::Value {
        let p = repo().join("docs/examples/agenta").join(name);
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
    };
    let w = World::new(1000, "buyer_verified", 600);
    let mut offer = read("offer.json");
    offer["seller_agent"]["endpoint"] = serde_json::json!(w.seller.url);
    let (status, body) = w.post(
        "/agenta/v0/offers",
        Some(&format!("Bearer {ADMIN}")),
        &offer,
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = w.buy(&read("request.json"));
    assert_eq!(status, 202, "{body}");
    let secret = w.secret_of("req-00000001");
    let (status, body) = w.report(Some(&secret), &read("completed.json"));
    assert_eq!(status, 200, "{body}");
    let state = w.state("req-00000001");
    assert_eq!(state["status"], "completed", "{state}");
    assert_eq!(state["charged_microcents"], 250_000_000u64);
    let (status, body) = w.post(
        "/agenta/v0/verification-results",
        Some(&w.dct()),
        &read("verification.json"),
    );
    assert_eq!(status, 200, "{body}");
}
