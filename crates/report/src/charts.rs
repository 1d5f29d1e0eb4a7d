//! The studies' charts, drawn with `plotters` from saved results: the percentile
//! distribution on a "nines" axis (S1, S5), latency over time with every change
//! marked (S3), throughput and errors over time, and which backend answered.
//!
//! Data is prepared first (pure functions from results to points, unit-tested), then
//! drawn on any plotters backend: SVG text for the page, an RGB buffer for `--png`.
//! The SVG draws axes and labels in black and the page maps black to `currentColor`
//! ([`svg_for_page`]), so the charts follow the reader's light or dark scheme.
//! A series keeps its colour ([`series_color`]) on every chart of a report.

use super::input::{ReportInput, Series};
use plotters::coord::ranged1d::{
    KeyPointHint, KeyPointWeight, NoDefaultFormatting, Ranged, ValueFormatter,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use results::{ErrorKind, Event, EventKind, RunResult};
use std::collections::HashSet;
use std::ops::Range;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("chart {id}: {msg}")]
    Draw { id: String, msg: String },
    #[error("no font for chart labels: {0}")]
    Font(String),
    #[error("chart {id}: png: {msg}")]
    Png { id: String, msg: String },
}

/// Series colours, by series index (Tableau 10 without its red, which marks errors):
/// mid-tones that read on a white and on a dark page alike.
pub const PALETTE: [(u8, u8, u8); 9] = [
    (0x4E, 0x79, 0xA7),
    (0xF2, 0x8E, 0x2B),
    (0x59, 0xA1, 0x4F),
    (0xB0, 0x7A, 0xA1),
    (0x76, 0xB7, 0xB2),
    (0xED, 0xC9, 0x48),
    (0x9C, 0x75, 0x5F),
    (0xFF, 0x9D, 0xA7),
    (0x79, 0x70, 0x6E),
];

/// The colour of failed requests and of a dying proxy.
pub const ERROR_RGB: (u8, u8, u8) = (0xE1, 0x57, 0x59);

/// Colours of the error kinds, in the order of [`ErrorKind::ALL`].
pub const KIND_PALETTE: [(u8, u8, u8); 7] = [
    (0xE1, 0x57, 0x59),
    (0x8C, 0x1D, 0x40),
    (0xB0, 0x7A, 0xA1),
    (0xF2, 0x8E, 0x2B),
    (0x9C, 0x75, 0x5F),
    (0x4E, 0x79, 0xA7),
    (0xED, 0xC9, 0x48),
];

/// Colours of backends in the "which backend answered" chart (cycled).
const BACKEND_PALETTE: [(u8, u8, u8); 12] = [
    (0x4E, 0x79, 0xA7),
    (0xA0, 0xCB, 0xE8),
    (0xF2, 0x8E, 0x2B),
    (0xFF, 0xBE, 0x7D),
    (0x59, 0xA1, 0x4F),
    (0x8C, 0xD1, 0x7D),
    (0xB6, 0x99, 0x2D),
    (0xF1, 0xCE, 0x63),
    (0x49, 0x98, 0x94),
    (0x86, 0xBC, 0xB6),
    (0xB0, 0x7A, 0xA1),
    (0xD4, 0xA6, 0xC8),
];

