//! What `dgw config check` finds in the files and commands a config names,
//! beyond its keys' values: every key file present and private (or one dgw
//! makes at start), every TLS and secret file readable, every stdio
//! upstream's command found. All of them are listed, each naming its key,
//! so one run shows everything to fix.

use std::path::{Path, PathBuf};

use super::{ConfigError, RawConfig};

/// What a config names a file for.
pub(super) enum Use {
    /// An Ed25519 key file; dgw makes it at start when `creatable`.
    Key { creatable: bool, hint: &'static str },
    /// A certificate, private key, CA bundle or shared secret dgw reads.
    Readable,
    /// A secret: private to dgw's user (checked as dgw reads it).
    Secret,
    /// A stdio upstream's program (`command[0]`): on `PATH`, or an
    /// executable path; `cwd` is where the upstream runs.
    Command { cwd: Option<PathBuf> },
}

/// A file or program a config names, by its key.
pub(super) struct Named {
    pub(super) key: String,
    pub(super) path: PathBuf,
    pub(super) what: Use,
}

/// What the check found: problems (each naming its key) and notes.
#[derive(Debug, Default)]
pub struct Findings {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// Checks every file and command `text` (the config at `path`) names.
/// `Err` only when the text is not a config at all (unreadable TOML, an
/// unknown key): there is nothing to walk then.
pub fn check(text: &str, path: &Path) -> Result<Findings, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        message: e.to_string().trim_end().to_owned(),
    })?;
    // Relative paths are the config file's directory's (decision 194).
    let base = path.parent().unwrap_or(Path::new(""));
    let mut findings = Findings::default();
    for mut named in raw.named_files(base) {
        if !matches!(named.what, Use::Command { .. }) {
            named.path = super::relative_to(base, named.path);
        }
        match named.what {
            Use::Key { creatable, hint } => {
                if named.path.exists() {
                    if let Err(e) = crate::keyfile::read(&named.path) {
                        findings.problems.push(format!("`{}`: {e}", named.key));
                    }
                } else if creatable {
                    findings.notes.push(format!(
                        "{}: {} does not exist yet; dgw creates it at start",
                        named.key,
                        named.path.display()
                    ));
                } else {
                    findings.problems.push(format!(
                        "`{}`: key file {} does not exist; {hint}",
                        named.key,
                        named.path.display()
                    ));
                }
            }
            Use::Readable => {
                if let Err(e) = std::fs::read(&named.path) {
                    findings.problems.push(format!(
                        "`{}`: cannot read {}: {e}",
                        named.key,
                        named.path.display(),
                    ));
                }
            }
            Use::Secret => {
                if let Err(e) = crate::mcp::secret::Secret::from_file(&named.path) {
                    findings.problems.push(format!("`{}`: {e}", named.key));
                }
            }
            Use::Command { cwd } => {
                let cwd = cwd.map(|c| super::relative_to(base, c));
                let found = find_program(&named.path, cwd.as_deref())
                    .or_else(|e| find_program(&base.join(&named.path), None).map_err(|_| e));
                if let Err(problem) = found {
                    findings
                        .problems
                        .push(format!("`{}`: {problem}", named.key));
                }
            }
        }
    }
    Ok(findings)
}

impl RawConfig {
    /// Every file and program the config names, in config order.
    fn named_files(&self, base: &Path) -> Vec<Named> {
        let data_dir = super::relative_to(base, self.data_dir.clone());
        let mut out = vec![Named {
            key: "key_file".into(),
            path: self.key_file.clone(),
            what: Use::Key {
                creatable: crate::data_dir::is_new(&data_dir),
                hint: crate::data_dir::GATEWAY_KEY_HINT,
            },
        }];
        self.server.named_files(&mut out);
        for (i, t) in self.tenants.iter().enumerate() {
            t.named_files(i, &mut out);
        }
        for (i, u) in self.upstreams.iter().enumerate() {
            u.named_files(i, &mut out);
        }
        self.state.named_files(&mut out);
        // A protocol's own files (a peer's secret file) are read, and named
        // by key, by its module's check.
        out
    }
}

/// Where `program` runs from: a path (with a `/`) that is an executable
/// file, relative to dgw's directory or the upstream's `cwd` (or, by the
/// caller, the config's directory); else a name found on `PATH`.
fn find_program(program: &Path, cwd: Option<&Path>) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().is_empty() {
        return Err("the command is empty".into());
    }
    if program.components().count() > 1 || program.is_absolute() {
        let candidates = std::iter::once(program.to_owned()).chain(
            cwd.filter(|_| program.is_relative())
                .map(|c| c.join(program)),
        );
        for c in candidates {
            if executable(&c) {
                return Ok(c);
            }
        }
        return Err(format!("{} is not an executable file", program.display()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|c| executable(c))
        .ok_or_else(|| format!("{} is not on PATH", program.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        assert!(find_program(Path::new("sh"), None).is_ok());
        assert!(find_program(Path::new("/bin/sh"), None).is_ok());
        let e = find_program(Path::new("no-such-program-dgw"), None).unwrap_err();
        assert!(e.contains("not on PATH"), "{e}");
        let e = find_program(Path::new("./nothing/here"), None).unwrap_err();
        assert!(e.contains("not an executable file"), "{e}");
        // A file that is not executable is not a program.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("script"), "#!/bin/sh\n").unwrap();
        let e = find_program(Path::new("./script"), Some(dir.path())).unwrap_err();
        assert!(e.contains("not an executable file"), "{e}");
        std::fs::set_permissions(
            dir.path().join("script"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        assert!(find_program(Path::new("./script"), Some(dir.path())).is_ok());
        assert!(find_program(Path::new(""), None).is_err());
    }
}
