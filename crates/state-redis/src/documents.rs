//! Replay guards, protocol records, delegations and the audit log in
//! Redis. Keys of one kind share a hash tag (`{rp}`, `{rec}`, `{d}`), so
//! every script touches one slot.

use std::sync::Arc;

use async_trait::async_trait;
use delegateos::attestation::Attestation;
use delegateos::{Dct, Delegation, DelegationId, TaskContract};
use redis::{AsyncCommands, Script};
use serde_json::Value;

use dgw_core::state::{
    AuditAnchor, AuditSink, Capped, ContractPut, DelegationStore, RecordStore, ReplayStore,
    SpaceUsage, StorageError,
};

use crate::connection::Connection;

/// Most audit events kept (the oldest go first).
const AUDIT_EVENTS: usize = 100_000;

/// Compare-and-swap of one hash field: `KEYS[1]` the hash, `ARGV` the
/// field, the expected value, the new one.
const SWAP: &str = r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0";

fn json<T: serde::Serialize>(value: &T) -> Result<String, StorageError> {
    serde_json::to_string(value).map_err(|e| StorageError::Backend(e.to_string()))
}

/// The document under `field` of the hash `key`, read back (`tree` names
/// it in an error).
async fn hget_json<T: serde::de::DeserializeOwned>(
    connection: &Connection,
    key: String,
    field: &str,
    tree: &'static str,
) -> Result<Option<T>, StorageError> {
    let mut con = connection.get().await?;
    let raw: Option<String> = con.hget(key, field).await.map_err(crate::backend)?;
    raw.map(|r| serde_json::from_str(&r).map_err(|e| crate::corrupt(tree, field, e)))
        .transpose()
}

/// The Redis [`ReplayStore`]: each key with its end of validity, and a
/// sorted set by that end for the sweep (validity is the caller's clock,
/// not Redis's).
pub struct RedisReplay {
    connection: Connection,
    prefix: Arc<str>,
    insert: Script,
}

impl RedisReplay {
    pub fn new(connection: Connection, prefix: Arc<str>) -> Self {
        Self {
            connection,
            prefix,
            insert: Script::new(
                r"
local valid = redis.call('GET', KEYS[1])
if valid and tonumber(valid) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
return 1",
            ),
        }
    }

    fn index(&self) -> String {
        format!("{}:{{rp}}:until", self.prefix)
    }
}

#[async_trait]
impl ReplayStore for RedisReplay {
    async fn insert_new(
        &self,
        namespace: &'static str,
        key: &[u8],
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError> {
        let k = format!("{}:{{rp}}:{namespace}:{}", self.prefix, hex::encode(key));
        let mut con = self.connection.get().await?;
        let fresh: i64 = self
            .insert
            .key(k)
            .key(self.index())
            .arg(now)
            .arg(valid_until)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(fresh == 1)
    }

    async fn sweep(&self, now: i64) -> Result<usize, StorageError> {
        let mut con = self.connection.get().await?;
        let ended: Vec<String> = con
            .zrangebyscore(self.index(), "-inf", format!("({now}"))
            .await
            .map_err(crate::backend)?;
        let mut swept = 0;
        for k in ended {
            // Another replica may sweep it first; only its remover counts it.
            let removed: usize = con.zrem(self.index(), &k).await.map_err(crate::backend)?;
            if removed == 1 {
                let _: usize = con.del(&k).await.map_err(crate::backend)?;
                swept += 1;
            }
        }
        Ok(swept)
    }
}

/// Insert unless taken or full: `KEYS[1]` the hash, `ARGV` the field, the
/// value and the cap. 1 inserted, 0 taken, 2 full.
const INSERT_CAPPED: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 2 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1";

/// A hash's fields and the bytes of its fields and values: `{fields, bytes}`.
const USAGE: &str = r"
local fields = redis.call('HKEYS', KEYS[1])
local bytes = 0
for _, f in ipairs(fields) do
  bytes = bytes + #f + redis.call('HSTRLEN', KEYS[1], f)
end
return {#fields, bytes}";

/// The Redis [`RecordStore`]: a hash per space.
pub struct RedisRecords {
    connection: Connection,
    prefix: Arc<str>,
    swap: Script,
    insert_capped: Script,
    usage: Script,
}

impl RedisRecords {
    pub fn new(connection: Connection, prefix: Arc<str>) -> Self {
        Self {
            connection,
            prefix,
            swap: Script::new(SWAP),
            insert_capped: Script::new(INSERT_CAPPED),
            usage: Script::new(USAGE),
        }
    }

    fn space(&self, space: &str) -> String {
        format!("{}:{{rec}}:{space}", self.prefix)
    }
}

#[async_trait]
impl RecordStore for RedisRecords {
    async fn get(&self, space: &'static str, key: &str) -> Result<Option<Value>, StorageError> {
        hget_json(&self.connection, self.space(space), key, space).await
    }

    async fn insert_new(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
    ) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        con.hset_nx(self.space(space), key, json(value)?)
            .await
            .map_err(crate::backend)
    }

    async fn replace(
        &self,
        space: &'static str,
        key: &str,
        expected: &Value,
        new: &Value,
    ) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        let swapped: i64 = self
            .swap
            .key(self.space(space))
            .arg(key)
            .arg(json(expected)?)
            .arg(json(new)?)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(swapped == 1)
    }

