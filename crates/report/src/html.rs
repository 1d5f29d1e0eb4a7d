//! The report page: what it shows and in which order (run info, the banner, the
//! legend, then each study's charts and tables), poured into the shared page shell
//! ([`crate::page`]) so it is one self-contained HTML file that reads on a laptop,
//! prints, and follows the reader's light or dark scheme. Every chart and table has a
//! stable id (docs/reports.md) so tests and readers can find them; numbers sit in
//! plain text cells.

use crate::charts::{self, Chart};
use crate::fmt::{fmt_num, MISSING};
use crate::input::ReportInput;
use crate::markup::escape;
use crate::page::{self, Page};
use crate::render::{File, Rendered, Rendering, Report, ReportError};
use crate::tables::{self, Table};
use crate::theme::series_css;
use std::fmt::Write as _;

/// The report page, as a renderer.
pub struct HtmlPage;

impl Report for HtmlPage {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        let page = render(r.input, r.charts()?, &r.generated);
        Ok(Rendered::one(File::Page, page))
    }
}

/// Renders the page. `charts` pairs each chart with its SVG, as drawn; `generated`
/// is the time the page was made, as shown in its footer.
pub fn render(input: &ReportInput, charts: &[(Chart, String)], generated: &str) -> String {
    let tables = tables::all(input);
    let table = |id: &str| tables.iter().find(|t| t.id == id);
    let chart = |id: &str| charts.iter().find(|(c, _)| c.id == id);
    // The charts of `ids` that were drawn, in that order.
    let figures = |h: &mut String, ids: &[&str]| {
        for c in ids.iter().filter_map(|id| chart(id)) {
            figure(h, c, "");
        }
    };
    let title = page_title(input);
    let mut h = String::new();
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

    // Only runs that followed a load plan have one (charts::build leaves it out).
    if let Some(c) = chart("chart-plan") {
        section(
            &mut h,
            "plan",
            "Latency against the load plan's offered rate",
        );
        figure(&mut h, c, "");
        if let Some(t) = table("table-steps") {
            table_html(&mut h, input, t);
        }
    }

    // A search's maximum (load.rates) and a sizing scan (S4): only runs that made
    // one have these charts and tables.
    if chart("chart-rates").is_some() || table("table-maxima").is_some() {
        section(&mut h, "maxima", "Maximum throughput");
        if let Some(c) = chart("chart-rates") {
            figure(&mut h, c, "");
        }
        if let Some(t) = table("table-maxima") {
            table_html(&mut h, input, t);
        }
    }
    if let Some(t) = table("table-sizing") {
        section(&mut h, "sizing", "Throughput per core (sizing)");
        figures(&mut h, &["chart-sizing-rps", "chart-sizing-tps"]);
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

    if let Some(c) = chart("chart-sessions") {
        section(&mut h, "sessions", "Long-lived sessions");
        figure(&mut h, c, "");
        if let Some(t) = table("table-sessions") {
            table_html(&mut h, input, t);
        }
    }

    section(&mut h, "backends", "Backends and endpoint propagation");
    if let Some(c) = chart("chart-backends") {
        figure(&mut h, c, "");
    }
    if let Some(t) = table("table-propagation") {
        table_html(&mut h, input, t);
    }
    if let Some(t) = table("table-routes").filter(|t| !t.rows.is_empty()) {
        section(&mut h, "routes", "Route propagation");
        table_html(&mut h, input, t);
    }
    if let Some(t) = table("table-probes").filter(|t| !t.rows.is_empty()) {
        section(&mut h, "probes", "Behaviour probes");
        table_html(&mut h, input, t);
    }
    // Only runs with a route set (`routes:`) or a request mix have these.
    if let Some(t) = table("table-route-sets") {
        section(&mut h, "route-sets", "Route sets");
        figures(
            &mut h,
            &["chart-route-scale-served", "chart-route-scale-rss"],
        );
        table_html(&mut h, input, t);
    }
    if let Some(t) = table("table-mix") {
        section(&mut h, "mix", "Request mix, group by group");
        table_html(&mut h, input, t);
    }
    if let Some(t) = table("table-resources").filter(|t| !t.rows.is_empty()) {
        section(
            &mut h,
            "resources",
            "CPU and memory of the system under test",
        );
        table_html(&mut h, input, t);
    }

    if let Some(t) = table("table-failover").filter(|t| !t.rows.is_empty()) {
        section(&mut h, "failover", "Backend failover");
        if let Some(c) = chart("chart-failover") {
            figure(&mut h, c, "");
        }
        table_html(&mut h, input, t);
    }

    section(&mut h, "settings", "Load settings and versions");
    if let Some(t) = table("table-settings") {
        table_html(&mut h, input, t);
    }
    let footer = format!(
        "Drawn by ingressbench {} on {} from {}. Latency is measured from when each request should have been sent (see docs/load.md); charts and tables are explained in docs/reports.md.",
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
    page::render(&Page {
        title: &title,
        header: &header(input),
        banner: &banner(input),
        body: &h,
        footer: &footer,
    })
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

/// Under the page's title: the runs' descriptions and what they were measured on.
fn header(input: &ReportInput) -> String {
    let mut h = String::new();
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
            .map(|s| format!("{} s", fmt_num(s.result.duration_s))),
    );
    item("measured", format!("{} per series", durations.join(", ")));
    item("systems", input.series.len().to_string());
    item("machine", machine(input));
    item("load", load_line(input));
    item("versions", versions(input));
    if let Some(c) = cluster(input) {
        item("cluster", c);
    }
    h.push_str("</dl>\n");
    h
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
            match (&c.plan, c.rate) {
                (Some(p), Some(r)) => format!("plan {p} (mean {} req/s)", fmt_num(r)),
                (_, Some(r)) => format!("{} req/s", fmt_num(r)),
                (_, None) => "closed loop (--max)".into(),
            },
            c.connections,
            c.threads,
            if c.threads == 1 { "" } else { "s" },
            fmt_num(c.duration_s),
            fmt_num(c.warmup_s),
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

/// Where each cluster series ran: its context and namespace, and its pods by node,
/// so that a slow series can be traced to a node. `None` when no series ran on a
/// cluster.
fn cluster(input: &ReportInput) -> Option<String> {
    let parts: Vec<String> = input
        .series
        .iter()
        .filter_map(|s| {
            let c = s.result.lab.as_ref()?.cluster.as_ref()?;
            let mut by_node: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
            for p in &c.pods {
                by_node
                    .entry(p.node.as_deref().unwrap_or("unscheduled"))
                    .or_default()
                    .push(&p.name);
            }
            let nodes: Vec<String> = by_node
                .iter()
                .map(|(n, pods)| format!("{n}: {}", pods.join(", ")))
                .collect();
            Some(format!(
                "{}: {}namespace {}, {} pod{} ({})",
                s.name,
                c.context
                    .as_ref()
                    .map(|x| format!("context {x}, "))
                    .unwrap_or_default(),
                c.namespace,
                c.pods.len(),
                if c.pods.len() == 1 { "" } else { "s" },
                nodes.join("; ")
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
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

/// Why the numbers are not to be trusted as they are, per series.
fn banner(input: &ReportInput) -> String {
    let item = |(i, line): (usize, String)| {
        format!(
            "<b>{}</b>: {}",
            escape(&input.series[i].name),
            escape(&line)
        )
    };
    let items: Vec<String> = tables::warnings(input).into_iter().map(item).collect();
    let run: Vec<String> = tables::run_warnings(input).into_iter().map(item).collect();
    page::banner(Some("banner"), "Not to be trusted as is:", &items)
        + &page::banner(Some("warnings"), "Warnings from the run:", &run)
}

fn legend(h: &mut String, input: &ReportInput) {
    h.push_str("<ul id=\"legend\" aria-label=\"series colours\">\n");
    for (i, s) in input.series.iter().enumerate() {
        let _ = writeln!(
            h,
            "<li data-series=\"{}\"><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
            escape(&s.name),
            series_css(i),
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
        // A row's series is a result's; the rows of a sizing scan or a search whose
        // systems wrote no result.json have none to name.
        let series = r.series.filter(|i| *i < input.series.len());
        match series {
            Some(i) => {
                let _ = write!(h, "<tr data-series=\"{}\">", escape(&input.series[i].name));
            }
            None => h.push_str("<tr>"),
        }
        for (c, ((k, _), text)) in t.cols.iter().zip(&r.cells).enumerate() {
            let swatch = match (c, series) {
                (0, Some(i)) => format!(
                    "<span class=\"sw\" style=\"background:{}\"></span>",
                    series_css(i)
                ),
                _ => String::new(),
            };
            let class = if text.parse::<f64>().is_ok() || text == MISSING {
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
        r.requests.intended = 100;
        r.requests.sent = 100;
        r.requests.completed = 97;
        r.requests.failed = 3;
        r.latency_ms.corrected.count = 97;
        r.config.url = "https://127.0.0.1:45153/".into();
        ReportInput {
            runs: vec![Default::default()],
            series: vec![Series {
                name: "a<b>".into(),
                result: r,
                ..Default::default()
            }],
            ..ReportInput::default()
        }
    }

    #[test]
    fn a_run_without_responses_says_so() {
        let mut i = input(false);
        let r = &mut i.series[0].result;
        r.requests.completed = 0;
        r.requests.failed = 100;
        r.errors.read = 100;
        r.latency_ms.corrected = Default::default();
        let page = render(&i, &[], "now");
        assert!(page.contains("id=\"banner\""));
        assert!(page
            .contains("no response was received: 100 of 100 intended requests failed (read 100)"));
        // No latency is no latency, never a perfect 0.
        assert!(page.contains("<td data-col=\"p99\">–</td>"), "{page}");
        assert!(!page.contains("<td data-col=\"p99\">0.000</td>"));
    }

    /// A result's warnings are listed at the top of the page, of `report.md`, of the
    /// terminal summary and of `summary.txt`, apart from the reasons not to trust it.
    #[test]
    fn a_results_warnings_are_listed_at_the_top() {
        let mut i = input(false);
        let w = "kubernetes: namespace ingressbench-x not deleted (run `ingressbench cleanup --platform kubernetes`): etcd timed out";
        i.series[0].result.warnings = vec![w.to_string()];
        let page = render(&i, &[], "now");
        let listed = page
            .find("id=\"warnings\"")
            .expect("a list of the run's warnings");
        assert!(listed < page.find("<h2").unwrap(), "at the top");
        assert!(page.contains(&format!("<li><b>a&lt;b&gt;</b>: {}</li>", escape(w))));
        assert!(
            !page.contains("id=\"banner\""),
            "not a reason to distrust the figures"
        );
        assert!(crate::markdown::render(&i).contains(&format!("> - **a<b>**: {w}")));
        let r = &i.series[0].result;
        let text = crate::text::summary(r, false);
        assert_eq!(text.lines().nth(2), Some(format!("WARNING: {w}").as_str()));
        let side = crate::summary::comparison("s", &ReportInput::single(&r.target, r.clone()));
        let at = side.find(&format!("WARNING: {}: {w}", r.target)).unwrap();
        assert!(at < side.find("Latency").unwrap(), "{side}");
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

    /// The tables of a load plan, a search and a sizing scan are on the page, each in
    /// its own section, and only when the run made one.
    #[test]
    fn plan_search_and_sizing_tables_have_their_sections() {
        let plain = render(&input(false), &[], "now");
        for id in ["table-steps", "table-maxima", "table-sizing"] {
            assert!(!plain.contains(&format!("<table id=\"{id}\"")), "{id}");
        }
        let mut i = input(false);
        i.series[0].result.steps = vec![results::StepResult {
            plan: "1000:5s".into(),
            offered: 1000.0,
            ..Default::default()
        }];
        i.searches = vec![crate::input::Searched {
            name: "a".into(),
            run: 0,
            search: results::search::SearchResult {
                max_rate: Some(900.0),
                ..Default::default()
            },
        }];
        i.sizings = vec![crate::input::Sized {
            name: "a".into(),
            ..Default::default()
        }];
        let charts = crate::charts::build(&i)
            .into_iter()
            .map(|c| (c, "<svg></svg>".to_string()))
            .collect::<Vec<_>>();
        let page = render(&i, &charts, "now");
        // A sizing scan's rows name no result (its systems write none): the page
        // renders them without a series.
        let mut only_scan = ReportInput {
            sizings: i.sizings.clone(),
            ..Default::default()
        };
        only_scan.sizings[0].sizing.rows = vec![results::sizing::SizingRow::default()];
        let scan_page = render(&only_scan, &[], "now");
        assert!(scan_page.contains("<table id=\"table-sizing\""));
        for id in [
            "table-maxima",
            "table-sizing",
            "id=\"fig-plan\"",
            "id=\"fig-rates\"",
        ] {
            let id = if id.starts_with("id=") {
                id.to_string()
            } else {
                format!("<table id=\"{id}\"")
            };
            assert!(page.contains(&id), "{id}");
        }
        assert!(page.contains("<table id=\"table-steps\""));
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

    #[test]
    fn a_cluster_series_says_where_its_pods_ran() {
        let mut i = input(false);
        assert_eq!(cluster(&i), None, "a local run has no cluster line");
        let pod = |name: &str, node: Option<&str>| results::ClusterPod {
            name: name.into(),
            node: node.map(Into::into),
            ip: None,
        };
        i.series[0].result.lab = Some(results::LabInfo {
            cluster: Some(results::ClusterInfo {
                context: Some("staging".into()),
                namespace: "ingressbench-x".into(),
                pods: vec![
                    pod("p1", Some("n1")),
                    pod("p2", Some("n2")),
                    pod("p3", Some("n1")),
                ],
            }),
            ..Default::default()
        });
        assert_eq!(
            cluster(&i).unwrap(),
            "a<b>: context staging, namespace ingressbench-x, 3 pods (n1: p1, p3; n2: p2)"
        );
        let page = render(&i, &[], "now");
        assert!(page.contains("n1: p1, p3"), "shown on the page, escaped");
    }
}
