//! The tables' tests: each table's cells against the result figures they show.

use super::search::fmt_price;
use super::*;
use crate::fmt::MISSING;
use crate::input::Series;
use results::{EventWindow, LabInfo, PropagationEntry};
use results::{Percentiles, RunResult, Spread};

fn input() -> ReportInput {
    let mut r = RunResult::default();
    r.errors.connect = 33365;
    r.errors.connect_timeout = 309;
    r.errors.read = 4650;
    r.errors.status = 2;
    r.errors.status_codes.insert("502".into(), 2);
    r.requests.intended = 100;
    r.requests.completed = 90;
    r.requests.sent = 100;
    r.requests.failed = 10;
    r.latency_ms.corrected.p99 = Some(23.743);
    r.latency_ms.corrected.p99_9999 = Some(60_000.0);
    r.config.new_connection = true;
    r.duration_s = 10.0;
    r.tls.handshakes = 8000;
    let mut lab = LabInfo::default();
    lab.windows.push(EventWindow {
        change: "scale 5 -> 7".into(),
        from_ms: 3000.5,
        until_ms: 5645.4,
        completed: 1500,
        errors: [("read".to_string(), 3)].into(),
        p99_ms: 36.607,
        max_ms: 43.263,
        reconnects_after_server_close: 12,
        retried_after_goaway: 4,
        sessions: None,
    });
    lab.propagation.added.push(PropagationEntry {
        backend: "b6".into(),
        at_ms: 1.0,
        propagation_ms: None,
        errors_between: 0,
    });
    lab.propagation.added_ms = Spread::of(&[139.1, 151.3, 199.7]);
    lab.proxy_died = true;
    r.lab = Some(lab);
    ReportInput {
        runs: vec![Default::default()],
        series: vec![
            Series {
                name: "nginx-reload".into(),
                result: r,
                ..Default::default()
            },
            Series {
                name: "plain".into(),
                ..Default::default()
            },
        ],
        ..ReportInput::default()
    }
}

#[test]
fn route_changes_have_a_row_each_with_the_result_figures() {
    let mut i = input();
    assert!(routes(&i).rows.is_empty(), "no route changed: no row");
    let lab = i.series[0].result.lab.as_mut().unwrap();
    lab.route_propagation = Some(results::RoutePropagation::of(vec![
        results::RouteChange {
            route: "cors".into(),
            at_ms: 30_000.0,
            applied_ms: Some(4.26),
            seen_ms: Some(12.5),
            last_old_ms: None,
            responses_new: 900,
            responses_old: 0,
            errors: 0,
        },
        results::RouteChange {
            route: "base".into(),
            at_ms: 60_000.0,
            applied_ms: None,
            seen_ms: None,
            last_old_ms: Some(29_000.0),
            responses_new: 0,
            responses_old: 1000,
            errors: 7,
        },
    ]));
    let t = routes(&i);
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.cell(0, "series"), Some("nginx-reload"));
    assert_eq!(t.cell(0, "at_s"), Some("30.0"));
    assert_eq!(t.cell(0, "applied"), Some("4.3"));
    assert_eq!(t.cell(0, "seen"), Some("12.5"));
    assert_eq!(t.cell(0, "last_old"), Some(MISSING));
    assert_eq!(t.cell(1, "route"), Some("base"));
    assert_eq!(t.cell(1, "seen"), Some(MISSING));
    assert_eq!(t.cell(1, "errors"), Some("7"));
}

#[test]
fn the_errors_table_has_exactly_the_counts() {
    let t = errors(&input());
    assert_eq!(t.cell(0, "series"), Some("nginx-reload"));
    assert_eq!(t.cell(0, "connect"), Some("33365"));
    assert_eq!(t.cell(0, "connect_timeout"), Some("309"));
    assert_eq!(t.cell(0, "read"), Some("4650"));
    assert_eq!(t.cell(0, "tls"), Some("0"));
    assert_eq!(t.cell(0, "total"), Some("38326"));
    assert_eq!(t.cell(0, "status_codes"), Some("502: 2"));
    assert_eq!(t.cell(0, "intended"), Some("100"));
    assert_eq!(t.cell(1, "total"), Some("0"));
    assert!(t.rows.iter().all(|r| r.cells.len() == t.cols.len()));
}

