use super::analysis::{route_propagation, windows};
use super::system::{Events, System};
use super::{run, RunError, RunOptions, RunOutput, Watch};
use crate::plan::Plan;
use engine::windows::{Marks, Tally};
use lab::backends::StopMode;
use lab::platform::SiteSpec;
use lab::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Platform, PlatformEvent, Route,
    SutError, Target,
};
use results::clock::{Clock, Nanos};
use results::{Event, EventKind, RunResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A proxy that leaves an old route's object behind, then fails to stop.
struct Leaky;

impl Driver for Leaky {
    fn name(&self) -> &'static str {
        "leaky"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }
    fn prepare(&mut self, _: &DriverContext, _: &[Endpoint]) -> Result<(), SutError> {
        Ok(())
    }
    fn start(&mut self) -> Result<(), SutError> {
        Ok(())
    }
    fn wait_ready(&mut self, _: Duration) -> Result<(), SutError> {
        Ok(())
    }
    fn apply_route(&mut self, _: Route) -> Result<(), SutError> {
        Ok(())
    }
    fn reload(&mut self) -> Result<(), SutError> {
        Ok(())
    }
    fn settle(&mut self, _: &Expect, _: Duration) -> Result<(), SutError> {
        Ok(())
    }
    fn alive(&mut self) -> bool {
        true
    }
    fn stop(&mut self) -> Result<(), SutError> {
        Err(SutError::Io {
            what: "stop leaky".into(),
            // EPERM
            source: std::io::Error::from_raw_os_error(1),
        })
    }
    fn versions(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn take_warnings(&mut self) -> Vec<SutError> {
        vec![SutError::Other("Middleware m not deleted".into())]
    }
}

/// A platform whose teardown leaves its namespace behind.
struct Sticky;

impl Platform for Sticky {
    fn name(&self) -> &'static str {
        "sticky"
    }
    fn prepare(&mut self, _: &SiteSpec) -> Result<DriverContext, SutError> {
        Err(SutError::Other("not for this test".into()))
    }
    fn target(&self) -> Target {
        Target::default()
    }
    fn endpoints(&self) -> Vec<Endpoint> {
        Vec::new()
    }
    fn replicas(&self) -> u32 {
        0
    }
    fn scale(&mut self, _: u32, _: StopMode, _: &mut dyn FnMut(PlatformEvent)) {}
    fn tick(&mut self) {}
    fn teardown(&mut self) -> Result<(), SutError> {
        Err(SutError::Other("namespace n not deleted".into()))
    }
}

fn options(told: Arc<Mutex<Vec<String>>>) -> RunOptions {
    RunOptions {
        out_dir: PathBuf::new(),
        exe: PathBuf::new(),
        stop: Arc::new(AtomicBool::new(false)),
        progress: Box::new(|_| {}),
        system_done: Box::new(|_| {}),
        load: None,
        watch: None,
        warn: Arc::new(move |w| told.lock().unwrap().push(w.to_string())),
        platform: None,
    }
}

/// What a system leaves behind is each a warning with its causes: in the result
/// of a run that ends, told to `warn` by one that fails (dropped unclosed).
#[test]
fn what_a_system_leaves_behind_is_warned_of_once() {
    let told = Arc::new(Mutex::new(Vec::new()));
    let opts = options(told.clone());
    let mut sys = System::new(Box::new(Leaky), Box::new(Sticky), Clock::start(), &opts);
    let want = [
        "Middleware m not deleted",
        "stop leaky: Operation not permitted (os error 1)",
        "namespace n not deleted",
    ];
    assert_eq!(sys.close(), want);
    assert!(sys.close().is_empty(), "closed once");
    drop(sys);
    assert!(
        told.lock().unwrap().is_empty(),
        "a closed system tells nothing more"
    );
    // A run that failed drops its system unclosed: the same, told.
    drop(System::new(
        Box::new(Leaky),
        Box::new(Sticky),
        Clock::start(),
        &opts,
    ));
    assert_eq!(*told.lock().unwrap(), want);
}

fn ev(t_ms: f64, kind: EventKind, detail: &str) -> Event {
    Event {
        t_ms,
        kind,
        detail: detail.into(),
        took_ms: None,
    }
}

