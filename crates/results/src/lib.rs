//! Result types shared by every part: error kinds, percentile sets, the
//! `ingressbench/result/v1` document, the stored histogram format, the run's clock and
//! timestamps. Nothing here opens a socket or starts a process, so the engine, the lab,
//! the runner and the reports can all depend on it without depending on each other;
//! the only I/O is writing files atomically ([`fsutil`]).

pub mod causes;
pub mod clock;
pub mod duration;
pub mod failover;
pub mod folder;
pub mod fsutil;
pub mod histogram;
pub mod merge;
pub mod repeat;
pub mod search;
pub mod size;
pub mod sizing;
pub mod time;
pub mod tls;

pub use causes::{with_causes, Causes};

/// Schema identifier written into every result file.
pub const RESULT_SCHEMA: &str = "ingressbench/result/v1";

// The schema, grouped by what each part describes (a newcomer finds the cluster's in
// `kubernetes`, the network lab's in `network`); every type is also at the root, where
// the rest of the workspace names it.
pub mod errors;
pub mod events;
pub mod generators;
pub mod kubernetes;
pub mod lab;
pub mod measures;
pub mod mix;
pub mod network;
pub mod probes;
pub mod propagation;
pub mod run;
pub mod sessions;

pub use errors::*;
pub use events::*;
pub use generators::*;
pub use kubernetes::*;
pub use lab::*;
pub use measures::*;
pub use mix::{MixGroup, MixHost, MixResult};
pub use network::*;
pub use propagation::*;
pub use run::*;

