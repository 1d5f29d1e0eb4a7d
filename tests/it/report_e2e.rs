//! The report end to end: real short runs of the built binary (a clean load, loads
//! that fail in every way cheap to cause, an interrupted load, a lab run of two real
//! proxies), `ingressbench report` on what they saved, and headless Chromium opening
//! each page. The assertions read the page itself: every chart drawn with a size, no
//! script error, the numbers in the tables equal to `result.json`, the banner exactly
//! when a result is not to be trusted, one colour per series. Screenshots are kept
//! under `target/e2e-artifacts/`.

use crate::common::backend::Backend;
use crate::common::chromium::{self, Scheme};
use crate::common::expect::{self, total_errors, u64_at, Series};
use crate::common::{read_json, runs, servers, shared, ERROR_KINDS};
use rustix::process::Signal;
use serde_json::Value;
use std::path::Path;
use std::thread;
use std::time::Duration;

/// A built-in backend named `id` with one worker and `extra` flags.
fn backend(id: &str, extra: &[&str]) -> Backend {
    Backend::start(id, &[&["--workers", "1"], extra].concat())
}

/// The checks every page gets.
fn page_matches_results(page: &chromium::Page, series: &[Series]) {
    expect::page_is_sound(page, series);
    expect::tables_match(page, series);
    expect::banner_matches(page, series);
    expect::page_is_readable(page);
}

#[test]
fn a_clean_load_run() {
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("clean");
    let run = tmp.path().join("clean");
    let result = {
        let _turn = shared();
        let b = backend("b-clean", &[]);
        let url = b.url();
        let args = ["-c10", "-R300", "-d3s", "--sample", "0.2", &url];
        runs::load(&run, &args, Duration::from_secs(30)).1
    };
    assert_eq!(total_errors(&result), 0, "the clean run had errors");
    assert!(u64_at(&result, &["requests", "completed"]) >= 800);
    assert!(result.pointer("/samples/t_ms").is_some(), "no samples kept");

    let report = runs::write_report(&[&run], None, tmp.path());
    assert_eq!(
        report,
        run.join("report.html"),
        "one run: the page goes inside it"
    );
    let page = chromium::open(&report, tmp.path(), &art);
    let series = [Series {
        name: "clean",
        result: &result,
    }];
    page_matches_results(&page, &series);
    expect::series_drawn(&page, &series);
    // The sampled requests are dots on the latency panels.
    for id in ["chart-latency", "chart-latency-1"] {
        let dots = page.chart(id).unwrap().shapes.get("circle").copied();
        assert!(
            dots.unwrap_or(0) >= 20,
            "#{id}: sampled requests drawn: {dots:?}"
        );
    }
}

