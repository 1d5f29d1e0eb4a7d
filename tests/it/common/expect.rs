//! What the page must show, worked out from `result.json` alone (never from the
//! report's own code): every number of the tables as the page formats it
//! (docs/reports.md: latency in ms with 3 decimals, rates with 1, counts as integers),
//! the banner exactly when a result is not to be trusted, every chart drawn with a
//! size, and one line per series in the series' colour.

use super::chromium::Page;
use super::{ERROR_KINDS, PERCENTILE_KEYS};
use serde_json::Value;

/// One series of the report: its name on the page and the result it was drawn from.
pub struct Series<'a> {
    pub name: &'a str,
    pub result: &'a Value,
}

/// `v[path...]`, which must exist.
/// The charts every report page has (plus one latency panel per series).
pub const CHARTS: [&str; 6] = [
    "chart-percentiles",
    "chart-percentiles-uncorrected",
    "chart-latency",
    "chart-throughput",
    "chart-errors",
    "chart-backends",
];

pub fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(v, |v, k| {
        v.get(k)
            .unwrap_or_else(|| panic!("result.json has no {}", path.join(".")))
    })
}

pub fn f64_at(v: &Value, path: &[&str]) -> f64 {
    at(v, path)
        .as_f64()
        .unwrap_or_else(|| panic!("result.json: {} is not a number", path.join(".")))
}

pub fn u64_at(v: &Value, path: &[&str]) -> u64 {
    at(v, path)
        .as_u64()
        .unwrap_or_else(|| panic!("result.json: {} is not a count", path.join(".")))
}

/// Latency as the tables show it: ms with µs precision.
pub fn ms(v: f64) -> String {
    format!("{v:.3}")
}

/// A latency of the result as the tables show it: [`ms`], or "–" for null (a run
/// that received no response has no latency).
pub fn opt_ms(v: &Value, path: &[&str]) -> String {
    let x = at(v, path);
    match x.as_f64() {
        Some(f) => ms(f),
        None => {
            assert!(x.is_null(), "result.json: {} is {x}", path.join("."));
            "–".to_string()
        }
    }
}

fn one_decimal(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}"))
        .unwrap_or_else(|| "–".to_string())
}

/// Compares one table cell with the value expected from the result.
fn same(page: &Page, table: &str, series: &str, col: &str, want: &str) {
    let got = page.table(table).row(series).cell(col);
    assert_eq!(
        got, want,
        "#{table}, {series}, {col}: the page shows {got:?}, result.json says {want:?}"
    );
}

/// Errors of all kinds in a result.
pub fn total_errors(r: &Value) -> u64 {
    ERROR_KINDS.iter().map(|k| u64_at(r, &["errors", k])).sum()
}

/// Why a result is not to be trusted (partial, overloaded or late generator, rate not
/// reached, proxy died, no response or most requests failed, unbalanced counts);
/// empty when it can be.
pub fn distrust(r: &Value) -> Vec<&'static str> {
    let mut why = Vec::new();
    if at(r, &["partial"]).as_bool() == Some(true) {
        why.push("partial");
    }
    if at(r, &["generator", "overloaded"]).as_bool() == Some(true) {
        why.push("generator overloaded");
    }
    // Late with CPU to spare: not short of CPU, but its delay is in the latencies all
    // the same (docs/load.md), so the page warns as it does for an overloaded one.
    // Written only when true.
    if r.pointer("/generator/woke_late").and_then(Value::as_bool) == Some(true) {
        why.push("generator woke late");
    }
    if !at(r, &["rate", "target"]).is_null() && at(r, &["rate", "reached"]).as_bool() != Some(true)
    {
        why.push("rate not reached");
    }
    if r.pointer("/lab/proxy_died").and_then(Value::as_bool) == Some(true) {
        why.push("proxy died");
    }
    let n = |k: &str| u64_at(r, &["requests", k]);
    // Measured nothing: no response, nothing succeeded, or most requests failed
    // (docs/results.md: more than half of the intended ones).
    if u64_at(r, &["latency_ms", "corrected", "count"]) == 0 && n("completed") == 0 {
        why.push("no response");
    } else if n("completed") == 0 {
        why.push("nothing succeeded");
    } else if n("failed") * 2 > n("intended") {
        why.push("most failed");
    }
    if n("intended") != n("completed") + n("failed") + n("not_sent") + n("unfinished")
        || n("sent") + n("timed_out_unsent") != n("completed") + n("failed") + n("unfinished")
    {
        why.push("unbalanced");
    }
    why
}

