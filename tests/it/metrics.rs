//! `--metrics-listen`: the live metrics of a load and of a scenario run, scraped while
//! the run goes on and read by Prometheus' own code: `promtool check metrics` for
//! the Prometheus text, and a real Prometheus server that scrapes the endpoint (and
//! so negotiates OpenMetrics) for the other. Everything stays on 127.0.0.1.

use crate::common::backend::Backend;
use crate::common::proc::{tail, Proc};
use crate::common::scenario_run::start_with;
use crate::common::{bin, exclusive, read_json, shared};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0";

/// One answer of the endpoint.
struct Scrape {
    at: Instant,
    status: String,
    content_type: String,
    body: String,
}

impl Scrape {
    /// The value of the sample written exactly `series` (name and labels).
    fn value(&self, series: &str) -> Option<f64> {
        self.body.lines().find_map(|l| {
            l.strip_prefix(series)
                .and_then(|v| v.strip_prefix(' '))
                .map(|v| v.parse().unwrap_or_else(|_| panic!("not a number: {l}")))
        })
    }

    fn must(&self, series: &str) -> f64 {
        self.value(series)
            .unwrap_or_else(|| panic!("no {series} in:\n{}", self.body))
    }
}

/// `GET path` on `addr` with an `Accept` header when given; `None` when nothing
/// listens or the exchange fails.
fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Option<Scrape> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .ok()?;
    let mut raw = String::new();
    c.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.lines().next()?.to_string();
    let content_type = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map_or(String::new(), |(_, v)| v.trim().to_string());
    Some(Scrape {
        at: Instant::now(),
        status,
        content_type,
        body: body.to_string(),
    })
}

/// The address the run announced on stderr (`ingressbench: metrics at
/// http://ADDR/metrics`), within 20 s.
fn announced(p: &mut Proc) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let err = p.stderr_so_far();
        if let Some(rest) = err.split("metrics at http://").nth(1) {
            let addr = rest.split("/metrics").next().unwrap();
            return addr
                .parse()
                .unwrap_or_else(|_| panic!("bad address in: {err}"));
        }
        assert!(p.alive(), "exited before serving metrics: {err}");
        assert!(
            Instant::now() < deadline,
            "no metrics address after 20 s: {err}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `promtool check metrics` (Prometheus' own parser and linter) on `text`: it must
/// take it without a complaint.
fn promtool_accepts(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {}: {said}\n{text}",
        out.status
    );
}

/// Scrapes `addr` every 250 ms, in both formats by turns, while `p` runs (at most
/// `limit`); the answers in order.
fn scrape_while_running(p: &mut Proc, addr: SocketAddr, limit: Duration) -> Vec<Scrape> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut open = false;
    while p.alive() && Instant::now() < deadline {
        if let Some(s) = get(addr, "/metrics", open.then_some(OPENMETRICS)) {
            got.push(s);
        }
        open = !open;
        std::thread::sleep(Duration::from_millis(250));
    }
    got
}

fn split_formats(all: &[Scrape]) -> (Vec<&Scrape>, Vec<&Scrape>) {
    let ok: Vec<&Scrape> = all.iter().filter(|s| s.status.contains(" 200 ")).collect();
    assert_eq!(ok.len(), all.len(), "every scrape is answered 200");
    ok.into_iter()
        .partition(|s| s.content_type.starts_with("text/plain"))
}