#[test]
fn errors_of_every_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("errors");
    let dir = |n: &str| tmp.path().join(n);
    let body = tmp.path().join("body.bin");
    std::fs::write(&body, vec![b'x'; 256 * 1024]).unwrap();
    let names = [
        "tls-to-plain",
        "503-then-refused",
        "resets",
        "never-accepts",
    ];
    {
        let _turn = shared();
        let b = backend(
            "b-503",
            &["--status", "503", "--delay", "uniform:1ms-100ms"],
        );
        let limit = Duration::from_secs(30);
        // TLS spoken to a plain HTTP server: every handshake fails.
        let https = format!("https://{}/", b.addr);
        // Nothing can succeed in these runs: each exits 1.
        runs::load_exiting(
            &dir(names[0]),
            &["-c5", "-R50", "-d1s", "-k", &https],
            limit,
            1,
        );
        // 503s (some too slow for the timeout), then the backend dies: requests in
        // flight are cut, new connections refused.
        let url = b.url();
        let args = [
            "-c10",
            "-R200",
            "-d3s",
            "--timeout",
            "80ms",
            "--sample",
            "0.2",
            &url,
        ];
        let load = runs::spawn_load(&dir(names[1]), &args);
        thread::sleep(Duration::from_millis(1500));
        b.proc.signal(Signal::KILL);
        let out = load.finish(limit);
        assert_eq!(out.code, Some(1), "{}", out.stderr);
        // Connections reset by the server while the request is written or awaited.
        let r = servers::reset_after_first_read();
        let url = r.url("http");
        let b = body.to_str().unwrap();
        let args = [
            "-c5",
            "-R50",
            "-d1s",
            "--method",
            "POST",
            "--body-file",
            b,
            &url,
        ];
        runs::load_exiting(&dir(names[2]), &args, limit, 1);
        drop(r);
        // A full accept queue: connects time out.
        let never = servers::never_accepts();
        let url = never.url("http");
        let args = [
            "-c10",
            "-R50",
            "-d1s",
            "--connect-timeout",
            "200ms",
            "--timeout",
            "300ms",
            &url,
        ];
        runs::load_exiting(&dir(names[3]), &args, limit, 1);
    }
    let results: Vec<Value> = names
        .iter()
        .map(|n| read_json(&dir(n).join("result.json")))
        .collect();
    // The runs failed the way the test says they did.
    let count = |i: usize, k: &str| u64_at(&results[i], &["errors", k]);
    assert!(
        count(0, "tls") > 0,
        "no tls errors: {:?}",
        results[0]["errors"]
    );
    assert!(
        count(1, "status") > 0,
        "no 503s: {:?}",
        results[1]["errors"]
    );
    assert!(
        count(1, "connect") > 0,
        "no refused: {:?}",
        results[1]["errors"]
    );
    assert!(
        count(3, "connect_timeout") > 0,
        "{:?}",
        results[3]["errors"]
    );
    let seen: Vec<&str> = ERROR_KINDS
        .iter()
        .copied()
        .filter(|k| (0..names.len()).any(|i| count(i, k) > 0))
        .collect();
    for k in ["connect", "connect_timeout", "tls", "status", "timeout"] {
        assert!(seen.contains(&k), "no {k} errors in any run: {seen:?}");
    }
    eprintln!("error kinds provoked: {seen:?}");

    for n in names {
        let _ = std::fs::copy(dir(n).join("result.json"), art.join(format!("{n}.json")));
    }
    let page_path = tmp.path().join("errors.html");
    let runs_given: Vec<_> = names.iter().map(|n| dir(n)).collect();
    let refs: Vec<&Path> = runs_given.iter().map(|p| p.as_path()).collect();
    let report = runs::write_report(&refs, Some(&page_path), tmp.path());
    assert_eq!(report, page_path);
    let page = chromium::open(&report, tmp.path(), &art);
    let series: Vec<Series> = names
        .iter()
        .zip(&results)
        .map(|(n, r)| Series { name: n, result: r })
        .collect();
    page_matches_results(&page, &series);
    // Every kind that occurred is named on the errors-over-time chart.
    let texts = page.chart("chart-errors").unwrap().texts.join(" | ");
    for k in &seen {
        assert!(
            texts.contains(k) || texts.contains(&k.replace('_', " ")),
            "#chart-errors does not name {k}: {texts}"
        );
    }
}

