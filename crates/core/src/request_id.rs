//! Request IDs: each request a front takes gets one (the caller's
//! `X-Request-Id` when it is a sane token, else a new one), carried in a
//! task-local through the pipeline to the audit trail, the logs and the
//! upstream call, and answered back in `X-Request-Id`. The front that
//! took it (`mcp`, `jsonrpc`, `grpc`, `http`) travels with it, for the
//! decisions made on its behalf.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What a front knows of the request it is serving.
#[derive(Clone)]
struct Current {
    id: Arc<str>,
    front: &'static str,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// The most a caller's ID may be; longer ones are replaced.
const MAX_LEN: usize = 128;

/// The caller's ID when it is 1–128 of `[A-Za-z0-9._:-]` (nothing a log or
/// header could be bent with), else a new one.
pub fn from_header(value: Option<&[u8]>) -> Arc<str> {
    match value {
        Some(v)
            if (1..=MAX_LEN).contains(&v.len())
                && v.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(b)) =>
        {
            // Checked ASCII above.
            Arc::from(String::from_utf8_lossy(v).as_ref())
        }
        _ => new(),
    }
}

/// A new ID: this process's random prefix and a counter (unique, cheap; not
/// a secret).
pub fn new() -> Arc<str> {
    static PREFIX: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| {
        crate::random::bytes::<4>()
            .map(u32::from_be_bytes)
            .unwrap_or(std::process::id())
    });
    Arc::from(format!("{prefix:08x}{:012x}", NEXT.fetch_add(1, Ordering::Relaxed)).as_str())
}

/// Runs `f` with `id` as the current request's ID, taken by `front`.
pub async fn scope<F: Future>(id: Arc<str>, front: &'static str, f: F) -> F::Output {
    CURRENT.scope(Current { id, front }, f).await
}

/// `f` with the current request's ID (taken now), for a task spawned on
/// the request's behalf.
pub fn carried<F: Future>(f: F) -> impl Future<Output = F::Output> {
    let now = CURRENT.try_with(Current::clone).ok();
    async move {
        match now {
            Some(now) => CURRENT.scope(now, f).await,
            None => f.await,
        }
    }
}

/// The current request's ID, inside a front's [`scope`].
pub fn current() -> Option<Arc<str>> {
    CURRENT.try_with(|c| c.id.clone()).ok()
}

/// The front that took the current request, inside its [`scope`].
pub fn front() -> Option<&'static str> {
    CURRENT.try_with(|c| c.front).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_ids_are_kept_only_when_sane() {
        assert_eq!(&*from_header(Some(b"abc-123.x:y_z")), "abc-123.x:y_z");
        for bad in [&b""[..], b"a b", b"a\r\nb", &[b'a'; 129], "é".as_bytes()] {
            let id = from_header(Some(bad));
            assert_eq!(id.len(), 20, "{bad:?} replaced by a new ID");
        }
        assert_ne!(new(), new());
    }

    #[tokio::test]
    async fn the_id_is_current_inside_its_scope_only() {
        assert!(current().is_none() && front().is_none());
        let seen = scope(Arc::from("r1"), "mcp", async { (current(), front()) }).await;
        assert_eq!((seen.0.as_deref(), seen.1), (Some("r1"), Some("mcp")));
        let spawned = scope(Arc::from("r2"), "grpc", async {
            tokio::spawn(carried(async { (current(), front()) }))
                .await
                .unwrap()
        })
        .await;
        assert_eq!(
            (spawned.0.as_deref(), spawned.1),
            (Some("r2"), Some("grpc")),
            "carried into a spawned task"
        );
    }
}
