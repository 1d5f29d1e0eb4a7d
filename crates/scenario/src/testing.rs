//! Fakes for fast tests of the runner, as kube-rs ships a mock API for its clients:
//! a platform whose backends are only names, a driver that records what it is asked
//! (and fails what it is told to fail), and a load runner that measures nothing but
//! counts one window per change marked. Nothing here starts a process, opens a
//! socket or sends a request, so a test of the runner's logic (which change opens
//! which window, what is logged when a step fails, what an interrupt leaves, how
//! repetitions take turns) runs in milliseconds. Every call is written to a shared
//! [`Calls`] log, in order, for the test to read.

use crate::plan::Case;
use crate::runner::{LoadError, LoadRun, LoadRunner, PlatformFor};
use engine::windows::Tally;
use lab::platform::{SiteSpec, StopMode};
use lab::{
    Capabilities, Driver, DriverContext, Endpoint, Expect, Platform, PlatformEvent, Route,
    SutError, Target,
};
use results::RunResult;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fakes were asked, in order: `platform prepare nginx-reload`,
/// `driver reload`, `load start`.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<String>>>);

impl Calls {
    fn push(&self, call: impl Into<String>) {
        if let Ok(mut l) = self.0.lock() {
            l.push(call.into());
        }
    }

    /// Every call so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// What the fakes fail: a driver or platform call whose name (`reload`,
/// `restart_proxy`, `prepare`) is listed fails with a typed error.
#[derive(Clone, Default)]
pub struct Faults(pub Vec<&'static str>);

impl Faults {
    fn check(&self, calls: &Calls, who: &str, what: &'static str) -> Result<(), SutError> {
        calls.push(format!("{who} {what}"));
        if self.0.contains(&what) {
            return Err(SutError::Unsupported {
                system: format!("fake {who}"),
                what: format!("{what} (told to fail)"),
            });
        }
        Ok(())
    }
}

/// A platform of `replicas` backends named `b1`, `b2`, ... at made-up loopback
/// addresses, whose driver is a [`FakeDriver`].
pub struct FakePlatform {
    calls: Calls,
    faults: Faults,
    /// The backends in service, by number.
    up: Vec<u32>,
    next: u32,
}

/// Where every case deploys in a test: a fresh [`FakePlatform`] sharing `calls`.
pub fn platforms(calls: &Calls, faults: &Faults) -> PlatformFor {
    let (calls, faults) = (calls.clone(), faults.clone());
    Box::new(move |_: &Case| {
        let p: Box<dyn Platform> = Box::new(FakePlatform {
            calls: calls.clone(),
            faults: faults.clone(),
            up: Vec::new(),
            next: 1,
        });
        Ok(p)
    })
}

impl FakePlatform {
    fn endpoint(n: u32) -> Endpoint {
        Endpoint {
            id: format!("b{n}"),
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
        }
    }
}

impl Platform for FakePlatform {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn prepare(&mut self, spec: &SiteSpec) -> Result<DriverContext, SutError> {
        self.faults.check(&self.calls, "platform", "prepare")?;
        self.up = (1..=spec.replicas).collect();
        self.next = spec.replicas + 1;
        Ok(DriverContext::with_s1_tuning(
            spec.out_dir.clone(),
            spec.out_dir.clone(),
            (spec.out_dir.join("cert.pem"), spec.out_dir.join("key.pem")),
            (0, 0),
        ))
    }

    fn target(&self) -> Target {
        Target {
            url: "http://127.0.0.1:1/".into(),
            ..Target::default()
        }
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.up.iter().map(|&n| Self::endpoint(n)).collect()
    }

    fn replicas(&self) -> u32 {
        self.up.len() as u32
    }

    fn scale(&mut self, to: u32, stop: StopMode, on: &mut dyn FnMut(PlatformEvent)) {
        self.calls.push(format!("platform scale {to}"));
        while self.replicas() < to {
            let n = self.next;
            self.next += 1;
            self.up.push(n);
            on(PlatformEvent::Ready {
                endpoint: Self::endpoint(n),
                took: Duration::from_millis(1),
            });
        }
        while self.replicas() > to {
            let n = self.up.pop().unwrap_or_default();
            on(PlatformEvent::Stopping {
                id: format!("b{n}"),
                mode: stop,
            });
        }
    }

    fn tick(&mut self) {}

    fn teardown(&mut self) -> Result<(), SutError> {
        self.calls.push("platform teardown");
        Ok(())
    }

    fn driver_for(&mut self, system: &str) -> Option<Result<Box<dyn Driver>, SutError>> {
        self.calls.push(format!("platform driver_for {system}"));
        Some(Ok(Box::new(FakeDriver {
            calls: self.calls.clone(),
            faults: self.faults.clone(),
            running: false,
        })))
    }
}

/// A proxy that only records what it is asked, and fails what [`Faults`] lists.
pub struct FakeDriver {
    calls: Calls,
    faults: Faults,
    running: bool,
}

impl Driver for FakeDriver {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::LOCAL_PROXY
    }
    fn prepare(&mut self, _: &DriverContext, _: &[Endpoint]) -> Result<(), SutError> {
        self.faults.check(&self.calls, "driver", "prepare")
    }
    fn start(&mut self) -> Result<(), SutError> {
        self.faults.check(&self.calls, "driver", "start")?;
        self.running = true;
        Ok(())
    }
    fn wait_ready(&mut self, _: Duration) -> Result<(), SutError> {
        Ok(())
    }
    fn set_endpoints(&mut self, endpoints: &[Endpoint]) -> Result<(), SutError> {
        self.calls.push(format!(
            "driver set_endpoints {}",
            endpoints
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ));
        Ok(())
    }
    fn apply_route(&mut self, route: Route) -> Result<(), SutError> {
        self.faults.check(&self.calls, "driver", "apply_route")?;
        self.calls.push(format!("driver route {}", route.name()));
        Ok(())
    }
    fn reload(&mut self) -> Result<(), SutError> {
        self.faults.check(&self.calls, "driver", "reload")
    }
    fn restart_proxy(&mut self, replaced: &mut dyn FnMut(String)) -> Result<(), SutError> {
        self.faults.check(&self.calls, "driver", "restart_proxy")?;
        replaced("fake-proxy-2".into());
        Ok(())
    }
    fn settle(&mut self, _: &Expect, _: Duration) -> Result<(), SutError> {
        Ok(())
    }
    fn alive(&mut self) -> bool {
        self.running
    }
    fn stop(&mut self) -> Result<(), SutError> {
        self.calls.push("driver stop");
        self.running = false;
        Ok(())
    }
    fn versions(&self) -> Vec<(String, String)> {
        vec![("fake".into(), "1".into())]
    }
}

/// A load that sends nothing: it starts its window at once, takes each change's mark
/// as it comes, and at the end (or when stopped) counts `per_window` responses of
/// 1 ms in each window: one before the changes and one per mark.
pub struct FakeLoad {
    pub calls: Calls,
    pub per_window: u64,
}

impl LoadRunner for FakeLoad {
    fn run(&self, load: LoadRun) -> Result<(RunResult, Tally), LoadError> {
        self.calls.push("load start");
        let origin = load.clock.now();
        (load.on_start)(origin);
        let end = origin + u64::try_from(load.spec.duration.as_nanos()).unwrap_or(u64::MAX);
        let mut marks = 0;
        let stopped = loop {
            while load.marks.try_recv().is_ok() {
                marks += 1;
            }
            if load.stop.load(Ordering::Relaxed) {
                break true;
            }
            if load.clock.now() >= end {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let mut tally = Tally::default();
        for w in 0..=marks {
            for _ in 0..self.per_window {
                tally.response(w, 1_000_000, 200);
            }
        }
        // Histograms as a real run's, so results combine (repetitions) as theirs do.
        let mut hist =
            hdrhistogram::Histogram::<u64>::new(3).map_err(|e| LoadError::Elsewhere(e.into()))?;
        for _ in 0..self.per_window * (marks as u64 + 1) {
            let _ = hist.record(1000);
        }
        let mut r = RunResult {
            partial: stopped,
            histogram: results::histogram::encode_base64(&hist),
            histogram_uncorrected: results::histogram::encode_base64(&hist),
            target: load.spec.url.clone(),
            duration_s: (load.clock.now() - origin) as f64 / 1e9,
            ..RunResult::default()
        };
        r.requests.completed = self.per_window * (marks as u64 + 1);
        self.calls.push(format!("load end {marks} marks"));
        Ok((r, tally))
    }
}