#[test]
fn a_run_without_responses_is_never_an_improvement() {
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("failed");
    let (base, dead) = (tmp.path().join("base"), tmp.path().join("dead"));
    let (base_r, dead_r) = {
        let _turn = shared();
        let b = backend("b-base", &[]);
        let url = b.url();
        let limit = Duration::from_secs(30);
        let base_r = runs::load(&base, &["-c5", "-R100", "-d2s", &url], limit).1;
        let closed = format!("http://{}/", servers::refused());
        let (out, dead_r) = runs::load_exiting(&dead, &["-c5", "-R100", "-d2s", &closed], limit, 1);
        assert!(
            out.stdout.contains("FAILED: no response was received"),
            "{}",
            out.stdout
        );
        (base_r, dead_r)
    };
    assert!(dead_r["latency_ms"]["corrected"]["p99"].is_null());

    // The report: the dead run's latencies are "–", the banner says why.
    let report = runs::write_report(
        &[&base, &dead],
        Some(&tmp.path().join("r.html")),
        tmp.path(),
    );
    let page = chromium::open(&report, tmp.path(), &art);
    let series = [
        Series {
            name: "base",
            result: &base_r,
        },
        Series {
            name: "dead",
            result: &dead_r,
        },
    ];
    page_matches_results(&page, &series);
    expect::throughput_lines_distinct(&page);

    // The comparison: the gate fails, naming why; the page writes µs, and keeps
    // every figure and name on one line.
    let cmp = tmp.path().join("cmp.html");
    let out = crate::common::run(
        &[
            "compare",
            base.to_str().unwrap(),
            dead.to_str().unwrap(),
            "--max-regression",
            "p99=10%,p99.9=50ms,max=1s",
            "--out",
            cmp.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout.contains("the new run failed, no limit can hold"),
        "{}",
        out.stdout
    );
    let _ = std::fs::copy(&cmp, art.join("compare.html"));
    let page = chromium::inspect(&cmp, tmp.path(), Scheme::Light);
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert!(
        page.text.contains("the new run failed, no limit can hold"),
        "{}",
        page.text
    );
    let mut figures = 0;
    for t in &page.tables {
        for r in &t.rows {
            for cell in r.cells.values() {
                let unit = cell.rsplit(|c: char| c.is_ascii_digit() || c == ' ').next();
                assert_ne!(unit, Some("us"), "{}: {cell:?} in wrk units", t.id);
                figures += usize::from(cell.ends_with(" µs") || cell.ends_with(" ms"));
            }
        }
        let broken: Vec<&String> = t
            .wrapped
            .iter()
            .filter(|w| !w.starts_with("the new run failed"))
            .collect();
        assert!(
            broken.is_empty(),
            "{}: cells over two lines: {broken:?}",
            t.id
        );
        assert!(!t.overflows, "{} scrolls sideways at 1280 px", t.id);
    }
    assert!(figures >= 9, "the base's latencies are not on the page");
}

#[test]
fn five_series_at_a_laptops_width() {
    // Five systems run at one rate: their throughput lines coincide, and the settings
    // table has a column each.
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("five");
    let one = tmp.path().join("one");
    let result = {
        let _turn = shared();
        let b = backend("b-five", &[]);
        let url = b.url();
        let args = ["-c5", "-R100", "-d2s", "--sample", "0.2", &url];
        runs::load(&one, &args, Duration::from_secs(30)).1
    };
    let names = [
        "nginx-reload",
        "nginx-lua",
        "haproxy-runtime",
        "caddy-api",
        "envoy-gateway",
    ];
    let dirs: Vec<_> = names.iter().map(|n| tmp.path().join(n)).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
        std::fs::copy(one.join("result.json"), d.join("result.json")).unwrap();
    }
    let refs: Vec<&Path> = dirs.iter().map(|p| p.as_path()).collect();
    let report = runs::write_report(&refs, Some(&tmp.path().join("five.html")), tmp.path());
    let page = chromium::open(&report, tmp.path(), &art);
    let series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: n,
            result: &result,
        })
        .collect();
    page_matches_results(&page, &series);
    expect::series_drawn(&page, &series);
    expect::throughput_lines_distinct(&page);
}

#[test]
fn an_interrupted_run_shows_the_banner() {
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("partial");
    let run = tmp.path().join("partial");
    let (out, result) = {
        let _turn = shared();
        let b = backend("b-partial", &[]);
        let url = b.url();
        let args = ["-c10", "-R300", "-d20s", "--sample", "0.2", &url];
        let load = runs::spawn_load(&run, &args);
        thread::sleep(Duration::from_secs(2));
        load.signal(Signal::INT);
        let out = load.finish(Duration::from_secs(15));
        (out, read_json(&run.join("result.json")))
    };
    assert_eq!(out.code, Some(130), "exit code of an interrupted load");
    assert!(
        out.elapsed < Duration::from_secs(10),
        "took {:?}",
        out.elapsed
    );
    assert_eq!(result["partial"], Value::Bool(true));

    let report = runs::write_report(&[&run], None, tmp.path());
    let page = chromium::open(&report, tmp.path(), &art);
    let series = [Series {
        name: "partial",
        result: &result,
    }];
    page_matches_results(&page, &series);
    let banner = page.banner.as_deref().expect("no banner on a partial run");
    assert!(banner.contains("interrupted"), "banner: {banner}");
}

