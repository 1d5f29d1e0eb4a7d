//! The axes plotters does not have, and their ticks: the "nines" axis the latency
//! percentile charts are drawn on (each step right ten times rarer), and a log
//! latency axis ticked at 1-2-5 with labels in readable units. Small pure
//! functions, unit-tested on known numbers, apart from the drawing that uses them.

use crate::fmt::{fmt_count_tick, fmt_ms_tick, round_sig};
use plotters::coord::ranged1d::{
    KeyPointHint, KeyPointWeight, NoDefaultFormatting, Ranged, ValueFormatter,
};
use std::ops::Range;

/// The "nines" transform: `-log10(1 - q)`, so 90 % is 1, 99 % is 2, 99.9 % is 3.
/// Quantiles at or past 1 are clamped to 12 nines.
pub fn nines(q: f64) -> f64 {
    let q = q.clamp(0.0, 1.0 - 1e-12);
    -(1.0 - q).log10()
}

/// The quantile `x` nines stand for (the inverse of [`nines`]).
pub fn quantile_of_nines(x: f64) -> f64 {
    1.0 - 10f64.powf(-x)
}

/// A quantile as the percentage the studies print: `0.5` is "50", `0.9999` is
/// "99.99": as many decimals as the quantile has nines past the second.
pub fn nines_label(q: f64) -> String {
    let decimals = (nines(q).round() as i64 - 2).max(0) as usize;
    format!("{:.*}", decimals, q * 100.0)
}

/// The quantiles labelled on a nines axis that ends at `max_nines`: 50, 90, 99, ...
pub fn nines_ticks(max_nines: f64) -> Vec<f64> {
    let mut v = vec![0.5];
    let mut n = 1;
    while n as f64 <= max_nines + 1e-9 {
        v.push(quantile_of_nines(n as f64));
        n += 1;
    }
    v
}

/// Bounds of a log axis holding `min..=max` (ms), widened to 1-2-5 steps; values
/// at or below zero are ignored, a flat range gets a decade around it, and no range
/// (nothing to draw: `min > max`) gives 0.1 to 10 ms. Bounds stay within 1 µs and
/// 10^9 ms, so an axis never has more than a dozen decades.
pub fn log_bounds(min: f64, max: f64) -> (f64, f64) {
    const FLOOR: f64 = 0.001;
    const CEIL: f64 = 1e9;
    if min > max {
        return (0.1, 10.0);
    }
    let min = if min.is_finite() && min > 0.0 {
        min.clamp(FLOOR, CEIL / 10.0)
    } else {
        FLOOR
    };
    let max = if max.is_finite() && max > min {
        max.min(CEIL)
    } else {
        min * 10.0
    };
    let down = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        let m = v / d;
        let s = if m >= 5.0 - 1e-9 {
            5.0
        } else if m >= 2.0 - 1e-9 {
            2.0
        } else {
            1.0
        };
        s * d
    };
    let up = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        let m = v / d;
        if m <= 1.0 + 1e-9 {
            d
        } else if m <= 2.0 + 1e-9 {
            2.0 * d
        } else if m <= 5.0 + 1e-9 {
            5.0 * d
        } else {
            10.0 * d
        }
    };
    (down(min), up(max))
}

/// Tick values of a log axis over `lo..=hi`: (labelled, grid only).
///
/// Powers of ten are labelled; when the range spans under two decades, 2 and 5 times
/// them too. When that leaves fewer than [`MIN_LOG_LABELS`] (0.2 to 50 ms holds only
/// 1 and 10; 20 to 100 ms only 20, 50 and 100), the next denser set is labelled: 3
/// times each power (about halfway between two on the axis), then 2 and 5 times,
/// then every multiple.
pub fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    const SETS: [&[u32]; 4] = [&[1], &[1, 3], &[1, 2, 5], &[1, 2, 3, 4, 5, 6, 7, 8, 9]];
    let mut major = Vec::new();
    let mut minor = Vec::new();
    if !(lo > 0.0 && hi > lo) {
        return (major, minor);
    }
    let narrow = (hi / lo).log10() < 2.0 - 1e-9;
    let first = lo.log10().floor() as i32;
    let last = (hi.log10().ceil() as i32).min(first + 40);
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let values = || {
        (first..=last).flat_map(|e| {
            let d = 10f64.powi(e);
            (1..10u32).map(move |m| (m, round_sig(f64::from(m) * d)))
        })
    };
    let count = |set: &[u32]| {
        values()
            .filter(|(m, v)| set.contains(m) && inside(*v))
            .count()
    };
    let from = if narrow { 2 } else { 0 };
    let set = SETS[from..]
        .iter()
        .find(|set| count(set) >= MIN_LOG_LABELS)
        .unwrap_or(&SETS[3]);
    for (m, v) in values() {
        if !inside(v) {
            continue;
        }
        if set.contains(&m) {
            major.push(v);
        } else {
            minor.push(v);
        }
    }
    (major, minor)
}

/// The fewest labels a log axis should carry: with two, a reader cannot tell a log
/// axis from a linear one, nor read a value between them.
pub const MIN_LOG_LABELS: usize = 4;

/// X axis over quantiles, linear in [`nines`].
#[derive(Clone, Debug)]
pub struct NinesAxis {
    /// Ends of the axis, in nines.
    pub lo: f64,
    pub hi: f64,
}

