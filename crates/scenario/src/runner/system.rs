//! One system under test while its load runs: its platform, its driver, and the
//! event log on the load's clock; dropping it stops every process.

use super::{RunOptions, Watch};
use engine::windows::Marks;
use lab::backends::StopMode;
use lab::{Driver, Platform};
use results::clock::{Clock, Nanos};
use results::{Event, EventKind, ResourceSample};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The event log of one system, on the load's clock.
pub(super) struct Events {
    pub(super) clock: Clock,
    /// Clock time of the start of the measured window (0 until known).
    pub(super) origin: Nanos,
    pub(super) list: Vec<(Nanos, EventKind, String, Option<f64>)>,
    /// Where each change asked for starts a window, for the engine to count
    /// requests by.
    pub(super) marks: Arc<Marks>,
    /// The event that opened each marked window, by index into `list`.
    pub(super) opened: Vec<usize>,
    /// Where each mark also goes, when the load runs elsewhere ([`LoadRunner`]).
    pub(super) forward: Option<mpsc::Sender<Nanos>>,
    /// [`LoadRunner::mark_lead`], when the load runs elsewhere.
    pub(super) lead: Nanos,
    /// Told of each change that opens a window ([`RunOptions::watch`]).
    pub(super) watch: Option<Arc<dyn Watch>>,
}

impl Events {
    pub(super) fn log(
        &mut self,
        kind: EventKind,
        detail: impl Into<String>,
        took: Option<Duration>,
    ) -> Nanos {
        let detail = detail.into();
        let mut t = self.clock.now();
        let opens = kind.change().is_some() && self.origin != 0 && t >= self.origin;
        if opens && self.forward.is_some() {
            // Announced ahead, so that a generator elsewhere has the mark by then.
            t += self.lead;
        }
        // Marked as soon as the time is fixed: the requests intended from `t` on
        // belong to this change.
        if opens && self.marks.mark(t).is_some() {
            self.opened.push(self.list.len());
            if let Some(f) = &self.forward {
                let _ = f.send(t);
            }
            // The change itself is made at its time, not before.
            while self.clock.now() < t {
                std::thread::sleep(Duration::from_nanos(t.saturating_sub(self.clock.now())));
            }
            if let (Some(w), Some(change)) = (&self.watch, kind.change()) {
                w.step(self.opened.len(), format!("{change} {detail}").trim_end());
            }
        }
        self.list
            .push((t, kind, detail, took.map(|d| d.as_secs_f64() * 1000.0)));
        t
    }

    pub(super) fn to_events(&self) -> Vec<Event> {
        self.list
            .iter()
            .map(|(t, k, d, took)| Event {
                t_ms: (*t as f64 - self.origin as f64) / 1e6,
                kind: *k,
                detail: d.clone(),
                took_ms: *took,
            })
            .collect()
    }
}

/// Everything one system's run holds; dropping it stops every process.
pub(crate) struct System {
    pub(crate) driver: Box<dyn Driver>,
    pub(crate) platform: Box<dyn Platform>,
    pub(super) events: Events,
    pub(super) stop_mode: StopMode,
    pub(super) stop: Arc<AtomicBool>,
    /// Clock time at which the load ends.
    pub(super) end: Nanos,
    pub(super) proxy_died: bool,
    /// Backends that became ready (id, time) and were removed (id, time).
    pub(super) added: Vec<(String, Nanos)>,
    pub(super) removed: Vec<(String, Nanos)>,
    pub(super) settle_timeout: Duration,
    /// What the system under test spends, read once a second on the load's clock.
    pub(super) usage: lab::usage::Usage,
    pub(super) resources: Vec<ResourceSample>,
    /// Clock time of the next reading; time and CPU total of the last one.
    pub(super) next_reading: Nanos,
    pub(super) last_reading: (Nanos, f64),
    /// Closed already ([`System::close`]): nothing left to stop.
    pub(super) closed: bool,
    /// Where the warnings of a system dropped unclosed go ([`RunOptions::warn`]).
    pub(super) warn: Arc<dyn Fn(&str) + Send + std::marker::Sync>,
    /// The route set in force (`routes:`), where its routes are probed (the proxy's
    /// plain-HTTP port) and for how long, and its changes during the load.
    pub(super) routes: Option<RoutesInForce>,
    /// The serial (hex) of the certificate the proxy serves, when it serves TLS:
    /// what a rotation replaces.
    pub(super) serial: Option<String>,
    /// Each rotation asked for, in order: the serial before and the new one.
    pub(super) rotated: Vec<(String, String)>,
    /// The behaviour probes' rounds during the load (`probes.during`), and how many
    /// change windows had opened at the last round asked for.
    pub(super) probes: Option<super::probing::During>,
    pub(super) probed_windows: usize,
}