#[test]
fn percentiles_changes_propagation_throughput() {
    let i = input();
    let p = percentiles(&i);
    assert_eq!(p.cell(0, "p99"), Some("23.743"));
    assert_eq!(p.cell(0, "p99.9999"), Some("60000.000"));
    let c = changes(&i);
    assert_eq!(c.rows.len(), 1, "only lab series have changes");
    assert_eq!(c.cell(0, "from_s"), Some("3.0"));
    assert_eq!(c.cell(0, "errors"), Some("3"));
    assert_eq!(c.cell(0, "errors_by_kind"), Some("read: 3"));
    assert_eq!(c.cell(0, "reconnects"), Some("12"));
    assert_eq!(c.cell(0, "max_ms"), Some("43.263"));
    let g = propagation(&i);
    assert_eq!(g.cell(0, "added_median"), Some("151.3"));
    assert_eq!(g.cell(0, "added_never"), Some("1"));
    assert_eq!(g.cell(0, "removed_min"), Some("–"));
    let t = throughput(&i);
    assert_eq!(t.cell(0, "handshakes_per_s"), Some("800.0"));
    assert_eq!(t.cell(1, "handshakes_per_s"), Some("–"));
    assert_eq!(t.cell(1, "rate_target"), Some("max"));
    for t in all(&i) {
        assert!(
            t.rows.iter().all(|r| r.cells.len() == t.cols.len()),
            "{}",
            t.id
        );
    }
}

#[test]
fn the_impact_table_gains_the_sessions_columns_in_a_run_that_held_them() {
    let mut i = input();
    assert!(changes(&i).cols.iter().all(|c| c.0 != "sessions_cut"));
    let r = &mut i.series[0].result;
    r.sessions = Some(results::sessions::Sessions::default());
    r.lab.as_mut().unwrap().windows[0].sessions = Some(results::sessions::SessionWindow {
        ends: [("eof".to_string(), 7), ("close 1001".to_string(), 3)].into(),
        reopened: 10,
        lost: 2,
        p99_ms: Some(12.5),
        ..Default::default()
    });
    let c = changes(&i);
    assert_eq!(c.cell(0, "sessions_cut"), Some("10"));
    assert_eq!(c.cell(0, "sessions_broken"), Some("7"));
    assert_eq!(c.cell(0, "session_ends"), Some("close 1001: 3, eof: 7"));
    assert_eq!(c.cell(0, "sessions_reopened"), Some("10"));
    assert_eq!(c.cell(0, "messages_lost"), Some("2"));
    assert_eq!(c.cell(0, "message_p99_ms"), Some("12.500"));
    assert!(c.rows.iter().all(|r| r.cells.len() == c.cols.len()));
    // And the sessions' own table, one row for the series that held them.
    let r = &mut i.series[0].result;
    let ss = r.sessions.as_mut().unwrap();
    ss.sessions = 20;
    ss.ends = [("eof".to_string(), 7), ("close 1001".to_string(), 3)].into();
    ss.reopened = 10;
    let t = sessions(&i);
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.cell(0, "sessions"), Some("20"));
    assert_eq!(t.cell(0, "cut"), Some("10"));
    assert_eq!(t.cell(0, "broken"), Some("7"));
    assert_eq!(t.cell(0, "ends"), Some("close 1001: 3, eof: 7"));
    assert!(all(&i).iter().any(|t| t.id == "table-sessions"));
    assert!(t.rows.iter().all(|r| r.cells.len() == t.cols.len()));
}

#[test]
fn warnings_name_their_series() {
    let w = warnings(&input());
    assert!(w.iter().any(|(i, l)| *i == 0 && l.contains("proxy died")));
    // The default result is balanced (0 intended adds up) but received nothing.
    assert!(w
        .iter()
        .all(|(i, l)| *i == 0 || l == "no response was received: no request was sent"));
}

