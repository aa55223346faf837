//! Budgets in Redis: each change to a chain is one Lua script (reserve,
//! end, charge), so it is atomic against every replica. The keys of one
//! delegation tree share the hash tag of its root:
//!
//! - `<prefix>:{<tag>}:l:<budget key>`: a level (hash: `l` limit, `s`
//!   spent, `r` reserved, `o` open reservations);
//! - `<prefix>:{<tag>}:r:<reservation id>`: an open reservation (its
//!   [`ReservationRecord`] as JSON);
//! - `<prefix>:{<tag>}:d`: the tree's open reservations by deadline;
//!
//! and four indexes outside any tree, in a slot of their own, written
//! after the script (each idempotent): `<prefix>:{idx}:trees` (the tags,
//! for the sweep), `<prefix>:{idx}:bd:<delegation id>` (the keys ending at
//! a delegation, for reports), `<prefix>:{idx}:tops` (top-level keys,
//! for tenant totals) and `<prefix>:{idx}:ch:<budget key>` (the keys
//! directly below a node, or a root's top levels below the root alone: a
//! sorted set whose members all score 0, so it is read in pages in key
//! order with `ZRANGEBYLEX`). Reads over several trees go tree by tree (a
//! cluster answers no pipeline across slots).
//! A reservation's ID carries its tree's tag (`res_….<tag>`), so settling
//! by ID finds the tree.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::{AsyncCommands, Script, Value as Reply};

use dgw_core::budget::book::ReservationRecord;
use dgw_core::budget::{
    BudgetKey, Child, HolderDigest, LedgerError, LevelReport, OnExpiry, Reservation,
    ReservationIds, Settlement, TopLevel, CHILDREN_PAGE,
};
use dgw_core::state::{BudgetSettings, BudgetStore, StorageError};

use crate::connection::Connection;

/// The largest value Lua counts exactly (2^53 - 1).
pub const MAX_EXACT: u64 = (1 << 53) - 1;

/// The Redis [`BudgetStore`].
pub struct RedisBudgets {
    connection: Connection,
    prefix: Arc<str>,
    ids: ReservationIds,
    ttl: Duration,
    max_open: usize,
    reserve: Script,
    end: Script,
    charge: Script,
    /// Index entries this process has written (they never change).
    indexed: Mutex<HashSet<String>>,
}

/// The hash tag of the tree rooted at `root`: a digest, so no root string
/// (which a config or a caller chose) shapes a key.
fn tag(root: &str) -> String {
    use blake2::digest::consts::U8;
    use blake2::{Blake2b, Digest};
    let mut h = Blake2b::<U8>::new();
    h.update(root.as_bytes());
    hex::encode(h.finalize())
}

/// A script call over one chain, before its last arguments.
struct ChainCall<'s> {
    /// The levels, limits clamped to [`MAX_EXACT`].
    levels: Vec<(BudgetKey, u64)>,
    /// Their tree's tag.
    tag: String,
    /// The script with the levels' keys.
    invocation: redis::ScriptInvocation<'s>,
}

/// How an end script is asked to end a reservation.
#[derive(Clone, Copy)]
enum End {
    Settle(u64),
    SettleCharged(u64),
    Release,
    Expire(u64),
}

