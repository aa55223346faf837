//! The deployment artifacts under deploy/, checked as far as this machine
//! can: no container registry is reachable here, so the Containerfile is
//! read, not built.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// Instructions of a Containerfile, continuation lines joined.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn the_containerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let steps = instructions(&read("deploy/container/Containerfile"));
    let froms: Vec<&String> = steps.iter().filter(|s| s.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a builder and a runtime stage: {froms:?}");
    assert!(froms[0].contains(" AS build"), "{}", froms[0]);
    assert!(
        froms[1].contains("-slim"),
        "a small runtime image: {}",
        froms[1]
    );
    let runtime: Vec<&String> = steps
        .iter()
        .skip_while(|s| !s.starts_with("FROM ") || s.contains(" AS build"))
        .collect();
    let find = |prefix: &str| runtime.iter().find(|s| s.starts_with(prefix)).copied();
    // The runtime copies only the binary out of the builder.
    let copy = find("COPY --from=build").expect("the binary comes from the builder");
    assert!(copy.contains("target/release/dgw"), "{copy}");
    // Not root: a numeric non-zero user, set before the entrypoint.
    let user = find("USER ").expect("a USER");
    let uid = user["USER ".len()..].split(':').next().unwrap();
    assert!(uid.parse::<u32>().is_ok_and(|u| u != 0), "{user}");
    let entry = find("ENTRYPOINT ").expect("an ENTRYPOINT");
    assert_eq!(entry, r#"ENTRYPOINT ["/usr/local/bin/dgw", "serve"]"#);
    let check = find("HEALTHCHECK ").expect("a HEALTHCHECK");
    assert!(check.contains("/healthz"), "{check}");
    // The default command points at a config path the image documents.
    assert!(find("CMD ").is_some_and(|c| c.contains("/etc/dgw/gateway.toml")));
    // The healthcheck's Host header passes dgw's Host check on loopback.
    assert!(check.contains("Host: localhost:8080"), "{check}");
}

fn promtool(args: &[&str]) -> std::process::Output {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    std::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool ({e}): install Debian's prometheus package (tests/setup.sh does)")
        })
}

/// The alert rules load, and each fires on its own input series and not
/// on healthy ones (`rules.test.yml`).
#[test]
fn the_alert_rules_pass_promtool() {
    let check = promtool(&["check", "rules", "rules.yml"]);
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let test = promtool(&["test", "rules", "rules.test.yml"]);
    assert!(
        test.status.success(),
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
}

/// Every metric the rules name is one dgw exports (a typo would make an
/// alert that can never fire).
#[test]
fn the_alert_rules_name_only_metrics_dgw_exports() {
    let rules = read("deploy/prometheus/rules.yml");
    // The core's metrics and each state backend's own.
    let telemetry = [
        "crates/core/src/telemetry.rs",
        "crates/state-sled/src/telemetry.rs",
        "crates/state-redis/src/telemetry.rs",
    ]
    .map(read)
    .concat();
    let mut names: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("dgw_"))
        .map(|w| w.strip_suffix("_bucket").unwrap_or(w))
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        assert!(
            telemetry.contains(&format!("\"{name}\"")),
            "{name} is not a metric the core or a state backend defines"
        );
    }
}

/// The PromQL expressions of the Grafana dashboard, one per target.
fn dashboard_queries() -> Vec<String> {
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/dgw.json")).unwrap();
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "{} panels", panels.len());
    let mut exprs = Vec::new();
    for panel in panels {
        let targets = panel["targets"].as_array().expect("each panel has targets");
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for t in targets {
            exprs.push(t["expr"].as_str().expect("a PromQL expr").to_owned());
        }
    }
    exprs
}

/// A dashboard query with its variables as Grafana fills them: every
/// job and instance, budgets aggregated by `aggregation`.
fn filled(expr: &str, aggregation: &str) -> String {
    expr.replace("$job", ".+")
        .replace("$instance", ".+")
        .replace("$budget_aggregation", aggregation)
}

/// The `dgw_` metric names in PromQL or prose (a histogram's `_bucket`
/// series named by its own name).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("dgw_"))
        .map(|w| w.strip_suffix("_bucket").unwrap_or(w).to_owned())
        .collect()
}

