//! Credentials dgw presents to its upstreams: read from a file or from
//! dgw's environment when the config is loaded (so a reload rotates them),
//! never printed (`Debug` and every error name where a secret came from,
//! never what it is), and scrubbed from whatever an upstream sends back.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

/// Largest secret file read.
const MAX_SECRET_BYTES: u64 = 64 << 10;

/// Secrets shorter than this are not scrubbed from replies: a two-letter
/// value would rewrite every answer that happens to contain it.
pub const MIN_SCRUBBED_LEN: usize = 8;

/// Where a secret came from: what logs and `config check` may show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
    /// Written in the config (allowed only for values that are not
    /// credentials).
    Inline,
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::File(p) => write!(f, "file {}", p.display()),
            SecretSource::Env(n) => write!(f, "environment variable {n}"),
            SecretSource::Inline => f.write_str("the config"),
        }
    }
}

/// A value dgw hands an upstream (a header, an environment variable).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    source: SecretSource,
    value: Arc<str>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            SecretSource::Inline => write!(f, "{:?}", &*self.value),
            _ => write!(f, "<redacted, from {}>", self.source),
        }
    }
}

/// Why a secret could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secret file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secret file {path} has mode {mode:04o}: it must be 0600, 0400 or 0440")]
    Mode { path: PathBuf, mode: u32 },
    #[error("secret file {path} is owned by uid {owner}: it must be owned by dgw's user (uid {me}) or root")]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("secret file {path} is not a regular file of at most {MAX_SECRET_BYTES} bytes")]
    NotAFile { path: PathBuf },
    #[error("the secret from {0} is empty or not UTF-8")]
    Empty(SecretSource),
    #[error("environment variable {0} is not set")]
    Unset(String),
    #[error("the value from {0} holds a control character (a header or environment value cannot)")]
    Control(SecretSource),
}

impl Secret {
    /// Reads a secret file: 0600, 0400 or 0440, owned by dgw's user or root
    /// (a Kubernetes secret mount), checked on the open file. One trailing
    /// line end is dropped.
    pub fn from_file(path: &Path) -> Result<Self, SecretError> {
        let read = |source| SecretError::Read {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read)?;
        let meta = file.metadata().map_err(read)?;
        if !meta.is_file() || meta.len() > MAX_SECRET_BYTES {
            return Err(SecretError::NotAFile {
                path: path.to_owned(),
            });
        }
        let mode = meta.mode() & 0o7777;
        if !matches!(mode, 0o600 | 0o400 | 0o440) {
            return Err(SecretError::Mode {
                path: path.to_owned(),
                mode,
            });
        }
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return Err(SecretError::Owner {
                path: path.to_owned(),
                owner: meta.uid(),
                me,
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_BYTES)
            .read_to_end(&mut bytes)
            .map_err(read)?;
        let source = SecretSource::File(path.to_owned());
        let text = String::from_utf8(bytes).map_err(|_| SecretError::Empty(source.clone()))?;
        let text = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(&text);
        Self::checked(source, text)
    }

    /// Reads a secret from dgw's environment.
    pub fn from_env(name: &str) -> Result<Self, SecretError> {
        let value = std::env::var(name).map_err(|_| SecretError::Unset(name.to_owned()))?;
        Self::checked(SecretSource::Env(name.to_owned()), &value)
    }

    /// A value written in the config.
    pub fn inline(value: &str) -> Result<Self, SecretError> {
        Self::checked(SecretSource::Inline, value)
    }

    fn checked(source: SecretSource, value: &str) -> Result<Self, SecretError> {
        if value.is_empty() {
            return Err(SecretError::Empty(source));
        }
        // Tabs aside, no control character fits a header value, and a NUL
        // none fits an environment variable.
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(SecretError::Control(source));
        }
        Ok(Self {
            source,
            value: value.into(),
        })
    }

    /// The value itself, for the one place that hands it over.
    pub fn expose(&self) -> &str {
        &self.value
    }

    pub fn source(&self) -> &SecretSource {
        &self.source
    }

    /// Whether it is a secret (read from a file or the environment).
    pub fn is_secret(&self) -> bool {
        !matches!(self.source, SecretSource::Inline)
    }
}

