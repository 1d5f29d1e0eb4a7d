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

/// HdrHistogram's percentile distribution text (`.hgrm`), values in ms.
pub fn percentile_distribution(h: &Histogram<u64>, unit_ns: f64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let to_ms = |v: u64| v as f64 * unit_ns / 1e6;
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 {
            format!("{:>14.2}", 1.0 / (1.0 - q))
        } else {
            format!("{:>14}", "")
        };
        let _ = writeln!(
            s,
            "{:>12.3} {:>14.12} {:>10} {inv}",
            to_ms(v.value_iterated_to()),
            q,
            total
        );
    }
    let _ = writeln!(
        s,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() * unit_ns / 1e6,
        h.stdev() * unit_ns / 1e6
    );
    let _ = writeln!(
        s,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        to_ms(h.max()),
        h.len()
    );
    let _ = writeln!(
        s,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    s
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
    }

    #[test]
    fn bad_base64_is_an_error() {
        assert!(decode_base64("!!!").is_err());
        assert!(decode_base64("aGVsbG8=").is_err());
    }
}
