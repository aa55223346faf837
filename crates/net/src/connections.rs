//! Connection limits for every listener (HTTP and gRPC): a client that
//! sends its headers a byte a minute, or opens sockets and sends nothing,
//! must not hold descriptors until the gateway can accept no one.
//!
//! Each accepted socket is wrapped in a [`TrackedIo`] that notes when bytes
//! move and shares a [`ConnState`] with the listener's [`Tracker`]. The
//! socket fails its next read or write (which ends the connection) when:
//!
//! - it has no request in flight and has moved no bytes for `idle_timeout`;
//! - (HTTP/1) it started sending a request head `header_read_timeout` ago
//!   and the head is still incomplete;
//! - (HTTP/2, [`crate::h2_frames`]) it has no request in flight and has been
//!   in the middle of its preface or of a frame for `header_read_timeout`;
//!   the preface is due from `accept`, the TLS handshake included;
//! - the tracker shed it: when `max_connections` are open, or `accept`
//!   fails for want of descriptors, the connection idle the longest is
//!   closed to make room, so the accept loop never stalls and `/healthz`
//!   always answers.
//!
//! A connection's task checks its deadlines from inside `poll_read`, woken
//! by a timer set to its nearest deadline (or by the tracker when it is
//! shed), so no watchdog task per connection exists and an idle connection
//! sleeps until it is due.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How often a connection with a request in flight re-checks its
/// deadlines (an idle one sleeps until its next deadline).
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// The earliest a connection re-checks, however close its deadline.
const MIN_CHECK: Duration = Duration::from_millis(20);

/// One listener's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a request head may take to arrive (`None`: not checked).
    /// For HTTP/2 (`http2`), how long a connection with no request in
    /// flight may be in the middle of its preface or of a frame.
    pub header_read_timeout: Option<Duration>,
    /// The listener speaks HTTP/2 only (gRPC): heads are reported frame by
    /// frame by [`crate::h2_frames::H2Frames`] above TLS, not guessed from
    /// the bytes that arrive, and the preface is due from `accept`.
    pub http2: bool,
    /// How long a connection with no request in flight may stay silent.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

/// What the listener and a connection share.
#[derive(Debug)]
pub struct ConnState {
    id: u64,
    /// Milliseconds since the tracker's epoch of the last byte either way.
    last_activity: AtomicU64,
    /// When the connection last had no request in flight (0: busy).
    idle_since: AtomicU64,
    /// When the first byte of a request head came in, until the request
    /// starts (0: none pending).
    head_since: AtomicU64,
    busy: AtomicUsize,
    shed: AtomicBool,
    /// A head deadline began since the connection's timer was set: it is
    /// set again before it is next waited on.
    rearm: AtomicBool,
    /// The task waiting to read, woken when the connection is shed.
    reader: Mutex<Option<std::task::Waker>>,
}

/// Marks a connection busy while a request runs.
pub struct Busy(Arc<ConnState>, Arc<TrackerInner>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            let now = self.1.now_ms();
            self.0.idle_since.store(now, Ordering::Release);
            self.0.last_activity.store(now, Ordering::Release);
        }
    }
}

#[derive(Debug)]
struct TrackerInner {
    epoch: Instant,
    limits: Limits,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
}

