//! The architecture, checked on the source (docs/architecture.md): no module
//! depends on itself through others, and every dependency points down the
//! layers: the core crate depends on no front, protocol or backend; fronts
//! never name a protocol or a backend; sled lives in its backend crate and
//! Talos in its protocol module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, by module path (`mcp::proxy`).
fn modules(dir: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(dir).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts[0] == "bin" {
                return None;
            }
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            Some((parts.join("::"), path))
        })
        .collect()
}

/// A file's code without its tests and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths after `prefix` (`crate::`, `super::`), with `{a, b::c}` groups
/// expanded: `mcp::proxy`, `state::error`.
fn paths(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let base = rest[..end].trim_end_matches(':').to_owned();
        out.push(base.clone());
        if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
            let close = rest[end..].find('}').map_or(rest.len(), |c| end + c);
            for item in rest[end + 1..close].split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if item.starts_with(|c: char| c.is_ascii_lowercase()) && item != "self" {
                    out.push(format!("{base}::{item}"));
                }
            }
        }
    }
    out
}

/// The longest module that `path` names.
fn resolve<'a>(modules: &'a BTreeMap<String, PathBuf>, path: &str) -> Option<&'a str> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find_map(|m| modules.get_key_value(&m).map(|(k, _)| k.as_str()))
}

