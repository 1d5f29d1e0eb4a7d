//! The one clock of a run.
//!
//! Every timestamp the engine takes (intended send, actual send, response) is a
//! count of nanoseconds since the run's epoch, read from the monotonic clock. Keeping
//! it in one place means the schedule can be unit-tested with plain numbers and the
//! clock's resolution can be measured (`resolution_ns`) rather than assumed.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the run's epoch.
pub type Nanos = u64;

/// A monotonic clock anchored at the start of a run, with the wall-clock time of
/// that anchor so events from other processes can be placed on the same axis.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
    wall_epoch_ns: u128,
}

impl Clock {
    /// Anchors a new clock at "now".
    pub fn start() -> Self {
        let wall_epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Clock {
            epoch: Instant::now(),
            wall_epoch_ns,
        }
    }

    /// Nanoseconds elapsed since the epoch (vDSO `clock_gettime(CLOCK_MONOTONIC)`).
    #[inline]
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// The `Instant` a run-relative time stands for.
    pub fn instant(&self, t: Nanos) -> Instant {
        self.epoch + std::time::Duration::from_nanos(t)
    }

    /// Unix time of the epoch, in nanoseconds.
    pub fn wall_epoch_ns(&self) -> u128 {
        self.wall_epoch_ns
    }
}

/// One exchange measuring another process's wall clock against ours: when we asked
/// (`sent`), what its clock read when it answered (`remote`), and when the answer
/// arrived (`received`), all Unix nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockProbe {
    pub sent: u128,
    pub remote: u128,
    pub received: u128,
}

/// How far another clock is from ours: `offset_ns` is its reading minus ours, known
/// to within `error_ns` either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub error_ns: u64,
}

/// The offset of another clock from a few probes, as NTP does: the other side read
/// its clock somewhere between `sent` and `received`, so the midpoint is the best
/// guess and half the round trip the error. The probe with the shortest round trip is
/// the one least disturbed by scheduling, so it alone is used.
///
/// `None` without a usable probe (none, or every one received before it was sent).
pub fn estimate_offset(probes: &[ClockProbe]) -> Option<ClockOffset> {
    let best = probes
        .iter()
        .filter(|p| p.received >= p.sent)
        .min_by_key(|p| p.received - p.sent)?;
    let mid = best.sent + (best.received - best.sent) / 2;
    let offset = best.remote as i128 - mid as i128;
    Some(ClockOffset {
        offset_ns: offset.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        error_ns: ((best.received - best.sent) / 2).min(u64::MAX as u128) as u64,
    })
}

/// Smallest non-zero step the clock was seen to take, in nanoseconds.
pub fn resolution_ns() -> u64 {
    let c = Clock::start();
    let mut best = u64::MAX;
    for _ in 0..1000 {
        let a = c.now();
        let mut b = c.now();
        while b == a {
            b = c.now();
        }
        best = best.min(b - a);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_comes_from_the_shortest_round_trip() {
        let p = |sent, remote, received| ClockProbe {
            sent,
            remote,
            received,
        };
        // The other clock is 5 µs ahead; the second probe waited 1 ms on the way back.
        let probes = [
            p(1_000_000, 1_015_000, 1_020_000),
            p(2_000_000, 2_015_000, 3_020_000),
            p(4_000_000, 4_007_000, 4_004_000),
        ];
        assert_eq!(
            estimate_offset(&probes),
            Some(ClockOffset {
                offset_ns: 5_000,
                error_ns: 2_000
            })
        );
        // A clock behind ours gives a negative offset.
        assert_eq!(
            estimate_offset(&[p(10_000, 4_000, 12_000)]).map(|o| o.offset_ns),
            Some(-7_000)
        );
        assert_eq!(estimate_offset(&[]), None);
        assert_eq!(estimate_offset(&[p(5, 5, 4)]), None, "received before sent");
    }

    #[test]
    fn clock_is_monotonic_and_fine_grained() {
        let c = Clock::start();
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = c.now();
        assert!(b >= a + 2_000_000, "a={a} b={b}");
        // A clock that only ticks in milliseconds would defeat the point of the engine.
        assert!(resolution_ns() < 10_000, "resolution {}", resolution_ns());
    }
}
