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