impl Ranged for NinesAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, q: &f64, limit: (i32, i32)) -> i32 {
        let f = (nines(*q) - self.lo) / (self.hi - self.lo);
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let ticks = nines_ticks(self.hi);
        match hint.weight() {
            KeyPointWeight::Bold => ticks,
            // Light grid: halfway marks (95, 99.5, ...) between the labelled ones.
            KeyPointWeight::Any => {
                let mut v = ticks.clone();
                for w in ticks.windows(2) {
                    v.push(quantile_of_nines((nines(w[0]) + nines(w[1])) / 2.0));
                }
                v
            }
        }
    }

    fn range(&self) -> Range<f64> {
        quantile_of_nines(self.lo)..quantile_of_nines(self.hi)
    }
}

impl ValueFormatter<f64> for NinesAxis {
    fn format_ext(&self, q: &f64) -> String {
        nines_label(*q)
    }
}

/// Y axis over milliseconds, logarithmic, ticked by [`log_ticks`].
#[derive(Clone, Debug)]
pub struct LogAxis {
    pub lo: f64,
    pub hi: f64,
}

impl Ranged for LogAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let v = v.max(self.lo);
        let f = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let (major, minor) = log_ticks(self.lo, self.hi);
        match hint.weight() {
            KeyPointWeight::Bold => major,
            KeyPointWeight::Any => major.into_iter().chain(minor).collect(),
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for LogAxis {
    fn format_ext(&self, v: &f64) -> String {
        fmt_ms_tick(*v)
    }
}

/// A log axis over counts (routes, MiB): [`LogAxis`]'s ticks, labelled as numbers.
#[derive(Clone, Debug)]
pub struct LogCountAxis(pub LogAxis);

impl Ranged for LogCountAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        self.0.map(v, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        self.0.key_points(hint)
    }

    fn range(&self) -> Range<f64> {
        self.0.range()
    }
}

impl ValueFormatter<f64> for LogCountAxis {
    fn format_ext(&self, v: &f64) -> String {
        fmt_count_tick(*v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nines_transform() {
        assert!((nines(0.9) - 1.0).abs() < 1e-12);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert!((nines(0.5) - 2f64.log10()).abs() < 1e-12);
        assert_eq!(nines(0.0), 0.0);
        assert!(nines(1.0).is_finite() && nines(1.0) > 11.0);
        for x in [0.3, 1.0, 2.5, 6.0] {
            assert!((nines(quantile_of_nines(x)) - x).abs() < 1e-9);
        }
    }

    #[test]
    fn nines_tick_labels_are_the_studies() {
        let labels: Vec<String> = nines_ticks(6.0).into_iter().map(nines_label).collect();
        assert_eq!(
            labels,
            ["50", "90", "99", "99.9", "99.99", "99.999", "99.9999"]
        );
        assert_eq!(nines_ticks(7.0).len(), 8);
        assert_eq!(nines_label(0.75), "75");
        assert_eq!(nines_label(0.99999), "99.999");
    }

    #[test]
    fn nines_axis_maps_linearly_in_nines() {
        let a = NinesAxis { lo: 0.0, hi: 6.0 };
        assert_eq!(a.map(&0.0, (0, 600)), 0);
        assert_eq!(a.map(&0.9, (0, 600)), 100);
        assert_eq!(a.map(&0.999, (0, 600)), 300);
        assert_eq!(a.map(&0.999999, (0, 600)), 600);
    }

    #[test]
    fn log_bounds_snap_to_1_2_5() {
        assert_eq!(log_bounds(0.304, 43.263), (0.2, 50.0));
        assert_eq!(log_bounds(1.0, 1000.0), (1.0, 1000.0));
        assert_eq!(log_bounds(0.0, 0.0), (0.001, 0.01));
        assert_eq!(log_bounds(3.0, 3.0), (2.0, 50.0));
        // Nothing to draw, or absurd values: a small, finite axis.
        assert_eq!(log_bounds(f64::MAX, 0.0), (0.1, 10.0));
        let (lo, hi) = log_bounds(1.0, f64::INFINITY);
        assert!(lo == 1.0 && hi == 10.0);
        let (lo, hi) = log_bounds(1.0, 1e300);
        assert!(hi <= 1e9 && log_ticks(lo, hi).0.len() <= 10);
        let (lo, hi) = log_bounds(f64::NAN, 7.0);
        assert!(lo > 0.0 && hi >= 7.0);
    }

    #[test]
    fn log_ticks_label_decades_or_1_2_5() {
        let (major, minor) = log_ticks(0.1, 1000.0);
        assert_eq!(major, [0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert!(minor.contains(&0.2) && minor.contains(&500.0));
        let (major, _) = log_ticks(1.0, 50.0);
        assert_eq!(major, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        // Lines reaching 40 ms over a floor of 0.3 ms: two decades alone say little.
        let (lo, hi) = log_bounds(0.304, 43.263);
        let (major, minor) = log_ticks(lo, hi);
        assert_eq!(major, [0.3, 1.0, 3.0, 10.0, 30.0]);
        assert!(!minor.contains(&3.0) && minor.contains(&20.0));
        for (lo, hi) in [
            (0.001, 0.01),
            (0.1, 10.0),
            (0.05, 5.0),
            (2.0, 500.0),
            (0.2, 50.0),
        ] {
            let n = log_ticks(lo, hi).0.len();
            assert!(n >= MIN_LOG_LABELS, "{lo}..{hi}: {n} labels");
        }
        let a = LogAxis { lo: 1.0, hi: 100.0 };
        assert_eq!(a.map(&10.0, (0, 200)), 100);
        assert_eq!(a.map(&0.0, (0, 200)), 0, "zero clamps to the bottom");
    }
}