/// The metric families on a `/metrics` page, by their `# TYPE` lines.
fn families(metrics: &str) -> std::collections::BTreeSet<String> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Series labelled by what only an event names, which no gateway can
/// export at zero before it: an upstream's tools (known once it answers,
/// and changing), the top delegations (by spend), a protocol's own events
/// and what its sweep measures.
const EVENT_LABELLED: &[&str] = &[
    "dgw_mcp_tool_calls_total",
    "dgw_delegation_spent_microcents",
    "dgw_delegation_budget_microcents",
    "dgw_protocol_events_total",
    "dgw_protocol_stored_bytes",
    "dgw_protocol_stored_records",
];

/// A gateway as a first day starts it, with gRPC and an upstream, scraped
/// at once: `(its /metrics, the gateway)`.
fn first_scrape(dir: &Path) -> (String, Gateway) {
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n[[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nfixed_resource = \"/echo\"\n"
    );
    let config = gateway_config(dir, &[("acme", seed(1).principal_id())], &extra);
    let gw = Gateway::start(&config);
    (gw.metrics(), gw)
}

/// A fresh gateway's first scrape has every series the dashboard and the
/// alert rules read, but those labelled by an event; the labelled counters
/// at zero for every value known at start (every denial type of every
/// protocol, every front's methods and outcomes); and its revocation gauge
/// says the index is complete, not that something is revoked. Counting
/// then starts from those zeros.
#[test]
fn a_fresh_gateway_exports_every_series_the_dashboard_and_alerts_read() {
    let dir = tempfile::tempdir().unwrap();
    let (metrics, gw) = first_scrape(dir.path());
    let exported = families(&metrics);
    let mut read = metric_names(&read("deploy/prometheus/rules.yml"));
    read.extend(dashboard_queries().iter().flat_map(|e| metric_names(e)));
    assert!(read.len() >= 15, "{read:?}");
    for name in &read {
        assert!(
            exported.contains(name) || EVENT_LABELLED.contains(&name.as_str()),
            "{name} is read by the dashboard or an alert but not on a fresh gateway's /metrics:\n{metrics}"
        );
    }
    let zero = |series: &str| {
        assert!(
            metrics.lines().any(|l| l == format!("{series} 0")),
            "no `{series} 0` on the first scrape:\n{metrics}"
        )
    };
    for name in [
        "dgw_revocations_total",
        "dgw_connections_shed_total",
        "dgw_connections_refused_total",
        "dgw_reservations_expired_total",
        "dgw_budget_leases_total",
        "dgw_sled_flush_duration_seconds_count",
        "dgw_sled_flush_batch_size_count",
        "dgw_revocation_feed_lag_seconds_count",
        "dgw_authorize_duration_seconds_count",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(&format!("{name} "))),
            "no {name}:\n{metrics}"
        );
    }
    zero("dgw_revocations_total");
    zero("dgw_connections_shed_total");
    for protocol in ["delegateos", "talos", "motebit"] {
        for t in delegateos::DenialType::EVERY {
            zero(&format!(
                "dgw_denials_total{{protocol=\"{protocol}\",type=\"{}\"}}",
                t.as_str()
            ));
        }
        zero(&format!(
            "dgw_denials_total{{protocol=\"{protocol}\",type=\"invalid_params\"}}"
        ));
    }
    for outcome in ["ok", "denied", "error", "cancelled"] {
        zero(&format!("dgw_requests_total{{front=\"jsonrpc\",method=\"delegateos/authorize\",outcome=\"{outcome}\"}}"));
        zero(&format!(
            "dgw_requests_total{{front=\"grpc\",method=\"Authorize\",outcome=\"{outcome}\"}}"
        ));
        zero(&format!(
            "dgw_requests_total{{front=\"mcp\",method=\"tools/call\",outcome=\"{outcome}\"}}"
        ));
    }
    zero("dgw_token_cache_lookups_total{result=\"hit\"}");
    zero("dgw_mcp_upstream_stderr_dropped_bytes_total{upstream=\"local\"}");
    assert!(metrics.contains("dgw_mcp_upstream_duration_seconds_count{upstream=\"local\"} 0"));
    // Nothing revoked, and the gauge says so in its name.
    assert!(
        metrics
            .lines()
            .any(|l| l == "dgw_revocation_index_complete 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("dgw_revocations_current"), "{metrics}");

    // Counting starts from the zeros.
    let e = gw.err(
        "delegateos/authorize",
        json!({"dct": "AAAA", "namespace": "docs", "action": "read", "resource": "/a"}),
    );
    assert_eq!(e["data"]["type"], "malformed_token", "{e}");
    let after = gw.metrics();
    assert!(
        after
            .lines()
            .any(|l| l == "dgw_denials_total{protocol=\"delegateos\",type=\"malformed_token\"} 1"),
        "{after}"
    );
    assert!(after.lines().any(|l| l == "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/authorize\",outcome=\"denied\"} 1"), "{after}");
}

/// README.md's list of metrics is what a fresh gateway exports: every name
/// on its first `/metrics` is in the list, and every name in the list is
/// on it or labelled by an event.
#[test]
fn the_readmes_metric_list_is_a_fresh_gateways() {
    let readme = read("README.md");
    let start = readme
        .find("\nMetrics (")
        .expect("the README's metric list");
    let end = start + readme[start..].find("Storage layout").expect("its end");
    let listed = metric_names(&readme[start..end]);
    let dir = tempfile::tempdir().unwrap();
    let (metrics, _gw) = first_scrape(dir.path());
    let exported = families(&metrics);
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "on /metrics, not in README.md: {unlisted:?}"
    );
    let missing: Vec<_> = listed
        .iter()
        .filter(|n| !exported.contains(*n) && !EVENT_LABELLED.contains(&n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "in README.md, not on a fresh /metrics: {missing:?}"
    );
    for name in EVENT_LABELLED {
        assert!(listed.contains(*name), "{name} is not in README.md");
    }
}

/// Every panel can be narrowed to some gateways (`job`, `instance`), and
/// the per-tenant budget panels say, and let the operator choose, how
/// replicas' figures add up: summed for gateways on their own state, one
/// value per tenant for replicas sharing Redis.
#[test]
fn the_dashboard_narrows_by_job_and_instance_and_adds_budgets_by_state() {
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/dgw.json")).unwrap();
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert!(var("job")["query"]["query"]
        .as_str()
        .unwrap()
        .contains("label_values("));
    assert!(var("instance")["query"]["query"]
        .as_str()
        .unwrap()
        .contains("job=~\"$job\""));
    let values: Vec<&str> = var("budget_aggregation")["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["sum", "max"]);
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for name in metric_names(expr) {
                let scoped = expr.match_indices(&name).all(|(i, _)| {
                    let rest = &expr[i + name.len()..];
                    let rest = rest.strip_prefix("_bucket").unwrap_or(rest);
                    rest.starts_with("{job=~\"$job\",instance=~\"$instance\"")
                });
                assert!(scoped, "{}: {expr}", panel["title"]);
            }
            if expr.contains("dgw_budget_") || expr.contains("dgw_delegation_") {
                assert!(expr.contains("$budget_aggregation by (tenant"), "{expr}");
                let said = panel["description"].as_str().unwrap_or_default();
                assert!(said.contains("sled") && said.contains("Redis"), "{said}");
            }
        }
    }
}

