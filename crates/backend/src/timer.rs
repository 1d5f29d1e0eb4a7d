//! Answer delays to the microsecond.
//!
//! tokio's timer wheel has millisecond slots and rounds every deadline up to the next
//! one, then wakes late by the scheduler's own tick: `--delay 10ms` answered after
//! about 11.4 ms, so a closed loop against it ran 12 % slow and every service time a
//! user simulated with it was off. A timerfd (one per connection, re-armed for each
//! held answer) is woken by the kernel's high-resolution timers and reaches the
//! connection's task through the same reactor as its socket, so a delay is kept to
//! the wake-up latency of the machine.

use rustix::fd::OwnedFd;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use std::io;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// A one-shot timer on `CLOCK_MONOTONIC` (the clock of [`Instant`]) that a task awaits.
pub struct Timer {
    fd: AsyncFd<OwnedFd>,
}

impl Timer {
    /// A disarmed timer, registered with the current tokio runtime.
    ///
    /// # Errors
    /// The kernel refused a timerfd, or the runtime could not register it.
    pub fn new() -> io::Result<Timer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // `AsyncFd::new` is deprecated for types whose descriptor may change or close
        // while registered (its replacement is `unsafe`, which this workspace
        // forbids). An `OwnedFd` moved into the `AsyncFd` keeps its descriptor until
        // the `AsyncFd` drops it, after deregistering: the condition holds.
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd)?;
        Ok(Timer { fd })
    }

    /// Arms the timer for `at`; an earlier arming is replaced. A time already passed
    /// fires at once.
    ///
    /// # Errors
    /// The kernel refused the setting.
    pub fn arm(&self, at: Instant) -> io::Result<()> {
        // Relative: a zero value would disarm, so a deadline already passed is 1 ns.
        let left = at
            .saturating_duration_since(Instant::now())
            .max(std::time::Duration::from_nanos(1));
        let value = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        timerfd_settime(
            self.fd.get_ref(),
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: zero,
                it_value: value,
            },
        )?;
        Ok(())
    }

    /// Resolves once the armed time has come. Cancel-safe: dropped before then (in a
    /// `select!`), the next call still sees the expiry.
    ///
    /// # Errors
    /// The timerfd could not be read or polled.
    pub async fn fired(&self) -> io::Result<()> {
        loop {
            let mut ready = self.fd.readable().await?;
            let mut count = [0u8; 8];
            match rustix::io::read(self.fd.get_ref(), &mut count) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_timer_fires_at_its_time_and_can_be_re_armed() {
        let t = Timer::new().unwrap();
        let start = Instant::now();
        t.arm(start + Duration::from_millis(20)).unwrap();
        t.fired().await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20));
        // Re-armed later, then earlier: the last arming counts.
        let start = Instant::now();
        t.arm(start + Duration::from_secs(10)).unwrap();
        t.arm(start + Duration::from_millis(5)).unwrap();
        tokio::time::timeout(Duration::from_secs(5), t.fired())
            .await
            .expect("the earlier arming replaced the later one")
            .unwrap();
        // A time already passed fires at once.
        t.arm(start).unwrap();
        tokio::time::timeout(Duration::from_secs(5), t.fired())
            .await
            .expect("a passed deadline fires")
            .unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_expiry_for_the_next() {
        let t = Timer::new().unwrap();
        t.arm(Instant::now() + Duration::from_millis(30)).unwrap();
        // Given up on before the expiry, as a `select!` does when a read wins.
        assert!(tokio::time::timeout(Duration::from_millis(1), t.fired())
            .await
            .is_err());
        tokio::time::timeout(Duration::from_secs(5), t.fired())
            .await
            .expect("still fires")
            .unwrap();
    }
}