#[test]
fn a_load_serves_live_metrics_that_promtool_accepts() {
    let _alone = exclusive();
    let backend = Backend::start("b1", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = bin();
    cmd.args(["load", "-R", "200", "-d", "4s", "-c", "4", "-t", "1"])
        .args(["--metrics-listen", "127.0.0.1:0", "--json"])
        .arg(&json)
        .arg(backend.url());
    let mut p = Proc::spawn("load", &mut cmd, dir.path());
    let addr = announced(&mut p);
    assert!(addr.ip().is_loopback());
    let scrapes = scrape_while_running(&mut p, addr, Duration::from_secs(20));
    let out = p.finish(Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // Closed with the run.
    assert!(
        get(addr, "/metrics", None).is_none(),
        "{addr} still answers"
    );

    let (plain, open) = split_formats(&scrapes);
    assert!(
        plain.len() >= 3 && open.len() >= 3,
        "{} scrapes",
        scrapes.len()
    );
    for s in &plain {
        assert_eq!(s.content_type, "text/plain; version=0.0.4; charset=utf-8");
    }
    promtool_accepts(&plain.last().unwrap().body);
    promtool_accepts(&plain[0].body);
    for s in &open {
        assert_eq!(
            s.content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(s.body.ends_with("\n# EOF\n"), "{}", s.body);
        assert!(s
            .body
            .contains("# TYPE ingressbench_requests_sent counter\n"));
        assert!(s.body.contains("# TYPE ingressbench_run info\n"));
    }
    let info = format!(
        "ingressbench_run_info{{command=\"load\",target=\"{}\"}}",
        backend.url()
    );
    assert_eq!(plain[0].must(&info), 1.0);

    // The counters grow while the load runs, at the rate asked for.
    let sent = "ingressbench_requests_sent_total";
    let measured: Vec<&&Scrape> = plain
        .iter()
        .filter(|s| s.must("ingressbench_elapsed_seconds") >= 1.0)
        .collect();
    let (first, last) = (measured[0], measured[measured.len() - 1]);
    let (e0, e1) = (
        first.must("ingressbench_elapsed_seconds"),
        last.must("ingressbench_elapsed_seconds"),
    );
    assert!(e1 > e0, "elapsed {e0} -> {e1}");
    assert!(last.must(sent) > first.must(sent));
    assert!(last.at > first.at);
    for s in &measured {
        let (n, e) = (s.must(sent), s.must("ingressbench_elapsed_seconds"));
        assert!(
            (n - 200.0 * e).abs() <= 0.1 * 200.0 * e + 2.0,
            "{n} sent in {e} s at 200/s:\n{}",
            s.body
        );
        assert!(s.must("ingressbench_requests_total{outcome=\"ok\"}") <= n);
        assert_eq!(s.must("ingressbench_target_requests_per_second"), 200.0);
        let achieved = s.must("ingressbench_achieved_requests_per_second");
        assert!((180.0..=220.0).contains(&achieved), "{achieved}/s");
        let p99 = s.must("ingressbench_latency_seconds{percentile=\"p99\"}");
        let max = s.must("ingressbench_latency_seconds{percentile=\"max\"}");
        assert!(p99 > 0.0 && p99 <= max && max < 1.0, "p99 {p99} max {max}");
        assert!(s.must("ingressbench_generator_lag_max_seconds") >= 0.0);
    }
    // What was served is what the run saved, up to the second the last scrape saw.
    let r = read_json(&json);
    let total = r["requests"]["sent"].as_u64().unwrap() as f64;
    assert!(last.must(sent) <= total, "{} > {total}", last.must(sent));
    let timeline = r["timeline"].as_array().unwrap();
    let upto: f64 = timeline[..e1 as usize]
        .iter()
        .map(|e| e["sent"].as_f64().unwrap())
        .sum();
    assert_eq!(last.must(sent), upto);
    assert!(timeline.iter().all(|e| e["lag_max_ms"].is_number()));
}

#[test]
fn a_port_in_use_is_bad_input_before_any_load() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let t = Instant::now();
    let out = crate::common::run(
        &[
            "load",
            "-R",
            "10",
            "-d",
            "30s",
            "--metrics-listen",
            &addr,
            "http://127.0.0.1:1/",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr,
        format!("ingressbench: --metrics-listen {addr}: Address already in use (os error 98)\n")
    );
    assert!(t.elapsed() < Duration::from_secs(5), "the load ran first");
    let out = crate::common::run(
        &[
            "load",
            "-R",
            "10",
            "--generators",
            "2",
            "--metrics-listen",
            "127.0.0.1:0",
            "http://127.0.0.1:1/",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--metrics-listen needs a single generator"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_scenario_run_labels_its_metrics_with_the_system_and_the_change() {
    let _turn = shared();
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("s.yaml");
    std::fs::write(
        &scn,
        "name: t\nsystems: [nginx-reload]\nbackends:\n  replicas: 2\n  drain_timeout: 1s\n\
         load:\n  rate: 100\n  connections: 4\n  duration: 6s\n\
         changes:\n  - wait: 2s\n  - scale: 3\n",
    )
    .unwrap();
    let mut p = start_with(
        &scn,
        &dir.path().join("out"),
        &["--metrics-listen", "127.0.0.1:0"],
    );
    let addr = announced(&mut p);
    let scrapes = scrape_while_running(&mut p, addr, Duration::from_secs(90));
    let out = p.finish(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", tail(&out.stderr, 30));
    let (plain, open) = split_formats(&scrapes);
    assert!(!open.is_empty());
    let sys = "system=\"nginx-reload\"";
    let during: Vec<&&Scrape> = plain.iter().filter(|s| s.body.contains(sys)).collect();
    assert!(
        during.len() >= 4,
        "{} scrapes during the load",
        during.len()
    );
    for s in &during {
        promtool_accepts(&s.body);
        let info = s
            .body
            .lines()
            .find(|l| l.starts_with("ingressbench_run_info{"))
            .unwrap();
        assert!(
            info.starts_with(&format!(
                "ingressbench_run_info{{command=\"run\",scenario=\"t\",{sys},target=\"http"
            )),
            "{info}"
        );
    }
    let changed = format!("ingressbench_step{{{sys},change=\"scale 2 -> 3\"}}");
    let after: Vec<&&&Scrape> = during
        .iter()
        .filter(|s| s.value(&changed).is_some())
        .collect();
    assert!(
        !after.is_empty(),
        "the change never showed:\n{}",
        during.last().unwrap().body
    );
    assert_eq!(after[0].must(&changed), 1.0);
    let before = format!("ingressbench_step{{{sys},change=\"\"}}");
    assert_eq!(during[0].must(&before), 0.0);
    let sent = format!("ingressbench_requests_sent_total{{{sys}}}");
    let last = during.last().unwrap();
    assert!(last.must(&sent) > during[0].must(&sent));
    let r = read_json(&dir.path().join("out/nginx-reload/result.json"));
    assert!(last.must(&sent) <= r["requests"]["sent"].as_f64().unwrap());
}

/// A real Prometheus server scraping the endpoint of a load each second: it asks for
/// OpenMetrics first, so its metadata (OpenMetrics names a counter's family without
/// `_total`, and has `info`) and its samples prove the negotiation and the text.
#[test]
fn prometheus_scrapes_a_load_in_openmetrics() {
    let _turn = shared();
    let backend = Backend::start("b1", &[]);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = bin();
    cmd.args(["load", "-R", "100", "-d", "12s", "-c", "2", "-t", "1"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .arg(backend.url());
    let mut load = Proc::spawn("load", &mut cmd, dir.path());
    let target = announced(&mut load);
    let web = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: ingressbench\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"));
    let mut prom = Proc::spawn("prometheus", &mut cmd, dir.path());
    let api = |path: &str| -> Option<Value> {
        let s = get(web, path, None)?;
        s.status
            .contains(" 200 ")
            .then(|| serde_json::from_str(&s.body).ok())
            .flatten()
    };
    // Until it has scraped the counters twice, within the load's 12 s.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut samples = BTreeSet::new();
    while Instant::now() < deadline {
        assert!(prom.alive(), "prometheus exited: {}", prom.stderr_so_far());
        let q = api("/api/v1/query?query=ingressbench_requests_sent_total");
        if let Some(v) = q
            .as_ref()
            .and_then(|q| q["data"]["result"][0]["value"][1].as_str())
        {
            let n: f64 = v.parse().unwrap();
            samples.insert(n as u64);
            if samples.len() >= 2 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        samples.len() >= 2 && *samples.last().unwrap() > 0,
        "prometheus did not ingest the counter as it grew: {samples:?}\n{}",
        tail(&prom.stderr_so_far(), 20)
    );
    let targets = api("/api/v1/targets").unwrap();
    let t = &targets["data"]["activeTargets"][0];
    assert_eq!(t["health"], "up", "{t}");
    assert_eq!(t["lastError"], "", "{t}");
    let meta = |m: &str| {
        api(&format!("/api/v1/metadata?metric={m}")).unwrap()["data"][m][0]["type"].clone()
    };
    assert_eq!(meta("ingressbench_requests_sent"), "counter");
    assert_eq!(meta("ingressbench_requests"), "counter");
    assert_eq!(meta("ingressbench_run"), "info");
    assert_eq!(meta("ingressbench_latency_seconds"), "gauge");
    let info = api("/api/v1/query?query=ingressbench_run_info").unwrap();
    assert_eq!(info["data"]["result"][0]["metric"]["command"], "load");
    drop(prom);
    let out = load.finish(Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