/// A system's route set while the load runs (see [`System::change_route_set`]).
pub(super) struct RoutesInForce {
    pub(super) set: lab::RouteSet,
    pub(super) addr: std::net::SocketAddr,
    pub(super) bound: Duration,
    pub(super) changes: Vec<results::RouteSetChange>,
}

impl System {
    /// A system of `driver` on `platform`, its events on `clock`, before anything is
    /// set up.
    pub(super) fn new(
        driver: Box<dyn Driver>,
        platform: Box<dyn Platform>,
        clock: Clock,
        opts: &RunOptions,
    ) -> System {
        System {
            driver,
            platform,
            events: Events {
                clock,
                origin: 0,
                list: Vec::new(),
                marks: Arc::new(Marks::new()),
                opened: Vec::new(),
                forward: None,
                lead: 0,
                watch: None,
            },
            stop_mode: StopMode::Graceful,
            stop: opts.stop.clone(),
            end: u64::MAX,
            proxy_died: false,
            added: Vec::new(),
            removed: Vec::new(),
            settle_timeout: Duration::from_secs(10),
            usage: lab::usage::Usage::default(),
            resources: Vec::new(),
            next_reading: 0,
            last_reading: (0, 0.0),
            closed: false,
            warn: opts.warn.clone(),
            routes: None,
            serial: None,
            rotated: Vec::new(),
            probes: None,
            probed_windows: 0,
        }
    }

    /// Adds one route to the set in force, or removes its last, while the load runs,
    /// and watches the proxy for the change from the moment it is asked: a new route
    /// until it answers as itself, a removed one until it no longer does. The
    /// change's window (opened by its event) holds the load's errors meanwhile.
    /// way (an object the driver could not delete, a namespace left behind), one
    /// line each, for the result. Once: a second call returns nothing.
    pub(crate) fn close(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.closed, true) {
            return Vec::new();
        }
        let stopped = self.driver.stop();
        let mut left = self.driver.take_warnings();
        left.extend(stopped.err());
        left.extend(self.platform.teardown().err());
        left.iter().map(|e| results::with_causes(e)).collect()
    }
}

impl Drop for System {
    /// A system whose run failed is dropped unclosed: its warnings have no result to
    /// go into, and go to [`RunOptions::warn`].
    fn drop(&mut self) {
        for w in self.close() {
            (self.warn)(&w);
        }
    }
}

impl System {
    /// After a step: a round of probes when the step opened a change window since
    /// the last round, named after the change that opened it.
    pub(super) fn probe_after_change(&mut self) {
        let Some(during) = &self.probes else { return };
        if self.events.opened.len() == self.probed_windows {
            return;
        }
        self.probed_windows = self.events.opened.len();
        let Some(&i) = self.events.opened.last() else {
            return;
        };
        let (_, kind, detail, _) = &self.events.list[i];
        let name = format!("{} {detail}", kind.change().unwrap_or_default());
        during.after(name.trim().to_string(), self.events.origin);
    }

    pub(super) fn done(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.events.clock.now() >= self.end
    }

    /// Waits until `t` (clock time) or the end of the load, watching the proxy.
    pub(super) fn sleep_until(&mut self, t: Nanos) {
        loop {
            self.watch();
            let now = self.events.clock.now();
            if now >= t || self.stop.load(Ordering::Relaxed) {
                return;
            }
            let left = Duration::from_nanos(t - now).min(Duration::from_millis(20));
            std::thread::sleep(left);
        }
    }

    /// Reads what the system under test spent, once a second of the measured window
    /// (the first reading, at its start, is the baseline).
    pub(super) fn read_usage(&mut self) {
        let origin = self.events.origin;
        let now = self.events.clock.now();
        if origin == 0 || now < self.next_reading || now > self.end {
            return;
        }
        let groups = self.driver.process_groups();
        if groups.is_empty() {
            return;
        }
        let r = self.usage.read(&groups);
        let (t0, cpu0) = self.last_reading;
        if self.next_reading != 0 && now > t0 {
            self.resources.push(ResourceSample {
                t_s: (now - origin) as f64 / 1e9,
                cpu: (r.cpu_s - cpu0).max(0.0) / ((now - t0) as f64 / 1e9),
                rss_mib: r.rss_bytes as f64 / (1u64 << 20) as f64,
                processes: r.processes,
            });
        }
        self.last_reading = (now, r.cpu_s);
        let second = 1_000_000_000;
        self.next_reading = origin.max(self.next_reading) + second;
    }

    /// Notices a proxy that died (once) and reaps drained backends.
    pub(super) fn watch(&mut self) {
        self.read_usage();
        if !self.proxy_died && !self.driver.alive() {
            self.proxy_died = true;
            self.events
                .log(EventKind::ProxyDied, self.driver.name(), None);
        }
        self.platform.tick();
    }
}