/// The dashboard loads: valid JSON, every panel's PromQL parses (promtool
/// checks it as recording rules, with each budget aggregation), and every
/// metric it names is on `/metrics` of a running dgw that saw the events
/// behind them.
#[test]
fn the_dashboard_parses_and_names_only_metrics_a_running_dgw_exports() {
    let exprs = dashboard_queries();
    let dir = tempfile::tempdir().unwrap();
    let rules: String = ["sum", "max"]
        .iter()
        .flat_map(|a| exprs.iter().map(move |e| filled(e, a)))
        .enumerate()
        .map(|(i, e)| {
            format!(
                "      - record: dashboard_query_{i}\n        expr: {}\n",
                json!(e)
            )
        })
        .collect();
    let file = dir.path().join("queries.yml");
    std::fs::write(
        &file,
        format!("groups:\n  - name: dashboard\n    rules:\n{rules}"),
    )
    .unwrap();
    let check = promtool(&["check", "rules", file.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // A gateway that sees every kind of event the dashboard shows.
    let root = seed(1);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        "max_connections = 3\n[budget]\nreservation_ttl = \"3s\"\nsweep_interval = \"100ms\"\n[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\ntimeout = \"2s\"\n[[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nfixed_resource = \"/echo\"\ncost_microcents = 1\n"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let t = root_token(
        &root,
        &seed(2),
        &["docs:read:/p/**", "demo:echo:*"],
        1000,
        3600,
    );
    let token = t.encode();
    let ask = |resource: &str| json!({"dct": token, "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": 5});
    let a = gw.ok("delegateos/authorize", ask("/p/a"));
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": a["reservationId"], "actualMicrocents": 5, "dct": token}),
    );
    gw.err("delegateos/authorize", ask("/elsewhere"));
    gw.ok("delegateos/authorize", ask("/p/left-to-expire"));
    let mut mcp = McpHttp::connect(&gw.addr, Some(&token));
    assert_eq!(
        text_of(&mcp.call("echo", json!({"text": "hi"}), None)),
        "hi"
    );
    let other = root_token_for(&root, &seed(3), &["docs:read:/x/**"], 10, 3600, del(9));
    let rev = delegateos::RevocationEntry::sign(
        &root,
        &other.revocation_ids()[0],
        at(0),
        delegateos::RevocationScope::Block,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    // Idle sockets past max_connections: the oldest is shed.
    let _idle: Vec<_> = (0..4)
        .map(|_| std::net::TcpStream::connect(&gw.addr).unwrap())
        .collect();
    // Past the reservation TTL (3 s, long enough for node to start the
    // upstream on a loaded machine) and a sweep.
    std::thread::sleep(std::time::Duration::from_millis(3500));

    let metrics = gw.metrics();
    let exported = |name: &str| {
        metrics.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['{', ' ']) || rest.starts_with("_bucket"))
        })
    };
    let mut names: Vec<String> = exprs
        .iter()
        .flat_map(|e| {
            e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("dgw_"))
                .map(|w| w.strip_suffix("_bucket").unwrap_or(w).to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= 12, "{names:?}");
    for name in &names {
        assert!(exported(name), "{name} is not on /metrics:\n{metrics}");
    }
    // The top spender's own gauges: 5 settled plus the MCP call's 1, of 1000.
    let delegation = t.token().authority.delegation_id.as_str().to_owned();
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("delegation=\"{delegation}\"")))
            .unwrap_or_else(|| panic!("no {name} for {delegation}:\n{metrics}"))
            .to_owned()
    };
    assert!(line("dgw_delegation_spent_microcents").contains("tenant=\"acme\""));
    assert!(
        line("dgw_delegation_spent_microcents").ends_with(" 6"),
        "{}",
        line("dgw_delegation_spent_microcents")
    );
    assert!(line("dgw_delegation_budget_microcents").ends_with(" 1000"));
}