/// A load elsewhere gets each change's mark ahead of it: the window opens at
/// `now + lead`, the mark goes out at once, and the change (the return of `log`)
/// is made only at that time. A step inside a change opens no window.
#[test]
fn a_change_is_announced_ahead_when_the_load_runs_elsewhere() {
    let clock = Clock::start();
    let (tx, rx) = mpsc::channel();
    let lead = Duration::from_millis(80);
    let watch = Arc::new(Steps::default());
    let mut ev = Events {
        clock,
        origin: 1,
        list: Vec::new(),
        marks: Arc::new(Marks::new()),
        opened: Vec::new(),
        forward: Some(tx),
        lead: lead.as_nanos() as Nanos,
        watch: Some(watch.clone()),
    };
    let asked = clock.now();
    let t = ev.log(EventKind::RouteRequested, "cors", None);
    let made = clock.now();
    let sent = rx.try_recv().expect("forwarded before the change");
    assert_eq!(sent, t);
    assert!(t >= asked + lead.as_nanos() as Nanos, "{t} {asked}");
    assert!(made >= t, "the change was made before its mark's time");
    assert_eq!(ev.marks.len(), 1);
    assert_eq!(ev.marks.window_of(t - 1), 0);
    assert_eq!(ev.marks.window_of(t), 1);
    assert_eq!(ev.list[0].0, t);
    ev.log(EventKind::RouteApplied, "cors", None);
    assert!(rx.try_recv().is_err());
    assert_eq!(ev.marks.len(), 1);
    // The live view is told of the change once, as the event log says it.
    ev.log(EventKind::ReloadRequested, "", None);
    assert_eq!(
        *watch.0.lock().unwrap(),
        [(1, "route cors".to_string()), (2, "reload".to_string())]
    );
}

/// A live view that keeps the changes it is told of.
#[derive(Default)]
struct Steps(std::sync::Mutex<Vec<(usize, String)>>);

impl Watch for Steps {
    fn system(&self, _: &str, _: &str, _: Option<f64>) {}
    fn step(&self, index: usize, change: &str) {
        self.0.lock().unwrap().push((index, change.to_string()));
    }
    fn second(&self, _: &results::TimelineEntry) {}
}

#[test]
fn windows_follow_the_marked_changes_and_add_up() {
    let events = [
        ev(1000.0, EventKind::ScaleRequested, "2 -> 3"),
        ev(1300.0, EventKind::BackendReady, "b3"),
        ev(2000.0, EventKind::RouteRequested, "cors"),
        ev(3200.0, EventKind::ReloadRequested, ""),
        // After an interrupt ended the measured window at 3.5 s.
        ev(3600.0, EventKind::ReloadRequested, ""),
    ];
    let mut tally = Tally::default();
    for (w, n) in [(0, 200), (1, 200), (2, 239), (3, 60)] {
        for _ in 0..n {
            tally.response(w, 2_000_000, 200);
        }
    }
    tally.error(2, results::ErrorKind::Read);
    let (before, w) = windows(&events, &[0, 2, 3, 4], &tally, 3500.0, None);
    assert_eq!(
        (
            before.change.as_str(),
            before.from_ms,
            before.until_ms,
            before.completed
        ),
        ("before changes", 0.0, 1000.0, 200)
    );
    let got: Vec<(&str, f64, f64, u64)> = w
        .iter()
        .map(|w| (w.change.as_str(), w.from_ms, w.until_ms, w.completed))
        .collect();
    assert_eq!(
        got,
        [
            ("scale 2 -> 3", 1000.0, 2000.0, 200),
            ("route cors", 2000.0, 3200.0, 239),
            ("reload", 3200.0, 3500.0, 60),
        ]
    );
    assert_eq!(w[1].errors.get("read"), Some(&1));
    assert!(w[0].errors.is_empty() && w[2].errors.is_empty());
    assert!(
        (w[0].p99_ms - 2.0).abs() < 0.02 && w[0].max_ms == 2.0,
        "{:?}",
        w[0]
    );
}

/// Two route changes with a scale between: each change's responses come from its
/// windows until the next route change, the old route's stragglers are the last
/// old response, a change never seen has no `seen_ms`, and `applied_ms` comes
/// from the driver's own event (none when it failed).
#[test]
fn route_changes_are_timed_from_the_responses_that_show_them() {
    let events = [
        ev(1000.0, EventKind::RouteRequested, "header"),
        ev(1010.0, EventKind::RouteApplied, "header"),
        ev(1500.0, EventKind::ScaleRequested, "2 -> 3"),
        ev(3000.0, EventKind::RouteRequested, "base"),
        ev(3100.0, EventKind::ChangeFailed, "base: timed out"),
    ];
    let origin: Nanos = 5_000_000_000;
    let at = |ms: u64| origin + ms * 1_000_000;
    let mut tally = Tally::default();
    // Window 1 (header asked at 1000 ms): old responses until 1040, new from 1025.
    tally.marked(1, 0, at(1005));
    tally.marked(1, 0, at(1040));
    tally.marked(1, 0b010, at(1025));
    tally.error(1, results::ErrorKind::Read);
    // Window 2 (the scale) still belongs to the header change.
    tally.marked(2, 0b010, at(1600));
    tally.marked(2, 0b011, at(1700));
    // Window 3 (base at 3000 ms): nothing shows it.
    tally.marked(3, 0b010, at(3050));
    tally.marked(0, 0, at(10));
    let p = route_propagation(&events, &[0, 2, 3], &tally, origin).unwrap();
    let c = &p.changes;
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].route, "header");
    assert_eq!(c[0].applied_ms, Some(10.0));
    assert_eq!(c[0].seen_ms, Some(25.0));
    assert_eq!(
        c[0].last_old_ms,
        Some(700.0),
        "the 0b011 response is not the header route"
    );
    assert_eq!(
        (c[0].responses_new, c[0].responses_old, c[0].errors),
        (2, 3, 1)
    );
    assert_eq!(c[1].route, "base");
    assert_eq!((c[1].applied_ms, c[1].seen_ms), (None, None));
    assert_eq!(c[1].last_old_ms, Some(50.0));
    assert_eq!(p.seen_ms.n, 1);
    assert!(route_propagation(&events[2..3], &[0], &tally, origin).is_none());
}

