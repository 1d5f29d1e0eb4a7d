//! What the charts show, prepared from saved results before anything is drawn:
//! every chart of a report ([`build`]) with its id, title and caption, the points of
//! its lines, bars and scatters, and the change markers from the event log. Pure
//! functions from results to numbers, so they are tested without drawing.

use super::axes::quantile_of_nines;
use crate::fmt::fmt_ms_short;
use crate::input::{ReportInput, Series};
use crate::theme::{backend_rgb, kind_rgb, Rgb};
use results::{ErrorKind, Event, EventKind, RunResult};

/// Marker labels need about this many pixels apart to stay readable.
pub(super) const MARK_GAP_PX: f64 = 16.0;

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
    let h = crate::hdr::decode_base64(b64)?;
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
pub(super) struct TimeSeries {
    pub(super) series: usize,
    pub(super) p50: Vec<(f64, f64)>,
    pub(super) p99: Vec<(f64, f64)>,
    pub(super) max: Vec<(f64, f64)>,
    /// Sampled requests: (s, ms); failed ones apart.
    pub(super) ok: Vec<(f64, f64)>,
    pub(super) failed: Vec<(f64, f64)>,
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
pub(super) struct LatencyPanel {
    pub(super) series: Vec<TimeSeries>,
    pub(super) marks: Vec<Mark>,
    /// Markers closer than this (pixels) share one line: wider on the panel of all
    /// series, where each series logs the same change at a slightly different time.
    pub(super) merge_px: f64,
    pub(super) x_max: f64,
}

pub(super) type Points = Vec<(f64, f64)>;

#[derive(Clone, Debug)]
pub(super) struct Throughput {
    /// Per series: its index and name, then (s, req/s) sent and completed. With more
    /// than one series, each gets a panel of its own on a shared scale: series run at
    /// the same rate draw the same line, and on one panel only the top one would show.
    pub(super) series: Vec<(usize, String, Points, Points)>,
    pub(super) targets: Vec<f64>,
    pub(super) x_max: f64,
}

/// One panel of stacked bars: one bar per second, one layer per key.
#[derive(Clone, Debug)]
pub(super) struct Stack {
    pub(super) title: (String, usize),
    /// Layer names and colours, bottom first.
    pub(super) keys: Vec<(String, Rgb)>,
    /// (second, value per key).
    pub(super) bars: Vec<(f64, Vec<f64>)>,
    /// Shares (0-100 %) rather than counts.
    pub(super) percent: bool,
    /// Vertical markers, and shaded spans (s..s) behind them.
    pub(super) marks: Vec<Mark>,
    pub(super) spans: Vec<(f64, f64)>,
    pub(super) x_max: f64,
    pub(super) empty_note: String,
}

#[derive(Clone, Debug)]
pub(super) enum Body {
    Percentiles {
        lines: Vec<Line>,
        max_nines: f64,
    },
    Latency(LatencyPanel),
    Throughput(Throughput),
    Stacks(Vec<Stack>),
    /// Latency against rate; the x axis's description (the rate sent by a search,
    /// the rate offered by a load plan).
    Rates(Vec<RateLine>, &'static str),
    Sizing(SizingPanel),
    /// A measure against the route count of a `route_scale` sweep, both axes log.
    Scale(ScalePanel),
    Note(String),
}

/// One measure of route sets against their size: a line per system, (routes,
/// value) in order of routes; `y_ms` says the values are milliseconds (else a
/// count, described by `y_desc`).
#[derive(Clone, Debug)]
pub(super) struct ScalePanel {
    pub(super) lines: Vec<(usize, String, Points)>,
    pub(super) y_desc: String,
    pub(super) y_ms: bool,
}

/// Rates against cores (study S4's scaling): one line per system and measure.
#[derive(Clone, Debug)]
pub(super) struct SizingPanel {
    /// (series, name, (cores, max rate) in order of cores).
    pub(super) lines: Vec<(usize, String, Points)>,
    pub(super) y_desc: String,
}

/// One search on the latency-versus-rate chart: the rate each step sent against its
/// p50 and p99, in order of rate, and the maximum found.
#[derive(Clone, Debug)]
pub(super) struct RateLine {
    pub(super) series: usize,
    pub(super) name: String,
    pub(super) p50: Points,
    pub(super) p99: Points,
    pub(super) max: Option<f64>,
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
    pub(super) body: Body,
}

/// The points of the line named `name`, a new one (of series `series`, its
/// colour) when there is none yet: the lines of a chart drawn one per system or
/// measure, in the order they first appear.
fn line_of(lines: &mut Vec<(usize, String, Points)>, series: usize, name: String) -> &mut Points {
    let at = match lines.iter().position(|(_, n, _)| *n == name) {
        Some(k) => k,
        None => {
            lines.push((series, name, Vec::new()));
            lines.len() - 1
        }
    };
    &mut lines[at].2
}

/// The maximum against cores for every measure of one kind (requests per second, or
/// handshakes per second), one line per system and measure; `None` when no scan
/// measured that kind.
pub(super) fn sizing_chart(input: &ReportInput, tps: bool) -> Option<Chart> {
    let mut lines: Vec<(usize, String, Points)> = Vec::new();
    for (i, sz) in input.sizings.iter().enumerate() {
        for r in &sz.sizing.rows {
            let Some(m) = r.measure.as_ref().filter(|m| m.is_tps() == tps) else {
                continue;
            };
            let name = format!("{} {}", sz.name, m.label());
            let points = line_of(&mut lines, i, name);
            if let Some(v) = r.max_rate {
                points.push((r.allocation.cores, v));
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    for l in &mut lines {
        l.2.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let drawn = lines.iter().any(|l| !l.2.is_empty());
    let (id, title, what) = if tps {
        (
            "chart-sizing-tps",
            "New TLS connections per second against cores",
            "handshakes per second",
        )
    } else {
        (
            "chart-sizing-rps",
            "Requests per second against cores",
            "requests per second",
        )
    };
    Some(Chart {
        id: id.into(),
        title: title.into(),
        caption: format!("Each point is a system's maximum ({what}) at one CPU allocation of the sizing scan: a line that rises in proportion to the cores scales linearly; one that bends flattens where something other than the proxy's CPU (the backends, the generator, the network stack) takes over."),
        height: 420,
        body: if drawn {
            Body::Sizing(SizingPanel {
                lines,
                y_desc: what.into(),
            })
        } else {
            Body::Note("no allocation held the bounds".into())
        },
    })
}

/// The system a series measured, without the size a `route_scale` sweep put in its
/// name (`nginx-reload-1000routes` -> `nginx-reload`).
fn swept_system(s: &Series, routes: u32) -> String {
    s.name
        .strip_suffix(&format!("-{routes}routes"))
        .unwrap_or(&s.name)
        .to_string()
}

/// Route sets against their size (`route_scale`), one line per system: the time
/// until every route served, and the proxy's peak memory. None unless some system
/// ran at two sizes or more.
pub(super) fn route_scale_charts(input: &ReportInput) -> Vec<Chart> {
    type Pick = fn(&results::LabInfo) -> Option<f64>;
    let measures: [(&str, &str, &str, bool, Pick); 2] = [
        (
            "chart-route-scale-served",
            "Time until every route served, against the number of routes",
            "from the apply until every route answered as itself",
            true,
            |l| l.route_set.as_ref().and_then(|r| r.all_served_ms),
        ),
        (
            "chart-route-scale-rss",
            "Proxy memory against the number of routes",
            "proxy peak RSS (MiB)",
            false,
            |l| {
                l.resources
                    .as_ref()
                    .map(|r| r.rss_max_mib)
                    .filter(|v| *v > 0.0)
            },
        ),
    ];
    let mut charts = Vec::new();
    for (id, title, y_desc, y_ms, pick) in measures {
        let mut lines: Vec<(usize, String, Points)> = Vec::new();
        for (i, s) in input.series.iter().enumerate() {
            let Some(lab) = &s.result.lab else { continue };
            let Some(rs) = &lab.route_set else { continue };
            let Some(v) = pick(lab) else { continue };
            line_of(&mut lines, i, swept_system(s, rs.count)).push((f64::from(rs.count), v));
        }
        if !lines.iter().any(|l| l.2.len() >= 2) {
            continue;
        }
        for l in &mut lines {
            l.2.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        charts.push(Chart {
            id: id.into(),
            title: title.into(),
            caption: format!("Each point is one size of a system's route_scale sweep ({y_desc}), both axes logarithmic: a line of slope 1 grows in proportion to the routes, a steeper one faster than that. A size where some route never served has no point on the first chart."),
            height: 420,
            body: Body::Scale(ScalePanel {
                lines,
                y_desc: y_desc.into(),
                y_ms,
            }),
        });
    }
    charts
}

/// Latency against the rate sent, one line per searched system (study S2's curve): the
/// open-loop steps of each search (the closed-loop probe has no rate of its own).
pub(super) fn rates_chart(input: &ReportInput) -> Chart {
    let lines: Vec<RateLine> = input
        .searches
        .iter()
        .enumerate()
        .map(|(i, sr)| {
            let mut steps: Vec<_> = sr
                .search
                .steps
                .iter()
                .filter(|st| st.target.is_some() && st.achieved > 0.0)
                .collect();
            steps.sort_by(|a, b| a.achieved.total_cmp(&b.achieved));
            let pick = |f: fn(&results::search::SearchStep) -> Option<f64>| -> Points {
                steps
                    .iter()
                    .filter_map(|st| f(st).filter(|v| *v > 0.0).map(|v| (st.achieved, v)))
                    .collect()
            };
            let series = input.series_of(sr).unwrap_or(i);
            RateLine {
                series,
                name: sr.name.clone(),
                p50: pick(|st| st.p50_ms),
                p99: pick(|st| st.p99_ms),
                max: sr.search.max_rate,
            }
        })
        .collect();
    latency_against_rate(
        "chart-rates",
        "Latency against rate (the maximum search)",
        "Each point is one open-loop step of a system's search: the rate it sent and the corrected p99 (solid) and p50 (thin) it got. Latency stays flat until a system nears its maximum (the dot on each line), then climbs; the runs at fractions of the maximum sit on the flat part.",
        "requests per second sent",
        lines,
        "no search step got a response",
    )
}

/// Latency against the offered rate of a load plan's steps (`-R 1000:30s,...`, a
/// ramp in 5 s pieces), one line per system that ran a plan; `None` when none did.
/// The same chart as the search's, from the same code: a plan is a search a user
/// lays out by hand.
pub(super) fn plan_chart(input: &ReportInput) -> Option<Chart> {
    let lines: Vec<RateLine> = input
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.result.steps.is_empty())
        .map(|(i, s)| {
            let mut steps: Vec<&results::StepResult> = s.result.steps.iter().collect();
            steps.sort_by(|a, b| a.offered.total_cmp(&b.offered));
            let pick = |f: fn(&results::Percentiles) -> Option<f64>| -> Points {
                steps
                    .iter()
                    .filter_map(|st| {
                        f(&st.latency_ms)
                            .filter(|v| *v > 0.0)
                            .map(|v| (st.offered, v))
                    })
                    .collect()
            };
            RateLine {
                series: i,
                name: s.name.clone(),
                p50: pick(|p| p.p50),
                p99: pick(|p| p.p99),
                max: None,
            }
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(latency_against_rate(
        "chart-plan",
        "Latency against offered rate (the load plan's steps)",
        "Each point is one step of the load plan (a ramp counts in 5 s pieces): the rate it offered and the corrected p99 (solid) and p50 (thin) of the requests intended in it. Where a line turns up, the system stopped keeping pace with the offered rate; the connections were the same throughout, so no step paid for opening them.",
        "requests per second offered",
        lines,
        "no step of the plan got a response",
    ))
}

fn latency_against_rate(
    id: &str,
    title: &str,
    caption: &str,
    x_desc: &'static str,
    lines: Vec<RateLine>,
    empty: &str,
) -> Chart {
    let drawn = lines.iter().any(|l| !l.p99.is_empty());
    Chart {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        height: 460,
        body: if drawn {
            Body::Rates(lines, x_desc)
        } else {
            Body::Note(empty.into())
        },
    }
}

pub(super) fn percentiles_chart(input: &ReportInput, corrected: bool) -> Chart {
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

pub(super) fn latency_charts(input: &ReportInput) -> Vec<Chart> {
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

/// Height of one series' throughput panel, and of the time axis under the last one.
pub(super) const THROUGHPUT_PANEL: u32 = 150;
pub(super) const THROUGHPUT_AXIS: u32 = 50;

pub(super) fn throughput_chart(input: &ReportInput) -> Chart {
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
        series.push((i, s.name.clone(), pts(|e| e.sent), pts(|e| e.completed)));
    }
    let n = series.len() as u32;
    Chart {
        id: "chart-throughput".into(),
        title: "Throughput over time".into(),
        caption: if n > 1 {
            "Requests per second, one panel per series on one scale: solid, completed (successful responses); dashed, sent; grey dashed, the target rate."
        } else {
            "Requests per second: solid, completed (successful responses); dashed, sent; grey dashed, the target rate."
        }
        .into(),
        height: if n > 1 {
            THROUGHPUT_PANEL * n + THROUGHPUT_AXIS
        } else {
            360
        },
        body: Body::Throughput(Throughput {
            series,
            targets,
            x_max,
        }),
    }
}

/// One stack per series, drawn by `stack` on the time axis all series share.
fn stacks(input: &ReportInput, stack: fn(usize, &Series, f64) -> Stack) -> Vec<Stack> {
    let results: Vec<&RunResult> = input.series.iter().map(|s| &s.result).collect();
    let x_max = x_extent(&results);
    input
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| stack(i, s, x_max))
        .collect()
}

pub(super) fn errors_chart(input: &ReportInput) -> Chart {
    let total: u64 = input.series.iter().map(|s| s.result.errors.total()).sum();
    stacks_chart(
        ("chart-errors", "Errors over time, by kind"),
        "Failed requests per second (by completion), stacked by kind; each series on its own scale.",
        stacks(input, error_stack),
        total,
        "no errors in any series",
    )
}

/// A chart of one stack per series, or `none` when nothing (`total`) is to be drawn.
fn stacks_chart(
    (id, title): (&str, &str),
    caption: &str,
    stacks: Vec<Stack>,
    total: u64,
    none: &str,
) -> Chart {
    Chart {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        height: if total == 0 {
            120
        } else {
            stacks.len() as u32 * 200 + 10
        },
        body: if total == 0 {
            Body::Note(none.into())
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

/// Session ends over time (`sessions:`), stacked by how: with a close frame, or
/// cut (EOF, reset, timeout); each series on its own scale. `None` when no series
/// held sessions.
pub(super) fn sessions_chart(input: &ReportInput) -> Option<Chart> {
    if input.series.iter().all(|s| s.result.sessions.is_none()) {
        return None;
    }
    let total: u64 = input
        .series
        .iter()
        .filter_map(|s| s.result.sessions.as_ref())
        .map(|s| s.cut())
        .sum();
    Some(stacks_chart(
        ("chart-sessions", "Sessions ended over time"),
        "Long-lived sessions that ended per second (by the time they ended), stacked: with a close frame from the server's side, or cut (an EOF, a reset or an echo that never came); each series on its own scale, the changes marked.",
        stacks(input, session_stack),
        total,
        "no session ended before the run did, in any series",
    ))
}

fn session_stack(i: usize, s: &Series, x_max: f64) -> Stack {
    let bars = s
        .result
        .sessions
        .iter()
        .flat_map(|ss| &ss.timeline)
        .filter(|t| t.ended > 0)
        .map(|t| {
            (
                t.second as f64,
                vec![t.closed as f64, (t.ended - t.closed.min(t.ended)) as f64],
            )
        })
        .collect();
    Stack {
        title: (s.name.clone(), i),
        keys: vec![
            ("close frame".into(), crate::theme::PALETTE[0]),
            ("cut".into(), crate::theme::ERROR_RGB),
        ],
        bars,
        percent: false,
        marks: marks_of(&s.result),
        spans: Vec::new(),
        x_max,
        empty_note: if s.result.sessions.is_some() {
            "no session ended".into()
        } else {
            "no sessions".into()
        },
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
            .map(|(k, b)| (b.clone(), backend_rgb(k)))
            .collect(),
        bars,
        percent: true,
        marks,
        spans,
        x_max,
        empty_note: "no backend ids recorded (no backend header in the responses)".into(),
    }
}

pub(super) fn backends_chart(input: &ReportInput) -> Chart {
    let stacks = stacks(input, backend_stack);
    Chart {
        id: "chart-backends".into(),
        title: "Which backend answered".into(),
        caption: "Share of each second's responses per backend. Lines: +bN a backend became ready (shaded until its first response through the proxy: the propagation time); −bN it was told to stop.".into(),
        height: stacks.len() as u32 * 220 + 10,
        body: Body::Stacks(stacks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::fixtures::{ev, histogram_b64};
    use results::LabInfo;

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
    fn backend_ids_sort_naturally() {
        let mut v: Vec<String> = ["b10", "b2", "b1", "x"].map(String::from).to_vec();
        natural_order(&mut v);
        assert_eq!(v, ["b1", "b2", "b10", "x"]);
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
}
