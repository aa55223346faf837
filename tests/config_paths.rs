//! Relative paths in a config are relative to the config file's directory
//! (issue 34, decision 194), for `serve`, `mcp` and `config check` alike,
//! wherever dgw is started; and a data directory that the former rule
//! (relative to the current directory) found elsewhere is never left
//! behind silently.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

mod support;

use std::path::Path;

use support::mcp::*;
use support::*;

/// A config in `conf/` naming every kind of file relatively.
fn write_config(conf: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(conf.join("secrets")).unwrap();
    secret_file(
        &conf.join("secrets"),
        "api.key",
        "sk-relative-0123456789",
        0o600,
    );
    let toml = r#"data_dir = "data"
key_file = "data/gateway.key"
[server]
http = "127.0.0.1:0"
[[tenants]]
name = "demo"
root_key_file = "keys/root.key"
create_if_missing = true
[[upstreams]]
name = "a"
url = "http://127.0.0.1:9/mcp"
headers = [{ name = "X-Api-Key", value_file = "secrets/api.key" }]
"#;
    std::fs::create_dir_all(conf.join("keys")).unwrap();
    let path = conf.join("gateway.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

#[test]
fn relative_paths_are_read_from_the_config_files_directory_wherever_dgw_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let (conf, elsewhere) = (d.join("conf"), d.join("elsewhere"));
    std::fs::create_dir_all(&elsewhere).unwrap();
    let config = write_config(&conf);

    let said = config_check_passes(dgw().current_dir(&elsewhere), &config);
    assert!(
        said.contains(&format!(
            "header x-api-key = <redacted> from file {}",
            conf.join("secrets/api.key").display()
        )),
        "{said}"
    );

    let mut gw = Gateway::start_in(&config, &elsewhere);
    assert!(gw.metrics().contains("dgw_"));
    gw.terminate();
    assert!(
        conf.join("data/db").exists(),
        "state is not beside the config"
    );
    assert!(conf.join("data/gateway.key").exists());
    assert!(conf.join("keys/root.key").exists());
    let left: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(
        left.is_empty(),
        "dgw wrote in its current directory: {left:?}"
    );
}

#[test]
fn a_data_directory_the_change_would_strand_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let conf = d.join("conf");
    let config = write_config(&conf);
    // A gateway that ran from `d` before this release kept its state in
    // `d/data`, where the old rule put "data".
    std::fs::create_dir_all(d.join("data/journal")).unwrap();
    std::fs::write(d.join("data/gateway.key"), "kept").unwrap();

    let expected = format!(
        "{} holds no gateway state, but {} (relative to the current directory, as before) does",
        conf.join("data").display(),
        d.join("data").display()
    );
    for args in [
        vec!["config", "check", config.to_str().unwrap()],
        vec!["serve", "--config", config.to_str().unwrap()],
        vec!["mcp", "--config", config.to_str().unwrap()],
    ] {
        let out = dgw()
            .current_dir(&d)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = stderr(&out);
        assert!(!out.status.success(), "{args:?} started: {said}");
        assert!(said.contains(&expected), "{args:?}: {said}");
        assert!(said.contains("`data_dir`"), "{said}");
    }
    assert!(!conf.join("data").exists(), "a new data directory was made");

    // Run from the config's own directory, both rules agree: it starts.
    let mut gw = Gateway::start_in(&config, &conf);
    gw.terminate();
    // Once the state sits beside the config, the old place is ignored.
    let mut gw = Gateway::start_in(&config, &d);
    gw.terminate();
}
