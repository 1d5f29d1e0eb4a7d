//! HdrHistogram's own file formats, so its existing tools (HistogramLogProcessor,
//! HdrHistogram plotters) read what ingressbench measured.

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use results::histogram::{decode_base64, decode_v2};

/// Writes an interval log: one interval per second of the run. Values are µs and
/// the max column is in ms (divisor 1000), as HistogramLogProcessor expects.
///
/// # Errors
/// A message when a stored interval cannot be decoded.
pub fn interval_log(start_unix_ns: u128, seconds: &[(u64, &[u8])]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let start = UNIX_EPOCH + Duration::from_nanos(start_unix_ns as u64);
    {
        let mut ser = V2DeflateSerializer::new();
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("ingressbench corrected latency, values in microseconds")
            .with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut out, &mut ser)
            .map_err(|e| format!("hdr log: {e}"))?;
        for (second, bytes) in seconds {
            let h = if bytes.is_empty() {
                results::histogram::latency_histogram()
            } else {
                decode_v2(bytes)?
            };
            w.write_histogram(
                &h,
                Duration::from_secs(*second),
                Duration::from_secs(1),
                Tag::new("corrected"),
            )
            .map_err(|e| format!("hdr log: {e:?}"))?;
        }
    }
    Ok(out)
}

