//! MCP sessions: opened at `initialize`, named by `Mcp-Session-Id`, bound
//! to the `Authorization` header they were opened with, ended after their
//! TTL idle. With a shared record store (replicas on one Redis), each
//! session is recorded too, so a request may land on any replica: one
//! that does not know the session restores it from the record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use super::proxy::Session;
use dgw_core::caller::HolderDigest;
use dgw_core::state::RecordStore;

/// How sessions are opened and kept (`[mcp]`).
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// Idle sessions end after this long.
    pub ttl: Duration,
    /// Most sessions open at once.
    pub max: usize,
    /// Whether `initialize` may open a session without a credential.
    pub anonymous: bool,
    /// Idle anonymous sessions end after this long.
    pub anonymous_ttl: Duration,
    /// Most sessions one credential may hold.
    pub per_credential: usize,
}

impl SessionPolicy {
    /// Anonymous sessions may take at most a tenth of the slots, so a flood
    /// of them never locks out clients that present a credential.
    fn anonymous_max(&self) -> usize {
        (self.max / 10).max(1)
    }
}

/// One open session and what it is bound to.
struct Entry {
    session: Arc<Session>,
    used: Instant,
    /// When its shared record's time was last extended.
    published: Instant,
    /// The digest of the credential that opened it (`None`: anonymous).
    owner: Option<HolderDigest>,
    /// The digest of the `Authorization` header it was opened with: every
    /// later request on it must carry the same one.
    header: Option<HolderDigest>,
}

/// Why a session could not be opened or used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionRefusal {
    Full,
    AnonymousFull,
    CredentialFull,
    NotFound,
    CredentialMismatch,
    /// The shared session records cannot be reached.
    Unavailable,
}

impl SessionRefusal {
    /// Its HTTP status, error type and message.
    pub(crate) fn parts(self) -> (StatusCode, &'static str, &'static str) {
        match self {
            SessionRefusal::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                "every MCP session slot is in use; try again later",
            ),
            SessionRefusal::AnonymousFull => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                "every slot for sessions without a credential is in use; present a DCT",
            ),
            SessionRefusal::CredentialFull => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions",
                "this credential holds mcp.max_sessions_per_credential sessions already",
            ),
            SessionRefusal::NotFound => (
                StatusCode::NOT_FOUND,
                "session_not_found",
                "no such session (it ended or expired); initialize again",
            ),
            SessionRefusal::CredentialMismatch => (
                StatusCode::FORBIDDEN,
                "session_credential_mismatch",
                "this session was opened with another Authorization header",
            ),
            SessionRefusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "state_unavailable",
                "the shared session records cannot be reached; try again",
            ),
        }
    }
}

/// The record space of shared sessions, by `Mcp-Session-Id`.
const SPACE: &str = "mcp_sessions";

/// A session as other replicas restore it: what it is bound to and until
/// when it lives (refreshed as it is used). No credential is kept: a
/// session bound to an `Authorization` header gets it from every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shared {
    /// Hex of the `Authorization` header's digest.
    header: Option<String>,
    /// Hex of the opening credential's digest.
    owner: Option<String>,
    /// Unix milliseconds.
    expires_ms: u64,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn digest_hex(d: &Option<HolderDigest>) -> Option<String> {
    d.map(|d| hex::encode(d.0))
}

fn digest_of(hex_text: &Option<String>) -> Option<HolderDigest> {
    let bytes = hex::decode(hex_text.as_deref()?).ok()?;
    Some(HolderDigest(bytes.try_into().ok()?))
}

/// Open sessions, ended after their TTL idle; recorded in `shared` too
/// when replicas share state.
pub struct Sessions {
    map: Mutex<HashMap<String, Entry>>,
    pub(crate) policy: SessionPolicy,
    shared: Option<Arc<dyn RecordStore>>,
    /// Sessions published, so every so often a publish also sweeps.
    published: AtomicU64,
}