/// The colour of series `i`: fixed for the whole report.
pub fn series_color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// The colour of series `i` as CSS, for the page's legend and tables.
pub fn series_css(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// The colour of an error kind as CSS.
pub fn kind_css(kind: &str) -> String {
    let (r, g, b) = kind_rgb(kind);
    format!("#{r:02X}{g:02X}{b:02X}")
}

fn kind_rgb(kind: &str) -> (u8, u8, u8) {
    ErrorKind::ALL
        .iter()
        .position(|k| k.name() == kind)
        .map(|i| KIND_PALETTE[i])
        .unwrap_or((0x79, 0x70, 0x6E))
}

fn rgb((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

/// Axes, labels and grid: black in the SVG, `currentColor` on the page.
const FG: RGBColor = BLACK;
/// The page background (a legend's box): near-white, mapped by the page's CSS.
pub const BG_SENTINEL: &str = "#FEFEFE";
const BG: RGBColor = RGBColor(0xFE, 0xFE, 0xFE);
const FONT: &str = "sans-serif";
/// Width of every chart, in pixels (the page scales it down to fit).
pub const WIDTH: u32 = 1000;

// ---------------------------------------------------------------------------------
// Axis transforms and tick labels: small pure functions.

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

/// Tick values of a log axis over `lo..=hi`: (labelled, grid only). Powers of ten are
/// labelled; when the range spans under two decades, 2 and 5 times them too.
pub fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let mut major = Vec::new();
    let mut minor = Vec::new();
    if !(lo > 0.0 && hi > lo) {
        return (major, minor);
    }
    let narrow = (hi / lo).log10() < 2.0 - 1e-9;
    let first = lo.log10().floor() as i32;
    let last = (hi.log10().ceil() as i32).min(first + 40);
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    for e in first..=last {
        let d = 10f64.powi(e);
        for m in 1..10 {
            let v = round_sig(m as f64 * d);
            if !inside(v) {
                continue;
            }
            if m == 1 || (narrow && (m == 2 || m == 5)) {
                major.push(v);
            } else {
                minor.push(v);
            }
        }
    }
    (major, minor)
}

/// `v` rounded to 12 significant digits (so 3 * 0.001 prints as 0.003).
fn round_sig(v: f64) -> f64 {
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

/// The label of a change marker, or `None` for events that are not changes asked
/// for (steps that complete one, and `endpoints_requested`, which is a step of a
/// scale like the windows in `lab.windows` count it).
pub fn event_label(e: &Event) -> Option<String> {
    let label = match (e.kind, e.kind.change()) {
        (EventKind::ProxyDied, _) => "proxy died".to_string(),
        (EventKind::ChangeFailed, _) => "change failed".to_string(),
        (_, Some(what)) if e.detail.is_empty() => what.to_string(),
        (_, Some(what)) => format!("{what} {}", e.detail.replace("->", "→")),
        (_, None) => return None,
    };
    Some(label)
}

/// A labelled vertical marker at `t_s` seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub t_s: f64,
    pub label: String,
    /// Drawn in the error colour (a proxy died, a change failed).
    pub alarm: bool,
}

/// The change markers of a result.
pub fn marks_of(r: &RunResult) -> Vec<Mark> {
    let Some(lab) = &r.lab else {
        return Vec::new();
    };
    lab.events
        .iter()
        .filter(|e| e.t_ms >= 0.0)
        .filter_map(|e| {
            event_label(e).map(|label| Mark {
                t_s: e.t_ms / 1000.0,
                label,
                alarm: e.kind.is_alarm(),
            })
        })
        .collect()
}

/// Merges markers closer than `min_gap` seconds into one, so their labels do not
/// overlap: the first one's time, the distinct labels joined by " · ".
pub fn merge_marks(mut marks: Vec<Mark>, min_gap: f64) -> Vec<Mark> {
    marks.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut out: Vec<Mark> = Vec::new();
    let mut labels: Vec<Vec<String>> = Vec::new();
    for m in marks {
        match out.last_mut() {
            Some(last) if m.t_s - last.t_s < min_gap => {
                last.alarm |= m.alarm;
                let ls = labels.last_mut().expect("labels follow marks");
                if !ls.contains(&m.label) {
                    ls.push(m.label);
                }
            }
            _ => {
                labels.push(vec![m.label.clone()]);
                out.push(m);
            }
        }
    }
    for (m, ls) in out.iter_mut().zip(labels) {
        m.label = ls.join(" · ");
    }
    out
}

/// Keeps one point per `cell`-pixel square (the others are drawn over it anyway),
/// so a scatter of a million requests stays a small SVG. `points` are pixels.
pub fn thin_by_pixel(points: &[(i32, i32)], cell: i32) -> Vec<usize> {
    let cell = cell.max(1);
    let mut seen = HashSet::new();
    let mut keep = Vec::new();
    for (i, (x, y)) in points.iter().enumerate() {
        if seen.insert((x.div_euclid(cell), y.div_euclid(cell))) {
            keep.push(i);
        }
    }
    keep
}

/// [`thin_by_pixel`] over layers drawn one over the other: a cell taken by a later
/// layer (drawn on top) is left out of the earlier ones, which it would hide anyway.
pub fn thin_layers(layers: &[Vec<(i32, i32)>], cell: i32) -> Vec<Vec<usize>> {
    let cell = cell.max(1);
    let mut seen = HashSet::new();
    let mut keep = vec![Vec::new(); layers.len()];
    for (l, points) in layers.iter().enumerate().rev() {
        for (i, (x, y)) in points.iter().enumerate() {
            if seen.insert((x.div_euclid(cell), y.div_euclid(cell))) {
                keep[l].push(i);
            }
        }
    }
    keep
}

/// Backend ids in natural order: b2 before b10.
pub fn natural_order(ids: &mut [String]) {
    ids.sort_by_key(|a| natural_key(a));
}

fn natural_key(s: &str) -> (String, u64, String) {
    let digits_at = s
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit())
        .last()
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (head, num) = s.split_at(digits_at);
    (
        head.to_string(),
        num.parse().unwrap_or(u64::MAX),
        s.to_string(),
    )
}

// ---------------------------------------------------------------------------------
// Coordinates plotters does not have: the nines axis and a log axis with our ticks.

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

// ---------------------------------------------------------------------------------
// Prepared data.

/// A line of one series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Line {
    /// Series index (its colour).
    pub series: usize,
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// The percentile distribution of a result as (quantile, ms) points from 50 % up to
/// the max (placed at `1 - 1/count`, capped at `max_q`): HdrHistogram's own steps.
///
/// # Errors
/// A message when the stored histogram cannot be decoded.
pub fn percentile_points(b64: &str, max_q: f64) -> Result<Vec<(f64, f64)>, String> {
    let h = super::hdr::decode_base64(b64)?;
    if h.is_empty() {
        return Ok(Vec::new());
    }
    let ms = |v: u64| v as f64 / 1000.0;
    let last_q = (1.0 - 1.0 / h.len() as f64).min(max_q).max(0.5);
    let mut pts = vec![(0.5, ms(h.value_at_quantile(0.5)))];
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        if q > 0.5 && q < last_q {
            pts.push((q, ms(v.value_iterated_to())));
        }
    }
    pts.push((last_q, ms(h.max())));
    Ok(pts)
}

/// The nines a report's percentile axis needs: 6 (99.9999 %), more when a series
/// has over a million values.
pub fn axis_nines(counts: impl IntoIterator<Item = u64>) -> f64 {
    let most = counts.into_iter().max().unwrap_or(0).max(1) as f64;
    most.log10().ceil().clamp(6.0, 9.0)
}

#[derive(Clone, Debug, Default)]
struct TimeSeries {
    series: usize,
    p50: Vec<(f64, f64)>,
    p99: Vec<(f64, f64)>,
    max: Vec<(f64, f64)>,
    /// Sampled requests: (s, ms); failed ones apart.
    ok: Vec<(f64, f64)>,
    failed: Vec<(f64, f64)>,
}

fn time_series(i: usize, r: &RunResult) -> TimeSeries {
    let mut ts = TimeSeries {
        series: i,
        ..Default::default()
    };
    for e in &r.timeline {
        if e.completed + e.errors == 0 || e.max <= 0.0 {
            continue;
        }
        let x = e.t as f64 + 0.5;
        ts.p50.push((x, e.p50));
        ts.p99.push((x, e.p99));
        ts.max.push((x, e.max));
    }
    if let Some(s) = &r.samples {
        for k in 0..s.len() {
            let p = (
                s.t_ms[k] / 1000.0,
                s.latency_ms.get(k).copied().unwrap_or(0.0),
            );
            if s.error_kind(k).is_some() {
                ts.failed.push(p);
            } else {
                ts.ok.push(p);
            }
        }
    }
    ts
}