/// HdrHistogram's percentile distribution text (`.hgrm`), values in ms: exactly what
/// its Java `outputPercentileDistribution(out, 5, scale)` prints, so its plotters
/// and a diff against its own tools agree line for line.
///
/// The rows come from [`java_percentiles`], not from the Rust crate's quantile
/// iterator: that one steps in fractions (0.5 + 0.05 + ... is 0.7500000000000001),
/// so its 0.75 row can land one recorded value past the 75th percentile, while
/// Java steps in exact percent and agrees with `value_at_quantile` (the result's
/// `p75`). `SubBuckets` is the sub-bucket count per bucket (2048 at 3 significant
/// digits), as Java prints it, not the number of distinct values.
pub fn percentile_distribution(h: &Histogram<u64>, unit_ns: f64) -> String {
    use std::fmt::Write as _;
    // Java divides the stored value by the output scaling ratio.
    let scale = 1e6 / unit_ns;
    let digits = usize::from(h.sigfig());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    for (value, level, total) in java_percentiles(h, 5) {
        let q = level / 100.0;
        let v = value as f64 / scale;
        if level != 100.0 {
            let _ = writeln!(
                s,
                "{v:>12.digits$} {q:>2.12} {total:>10} {:>14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(s, "{v:>12.digits$} {q:>2.12} {total:>10}");
        }
    }
    let _ = writeln!(
        s,
        "#[Mean    = {:>12.digits$}, StdDeviation   = {:>12.digits$}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        s,
        "#[Max     = {:>12.digits$}, Total count    = {:>12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        s,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    );
    s
}

/// HdrHistogram's sub-bucket count for `sigfig` significant digits: the power of two
/// that gives single-unit resolution up to 2 x 10^sigfig (2048 for 3 digits).
pub fn sub_bucket_count(sigfig: u8) -> u64 {
    let largest = 2.0 * 10f64.powi(i32::from(sigfig));
    1u64 << (largest.log2().ceil() as u32)
}

/// The rows of Java's `PercentileIterator`: (value iterated to, percentile level in
/// percent, total count up to that value), stepping `ticks` per half distance to
/// 100 % in percent space, with Java's arithmetic, and one last row at 100 %.
pub fn java_percentiles(h: &Histogram<u64>, ticks: u32) -> Vec<(u64, f64, u64)> {
    let total = h.len();
    let mut out = Vec::new();
    if total == 0 {
        return out;
    }
    let buckets: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    let next_level = |level: f64| {
        // Java: ticks * (long) Math.pow(2, (long) (log(100 / (100 - level)) / log(2)) + 1).
        let halvings = ((100.0 / (100.0 - level)).ln() / 2f64.ln()) as i64;
        let reporting = f64::from(ticks) * 2f64.powi(halvings.saturating_add(1).min(1000) as i32);
        level + 100.0 / reporting
    };
    let (mut level, mut running, mut i, mut fresh, mut last) = (0.0, 0u64, 0usize, true, false);
    loop {
        if running >= total {
            if last {
                break;
            }
            // One additional last step to 100 %.
            level = 100.0;
            last = true;
        }
        loop {
            let Some(&(value, count)) = buckets.get(i) else {
                return out;
            };
            if fresh {
                running += count;
                fresh = false;
            }
            if level <= 100.0 * running as f64 / total as f64 {
                out.push((value, level, running));
                level = next_level(level);
                break;
            }
            i += 1;
            fresh = true;
        }
    }
    out
}

/// Seconds since the Unix epoch now, for log headers.
pub fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_log_round_trips_through_the_reader() {
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        let mut a = results::histogram::latency_histogram();
        a.record(1500).unwrap();
        let bytes = results::histogram::serialize_v2(&a);
        let log = interval_log(1_700_000_000_000_000_000, &[(0, &bytes), (1, &[])]).unwrap();
        let text = String::from_utf8(log.clone()).unwrap();
        assert!(text.contains("#[StartTime: 1700000000"), "{text}");
        let mut intervals = 0;
        for e in IntervalLogIterator::new(&log) {
            if let Ok(LogEntry::Interval(i)) = e {
                intervals += 1;
                if intervals == 1 {
                    let h = decode_base64(i.encoded_histogram()).unwrap();
                    assert_eq!(h.len(), 1);
                    assert!((i.max() - 1.5).abs() < 0.01, "max in ms: {}", i.max());
                }
            }
        }
        assert_eq!(intervals, 2);
    }

    #[test]
    fn distribution_ends_at_the_max() {
        let mut h = results::histogram::latency_histogram();
        for v in 1..=100u64 {
            h.record(v * 1000).unwrap();
        }
        let s = percentile_distribution(&h, 1000.0);
        assert!(s.contains("Total count    =          100"), "{s}");
        assert!(s.lines().any(|l| l.trim_start().starts_with("100.")), "{s}");
        // Java's last row has no 1/(1-Percentile) column.
        let last = s.lines().rfind(|l| !l.starts_with('#')).unwrap();
        assert_eq!(last, "     100.031 1.000000000000        100");
    }

    #[test]
    fn distribution_is_hdrhistograms_own() {
        // 1..=600 µs, one each: the 75th percentile is 450 µs exactly, which the Rust
        // crate's fractional iterator misses (0.5 + 5 x 0.05 > 0.75).
        let mut h = results::histogram::latency_histogram();
        for v in 1..=600u64 {
            h.record(v).unwrap();
        }
        let s = percentile_distribution(&h, 1000.0);
        assert!(
            s.contains("\n       0.450 0.750000000000        450           4.00\n"),
            "{s}"
        );
        assert!(
            s.ends_with("#[Buckets =           22, SubBuckets     =         2048]\n"),
            "{s}"
        );
        assert_eq!(sub_bucket_count(2), 256);
        assert_eq!(sub_bucket_count(3), 2048);
        // Every row below 100 % is the value at its quantile, as the result's pNN are.
        let mut shapes = vec![h];
        let mut skewed = results::histogram::latency_histogram();
        for v in [120u64, 171, 172, 172, 173, 950, 4_000, 250_000] {
            skewed.record_n(v, v % 7 + 1).unwrap();
        }
        shapes.push(skewed);
        for h in &shapes {
            for (value, level, _) in java_percentiles(h, 5) {
                if level < 100.0 && level > 0.0 {
                    assert_eq!(value, h.value_at_quantile(level / 100.0), "at {level} %");
                }
            }
        }
        // Nothing recorded: the header and footer, no rows.
        let empty = percentile_distribution(&results::histogram::latency_histogram(), 1000.0);
        assert_eq!(
            empty.lines().filter(|l| !l.starts_with('#')).count(),
            2,
            "{empty}"
        );
    }

    #[test]
    fn bad_base64_is_an_error() {
        assert!(decode_base64("!!!").is_err());
        assert!(decode_base64("aGVsbG8=").is_err());
    }
}