fn as_u64(v: &Reply) -> u64 {
    match v {
        Reply::Int(i) => u64::try_from(*i).unwrap_or(0),
        Reply::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        Reply::SimpleString(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn as_str(v: &Reply) -> &str {
    match v {
        Reply::BulkString(b) => std::str::from_utf8(b).unwrap_or(""),
        Reply::SimpleString(s) => s,
        _ => "",
    }
}

impl RedisBudgets {
    pub fn new(
        connection: Connection,
        prefix: Arc<str>,
        settings: BudgetSettings,
    ) -> Result<Self, StorageError> {
        Ok(Self {
            connection,
            prefix,
            ids: ReservationIds::new().map_err(|e| StorageError::Backend(e.to_string()))?,
            ttl: settings.reservation_ttl,
            max_open: settings.max_open,
            reserve: Script::new(include_str!("reserve.lua")),
            end: Script::new(include_str!("end.lua")),
            charge: Script::new(include_str!("charge.lua")),
            indexed: Mutex::new(HashSet::new()),
        })
    }

    /// An index key.
    fn index_key(&self, name: &str) -> String {
        format!("{}:{{idx}}:{name}", self.prefix)
    }

    /// The prefix of every key of the tree tagged `tag`.
    fn tree(&self, tag: &str) -> String {
        format!("{}:{{{tag}}}:", self.prefix)
    }

    fn level_key(&self, key: &BudgetKey) -> String {
        format!("{}l:{}", self.tree(&tag(key.root())), key.as_str())
    }

    /// The tree's tag of a chain: every level must share the root.
    fn chain_tag(levels: &[(BudgetKey, u64)]) -> Result<String, LedgerError> {
        let Some((first, _)) = levels.first() else {
            return Err(StorageError::Backend("a chain has at least one level".into()).into());
        };
        if levels.iter().any(|(k, _)| k.root() != first.root()) {
            return Err(StorageError::Backend("a chain's levels share one root".into()).into());
        }
        Ok(tag(first.root()))
    }

    /// A chain's levels with their limits clamped to [`MAX_EXACT`], its
    /// tree's tag, and an invocation of `script` with the levels' keys.
    fn chain_call<'s>(
        &self,
        script: &'s Script,
        levels: &[(BudgetKey, u64)],
    ) -> Result<ChainCall<'s>, LedgerError> {
        let tag = Self::chain_tag(levels)?;
        let levels: Vec<(BudgetKey, u64)> = levels
            .iter()
            .map(|(k, l)| (k.clone(), (*l).min(MAX_EXACT)))
            .collect();
        let tree = self.tree(&tag);
        let mut invocation = script.prepare_invoke();
        for (k, _) in &levels {
            invocation.key(format!("{tree}l:{}", k.as_str()));
        }
        Ok(ChainCall {
            levels,
            tag,
            invocation,
        })
    }

    /// Runs a chain script, its levels' limits the last arguments: `ok`,
    /// or why the amount does not fit.
    async fn run_chain(
        &self,
        mut invocation: redis::ScriptInvocation<'_>,
        levels: &[(BudgetKey, u64)],
        amount: u64,
    ) -> Result<(), LedgerError> {
        for (_, limit) in levels {
            invocation.arg(*limit);
        }
        let mut con = self.connection.get().await?;
        let reply: Vec<Reply> = invocation
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        if reply.first().map(as_str) != Some("ok") {
            return Err(Self::exceeded(levels, &reply, amount));
        }
        Ok(())
    }

    /// The tree of a reservation ID (`None`: not one of ours).
    fn reservation_tag(id: &str) -> Option<&str> {
        let (_, tag) = id.rsplit_once('.')?;
        (tag.len() == 16 && tag.bytes().all(|b| b.is_ascii_hexdigit())).then_some(tag)
    }

    fn exceeded(levels: &[(BudgetKey, u64)], reply: &[Reply], amount: u64) -> LedgerError {
        let i = reply.get(1).map(as_u64).unwrap_or(1).max(1) as usize - 1;
        let key = levels.get(i).map(|(k, _)| k.delegation_id().to_owned());
        match as_str(&reply[0]) {
            "too_many_open" => LedgerError::TooManyOpen {
                delegation_id: key.unwrap_or_default(),
                open: reply.get(2).map(as_u64).unwrap_or(0) as usize,
            },
            _ => LedgerError::Exceeded {
                delegation_id: key.unwrap_or_default(),
                limit: reply.get(2).map(as_u64).unwrap_or(0),
                spent: reply.get(3).map(as_u64).unwrap_or(0),
                reserved: reply.get(4).map(as_u64).unwrap_or(0),
                amount,
            },
        }
    }

    /// Writes the indexes of `levels` this process has not written yet.
    async fn index(&self, levels: &[(BudgetKey, u64)], tag: &str) -> Result<(), LedgerError> {
        // (index, member, whether the index is a sorted set)
        let mut entries: Vec<(String, String, bool)> =
            vec![(self.index_key("trees"), tag.into(), false)];
        for (k, _) in levels {
            entries.push((
                self.index_key(&format!("bd:{}", k.delegation_id())),
                k.as_str().to_owned(),
                false,
            ));
            if k.is_top() {
                entries.push((self.index_key("tops"), k.as_str().to_owned(), false));
            }
            if let Some(parent) = k.parent() {
                entries.push((
                    self.index_key(&format!("ch:{}", parent.as_str())),
                    k.as_str().to_owned(),
                    true,
                ));
            }
        }
        let new: Vec<(String, String, bool)> = {
            let seen = self.indexed.lock().unwrap_or_else(|p| p.into_inner());
            entries
                .into_iter()
                .filter(|(set, member, _)| !seen.contains(&format!("{set}\0{member}")))
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (set, member, ordered) in &new {
            if *ordered {
                pipe.zadd(set, member, 0).ignore();
            } else {
                pipe.sadd(set, member).ignore();
            }
        }
        let mut con = self.connection.get().await?;
        pipe.query_async::<()>(&mut con)
            .await
            .map_err(crate::backend)?;
        let mut seen = self.indexed.lock().unwrap_or_else(|p| p.into_inner());
        for (set, member, _) in new {
            seen.insert(format!("{set}\0{member}"));
        }
        Ok(())
    }

    async fn end_reservation(&self, id: &str, how: End) -> Result<(u64, u64), LedgerError> {
        let unknown = || LedgerError::UnknownReservation(id.to_owned());
        let tag = Self::reservation_tag(id).ok_or_else(unknown)?;
        let tree = self.tree(tag);
        let (mode, actual, now) = match how {
            End::Settle(a) => ("settle", a, 0),
            End::SettleCharged(a) => ("settle_charged", a, 0),
            End::Release => ("release", 0, 0),
            End::Expire(now) => ("expire", 0, now),
        };
        let mut con = self.connection.get().await?;
        let reply: Vec<Reply> = self
            .end
            .key(format!("{tree}r:{id}"))
            .key(format!("{tree}d"))
            .arg(mode)
            .arg(actual.min(MAX_EXACT + 1))
            .arg(format!("{tree}l:"))
            .arg(id)
            .arg(now)
            .invoke_async(&mut con)
            .await
            .map_err(crate::backend)?;
        match reply.first().map(as_str) {
            Some("ok") => Ok((
                reply.get(1).map(as_u64).unwrap_or(0),
                reply.get(2).map(as_u64).unwrap_or(0),
            )),
            Some("exceeds") => Err(LedgerError::ExceedsReservation {
                actual,
                reserved: reply.get(1).map(as_u64).unwrap_or(0),
            }),
            Some("not_charged") => Err(LedgerError::NotChargedOnExpiry(id.to_owned())),
            _ => Err(unknown()),
        }
    }

    async fn settle_as(&self, id: &str, how: End) -> Result<Settlement, LedgerError> {
        let (amount, charged) = self.end_reservation(id, how).await?;
        Ok(Settlement {
            reservation_id: id.to_owned(),
            charged_microcents: charged,
            released_microcents: amount - charged,
        })
    }

    async fn read_levels(&self, keys: &[BudgetKey]) -> Result<Vec<[u64; 3]>, LedgerError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("HMGET")
                .arg(self.level_key(k))
                .arg("l")
                .arg("s")
                .arg("r");
        }
        let mut con = self.connection.get().await?;
        let rows: Vec<Vec<Option<u64>>> =
            pipe.query_async(&mut con).await.map_err(crate::backend)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let at = |i: usize| r.get(i).copied().flatten();
                [
                    at(0).unwrap_or(u64::MAX),
                    at(1).unwrap_or(0),
                    at(2).unwrap_or(0),
                ]
            })
            .collect())
    }
}

