//! `--open N`: leaves state behind in the gateway instead of measuring
//! latency, so its memory can be read with that state live
//! (benches/memory.sh). In `mcp` mode, N MCP sessions opened with the token
//! (and never closed); in `authorize` mode, N reservations granted (and
//! never settled). The clients share the count, each on its own connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{
    authorize_call, http_connect, http_target, is_result, mcp_session, post_bytes, Args, Mode,
};

/// Opens `n` sessions or reservations over `args.concurrency` connections.
pub async fn open(args: Arc<Args>, token: Arc<String>, n: u64) -> Result<(), String> {
    if !matches!(args.mode, Mode::Mcp | Mode::Authorize) {
        return Err("--open applies to --mode mcp (sessions) or authorize (reservations)".into());
    }
    let left = Arc::new(AtomicU64::new(n));
    let clients: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(client(args.clone(), token.clone(), left.clone())))
        .collect();
    for c in clients {
        c.await.map_err(|e| e.to_string())??;
    }
    let what = if args.mode == Mode::Mcp {
        "MCP sessions"
    } else {
        "reservations"
    };
    println!("opened {n} {what}");
    Ok(())
}

async fn client(args: Arc<Args>, token: Arc<String>, left: Arc<AtomicU64>) -> Result<(), String> {
    let mut sender = http_connect(args.addr).await?;
    let target = http_target(&args, &token);
    let authorize = authorize_call(&args, &token);
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        if args.mode == Mode::Mcp {
            mcp_session(&mut sender, &target).await?;
        } else {
            let (_, answer) = post_bytes(&mut sender, &target, authorize.clone()).await?;
            if !is_result(&answer) {
                return Err(format!(
                    "authorize was refused: {}",
                    String::from_utf8_lossy(&answer)
                ));
            }
        }
    }
    Ok(())
}