/// The page as a whole: loaded without a script error, a console message or a
/// request, every expected chart drawn with a size (also those shown on request),
/// the legend naming the series in order, and every table there.
pub fn page_is_sound(page: &Page, series: &[Series]) {
    assert!(
        page.errors.is_empty(),
        "errors while the page loaded: {:#?}",
        page.errors
    );
    assert!(
        page.console.is_empty(),
        "the page wrote to the console: {:#?}",
        page.console
    );
    assert!(
        page.resources.is_empty(),
        "the page loaded resources (it must be self-contained): {:?}",
        page.resources
    );
    assert!(
        page.title.starts_with("ingressbench report"),
        "title {:?}",
        page.title
    );

    let mut want: Vec<String> = CHARTS.iter().map(|s| s.to_string()).collect();
    want.extend((1..=series.len()).map(|i| format!("chart-latency-{i}")));
    for id in &want {
        let c = page
            .chart_toggled(id)
            .unwrap_or_else(|| panic!("no #{id} on the page; charts: {:?}", chart_ids(page)));
        assert!(
            c.w >= 100.0 && c.h >= 50.0,
            "#{id} is {}x{} px once every toggle is on",
            c.w,
            c.h
        );
        assert_eq!(c.tag, "svg", "#{id} is not an SVG");
        // A chart may be a one-line note only when there is nothing to draw.
        let nothing = id == "chart-errors" && series.iter().all(|s| total_errors(s.result) == 0);
        if nothing {
            assert!(!c.texts.is_empty(), "#{id} is blank: {c:?}");
        } else {
            assert!(c.elements > 10, "#{id} is nearly empty: {c:?}");
        }
    }
    // Everything a reader sees at first is drawn; only what a toggle shows may hide.
    assert!(page.toggled >= 1, "no toggle for the uncorrected latency");
    for c in &page.charts {
        if c.id != "chart-percentiles-uncorrected" {
            assert!(
                c.w > 0.0 && c.h > 0.0,
                "#{} is {}x{} px on the page as loaded",
                c.id,
                c.w,
                c.h
            );
        }
    }
    for c in &page.charts_toggled {
        assert!(c.w > 0.0 && c.h > 0.0, "#{} is {}x{} px", c.id, c.w, c.h);
    }

    let legend: Vec<&str> = page.legend.iter().map(|l| l.name.as_str()).collect();
    let names: Vec<&str> = series.iter().map(|s| s.name).collect();
    assert_eq!(legend, names, "the legend names the series in order");

    for id in [
        "table-percentiles",
        "table-errors",
        "table-throughput",
        "table-settings",
        "table-changes",
        "table-propagation",
    ] {
        let t = page.table(id);
        // Every row but the one saying the table is empty (one cell across).
        for r in t.rows.iter().filter(|r| r.cells.len() > 1) {
            let keys: Vec<&str> = r.cells.keys().map(String::as_str).collect();
            let mut cols: Vec<&str> = t.cols.iter().map(|(k, _)| k.as_str()).collect();
            cols.sort();
            assert_eq!(keys, cols, "#{id}: a cell for every column");
        }
    }

    let mut ids = page.ids.clone();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "element ids are unique");

    // The header names the machine each result was measured on.
    for s in series {
        if let Some(cpu) = s
            .result
            .pointer("/machine/cpu_model")
            .and_then(Value::as_str)
        {
            assert!(
                page.text.contains(cpu),
                "the header does not name the CPU {cpu:?}"
            );
        }
    }
}

