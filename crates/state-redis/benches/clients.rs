//! The two Rust Redis clients the backend could use, side by side on one
//! `redis-server`: `redis` (its tokio connection manager, what the backend
//! uses) and `fred`, each with one multiplexed connection shared by 64
//! tasks calling one small Lua script by SHA (`EVALSHA`, as the budget
//! scripts are called). Alternating rounds; prints calls per second.
//!   cargo bench -p dgw-state-redis --bench clients

// A benchmark's setup and helpers: a failure should stop it loudly, and
// clippy's allow-unwrap-in-tests does not reach outside #[test].
#![allow(clippy::unwrap_used)]

// The tests' server helper; the bench needs only part of it.
#[allow(dead_code)]
#[path = "../../../tests/support/redis.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use fred::interfaces::{ClientLike, LuaInterface};

const TASKS: usize = 64;
const CALLS: usize = 2_000;
const SCRIPT: &str = "return redis.call('HINCRBY', KEYS[1], 's', ARGV[1])";

async fn with_redis(url: &str) -> Duration {
    let client = redis::Client::open(url).unwrap();
    let con = client.get_connection_manager().await.unwrap();
    let script = redis::Script::new(SCRIPT);
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (mut con, script) = (con.clone(), script.clone());
            tokio::spawn(async move {
                for _ in 0..CALLS {
                    let _: i64 = script
                        .key(format!("{{bench}}:r{t}"))
                        .arg(1)
                        .invoke_async(&mut con)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    started.elapsed()
}

async fn with_fred(url: &str) -> Duration {
    let client =
        fred::types::Builder::from_config(fred::types::config::Config::from_url(url).unwrap())
            .build()
            .unwrap();
    client.init().await.unwrap();
    let sha: String = client.script_load(SCRIPT).await.unwrap();
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (client, sha) = (client.clone(), sha.clone());
            tokio::spawn(async move {
                for _ in 0..CALLS {
                    let _: i64 = client
                        .evalsha(sha.as_str(), format!("{{bench}}:f{t}"), 1)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    client.quit().await.unwrap();
    elapsed
}

fn main() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let calls = (TASKS * CALLS) as f64;
    for round in 1..=3 {
        let r = rt.block_on(with_redis(&url));
        let f = rt.block_on(with_fred(&url));
        println!(
            "round {round}: redis {:.0} calls/s, fred {:.0} calls/s",
            calls / r.as_secs_f64(),
            calls / f.as_secs_f64()
        );
    }
}
