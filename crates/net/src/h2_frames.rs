//! The head deadline of HTTP/2 connections (issue 30): `header_read_timeout`
//! bounds an HTTP/1 request head, but HTTP/2 has no head to wait for, and a
//! client sending its preface a byte a second was never cut off (each byte
//! counts as activity, so `idle_timeout` never passes either).
//!
//! [`H2Frames`] wraps a connection above TLS, where the client's bytes are
//! plain, and follows its frames: the preface, then each frame's 9-byte
//! header and its payload, by length only (the HTTP/2 server parses them).
//! It tells the connection's tracker whether the client is in the middle of
//! something. The tracker closes a connection with no request in flight
//! that has been in the middle of its preface or of a frame for
//! `header_read_timeout`; the preface and the first frame (SETTINGS) are
//! due from `accept`, the TLS handshake included. A slow frame of a
//! request in flight is the request's, which `request_timeout` bounds.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::connections::{ConnState, TrackedIo, Tracker};

/// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
const PREFACE_LEN: u32 = 24;
/// Length (3), type, flags, stream identifier (4).
const FRAME_HEADER_LEN: u32 = 9;

/// Where the client is in its stream of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// This many bytes of the preface read.
    Preface(u32),
    /// This many bytes of a frame header read, and its length so far.
    Header { read: u32, length: u32 },
    /// This many bytes of a payload still to come.
    Payload(u32),
}

/// Follows the frames of one client, by their lengths.
#[derive(Debug, Clone)]
pub(crate) struct Frames {
    stage: Stage,
    /// The first frame after the preface (SETTINGS) has been read whole.
    settled: bool,
}

impl Default for Frames {
    fn default() -> Self {
        Self {
            stage: Stage::Preface(0),
            settled: false,
        }
    }
}

impl Frames {
    /// Follows `bytes`; whether the client is in the middle of its preface
    /// and first frame, or of a frame, after them.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> bool {
        const BOUNDARY: Stage = Stage::Header { read: 0, length: 0 };
        while let Some((&first, rest)) = bytes.split_first() {
            self.stage = match self.stage {
                Stage::Preface(n) => {
                    let take = (PREFACE_LEN - n).min(bytes.len() as u32);
                    bytes = &bytes[take as usize..];
                    if n + take == PREFACE_LEN {
                        BOUNDARY
                    } else {
                        Stage::Preface(n + take)
                    }
                }
                Stage::Header { read, length } => {
                    bytes = rest;
                    let length = if read < 3 {
                        length << 8 | u32::from(first)
                    } else {
                        length
                    };
                    match read + 1 {
                        FRAME_HEADER_LEN if length == 0 => {
                            self.settled = true;
                            BOUNDARY
                        }
                        FRAME_HEADER_LEN => Stage::Payload(length),
                        read => Stage::Header { read, length },
                    }
                }
                Stage::Payload(left) => {
                    let take = left.min(bytes.len() as u32);
                    bytes = &bytes[take as usize..];
                    if take == left {
                        self.settled = true;
                        BOUNDARY
                    } else {
                        Stage::Payload(left - take)
                    }
                }
            };
        }
        !self.settled || self.stage != BOUNDARY
    }
}

/// What [`H2Frames`] reports to: one tracked connection.
pub struct H2Watch {
    state: Arc<ConnState>,
    tracker: Tracker,
}

impl H2Watch {
    /// For the connection `io` (before TLS, as accepted).
    pub fn of<T>(io: &TrackedIo<T>) -> Self {
        Self {
            state: io.state(),
            tracker: io.tracker(),
        }
    }

    /// `io`, the watched connection as the HTTP/2 server reads it (past
    /// TLS), with its frames followed.
    pub fn wrap<T>(self, io: T) -> H2Frames<T> {
        H2Frames {
            io,
            frames: Frames::default(),
            state: self.state,
            tracker: self.tracker,
        }
    }
}

/// An HTTP/2 connection (above TLS) whose frames are followed for its
/// connection's head deadline.
pub struct H2Frames<T> {
    io: T,
    frames: Frames,
    state: Arc<ConnState>,
    tracker: Tracker,
}

impl<T> H2Frames<T> {
    /// The connection it wraps.
    pub fn get_ref(&self) -> &T {
        &self.io
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for H2Frames<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let pending = this.frames.feed(&buf.filled()[before..]);
            this.tracker.head_pending(&this.state, pending);
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for H2Frames<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
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
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A preface and frames with these payload lengths, and the offsets at
    /// which a frame ends (the first one's end included).
    fn stream(lengths: &[u32]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let mut ends = Vec::new();
        for (i, &len) in lengths.iter().enumerate() {
            bytes.extend_from_slice(&len.to_be_bytes()[1..]);
            bytes.extend_from_slice(&[if i == 0 { 4 } else { 0 }, 0, 0, 0, 0, 1]);
            bytes.extend(std::iter::repeat_n(0xa5, len as usize));
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    #[test]
    fn the_preface_and_first_frame_are_pending_until_whole() {
        let (bytes, ends) = stream(&[0, 6]);
        let mut f = Frames::default();
        assert!(f.feed(&bytes[..24]), "the preface alone");
        assert!(f.feed(&bytes[24..32]), "most of SETTINGS");
        assert!(!f.feed(&bytes[32..ends[0]]), "SETTINGS whole");
        assert!(f.feed(&bytes[ends[0]..ends[0] + 1]), "a frame begun");
        assert!(!f.feed(&bytes[ends[0] + 1..]), "and whole");
        // A payload of the largest length is followed by its length.
        let mut f = Frames::default();
        f.feed(&stream(&[0]).0);
        assert!(f.feed(&[0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1]));
        assert!(f.feed(&vec![0; 0xff_ffff - 1]));
        assert!(!f.feed(&[0]));
    }

    proptest! {
        /// However the bytes are split, after each piece the client is in
        /// the middle of something exactly when the piece did not end at
        /// the end of a frame (the first one's or a later one's).
        #[test]
        fn any_split_tells_the_same(
            lengths in proptest::collection::vec(0u32..300, 1..8),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let (bytes, ends) = stream(&lengths);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.push(bytes.len());
            at.sort_unstable();
            at.dedup();
            let mut f = Frames::default();
            let mut from = 0;
            for to in at {
                if to == from {
                    continue;
                }
                let pending = f.feed(&bytes[from..to]);
                prop_assert_eq!(pending, !ends.contains(&to), "after {} of {} bytes", to, bytes.len());
                from = to;
            }
        }
    }
}
