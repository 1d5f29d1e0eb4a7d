//! Every number a report prints, formatted in one place: the page, the charts'
//! labels, the tables, the terminal summary and the comparison all show a latency,
//! a duration or a change the same way wherever it appears. It depends on nothing
//! else in the report, so any part may use it.
//!
//! Two families, for two readers: the terminal's wrk-style units (`1.23ms`,
//! [`fmt_ms`]), which wrk2 users read without thinking, and the page's plain
//! numbers with a spaced unit (`2.5 ms`, [`fmt_num`] and the tick labels).

/// What a cell shows when there is no figure (no propagation measured, no TLS).
pub const MISSING: &str = "–";

/// `v` rounded to 12 significant digits (so 3 * 0.001 prints as 0.003).
pub fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(11 - v.abs().log10().floor() as i32);
    (v * mag).round() / mag
}

/// A number without trailing zeros, at most 3 decimals: 2.5, 10, 0.05.
pub fn fmt_num(v: f64) -> String {
    let s = format!("{:.3}", round_sig(v));
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A latency tick label: `50 µs`, `1 ms`, `250 ms`, `2.5 s`.
pub fn fmt_ms_tick(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", fmt_num(ms / 1000.0))
    } else if ms >= 1.0 {
        format!("{} ms", fmt_num(ms))
    } else {
        format!("{} µs", fmt_num(ms * 1000.0))
    }
}

/// A duration in a label, to 2-3 significant digits: `151 ms`, `2.5 ms`, `80 µs`, `1.2 s`.
pub fn fmt_ms_short(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", fmt_num((ms / 100.0).round() / 10.0))
    } else if ms >= 10.0 {
        format!("{} ms", ms.round())
    } else if ms >= 1.0 {
        format!("{} ms", fmt_num((ms * 10.0).round() / 10.0))
    } else {
        format!("{} µs", (ms * 1000.0).round())
    }
}

/// A count tick label: 950, 1.5k, 2M.
pub fn fmt_count_tick(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{}M", fmt_num(v / 1e6))
    } else if v.abs() >= 1e4 {
        format!("{}k", fmt_num(v / 1e3))
    } else {
        fmt_num(v)
    }
}

/// Latency in ms as the tables show it: µs precision, like the result's figures.
pub fn fmt_ms_cell(v: f64) -> String {
    format!("{v:.3}")
}

/// A latency as [`fmt_ms_cell`] shows it, or [`MISSING`] when there is none (a run
/// that received no response has no percentiles).
pub fn fmt_opt_ms_cell(v: Option<f64>) -> String {
    v.map(fmt_ms_cell).unwrap_or_else(|| MISSING.into())
}

/// A figure in ms to a tenth, or [`MISSING`] (propagation, which may not have been
/// measured).
pub fn fmt_opt_ms1(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}"))
        .unwrap_or_else(|| MISSING.into())
}

/// Formats milliseconds the way wrk does: `812.00us`, `1.23ms`, `2.50s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.2}us", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else if ms < 60_000.0 {
        format!("{:.2}s", ms / 1000.0)
    } else {
        format!("{:.2}m", ms / 60_000.0)
    }
}

/// A latency as [`fmt_ms`] shows it, or [`MISSING`] when there is none.
pub fn fmt_opt_ms(v: Option<f64>) -> String {
    v.map(fmt_ms).unwrap_or_else(|| MISSING.into())
}

/// Milliseconds as a page shows them: [`fmt_ms`]'s precision with a spaced unit and
/// the micro sign (`812.50 µs`, `1.23 ms`, `2.50 s`, `2.00 min`); wrk's ASCII `us`
/// belongs to the terminal.
pub fn fmt_ms_page(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.2} µs", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2} ms")
    } else if ms < 60_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{:.2} min", ms / 60_000.0)
    }
}

/// Where a figure is shown, which decides how a latency is written: the terminal's
/// wrk-style units ([`fmt_ms`]) or the page's ([`fmt_ms_page`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    Terminal,
    Page,
}

impl Units {
    /// A latency in ms.
    pub fn ms(self, v: f64) -> String {
        match self {
            Units::Terminal => fmt_ms(v),
            Units::Page => fmt_ms_page(v),
        }
    }

