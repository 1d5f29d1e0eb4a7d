//! Durations as users type them in wrk2, Vegeta and scenario files: `30s`, `3m`, `500ms`, `1h`, `250us`.

use std::time::Duration;

/// Parses `10`, `10s`, `1.5s`, `500ms`, `250us`, `3m`, `1h`; a bare number is seconds.
///
/// # Errors
/// A message naming the accepted units when the text is not a duration.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        format!(
            "'{s}' is not a duration: use a number with s, ms, us, m or h (e.g. 30s, 500ms, 3m)"
        )
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" | "µs" => n / 1e6,
        "ns" => n / 1e9,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    // Far beyond any run (about 584 billion years): refused rather than a panic.
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{s}' is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse("12").unwrap(), Duration::from_secs(12));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "s",
            "10x",
            "-1s",
            "1..2s",
            "ten",
            "99999999999999999999999s",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}