/// Seconds the time axis spans: the measured window, plus drain seconds with data.
fn x_extent(results: &[&RunResult]) -> f64 {
    let mut x: f64 = 1.0;
    for r in results {
        x = x.max(r.duration_s);
        if let Some(last) = r
            .timeline
            .iter()
            .rev()
            .find(|e| e.completed + e.errors + e.sent > 0)
        {
            x = x.max(last.t as f64 + 1.0);
        }
        if let Some(s) = &r.samples {
            if let Some(m) = s.t_ms.iter().copied().reduce(f64::max) {
                x = x.max(m / 1000.0);
            }
        }
    }
    x.ceil()
}

#[derive(Clone, Debug)]
struct LatencyPanel {
    series: Vec<TimeSeries>,
    marks: Vec<Mark>,
    /// Markers closer than this (pixels) share one line: wider on the panel of all
    /// series, where each series logs the same change at a slightly different time.
    merge_px: f64,
    x_max: f64,
}

type Points = Vec<(f64, f64)>;

#[derive(Clone, Debug)]
struct Throughput {
    /// Per series: its index, then (s, req/s) sent and completed.
    series: Vec<(usize, Points, Points)>,
    targets: Vec<f64>,
    x_max: f64,
}

/// One panel of stacked bars: one bar per second, one layer per key.
#[derive(Clone, Debug)]
struct Stack {
    title: (String, usize),
    /// Layer names and colours, bottom first.
    keys: Vec<(String, (u8, u8, u8))>,
    /// (second, value per key).
    bars: Vec<(f64, Vec<f64>)>,
    /// Shares (0-100 %) rather than counts.
    percent: bool,
    /// Vertical markers, and shaded spans (s..s) behind them.
    marks: Vec<Mark>,
    spans: Vec<(f64, f64)>,
    x_max: f64,
    empty_note: String,
}

#[derive(Clone, Debug)]
enum Body {
    Percentiles { lines: Vec<Line>, max_nines: f64 },
    Latency(LatencyPanel),
    Throughput(Throughput),
    Stacks(Vec<Stack>),
    Note(String),
}

/// One chart of the report: where it goes on the page and what it draws.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Stable element id on the page (`chart-percentiles`, ...).
    pub id: String,
    pub title: String,
    /// What to look at, under the chart.
    pub caption: String,
    pub height: u32,
    body: Body,
}

/// Every chart of a report, in page order.
pub fn build(input: &ReportInput) -> Vec<Chart> {
    let mut charts = vec![
        percentiles_chart(input, true),
        percentiles_chart(input, false),
    ];
    charts.extend(latency_charts(input));
    charts.push(throughput_chart(input));
    charts.push(errors_chart(input));
    charts.push(backends_chart(input));
    charts
}

fn percentiles_chart(input: &ReportInput, corrected: bool) -> Chart {
    let max_nines = axis_nines(input.series.iter().map(|s| {
        if corrected {
            s.result.latency_ms.corrected.count
        } else {
            s.result.latency_ms.uncorrected.count
        }
    }));
    let mut lines = Vec::new();
    let mut unreadable = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        let h = if corrected {
            &s.result.histogram
        } else {
            &s.result.histogram_uncorrected
        };
        match percentile_points(h, quantile_of_nines(max_nines)) {
            Ok(points) if !points.is_empty() => lines.push(Line {
                series: i,
                name: s.name.clone(),
                points,
            }),
            Ok(_) => unreadable.push(format!("{}: no responses", s.name)),
            Err(e) => unreadable.push(format!("{}: {e}", s.name)),
        }
    }
    let which = if corrected {
        "corrected: from when each request should have been sent, so a stall counts for every request it delayed"
    } else {
        "uncorrected: from when each request was actually sent (what a closed-loop tool reports); compare with the corrected chart to see coordinated omission"
    };
    let mut caption = format!(
        "Latency against percentile on a nines axis: each step right is ten times rarer. {which}."
    );
    if !unreadable.is_empty() {
        caption.push_str(&format!(" Not drawn: {}.", unreadable.join("; ")));
    }
    Chart {
        id: if corrected {
            "chart-percentiles".into()
        } else {
            "chart-percentiles-uncorrected".into()
        },
        title: if corrected {
            "Latency by percentile (corrected)".into()
        } else {
            "Latency by percentile (uncorrected)".into()
        },
        caption,
        height: 460,
        body: if lines.is_empty() {
            Body::Note("no latency recorded".into())
        } else {
            Body::Percentiles { lines, max_nines }
        },
    }
}

fn latency_charts(input: &ReportInput) -> Vec<Chart> {
    let results: Vec<&RunResult> = input.series.iter().map(|s| &s.result).collect();
    let x_max = x_extent(&results);
    let sampled = input.series.iter().any(|s| s.result.samples.is_some());
    let scatter = if sampled {
        " Dots: sampled requests, at their intended send time and latency; ×: failed ones, at how long they took to fail."
    } else {
        " No request samples in these results (run with --sample to draw each request)."
    };
    let line_key = "Per second (by completion): thick p99, thin p50, dashed max.";
    let mut all_marks = Vec::new();
    for s in &input.series {
        all_marks.extend(marks_of(&s.result));
    }
    let mut charts = vec![Chart {
        id: "chart-latency".into(),
        title: "Latency over time, all series on one scale".into(),
        caption: format!(
            "{line_key}{scatter} Vertical lines: the changes asked for (from the event log)."
        ),
        height: 420,
        body: Body::Latency(LatencyPanel {
            series: input
                .series
                .iter()
                .enumerate()
                .map(|(i, s)| time_series(i, &s.result))
                .collect(),
            marks: all_marks,
            merge_px: if input.series.len() > 1 {
                4.0 * MARK_GAP_PX
            } else {
                MARK_GAP_PX
            },
            x_max,
        }),
    }];
    for (i, s) in input.series.iter().enumerate() {
        let sx = x_extent(&[&s.result]);
        charts.push(Chart {
            id: format!("chart-latency-{}", i + 1),
            title: format!("Latency over time: {}", s.name),
            caption: format!("{line_key}{scatter} Its own scale."),
            height: 300,
            body: Body::Latency(LatencyPanel {
                series: vec![time_series(i, &s.result)],
                marks: marks_of(&s.result),
                merge_px: MARK_GAP_PX,
                x_max: sx,
            }),
        });
    }
    charts
}