fn chart_ids(page: &Page) -> Vec<&str> {
    page.charts_toggled.iter().map(|c| c.id.as_str()).collect()
}

/// The banner is shown exactly when a result is not to be trusted, naming each
/// series that is not.
pub fn banner_matches(page: &Page, series: &[Series]) {
    let untrusted: Vec<(&str, Vec<&str>)> = series
        .iter()
        .map(|s| (s.name, distrust(s.result)))
        .filter(|(_, why)| !why.is_empty())
        .collect();
    match &page.banner {
        None => assert!(
            untrusted.is_empty(),
            "no banner, but these are not to be trusted: {untrusted:?}"
        ),
        Some(text) => {
            assert!(
                !untrusted.is_empty(),
                "a banner over trustworthy results: {text}"
            );
            for (name, why) in &untrusted {
                assert!(
                    text.contains(name),
                    "the banner does not name {name} ({why:?}): {text}"
                );
                if why.contains(&"no response") {
                    assert!(
                        text.contains(&format!("{name}: no response was received")),
                        "the banner does not say {name} received nothing: {text}"
                    );
                }
            }
        }
    }
}

/// Every table row of every series holds exactly the result's numbers.
pub fn tables_match(page: &Page, series: &[Series]) {
    for t in ["table-percentiles", "table-errors", "table-throughput"] {
        let rows: Vec<Option<&str>> = page
            .table(t)
            .rows
            .iter()
            .map(|r| r.series.as_deref())
            .collect();
        let names: Vec<Option<&str>> = series.iter().map(|s| Some(s.name)).collect();
        assert_eq!(rows, names, "#{t}: one row per series, in order");
    }
    for s in series {
        percentiles(page, s);
        errors(page, s);
        throughput(page, s);
        settings(page, s);
        changes(page, s);
        propagation(page, s);
    }
}

fn percentiles(page: &Page, s: &Series) {
    let t = "table-percentiles";
    let lat = |k: &str| opt_ms(s.result, &["latency_ms", "corrected", k]);
    // The percentile columns, then max.
    for k in PERCENTILE_KEYS.iter().filter(|k| **k != "max") {
        same(page, t, s.name, k, &lat(k));
    }
    same(page, t, s.name, "max", &lat("max"));
    same(page, t, s.name, "mean", &lat("mean"));
    let count = u64_at(s.result, &["latency_ms", "corrected", "count"]);
    same(page, t, s.name, "count", &count.to_string());
}