/// The Redis configuration `deploy/` ships keeps what dgw acknowledges
/// (`appendonly yes`, `appendfsync always`), never evicts state, and asks
/// for a password; and `redis-server` accepts it.
#[test]
fn the_redis_config_keeps_what_dgw_acknowledges() {
    let text = read("deploy/redis/redis.conf");
    let settings: Vec<(String, String)> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect();
    let get = |key: &str| {
        settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("appendonly"), Some("yes"));
    assert_eq!(get("appendfsync"), Some("always"));
    assert_eq!(get("maxmemory-policy"), Some("noeviction"));
    assert!(get("requirepass").is_some_and(|p| !p.is_empty()));
    // redis-server reads it, then exits: with port 0 and no TLS port it
    // has nowhere to listen.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("redis-server")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/redis/redis.conf"))
        .args(["--port", "0", "--dir"])
        .arg(dir.path())
        .output()
        .expect("redis-server runs");
    let (log, errors) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(log.contains("Configuration loaded"), "{log}{errors}");
    assert!(!errors.contains("FATAL CONFIG"), "{errors}");
}

/// The unit's `Key=value` lines of one section, in order.
fn unit_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            let (k, v) = line.split_once('=').unwrap();
            out.push((k.to_owned(), v.to_owned()));
        }
    }
    out
}

#[test]
fn the_systemd_unit_is_hardened_and_reloads_with_sighup() {
    let unit = read("deploy/systemd/dgw.service");
    let service = unit_section(&unit, "Service");
    let value = |key: &str| {
        service
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {key}="))
    };
    assert_eq!(value("ExecReload"), "/bin/kill -HUP $MAINPID");
    assert!(value("ExecStart").starts_with("/usr/local/bin/dgw serve --config "));
    for (key, expected) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("StateDirectory", "dgw"),
        ("StateDirectoryMode", "0700"),
        ("UMask", "0077"),
        ("CapabilityBoundingSet", ""),
        ("PrivateTmp", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
    ] {
        assert_eq!(value(key), expected, "{key}");
    }

    // systemd's own check, with the unit's paths pointed at this build
    // (tests/setup.sh installs Debian's systemd for systemd-analyze).
    assert!(
        std::process::Command::new("systemd-analyze")
            .arg("--version")
            .output()
            .is_ok(),
        "systemd-analyze is missing: run tests/setup.sh (Debian's systemd package)"
    );
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("dgw.service");
    std::fs::write(
        &here,
        unit.replace("/usr/local/bin/dgw", env!("CARGO_BIN_EXE_dgw")),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&here)
        .output()
        .unwrap();
    let complaints = String::from_utf8_lossy(&out.stderr);
    // verify exits 0 on unknown keys and bad values; it names the file.
    assert!(
        out.status.success() && !complaints.contains("dgw.service"),
        "{complaints}"
    );

    // ExecStartPre's check accepts a config laid out as the unit expects.
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], "");
    let check = run(&["config", "check", config.to_str().unwrap()]);
    assert!(check.status.success(), "{}", stderr(&check));
}