    async fn remove(&self, space: &'static str, key: &str) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        con.hdel(self.space(space), key)
            .await
            .map_err(crate::backend)
    }

    async fn scan(&self, space: &'static str) -> Result<Vec<(String, Value)>, StorageError> {
        let mut con = self.connection.get().await?;
        let all: Vec<(String, String)> = con
            .hgetall(self.space(space))
            .await
            .map_err(crate::backend)?;
        let mut out = all
            .into_iter()
            .map(|(k, v)| {
                let value = serde_json::from_str(&v).map_err(|e| crate::corrupt(space, &k, e))?;
                Ok((k, value))
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn insert_capped(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
        cap: usize,
    ) -> Result<Capped, StorageError> {
        let mut con = self.connection.get().await?;
        let outcome: i64 = self
            .insert_capped
            .key(self.space(space))
            .arg(key)
            .arg(json(value)?)
            .arg(cap)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(match outcome {
            1 => Capped::Inserted,
            2 => Capped::Full,
            _ => Capped::Taken,
        })
    }

    async fn usage(&self, space: &'static str) -> Result<SpaceUsage, StorageError> {
        let mut con = self.connection.get().await?;
        let (records, bytes): (usize, u64) = self
            .usage
            .key(self.space(space))
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(SpaceUsage { records, bytes })
    }
}

/// The Redis [`DelegationStore`].
pub struct RedisDelegations {
    connection: Connection,
    prefix: Arc<str>,
    insert: Script,
    swap: Script,
}

impl RedisDelegations {
    pub fn new(connection: Connection, prefix: Arc<str>) -> Self {
        Self {
            connection,
            prefix,
            // KEYS[1]: the delegations; KEYS[2..]: the block index sets.
            insert: Script::new(
                r"
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
for i = 2, #KEYS do redis.call('SADD', KEYS[i], ARGV[1]) end
return 1",
            ),
            swap: Script::new(SWAP),
        }
    }

    fn key(&self, what: &str) -> String {
        format!("{}:{{d}}:{what}", self.prefix)
    }
}

#[async_trait]
impl DelegationStore for RedisDelegations {
    async fn insert_new(&self, delegation: &Delegation, token: &Dct) -> Result<bool, StorageError> {
        let mut invocation = self.insert.prepare_invoke();
        invocation.key(self.key("delegations"));
        for rev in token.revocation_ids() {
            invocation.key(self.key(&format!("carrying:{rev}")));
        }
        invocation
            .arg(delegation.id.as_str())
            .arg(json(delegation)?);
        let mut con = self.connection.get().await?;
        let inserted: i64 = invocation
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(inserted == 1)
    }

    async fn get(&self, id: &DelegationId) -> Result<Option<Delegation>, StorageError> {
        let key = self.key("delegations");
        hget_json(&self.connection, key, id.as_str(), "delegations").await
    }

    async fn replace(&self, expected: &Delegation, new: &Delegation) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        let swapped: i64 = self
            .swap
            .key(self.key("delegations"))
            .arg(expected.id.as_str())
            .arg(json(expected)?)
            .arg(json(new)?)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(swapped == 1)
    }

    async fn carrying_block(&self, revocation_id: &str) -> Result<Vec<DelegationId>, StorageError> {
        let mut con = self.connection.get().await?;
        let mut ids: Vec<String> = con
            .smembers(self.key(&format!("carrying:{revocation_id}")))
            .await
            .map_err(crate::backend)?;
        ids.sort();
        ids.iter()
            .map(|id| {
                DelegationId::parse(id).map_err(|e| crate::corrupt("carrying", revocation_id, e))
            })
            .collect()
    }

    async fn put_contract(&self, contract: &TaskContract) -> Result<ContractPut, StorageError> {
        let value = json(contract)?;
        let mut con = self.connection.get().await?;
        let key = self.key("contracts");
        let inserted: bool = con
            .hset_nx(&key, contract.id.as_str(), &value)
            .await
            .map_err(crate::backend)?;
        if inserted {
            return Ok(ContractPut::Inserted);
        }
        let stored: Option<String> = con
            .hget(&key, contract.id.as_str())
            .await
            .map_err(crate::backend)?;
        Ok(match stored {
            Some(s) if s == value => ContractPut::Unchanged,
            _ => ContractPut::Conflict,
        })
    }

    async fn contract(
        &self,
        id: &delegateos::ContractId,
    ) -> Result<Option<TaskContract>, StorageError> {
        let key = self.key("contracts");
        hget_json(&self.connection, key, id.as_str(), "contracts").await
    }

    async fn remove_contract(&self, id: &delegateos::ContractId) -> Result<bool, StorageError> {
        let mut con = self.connection.get().await?;
        con.hdel(self.key("contracts"), id.as_str())
            .await
            .map_err(crate::backend)
    }

    async fn put_attestation(&self, attestation: &Attestation) -> Result<(), StorageError> {
        let mut con = self.connection.get().await?;
        let _: bool = con
            .hset_nx(
                self.key("attestations"),
                attestation.id.as_str(),
                json(attestation)?,
            )
            .await
            .map_err(crate::backend)?;
        Ok(())
    }

    async fn attestation(
        &self,
        id: &delegateos::AttestationId,
    ) -> Result<Option<Attestation>, StorageError> {
        let key = self.key("attestations");
        hget_json(&self.connection, key, id.as_str(), "attestations").await
    }

    async fn sync(&self) -> Result<(), StorageError> {
        // Every write above was acknowledged by Redis when it returned.
        Ok(())
    }
}

/// Moves a log's anchor forward: `KEYS[1]` the hash of anchors, `ARGV`
/// the log's name, the new `seq` (decimal) and the anchor's JSON. Sequence
/// numbers are compared as decimal strings (longer is larger), exact for
/// every u64, where Lua's numbers stop at 2^53.
const ADVANCE: &str = r"
local kept = redis.call('HGET', KEYS[1], ARGV[1])
if kept then
  local seq = cjson.decode(kept)['seq']
  local s = type(seq) == 'string' and seq or string.format('%.0f', seq)
  if #s > #ARGV[2] or (#s == #ARGV[2] and s >= ARGV[2]) then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1";

/// The Redis [`AuditSink`]: a capped stream, and the logs' anchors in a
/// hash (`<prefix>:audit_anchors`, a field per log).
pub struct RedisAudit {
    connection: Connection,
    key: String,
    anchors: String,
    advance: Script,
}

/// An anchor as Redis keeps it: `seq` as a string, so Lua reads it whole.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredAnchor {
    seq: String,
    head: String,
}

impl RedisAudit {
    pub fn new(connection: Connection, prefix: Arc<str>) -> Self {
        Self {
            connection,
            key: format!("{prefix}:audit"),
            anchors: format!("{prefix}:audit_anchors"),
            advance: Script::new(ADVANCE),
        }
    }
}

#[async_trait]
impl AuditSink for RedisAudit {
    async fn append(&self, event: &Value) -> Result<(), StorageError> {
        let mut con = self.connection.get().await?;
        let _: String = redis::cmd("XADD")
            .arg(&self.key)
            .arg("MAXLEN")
            .arg("~")
            .arg(AUDIT_EVENTS)
            .arg("*")
            .arg("e")
            .arg(json(event)?)
            .query_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(())
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Value>, StorageError> {
        let mut con = self.connection.get().await?;
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(&self.key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(limit)
            .query_async(&mut con)
            .await
            .map_err(crate::backend)?;
        let mut out = Vec::with_capacity(entries.len());
        for (id, fields) in entries.into_iter().rev() {
            for (_, raw) in fields {
                out.push(serde_json::from_str(&raw).map_err(|e| crate::corrupt("audit", &id, e))?);
            }
        }
        Ok(out)
    }

    async fn anchor(&self, log: &str) -> Result<Option<AuditAnchor>, StorageError> {
        let kept: Option<StoredAnchor> =
            hget_json(&self.connection, self.anchors.clone(), log, "audit_anchors").await?;
        kept.map(|k| {
            Ok(AuditAnchor {
                seq: k
                    .seq
                    .parse()
                    .map_err(|e| crate::corrupt("audit_anchors", log, e))?,
                head: k.head,
            })
        })
        .transpose()
    }

    async fn advance_anchor(&self, log: &str, anchor: &AuditAnchor) -> Result<bool, StorageError> {
        let seq = anchor.seq.to_string();
        let stored = json(&StoredAnchor {
            seq: seq.clone(),
            head: anchor.head.clone(),
        })?;
        let mut con = self.connection.get().await?;
        let moved: i64 = self
            .advance
            .key(&self.anchors)
            .arg(log)
            .arg(seq)
            .arg(stored)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        Ok(moved == 1)
    }
}