impl TrackerInner {
    fn now_ms(&self) -> u64 {
        // +1 so that 0 can mean "none".
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Whether `c` should be closed now.
    fn expired(&self, c: &ConnState) -> bool {
        if c.shed.load(Ordering::Acquire) {
            return true;
        }
        if c.busy.load(Ordering::Acquire) > 0 {
            return false;
        }
        let now = self.now_ms();
        let silent = now.saturating_sub(c.last_activity.load(Ordering::Acquire));
        if silent > self.limits.idle_timeout.as_millis() as u64 {
            return true;
        }
        let head = c.head_since.load(Ordering::Acquire);
        match self.limits.header_read_timeout {
            Some(limit) if head > 0 => now.saturating_sub(head) > limit.as_millis() as u64,
            _ => false,
        }
    }

    /// How long until `c` should be checked again: its nearest deadline,
    /// so idle connections do not wake up for nothing.
    fn next_check(&self, c: &ConnState) -> Duration {
        if c.busy.load(Ordering::Acquire) > 0 {
            return CHECK_EVERY;
        }
        let now = self.now_ms();
        let idle_left = (self.limits.idle_timeout.as_millis() as u64)
            .saturating_sub(now.saturating_sub(c.last_activity.load(Ordering::Acquire)));
        let head = c.head_since.load(Ordering::Acquire);
        let head_left = match self.limits.header_read_timeout {
            Some(limit) if head > 0 => {
                (limit.as_millis() as u64).saturating_sub(now.saturating_sub(head))
            }
            _ => u64::MAX,
        };
        // +1 ms: past the deadline, not on it.
        Duration::from_millis(idle_left.min(head_left).saturating_add(1)).max(MIN_CHECK)
    }
}

/// A listener's open connections.
#[derive(Debug, Clone)]
pub struct Tracker(Arc<TrackerInner>);

impl Tracker {
    pub fn new(limits: Limits) -> Self {
        Self(Arc::new(TrackerInner {
            epoch: Instant::now(),
            limits,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }))
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnState>>> {
        self.0.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.open().len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes the connection that has been idle the longest (none while
    /// every one has a request in flight); whether there was one.
    pub fn shed_one(&self) -> bool {
        let victim = self
            .open()
            .values()
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.shed.load(Ordering::Acquire))
            .min_by_key(|c| c.idle_since.load(Ordering::Acquire))
            .cloned();
        match victim {
            Some(c) => {
                c.shed.store(true, Ordering::Release);
                let waiting = c.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(waker) = waiting {
                    waker.wake();
                }
                dgw_core::telemetry::record_connection_shed();
                true
            }
            None => false,
        }
    }

    /// Wraps an accepted socket, shedding an idle connection first when the
    /// listener is full; `None` (the socket is to be closed) when it is full
    /// of connections that all have a request in flight.
    pub fn track<T>(&self, io: T) -> Option<TrackedIo<T>> {
        if self.len() >= self.0.limits.max_connections && !self.shed_one() {
            dgw_core::telemetry::record_connection_refused();
            return None;
        }
        let now = self.0.now_ms();
        let state = Arc::new(ConnState {
            id: self.0.next_id.fetch_add(1, Ordering::Relaxed),
            last_activity: AtomicU64::new(now),
            idle_since: AtomicU64::new(now),
            // An HTTP/2 client speaks first: its preface is due from now.
            head_since: AtomicU64::new(if self.0.limits.http2 { now } else { 0 }),
            busy: AtomicUsize::new(0),
            shed: AtomicBool::new(false),
            rearm: AtomicBool::new(false),
            reader: Mutex::new(None),
        });
        self.open().insert(state.id, state.clone());
        Some(TrackedIo {
            io,
            state,
            tracker: self.clone(),
            check: Box::pin(tokio::time::sleep(MIN_CHECK)),
        })
    }

    /// Notes whether an HTTP/2 connection is in the middle of its preface
    /// or of a frame: its head deadline runs from the first read that left
    /// one incomplete, and stops when it completes.
    pub(crate) fn head_pending(&self, state: &ConnState, pending: bool) {
        if !pending {
            state.head_since.store(0, Ordering::Release);
        } else if state.head_since.load(Ordering::Acquire) == 0 {
            state.head_since.store(self.0.now_ms(), Ordering::Release);
            state.rearm.store(true, Ordering::Release);
        }
    }

    /// Marks the connection busy until the guard drops; its head is complete.
    pub fn busy(&self, state: &Arc<ConnState>) -> Busy {
        state.head_since.store(0, Ordering::Release);
        state.idle_since.store(0, Ordering::Release);
        state.busy.fetch_add(1, Ordering::AcqRel);
        Busy(state.clone(), self.0.clone())
    }

    /// Accepts the next connection. When descriptors run out, sheds the
    /// longest-idle connection and tries again at once, rather than
    /// stalling (every client, `/healthz` included, would time out).
    pub async fn accept(&self, listener: &TcpListener) -> (TcpStream, std::net::SocketAddr) {
        loop {
            match listener.accept().await {
                Ok(accepted) => return accepted,
                Err(e) if is_out_of_descriptors(&e) => {
                    tracing::warn!(error = %e, open = self.len(), "out of descriptors; shedding the longest-idle connection");
                    if !self.shed_one() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    } else {
                        // The shed socket closes on its task's next poll.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    // EMFILE (process) and ENFILE (system).
    matches!(e.raw_os_error(), Some(24) | Some(23))
}

/// Descriptors kept for everything but client connections: the state
/// (sled, the budget journal's files), upstream processes and sockets, the
/// runtime. Were connections to take them, the journal could not open its
/// next file and budgets would stop until a restart.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the soft limit on open descriptors to the hard limit, so the
/// gateway can hold as many connections as the system lets it; returns the
/// limit in force.
pub fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => {
                tracing::debug!(limit = %limit.maximum.map_or_else(|| "unlimited".to_owned(), |n| n.to_string()), "raised the descriptor limit");
                return limit.maximum;
            }
            Err(e) => tracing::warn!(error = %e, "cannot raise the descriptor limit"),
        }
    }
    limit.current
}

/// `wanted` connections for each of `listeners`, lowered so that together
/// they leave [`RESERVED_DESCRIPTORS`] of `descriptors` free.
pub fn connections_within(wanted: usize, listeners: usize, descriptors: Option<u64>) -> usize {
    let Some(limit) = descriptors else {
        return wanted;
    };
    let room = limit.saturating_sub(RESERVED_DESCRIPTORS) / listeners.max(1) as u64;
    wanted.min(room.max(1) as usize)
}

/// An accepted socket that ends itself when its deadlines pass.
pub struct TrackedIo<T> {
    io: T,
    state: Arc<ConnState>,
    tracker: Tracker,
    check: Pin<Box<tokio::time::Sleep>>,
}

impl<T> TrackedIo<T> {
    /// The state requests on this connection mark busy.
    pub fn state(&self) -> Arc<ConnState> {
        self.state.clone()
    }

    /// The listener's tracker.
    pub(crate) fn tracker(&self) -> Tracker {
        self.tracker.clone()
    }

    fn touch(&self) {
        self.state
            .last_activity
            .store(self.tracker.0.now_ms(), Ordering::Release);
    }

    fn closed() -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, "connection limit: closed by dgw")
    }

    /// Polls the check timer; `Err` when the connection must end.
    fn poll_deadlines(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.state.rearm.swap(false, Ordering::AcqRel) {
            // The timer may be set for the idle deadline, later than the
            // head's that just began.
            let next = tokio::time::Instant::now() + self.tracker.0.next_check(&self.state);
            self.check.as_mut().reset(next);
        }
        while self.check.as_mut().poll(cx).is_ready() {
            if self.tracker.0.expired(&self.state) {
                return Err(Self::closed());
            }
            let next = tokio::time::Instant::now() + self.tracker.0.next_check(&self.state);
            self.check.as_mut().reset(next);
        }
        Ok(())
    }
}

impl<T> Drop for TrackedIo<T> {
    fn drop(&mut self) {
        self.tracker.open().remove(&self.state.id);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.state.shed.load(Ordering::Acquire) {
            return Poll::Ready(Err(Self::closed()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.touch();
                    let s = &this.state;
                    if !this.tracker.0.limits.http2
                        && s.busy.load(Ordering::Acquire) == 0
                        && s.head_since.load(Ordering::Acquire) == 0
                    {
                        s.head_since
                            .store(this.tracker.0.now_ms(), Ordering::Release);
                        s.rearm.store(true, Ordering::Release);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                *this.state.reader.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(cx.waker().clone());
                match this.poll_deadlines(cx) {
                    Ok(()) if !this.state.shed.load(Ordering::Acquire) => Poll::Pending,
                    Ok(()) => Poll::Ready(Err(Self::closed())),
                    Err(e) => Poll::Ready(Err(e)),
                }
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.state.shed.load(Ordering::Acquire) {
            return Poll::Ready(Err(Self::closed()));
        }
        let r = Pin::new(&mut this.io).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.state.shed.load(Ordering::Acquire) {
            return Poll::Ready(Err(Self::closed()));
        }
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// gRPC requests find their connection's state in their extensions.
impl tonic::transport::server::Connected for TrackedIo<TcpStream> {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnInfo {
            state: self.state.clone(),
            tracker: self.tracker.clone(),
            subject: None,
        }
    }
}

/// What a gRPC request knows of its connection.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    state: Arc<ConnState>,
    tracker: Tracker,
    /// The client certificate's subject (mTLS).
    subject: Option<String>,
}

impl ConnInfo {
    /// `self` for a connection whose client certificate has `subject`.
    pub fn with_subject(mut self, subject: Option<String>) -> Self {
        self.subject = subject;
        self
    }

    /// The client certificate's subject, on a TLS connection that has one.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Marks the connection busy while the returned guard lives.
    pub fn busy(&self) -> Busy {
        self.tracker.busy(&self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> Limits {
        Limits {
            header_read_timeout: Some(Duration::from_millis(200)),
            http2: false,
            idle_timeout: Duration::from_millis(400),
            max_connections: max,
        }
    }

    #[test]
    fn connections_leave_descriptors_for_the_state() {
        assert_eq!(connections_within(10_000, 2, Some(1024)), 384);
        assert_eq!(connections_within(10_000, 1, Some(1024)), 768);
        assert_eq!(connections_within(100, 2, Some(1 << 20)), 100);
        assert_eq!(connections_within(100, 2, None), 100);
        assert_eq!(connections_within(100, 1, Some(10)), 1);
    }

    #[tokio::test]
    async fn idle_and_slow_heads_expire_and_busy_ones_do_not() {
        let t = Tracker::new(limits(10));
        let idle = t.track(()).unwrap();
        let head = t.track(()).unwrap();
        let busy = t.track(()).unwrap();
        head.state.head_since.store(t.0.now_ms(), Ordering::Release);
        let _guard = t.busy(&busy.state);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(t.0.expired(&head.state), "the head took too long");
        assert!(!t.0.expired(&idle.state), "idle, but not for long");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(t.0.expired(&idle.state));
        assert!(!t.0.expired(&busy.state), "a request is in flight");
        assert_eq!(t.len(), 3);
        drop(idle);
        assert_eq!(t.len(), 2);
    }

    #[tokio::test]
    async fn an_idle_connection_sleeps_until_its_nearest_deadline() {
        let t = Tracker::new(limits(10));
        let c = t.track(()).unwrap();
        let idle = t.0.next_check(&c.state);
        assert!(
            idle > Duration::from_millis(300) && idle <= Duration::from_millis(401),
            "{idle:?}"
        );
        c.state.head_since.store(t.0.now_ms(), Ordering::Release);
        let head = t.0.next_check(&c.state);
        assert!(
            head > Duration::from_millis(150) && head <= Duration::from_millis(201),
            "{head:?}"
        );
        let _busy = t.busy(&c.state);
        assert_eq!(t.0.next_check(&c.state), CHECK_EVERY);
    }

    #[tokio::test]
    async fn a_full_listener_sheds_the_longest_idle_first() {
        let t = Tracker::new(limits(2));
        let old = t.track(()).unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let newer = t.track(()).unwrap();
        let new = t.track(()).unwrap();
        assert!(old.state.shed.load(Ordering::Acquire));
        assert!(!newer.state.shed.load(Ordering::Acquire));
        // Busy connections are never shed: a full listener of busy ones
        // refuses the next connection instead of growing past its limit.
        let _g1 = t.busy(&newer.state);
        let _g2 = t.busy(&new.state);
        drop(old);
        assert!(!t.shed_one());
        assert!(t.track(()).is_none());
        assert_eq!(t.len(), 2);
    }
}
