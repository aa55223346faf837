//! Console sessions, kept in the state backend (`RecordStore` space
//! `console_sessions`) so that every replica on one Redis knows them. The
//! cookie carries a 256-bit secret; the store keeps only its SHA-256 with
//! who signed in, the session's CSRF token and when it ends. A session ends
//! at sign-out, at its fixed lifetime (never extended), and whenever the
//! administrators are reloaded: every session is removed then, on every
//! replica (they share the space), and this replica refuses any session
//! made before its last reload even if removing it failed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dgw_core::caller::Admin;
use dgw_core::state::{Capped, RecordStore, StorageError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

/// The record space.
pub const SPACE: &str = "console_sessions";

/// Most sessions open at once (each sign-in makes one): bounded storage.
pub const MAX_SESSIONS: usize = 256;

/// Why a session could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the state store cannot be reached: {0}")]
    Storage(#[from] StorageError),
    #[error("cannot draw a random session secret: {0}")]
    Random(String),
    #[error("{MAX_SESSIONS} console sessions are open; sign out elsewhere or wait for one to end")]
    Full,
}

/// Who a stored session belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Who {
    Token { name: String },
    Certificate { subject: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    who: Who,
    csrf: String,
    created_ms: u64,
    expires_ms: u64,
}

/// A live session.
#[derive(Debug, Clone)]
pub struct Session {
    pub admin: Admin,
    /// The token every form of this session carries.
    pub csrf: String,
    /// Unix milliseconds.
    pub expires_ms: u64,
    key: String,
}

impl Session {
    /// How the administrator signed in, for the page header and the record.
    pub fn admin_label(&self) -> String {
        match &self.admin {
            Admin::Token(name) => format!("admin token {name}"),
            Admin::Certificate(subject) => format!("certificate {subject}"),
            Admin::Loopback | Admin::Gateway => "gateway".to_owned(),
        }
    }

    /// Whether `presented` is this session's CSRF token.
    pub fn csrf_matches(&self, presented: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(presented.as_bytes()))
    }
}

/// The sessions of one gateway (shared through the store with its peers).
pub struct Sessions {
    records: Arc<dyn RecordStore>,
    ttl: Duration,
    /// When this replica last removed every session (admins reloaded).
    wiped_ms: AtomicU64,
    admins: Mutex<watch::Receiver<u64>>,
}

pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn key_of(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn random_text() -> Result<String, SessionError> {
    dgw_core::random::bytes::<32>()
        .map(|b| delegateos::base64url::encode(&b))
        .map_err(|e| SessionError::Random(e.to_string()))
}

impl Sessions {
    /// Sessions living `ttl`, ended when `admins` changes.
    pub fn new(records: Arc<dyn RecordStore>, ttl: Duration, admins: watch::Receiver<u64>) -> Self {
        Self {
            records,
            ttl,
            wiped_ms: AtomicU64::new(0),
            admins: Mutex::new(admins),
        }
    }

    /// How long a session lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Opens a session for `admin`: the cookie's secret and the session.
    pub async fn open(&self, admin: &Admin) -> Result<(String, Session), SessionError> {
        self.follow_admins().await;
        let who = match admin {
            Admin::Token(name) => Who::Token { name: name.clone() },
            Admin::Certificate(subject) => Who::Certificate {
                subject: subject.clone(),
            },
            // Only a proven administrator signs in (the caller checks).
            Admin::Loopback | Admin::Gateway => return Err(SessionError::Full),
        };
        let secret = random_text()?;
        let now = unix_ms().max(self.wiped_ms.load(Ordering::SeqCst) + 1);
        let stored = Stored {
            who,
            csrf: random_text()?,
            created_ms: now,
            expires_ms: now.saturating_add(self.ttl.as_millis() as u64),
        };
        let key = key_of(&secret);
        let value =
            serde_json::to_value(&stored).map_err(|e| SessionError::Random(e.to_string()))?;
        let mut capped = self
            .records
            .insert_capped(SPACE, &key, &value, MAX_SESSIONS)
            .await?;
        if capped == Capped::Full {
            self.sweep().await?;
            capped = self
                .records
                .insert_capped(SPACE, &key, &value, MAX_SESSIONS)
                .await?;
        }
        match capped {
            Capped::Inserted => Ok((
                secret,
                Session {
                    admin: admin.clone(),
                    csrf: stored.csrf,
                    expires_ms: stored.expires_ms,
                    key,
                },
            )),
            // 256 random bits collided: as good as full.
            Capped::Taken | Capped::Full => Err(SessionError::Full),
        }
    }

    /// The live session a cookie's secret names, if any.
    pub async fn find(&self, secret: &str) -> Result<Option<Session>, SessionError> {
        self.follow_admins().await;
        // A secret we made is 43 base64url characters; anything else is
        // not looked up.
        if secret.len() != 43
            || !secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Ok(None);
        }
        let key = key_of(secret);
        let Some(value) = self.records.get(SPACE, &key).await? else {
            return Ok(None);
        };
        let Ok(stored) = serde_json::from_value::<Stored>(value) else {
            let _ = self.records.remove(SPACE, &key).await;
            return Ok(None);
        };
        let now = unix_ms();
        if stored.expires_ms <= now || stored.created_ms <= self.wiped_ms.load(Ordering::SeqCst) {
            let _ = self.records.remove(SPACE, &key).await;
            return Ok(None);
        }
        let admin = match stored.who {
            Who::Token { name } => Admin::Token(name),
            Who::Certificate { subject } => Admin::Certificate(subject),
        };
        Ok(Some(Session {
            admin,
            csrf: stored.csrf,
            expires_ms: stored.expires_ms,
            key,
        }))
    }

    /// Ends `session` (sign-out).
    pub async fn close(&self, session: &Session) -> Result<(), SessionError> {
        self.records.remove(SPACE, &session.key).await?;
        Ok(())
    }

    /// Removes every session (the administrators were reloaded).
    pub async fn wipe(&self) -> Result<usize, SessionError> {
        self.wiped_ms.store(unix_ms(), Ordering::SeqCst);
        let mut removed = 0;
        for (key, _) in self.records.scan(SPACE).await? {
            if self.records.remove(SPACE, &key).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes the sessions that have ended.
    async fn sweep(&self) -> Result<(), SessionError> {
        let now = unix_ms();
        for (key, value) in self.records.scan(SPACE).await? {
            let ended =
                serde_json::from_value::<Stored>(value).map_or(true, |s| s.expires_ms <= now);
            if ended {
                self.records.remove(SPACE, &key).await?;
            }
        }
        Ok(())
    }

    /// Wipes every session if the administrators changed since last seen
    /// (before any session is read, so a reload answered is in force).
    async fn follow_admins(&self) {
        let changed = {
            let mut rx = self.admins.lock().unwrap_or_else(|p| p.into_inner());
            let changed = rx.has_changed().unwrap_or(false);
            if changed {
                rx.mark_unchanged();
            }
            changed
        };
        if changed {
            match self.wipe().await {
                Ok(n) => tracing::info!(
                    removed = n,
                    "administrators reloaded: console sessions ended"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "administrators reloaded: removing console sessions failed; this replica refuses them")
                }
            }
        }
    }

    /// Follows the administrators in the background, so that a reload on
    /// this replica ends sessions everywhere without waiting for a request.
    pub fn watch_admins(self: &Arc<Self>, mut changes: watch::Receiver<u64>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(sessions) = weak.upgrade() else {
                    return;
                };
                sessions.follow_admins().await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(ttl: Duration) -> (Arc<Sessions>, watch::Sender<u64>) {
        let records = Arc::new(dgw_state_memory::MemoryRecords::default());
        let (tx, rx) = watch::channel(0);
        (Arc::new(Sessions::new(records, ttl, rx)), tx)
    }

    #[tokio::test]
    async fn a_session_is_found_by_its_secret_until_it_is_closed() {
        let (s, _tx) = sessions(Duration::from_secs(60));
        let (secret, opened) = s.open(&Admin::Token("ops".into())).await.unwrap();
        let found = s.find(&secret).await.unwrap().unwrap();
        assert_eq!(found.admin, Admin::Token("ops".into()));
        assert!(found.csrf_matches(&opened.csrf));
        assert!(!found.csrf_matches("x"));
        // A forged secret of the right shape, and one of the wrong shape.
        let forged = "A".repeat(43);
        assert!(s.find(&forged).await.unwrap().is_none());
        assert!(s.find("short").await.unwrap().is_none());
        s.close(&found).await.unwrap();
        assert!(s.find(&secret).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_session_ends_at_its_lifetime() {
        let (s, _tx) = sessions(Duration::from_millis(50));
        let (secret, _) = s.open(&Admin::Token("ops".into())).await.unwrap();
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(s.find(&secret).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn reloading_the_administrators_ends_every_session() {
        let (s, tx) = sessions(Duration::from_secs(60));
        let (a, _) = s.open(&Admin::Token("ops".into())).await.unwrap();
        let (b, _) = s.open(&Admin::Certificate("CN=ops".into())).await.unwrap();
        tx.send_modify(|n| *n += 1);
        assert!(s.find(&a).await.unwrap().is_none());
        assert!(s.find(&b).await.unwrap().is_none());
        let (c, _) = s.open(&Admin::Token("ops".into())).await.unwrap();
        assert!(s.find(&c).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn sessions_are_bounded() {
        let (s, _tx) = sessions(Duration::from_secs(60));
        for _ in 0..MAX_SESSIONS {
            s.open(&Admin::Token("ops".into())).await.unwrap();
        }
        assert!(matches!(
            s.open(&Admin::Token("ops".into())).await,
            Err(SessionError::Full)
        ));
    }
}