    /// A signed change in ms: `+2.50ms`, `-5.00 ms`.
    pub fn signed_ms(self, x: f64) -> String {
        let sign = if x < 0.0 { '-' } else { '+' };
        format!("{sign}{}", self.ms(x.abs()))
    }

    /// A latency in ms, or [`MISSING`].
    pub fn opt_ms(self, v: Option<f64>) -> String {
        v.map(|x| self.ms(x)).unwrap_or_else(|| MISSING.into())
    }
}

/// A signed change in milliseconds, wrk-style: `+2.50ms`, `-5.00ms`.
pub fn fmt_signed_ms(x: f64) -> String {
    if x < 0.0 {
        format!("-{}", fmt_ms(-x))
    } else {
        format!("+{}", fmt_ms(x))
    }
}

/// A count held as a float (a delta's side): no decimals.
pub fn fmt_count(x: f64) -> String {
    format!("{x:.0}")
}

/// A change in percent of its base: `+25.0%`; without a base (`None`), `0.0%` when
/// nothing changed and `new` when something appeared.
pub fn fmt_pct_change(pct: Option<f64>, unchanged: bool) -> String {
    match pct {
        Some(p) => format!("{p:+.1}%"),
        None if unchanged => "0.0%".to_string(),
        None => "new".to_string(),
    }
}

/// Bytes in binary units, wrk-style: `2.00KB`.
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", UNITS[i])
}

/// Seconds, wrk-style, in whole minutes when they are: `3m`, `10s`, `2.50s`.
pub fn fmt_secs(s: f64) -> String {
    if s >= 60.0 && (s % 60.0).abs() < 1e-9 {
        format!("{}m", s / 60.0)
    } else {
        fmt_secs_only(s)
    }
}

/// Seconds, never minutes (a comparison shows `60s vs 300s`, not `1m vs 5m`):
/// `10s`, `2.50s`.
pub fn fmt_secs_only(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{}s", s.round())
    } else {
        format!("{s:.2}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_in_readable_units() {
        assert_eq!(fmt_ms_tick(0.05), "50 µs");
        assert_eq!(fmt_ms_tick(0.2), "200 µs");
        assert_eq!(fmt_ms_tick(1.0), "1 ms");
        assert_eq!(fmt_ms_tick(250.0), "250 ms");
        assert_eq!(fmt_ms_tick(2500.0), "2.5 s");
        assert_eq!(fmt_ms_tick(60_000.0), "60 s");
        assert_eq!(fmt_num(0.003), "0.003");
        assert_eq!(fmt_num(10.0), "10");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_ms_short(151.29), "151 ms");
        assert_eq!(fmt_ms_short(2.46), "2.5 ms");
        assert_eq!(fmt_ms_short(0.08), "80 µs");
        assert_eq!(fmt_ms_short(1234.0), "1.2 s");
        assert_eq!(fmt_count_tick(950.0), "950");
        assert_eq!(fmt_count_tick(30_000.0), "30k");
        assert_eq!(fmt_count_tick(2_500_000.0), "2.5M");
    }

    #[test]
    fn units_like_wrk() {
        assert_eq!(fmt_ms(0.8125), "812.50us");
        assert_eq!(fmt_ms(1.234), "1.23ms");
        assert_eq!(fmt_ms(2500.0), "2.50s");
        assert_eq!(fmt_ms(120_000.0), "2.00m");
        assert_eq!(fmt_opt_ms(None), MISSING);
        assert_eq!(fmt_ms_page(0.8125), "812.50 µs");
        assert_eq!(fmt_ms_page(120_000.0), "2.00 min");
        assert_eq!(Units::Page.signed_ms(-0.5), "-500.00 µs");
        assert_eq!(Units::Terminal.signed_ms(2.5), fmt_signed_ms(2.5));
        assert_eq!(fmt_opt_ms(Some(1.234)), "1.23ms");
        assert_eq!(fmt_opt_ms_cell(None), MISSING);
        assert_eq!(fmt_bytes(2048.0), "2.00KB");
        assert_eq!(fmt_secs(180.0), "3m");
        assert_eq!(fmt_secs(10.0), "10s");
    }
}