fn throughput_chart(input: &ReportInput) -> Chart {
    let results: Vec<&RunResult> = input.series.iter().map(|s| &s.result).collect();
    let x_max = x_extent(&results);
    let mut targets: Vec<f64> = Vec::new();
    let mut series = Vec::new();
    for (i, s) in input.series.iter().enumerate() {
        if let Some(t) = s.result.config.rate {
            if !targets.iter().any(|x| (x - t).abs() < 1e-9) {
                targets.push(t);
            }
        }
        let pts = |f: fn(&results::TimelineEntry) -> u64| {
            s.result
                .timeline
                .iter()
                .filter(|e| (e.t as f64) < s.result.duration_s || e.sent + e.completed > 0)
                .map(|e| (e.t as f64 + 0.5, f(e) as f64))
                .collect::<Vec<_>>()
        };
        series.push((i, pts(|e| e.sent), pts(|e| e.completed)));
    }
    Chart {
        id: "chart-throughput".into(),
        title: "Throughput over time".into(),
        caption: "Requests per second: solid, completed (successful responses); dashed, sent; grey dashed, the target rate.".into(),
        height: 360,
        body: Body::Throughput(Throughput {
            series,
            targets,
            x_max,
        }),
    }
}

fn errors_chart(input: &ReportInput) -> Chart {
    let results: Vec<&RunResult> = input.series.iter().map(|s| &s.result).collect();
    let x_max = x_extent(&results);
    let stacks: Vec<Stack> = input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| error_stack(i, s, x_max))
        .collect();
    let total: u64 = input.series.iter().map(|s| s.result.errors.total()).sum();
    Chart {
        id: "chart-errors".into(),
        title: "Errors over time, by kind".into(),
        caption: "Failed requests per second (by completion), stacked by kind; each series on its own scale.".into(),
        height: if total == 0 {
            120
        } else {
            stacks.len() as u32 * 200 + 10
        },
        body: if total == 0 {
            Body::Note("no errors in any series".into())
        } else {
            Body::Stacks(stacks)
        },
    }
}

fn error_stack(i: usize, s: &Series, x_max: f64) -> Stack {
    let kinds: Vec<&str> = ErrorKind::ALL
        .iter()
        .map(|k| k.name())
        .filter(|k| {
            s.result
                .timeline
                .iter()
                .any(|e| e.errors_by_kind.get(*k).copied().unwrap_or(0) > 0)
        })
        .collect();
    let bars = s
        .result
        .timeline
        .iter()
        .filter(|e| e.errors > 0)
        .map(|e| {
            (
                e.t as f64,
                kinds
                    .iter()
                    .map(|k| e.errors_by_kind.get(*k).copied().unwrap_or(0) as f64)
                    .collect(),
            )
        })
        .collect();
    Stack {
        title: (s.name.clone(), i),
        keys: kinds.iter().map(|k| (k.to_string(), kind_rgb(k))).collect(),
        bars,
        percent: false,
        marks: marks_of(&s.result),
        spans: Vec::new(),
        x_max,
        empty_note: "no errors".into(),
    }
}

/// Shares of responses per backend per second, backends in natural order.
fn backend_stack(i: usize, s: &Series, x_max: f64) -> Stack {
    let mut ids: Vec<String> = s
        .result
        .timeline
        .iter()
        .flat_map(|e| e.backends.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    natural_order(&mut ids);
    let bars = s
        .result
        .timeline
        .iter()
        .filter_map(|e| {
            let total: u64 = e.backends.values().sum();
            (total > 0).then(|| {
                (
                    e.t as f64,
                    ids.iter()
                        .map(|b| {
                            100.0 * e.backends.get(b).copied().unwrap_or(0) as f64 / total as f64
                        })
                        .collect(),
                )
            })
        })
        .collect();
    let mut marks = Vec::new();
    let mut spans = Vec::new();
    if let Some(l) = &s.result.lab {
        for a in &l.propagation.added {
            let t = a.at_ms / 1000.0;
            let label = match a.propagation_ms {
                Some(p) => {
                    spans.push((t, t + p / 1000.0));
                    format!("+{} {}", a.backend, fmt_ms_short(p))
                }
                None => format!("+{} never", a.backend),
            };
            marks.push(Mark {
                t_s: t,
                label,
                alarm: a.propagation_ms.is_none(),
            });
        }
        for r in &l.propagation.removed {
            let t = r.at_ms / 1000.0;
            if let Some(p) = r.propagation_ms {
                if p > 0.0 {
                    spans.push((t, t + p / 1000.0));
                }
            }
            marks.push(Mark {
                t_s: t,
                label: format!("−{}", r.backend),
                alarm: r.errors_between > 0,
            });
        }
    }
    Stack {
        title: (s.name.clone(), i),
        keys: ids
            .iter()
            .enumerate()
            .map(|(k, b)| (b.clone(), BACKEND_PALETTE[k % BACKEND_PALETTE.len()]))
            .collect(),
        bars,
        percent: true,
        marks,
        spans,
        x_max,
        empty_note: "no backend ids recorded (no backend header in the responses)".into(),
    }
}

fn backends_chart(input: &ReportInput) -> Chart {
    let results: Vec<&RunResult> = input.series.iter().map(|s| &s.result).collect();
    let x_max = x_extent(&results);
    let stacks: Vec<Stack> = input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| backend_stack(i, s, x_max))
        .collect();
    Chart {
        id: "chart-backends".into(),
        title: "Which backend answered".into(),
        caption: "Share of each second's responses per backend. Lines: +bN a backend became ready (shaded until its first response through the proxy: the propagation time); −bN it was told to stop.".into(),
        height: stacks.len() as u32 * 220 + 10,
        body: Body::Stacks(stacks),
    }
}

