use super::*;
use std::collections::BTreeMap;

fn second(t: u64, sent: u64, completed: u64, errors: &[(&str, u64)]) -> TimelineEntry {
    TimelineEntry {
        t,
        sent,
        completed,
        errors: errors.iter().map(|(_, n)| n).sum(),
        errors_by_kind: errors.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        p50: 1.5,
        p99: 12.25,
        max: 40.0,
        lag_max_ms: 0.25,
        ..Default::default()
    }
}

#[test]
fn a_load_in_prometheus_text() {
    let live = Live::load("http://127.0.0.1:8080/", Some(200.0));
    live.second(&second(0, 200, 198, &[("timeout", 2)]));
    live.second(&second(1, 201, 199, &[("status", 1)]));
    let want = r#"# HELP ingressbench_run_info What is measured: the command (load or run), the scenario, the system under test and the URL the load is sent to; always 1.
# TYPE ingressbench_run_info gauge
ingressbench_run_info{command="load",target="http://127.0.0.1:8080/"} 1
# HELP ingressbench_requests_sent_total Requests sent in the measured window (the warm-up is not counted).
# TYPE ingressbench_requests_sent_total counter
ingressbench_requests_sent_total 401
# HELP ingressbench_requests_total Requests finished in the measured window, by outcome: ok (a response below 400) or the error kind (status: a response of 400 or more; connect, connect_timeout, tls, read, write, timeout, framing; HTTP/2: reset, grpc).
# TYPE ingressbench_requests_total counter
ingressbench_requests_total{outcome="ok"} 397
ingressbench_requests_total{outcome="connect"} 0
ingressbench_requests_total{outcome="connect_timeout"} 0
ingressbench_requests_total{outcome="tls"} 0
ingressbench_requests_total{outcome="read"} 0
ingressbench_requests_total{outcome="write"} 0
ingressbench_requests_total{outcome="timeout"} 2
ingressbench_requests_total{outcome="status"} 1
ingressbench_requests_total{outcome="framing"} 0
ingressbench_requests_total{outcome="reset"} 0
ingressbench_requests_total{outcome="grpc"} 0
# HELP ingressbench_target_requests_per_second The rate the load is asked to send (absent for a closed loop).
# TYPE ingressbench_target_requests_per_second gauge
ingressbench_target_requests_per_second 200
# HELP ingressbench_elapsed_seconds Seconds of the measured window completed so far.
# TYPE ingressbench_elapsed_seconds gauge
ingressbench_elapsed_seconds 2
# HELP ingressbench_achieved_requests_per_second Requests sent in the last complete second.
# TYPE ingressbench_achieved_requests_per_second gauge
ingressbench_achieved_requests_per_second 201
# HELP ingressbench_latency_seconds Corrected latency (from the intended send time) of the requests finished in the last complete second, by percentile: p50, p99, max (0 when none finished).
# TYPE ingressbench_latency_seconds gauge
ingressbench_latency_seconds{percentile="p50"} 0.0015
ingressbench_latency_seconds{percentile="p99"} 0.01225
ingressbench_latency_seconds{percentile="max"} 0.04
# HELP ingressbench_generator_lag_max_seconds The generator's largest send lag in the last complete second: how far behind its schedule it fell.
# TYPE ingressbench_generator_lag_max_seconds gauge
ingressbench_generator_lag_max_seconds 0.00025
"#;
    assert_eq!(live.render(Format::Prometheus), want);
}

