//! Revocations in Redis: a hash per kind (the set) and one stream (the
//! feed), written together by one script; every replica follows the feed
//! with a blocking read and passes each entry to its subscribers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::{AsyncCommands, Script};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use dgw_core::state::{RevocationRecord, RevocationStore, StorageError};

use crate::connection::Connection;

/// Most feed entries kept (followers that fall further behind re-read the set).
const FEED_ENTRIES: usize = 100_000;
/// How long one blocking read waits.
const BLOCK: Duration = Duration::from_millis(1000);

/// The Redis [`RevocationStore`].
pub struct RedisRevocations {
    connection: Connection,
    prefix: Arc<str>,
    add: Script,
    added: broadcast::Sender<RevocationRecord>,
    /// Whether the follower is reading the feed.
    following: watch::Sender<bool>,
    follower: OnceLock<()>,
}

/// Kinds as the seam names them (`&'static str`): each distinct kind read
/// from the feed is kept once for the life of the process.
fn interned(kind: &str) -> &'static str {
    static KINDS: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut kinds = KINDS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(k) = kinds.get(kind) {
        return k;
    }
    let leaked: &'static str = Box::leak(kind.to_owned().into_boxed_str());
    kinds.insert(kind.to_owned(), leaked);
    leaked
}

impl RedisRevocations {
    pub fn new(connection: Connection, prefix: Arc<str>) -> Self {
        Self {
            connection,
            prefix,
            // KEYS: the kind's hash, the feed. ARGV: kind, key, value.
            add: Script::new(&format!(
                r"
if redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) == 0 then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', {FEED_ENTRIES}, '*', 'kind', ARGV[1], 'key', ARGV[2], 'value', ARGV[3])
return 1"
            )),
            added: broadcast::channel(4096).0,
            following: watch::channel(true).0,
            follower: OnceLock::new(),
        }
    }

    fn set(&self, kind: &str) -> String {
        format!("{}:{{rev}}:kind:{kind}", self.prefix)
    }

    fn feed(&self) -> String {
        format!("{}:{{rev}}:feed", self.prefix)
    }

    /// Follows the feed from its start, for good, reconnecting after a
    /// failure (entries are never lost while the feed keeps them).
    fn follow(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("revocations: no runtime to follow the Redis feed on");
            return;
        };
        let (connection, feed, added) = (self.connection.clone(), self.feed(), self.added.clone());
        let following = self.following.clone();
        // Entries recorded before this follower started are backlog, not lag.
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(u64::MAX);
        runtime.spawn(async move {
            let mut last = "0-0".to_owned();
            loop {
                if let Err(e) = follow_from(&connection, &feed, &added, &following, &mut last, started_ms).await {
                    if *following.borrow() {
                        tracing::warn!(error = %e, "revocations: the Redis feed is lost; reconnecting");
                    }
                    following.send_replace(false);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
}

/// Records how long an entry took to reach this replica, from its stream
/// ID (`<ms>-<seq>`, Redis's clock at `XADD`); entries older than this
/// follower (the backlog read at start) are not lag.
fn record_lag(id: &str, started_ms: u64) {
    let Some(recorded_ms) = id.split('-').next().and_then(|ms| ms.parse::<u64>().ok()) else {
        return;
    };
    if recorded_ms < started_ms {
        return;
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(recorded_ms);
    crate::telemetry::record_revocation_feed_lag(std::time::Duration::from_millis(
        now_ms.saturating_sub(recorded_ms),
    ));
}

/// Reads the feed after `last` until the connection fails.
async fn follow_from(
    connection: &Connection,
    feed: &str,
    added: &broadcast::Sender<RevocationRecord>,
    following: &watch::Sender<bool>,
    last: &mut String,
    started_ms: u64,
) -> Result<(), StorageError> {
    let mut con = connection.dedicated(BLOCK).await?;
    loop {
        type Entries = Vec<(String, Vec<(String, Vec<(String, String)>)>)>;
        let read: Option<Entries> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(1000)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(feed)
            .arg(last.as_str())
            .query_async(&mut con)
            .await
            .map_err(crate::backend)?;
        // Read to the end of the feed: every entry since `last` is passed on.
        if !*following.borrow() {
            following.send_replace(true);
        }
        for (_, entries) in read.unwrap_or_default() {
            for (id, fields) in entries {
                let field = |name: &str| {
                    fields
                        .iter()
                        .find(|(f, _)| f == name)
                        .map(|(_, v)| v.as_str())
                };
                record_lag(&id, started_ms);
                if let (Some(kind), Some(key), Some(value)) =
                    (field("kind"), field("key"), field("value"))
                {
                    match serde_json::from_str::<Value>(value) {
                        Ok(value) => {
                            let _ = added.send(RevocationRecord {
                                kind: interned(kind),
                                key: key.to_owned(),
                                value,
                            });
                        }
                        Err(e) => {
                            tracing::error!(%id, error = %e, "revocations: an unreadable feed entry")
                        }
                    }
                }
                *last = id;
            }
        }
    }
}

#[async_trait]
impl RevocationStore for RedisRevocations {
    async fn add(&self, record: RevocationRecord) -> Result<bool, StorageError> {
        let value = serde_json::to_string(&record.value)
            .map_err(|e| StorageError::Backend(e.to_string()))?;
        let mut con = self.connection.get().await?;
        let added: i64 = self
            .add
            .key(self.set(record.kind))
            .key(self.feed())
            .arg(record.kind)
            .arg(&record.key)
            .arg(value)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(added == 1)
    }

    async fn contains(&self, kind: &'static str, key: &str) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        con.hexists(self.set(kind), key)
            .await
            .map_err(crate::backend)
    }

    async fn all(&self, kind: &'static str) -> Result<Vec<RevocationRecord>, StorageError> {
        let mut con = self.connection.get().await?;
        let all: Vec<(String, String)> =
            con.hgetall(self.set(kind)).await.map_err(crate::backend)?;
        all.into_iter()
            .map(|(key, raw)| {
                let value =
                    serde_json::from_str(&raw).map_err(|e| crate::corrupt(kind, &key, e))?;
                Ok(RevocationRecord { kind, key, value })
            })
            .collect()
    }

    /// Every entry of the feed from the first subscription on; the first
    /// subscription starts following it from its start (a replica that
    /// starts reads the entries it has loaded again: adding one twice
    /// changes nothing).
    fn subscribe(&self) -> broadcast::Receiver<RevocationRecord> {
        let receiver = self.added.subscribe();
        self.follower.get_or_init(|| self.follow());
        receiver
    }

    fn following(&self) -> watch::Receiver<bool> {
        self.following.subscribe()
    }
}