fn report(key: &BudgetKey, limit: u64, spent: u64, reserved: u64) -> LevelReport {
    LevelReport {
        delegation_id: key.delegation_id().to_owned(),
        budget_microcents: limit,
        spent_microcents: spent,
        reserved_microcents: reserved,
        remaining_microcents: limit.saturating_sub(spent).saturating_sub(reserved),
    }
}

#[async_trait]
impl BudgetStore for RedisBudgets {
    fn reservation_ttl(&self) -> Duration {
        self.ttl
    }

    async fn reserve_until(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        deadline_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError> {
        let ChainCall {
            levels,
            tag,
            mut invocation,
        } = self.chain_call(&self.reserve, levels)?;
        if amount > MAX_EXACT {
            let (k, limit) = &levels[0];
            return Err(LedgerError::Exceeded {
                delegation_id: k.delegation_id().to_owned(),
                limit: *limit,
                spent: 0,
                reserved: 0,
                amount,
            });
        }
        let id = format!("{}.{tag}", self.ids.next_id());
        let record = ReservationRecord {
            levels: levels.clone(),
            amount,
            deadline_ms,
            on_expiry,
            holder,
        };
        let json =
            serde_json::to_string(&record).map_err(|e| StorageError::Backend(e.to_string()))?;
        let tree = self.tree(&tag);
        invocation
            .key(format!("{tree}r:{id}"))
            .key(format!("{tree}d"))
            .arg(amount)
            .arg(self.max_open)
            .arg(deadline_ms)
            .arg(&id)
            .arg(json);
        self.run_chain(invocation, &levels, amount).await?;
        self.index(&levels, &tag).await?;
        Ok(Reservation {
            reservation_id: id,
            amount_microcents: amount,
            deadline_ms,
        })
    }

    async fn settle(&self, reservation_id: &str, actual: u64) -> Result<Settlement, LedgerError> {
        self.settle_as(reservation_id, End::Settle(actual)).await
    }

    async fn settle_charged(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        self.settle_as(reservation_id, End::SettleCharged(actual))
            .await
    }

    async fn charge(&self, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError> {
        let ChainCall {
            levels,
            tag,
            mut invocation,
        } = self.chain_call(&self.charge, levels)?;
        invocation.arg(amount.min(MAX_EXACT + 1));
        self.run_chain(invocation, &levels, amount).await?;
        self.index(&levels, &tag).await
    }

    async fn release(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        Ok(self.end_reservation(reservation_id, End::Release).await?.0)
    }

    async fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError> {
        let mut con = self.connection.get().await?;
        let trees: Vec<String> = con
            .smembers(self.index_key("trees"))
            .await
            .map_err(crate::backend)?;
        let mut ended = 0;
        for tag in trees {
            let due: Vec<String> = con
                .zrangebyscore(format!("{}d", self.tree(&tag)), 0, now_ms)
                .await
                .map_err(crate::backend)?;
            for id in due {
                // Another replica may end it first: then it is not ours to count.
                match self.end_reservation(&id, End::Expire(now_ms)).await {
                    Ok(_) => ended += 1,
                    Err(LedgerError::UnknownReservation(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(ended)
    }

    async fn holder(&self, reservation_id: &str) -> Result<Option<HolderDigest>, LedgerError> {
        let unknown = || LedgerError::UnknownReservation(reservation_id.to_owned());
        let tag = Self::reservation_tag(reservation_id).ok_or_else(unknown)?;
        let mut con = self.connection.get().await?;
        let raw: Option<String> = con
            .get(format!("{}r:{reservation_id}", self.tree(tag)))
            .await
            .map_err(crate::backend)?;
        let raw = raw.ok_or_else(unknown)?;
        let record: ReservationRecord = serde_json::from_str(&raw)
            .map_err(|e| crate::corrupt("reservations", reservation_id, e))?;
        Ok(record.holder)
    }

    async fn spent(&self, key: &BudgetKey) -> Result<u64, LedgerError> {
        Ok(self.read_levels(std::slice::from_ref(key)).await?[0][1])
    }

    async fn report_levels(
        &self,
        levels: &[(BudgetKey, u64)],
    ) -> Result<Vec<LevelReport>, LedgerError> {
        let keys: Vec<BudgetKey> = levels.iter().map(|(k, _)| k.clone()).collect();
        let rows = self.read_levels(&keys).await?;
        Ok(levels
            .iter()
            .zip(rows)
            .map(|((k, limit), [l, s, r])| report(k, l.min((*limit).min(MAX_EXACT)), s, r))
            .collect())
    }

    async fn report(&self, delegation_id: &str) -> Result<Vec<Vec<LevelReport>>, LedgerError> {
        let mut con = self.connection.get().await?;
        let mut keys: Vec<String> = con
            .smembers(self.index_key(&format!("bd:{delegation_id}")))
            .await
            .map_err(crate::backend)?;
        keys.sort();
        let mut out = Vec::new();
        for key in keys {
            let lineage = BudgetKey::from_stored(&key).lineage();
            let rows = self.read_levels(&lineage).await?;
            out.push(
                lineage
                    .iter()
                    .zip(rows)
                    .map(|(k, [l, s, r])| report(k, if l == u64::MAX { 0 } else { l }, s, r))
                    .collect(),
            );
        }
        Ok(out)
    }

    async fn top_levels(&self) -> Result<Vec<TopLevel>, LedgerError> {
        let mut con = self.connection.get().await?;
        let tops: Vec<String> = con
            .smembers(self.index_key("tops"))
            .await
            .map_err(crate::backend)?;
        let keys: Vec<BudgetKey> = tops.iter().map(|k| BudgetKey::from_stored(k)).collect();
        let rows = self.read_levels(&keys).await?;
        Ok(keys
            .iter()
            .zip(rows)
            .map(|(k, [l, s, r])| TopLevel {
                root: k.root().to_owned(),
                level: LevelReport {
                    delegation_id: k.delegation_id().to_owned(),
                    budget_microcents: l,
                    spent_microcents: s,
                    reserved_microcents: r,
                    remaining_microcents: l.saturating_sub(s).saturating_sub(r),
                },
            })
            .collect())
    }

    async fn children(
        &self,
        parent: &BudgetKey,
        after: Option<&BudgetKey>,
        limit: usize,
    ) -> Result<Vec<Child>, LedgerError> {
        let limit = limit.min(CHILDREN_PAGE);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let from = after.map_or_else(|| "-".to_owned(), |a| format!("({}", a.as_str()));
        let mut con = self.connection.get().await?;
        let below: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(self.index_key(&format!("ch:{}", parent.as_str())))
            .arg(from)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut con)
            .await
            .map_err(crate::backend)?;
        drop(con);
        let keys: Vec<BudgetKey> = below.iter().map(|k| BudgetKey::from_stored(k)).collect();
        let rows = self.read_levels(&keys).await?;
        Ok(keys
            .into_iter()
            .zip(rows)
            .map(|(key, [l, s, r])| Child {
                level: report(&key, if l == u64::MAX { 0 } else { l }, s, r),
                key,
            })
            .collect())
    }

    async fn open_reservations(&self) -> Result<usize, LedgerError> {
        let mut con = self.connection.get().await?;
        let trees: Vec<String> = con
            .smembers(self.index_key("trees"))
            .await
            .map_err(crate::backend)?;
        let mut open = 0;
        for tag in &trees {
            let n: usize = con
                .zcard(format!("{}d", self.tree(tag)))
                .await
                .map_err(crate::backend)?;
            open += n;
        }
        Ok(open)
    }

    fn writable(&self) -> bool {
        true
    }

    async fn ready(&self) -> Result<(), StorageError> {
        let mut con = self.connection.get().await?;
        redis::cmd("PING")
            .query_async::<()>(&mut con)
            .await
            .map_err(crate::backend)
    }

    fn checkpoint(&self) -> Result<(), StorageError> {
        // Redis persists by its own configuration (docs/operations.md).
        Ok(())
    }
}