#[test]
fn a_scenario_in_openmetrics() {
    let live = Live::scenario("churn");
    // Before the first system: what runs, and nothing counted yet.
    assert_eq!(
        live.render(Format::OpenMetrics),
        "# HELP ingressbench_run What is measured: the command (load or run), the scenario, the system under test and the URL the load is sent to; always 1.\n\
         # TYPE ingressbench_run info\n\
         ingressbench_run_info{command=\"run\",scenario=\"churn\"} 1\n\
         # HELP ingressbench_requests_sent Requests sent in the measured window (the warm-up is not counted).\n\
         # TYPE ingressbench_requests_sent counter\n\
         # HELP ingressbench_requests Requests finished in the measured window, by outcome: ok (a response below 400) or the error kind (status: a response of 400 or more; connect, connect_timeout, tls, read, write, timeout, framing; HTTP/2: reset, grpc).\n\
         # TYPE ingressbench_requests counter\n\
         # EOF\n"
    );
    live.system("nginx-reload", "https://127.0.0.1:8443/", None);
    live.second(&second(0, 100, 100, &[]));
    live.step(1, "scale 2 -> 4");
    live.system("caddy-api", "https://127.0.0.1:9443/", Some(50.0));
    live.second(&second(0, 50, 49, &[("connect", 1)]));
    let text = live.render(Format::OpenMetrics);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("# HELP")).collect();
    assert_eq!(
        lines,
        [
            "# TYPE ingressbench_run info",
            r#"ingressbench_run_info{command="run",scenario="churn",system="caddy-api",target="https://127.0.0.1:9443/"} 1"#,
            "# TYPE ingressbench_requests_sent counter",
            r#"ingressbench_requests_sent_total{system="nginx-reload"} 100"#,
            r#"ingressbench_requests_sent_total{system="caddy-api"} 50"#,
            "# TYPE ingressbench_requests counter",
            r#"ingressbench_requests_total{system="nginx-reload",outcome="ok"} 100"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="connect"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="connect_timeout"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="tls"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="read"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="write"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="timeout"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="status"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="framing"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="reset"} 0"#,
            r#"ingressbench_requests_total{system="nginx-reload",outcome="grpc"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="ok"} 49"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="connect"} 1"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="connect_timeout"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="tls"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="read"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="write"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="timeout"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="status"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="framing"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="reset"} 0"#,
            r#"ingressbench_requests_total{system="caddy-api",outcome="grpc"} 0"#,
            "# TYPE ingressbench_step gauge",
            r#"ingressbench_step{system="caddy-api",change=""} 0"#,
            "# TYPE ingressbench_target_requests_per_second gauge",
            r#"ingressbench_target_requests_per_second{system="caddy-api"} 50"#,
            "# TYPE ingressbench_elapsed_seconds gauge",
            r#"ingressbench_elapsed_seconds{system="caddy-api"} 1"#,
            "# TYPE ingressbench_achieved_requests_per_second gauge",
            r#"ingressbench_achieved_requests_per_second{system="caddy-api"} 50"#,
            "# TYPE ingressbench_latency_seconds gauge",
            r#"ingressbench_latency_seconds{system="caddy-api",percentile="p50"} 0.0015"#,
            r#"ingressbench_latency_seconds{system="caddy-api",percentile="p99"} 0.01225"#,
            r#"ingressbench_latency_seconds{system="caddy-api",percentile="max"} 0.04"#,
            "# TYPE ingressbench_generator_lag_max_seconds gauge",
            r#"ingressbench_generator_lag_max_seconds{system="caddy-api"} 0.00025"#,
            "# EOF",
        ]
    );
    live.step(2, "route v2");
    assert!(live
        .render(Format::Prometheus)
        .contains("ingressbench_step{system=\"caddy-api\",change=\"route v2\"} 2\n"));
}

/// The samples of a text, by name and labels.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn counters_never_go_down() {
    let live = Live::load("http://127.0.0.1/", None);
    let mut before = samples(&live.render(Format::Prometheus));
    let kinds = ["timeout", "status", "connect", "read"];
    for t in 0..20 {
        let errors = [(kinds[t as usize % 4], t % 3)];
        live.second(&second(t, 10 + t % 7, 9, &errors));
        let now = samples(&live.render(Format::Prometheus));
        let counters: Vec<_> = now.keys().filter(|k| k.contains("_total")).collect();
        // requests sent, ok, and every error kind.
        assert_eq!(
            counters.len(),
            2 + results::ErrorKind::COUNT,
            "every outcome is there from the start"
        );
        for k in counters {
            let was = before.get(k).copied().unwrap_or(0.0);
            assert!(now[k] >= was, "{k} went from {was} to {}", now[k]);
        }
        before = now;
    }
    assert_eq!(before["ingressbench_requests_total{outcome=\"ok\"}"], 180.0);
    // Closed loop: no target rate to show.
    assert!(!live
        .render(Format::Prometheus)
        .contains("target_requests_per_second"));
}

#[test]
fn label_values_are_escaped() {
    let live = Live::scenario("a \"quoted\" name");
    live.system("back\\slash\nnew line", "http://127.0.0.1/", Some(1.0));
    let text = live.render(Format::OpenMetrics);
    assert!(
        text.contains(r#"ingressbench_run_info{command="run",scenario="a \"quoted\" name",system="back\\slash\nnew line",target="http://127.0.0.1/"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"ingressbench_requests_sent_total{system="back\\slash\nnew line"} 0"#));
    // One sample a line: the new line in the value did not break one.
    assert!(text
        .lines()
        .all(|l| l.starts_with('#') || l.starts_with("ingressbench_")));
}

#[test]
fn the_format_is_negotiated() {
    // What Prometheus 2.x sends.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(
        Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
        Format::OpenMetrics
    );
    assert_eq!(Format::negotiate(None), Format::Prometheus);
    assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
    assert_eq!(
        Format::negotiate(Some("text/plain;version=0.0.4")),
        Format::Prometheus
    );
    assert_eq!(
        Format::negotiate(Some("application/openmetrics-text;q=0,text/plain")),
        Format::Prometheus
    );
    assert_eq!(
        Format::negotiate(Some("text/plain;q=0.9,application/openmetrics-text;q=0.5")),
        Format::Prometheus
    );
    assert_eq!(
        Format::OpenMetrics.content_type(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(
        Format::Prometheus.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
}
