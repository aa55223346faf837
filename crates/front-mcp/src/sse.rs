//! Answering a POST as a server-sent event stream (issue 33): when the
//! caller accepts `text/event-stream` and the upstream sends something for
//! the caller before its answer, the answer becomes a stream of those
//! messages ending with the answer; otherwise it stays one JSON body.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Frame;
use hyper::header::{HeaderMap, ACCEPT};
use serde_json::Value;
use tokio::sync::mpsc;

/// Frames waiting for an answer's connection.
const QUEUE: usize = 64;
use super::resume::{event_id, Replay};

/// How long a caller may leave its stream unread before dgw ends it.
const STALLED: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether the request accepts an event stream as its answer.
pub fn accepts_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// An event stream's body: events as they are written, the end when the
/// answer has been.
pub struct EventBody {
    rx: mpsc::Receiver<Bytes>,
}

impl EventBody {
    /// The body of the frames `rx` receives.
    pub fn from_channel(rx: mpsc::Receiver<Bytes>) -> Self {
        Self { rx }
    }
}

impl hyper::body::Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

impl std::fmt::Debug for EventBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventBody")
    }
}

/// One message as an event, with its ID when it has one. JSON text holds
/// no raw line break, so one `data:` line carries it.
pub fn event(id: Option<&str>, message: &Value) -> Bytes {
    let mut out = Vec::new();
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"event: message\ndata: ");
    // A `Value` has only string keys: serializing it cannot fail.
    out.extend(serde_json::to_vec(message).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// How a request was answered: now, or as a stream.
pub enum Answered<T> {
    Now(T),
    Streaming(EventBody),
}

/// Runs `work` (a request's handling, in its relay's scope, whose
/// receiving end is `relayed`): its output when it ends before anything
/// was relayed; else a stream of what is relayed, ending with the event
/// `last` makes of its output. Once streaming, the work goes on in a task
/// of its own, to its end even if the caller goes away (the call is
/// settled as any other); a stream left unread for [`STALLED`] is ended.
/// A `resumable` stream's events carry IDs and are kept in its session's
/// [`Replay`] (also after the caller went away).
pub async fn answer_or_stream<F, T>(
    work: F,
    mut relayed: mpsc::Receiver<Value>,
    last: fn(T) -> Option<Value>,
    resumable: Option<Arc<Replay>>,
) -> Answered<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut work = Box::pin(work);
    let first = tokio::select! {
        biased;
        out = &mut work => return Answered::Now(out),
        Some(first) = relayed.recv() => first,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(QUEUE);
    // The work goes on by itself: a caller that reads slowly, or not at
    // all, slows only its own stream (whose queue then drops
    // notifications), never the call.
    let (done, mut finished) = tokio::sync::oneshot::channel();
    tokio::spawn(dgw_core::request_id::carried(async move {
        let _ = done.send(work.await);
    }));
    let mut writer = Writer {
        live: Some(tx),
        stream: resumable.map(|r| {
            let n = r.open();
            (r, n)
        }),
        seq: 0,
    };
    tokio::spawn(async move {
        writer.write(&first).await;
        let out = loop {
            if !writer.wanted() {
                return;
            }
            // A caller that goes away is noticed at once, not at the
            // next write: the work's relay closes with this task (a
            // listen then stops).
            let live = writer.live.clone();
            let gone = async {
                match &live {
                    Some(tx) => tx.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                Some(m) = relayed.recv() => writer.write(&m).await,
                out = &mut finished => break out,
                () = gone => writer.live = None,
            }
        };
        while let Ok(m) = relayed.try_recv() {
            writer.write(&m).await;
        }
        if let Some(answer) = out.ok().and_then(last) {
            writer.write(&answer).await;
        }
        writer.end();
    });
    Answered::Streaming(EventBody { rx })
}

/// Writes one answer's events: to the caller while it reads them, and,
/// for a resumable stream, into its session's [`Replay`].
struct Writer {
    /// `None` once the caller stopped reading (or went away).
    live: Option<mpsc::Sender<Bytes>>,
    stream: Option<(Arc<Replay>, u64)>,
    seq: u64,
}

impl Writer {
    async fn write(&mut self, message: &Value) {
        self.seq += 1;
        let id = self
            .stream
            .as_ref()
            .map(|(_, stream)| event_id(*stream, self.seq));
        let frame = event(id.as_deref(), message);
        if let Some((replay, stream)) = &self.stream {
            replay.record(*stream, self.seq, frame.clone());
        }
        if let Some(tx) = &self.live {
            let sent = tokio::time::timeout(STALLED, tx.send(frame)).await;
            if !matches!(sent, Ok(Ok(()))) {
                self.live = None;
            }
        }
    }

    /// Whether anyone may still read what is written.
    fn wanted(&self) -> bool {
        self.live.is_some() || self.stream.is_some()
    }

    fn end(&self) {
        if let Some((replay, stream)) = &self.stream {
            replay.end(*stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use serde_json::json;

    #[tokio::test]
    async fn work_that_relays_nothing_is_answered_now() {
        let (_tx, rx) = mpsc::channel(1);
        let got = answer_or_stream(async { Some(json!(1)) }, rx, |v| v, None).await;
        assert!(matches!(got, Answered::Now(Some(v)) if v == json!(1)));
    }

    #[tokio::test]
    async fn relayed_messages_then_the_answer_make_a_stream() {
        let (tx, rx) = mpsc::channel(4);
        let work = async move {
            tx.send(json!({"n": 1})).await.unwrap();
            tokio::task::yield_now().await;
            tx.send(json!({"n": 2})).await.unwrap();
            Some(json!({"answer": true}))
        };
        let Answered::Streaming(body) = answer_or_stream(work, rx, |v| v, None).await else {
            panic!("a stream")
        };
        let text = body.collect().await.unwrap().to_bytes();
        assert_eq!(
            std::str::from_utf8(&text).unwrap(),
            "event: message\ndata: {\"n\":1}\n\nevent: message\ndata: {\"n\":2}\n\nevent: message\ndata: {\"answer\":true}\n\n"
        );
    }

    #[test]
    fn accept_lists_are_read_whole() {
        let mut h = HeaderMap::new();
        assert!(!accepts_events(&h));
        h.insert(
            ACCEPT,
            "application/json, text/event-stream".parse().unwrap(),
        );
        assert!(accepts_events(&h));
    }
}
