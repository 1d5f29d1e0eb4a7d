//! Long-lived sessions (issue 45): WebSocket sessions held open through the run,
//! each sending messages on the run's open-loop schedule, and every session that
//! ended before the run did counted by how it ended.
//!
//! A short request that fails is retried by its user's next click; a session that is
//! cut is a chat that went silent, a dashboard that froze or a stream that must
//! resume. So a session's end is the event, not a request's error: *when* it ended
//! (the timeline and the change windows hold it by its end time), *how* (a close
//! frame with its code, which a graceful drain sends, against an EOF or a reset,
//! which a cut leaves), and what it cost (the messages in flight lost, the time to
//! reopen, the latency of the messages due while it was down).

use crate::Percentiles;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a session ended, as the client saw it. The key in [`Sessions::ends`] and
/// [`SessionWindow::ends`] is [`SessionEnd::key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionEnd {
    /// A close frame from the server's side, with its code (1001 going away from a
    /// drain, 1006 never: that code is for the EOF below).
    Close(u16),
    /// The connection ended with no close frame: cut.
    Eof,
    /// A reset (or a write into a closed connection): cut.
    Reset,
    /// An echo not back within the run's timeout; this side closed the session.
    Timeout,
    /// A frame the client must refuse, or an echo that was not the message sent.
    Protocol,
    /// A gRPC stream's trailers from the server's side, with its `grpc-status`
    /// (14, UNAVAILABLE, from a drain): the call ended gracefully.
    Status(u32),
    /// A gRPC stream reset (RST_STREAM) with this HTTP/2 error code, or refused by
    /// a GOAWAY that did not take it (7, REFUSED_STREAM): cut.
    StreamReset(u32),
}

impl SessionEnd {
    /// `close 1001`, `eof`, `reset`, `timeout`, `protocol`, `status 14`,
    /// `rst_stream 8`.
    pub fn key(self) -> String {
        match self {
            SessionEnd::Close(code) => format!("close {code}"),
            SessionEnd::Eof => "eof".into(),
            SessionEnd::Reset => "reset".into(),
            SessionEnd::Timeout => "timeout".into(),
            SessionEnd::Protocol => "protocol".into(),
            SessionEnd::Status(code) => format!("status {code}"),
            SessionEnd::StreamReset(code) => format!("rst_stream {code}"),
        }
    }

    /// Whether the server's side said goodbye (a close frame, a stream's
    /// trailers) rather than vanishing: a graceful end the application can act on.
    pub fn graceful(self) -> bool {
        matches!(self, SessionEnd::Close(_) | SessionEnd::Status(_))
    }
}

/// Whether a key of [`Sessions::ends`] is a graceful end (a close frame, a
/// stream's trailers).
pub fn graceful_key(key: &str) -> bool {
    key.starts_with("close ") || key.starts_with("status ")
}

/// Why an open (or a reopen) failed; the key in [`Sessions::open_failures`].
pub const OPEN_FAILURES: [&str; 7] = [
    "connect",
    "tls",
    "refused",
    "not_websocket",
    "not_http2",
    "eof",
    "timeout",
];

/// The sessions part of a result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sessions {
    /// `websocket`.
    pub protocol: String,
    /// The URL the sessions opened (`ws://`, `wss://`).
    pub url: String,
    /// Sessions the run holds open.
    pub sessions: u64,
    /// Messages per second over all sessions (0: the sessions are only held).
    pub message_rate: f64,
    /// Bytes of each message's payload.
    pub message_bytes: u64,
    /// When a session that ended opens again: `at-once`, `after 1s`, `never`.
    pub reopen: String,
    /// Upgrades answered 101, the first opens and the reopens.
    pub opened: u64,
    /// Of [`Sessions::opened`], the reopens after an end.
    pub reopened: u64,
    /// Sessions still open at the end of the run (closed by the client with 1000).
    pub held: u64,
    /// Sessions that ended before the run did, by [`SessionEnd::key`].
    pub ends: BTreeMap<String, u64>,
    /// The reason of the first close frame of each code (`close 1001` ->
    /// `ingressbench backend draining`), so a drain's 1001 is told from a proxy's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub close_reasons: BTreeMap<String, String>,
    /// Opens that failed, by kind ([`OPEN_FAILURES`]); each is tried again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub open_failures: BTreeMap<String, u64>,
    /// The first failure of each kind in words (the status and first bytes of a
    /// refused upgrade, the error of a connect).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first_errors: BTreeMap<String, String>,
    pub messages: Messages,
    /// Message latency (ms) from each message's intended send time to its echo.
    pub latency_ms: Percentiles,
    /// Time (ms) from a session's planned open to its 101.
    pub open_ms: Percentiles,
    /// Time (ms) from a session's end to its 101 again.
    pub reopen_ms: Percentiles,
    /// Responses by backend id (the 101s' `x-backend`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub backends: BTreeMap<String, u64>,
    /// The message-latency histogram (µs), HdrHistogram V2 deflate, base64.
    pub histogram: String,
    pub timeline: Vec<SessionSecond>,
    /// Per change window (marked runs only): what the sessions met in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<SessionWindow>,
}