// ---------------------------------------------------------------------------------
// Drawing.

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&FG)
}

type Draw<T = ()> = Result<T, String>;

fn de<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

impl Chart {
    /// The chart as an SVG document (black axes and text, transparent background).
    ///
    /// # Errors
    /// [`ChartError`] when plotters fails (no font, a drawing error).
    pub fn svg(&self) -> Result<String, ChartError> {
        ensure_font()?;
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (WIDTH, self.height)).into_drawing_area();
            self.draw(&root).map_err(|msg| self.err(msg))?;
            root.present().map_err(|e| self.err(de(e)))?;
        }
        Ok(s)
    }

    /// The chart as a PNG image on white, its title drawn in.
    ///
    /// # Errors
    /// [`ChartError`] when drawing or encoding fails.
    pub fn png(&self) -> Result<Vec<u8>, ChartError> {
        ensure_font()?;
        let (w, h) = (WIDTH, self.height + 34);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| self.err(de(e)))?;
            let root = root
                .titled(&self.title, font(20))
                .map_err(|e| self.err(de(e)))?;
            self.draw(&root).map_err(|msg| self.err(msg))?;
            root.present().map_err(|e| self.err(de(e)))?;
        }
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, w, h);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut wr = enc.write_header().map_err(|e| ChartError::Png {
                id: self.id.clone(),
                msg: e.to_string(),
            })?;
            wr.write_image_data(&buf).map_err(|e| ChartError::Png {
                id: self.id.clone(),
                msg: e.to_string(),
            })?;
        }
        Ok(out)
    }

    fn err(&self, msg: String) -> ChartError {
        ChartError::Draw {
            id: self.id.clone(),
            msg,
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw {
        match &self.body {
            Body::Percentiles { lines, max_nines } => draw_percentiles(root, lines, *max_nines),
            Body::Latency(p) => draw_latency(root, p),
            Body::Throughput(t) => draw_throughput(root, t),
            Body::Stacks(stacks) => {
                let areas = root.split_evenly((stacks.len().max(1), 1));
                for (area, st) in areas.iter().zip(stacks) {
                    draw_stack(area, st)?;
                }
                Ok(())
            }
            Body::Note(text) => {
                let (w, h) = root.dim_in_pixel();
                root.draw(&Text::new(
                    text.clone(),
                    (w as i32 / 2, h as i32 / 2),
                    font(16).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(de)
            }
        }
    }
}

/// The page's inline copy of a chart's SVG: its id, no XML namespace (inline SVG
/// needs none, and the page then holds no URL), black drawn as `currentColor`, and
/// without the stroke attributes of filled shapes (SVG's default: the scatter of a
/// long run is thousands of dots).
pub fn svg_for_page(svg: &str, id: &str, title: &str) -> String {
    let body = svg
        .replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace("\"#000000\"", "\"currentColor\"")
        .replace(" stroke=\"none\" stroke-width=\"1\"/>", "/>");
    let esc = super::html::escape(title);
    body.replacen(
        "<svg ",
        &format!("<svg id=\"{id}\" class=\"chart\" role=\"img\" aria-label=\"{esc}\" "),
        1,
    )
}

fn draw_percentiles<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lines: &[Line],
    max_nines: f64,
) -> Draw {
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for l in lines {
        for (_, v) in &l.points {
            if *v > 0.0 {
                lo = lo.min(*v);
            }
            hi = hi.max(*v);
        }
    }
    let (lo, hi) = log_bounds(lo / 1.1, hi * 1.1);
    let mut chart = ChartBuilder::on(root)
        .margin(14)
        .margin_right(28)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(
            NinesAxis {
                lo: nines(0.5),
                hi: max_nines,
            },
            LogAxis { lo, hi },
        )
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("percentile (%)")
        .y_desc("latency")
        .bold_line_style(FG.mix(0.18))
        .light_line_style(FG.mix(0.06))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15))
        .draw()
        .map_err(de)?;
    for l in lines {
        let c = series_color(l.series);
        chart
            .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))
            .map_err(de)?
            .label(l.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(BG.mix(0.9))
        .border_style(FG.mix(0.3))
        .label_font(font(15))
        .draw()
        .map_err(de)?;
    Ok(())
}

/// Draws vertical markers, behind the data.
fn draw_mark_lines<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    marks: &[Mark],
    y_top: Y::ValueType,
    y_bottom: Y::ValueType,
) -> Draw
where
    X: Ranged<ValueType = f64>,
    Y: Ranged,
    Y::ValueType: Clone + 'static,
{
    for m in marks {
        let color = if m.alarm { rgb(ERROR_RGB) } else { FG };
        let alpha = if m.alarm { 0.9 } else { 0.45 };
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(m.t_s, y_bottom.clone()), (m.t_s, y_top.clone())],
                color.mix(alpha).stroke_width(1),
            )))
            .map_err(de)?;
    }
    Ok(())
}

/// Draws markers' labels along their top, reading upwards, over the data on a box
/// of the page's background so they stay legible.
fn draw_mark_labels<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    marks: &[Mark],
    y_top: Y::ValueType,
) -> Draw
where
    X: Ranged<ValueType = f64>,
    Y: Ranged,
    Y::ValueType: Clone + 'static,
{
    let (_, plot_h) = chart.plotting_area().dim_in_pixel();
    for m in marks {
        let style = TextStyle::from((FONT, 13).into_font())
            .color(if m.alarm { &ERROR_COLOR } else { &FG })
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Left, VPos::Top));
        // As long as the plot is high: a longer label is cut, its end marked.
        let room = plot_h.saturating_sub(12).max(20) as f64;
        let mut label = clip_label(&m.label, 48);
        let (mut w, mut h) = chart
            .plotting_area()
            .estimate_text_size(&label, &style)
            .map_err(de)?;
        if w as f64 > room {
            let keep = (label.chars().count() as f64 * room / w as f64).floor() as usize;
            label = clip_label(&label, keep.max(2));
            (w, h) = chart
                .plotting_area()
                .estimate_text_size(&label, &style)
                .map_err(de)?;
        }
        // Rotated, the text runs up from its anchor, its glyphs to the right.
        let (w, h) = (w as i32, h as i32);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((m.t_s, y_top.clone()))
                    + Rectangle::new([(2, 3), (4 + h + 2, 6 + w)], BG.mix(0.8).filled())
                    + Text::new(label, (3, 4 + w), style),
            ))
            .map_err(de)?;
    }
    Ok(())
}