/// The runner over the fakes of [`crate::testing`]: what each kind of step logs,
/// which windows it opens, what a failure, an interrupt and repetitions leave.
mod over_fakes {
    use super::*;
    use crate::plan::RunFlags;
    use crate::testing::{platforms, Calls, FakeLoad, Faults};
    use results::EventKind as K;

    /// A scenario of `systems` with a load of 150 ms and `changes` (a YAML list).
    fn plan(systems: &str, changes: &str, repeat: usize) -> Plan {
        let text = format!(
            "name: fake\nsystems: [{systems}]\nbackends: {{replicas: 2}}\ntls: {{enabled: false}}\nload: {{rate: 100, connections: 2, duration: 150ms}}\nchanges: {changes}\n"
        );
        let s = crate::Scenario::parse(&text, "fake.yaml").expect("a valid scenario");
        let flags = RunFlags {
            repeat,
            ..RunFlags::default()
        };
        Plan::build(s, text, "fake.yaml", flags).expect("a valid plan")
    }

    /// Runs `plan` on the fakes into a temporary folder; `on_line` sees each line of
    /// progress with the run's stop flag.
    fn run_on_fakes(
        plan: &Plan,
        faults: Faults,
        on_line: impl Fn(&str, &AtomicBool) + 'static,
    ) -> (Result<RunOutput, RunError>, Calls, Vec<String>) {
        let calls = Calls::default();
        let dir = tempfile::tempdir().expect("a temporary folder");
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(Mutex::new(Vec::new()));
        let (s, d) = (stop.clone(), done.clone());
        let opts = RunOptions {
            out_dir: dir.path().to_path_buf(),
            exe: PathBuf::new(),
            stop: stop.clone(),
            progress: Box::new(move |line| on_line(line, &s)),
            system_done: Box::new(move |r| {
                let name = r.lab.as_ref().map_or("?", |l| l.system.as_str());
                d.lock().unwrap().push(name.to_string());
            }),
            load: Some(Arc::new(FakeLoad {
                calls: calls.clone(),
                per_window: 10,
            })),
            watch: None,
            warn: Arc::new(|_| {}),
            platform: Some(platforms(&calls, &faults)),
        };
        let out = run(plan, opts);
        let done = done.lock().unwrap().clone();
        (out, calls, done)
    }

    fn kinds(r: &RunResult) -> Vec<(K, String)> {
        let lab = r.lab.as_ref().expect("a lab run");
        lab.events
            .iter()
            .map(|e| (e.kind, e.detail.clone()))
            .collect()
    }

    #[test]
    fn a_scale_step_adds_a_backend_pushes_the_set_and_opens_a_window() {
        let p = plan("nginx-reload", "[{scale: 3}]", 1);
        let (out, calls, done) = run_on_fakes(&p, Faults::default(), |_, _| {});
        let out = out.expect("the run");
        assert!(!out.partial);
        let r = &out.results[0];
        let ev = kinds(r);
        assert!(ev.contains(&(K::ScaleRequested, "2 -> 3".into())), "{ev:?}");
        assert!(ev.contains(&(K::BackendReady, "b3".into())), "{ev:?}");
        assert!(
            ev.contains(&(K::EndpointsApplied, "b1,b2,b3".into())),
            "{ev:?}"
        );
        assert!(calls
            .all()
            .contains(&"driver set_endpoints b1,b2,b3".to_string()));
        let lab = r.lab.as_ref().unwrap();
        assert_eq!(lab.windows.len(), 1, "{:?}", lab.windows);
        assert!(
            lab.windows[0].change.starts_with("scale"),
            "{:?}",
            lab.windows
        );
        assert_eq!(lab.windows[0].completed, 10);
        assert_eq!(lab.before_changes.as_ref().unwrap().completed, 10);
        assert_eq!(lab.propagation.added.len(), 1);
        assert_eq!(done, ["nginx-reload"]);
        // Everything deployed was stopped and torn down.
        let all = calls.all();
        assert!(
            all.ends_with(&["driver stop".into(), "platform teardown".into()]),
            "{all:?}"
        );
    }