fn errors(page: &Page, s: &Series) {
    let t = "table-errors";
    let mut total = 0;
    for k in ERROR_KINDS {
        let n = u64_at(s.result, &["errors", k]);
        total += n;
        same(page, t, s.name, k, &n.to_string());
    }
    same(page, t, s.name, "total", &total.to_string());
    let codes = at(s.result, &["errors", "status_codes"])
        .as_object()
        .expect("status_codes is an object");
    let codes = if codes.is_empty() {
        "–".to_string()
    } else {
        codes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    same(page, t, s.name, "status_codes", &codes);
    for k in ["completed", "not_sent", "intended"] {
        let n = u64_at(s.result, &["requests", k]);
        same(page, t, s.name, k, &n.to_string());
    }
}

fn throughput(page: &Page, s: &Series) {
    let t = "table-throughput";
    let r = s.result;
    same(
        page,
        t,
        s.name,
        "threads",
        &u64_at(r, &["config", "threads"]).to_string(),
    );
    let conns = u64_at(r, &["config", "connections"]).to_string();
    same(page, t, s.name, "connections", &conns);
    let target = match at(r, &["rate", "target"]).as_f64() {
        Some(x) => format!("{x:.0}"),
        None => "max".to_string(),
    };
    same(page, t, s.name, "rate_target", &target);
    let achieved = format!("{:.1}", f64_at(r, &["rate", "achieved"]));
    same(page, t, s.name, "achieved", &achieved);
    let completed = format!("{:.1}", f64_at(r, &["rate", "completed_per_s"]));
    same(page, t, s.name, "completed_per_s", &completed);
    let p99 = opt_ms(r, &["latency_ms", "corrected", "p99"]);
    same(page, t, s.name, "p99_ms", &p99);
    let cpu = format!("{:.2}", f64_at(r, &["generator", "cpu_s"]));
    same(page, t, s.name, "cpu_s", &cpu);
}

/// The settings table has a column per series and a row per setting.
fn settings(page: &Page, s: &Series) {
    let t = page.table("table-settings");
    let setting = |label: &str| {
        let row = t
            .rows
            .iter()
            .find(|r| r.cells.get("setting").map(String::as_str) == Some(label))
            .unwrap_or_else(|| panic!("#table-settings has no row {label:?}"));
        row.cell(s.name).to_string()
    };
    let r = s.result;
    let url = at(r, &["config", "url"]).as_str().expect("config.url");
    assert_eq!(setting("url"), url, "#table-settings: {}: url", s.name);
    let conns = u64_at(r, &["config", "connections"]).to_string();
    assert_eq!(setting("connections"), conns, "#table-settings: {}", s.name);
    let partial = if at(r, &["partial"]).as_bool() == Some(true) {
        "yes"
    } else {
        "no"
    };
    assert_eq!(setting("partial"), partial, "#table-settings: {}", s.name);
    let started = at(r, &["started_at"]).as_str().expect("started_at");
    assert_eq!(
        setting("started (UTC)"),
        started,
        "#table-settings: {}",
        s.name
    );
}

/// The impact of each change: one row per window of the lab run, in order.
fn changes(page: &Page, s: &Series) {
    let table = page.table("table-changes");
    let rows = table.rows_of(s.name);
    let windows = s
        .result
        .pointer("/lab/windows")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        rows.len(),
        windows.len(),
        "#table-changes: {}: one row per change window",
        s.name
    );
    for (i, (row, w)) in rows.iter().zip(&windows).enumerate() {
        let errs = at(w, &["errors"]).as_object().expect("window errors");
        let total: u64 = errs.values().filter_map(Value::as_u64).sum();
        let kinds = if errs.is_empty() {
            "–".to_string()
        } else {
            errs.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let want = [
            (
                "change",
                at(w, &["change"]).as_str().unwrap_or("").to_string(),
            ),
            ("from_s", format!("{:.1}", f64_at(w, &["from_ms"]) / 1000.0)),
            (
                "until_s",
                format!("{:.1}", f64_at(w, &["until_ms"]) / 1000.0),
            ),
            ("completed", u64_at(w, &["completed"]).to_string()),
            ("errors", total.to_string()),
            ("errors_by_kind", kinds),
            ("p99_ms", ms(f64_at(w, &["p99_ms"]))),
            ("max_ms", ms(f64_at(w, &["max_ms"]))),
        ];
        for (col, v) in want {
            assert_eq!(
                row.cell(col),
                v,
                "#table-changes, {}, window {i}, {col}",
                s.name
            );
        }
    }
}

/// Endpoint propagation: one row per lab series, none for a plain load.
fn propagation(page: &Page, s: &Series) {
    let table = page.table("table-propagation");
    let Some(p) = s.result.pointer("/lab/propagation") else {
        assert!(
            table.rows_of(s.name).is_empty(),
            "#table-propagation has a row for {}, which is not a lab run",
            s.name
        );
        return;
    };
    let row = table.row(s.name);
    for dir in ["added", "removed"] {
        let spread = at(p, &[&format!("{dir}_ms")]);
        let n = u64_at(spread, &["n"]).to_string();
        assert_eq!(row.cell(&format!("{dir}_n")), n, "{}: {dir}_n", s.name);
        for k in ["min", "median", "max"] {
            let want = one_decimal(at(spread, &[k]).as_f64());
            assert_eq!(
                row.cell(&format!("{dir}_{k}")),
                want,
                "{}: {dir}_{k}",
                s.name
            );
        }
    }
    let entries = |dir: &str| at(p, &[dir]).as_array().cloned().unwrap_or_default();
    let never = entries("added")
        .iter()
        .filter(|e| e.get("propagation_ms").is_none_or(Value::is_null))
        .count();
    assert_eq!(row.cell("added_never"), never.to_string(), "{}", s.name);
    let between: u64 = entries("removed")
        .iter()
        .filter_map(|e| e.get("errors_between").and_then(Value::as_u64))
        .sum();
    assert_eq!(
        row.cell("removed_errors"),
        between.to_string(),
        "{}",
        s.name
    );
}

/// Each series is drawn in its own colour (the legend's swatch) on every chart that
/// puts all series together, and on its own latency panel.
pub fn series_drawn(page: &Page, series: &[Series]) {
    assert_eq!(page.legend.len(), series.len());
    let shared = [
        "chart-percentiles",
        "chart-percentiles-uncorrected",
        "chart-latency",
        "chart-throughput",
    ];
    for (i, l) in page.legend.iter().enumerate() {
        assert!(
            l.color.starts_with("rgb"),
            "legend swatch of {}: {:?}",
            l.name,
            l.color
        );
        let drawn_in = |id: &str| {
            let c = page.chart_toggled(id).expect(id);
            c.strokes.contains(&l.color) || c.fills.contains(&l.color)
        };
        for id in shared {
            assert!(
                drawn_in(id),
                "#{id} has no line in {}'s colour {}; strokes {:?}",
                l.name,
                l.color,
                page.chart_toggled(id).map(|c| &c.strokes)
            );
        }
        let own = format!("chart-latency-{}", i + 1);
        assert!(drawn_in(&own), "#{own} is not drawn in {}'s colour", l.name);
    }
    let colors: std::collections::BTreeSet<&str> =
        page.legend.iter().map(|l| l.color.as_str()).collect();
    assert_eq!(colors.len(), series.len(), "each series has its own colour");
}

/// Log latency axes carry enough labels to be read (at least 4: with two, a reader
/// cannot tell a log axis from a linear one), and the settings table fits the page
/// at a laptop's width (1280 CSS pixels, the wrapper's) without scrolling sideways.
pub fn page_is_readable(page: &Page) {
    let unit = |t: &str| {
        let Some((n, u)) = t.rsplit_once(' ') else {
            return false;
        };
        n.parse::<f64>().is_ok() && ["µs", "ms", "s"].contains(&u)
    };
    for c in &page.charts_toggled {
        if !(c.id.starts_with("chart-latency") || c.id.starts_with("chart-percentiles")) {
            continue;
        }
        let labels: Vec<&String> = c.texts.iter().filter(|t| unit(t)).collect();
        // A chart with nothing to draw is a one-line note, without an axis.
        if !labels.is_empty() {
            assert!(
                labels.len() >= 4,
                "#{}: the latency axis has {} labels: {labels:?}",
                c.id,
                labels.len()
            );
        }
    }
    let settings = page.table("table-settings");
    assert!(
        !settings.overflows,
        "#table-settings scrolls sideways at 1280 px"
    );
}

/// Every series has a line of its own on the throughput chart: in its colour, and not
/// drawn exactly where another series' line is (which would hide one of them).
pub fn throughput_lines_distinct(page: &Page) {
    let c = page.chart("chart-throughput").expect("#chart-throughput");
    for l in &page.legend {
        let own: Vec<_> = c.lines.iter().filter(|s| s.color == l.color).collect();
        assert!(
            !own.is_empty(),
            "#chart-throughput has no line in {}'s colour {}",
            l.name,
            l.color
        );
        let hidden = |s: &super::chromium::Stroke| {
            c.lines
                .iter()
                .any(|o| o.color != s.color && (o.x, o.y, o.w, o.h) == (s.x, s.y, s.w, s.h))
        };
        assert!(
            own.iter().any(|s| !hidden(s)),
            "#chart-throughput: every line of {} lies exactly on another series' line: {:?}",
            l.name,
            c.lines
        );
    }
}