impl Sessions {
    /// Sessions this replica alone knows.
    pub fn new(policy: SessionPolicy) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            policy,
            shared: None,
            published: AtomicU64::new(0),
        }
    }

    /// Sessions every replica sharing `records` knows.
    pub fn shared(policy: SessionPolicy, records: Arc<dyn RecordStore>) -> Self {
        Self {
            shared: Some(records),
            ..Self::new(policy)
        }
    }

    /// Records a session just created, so other replicas can restore it;
    /// every 64th also forgets records past their time.
    pub(crate) async fn publish(&self, id: &str) -> Result<(), SessionRefusal> {
        let Some(store) = &self.shared else {
            return Ok(());
        };
        let record = {
            let map = self.lock();
            let e = map.get(id).ok_or(SessionRefusal::NotFound)?;
            self.shared_record(e)
        };
        let value = serde_json::to_value(&record).map_err(|_| SessionRefusal::Unavailable)?;
        store
            .insert_new(SPACE, id, &value)
            .await
            .map_err(|_| SessionRefusal::Unavailable)?;
        if self.published.fetch_add(1, Ordering::Relaxed) % 64 == 63 {
            self.sweep_shared(store.as_ref()).await;
        }
        Ok(())
    }

    fn shared_record(&self, e: &Entry) -> Shared {
        Shared {
            header: digest_hex(&e.header),
            owner: digest_hex(&e.owner),
            expires_ms: unix_ms() + self.ttl(e).as_millis() as u64,
        }
    }

    /// Forgets shared records past their time.
    async fn sweep_shared(&self, store: &dyn RecordStore) {
        let Ok(all) = store.scan(SPACE).await else {
            return;
        };
        let now = unix_ms();
        for (id, value) in all {
            let ended =
                serde_json::from_value::<Shared>(value).map_or(true, |r| r.expires_ms <= now);
            if ended {
                let _ = store.remove(SPACE, &id).await;
            }
        }
    }

    /// The live session `id`, if `header` is what it was opened with: this
    /// replica's, else restored from the shared record. A session used here
    /// has its shared record's time extended once a quarter of its TTL has
    /// passed.
    pub(crate) async fn find(
        &self,
        id: &str,
        header: Option<HolderDigest>,
    ) -> Result<Arc<Session>, SessionRefusal> {
        let Some(store) = &self.shared else {
            return self.get(id, header);
        };
        match self.get(id, header) {
            Ok(session) => {
                let stale = {
                    let mut map = self.lock();
                    map.get_mut(id).and_then(|e| {
                        let quarter = self.ttl(e) / 4;
                        (e.published.elapsed() >= quarter).then(|| {
                            e.published = Instant::now();
                            self.shared_record(e)
                        })
                    })
                };
                if let Some(record) = stale {
                    self.extend(store.as_ref(), id, &record).await;
                }
                Ok(session)
            }
            Err(SessionRefusal::NotFound) => self.restore(store.as_ref(), id, header).await,
            Err(other) => Err(other),
        }
    }

    async fn extend(&self, store: &dyn RecordStore, id: &str, record: &Shared) {
        if let (Ok(Some(old)), Ok(new)) = (store.get(SPACE, id).await, serde_json::to_value(record))
        {
            let _ = store.replace(SPACE, id, &old, &new).await;
        }
    }

    /// A session another replica opened, from its record.
    async fn restore(
        &self,
        store: &dyn RecordStore,
        id: &str,
        header: Option<HolderDigest>,
    ) -> Result<Arc<Session>, SessionRefusal> {
        let value = store
            .get(SPACE, id)
            .await
            .map_err(|_| SessionRefusal::Unavailable)?
            .ok_or(SessionRefusal::NotFound)?;
        let record: Shared = serde_json::from_value(value).map_err(|_| SessionRefusal::NotFound)?;
        if record.expires_ms <= unix_ms() {
            let _ = store.remove(SPACE, id).await;
            return Err(SessionRefusal::NotFound);
        }
        let entry = Entry {
            session: Arc::new(Session::named(id.to_owned())),
            used: Instant::now(),
            published: Instant::now(),
            owner: digest_of(&record.owner),
            header: digest_of(&record.header),
        };
        check_header(&entry, header)?;
        let fresh = self.shared_record(&entry);
        let session = entry.session.clone();
        self.lock().entry(id.to_owned()).or_insert(entry);
        self.extend(store, id, &fresh).await;
        Ok(session)
    }

    /// Ends a session (see [`Session::end`]) if `header` may, here and in
    /// the shared records (another replica that restored it keeps its copy
    /// until it idles out: the header binds it all the same).
    pub(crate) async fn end(
        &self,
        id: &str,
        header: Option<HolderDigest>,
    ) -> Result<(), SessionRefusal> {
        self.find(id, header).await?;
        self.remove(id, header)?;
        if let Some(store) = &self.shared {
            store
                .remove(SPACE, id)
                .await
                .map_err(|_| SessionRefusal::Unavailable)?;
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ttl(&self, e: &Entry) -> Duration {
        if e.owner.is_some() {
            self.policy.ttl
        } else {
            self.policy.anonymous_ttl
        }
    }

    /// A new session for `owner`, opened with `header`.
    pub(crate) fn create(
        &self,
        owner: Option<HolderDigest>,
        header: Option<HolderDigest>,
    ) -> Result<(String, Arc<Session>), SessionRefusal> {
        let id = dgw_core::random::session_id().map_err(|_| SessionRefusal::Full)?;
        let mut map = self.lock();
        let full = |map: &HashMap<String, Entry>| {
            let anonymous = map.values().filter(|e| e.owner.is_none()).count();
            let same = map
                .values()
                .filter(|e| owner.is_some() && e.owner == owner)
                .count();
            if map.len() >= self.policy.max {
                Some(SessionRefusal::Full)
            } else if owner.is_none() && anonymous >= self.policy.anonymous_max() {
                Some(SessionRefusal::AnonymousFull)
            } else if owner.is_some() && same >= self.policy.per_credential {
                Some(SessionRefusal::CredentialFull)
            } else {
                None
            }
        };
        if full(&map).is_some() {
            map.retain(|_, e| e.used.elapsed() < self.ttl(e));
        }
        if let Some(refusal) = full(&map) {
            return Err(refusal);
        }
        let session = Arc::new(Session::named(id.clone()));
        map.insert(
            id.clone(),
            Entry {
                session: session.clone(),
                used: Instant::now(),
                published: Instant::now(),
                owner,
                header,
            },
        );
        Ok((id, session))
    }

    /// The live session `id`, if `header` is what it was opened with.
    pub(crate) fn get(
        &self,
        id: &str,
        header: Option<HolderDigest>,
    ) -> Result<Arc<Session>, SessionRefusal> {
        let mut map = self.lock();
        let Some(e) = map.get_mut(id) else {
            return Err(SessionRefusal::NotFound);
        };
        if e.used.elapsed() >= self.ttl(e) {
            map.remove(id);
            return Err(SessionRefusal::NotFound);
        }
        check_header(e, header)?;
        e.used = Instant::now();
        Ok(e.session.clone())
    }

    /// Ends a session (see [`Session::end`]) if `header` may.
    pub(crate) fn remove(
        &self,
        id: &str,
        header: Option<HolderDigest>,
    ) -> Result<(), SessionRefusal> {
        let entry = {
            let mut map = self.lock();
            check_header(map.get(id).ok_or(SessionRefusal::NotFound)?, header)?;
            map.remove(id).ok_or(SessionRefusal::NotFound)?
        };
        entry.session.end();
        Ok(())
    }
}

fn check_header(e: &Entry, header: Option<HolderDigest>) -> Result<(), SessionRefusal> {
    match (&e.header, header) {
        (None, _) => Ok(()),
        (Some(bound), Some(h)) if bound.matches(&h) => Ok(()),
        _ => Err(SessionRefusal::CredentialMismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(max: usize, per_credential: usize) -> Sessions {
        Sessions::new(SessionPolicy {
            ttl: Duration::from_secs(60),
            max,
            anonymous: true,
            anonymous_ttl: Duration::from_secs(60),
            per_credential,
        })
    }

    fn kind(r: Result<(String, Arc<Session>), SessionRefusal>) -> (u16, String) {
        let (status, kind, _) = r.expect_err("refused").parts();
        (status.as_u16(), kind.to_owned())
    }

    /// Each of the three limits refuses with `too_many_sessions`, and
    /// only what it limits.
    #[test]
    fn every_session_limit_refuses_with_too_many_sessions() {
        let (a, b) = (HolderDigest::of("a"), HolderDigest::of("b"));
        // A credential's own share.
        let s = sessions(20, 2);
        s.create(Some(a), None).unwrap();
        s.create(Some(a), None).unwrap();
        assert_eq!(
            kind(s.create(Some(a), None)),
            (429, "too_many_sessions".into())
        );
        s.create(Some(b), None).unwrap();
        // The anonymous tenth (2 of 20).
        s.create(None, None).unwrap();
        s.create(None, None).unwrap();
        assert_eq!(
            kind(s.create(None, None)),
            (503, "too_many_sessions".into())
        );
        // Every slot.
        let s = sessions(2, 5);
        s.create(Some(a), None).unwrap();
        s.create(Some(b), None).unwrap();
        assert_eq!(
            kind(s.create(Some(HolderDigest::of("c")), None)),
            (503, "too_many_sessions".into())
        );
    }
}