/// Module → the modules it uses (not itself, not its ancestors).
fn graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(dir);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, path) in &modules {
        let code = code(path);
        let parent: Vec<&str> = name.split("::").collect();
        let parent = parent[..parent.len().saturating_sub(1)].join("::");
        let used =
            paths(&code, "crate::")
                .into_iter()
                .chain(paths(&code, "super::").into_iter().map(|p| {
                    if parent.is_empty() {
                        p
                    } else {
                        format!("{parent}::{p}")
                    }
                }));
        let targets = edges.entry(name.clone()).or_default();
        for p in used {
            if let Some(t) = resolve(&modules, &p) {
                if t != name && !name.starts_with(&format!("{t}::")) && !t.is_empty() {
                    targets.insert(t.to_owned());
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit(
        v: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(v.to_owned()) {
            return;
        }
        for w in g.get(v).into_iter().flatten() {
            visit(w, g, seen, order);
        }
        order.push(v.to_owned());
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for v in g.keys() {
        visit(v, g, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (v, ws) in g {
        for w in ws {
            reversed.entry(w.clone()).or_default().insert(v.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        let mut component = Vec::new();
        visit(v, &reversed, &mut assigned, &mut component);
        if component.len() > 1 {
            out.push(component);
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_module_depends_on_itself() {
    for dir in [
        "src",
        "adapters/agenta/src",
        "adapters/delegateos/src",
        "adapters/ldp/src",
        "adapters/motebit/src",
        "adapters/talos/src",
        "crates/core/src",
        "crates/state-sled/src",
        "crates/state-memory/src",
        "crates/net/src",
        "crates/front-mcp/src",
        "crates/front-grpc/src",
    ] {
        let g = graph(&root().join(dir));
        assert!(g.len() > 1, "{dir}: the walk found modules");
        assert_eq!(cycles(&g), Vec::<Vec<String>>::new(), "cycles in {dir}");
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(cycles(&g).len(), 1);
    assert_eq!(cycles(&g)[0].len(), 3);
}

#[test]
fn dependencies_point_down_the_layers() {
    // The binary's own modules: a backend is chosen in `state` alone (its
    // `[state]` section names the choices).
    let backends: Vec<String> = ["sled", "dgw_state_"]
        .iter()
        .flat_map(|w| naming("src", w))
        .filter(|m| m != "state" && m != "config::state")
        .collect();
    assert!(
        backends.is_empty(),
        "a backend named outside state: {backends:?}"
    );
    // The fronts: framing only. Protocols come from the registry, state
    // through the core's traits; nothing of the binary's.
    for front in [
        "front-jsonrpc",
        "front-mcp",
        "front-grpc",
        "front-http",
        "net",
    ] {
        let deps = dependencies(&format!("crates/{front}/Cargo.toml"));
        assert!(deps.contains(&"dgw-core".to_owned()), "{front}: {deps:?}");
        for banned in [
            "delegate-gateway",
            "talos",
            "agenta",
            "motebit",
            "ldp",
            "dgw-state-sled",
            "dgw-state-memory",
            "sled",
        ] {
            assert!(
                !deps.iter().any(|d| d == banned),
                "{front} depends on {banned}"
            );
        }
    }
    // Plumbing under the fronts, not beside them.
    let net = dependencies("crates/net/Cargo.toml");
    assert!(!net.iter().any(|d| d.starts_with("dgw-front")), "{net:?}");
}

/// The `[dependencies]` of a crate's manifest, by name.
fn dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(manifest)).unwrap();
    let section = text
        .split("\n[")
        .find(|s| s.starts_with("dependencies]"))
        .unwrap_or_default();
    section
        .lines()
        .skip(1)
        .filter_map(|l| {
            let name = l.split(['=', '.']).next()?.trim();
            (!name.is_empty() && !name.starts_with('#')).then(|| name.to_owned())
        })
        .collect()
}

#[test]
fn the_core_depends_on_no_transport_backend_or_protocol_but_delegateos() {
    let core = dependencies("crates/core/Cargo.toml");
    assert!(core.contains(&"delegateos".to_owned()), "{core:?}");
    for banned in [
        "sled", "redis", "hyper", "tonic", "talos", "agenta", "motebit", "ldp", "rustls", "clap",
    ] {
        assert!(
            !core.iter().any(|d| d == banned),
            "core depends on {banned}"
        );
    }
    for backend in [
        "crates/state-sled/Cargo.toml",
        "crates/state-memory/Cargo.toml",
    ] {
        let deps = dependencies(backend);
        assert!(deps.contains(&"dgw-core".to_owned()), "{backend}: {deps:?}");
        for banned in ["hyper", "tonic", "talos", "delegate-gateway"] {
            assert!(
                !deps.iter().any(|d| d == banned),
                "{backend} depends on {banned}"
            );
        }
    }
}

/// Modules under `dir` whose code (comments and tests aside) contains `word`.
fn naming(dir: &str, word: &str) -> Vec<String> {
    modules(&root().join(dir))
        .into_iter()
        .filter(|(_, path)| code(path).contains(word))
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn sled_and_talos_are_named_in_their_own_modules_only() {
    let elsewhere = [
        "src",
        "crates/core/src",
        "crates/state-memory/src",
        "crates/net/src",
        "crates/front-jsonrpc/src",
        "crates/front-mcp/src",
        "crates/front-grpc/src",
        "crates/front-http/src",
    ];
    let sled: Vec<String> = elsewhere
        .iter()
        .flat_map(|d| naming(d, "sled::"))
        .filter(|m| m != "state")
        .collect();
    assert!(sled.is_empty(), "sled named outside its backend: {sled:?}");
    let talos: Vec<String> = elsewhere
        .iter()
        .chain(&["crates/state-sled/src"])
        .flat_map(|d| naming(d, "talos::").into_iter().chain(naming(d, "_talos_")))
        .filter(|m| {
            !m.starts_with("protocols::talos") && m != "protocols" && m != "config" && m != "serve"
        })
        .collect();
    assert!(
        talos.is_empty(),
        "Talos named outside its module: {talos:?}"
    );
}

/// Each protocol's adapter crate is named by its own modules in the binary
/// (`protocols::<name>`, and its `dgw <name>` commands, which `cli`
/// dispatches to by the same name) and by the wiring (config, serve),
/// nowhere else; the crates under the binary never.
#[test]
fn each_protocol_is_named_in_its_own_modules_only() {
    for (word, own) in [
        ("agenta::", "agenta"),
        ("motebit::", "motebit"),
        ("ldp::", "ldp"),
    ] {
        let in_binary: Vec<String> = naming("src", word)
            .into_iter()
            .filter(|m| {
                m != "config"
                    && m != "serve"
                    && m != "protocols"
                    && m != "cli"
                    && !m.starts_with(&format!("protocols::{own}"))
                    && *m != format!("cli::{own}")
            })
            .collect();
        assert!(in_binary.is_empty(), "{word} named in {in_binary:?}");
        for dir in [
            "crates/core/src",
            "crates/front-jsonrpc/src",
            "crates/front-mcp/src",
            "crates/front-grpc/src",
            "crates/front-http/src",
            "crates/state-sled/src",
            "crates/state-memory/src",
        ] {
            assert!(naming(dir, word).is_empty(), "{word} named in {dir}");
        }
    }
}

/// Issue 32: a protocol is named (its adapter's paths, its binding's
/// module) only by its own modules and the binary's one list
/// (`protocols::MODULES`); config loading, `serve`, reload and the command
/// line iterate the list. Every crate but the protocol's own is silent
/// about it. DelegateOS's data model is the shared vocabulary, so only its
/// gateway code is a protocol's here.
#[test]
fn a_protocol_is_named_by_its_own_modules_and_the_list_line_only() {
    let crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| format!("crates/{}/src", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert!(crates.len() > 10, "{crates:?}");
    for own in ["talos", "agenta", "motebit", "ldp"] {
        for word in [format!("{own}::"), format!("protocols::{own}")] {
            let in_binary: Vec<String> = naming("src", &word)
                .into_iter()
                .filter(|m| {
                    m != "protocols"
                        && !m.starts_with(&format!("protocols::{own}"))
                        && *m != format!("cli::{own}")
                })
                .collect();
            assert!(in_binary.is_empty(), "{word} named in src: {in_binary:?}");
            for dir in crates
                .iter()
                .filter(|d| !d.starts_with(&format!("crates/proto-{own}/")))
            {
                let named = naming(dir, &word);
                assert!(named.is_empty(), "{word} named in {dir}: {named:?}");
            }
        }
    }
    // The wiring names none, nor their DelegateOS binding.
    for wiring in ["config", "serve", "reload", "cli"] {
        let path = modules(&root().join("src"))[wiring].clone();
        let text = code(&path);
        for name in ["talos", "agenta", "motebit", "ldp", "protocols::delegateos"] {
            assert!(!text.contains(name), "{wiring} names {name}");
        }
    }
}
