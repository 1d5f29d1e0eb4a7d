//! What every connection of a running backend shares, HTTP/1.1 (crate::server) and
//! HTTP/2 (crate::h2) alike: the answers, the delays, the stall and flap schedules,
//! the counters, and the drain signal.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::delay::{Delay, Rng};
use super::flap::FlapCounter;
use super::response::Responder;
use super::stall::Stall;

/// State every connection reads; only the counters change.
pub(crate) struct Shared {
    pub(crate) responder: Responder,
    pub(crate) delay: Delay,
    pub(crate) stall: Option<Stall>,
    /// With `--flap`: the schedule and what was received, and the 503 answers.
    pub(crate) flap: Option<Arc<FlapCounter>>,
    pub(crate) failing_responder: Option<Responder>,
    pub(crate) start: Instant,
    pub(crate) next_request: AtomicU64,
    /// Connections accepted, numbered from 1 (a probe says which it came on).
    pub(crate) next_conn: AtomicU64,
    /// Each behaviour probe's attempts at this backend ([`crate::probe`]).
    pub(crate) probe_attempts: crate::probe::Attempts,
    pub(crate) open: AtomicUsize,
    pub(crate) all_closed: Notify,
    /// WebSocket sessions by how they ended.
    pub(crate) ws: crate::tally::WsTally,
    /// Streams of the streaming Echo by how they ended.
    pub(crate) streams: crate::tally::StreamTally,
}

impl Shared {
    /// When the answer to a request read now may be sent: after its delay (unless
    /// `health`: probes are not slowed by `--delay`), pushed out of any stall (which
    /// freezes probes too, as a stalled process would). `None` means at once.
    #[inline]
    pub(crate) fn release_at(&self, rng: &mut Rng, health: bool) -> Option<Instant> {
        let delay = if health {
            Duration::ZERO
        } else {
            self.delay.sample(rng)
        };
        if self.stall.is_none() && delay.is_zero() {
            return None;
        }
        let now = Instant::now();
        let mut at = now + delay;
        if let Some(stall) = self.stall {
            at = self.start + stall.release_at(at - self.start);
        }
        (at > now).then_some(at)
    }

    pub(crate) async fn wait_all_closed(&self) {
        loop {
            // A permit left by an earlier close is harmless: the count is re-read.
            let notified = self.all_closed.notified();
            if self.open.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Resolves once the drain has begun (or the server is gone).
pub(crate) async fn draining(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|d| *d).await;
}