#[test]
fn settings_say_where_each_part_ran() {
    let mut i = input();
    if let Some(l) = i.series[0].result.lab.as_mut() {
        l.placement = Some(results::PlacementInfo {
            generator: "0".into(),
            proxy: "1".into(),
            backends: "1".into(),
            proxy_workers: 1,
        });
    }
    i.series[0].result.generator.priority_raised = true;
    let t = settings(&i);
    let text = format!("{:?}", t.rows);
    assert!(text.contains("0 / 1 (1) / 1"), "{text}");
    assert!(text.contains("generator priority raised"), "{text}");
    assert!(text.contains("any"), "a plain load ran anywhere: {text}");
}

#[test]
fn prices_keep_three_significant_digits() {
    assert_eq!(fmt_price(0.0000324), "0.0000324");
    assert_eq!(fmt_price(0.00307), "0.00307");
    assert_eq!(fmt_price(1.254), "1.25");
    assert_eq!(fmt_price(12.34), "12.3");
    assert_eq!(fmt_price(1234.0), "1234");
}

#[test]
fn the_sizing_table_has_per_core_scaling_cost_and_trust_per_row() {
    use results::search::SearchResult;
    use results::sizing::{
        Allocation, Headroom, Measure, ProxyHandshakes, SizingResult, SizingRow,
    };
    let tps = Measure::Tps {
        key: results::tls::KeyType::Rsa2048,
        version: results::tls::TlsVersion::V13,
        resumption: false,
    };
    let row = |cores: f64, quota: Option<f64>, max: Option<f64>, ok: bool| SizingRow {
        allocation: Allocation {
            cores,
            cpus: "1".into(),
            workers: 1,
            quota,
        },
        measure: Some(tps.clone()),
        max_rate: max,
        per_core: max.map(|m| m / cores),
        proxy_cores_at_max: Some(cores * 0.98),
        headroom: Headroom {
            ok,
            why: (!ok).then(|| "the generator fell behind at 900/s".into()),
            ..Headroom::default()
        },
        handshakes: Some(ProxyHandshakes {
            full: 1234,
            resumed: 0,
            source: "nginx".into(),
        }),
        cost: max.map(|_| 0.0000324),
        search: Some(SearchResult::default()),
        ..SizingRow::default()
    };
    let scan = SizingResult {
        system: "nginx-reload".into(),
        cgroup: Some("cgroup v1 cpu.cfs_quota_us".into()),
        cost_per_core_hour: Some(0.048),
        currency: Some("USD".into()),
        rows: vec![
            row(0.5, Some(0.5), Some(300.0), true),
            row(1.0, None, Some(500.0), false),
            SizingRow {
                skipped: Some("needs 2 CPUs".into()),
                ..row(2.0, None, None, false)
            },
        ],
        ..SizingResult::default()
    };
    let input = ReportInput {
        runs: vec![Default::default()],
        sizings: vec![crate::input::Sized {
            name: "nginx-reload".into(),
            run: 0,
            sizing: scan,
        }],
        ..Default::default()
    };
    let t = sizing(&input);
    assert_eq!(t.cell(0, "measure"), Some("tps rsa2048 TLS1.3"));
    assert_eq!(t.cell(0, "cpus"), Some("1 (quota 0.5)"));
    assert_eq!(t.cell(0, "per_core"), Some("600"));
    // 600 per core at half a core against 500 at one: 120 % of linear.
    assert_eq!(t.cell(0, "scaling"), Some("120 %"));
    assert_eq!(t.cell(0, "handshakes"), Some("1234 full, 0 resumed"));
    assert_eq!(t.cell(0, "trusted"), Some("yes"));
    assert_eq!(t.cell(0, "cost"), Some("0.0000324"));
    assert_eq!(
        t.cell(1, "trusted"),
        Some("no: the generator fell behind at 900/s")
    );
    assert_eq!(t.cell(2, "max_rate"), Some(MISSING));
    assert_eq!(t.cell(2, "note"), Some("needs 2 CPUs"));
    assert!(t.note.contains("cgroup v1 cpu.cfs_quota_us"), "{}", t.note);
    assert!(t.note.contains("0.048 USD per core-hour"), "{}", t.note);
    assert_eq!(all(&input)[0].id, "table-sizing");
}