const ERROR_COLOR: RGBColor = RGBColor(ERROR_RGB.0, ERROR_RGB.1, ERROR_RGB.2);

fn clip_label(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// Marker labels need about this many pixels apart to stay readable.
const MARK_GAP_PX: f64 = 16.0;

fn draw_latency<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &LatencyPanel) -> Draw {
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for s in &p.series {
        for (_, v) in s
            .p50
            .iter()
            .chain(&s.p99)
            .chain(&s.max)
            .chain(&s.ok)
            .chain(&s.failed)
        {
            if *v > 0.0 {
                lo = lo.min(*v);
            }
            hi = hi.max(*v);
        }
    }
    let empty = lo > hi;
    let (lo, hi) = log_bounds(lo / 1.1, hi * 1.1);
    let mut builder = ChartBuilder::on(root);
    builder
        .margin(12)
        .margin_right(24)
        .x_label_area_size(44)
        .y_label_area_size(80);
    let mut chart = builder
        .build_cartesian_2d(0f64..p.x_max, LogAxis { lo, hi })
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the start of the measured window")
        .y_desc("latency")
        .x_label_formatter(&|v| fmt_num(*v))
        .x_max_light_lines(1)
        .bold_line_style(FG.mix(0.15))
        .light_line_style(FG.mix(0.05))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15))
        .draw()
        .map_err(de)?;
    let (w, _) = chart.plotting_area().dim_in_pixel();
    if empty {
        chart
            .draw_series(std::iter::once(Text::new(
                "no latency to draw: no responses, and no sampled requests",
                (p.x_max / 2.0, (lo * hi).sqrt()),
                font(15).pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(de)?;
    }
    let gap = p.merge_px * p.x_max / w.max(1) as f64;
    let marks = merge_marks(p.marks.clone(), gap);
    draw_mark_lines(&mut chart, &marks, hi, lo)?;
    // Samples first, lines over them.
    let layers: Vec<Vec<(i32, i32)>> = p
        .series
        .iter()
        .map(|s| s.ok.iter().map(|pt| chart.backend_coord(pt)).collect())
        .collect();
    for (s, keep) in p.series.iter().zip(thin_layers(&layers, 3)) {
        let c = series_color(s.series);
        chart
            .draw_series(
                keep.iter()
                    .map(|k| Circle::new(s.ok[*k], 2, c.mix(0.45).filled())),
            )
            .map_err(de)?;
    }
    for s in &p.series {
        let c = series_color(s.series);
        let dark = darker(c);
        chart
            .draw_series(LineSeries::new(
                s.p50.iter().copied(),
                c.mix(0.9).stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(DashedLineSeries::new(
                s.max.iter().copied(),
                6,
                4,
                dark.stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(s.p99.iter().copied(), dark.stroke_width(2)))
            .map_err(de)?;
    }
    for s in &p.series {
        let c = if p.series.len() == 1 {
            rgb(ERROR_RGB)
        } else {
            darker(series_color(s.series))
        };
        let px: Vec<(i32, i32)> = s.failed.iter().map(|pt| chart.backend_coord(pt)).collect();
        let keep = thin_by_pixel(&px, 3);
        chart
            .draw_series(
                keep.iter()
                    .map(|k| Cross::new(s.failed[*k], 4, c.stroke_width(2))),
            )
            .map_err(de)?;
    }
    draw_mark_labels(&mut chart, &marks, hi)
}

/// A darker shade of a series colour, for its lines over its own dots.
fn darker(c: RGBColor) -> RGBColor {
    let f = |v: u8| (v as f64 * 0.78) as u8;
    RGBColor(f(c.0), f(c.1), f(c.2))
}

fn draw_throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, t: &Throughput) -> Draw {
    let mut top: f64 = 1.0;
    for (_, sent, done) in &t.series {
        for (_, v) in sent.iter().chain(done) {
            top = top.max(*v);
        }
    }
    for x in &t.targets {
        top = top.max(*x);
    }
    let top = top * 1.15;
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .margin_right(24)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..t.x_max, 0f64..top)
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the start of the measured window")
        .y_desc("requests / s")
        .x_label_formatter(&|v| fmt_num(*v))
        .max_light_lines(1)
        .y_label_formatter(&|v| fmt_count_tick(*v))
        .bold_line_style(FG.mix(0.15))
        .light_line_style(FG.mix(0.05))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15))
        .draw()
        .map_err(de)?;
    for target in &t.targets {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, *target), (t.x_max, *target)],
                8,
                5,
                FG.mix(0.5).stroke_width(2),
            ))
            .map_err(de)?;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((0.0, *target))
                    + Text::new(
                        format!("target {}/s", fmt_num(*target)),
                        (6, -4),
                        font(14).pos(Pos::new(HPos::Left, VPos::Bottom)),
                    ),
            ))
            .map_err(de)?;
    }
    for (i, sent, done) in &t.series {
        let c = series_color(*i);
        chart
            .draw_series(DashedLineSeries::new(
                sent.iter().copied(),
                5,
                4,
                c.stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(done.iter().copied(), c.stroke_width(2)))
            .map_err(de)?;
    }
    Ok(())
}

