//! Resuming an answer's event stream after the connection carrying it
//! dropped (session revisions; issue 33). Each event dgw writes on a
//! session's streams carries an ID `<stream>-<seq>`, unique in the session,
//! and is kept in the session's bounded [`Replay`]; a `GET /mcp` with
//! `Last-Event-ID` gets the events of that stream after that one, then the
//! rest as they come, until the stream's answer (Streamable HTTP,
//! "Resumability and Redelivery"). A call whose caller went away goes on
//! to its end either way, and its remaining events are kept for it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

/// Most events one session keeps for resumption; the oldest go first.
pub const MAX_EVENTS: usize = 256;
/// Most bytes of events one session keeps.
pub const MAX_BYTES: usize = 1 << 20;
/// Frames waiting for a resumed stream's connection.
const FRAMES: usize = 64;
/// Ended streams remembered (so a resumption knows to stop).
const MAX_ENDED: usize = 64;
/// How long a resumed stream waits for the next event before it ends
/// (the caller may resume again).
const IDLE: Duration = Duration::from_secs(60);

struct Stored {
    stream: u64,
    seq: u64,
    frame: Bytes,
}

#[derive(Default)]
struct Kept {
    events: VecDeque<Stored>,
    bytes: usize,
    ended: VecDeque<u64>,
}

/// One session's recent events, for resumption.
#[derive(Default)]
pub struct Replay {
    next_stream: AtomicU64,
    kept: Mutex<Kept>,
    changed: Notify,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Replay")
    }
}

/// An event's ID: `<stream>-<seq>`.
pub fn event_id(stream: u64, seq: u64) -> String {
    format!("{stream}-{seq}")
}

fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (s, n) = id.trim().split_once('-')?;
    Some((s.parse().ok()?, n.parse().ok()?))
}

impl Replay {
    /// A new stream of this session.
    pub fn open(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Keeps event `seq` of `stream`, dropping the oldest past the bounds.
    pub fn record(&self, stream: u64, seq: u64, frame: Bytes) {
        let mut k = self.lock();
        k.bytes += frame.len();
        k.events.push_back(Stored { stream, seq, frame });
        while k.events.len() > MAX_EVENTS || k.bytes > MAX_BYTES {
            match k.events.pop_front() {
                Some(old) => k.bytes -= old.frame.len(),
                None => break,
            }
        }
        drop(k);
        self.changed.notify_waiters();
    }

    /// `stream` has written its answer: nothing more will come.
    pub fn end(&self, stream: u64) {
        let mut k = self.lock();
        k.ended.push_back(stream);
        if k.ended.len() > MAX_ENDED {
            k.ended.pop_front();
        }
        drop(k);
        self.changed.notify_waiters();
    }

    /// The kept events of `stream` after `seq`, and whether it ended.
    fn after(&self, stream: u64, seq: u64) -> (Vec<(u64, Bytes)>, bool) {
        let k = self.lock();
        let events = k
            .events
            .iter()
            .filter(|e| e.stream == stream && e.seq > seq)
            .map(|e| (e.seq, e.frame.clone()))
            .collect();
        (events, k.ended.contains(&stream))
    }

    /// Whether `stream` was ever opened in this session.
    fn known(&self, stream: u64) -> bool {
        stream >= 1 && stream <= self.next_stream.load(Ordering::Relaxed)
    }

    /// The rest of the stream `last_event_id` names, from after it, frame
    /// by frame: `None` when the ID is not one of this session's.
    pub fn resume(self: &Arc<Self>, last_event_id: &str) -> Option<mpsc::Receiver<Bytes>> {
        let (stream, mut seq) = parse_id(last_event_id)?;
        if !self.known(stream) {
            return None;
        }
        let (tx, rx) = mpsc::channel::<Bytes>(FRAMES);
        let replay = self.clone();
        tokio::spawn(async move {
            loop {
                let changed = replay.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let (events, ended) = replay.after(stream, seq);
                let caught_up = events.is_empty();
                for (n, frame) in events {
                    if tx.send(frame).await.is_err() {
                        return;
                    }
                    seq = n;
                }
                if caught_up {
                    if ended {
                        return;
                    }
                    if tokio::time::timeout(IDLE, changed).await.is_err() {
                        return;
                    }
                }
            }
        });
        Some(rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn kept_events_are_bounded() {
        let r = Replay::default();
        let s = r.open();
        for i in 0..(MAX_EVENTS as u64 + 10) {
            r.record(s, i, Bytes::from_static(b"x"));
        }
        let (events, ended) = r.after(s, 0);
        assert_eq!(events.len(), MAX_EVENTS);
        assert!(!ended);
        let big = Bytes::from(vec![b'y'; MAX_BYTES / 2 + 1]);
        r.record(s, 1000, big.clone());
        r.record(s, 1001, big);
        let k = r.lock();
        assert!(k.bytes <= MAX_BYTES, "{}", k.bytes);
    }

    #[tokio::test]
    async fn a_resumed_stream_replays_what_followed_then_waits_for_the_rest() {
        let r = Arc::new(Replay::default());
        let s = r.open();
        r.record(s, 1, Bytes::from_static(b"one "));
        r.record(s, 2, Bytes::from_static(b"two "));
        assert!(r.resume("9-1").is_none());
        assert!(r.resume("nonsense").is_none());
        let body = crate::sse::EventBody::from_channel(r.resume(&event_id(s, 1)).unwrap());
        let more = r.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            more.record(s, 3, Bytes::from_static(b"three"));
            more.end(s);
        });
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], b"two three");
    }
}