/// The documents of a YAML file as JSON, read by PyYAML from `tests/.venv`.
fn yaml_documents(rel: &str) -> Vec<Value> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.venv/bin");
    let out = std::process::Command::new(venv.join("python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .output()
        .expect("tests/.venv is missing: run tests/setup.sh (the README's test command does)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_kubernetes_manifests_validate_and_run_three_unprivileged_probed_replicas() {
    // The Kubernetes API's own schemas, strict: an unknown or misspelt field fails.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let out = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.venv/bin/kubernetes-validate"),
    )
    .args(["--strict", "--no-warn"])
    .arg(dir.join("dgw.yaml"))
    .arg(dir.join("redis.yaml"))
    .output()
    .expect("tests/.venv is missing: run tests/setup.sh");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches(" passed for resource ").count(), 6, "{said}");

    let dgw = yaml_documents("deploy/kubernetes/dgw.yaml");
    let deployment = kind(&dgw, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert!(c["image"].as_str().unwrap().starts_with("dgw"));
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(c["resources"]["requests"]["cpu"].is_string());
    let ports: Vec<i64> = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [8080, 50051]);
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert!(mounts.contains(&"/etc/dgw/config"), "{mounts:?}");
    // Secrets come from the Secret, not the ConfigMap.
    let env: Vec<&str> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["valueFrom"]["secretKeyRef"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, ["dgw-secrets", "dgw-secrets"]);
    let pdb = kind(&dgw, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 2);
    assert_eq!(kind(&dgw, "Service")["spec"]["ports"][0]["port"], 8080);
    let monitor = yaml_documents("deploy/kubernetes/servicemonitor.yaml");
    assert_eq!(
        kind(&monitor, "ServiceMonitor")["spec"]["endpoints"][0]["path"],
        "/metrics"
    );

    // The config the pods run, with what the entrypoint appends, is one
    // `dgw config check` accepts.
    let toml = kind(&dgw, "ConfigMap")["data"]["gateway.toml"]
        .as_str()
        .unwrap()
        .replace("/var/lib/dgw", "state")
        + "\n[state]\nbackend = \"redis\"\nurl = \"redis://:pw@dgw-redis:6379/0\"\n"
        + &format!(
            "\n[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{}\"\n",
            "ab".repeat(32)
        );
    let tmp = tempfile::tempdir().unwrap();
    let check = config_check_in(tmp.path(), &toml);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let redis = yaml_documents("deploy/kubernetes/redis.yaml");
    let args = kind(&redis, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        args.contains("--appendonly yes --appendfsync always"),
        "{args}"
    );
}