impl Sessions {
    /// Sessions that ended before the run did, however they ended.
    pub fn cut(&self) -> u64 {
        self.ends.values().sum()
    }

    /// Of [`Sessions::cut`], those that ended with no close frame.
    pub fn broken(&self) -> u64 {
        broken(&self.ends)
    }
}

/// Ends (by [`SessionEnd::key`]) with no close frame.
fn broken(ends: &BTreeMap<String, u64>) -> u64 {
    ends.iter()
        .filter(|(k, _)| !graceful_key(k))
        .map(|(_, n)| n)
        .sum()
}

/// The message balance: `intended = echoed + lost + timed_out + not_sent`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Messages {
    /// Messages the schedule called for.
    pub intended: u64,
    /// Messages written to a session.
    pub sent: u64,
    /// Echoes received and checked.
    pub echoed: u64,
    /// Messages in flight (or waiting for a reopen) when their session ended.
    pub lost: u64,
    /// Messages whose echo did not come within the timeout.
    pub timed_out: u64,
    /// Messages due while their session was not open and never reopened (reopen
    /// `never`), or still waiting at the end.
    pub not_sent: u64,
}

impl Messages {
    /// Whether every message the schedule called for is accounted for.
    pub fn balanced(&self) -> bool {
        self.intended == self.echoed + self.lost + self.timed_out + self.not_sent
    }
}

/// One second of the sessions' run, from the start of the measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSecond {
    pub second: u64,
    /// Sessions open at the end of the second.
    pub open: u64,
    /// Upgrades answered in it (first opens and reopens).
    pub opened: u64,
    /// Sessions that ended in it.
    pub ended: u64,
    /// Of those, the ones that ended with a close frame (the rest were cut).
    #[serde(default)]
    pub closed: u64,
    /// Echoes received in it.
    pub messages: u64,
    /// Messages lost in it (at an end).
    pub lost: u64,
    /// p99 and max of the latency of the echoes received in it (ms).
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// What the sessions met in one change window: ends by the time they happened,
/// messages by their intended send time (as requests are counted).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionWindow {
    pub index: usize,
    /// Ends in the window, by [`SessionEnd::key`].
    pub ends: BTreeMap<String, u64>,
    pub reopened: u64,
    pub messages: u64,
    pub lost: u64,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl SessionWindow {
    pub fn cut(&self) -> u64 {
        self.ends.values().sum()
    }

    pub fn broken(&self) -> u64 {
        broken(&self.ends)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_keyed_and_told_graceful_from_cut() {
        let keys: Vec<String> = [
            SessionEnd::Close(1001),
            SessionEnd::Eof,
            SessionEnd::Reset,
            SessionEnd::Timeout,
            SessionEnd::Protocol,
            SessionEnd::Status(14),
            SessionEnd::StreamReset(8),
        ]
        .iter()
        .map(|e| e.key())
        .collect();
        assert_eq!(
            keys,
            [
                "close 1001",
                "eof",
                "reset",
                "timeout",
                "protocol",
                "status 14",
                "rst_stream 8"
            ]
        );
        let s = Sessions {
            ends: [
                ("close 1001".into(), 3),
                ("eof".into(), 4),
                ("reset".into(), 1),
            ]
            .into_iter()
            .collect(),
            ..Sessions::default()
        };
        assert_eq!((s.cut(), s.broken()), (8, 5));
        assert!(SessionEnd::Close(1000).graceful() && !SessionEnd::Eof.graceful());
        assert!(SessionEnd::Status(14).graceful() && !SessionEnd::StreamReset(8).graceful());
        assert!(graceful_key("status 14") && !graceful_key("rst_stream 8"));
    }
}
