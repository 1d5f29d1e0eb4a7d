//! Periodic stalls (`--stall 1s/5s`): the backend freezes its answers on a schedule.
//!
//! A stalled backend (a GC pause, a blocked event loop, a node under memory pressure)
//! is what separates proxies with good outlier handling from the rest. The schedule is
//! anchored at the server's start so a test can predict it, and is pure arithmetic on
//! elapsed time so it is tested without a clock.

use std::time::Duration;

/// For the first `on` of every `period` since start, responses are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Length of each stall, from the start of its window.
    pub on: Duration,
    /// Length of each window; `on < period`.
    pub period: Duration,
}

impl Stall {
    /// Parses `ON/PERIOD`, e.g. `1s/5s`.
    ///
    /// # Errors
    /// A one-line message when the form is wrong, either part is not a duration, or
    /// the stall does not fit inside its window.
    pub fn parse(s: &str) -> Result<Stall, String> {
        let (on, period) = s.trim().split_once('/').ok_or_else(|| {
            format!("--stall {s:?}: write STALL/WINDOW, e.g. 1s/5s (stall for the first 1s of every 5s)")
        })?;
        let d = |x: &str| results::duration::parse(x).map_err(|e| format!("--stall {s:?}: {e}"));
        let (on, period) = (d(on)?, d(period)?);
        if on.is_zero() || on >= period {
            return Err(format!(
                "--stall {s:?}: the stall must be longer than 0 and shorter than its window"
            ));
        }
        Ok(Stall { on, period })
    }

    /// The earliest time, at or after `t` (both since start), that lies outside a stall.
    ///
    /// A response ready at `t` is sent then.
    pub fn release_at(&self, t: Duration) -> Duration {
        let period = self.period.as_nanos();
        let t_ns = t.as_nanos();
        let into_window = t_ns % period;
        if into_window >= self.on.as_nanos() {
            t
        } else {
            t + (self.on - Duration::from_nanos(into_window as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ms;

    #[test]
    fn parses_and_validates() {
        assert_eq!(
            Stall::parse("1s/5s").unwrap(),
            Stall {
                on: ms(1000),
                period: ms(5000)
            }
        );
        assert_eq!(Stall::parse("200ms/1s").unwrap().on, ms(200));
        for bad in ["1s", "5s/1s", "1s/1s", "0s/5s", "x/5s", "1s/", "/5s"] {
            let e = Stall::parse(bad).unwrap_err();
            assert!(e.starts_with("--stall"), "{bad}: {e}");
        }
    }

    #[test]
    fn holds_only_inside_the_stall() {
        let s = Stall::parse("1s/5s").unwrap();
        // Inside the first window's stall: released at 1 s.
        assert_eq!(s.release_at(ms(0)), ms(1000));
        assert_eq!(s.release_at(ms(400)), ms(1000));
        assert_eq!(s.release_at(ms(999)), ms(1000));
        // The stall's end is already outside it.
        assert_eq!(s.release_at(ms(1000)), ms(1000));
        assert_eq!(s.release_at(ms(3000)), ms(3000));
        assert_eq!(s.release_at(ms(4999)), ms(4999));
        // The next window stalls again, from its start.
        assert_eq!(s.release_at(ms(5000)), ms(6000));
        assert_eq!(s.release_at(ms(5750)), ms(6000));
        assert_eq!(s.release_at(ms(6001)), ms(6001));
        assert_eq!(s.release_at(ms(1_000_000_250)), ms(1_000_001_000));
    }

    #[test]
    fn sub_millisecond_precision() {
        let s = Stall {
            on: Duration::from_micros(1500),
            period: Duration::from_micros(4000),
        };
        assert_eq!(
            s.release_at(Duration::from_nanos(8_000_001)),
            Duration::from_micros(9500)
        );
    }
}