#[test]
fn several_systems_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let art = chromium::artifacts("systems");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/dynamic-endpoints.yaml");
    let out = tmp.path().join("lab");
    let systems = ["nginx-lua", "caddy-api"];
    {
        let _turn = shared();
        runs::lab_run(
            &scenario,
            &systems.join(","),
            &out,
            Duration::from_secs(150),
        );
    }
    let results: Vec<Value> = systems
        .iter()
        .map(|s| read_json(&out.join(s).join("result.json")))
        .collect();
    let report = runs::write_report(&[&out], None, tmp.path());
    assert_eq!(report, out.join("report.html"));
    let page = chromium::open(&report, tmp.path(), &art);
    let series: Vec<Series> = systems
        .iter()
        .zip(&results)
        .map(|(n, r)| Series { name: n, result: r })
        .collect();
    assert!(page.title.contains("dynamic-endpoints"), "{}", page.title);
    page_matches_results(&page, &series);
    expect::series_drawn(&page, &series);
    for (s, r) in series.iter().zip(&results) {
        let windows = r.pointer("/lab/windows").and_then(Value::as_array);
        assert!(
            windows.is_some_and(|w| w.len() >= 2),
            "{}: the lab run recorded no changes",
            s.name
        );
    }

    // The reader's dark scheme: another background, the same series colours, still
    // no error.
    let dark = chromium::inspect(&report, tmp.path(), Scheme::Dark);
    chromium::screenshot(
        &report,
        &art.join("dark.png"),
        chromium::screenshot_height(&dark),
        tmp.path(),
        Scheme::Dark,
    );
    expect::page_is_sound(&dark, &series);
    assert_ne!(
        dark.background, page.background,
        "the page ignores the dark scheme"
    );
    let colors = |p: &chromium::Page| p.legend.iter().map(|l| l.color.clone()).collect::<Vec<_>>();
    assert_eq!(
        colors(&dark),
        colors(&page),
        "series colours change with the scheme"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("not-a-run");
    std::fs::create_dir(&empty).unwrap();
    let v2 = tmp.path().join("v2");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(
        v2.join("result.json"),
        r#"{"schema": "ingressbench/result/v2", "partial": false}"#,
    )
    .unwrap();
    for (dir, says) in [(&empty, "not a run"), (&v2, "ingressbench/result/v2")] {
        let out = runs::report(tmp.path(), &[dir]);
        assert_eq!(out.code, Some(2), "{}: {}", dir.display(), out.stderr);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
        assert!(
            lines[0].starts_with("ingressbench: ") && lines[0].contains(says),
            "{:?} does not say {says:?}",
            lines[0]
        );
        assert!(!dir.join("report.html").exists(), "a page for bad input");
    }
}

/// The checks above are only worth something if the harness sees what goes wrong: a
/// page with a script error, a console error, a missing image and a remote font.
#[test]
fn the_harness_sees_what_goes_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("broken.html");
    std::fs::write(
        &page,
        r#"<!DOCTYPE html><html><head><title>broken</title>
<script>console.error("logged on purpose"); missingFunction();</script>
<style>@font-face{font-family:x;src:url(https://fonts.example.com/x.woff2)}
body{font-family:x}</style></head>
<body><p>text</p><img src="missing.png"><svg id="chart-empty" width="0" height="0"></svg>
<script>setTimeout(function () { throw new Error("late on purpose"); }, 10);</script>
</body></html>"#,
    )
    .unwrap();
    let p = chromium::inspect(&page, tmp.path(), Scheme::Light);
    let all = format!("{:?} {:?}", p.errors, p.console);
    for what in [
        "missingFunction",
        "logged on purpose",
        "late on purpose",
        "missing.png",
    ] {
        assert!(all.contains(what), "the harness missed {what:?}: {all}");
    }
    let c = p
        .chart("chart-empty")
        .expect("the zero-size chart is listed");
    assert_eq!((c.w, c.h), (0.0, 0.0));
    assert_eq!(p.title, "broken");
}