/// Replaces every secret an upstream holds wherever it shows up in what the
/// upstream sends back: an upstream that echoes a bad key in its error must
/// not hand it to the caller or the logs.
#[derive(Default, Clone)]
pub struct Redactor {
    values: Vec<Arc<str>>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.values.len())
    }
}

/// What a secret becomes.
pub const REDACTED: &str = "<redacted>";

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Self {
        let mut values: Vec<Arc<str>> = secrets
            .into_iter()
            .filter(|s| s.is_secret() && s.value.len() >= MIN_SCRUBBED_LEN)
            .map(|s| s.value.clone())
            .collect();
        // Longest first, so a secret containing another goes whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// Scrubs `secret` too (one fetched at run time, or rotated in).
    pub fn add_secret(&mut self, secret: &Secret) {
        if secret.is_secret() {
            self.add(secret.value.clone());
        }
    }

    pub fn add(&mut self, value: Arc<str>) {
        if value.len() >= MIN_SCRUBBED_LEN && !self.values.contains(&value) {
            self.values.push(value);
            self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for v in &self.values {
            if out.contains(&**v) {
                out = out.replace(&**v, REDACTED);
            }
        }
        out
    }

    /// Every string in `value`, keys included.
    pub fn json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) if self.values.iter().any(|v| s.contains(&**v)) => {
                *s = self.text(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                let leaks = map
                    .keys()
                    .any(|k| self.values.iter().any(|v| k.contains(&**v)));
                if leaks {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        map.insert(self.text(&k), v);
                    }
                }
                map.values_mut().for_each(|v| self.json(v));
            }
            _ => {}
        }
    }
}

/// Whether a header or variable named `name` carries a credential, so its
/// value may not be written in the config: `Authorization`,
/// `Proxy-Authorization`, `Cookie`, and names holding `key`, `token`,
/// `secret`, `auth`, `password` or `credential` (case-insensitive).
pub fn names_a_credential(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "cookie"
        || ["key", "token", "secret", "auth", "passw", "credential"]
            .iter()
            .any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn file_modes_other_than_private_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "sk-0123456789\n").unwrap();
        for (mode, ok) in [
            (0o600, true),
            (0o400, true),
            (0o440, true),
            (0o644, false),
            (0o640, false),
            (0o660, false),
            (0o604, false),
        ] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            match Secret::from_file(&p) {
                Ok(s) => {
                    assert!(ok, "{mode:o} accepted");
                    assert_eq!(s.expose(), "sk-0123456789");
                }
                Err(e) => {
                    assert!(!ok, "{mode:o} refused: {e}");
                    assert!(e.to_string().contains(&p.display().to_string()));
                    assert!(!e.to_string().contains("sk-0123456789"));
                }
            }
        }
    }

    #[test]
    fn debug_never_shows_a_secret_and_control_characters_are_refused() {
        std::env::set_var("DGW_SECRET_UNIT_TEST", "hunter2-hunter2");
        let s = Secret::from_env("DGW_SECRET_UNIT_TEST").unwrap();
        let shown = format!("{s:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("DGW_SECRET_UNIT_TEST"));
        assert!(matches!(
            Secret::inline("a\r\nX-Evil: 1"),
            Err(SecretError::Control(_))
        ));
    }

    #[test]
    fn replies_lose_every_secret_keys_included() {
        std::env::set_var("DGW_SECRET_UNIT_TEST2", "sk-live-abcdef");
        let s = Secret::from_env("DGW_SECRET_UNIT_TEST2").unwrap();
        let short = Secret::inline("abc").unwrap();
        let r = Redactor::new([&s, &short]);
        let mut v = serde_json::json!({"message": "bad key sk-live-abcdef!", "sk-live-abcdef": ["abc sk-live-abcdef"]});
        r.json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"message": "bad key <redacted>!", "<redacted>": ["abc <redacted>"]})
        );
    }

    #[test]
    fn credential_names() {
        for n in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "X-Api-Key",
            "X-Auth-Token",
            "CLIENT_SECRET",
            "GITHUB_TOKEN",
        ] {
            assert!(names_a_credential(n), "{n}");
        }
        for n in ["X-Client", "Accept-Language", "NODE_ENV", "LOG_LEVEL"] {
            assert!(!names_a_credential(n), "{n}");
        }
    }
}