#[test]
fn a_plans_steps_are_a_table_and_a_chart_of_latency_against_offered_rate() {
    let step = |plan: &str, offered: f64, p99: f64, reached: bool| results::StepResult {
        plan: plan.into(),
        offered,
        achieved: if reached { offered } else { offered * 0.9 },
        latency_ms: Percentiles {
            p50: Some(p99 / 2.0),
            p99: Some(p99),
            ..Default::default()
        },
        reached,
        ..Default::default()
    };
    let r = RunResult {
        steps: vec![
            step("2000:5s", 2000.0, 9.0, false),
            step("1000:5s", 1000.0, 2.0, true),
        ],
        ..Default::default()
    };
    let input = ReportInput::single("load", r);
    let t = steps(&input);
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.cell(0, "step"), Some("2000:5s"));
    assert_eq!(t.cell(0, "achieved"), Some("1800.0"));
    assert_eq!(t.cell(0, "note"), Some("below the offered rate"));
    assert_eq!(t.cell(1, "note"), Some(MISSING));
    assert!(all(&input).iter().any(|t| t.id == "table-steps"));
    let charts = crate::charts::build(&input);
    let plan = charts
        .iter()
        .find(|c| c.id == "chart-plan")
        .expect("chart-plan");
    assert!(plan.title.contains("offered rate"), "{}", plan.title);
    // Without a plan there is neither.
    let plain = ReportInput::single("load", RunResult::default());
    assert!(all(&plain).iter().all(|t| t.id != "table-steps"));
    assert!(crate::charts::build(&plain)
        .iter()
        .all(|c| c.id != "chart-plan"));
}

#[test]
fn maxima_come_from_the_step_at_the_maximum_and_say_why_one_is_missing() {
    use results::search::{Miss, SearchResult, SearchStep};
    let step = |t: Option<f64>, achieved: f64, p99: f64, missed: Vec<Miss>| SearchStep {
        target: t,
        trial: 1,
        achieved,
        p50_ms: Some(p99 / 4.0),
        p99_ms: Some(p99),
        missed,
        ..Default::default()
    };
    let found = SearchResult {
        ceiling: 900.0,
        max_rate: Some(1000.0),
        generator_limit: Some(1200.0),
        steps: vec![
            step(None, 900.0, 50.0, vec![]),
            step(Some(1000.0), 999.0, 4.0, vec![]),
            step(Some(1100.0), 1050.0, 80.0, vec![Miss::P99, Miss::Rate]),
            step(Some(1200.0), 1150.0, 90.0, vec![Miss::Generator]),
        ],
        ..Default::default()
    };
    let none = SearchResult {
        ceiling: 10.0,
        steps: vec![step(Some(10.0), 10.0, 99.0, vec![Miss::P99])],
        ..Default::default()
    };
    let input = ReportInput {
        runs: vec![Default::default()],
        series: vec![Series {
            name: "host@30".into(),
            ..Default::default()
        }],
        searches: vec![
            crate::input::Searched {
                name: "host".into(),
                run: 0,
                search: found,
            },
            crate::input::Searched {
                name: "vxlan".into(),
                run: 0,
                search: none,
            },
        ],
        sizings: Vec::new(),
        unreadable: Vec::new(),
    };
    let t = maxima(&input);
    assert_eq!(t.cell(0, "max_rate"), Some("1000"));
    assert_eq!(t.cell(0, "p99_ms"), Some("4.000"));
    assert_eq!(t.cell(0, "ceiling"), Some("900"));
    assert_eq!(t.cell(0, "steps"), Some("4"));
    assert_eq!(
        t.cell(0, "note"),
        Some("generator could not hold 1200 req/s")
    );
    assert_eq!(t.rows[0].series, Some(0), "coloured as its fraction runs");
    assert_eq!(t.cell(1, "max_rate"), Some(MISSING));
    assert_eq!(t.cell(1, "note"), Some("no rate held the bounds"));
    assert_eq!(t.rows[1].series, None);
    assert_eq!(all(&input)[0].id, "table-maxima");
}
