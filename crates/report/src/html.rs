//! The report page: one self-contained HTML file (inline CSS, inline SVG, no script,
//! no request leaves it) that reads on a laptop, prints, and follows the reader's
//! light or dark scheme. Every chart and table has a stable id (docs/reports.md) so
//! tests and readers can find them; numbers sit in plain text cells.

use super::charts::{self, Chart};
use super::input::ReportInput;
use super::tables::{self, Table};
use std::fmt::Write as _;

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const CSS: &str = r##"
:root{--bg:#ffffff;--fg:#1d2026;--muted:#5d6470;--rule:#d8dbe0;--head:#f3f4f6;
--warn-bg:#fdecec;--warn-fg:#8a1414;--warn-edge:#e15759;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#15171b;--fg:#e4e6ea;--muted:#a1a8b3;
--rule:#353a43;--head:#1f232a;--warn-bg:#3a1518;--warn-fg:#ffc2c2;--warn-edge:#e15759}}
*{box-sizing:border-box}
html{background:var(--bg);color:var(--fg)}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;
max-width:1120px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:1.6em;margin:0 0 4px}
h2{font-size:1.25em;margin:36px 0 8px;padding-top:8px;border-top:1px solid var(--rule)}
h3{font-size:1.05em;margin:18px 0 4px}
p,li,dd{max-width:80ch}
.sub,.note,figcaption{color:var(--muted)}
.note,figcaption{font-size:.9em}
dl.info{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0}
dl.info dt{color:var(--muted)}
dl.info dd{margin:0}
.banner{background:var(--warn-bg);color:var(--warn-fg);border:2px solid var(--warn-edge);
border-radius:6px;padding:10px 16px;margin:16px 0}
.banner strong{display:block;font-size:1.1em}
.banner ul{margin:6px 0 0;padding-left:20px}
#legend{list-style:none;padding:0;margin:12px 0;display:flex;flex-wrap:wrap;gap:6px 18px}
.sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:6px;
vertical-align:-1px}
figure{margin:12px 0 20px;break-inside:avoid}
svg.chart{display:block;width:100%;height:auto;color:var(--fg)}
svg.chart [fill="#FEFEFE"]{fill:var(--bg)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.92em;margin:6px 0 4px}
th,td{padding:3px 9px;border-bottom:1px solid var(--rule);text-align:right;white-space:nowrap}
th{background:var(--head);font-weight:600;white-space:normal;vertical-align:bottom}
th:first-child,td:first-child{text-align:left}
td.text{text-align:left;white-space:normal}
.toggle{display:inline-flex;align-items:center;gap:6px;cursor:pointer;margin:4px 0;
color:var(--muted)}
.uncorrected{display:none}
#toggle-uncorrected:checked~.uncorrected{display:block}
footer{margin-top:40px;color:var(--muted);font-size:.85em}
@media print{
:root{--bg:#fff;--fg:#000;--muted:#333;--rule:#bbb;--head:#eee;--warn-bg:#fff;--warn-fg:#900}
body{max-width:none;padding:0;font-size:11pt}
h2,h3,.note{break-after:avoid}
table,figure,.banner{break-inside:avoid}
.toggle,#toggle-uncorrected{display:none}
.scroll{overflow:visible}
}
"##;

/// Renders the page. `charts` pairs each chart with its SVG, as drawn; `generated`
/// is the time the page was made, as shown in its footer.
pub fn render(input: &ReportInput, charts: &[(Chart, String)], generated: &str) -> String {
    let tables = tables::all(input);
    let table = |id: &str| tables.iter().find(|t| t.id == id);
    let chart = |id: &str| charts.iter().find(|(c, _)| c.id == id);
    let mut h = String::new();
    let title = page_title(input);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"generator\" content=\"ingressbench {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&title)
    );
    header(&mut h, input, &title);
    banner(&mut h, input);
    legend(&mut h, input);

    section(&mut h, "percentiles", "Latency percentile distribution");
    h.push_str("<input type=\"checkbox\" id=\"toggle-uncorrected\">\n<label class=\"toggle\" for=\"toggle-uncorrected\">show the uncorrected latency too (from the actual send time)</label>\n");
    if let Some(c) = chart("chart-percentiles") {
        figure(&mut h, c, "");
    }
    if let Some(c) = chart("chart-percentiles-uncorrected") {
        figure(&mut h, c, "uncorrected");
    }
    if let Some(t) = table("table-percentiles") {
        table_html(&mut h, input, t);
    }

    section(&mut h, "latency", "Latency over time");
    for (c, svg) in charts
        .iter()
        .filter(|(c, _)| c.id.starts_with("chart-latency"))
    {
        if c.id != "chart-latency" {
            let _ = writeln!(h, "<h3>{}</h3>", escape(&c.title));
        }
        figure(&mut h, &(c.clone(), svg.clone()), "");
    }
    if let Some(t) = table("table-changes") {
        table_html(&mut h, input, t);
    }

    section(&mut h, "throughput", "Throughput");
    if let Some(c) = chart("chart-throughput") {
        figure(&mut h, c, "");
    }
    if let Some(t) = table("table-throughput") {
        table_html(&mut h, input, t);
    }

    section(&mut h, "errors", "Errors");
    if let Some(c) = chart("chart-errors") {
        figure(&mut h, c, "");
    }
    if let Some(t) = table("table-errors") {
        table_html(&mut h, input, t);
    }

    section(&mut h, "backends", "Backends and endpoint propagation");
    if let Some(c) = chart("chart-backends") {
        figure(&mut h, c, "");
    }
    if let Some(t) = table("table-propagation") {
        table_html(&mut h, input, t);
    }

    section(&mut h, "settings", "Load settings and versions");
    if let Some(t) = table("table-settings") {
        table_html(&mut h, input, t);
    }
    let _ = write!(
        h,
        "<footer>Drawn by ingressbench {} on {} from {}. Latency is measured from when each request should have been sent (see docs/load.md); charts and tables are explained in docs/reports.md.</footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(generated),
        escape(
            &input
                .runs
                .iter()
                .map(|r| r.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    h
}

/// "ingressbench report: <scenario>" (or the runs' names without a scenario).
pub fn page_title(input: &ReportInput) -> String {
    let scenarios = input.scenarios();
    let what = if scenarios.is_empty() {
        input
            .runs
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        scenarios.join(", ")
    };
    format!("ingressbench report: {what}")
}

fn section(h: &mut String, id: &str, title: &str) {
    let _ = writeln!(h, "<h2 id=\"{id}\">{}</h2>", escape(title));
}

fn header(h: &mut String, input: &ReportInput, title: &str) {
    let _ = writeln!(h, "<header>\n<h1>{}</h1>", escape(title));
    for r in &input.runs {
        if let Some(d) = &r.description {
            let _ = writeln!(h, "<p class=\"sub\">{}</p>", escape(d));
        }
    }
    h.push_str("<dl class=\"info\" id=\"run-info\">\n");
    let mut item = |k: &str, v: String| {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    let scen = input.scenarios();
    item(
        "scenario",
        if scen.is_empty() {
            "none (a single load run)".into()
        } else {
            scen.join(", ")
        },
    );
    item(
        if input.runs.len() > 1 { "runs" } else { "run" },
        input
            .runs
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
            .join(", "),
    );
    let mut starts: Vec<&str> = input
        .series
        .iter()
        .map(|s| s.result.started_at.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    starts.sort();
    item(
        "date",
        match (starts.first(), starts.last()) {
            (Some(a), Some(b)) if a != b => {
                format!("{a} to {b} (UTC, start of each measured window)")
            }
            (Some(a), _) => format!("{a} (UTC)"),
            _ => "not recorded".into(),
        },
    );
    let durations: Vec<String> = dedup(
        input
            .series
            .iter()
            .map(|s| format!("{} s", charts::fmt_num(s.result.duration_s))),
    );
    item("measured", format!("{} per series", durations.join(", ")));
    item("systems", input.series.len().to_string());
    item("machine", machine(input));
    item("load", load_line(input));
    item("versions", versions(input));
    h.push_str("</dl>\n</header>\n");
}

fn dedup(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in it {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

/// The machine the results came from, as each result records it; "not recorded"
/// for results from before it was: the report never guesses it from the machine it
/// is drawn on.
fn machine(input: &ReportInput) -> String {
    let found = dedup(input.series.iter().filter_map(|s| {
        let m = s.result.machine.as_ref()?;
        let mut parts = Vec::new();
        if !m.cpu_model.is_empty() {
            parts.push(m.cpu_model.clone());
        }
        if m.cores > 0 {
            parts.push(format!("{} cores", m.cores));
        }
        if !m.kernel.is_empty() {
            parts.push(format!("kernel {}", m.kernel));
        }
        if !m.hostname.is_empty() {
            parts.push(format!("host {}", m.hostname));
        }
        Some(parts.join(", "))
    }));
    let missing = input
        .series
        .iter()
        .filter(|s| s.result.machine.is_none())
        .count();
    match (found.is_empty(), missing) {
        (true, _) => "not recorded in these results".into(),
        (false, 0) => found.join(" | "),
        (false, n) => format!("{} (not recorded for {n} series)", found.join(" | ")),
    }
}

fn load_line(input: &ReportInput) -> String {
    dedup(input.series.iter().map(|s| {
        let c = &s.result.config;
        format!(
            "{} over {} connections, {} thread{}, {} s (+{} s warm-up), schedule {}{}{}",
            c.rate
                .map(|r| format!("{} req/s", charts::fmt_num(r)))
                .unwrap_or_else(|| "closed loop (--max)".into()),
            c.connections,
            c.threads,
            if c.threads == 1 { "" } else { "s" },
            charts::fmt_num(c.duration_s),
            charts::fmt_num(c.warmup_s),
            c.schedule,
            c.tls_version
                .as_ref()
                .map(|v| format!(", TLS {v}"))
                .unwrap_or_default(),
            if c.new_connection {
                ", a new connection per request"
            } else {
                ""
            }
        )
    }))
    .join(" | ")
}

fn versions(input: &ReportInput) -> String {
    let mut parts = Vec::new();
    let run_version = dedup(input.series.iter().filter_map(|s| {
        Some(s.result.ingressbench_version.clone())
            .filter(|v| !v.is_empty())
            .or_else(|| s.result.lab.as_ref()?.versions.get("ingressbench").cloned())
    }));
    parts.push(format!(
        "ingressbench {} (this report); the run's: {}",
        env!("CARGO_PKG_VERSION"),
        if run_version.is_empty() {
            "not recorded".to_string()
        } else {
            run_version.join(", ")
        }
    ));
    for s in &input.series {
        if let Some(l) = &s.result.lab {
            let v: Vec<String> = l
                .versions
                .iter()
                .filter(|(k, _)| k.as_str() != "ingressbench")
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            if !v.is_empty() {
                parts.push(format!("{}: {}", s.name, v.join(", ")));
            }
        }
    }
    parts.join(" · ")
}

fn banner(h: &mut String, input: &ReportInput) {
    let w = tables::warnings(input);
    if w.is_empty() {
        return;
    }
    h.push_str("<div class=\"banner\" id=\"banner\" role=\"alert\">\n<strong>Not to be trusted as is:</strong>\n<ul>\n");
    for (i, line) in w {
        let _ = writeln!(
            h,
            "<li><b>{}</b>: {}</li>",
            escape(&input.series[i].name),
            escape(&line)
        );
    }
    h.push_str("</ul>\n</div>\n");
}

fn legend(h: &mut String, input: &ReportInput) {
    h.push_str("<ul id=\"legend\" aria-label=\"series colours\">\n");
    for (i, s) in input.series.iter().enumerate() {
        let _ = writeln!(
            h,
            "<li data-series=\"{}\"><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
            escape(&s.name),
            charts::series_css(i),
            escape(&s.name)
        );
    }
    h.push_str("</ul>\n");
}

fn figure(h: &mut String, (c, svg): &(Chart, String), class: &str) {
    let _ = writeln!(
        h,
        "<figure id=\"fig-{}\"{}>\n{}\n<figcaption>{}</figcaption>\n</figure>",
        c.id.trim_start_matches("chart-"),
        if class.is_empty() {
            String::new()
        } else {
            format!(" class=\"{class}\"")
        },
        charts::svg_for_page(svg, &c.id, &c.title).trim_end(),
        escape(&c.caption)
    );
}

/// A table as HTML: `id` on the table, `data-col` on every cell, `data-series` on
/// every row of a series.
pub fn table_html(h: &mut String, input: &ReportInput, t: &Table) {
    let _ = writeln!(h, "<h3>{}</h3>", escape(t.title));
    if !t.note.is_empty() {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(&t.note));
    }
    let _ = write!(
        h,
        "<div class=\"scroll\"><table id=\"{}\">\n<thead><tr>",
        t.id
    );
    for (k, head) in &t.cols {
        let _ = write!(h, "<th data-col=\"{}\">{}</th>", escape(k), escape(head));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    if t.rows.is_empty() {
        let _ = writeln!(
            h,
            "<tr class=\"empty\"><td class=\"text\" colspan=\"{}\">none in these results</td></tr>",
            t.cols.len()
        );
    }
    for r in &t.rows {
        match r.series {
            Some(i) => {
                let _ = write!(h, "<tr data-series=\"{}\">", escape(&input.series[i].name));
            }
            None => h.push_str("<tr>"),
        }
        for (c, ((k, _), text)) in t.cols.iter().zip(&r.cells).enumerate() {
            let swatch = match (c, r.series) {
                (0, Some(i)) => format!(
                    "<span class=\"sw\" style=\"background:{}\"></span>",
                    charts::series_css(i)
                ),
                _ => String::new(),
            };
            let class = if text.parse::<f64>().is_ok() || text == "–" {
                ""
            } else if c > 0 {
                " class=\"text\""
            } else {
                ""
            };
            let _ = write!(
                h,
                "<td data-col=\"{}\"{class}>{swatch}{}</td>",
                escape(k),
                escape(text)
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::RunResult;

    fn input(partial: bool) -> ReportInput {
        let mut r = RunResult {
            partial,
            started_at: "2026-11-22T03:59:21.573Z".into(),
            duration_s: 16.0,
            ..Default::default()
        };
        r.errors.read = 3;
        r.config.url = "https://127.0.0.1:45153/".into();
        ReportInput {
            runs: vec![Default::default()],
            series: vec![Series {
                name: "a<b>".into(),
                result: r,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn escapes() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn a_page_without_charts_still_has_its_tables_and_banner() {
        let page = render(&input(true), &[], "now");
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("id=\"banner\""));
        assert!(page.contains("the run was interrupted"));
        assert!(page.contains("a&lt;b&gt;"), "series names are escaped");
        assert!(page.contains("<td data-col=\"read\">3</td>"));
        assert!(page.contains("not recorded"), "machine");
        assert!(!render(&input(false), &[], "now").contains("id=\"banner\""));
        for id in [
            "table-percentiles",
            "table-errors",
            "table-changes",
            "table-propagation",
            "table-throughput",
            "table-settings",
        ] {
            assert!(page.contains(&format!("<table id=\"{id}\"")), "{id}");
        }
    }

    #[test]
    fn machine_info_is_shown_when_a_result_has_it() {
        let mut i = input(false);
        assert_eq!(machine(&i), "not recorded in these results");
        i.series[0].result.machine = Some(results::Machine {
            cpu_model: "AMD EPYC".into(),
            cores: 2,
            kernel: "6.1".into(),
            hostname: String::new(),
        });
        assert_eq!(machine(&i), "AMD EPYC, 2 cores, kernel 6.1");
    }
}
