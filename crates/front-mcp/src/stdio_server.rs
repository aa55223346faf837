//! MCP over stdio for `dgw mcp`: the client runs dgw as its MCP server
//! (§11.3), one JSON-RPC message per line each way, one session for the
//! life of the process. Requests are handled concurrently; answers are
//! written as they complete, each after what its upstream sent the client
//! meanwhile (progress, log messages, its own requests: [`Relay`]).

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::message::Message;
use super::proxy::{Caller, McpProxy, Session};
use super::relay::Relay;
use dgw_front_jsonrpc::{RpcError, INVALID_REQUEST, PARSE_ERROR};

/// Serves MCP on stdin/stdout until stdin closes; with `pinned`, every
/// call of the session runs under that credential (or one extending it).
pub async fn serve(
    proxy: Arc<McpProxy>,
    max_message_bytes: usize,
    pinned: Option<dgw_core::protocol::Found>,
) -> std::io::Result<()> {
    let session = Arc::new(match pinned {
        Some(found) => Session::pinned_to(found),
        None => Session::default(),
    });
    let (tx, mut rx) = mpsc::channel::<Value>(1024);
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string().into_bytes();
            line.push(b'\n');
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let mut input = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    let mut inflight = JoinSet::new();
    loop {
        buf.clear();
        let n = (&mut input)
            .take(max_message_bytes as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await?;
        if n == 0 {
            break;
        }
        if buf.len() > max_message_bytes && !buf.ends_with(b"\n") {
            let e = RpcError::new(
                INVALID_REQUEST,
                "message_too_large",
                format!("a message over {max_message_bytes} bytes; closing"),
            );
            let _ = tx.send(e.response(Value::Null)).await;
            break;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let value = match delegateos::canonical::parse_strict(line, max_message_bytes) {
            Ok(v) => v,
            Err(e) => {
                let e = RpcError::new(PARSE_ERROR, "parse_error", format!("parse error: {e}"));
                let _ = tx.send(e.response(Value::Null)).await;
                continue;
            }
        };
        // `initialize` sets up the session the requests after it rely on
        // (its `_delegateos`), so it finishes before the next line is read.
        let is_initialize = value.get("method").and_then(Value::as_str) == Some("initialize");
        let (proxy, session, tx) = (proxy.clone(), session.clone(), tx.clone());
        let work = async move {
            let caller = Caller {
                session: &session,
                authorization: None,
                headers: None,
            };
            let answer = match value {
                Value::Array(items) => {
                    let mut answers = Vec::new();
                    for item in items {
                        if let Some(a) = handle_one(&proxy, caller, item).await {
                            answers.push(a);
                        }
                    }
                    (!answers.is_empty()).then_some(Value::Array(answers))
                }
                one => {
                    // One request: what its upstream sends the client on
                    // its stream is written before its answer.
                    let (relay, mut relayed) = Relay::channel(Some(&session.to_caller));
                    let relay_out = tx.clone();
                    let forward = async move {
                        while let Some(m) = relayed.recv().await {
                            if relay_out.send(m).await.is_err() {
                                break;
                            }
                        }
                    };
                    let handled = relay.scope(handle_one(&proxy, caller, one));
                    tokio::join!(handled, forward).0
                }
            };
            if let Some(a) = answer {
                let _ = tx.send(a).await;
            }
        };
        // Each line is a request of its own: it gets an ID, and its
        // decisions name this front, as over HTTP.
        let work = dgw_core::request_id::scope(dgw_core::request_id::new(), "mcp", work);
        if is_initialize {
            work.await;
        } else {
            inflight.spawn(work);
        }
        while inflight.try_join_next().is_some() {}
    }
    while inflight.join_next().await.is_some() {}
    drop(tx);
    let _ = writer.await;
    Ok(())
}

async fn handle_one(proxy: &McpProxy, caller: Caller<'_>, item: Value) -> Option<Value> {
    match Message::parse(item, &proxy.protocols().envelope_prefixes()) {
        Ok(Message::Response { id, reply }) => {
            // The client's answer to a request dgw relayed to it.
            if caller.session.to_caller.asks.answer(&id, reply) {
                return None;
            }
            dgw_core::telemetry::record_mcp_server_request("-", "-", "answer_refused");
            Some(
                RpcError::new(
                    INVALID_REQUEST,
                    "unknown_server_request",
                    "this answers no request dgw sent this session (unknown or already answered)",
                )
                .response(Value::Null),
            )
        }
        Ok(m) => proxy.handle(caller, m).await,
        Err((id, why)) => Some(RpcError::new(INVALID_REQUEST, "invalid_request", why).response(id)),
    }
}