/// Tests of the document as a whole: old files still read, names as users see them.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// CPU is weighted by each reading's interval (a reading delayed by a change
    /// covers more time), memory is the largest seen.
    #[test]
    fn resources_sum_up_readings_by_their_interval() {
        let at = |t_s: f64, cpu: f64, rss_mib: f64| ResourceSample {
            t_s,
            cpu,
            rss_mib,
            processes: 2,
        };
        let r = Resources::of(
            vec![at(1.0, 0.5, 20.0), at(3.0, 1.0, 40.0), at(4.0, 0.0, 30.0)],
            5000,
        );
        assert!((r.cpu_mean - 0.625).abs() < 1e-9, "{r:?}"); // (0.5 + 2.0 + 0) / 4 s
        assert_eq!((r.cpu_max, r.rss_max_mib), (1.0, 40.0));
        assert!((r.cpu_ms_per_1000.unwrap() - 500.0).abs() < 1e-9); // 2.5 s / 5000 req
        assert_eq!(Resources::of(Vec::new(), 0).cpu_ms_per_1000, None);
    }

    #[test]
    fn percentile_keys_are_the_nines() {
        let v = serde_json::to_value(Percentiles::default()).unwrap();
        for k in [
            "p50", "p75", "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max", "mean",
            "stdev",
        ] {
            assert!(v.get(k).is_some_and(|x| x.is_null()), "{k}: {v}");
        }
    }

    #[test]
    fn old_files_with_numbers_still_read() {
        let p: Percentiles =
            serde_json::from_str(r#"{"p50": 1.5, "p99": 0.0, "max": null, "count": 3}"#).unwrap();
        assert_eq!(
            (p.p50, p.p99, p.max, p.count),
            (Some(1.5), Some(0.0), None, 3)
        );
        assert_eq!(p.p75, None);
    }

    #[test]
    fn a_run_without_responses_failed() {
        let mut r = RunResult {
            requests: Requests {
                intended: 200,
                sent: 200,
                failed: 200,
                ..Default::default()
            },
            ..Default::default()
        };
        r.errors.connect = 200;
        assert_eq!(
            r.failure().as_deref(),
            Some("no response was received: 200 of 200 intended requests failed (connect 200)")
        );
        r.errors = Errors {
            status: 200,
            ..Default::default()
        };
        r.latency_ms.corrected.count = 200;
        assert!(r.failure().unwrap().starts_with("no request succeeded: "));
        r.requests.completed = 99;
        r.requests.failed = 101;
        r.errors.status = 101;
        assert!(r
            .failure()
            .unwrap()
            .starts_with("most requests failed: 101 of 200"));
        r.requests.completed = 100;
        r.requests.failed = 100;
        assert_eq!(r.failure(), None, "half is not most");
        let nothing = RunResult::default();
        assert_eq!(
            nothing.failure().as_deref(),
            Some("no response was received: no request was sent")
        );
    }

    #[test]
    fn balance_detects_a_lost_request() {
        let mut r = Requests {
            intended: 10,
            sent: 9,
            completed: 7,
            failed: 2,
            not_sent: 1,
            unfinished: 0,
            timed_out_unsent: 0,
        };
        assert!(r.balanced());
        r.completed = 6;
        assert!(!r.balanced());
        // A request still queued when the drain ended failed without being sent.
        let mut r = Requests {
            intended: 10,
            sent: 8,
            completed: 7,
            failed: 3,
            timed_out_unsent: 2,
            ..Default::default()
        };
        assert!(r.balanced());
        r.timed_out_unsent = 0;
        assert!(!r.balanced(), "a failure neither sent nor counted unsent");
    }

    #[test]
    fn files_without_the_drains_fields_still_read() {
        let r: Rate = serde_json::from_str(
            r#"{"target": 100.0, "achieved": 90.0, "completed_per_s": 90.0, "reached": false}"#,
        )
        .unwrap();
        assert_eq!(r.shortfall, Shortfall::default());
        let q: Requests = serde_json::from_str(
            r#"{"intended": 10, "sent": 9, "completed": 9, "failed": 0, "not_sent": 1, "unfinished": 0}"#,
        )
        .unwrap();
        assert_eq!(q.timed_out_unsent, 0);
        assert!(q.balanced());
        let e: TimelineEntry = serde_json::from_str(
            r#"{"t": 0, "sent": 1, "completed": 1, "errors": 0, "errors_by_kind": {}, "p50": 1.0, "p99": 1.0, "max": 1.0, "backends": {}}"#,
        )
        .unwrap();
        assert_eq!(e.lag_max_ms, 0.0);
    }

    #[test]
    fn spread_of_values() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!(
            (s.n, s.min, s.median, s.max),
            (3, Some(1.0), Some(2.0), Some(3.0))
        );
        assert_eq!(Spread::of(&[1.0, 4.0]).median, Some(2.5));
        assert_eq!(Spread::of(&[]).median, None);
    }

    #[test]
    fn event_kinds_serialize_as_their_names() {
        use EventKind::*;
        // From the names docs/scenarios.md lists: each reads as a kind that writes
        // itself back under the same name, which is also its `name()`.
        for name in "scale_requested backend_ready backend_stopping endpoints_requested \
             endpoints_applied route_requested route_applied reload_requested reload_done \
             restart_requested restart_done proxy_died change_failed"
            .split_whitespace()
        {
            let json = format!("\"{name}\"");
            let k = serde_json::from_str::<EventKind>(&json).unwrap();
            assert_eq!(serde_json::to_string(&k).unwrap(), json);
            assert_eq!(k.name(), name);
        }
        assert_eq!(ScaleRequested.change(), Some("scale"));
        assert_eq!(EndpointsRequested.change(), None);
        assert!(ProxyDied.is_alarm() && !BackendReady.is_alarm());
    }

    #[test]
    fn error_kind_indices_match_all() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
        let e = Errors::from_counts(&[1, 2, 3, 4, 5, 6, 7, 8, 0, 0], BTreeMap::new());
        assert_eq!(e.get(ErrorKind::Write), 5);
        assert_eq!(e.get(ErrorKind::Framing), 8);
        assert_eq!(e.total(), 36);
        let h2 = Errors::from_counts(&[0, 0, 0, 0, 0, 0, 0, 0, 9, 10], BTreeMap::new());
        assert_eq!((h2.get(ErrorKind::Reset), h2.get(ErrorKind::Grpc)), (9, 10));
        assert_eq!(ErrorKind::Grpc.name(), "grpc");
        assert_eq!(errors::grpc_code_name(14), "UNAVAILABLE");
        assert_eq!(errors::grpc_code_name(99), "CODE_99");
        // A file written before `framing` existed reads, with none.
        let mut json = serde_json::to_value(&e).unwrap();
        json.as_object_mut().unwrap().remove("framing");
        let old: Errors = serde_json::from_value(json).unwrap();
        assert_eq!((old.framing, old.total()), (0, 28));
    }

    #[test]
    fn first_errors_are_optional_in_files() {
        let mut e = Errors::from_counts(&[0, 0, 3, 0, 0, 0, 0, 0, 0, 0], BTreeMap::new());
        let json = serde_json::to_value(&e).unwrap();
        assert!(json.get("first").is_none(), "an empty map is not written");
        // A file written before the field existed still reads.
        let old: Errors = serde_json::from_value(json).unwrap();
        assert!(old.first.is_empty());
        e.first.insert(
            "tls".into(),
            "invalid peer certificate: UnknownIssuer".into(),
        );
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json["first"]["tls"],
            "invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(serde_json::from_value::<Errors>(json).unwrap(), e);
    }
}
