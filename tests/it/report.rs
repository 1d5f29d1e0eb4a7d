//! `ingressbench report` end to end: real short runs (a load against the built-in
//! backend, a load against a closed port, a lab run of caddy-api) written into temp
//! folders, then the report drawn from them; the test checks the page (every chart,
//! no outside reference, table numbers equal to result.json), report.md, the CSVs,
//! the .hgrm and PNG files, and that bad input is one line with exit code 2.

use crate::common::backend::Backend;
use crate::common::expect::CHARTS;
use crate::common::proc::{Output, Proc};
use crate::common::{bin, read_json, servers, shared, ERROR_KINDS};
use rustix::process::Signal;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Every command of these tests ends well within this.
const LIMIT: Duration = Duration::from_secs(60);

/// `ingressbench ARGS`, within [`LIMIT`].
fn run(args: &[&str]) -> Output {
    crate::common::run(args, LIMIT)
}

/// A short open-loop load (`rate` req/s for `duration`) writing `json`, sampling half
/// of its requests.
fn load(url: &str, json: &Path, rate: &str, duration: &str) -> Output {
    std::fs::create_dir_all(json.parent().unwrap()).unwrap();
    let json = json.to_str().unwrap();
    run(&[
        "load", "-t1", "-c4", "--quiet", "--sample", "0.5", "-R", rate, "-d", duration, "--json",
        json, url,
    ])
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `<svg id="id" ...>...</svg>` element of the page.
fn svg<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let len = page[start..].find("</svg>").expect("svg closed") + "</svg>".len();
    &page[start..start + len]
}

/// A well-formedness check of SVG markup: every tag closed in order.
fn assert_balanced_xml(x: &str, what: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = x;
    while let Some(i) = rest.find('<') {
        let end = rest[i..]
            .find('>')
            .unwrap_or_else(|| panic!("{what}: open <"))
            + i;
        let tag = &rest[i + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("{what}: stray </{name}>"));
            assert_eq!(open, name.trim(), "{what}: </{name}> closes <{open}>");
        } else if !tag.ends_with('/') && !tag.starts_with('!') && !tag.starts_with('?') {
            let name = tag.split_whitespace().next().unwrap_or("").to_string();
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "{what}: unclosed {stack:?}");
}

/// The text of the cell `col` in the row of `series` of table `id`.
fn cell(page: &str, table: &str, series: &str, col: &str) -> String {
    let start = page
        .find(&format!("<table id=\"{table}\""))
        .unwrap_or_else(|| panic!("no table {table}"));
    let t = &page[start..start + page[start..].find("</table>").unwrap()];
    let row_at = t
        .find(&format!("<tr data-series=\"{series}\">"))
        .unwrap_or_else(|| panic!("{table}: no row {series}"));
    let row = &t[row_at..row_at + t[row_at..].find("</tr>").unwrap()];
    let c = row
        .find(&format!("<td data-col=\"{col}\""))
        .unwrap_or_else(|| panic!("{table}/{series}: no column {col}"));
    let inner = &row[c..];
    let open_end = inner.find('>').unwrap() + 1;
    let close = inner.find("</td>").unwrap();
    // Drop the colour swatch of the first column.
    let v = &inner[open_end..close];
    let v = match v.rfind("</span>") {
        Some(i) => &v[i + "</span>".len()..],
        None => v,
    };
    v.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The page's tables say what each result says.
fn assert_tables_match(page: &str, series: &str, r: &Value) {
    for k in ERROR_KINDS {
        assert_eq!(
            cell(page, "table-errors", series, k),
            r["errors"][k].as_u64().unwrap().to_string(),
            "{series} errors {k}"
        );
    }
    let total: u64 = ERROR_KINDS
        .iter()
        .map(|k| r["errors"][k].as_u64().unwrap())
        .sum();
    assert_eq!(
        cell(page, "table-errors", series, "total"),
        total.to_string()
    );
    for k in ["completed", "intended"] {
        assert_eq!(
            cell(page, "table-errors", series, k),
            r["requests"][k].as_u64().unwrap().to_string()
        );
    }
    for p in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
        let shown = cell(page, "table-percentiles", series, p);
        // No response, no latency: null in the result, "–" on the page.
        let Some(want) = r["latency_ms"]["corrected"][p].as_f64() else {
            assert!(r["latency_ms"]["corrected"][p].is_null(), "{series} {p}");
            assert_eq!(shown, "–", "{series} {p}");
            continue;
        };
        let got: f64 = shown.parse().unwrap();
        assert!((got - want).abs() < 0.0005, "{series} {p}: {got} vs {want}");
    }
    let achieved: f64 = cell(page, "table-throughput", series, "achieved")
        .parse()
        .unwrap();
    assert!((achieved - r["rate"]["achieved"].as_f64().unwrap()).abs() < 0.05);
}

