//! What a backend counts over its life, by how each long-lived exchange ended:
//! WebSocket sessions and the streaming Echo's gRPC streams. Shared by every
//! connection ([`crate::state::Shared`]) and printed at the backend's exit, so a
//! test compares what a client counted as cut with what the backend saw.

use std::sync::atomic::{AtomicU64, Ordering};

/// How a session ended, as this side saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsEnd {
    /// The peer's close frame came first (answered with its code).
    PeerClose,
    /// The drain's close frame went first, and the peer's close, its EOF or the
    /// wait for it ended the session.
    Drained,
    /// The peer went away (EOF, reset, a write that failed) with no close frame:
    /// what a proxy that cuts a session leaves at the backend.
    Gone,
    /// A frame this side refused (1002, 1009).
    Refused,
}

/// Sessions by how they ended, over the backend's life: printed when it exits, so
/// a test compares what a client counted as cut with what the backend saw.
#[derive(Debug, Default)]
pub struct WsTally {
    pub opened: AtomicU64,
    pub peer_close: AtomicU64,
    pub drained: AtomicU64,
    pub gone: AtomicU64,
    pub refused: AtomicU64,
}

impl WsTally {
    pub(crate) fn count(&self, end: WsEnd) {
        let c = match end {
            WsEnd::PeerClose => &self.peer_close,
            WsEnd::Drained => &self.drained,
            WsEnd::Gone => &self.gone,
            WsEnd::Refused => &self.refused,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// One line for the backend's exit, `None` when no session was opened.
    pub fn summary(&self) -> Option<String> {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let opened = n(&self.opened);
        (opened > 0).then(|| {
            format!(
                "websocket sessions: {opened} opened; {} closed by the peer, {} closed at the \
                 drain, {} ended without a close, {} refused",
                n(&self.peer_close),
                n(&self.drained),
                n(&self.gone),
                n(&self.refused)
            )
        })
    }
}

/// How a stream ended at this side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The client ended its side (END_STREAM): answered `OK`.
    Peer,
    /// The drain ended it with `UNAVAILABLE`, beside the connection's GOAWAY.
    Drained,
    /// Reset, or its connection went away, with neither: what a proxy that cuts a
    /// stream leaves at the backend.
    Gone,
}

/// Streams of the streaming Echo by how they ended, over the backend's life:
/// printed at its exit, as the WebSocket sessions' count is.
#[derive(Debug, Default)]
pub struct StreamTally {
    pub opened: AtomicU64,
    pub peer: AtomicU64,
    pub drained: AtomicU64,
    pub gone: AtomicU64,
}

impl StreamTally {
    pub(crate) fn count(&self, end: StreamEnd) {
        let c = match end {
            StreamEnd::Peer => &self.peer,
            StreamEnd::Drained => &self.drained,
            StreamEnd::Gone => &self.gone,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// One line for the backend's exit, `None` when no stream was opened.
    pub fn summary(&self) -> Option<String> {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let opened = n(&self.opened);
        (opened > 0).then(|| {
            format!(
                "grpc streams: {opened} opened; {} ended by the peer, {} ended at the drain, \
                 {} cut",
                n(&self.peer),
                n(&self.drained),
                n(&self.gone)
            )
        })
    }
}
