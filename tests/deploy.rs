//! The deployment artifacts under deploy/, checked as far as this machine
//! can: no container registry is reachable here, so the Containerfile is
//! read, not built.

use std::path::Path;

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
    let telemetry = read("src/telemetry.rs");
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
            "{name} is not a metric src/telemetry.rs defines"
        );
    }
}