/// No request can leave the page: the only URLs in it are the loaded targets, as text.
fn assert_offline(page: &str, targets: &[String]) {
    let mut rest = page;
    while let Some(i) = rest.find("://") {
        let before = &rest[..i];
        let scheme_at = before
            .rfind(|c: char| !c.is_ascii_alphanumeric())
            .map(|j| j + 1)
            .unwrap_or(0);
        let url_end = rest[i..]
            .find(|c: char| c == '<' || c == '"' || c.is_whitespace())
            .map(|j| i + j)
            .unwrap_or(rest.len());
        let url = &rest[scheme_at..url_end];
        assert!(
            targets.iter().any(|t| t == url),
            "the page refers to {url} (only the targets may appear, as text)"
        );
        assert!(
            !before.ends_with("src=\"") && !before.ends_with("href=\""),
            "{url} is loaded"
        );
        rest = &rest[url_end..];
    }
    for bad in ["<script", "<link", "@import", "url(", "<img", "<iframe"] {
        assert!(!page.contains(bad), "the page has {bad}");
    }
}

#[test]
fn report_of_two_load_runs_side_by_side() {
    let _turn = shared();
    let t = tempfile::tempdir().unwrap();
    let backend = Backend::start("b1", &[]);
    let ok_json = t.path().join("ok").join("result.json");
    let out = load(&format!("http://{}/", backend.addr), &ok_json, "200", "2s");
    assert!(out.success(), "{out:?}");
    // A closed port: every request fails to connect.
    let closed = servers::refused();
    let bad_json = t.path().join("refused.json");
    let out = load(&format!("http://{closed}/"), &bad_json, "50", "2s");
    assert_eq!(out.code, Some(1), "nothing succeeded: {out:?}");
    drop(backend);

    let page_path = t.path().join("cmp.html");
    let out = run(&[
        "report",
        t.path().join("ok").to_str().unwrap(),
        bad_json.to_str().unwrap(),
        "--out",
        page_path.to_str().unwrap(),
        "--png",
    ]);
    let stdout = &out.stdout;
    assert!(out.success(), "{out:?}");
    assert!(
        stdout.contains(&format!("report written to {}", page_path.display())),
        "{stdout}"
    );

    let ok = read_json(&ok_json);
    let bad = read_json(&bad_json);
    assert!(bad["errors"]["connect"].as_u64().unwrap() > 0, "{bad}");
    let page = text(&page_path);
    assert!(page.starts_with("<!DOCTYPE html>"));
    let mut charts: Vec<String> = CHARTS.iter().map(|c| c.to_string()).collect();
    charts.extend(["chart-latency-1".into(), "chart-latency-2".into()]);
    for id in &charts {
        let s = svg(&page, id);
        assert!(s.len() > 500, "{id} is empty");
        assert!(
            s.contains("<polyline") || s.contains("<rect") || s.contains("<text"),
            "{id}"
        );
        assert_balanced_xml(s, id);
        let png = std::fs::read(t.path().join(format!("cmp-{id}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{id}.png");
    }
    // Samples are drawn: dots for the answered, crosses for the refused.
    assert!(svg(&page, "chart-latency-1").contains("<circle"));
    assert_offline(
        &page,
        &[
            ok["config"]["url"].as_str().unwrap().to_string(),
            bad["config"]["url"].as_str().unwrap().to_string(),
        ],
    );
    // Series are named after their runs: the folder, the file.
    assert_tables_match(&page, "ok", &ok);
    assert_tables_match(&page, "refused", &bad);
    // A partial result (as an interrupted run writes it) is flagged in red.
    let mut partial = ok.clone();
    partial["partial"] = Value::Bool(true);
    let partial_json = t.path().join("partial.json");
    std::fs::write(&partial_json, partial.to_string()).unwrap();
    let out = run(&["report", partial_json.to_str().unwrap()]);
    assert!(out.success(), "{out:?}");
    let banner = text(&t.path().join("partial.html"));
    assert!(banner.contains("id=\"banner\""));
    assert!(banner.contains("the run was interrupted"));
    // The run that received nothing says so on the page.
    assert!(
        page.contains("no response was received: "),
        "no banner line for the refused run"
    );

    let md = text(&t.path().join("cmp.md"));
    let connect = bad["errors"]["connect"].as_u64().unwrap();
    assert!(
        md.lines()
            .any(|l| l.starts_with(&format!("| refused | {connect} |"))),
        "{md}"
    );

    let timeline = text(&t.path().join("cmp-timeline.csv"));
    let rows = ok["timeline"].as_array().unwrap().len() + bad["timeline"].as_array().unwrap().len();
    assert_eq!(timeline.lines().count(), rows + 1, "{timeline}");
    assert!(timeline.starts_with("series,t,sent,completed,errors,p50_ms,p99_ms,max_ms"));
    let samples = text(&t.path().join("cmp-samples.csv"));
    let n = |r: &Value| r["samples"]["t_ms"].as_array().map_or(0, |a| a.len());
    assert_eq!(samples.lines().count(), n(&ok) + n(&bad) + 1);
    assert!(samples
        .lines()
        .any(|l| l.starts_with("refused,") && l.contains(",connect,")));
    assert!(samples
        .lines()
        .any(|l| l.starts_with("ok,") && l.ends_with(",b1")));
    for s in ["ok", "refused"] {
        let h = text(&t.path().join(format!("cmp-{s}.hgrm")));
        assert!(h.contains("Percentile") && h.contains("#[Buckets"), "{h}");
    }
}

#[test]
fn a_run_folder_gets_its_report_inside() {
    let _turn = shared();
    let t = tempfile::tempdir().unwrap();
    let backend = Backend::start("b1", &[]);
    let run_dir = t.path().join("run");
    // A folder shaped like a lab run's: one result per system, no lab part.
    for sys in ["first", "second"] {
        let out = load(
            &format!("http://{}/", backend.addr),
            &run_dir.join(sys).join("result.json"),
            "200",
            "1s",
        );
        assert!(out.success(), "{out:?}");
    }
    // `load --report` draws the same page for one run.
    let single = t.path().join("single.html");
    let out = run(&[
        "load",
        "-t1",
        "-c2",
        "-R100",
        "-d1s",
        "--quiet",
        "--report",
        single.to_str().unwrap(),
        &format!("http://{}/", backend.addr),
    ]);
    drop(backend);
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.contains("report written to"));
    assert!(text(&single).contains("<svg id=\"chart-percentiles\""));
    assert!(t.path().join("single.md").is_file());

    let out = run(&["report", run_dir.to_str().unwrap()]);
    assert!(out.success(), "{out:?}");
    let page = text(&run_dir.join("report.html"));
    for id in CHARTS {
        assert_balanced_xml(svg(&page, id), id);
    }
    for sys in ["first", "second"] {
        assert_tables_match(
            &page,
            sys,
            &read_json(&run_dir.join(sys).join("result.json")),
        );
        assert!(run_dir.join(format!("{sys}.hgrm")).is_file());
    }
    for f in ["report.md", "timeline.csv", "samples.csv"] {
        assert!(run_dir.join(f).is_file(), "{f}");
    }
}

#[test]
fn a_lab_run_ends_with_its_report() {
    let _turn = shared();
    let t = tempfile::tempdir().unwrap();
    let scn = t.path().join("s.yaml");
    std::fs::write(
        &scn,
        "name: report-lab\nsystems: [caddy-api]\nbackends:\n  replicas: 2\n  drain_timeout: 1s\n\
         tls:\n  version: \"1.3\"\nload:\n  rate: 200\n  connections: 10\n  duration: 5s\n  sample: 0.5\n\
         changes:\n  - wait: 1500ms\n  - scale: 3\n  - wait: 1500ms\n  - scale: 2\n",
    )
    .unwrap();
    let out_dir = t.path().join("run");
    let mut cmd = bin();
    cmd.arg("run").arg(&scn).arg("--out").arg(&out_dir);
    // Interrupted if it overstays, so that it stops its proxies and backends.
    let out = Proc::spawn_group("run", &mut cmd, t.path())
        .stop_with(Signal::INT, Duration::from_secs(20))
        .finish(Duration::from_secs(120));
    let stdout = &out.stdout;
    assert!(out.success(), "{out:?}");
    let page_path = out_dir.join("report.html");
    assert!(
        stdout.contains(&format!("report written to {}", page_path.display())),
        "{stdout}"
    );
    let r = read_json(&out_dir.join("caddy-api").join("result.json"));
    let page = text(&page_path);
    assert_tables_match(&page, "caddy-api", &r);
    // The changes: marked on the latency chart, one row each in the impact table.
    assert!(svg(&page, "chart-latency-1").contains("scale 2 → 3"));
    let windows = r["lab"]["windows"].as_array().unwrap();
    assert!(!windows.is_empty());
    assert_eq!(
        cell(&page, "table-changes", "caddy-api", "change"),
        windows[0]["change"].as_str().unwrap()
    );
    let added = &r["lab"]["propagation"]["added_ms"];
    assert_eq!(
        cell(&page, "table-propagation", "caddy-api", "added_n"),
        added["n"].to_string()
    );
    if let Some(m) = added["median"].as_f64() {
        assert_eq!(
            cell(&page, "table-propagation", "caddy-api", "added_median"),
            format!("{m:.1}")
        );
    }
    assert!(page.contains("caddy "), "the proxy's version is shown");
    // Re-drawing gives the same tables.
    let again = run(&["report", out_dir.to_str().unwrap()]);
    assert!(again.success(), "{again:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let t = tempfile::tempdir().unwrap();
    let one_line = |o: &Output, want: &str| {
        let err = &o.stderr;
        assert_eq!(o.code, Some(2), "{o:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
        assert!(err.starts_with("ingressbench: report: "), "{err}");
    };
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    one_line(
        &run(&["report", empty.to_str().unwrap()]),
        "not a run: no result.json found",
    );
    let v2 = t.path().join("v2.json");
    std::fs::write(
        &v2,
        r#"{"schema": "ingressbench/result/v2", "anything": 1}"#,
    )
    .unwrap();
    one_line(
        &run(&["report", v2.to_str().unwrap()]),
        "schema \"ingressbench/result/v2\" is not supported",
    );
    one_line(
        &run(&["report", t.path().join("missing").to_str().unwrap()]),
        "missing",
    );
    let not_json = t.path().join("x.json");
    std::fs::write(&not_json, "hello").unwrap();
    one_line(
        &run(&["report", not_json.to_str().unwrap()]),
        "not a result document",
    );
    let o = run(&["report", empty.to_str().unwrap(), empty.to_str().unwrap()]);
    assert_eq!(o.code, Some(2));
}