    #[test]
    fn a_route_change_is_asked_of_the_driver_and_applied() {
        let p = plan("nginx-reload", "[{route: cors}]", 1);
        let (out, calls, _) = run_on_fakes(&p, Faults::default(), |_, _| {});
        let r = &out.expect("the run").results[0];
        let ev = kinds(r);
        assert!(ev.contains(&(K::RouteRequested, "cors".into())), "{ev:?}");
        assert!(ev.contains(&(K::RouteApplied, "cors".into())), "{ev:?}");
        assert!(calls.all().contains(&"driver route cors".to_string()));
    }

    #[test]
    fn a_proxy_restart_logs_the_replacement_and_is_done() {
        let p = plan("nginx-reload", "[{restart: proxy}]", 1);
        let (out, _, _) = run_on_fakes(&p, Faults::default(), |_, _| {});
        let ev = kinds(&out.expect("the run").results[0]);
        let at = |k: K| ev.iter().position(|e| e.0 == k);
        let (asked, replaced, done) = (
            at(K::RestartRequested),
            at(K::PodReplaced),
            at(K::RestartDone),
        );
        assert!(
            asked < replaced && replaced < done && done.is_some(),
            "{ev:?}"
        );
        assert_eq!(ev[replaced.unwrap()].1, "fake-proxy-2");
    }

    #[test]
    fn a_failed_step_is_logged_with_its_cause_and_the_run_goes_on() {
        let p = plan("nginx-reload", "[{reload: true}, {scale: 3}]", 1);
        let (out, _, _) = run_on_fakes(&p, Faults(vec!["reload"]), |_, _| {});
        let r = &out.expect("a failed step fails no run").results[0];
        let ev = kinds(r);
        let failed = ev
            .iter()
            .find(|e| e.0 == K::ChangeFailed)
            .expect("the failure logged");
        assert!(failed.1.contains("told to fail"), "{failed:?}");
        assert!(!ev.iter().any(|e| e.0 == K::ReloadDone), "{ev:?}");
        assert!(ev.contains(&(K::ScaleRequested, "2 -> 3".into())), "{ev:?}");
        assert_eq!(r.lab.as_ref().unwrap().windows.len(), 2);
    }

    #[test]
    fn a_failed_deployment_is_the_runs_error_naming_the_system() {
        let p = plan("nginx-reload", "[]", 1);
        let (out, calls, _) = run_on_fakes(&p, Faults(vec!["start"]), |_, _| {});
        let Err(RunError::Lab { system, .. }) = out else {
            panic!("a lab error");
        };
        assert_eq!(system, "nginx-reload");
        assert!(!calls.all().iter().any(|c| c == "load start"));
        assert!(calls.all().contains(&"platform teardown".to_string()));
    }

    #[test]
    fn an_interrupt_ends_the_load_keeps_what_was_measured_and_runs_nothing_more() {
        let p = plan(
            "nginx-reload, haproxy-runtime",
            "[{wait: 10s}, {scale: 3}]",
            1,
        );
        let (out, calls, done) = run_on_fakes(&p, Faults::default(), |line, stop| {
            if line.contains("load running") {
                stop.store(true, Ordering::Relaxed);
            }
        });
        let out = out.expect("an interrupted run is a result");
        assert!(out.partial);
        assert_eq!(out.results.len(), 1);
        assert!(out.results[0].partial);
        assert_eq!(done, ["nginx-reload"]);
        let all = calls.all();
        assert_eq!(all.iter().filter(|c| *c == "load start").count(), 1);
        assert!(
            !all.iter().any(|c| c.starts_with("platform scale")),
            "{all:?}"
        );
    }

    #[test]
    fn repetitions_take_turns_and_each_result_holds_them_all() {
        let p = plan("nginx-reload, haproxy-runtime", "[]", 2);
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let (out, _, done) = run_on_fakes(&p, Faults::default(), move |line, _| {
            if line.contains(": starting") {
                o.lock().unwrap().push(line.to_string());
            }
        });
        let out = out.expect("the run");
        assert_eq!(
            *order.lock().unwrap(),
            [
                "nginx-reload: starting (run 1/2)",
                "haproxy-runtime: starting (run 1/2)",
                "nginx-reload: starting (run 2/2)",
                "haproxy-runtime: starting (run 2/2)",
            ]
        );
        assert_eq!(out.results.len(), 2);
        for r in &out.results {
            assert_eq!(r.repetitions.len(), 2, "two repetitions kept");
            assert_eq!(r.requests.completed, 20, "their requests pooled");
        }
        // Told once each, at the end, with both repetitions in.
        assert_eq!(done, ["nginx-reload", "haproxy-runtime"]);
    }
}