#[test]
fn the_compose_stack_wires_two_replicas_redis_prometheus_and_grafana() {
    // Docker Compose is not on this machine (nor a registry): the file is
    // read, and each piece it mounts is checked by the tool that reads it.
    let compose = &yaml_documents("deploy/compose.yaml")[0];
    let services = compose["services"].as_object().unwrap();
    let mut names: Vec<&str> = services.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "dgw-a",
            "dgw-b",
            "gateway-key",
            "grafana",
            "prometheus",
            "redis"
        ]
    );
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    for (name, service) in services {
        for volume in service["volumes"].as_array().into_iter().flatten() {
            let source = volume.as_str().unwrap().split(':').next().unwrap();
            if source.starts_with("./") {
                assert!(
                    deploy.join(source).exists(),
                    "{name} mounts {source}, which is missing"
                );
            }
        }
    }
    for replica in ["dgw-a", "dgw-b"] {
        let s = &services[replica];
        assert_eq!(s["build"]["dockerfile"], "deploy/container/Containerfile");
        assert!(deploy
            .join(s["build"]["context"].as_str().unwrap())
            .join("deploy/container/Containerfile")
            .exists());
        assert_eq!(s["read_only"], true);
        assert_eq!(s["cap_drop"], json!(["ALL"]));
        assert_eq!(s["depends_on"]["redis"]["condition"], "service_healthy");
        assert_eq!(
            s["depends_on"]["gateway-key"]["condition"],
            "service_completed_successfully"
        );
    }
    let redis_command = services["redis"]["command"].to_string();
    assert!(
        redis_command.contains("/usr/local/etc/redis/redis.conf"),
        "{redis_command}"
    );

    // Prometheus reads its config (with the rules beside it, as mounted)
    // and scrapes both replicas by name.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        deploy.join("compose/prometheus.yml"),
        tmp.path().join("prometheus.yml"),
    )
    .unwrap();
    std::fs::copy(
        deploy.join("prometheus/rules.yml"),
        tmp.path().join("rules.yml"),
    )
    .unwrap();
    let check = std::process::Command::new("promtool")
        .args(["check", "config", "prometheus.yml"])
        .current_dir(tmp.path())
        .output()
        .expect("promtool (tests/setup.sh installs it)");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let prometheus = &yaml_documents("deploy/compose/prometheus.yml")[0];
    assert_eq!(
        prometheus["scrape_configs"][0]["static_configs"][0]["targets"],
        json!(["dgw-a:8080", "dgw-b:8080"])
    );

    // Grafana's data source is the Prometheus service; its dashboards come
    // from where compose mounts dgw.json.
    let datasource =
        &yaml_documents("deploy/compose/grafana/provisioning/datasources/prometheus.yaml")[0];
    assert_eq!(
        datasource["datasources"][0]["url"],
        "http://prometheus:9090"
    );
    let dashboards = &yaml_documents("deploy/compose/grafana/provisioning/dashboards/dgw.yaml")[0];
    let path = dashboards["providers"][0]["options"]["path"]
        .as_str()
        .unwrap();
    assert!(services["grafana"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v
            .as_str()
            .unwrap()
            .ends_with(&format!("{path}/dgw.json:ro"))));

    // The replicas' config, as the entrypoint writes it, is valid.
    let config = std::fs::read_to_string(deploy.join("compose/gateway.toml"))
        .unwrap()
        .replace("@REDIS_PASSWORD@", "0123456789abcdef")
        .replace("/var/lib/dgw", "state");
    let check = config_check_in(tmp.path(), &config);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// docs/operations.md, "Back up and restore": a stopped gateway's data_dir,
/// copied elsewhere, starts as the same gateway: what was spent stays
/// spent, revocations hold, and the audit chain runs on and verifies.
#[test]
fn a_stopped_data_dir_copied_elsewhere_is_the_same_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], "");
    let mut gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 100, 3600);
    let t = token.encode();
    let authorize = |gw: &Gateway, cost: u64| {
        gw.call(
            "delegateos/authorize",
            json!({"dct": t, "namespace": "docs", "action": "read",
                   "resource": "/project/a", "costMicrocents": cost}),
        )
    };
    let a = authorize(&gw, 60);
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": a["result"]["reservationId"], "actualMicrocents": 60, "dct": t}),
    );
    let revoked = root_token(&root, &seed(3), &["docs:read:/project/**"], 100, 3600);
    let rev = delegateos::RevocationEntry::sign(
        &root,
        &revoked.revocation_ids()[0],
        at(0),
        delegateos::RevocationScope::Block,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert!(gw.terminate().success());

    // The backup: a copy of the stopped data_dir, restored elsewhere.
    let restored = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir.path().join("data"))
        .arg(restored.path().join("data"))
        .status()
        .unwrap();
    assert!(copied.success());
    let config = gateway_config(restored.path(), &[("acme", root.principal_id())], "");
    let mut gw = Gateway::start(&config);
    assert_eq!(
        authorize(&gw, 41)["error"]["data"]["type"],
        "budget_exceeded"
    );
    assert_eq!(authorize(&gw, 40)["result"]["allowed"], true);
    let e = gw.err(
        "delegateos/authorize",
        json!({"dct": revoked.encode(), "namespace": "docs", "action": "read",
               "resource": "/project/a", "costMicrocents": 0}),
    );
    assert_eq!(e["data"]["type"], "revoked");
    assert!(gw.terminate().success());
    let gateway = gateway_principal(&restored.path().join("data"));
    let log = restored.path().join("data/audit");
    let verified = audit_verify(&log, &gateway);
    assert!(verified.status.success(), "{}", stdout(&verified));
}