fn draw_stack<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, st: &Stack) -> Draw {
    let (name, i) = &st.title;
    let top = if st.percent {
        100.0
    } else {
        st.bars
            .iter()
            .map(|(_, v)| v.iter().sum::<f64>())
            .fold(1.0, f64::max)
            * 1.1
    };
    // The same width with or without keys, so panels' time axes line up.
    let legend_w = 130;
    let title_color = series_color(*i);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(legend_w)
        .caption(
            name,
            TextStyle::from((FONT, 16).into_font()).color(&title_color),
        )
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..st.x_max, 0f64..top)
        .map_err(de)?;
    let percent = st.percent;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| {
            if percent {
                format!("{}%", fmt_num(*v))
            } else if v.fract() != 0.0 {
                String::new()
            } else {
                fmt_count_tick(*v)
            }
        })
        .y_desc(if st.percent {
            "share of responses"
        } else {
            "errors / s"
        })
        .y_labels(5)
        .bold_line_style(FG.mix(0.12))
        .light_line_style(FG.mix(0.0))
        .axis_style(FG.mix(0.6))
        .label_style(font(14))
        .axis_desc_style(font(14))
        .draw()
        .map_err(de)?;
    if st.bars.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                st.empty_note.clone(),
                (st.x_max / 2.0, top / 2.0),
                font(15).pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(de)?;
    }
    for (t, values) in &st.bars {
        let mut base = 0.0;
        let mut rects = Vec::new();
        for (k, v) in values.iter().enumerate() {
            if *v <= 0.0 {
                continue;
            }
            rects.push(Rectangle::new(
                [(*t, base), (*t + 1.0, base + v)],
                rgb(st.keys[k].1).filled(),
            ));
            base += v;
        }
        chart.draw_series(rects).map_err(de)?;
    }
    for (a, b) in &st.spans {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*a, 0.0), (*b, top)],
                FG.mix(0.25).filled(),
            )))
            .map_err(de)?;
    }
    let (w, _) = chart.plotting_area().dim_in_pixel();
    let gap = MARK_GAP_PX * st.x_max / w.max(1) as f64;
    let marks = merge_marks(st.marks.clone(), gap);
    draw_mark_lines(&mut chart, &marks, top, 0.0)?;
    draw_mark_labels(&mut chart, &marks, top)?;
    // The legend: one swatch per key, right of the plot, as many as fit.
    let (aw, ah) = area.dim_in_pixel();
    let x0 = aw as i32 - legend_w + 14;
    let rows = ((ah as i32 - 40) / 16).max(1) as usize;
    for (k, (key, color)) in st.keys.iter().enumerate().take(rows) {
        let y = 34 + k as i32 * 16;
        let label = if k + 1 == rows && st.keys.len() > rows {
            format!("+{} more", st.keys.len() - k)
        } else {
            key.clone()
        };
        area.draw(&Rectangle::new(
            [(x0, y - 5), (x0 + 10, y + 5)],
            rgb(*color).filled(),
        ))
        .map_err(de)?;
        area.draw(&Text::new(
            label,
            (x0 + 16, y),
            font(14).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(de)?;
    }
    Ok(())
}

/// Registers the font plotters measures (and, for PNG, draws) labels with. SVG text
/// is drawn by the browser; the font only sizes it.
fn ensure_font() -> Result<(), ChartError> {
    static FONT_READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT_READY
        .get_or_init(|| {
            let mut tried = Vec::new();
            let env = std::env::var("INGRESSBENCH_FONT").ok();
            for p in env.iter().map(String::as_str).chain(FONT_PATHS.iter().copied()) {
                tried.push(p.to_string());
                if let Ok(bytes) = std::fs::read(p) {
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                        return Ok(());
                    }
                }
            }
            Err(format!(
                "install fonts-dejavu-core, or set INGRESSBENCH_FONT to a .ttf file (looked for {})",
                tried.join(", ")
            ))
        })
        .clone()
        .map_err(ChartError::Font)
}

/// Where the label font is looked for (Debian, Arch, Fedora, then Liberation).
pub const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

