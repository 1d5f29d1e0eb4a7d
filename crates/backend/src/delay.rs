//! Response delays (`--delay`): a fixed time, or a random draw per request.
//!
//! The studies need a backend whose service time is known: fixed to see a proxy's
//! added latency on top of a constant, uniform or exponential to see how a proxy's
//! queueing and load balancing react to variance. The draw uses a tiny per-connection
//! generator, so a request costs a few arithmetic operations and no shared state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long to hold each response before sending it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delay {
    /// Answer at once.
    None,
    /// The same delay for every response.
    Fixed(Duration),
    /// Uniformly distributed between `lo` and `hi` (inclusive bounds, `lo <= hi`).
    Uniform {
        /// Shortest delay.
        lo: Duration,
        /// Longest delay.
        hi: Duration,
    },
    /// Exponentially distributed with this mean (a Poisson service process).
    Exp {
        /// Mean delay.
        mean: Duration,
    },
}

impl Delay {
    /// Parses `5ms`, `uniform:1ms-5ms` or `exp:2ms`; `0` means no delay.
    ///
    /// Durations are those of [`results::duration::parse`].
    ///
    /// # Errors
    /// A one-line message naming the accepted forms, starting with the value given
    /// (quoted) and not with a name: the caller names it (`--delay`, `backends.delay`).
    pub fn parse(s: &str) -> Result<Delay, String> {
        let t = s.trim();
        let d = |x: &str| results::duration::parse(x).map_err(|e| format!("{s:?}: {e}"));
        if let Some(range) = t.strip_prefix("uniform:") {
            let (lo, hi) = range.split_once('-').ok_or_else(|| {
                format!("{s:?}: a uniform delay is written uniform:LOW-HIGH (e.g. uniform:1ms-5ms)")
            })?;
            let (lo, hi) = (d(lo)?, d(hi)?);
            if lo > hi {
                return Err(format!(
                    "{s:?}: the low bound is above the high bound; write uniform:LOW-HIGH"
                ));
            }
            return Ok(if hi.is_zero() {
                Delay::None
            } else {
                Delay::Uniform { lo, hi }
            });
        }
        if let Some(mean) = t.strip_prefix("exp:") {
            let mean = d(mean)?;
            return Ok(if mean.is_zero() {
                Delay::None
            } else {
                Delay::Exp { mean }
            });
        }
        if t.contains(':') {
            return Err(format!(
                "{s:?}: unknown distribution; use a duration (5ms), uniform:1ms-5ms or exp:2ms"
            ));
        }
        let fixed = d(t)?;
        Ok(if fixed.is_zero() {
            Delay::None
        } else {
            Delay::Fixed(fixed)
        })
    }

    /// The delay for one response, drawn from `rng` when the delay is random.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match *self {
            Delay::None => Duration::ZERO,
            Delay::Fixed(d) => d,
            Delay::Uniform { lo, hi } => {
                let span = (hi - lo).as_nanos() as f64;
                lo + Duration::from_nanos((rng.next_f64() * span) as u64)
            }
            Delay::Exp { mean } => {
                // Inverse transform; 1 - u is in (0, 1], so the logarithm is finite.
                let x = -(1.0 - rng.next_f64()).ln() * mean.as_nanos() as f64;
                Duration::from_nanos(x as u64)
            }
        }
    }
}

/// A small, fast, non-cryptographic generator (xorshift64*), one per connection.
///
/// Seeds come from a process-wide counter run through splitmix64, so connections
/// draw independent-looking streams without sharing anything per request.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator with a fresh seed.
    pub fn new() -> Rng {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng::from_seed(nanos ^ NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed))
    }

    /// A generator with a given seed (for tests that want a repeatable stream).
    pub fn from_seed(seed: u64) -> Rng {
        // splitmix64 of the seed; xorshift must not start at zero.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform draw in `[0, 1)`.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ms;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(Delay::parse("5ms").unwrap(), Delay::Fixed(ms(5)));
        assert_eq!(
            Delay::parse("uniform:1ms-5ms").unwrap(),
            Delay::Uniform {
                lo: ms(1),
                hi: ms(5)
            }
        );
        assert_eq!(Delay::parse("exp:2ms").unwrap(), Delay::Exp { mean: ms(2) });
        assert_eq!(Delay::parse("0").unwrap(), Delay::None);
        assert_eq!(Delay::parse("0ms").unwrap(), Delay::None);
        assert_eq!(Delay::parse("exp:0s").unwrap(), Delay::None);
        assert_eq!(
            Delay::parse("uniform:2ms-2ms").unwrap(),
            Delay::Uniform {
                lo: ms(2),
                hi: ms(2)
            }
        );
    }

    #[test]
    fn rejects_bad_delays_with_a_hint() {
        for bad in [
            "",
            "fast",
            "uniform:5ms",
            "uniform:5ms-1ms",
            "uniform:a-b",
            "exp:",
            "normal:1ms",
            "-5ms",
        ] {
            let e = Delay::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("{bad:?}: ")), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn uniform_stays_in_bounds_and_covers_them() {
        let d = Delay::Uniform {
            lo: ms(1),
            hi: ms(5),
        };
        let mut rng = Rng::from_seed(7);
        let (mut min, mut max) = (Duration::MAX, Duration::ZERO);
        for _ in 0..100_000 {
            let x = d.sample(&mut rng);
            assert!(x >= ms(1) && x <= ms(5), "{x:?}");
            min = min.min(x);
            max = max.max(x);
        }
        assert!(min < Duration::from_micros(1_010), "{min:?}");
        assert!(max > Duration::from_micros(4_990), "{max:?}");
    }

    #[test]
    fn exponential_has_the_asked_mean() {
        let d = Delay::Exp { mean: ms(2) };
        let mut rng = Rng::from_seed(42);
        let n = 200_000;
        let total: f64 = (0..n).map(|_| d.sample(&mut rng).as_secs_f64()).sum();
        let mean = total / n as f64;
        assert!((mean - 0.002).abs() < 0.00005, "mean {mean}");
    }

    #[test]
    fn fixed_is_fixed() {
        let mut rng = Rng::from_seed(1);
        assert_eq!(Delay::Fixed(ms(5)).sample(&mut rng), ms(5));
        assert_eq!(Delay::None.sample(&mut rng), Duration::ZERO);
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(Rng::new().next_u64(), Rng::new().next_u64());
    }
}