#[cfg(test)]
mod tests {
    use super::*;
    use results::{LabInfo, Samples, TimelineEntry};

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
        let a = LogAxis { lo: 1.0, hi: 100.0 };
        assert_eq!(a.map(&10.0, (0, 200)), 100);
        assert_eq!(a.map(&0.0, (0, 200)), 0, "zero clamps to the bottom");
    }

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

    fn ev(t_ms: f64, kind: &str, detail: &str) -> Event {
        Event {
            t_ms,
            kind: serde_json::from_value(serde_json::Value::from(kind)).unwrap(),
            detail: detail.into(),
            took_ms: None,
        }
    }

    #[test]
    fn markers_are_the_changes_asked_for() {
        assert_eq!(
            event_label(&ev(0.0, "scale_requested", "5 -> 7")).as_deref(),
            Some("scale 5 → 7")
        );
        assert_eq!(
            event_label(&ev(0.0, "route_requested", "cors")).as_deref(),
            Some("route cors")
        );
        assert_eq!(
            event_label(&ev(0.0, "reload_requested", "")).as_deref(),
            Some("reload")
        );
        assert_eq!(
            event_label(&ev(0.0, "proxy_died", "nginx")).as_deref(),
            Some("proxy died")
        );
        for k in ["endpoints_requested", "endpoints_applied", "backend_ready"] {
            assert_eq!(event_label(&ev(0.0, k, "b1")), None, "{k}");
        }
        let r = RunResult {
            lab: Some(LabInfo {
                events: vec![
                    ev(-5.0, "scale_requested", "0 -> 5"),
                    ev(3000.0, "scale_requested", "5 -> 7"),
                    ev(3010.0, "endpoints_requested", "b1"),
                    ev(4000.0, "proxy_died", "nginx"),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = marks_of(&r);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].t_s, m[1].alarm), (3.0, true));
    }

    #[test]
    fn close_markers_merge() {
        let mk = |t: f64, l: &str| Mark {
            t_s: t,
            label: l.into(),
            alarm: false,
        };
        let m = merge_marks(
            vec![mk(5.0, "b"), mk(1.0, "a"), mk(1.1, "a"), mk(1.2, "c")],
            0.5,
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].label, "a · c");
        assert_eq!(m[1].t_s, 5.0);
    }

    #[test]
    fn thinning_keeps_one_point_per_cell() {
        let pts = [(0, 0), (1, 1), (2, 0), (5, 5), (-1, 0)];
        assert_eq!(thin_by_pixel(&pts, 2), [0, 2, 3, 4]);
        assert_eq!(thin_by_pixel(&pts, 1).len(), 5);
        let layers = vec![vec![(0, 0), (9, 9)], vec![(1, 1), (4, 4)]];
        assert_eq!(thin_layers(&layers, 2), [vec![1], vec![0, 1]]);
    }

    #[test]
    fn backend_ids_sort_naturally() {
        let mut v: Vec<String> = ["b10", "b2", "b1", "x"].map(String::from).to_vec();
        natural_order(&mut v);
        assert_eq!(v, ["b1", "b2", "b10", "x"]);
    }

    fn histogram_b64(values_us: &[u64]) -> String {
        use base64::Engine as _;
        let mut h = results::histogram::latency_histogram();
        for v in values_us {
            h.record(*v).unwrap();
        }
        base64::engine::general_purpose::STANDARD.encode(results::histogram::serialize_v2(&h))
    }

    #[test]
    fn percentile_points_run_from_the_median_to_the_max() {
        let vals: Vec<u64> = (1..=1000).map(|v| v * 1000).collect();
        let pts = percentile_points(&histogram_b64(&vals), quantile_of_nines(6.0)).unwrap();
        assert_eq!(pts[0].0, 0.5);
        assert!((pts[0].1 - 500.0).abs() < 1.0, "{:?}", pts[0]);
        let last = pts.last().unwrap();
        assert!((last.0 - 0.999).abs() < 1e-9);
        assert!((last.1 - 1000.0).abs() < 1.0);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(percentile_points("!!", 0.9).is_err());
        assert_eq!(axis_nines([10, 8000]), 6.0);
        assert_eq!(axis_nines([5_400_000]), 7.0);
    }

    fn sample_input() -> ReportInput {
        let mut r = RunResult {
            schema: results::RESULT_SCHEMA.into(),
            duration_s: 3.0,
            histogram: histogram_b64(&[300, 400, 5000, 40_000]),
            histogram_uncorrected: histogram_b64(&[300, 400, 4000]),
            ..Default::default()
        };
        r.config.rate = Some(100.0);
        for t in 0..3u64 {
            let mut e = TimelineEntry {
                t,
                sent: 100,
                completed: 98,
                errors: 2,
                p50: 0.3,
                p99: 4.0 + t as f64,
                max: 40.0,
                ..Default::default()
            };
            e.errors_by_kind.insert("read".into(), 2);
            e.backends.insert("b1".into(), 50);
            e.backends.insert("b2".into(), 48);
            r.timeline.push(e);
        }
        r.errors.read = 6;
        r.samples = Some(Samples {
            fraction: 0.1,
            t_ms: vec![10.0, 500.0, 2100.0],
            latency_ms: vec![0.3, 12.0, 3.0],
            status: vec![200, 200, 0],
            error: vec![0, 0, 1],
            error_kinds: vec!["read".into()],
            backend: vec![0, 1, -1],
            backend_ids: vec!["b1".into(), "b2".into()],
        });
        r.lab = Some(LabInfo {
            system: "nginx-reload".into(),
            events: vec![ev(1500.0, "scale_requested", "5 -> 7")],
            ..Default::default()
        });
        let mut other = r.clone();
        other.samples = None;
        other.timeline.iter_mut().for_each(|e| {
            e.errors = 0;
            e.errors_by_kind.clear();
        });
        ReportInput {
            runs: vec![Default::default()],
            series: vec![
                Series {
                    name: "nginx-reload".into(),
                    result: r,
                    ..Default::default()
                },
                Series {
                    name: "caddy-api".into(),
                    result: other,
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn every_chart_draws_as_svg_and_png() {
        let input = sample_input();
        let charts = build(&input);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "chart-percentiles",
                "chart-percentiles-uncorrected",
                "chart-latency",
                "chart-latency-1",
                "chart-latency-2",
                "chart-throughput",
                "chart-errors",
                "chart-backends"
            ]
        );
        for c in &charts {
            let svg = c.svg().unwrap();
            assert!(svg.starts_with("<svg"), "{}", c.id);
            assert!(svg.trim_end().ends_with("</svg>"), "{}", c.id);
            let page = svg_for_page(&svg, &c.id, &c.title);
            assert!(page.starts_with(&format!("<svg id=\"{}\"", c.id)));
            assert!(!page.contains("http://") && !page.contains("#000000"));
        }
        let png = charts[0].png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // The scatter: one failed sample drawn as a cross (two lines), in the panel.
        let latency = charts[3].svg().unwrap();
        assert!(latency.contains("<circle"), "sampled requests drawn");
        assert!(latency.contains("scale 5 → 7"), "the change is labelled");
        let percentiles = charts[0].svg().unwrap();
        for l in ["99.9999", "nginx-reload", "caddy-api"] {
            assert!(percentiles.contains(l), "{l}");
        }
    }

    #[test]
    fn results_with_nothing_in_them_still_draw() {
        let mut input = sample_input();
        for s in &mut input.series {
            let r = &mut s.result;
            r.timeline.iter_mut().for_each(|e| {
                e.completed = 0;
                e.p50 = 0.0;
                e.p99 = 0.0;
                e.max = 0.0;
                e.backends.clear();
            });
            r.histogram = histogram_b64(&[]);
            r.samples = None;
            r.lab = None;
        }
        let t = std::time::Instant::now();
        for c in build(&input) {
            let svg = c.svg().unwrap();
            assert!(svg.starts_with("<svg"), "{}", c.id);
            if c.id.starts_with("chart-latency") {
                assert!(svg.contains("no latency to draw"), "{}", c.id);
            }
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn no_errors_is_said_not_drawn() {
        let mut input = sample_input();
        input.series.truncate(1);
        input.series[0].result.timeline.iter_mut().for_each(|e| {
            e.errors = 0;
            e.errors_by_kind.clear();
        });
        input.series[0].result.errors.read = 0;
        let errors = build(&input)
            .into_iter()
            .find(|c| c.id == "chart-errors")
            .unwrap();
        assert!(errors.svg().unwrap().contains("no errors in any series"));
    }
}
