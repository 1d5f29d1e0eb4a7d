//! Live metrics of a running load, for dashboards: Grafana shows ingressbench's view
//! of the system under test beside the controller's own metrics while a run goes on.
//!
//! [`Live`] keeps what the engine already hands the progress line once a second (a
//! [`TimelineEntry`]) as counters and last-second gauges, and renders them as
//! Prometheus text 0.0.4 or OpenMetrics 1.0.0 ([`Format`]). It owns no socket (the
//! binary serves [`Live::render`]) and is never on the hot path: it is updated once
//! a second by the collector and read once a scrape. Reports are still drawn from
//! the saved result, not from here.

use results::{ErrorKind, TimelineEntry};
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};

/// Which text a scrape gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4, what any scraper reads.
    Prometheus,
    /// OpenMetrics 1.0.0: counters' families named without `_total`, `info` as a
    /// type of its own, `# EOF` at the end.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` with a weight (`q`) above 0 and at least that
    /// of any plain text it also takes (Prometheus asks for both, OpenMetrics first);
    /// Prometheus text otherwise, and without the header.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let (mut open, mut plain) = (0.0_f64, 0.0_f64);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, v)| v.trim().parse().unwrap_or(0.0));
            match media.as_str() {
                "application/openmetrics-text" => open = open.max(q),
                "text/plain" | "text/*" | "*/*" => plain = plain.max(q),
                _ => {}
            }
        }
        if open > 0.0 && open >= plain {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of the text in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The live view of one run: `load`'s single target, or a scenario's systems in turn.
///
/// Shared between the thread that feeds it (the engine's collector, the scenario
/// runner) and the one that serves it; each call holds its lock briefly.
#[derive(Debug)]
pub struct Live {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// `load` or `run`.
    command: &'static str,
    scenario: Option<String>,
    /// Every system seen, in order; the last is the one under load. Counters are
    /// kept for all, so that an `increase()` over the whole run still sees the
    /// systems that are done.
    systems: Vec<System>,
}

#[derive(Debug)]
struct System {
    /// `None` for `load`, which has no system under test by name.
    name: Option<String>,
    target: String,
    /// Requests per second asked for; `None` for a closed loop.
    rate: Option<f64>,
    sent: u64,
    /// Finished requests: `ok`, then each [`ErrorKind::ALL`] in order.
    outcomes: [u64; 1 + ErrorKind::ALL.len()],
    /// The last complete second.
    last: Option<Last>,
    /// Changes made so far and the last one, as the event log says it.
    step: (usize, String),
}

impl System {
    fn new(name: Option<&str>, target: &str, rate: Option<f64>) -> Self {
        System {
            name: name.map(str::to_string),
            target: target.to_string(),
            rate,
            sent: 0,
            outcomes: [0; 1 + ErrorKind::ALL.len()],
            last: None,
            step: (0, String::new()),
        }
    }

    /// The label every series of this system carries.
    fn base(&self) -> Vec<(&str, &str)> {
        self.name.iter().map(|n| ("system", n.as_str())).collect()
    }
}

/// What the gauges show of the last complete second.
#[derive(Debug, Clone, Copy)]
struct Last {
    /// Its index in the measured window.
    t: u64,
    sent: u64,
    /// Corrected latency percentiles and the largest lag, in ms.
    p50: f64,
    p99: f64,
    max: f64,
    lag_max: f64,
}

/// The outcome label values, in the order of [`System::outcomes`].
fn outcomes() -> impl Iterator<Item = &'static str> {
    std::iter::once("ok").chain(ErrorKind::ALL.iter().map(|k| k.name()))
}

impl Live {
    /// The view of `ingressbench load` against `target`, asked for `rate` requests
    /// per second (`None`: `--max`).
    pub fn load(target: &str, rate: Option<f64>) -> Live {
        Live::with(State {
            command: "load",
            scenario: None,
            systems: vec![System::new(None, target, rate)],
        })
    }

    /// The view of `ingressbench run` of scenario `name`, before its first system.
    pub fn scenario(name: &str) -> Live {
        Live::with(State {
            command: "run",
            scenario: Some(name.to_string()),
            systems: Vec::new(),
        })
    }

    fn with(state: State) -> Live {
        Live {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain counters: still worth serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A system's load starts (its name as its results folder is named: the system,
    /// its variant or its fraction): its series start at 0, and the last-second
    /// gauges follow it from now on.
    pub fn system(&self, name: &str, target: &str, rate: Option<f64>) {
        self.lock()
            .systems
            .push(System::new(Some(name), target, rate));
    }

    /// The `index`th change (from 1) of the current system was made: `change` as
    /// the event log says it (`scale 2 -> 4`, `route v2`, `reload`).
    pub fn step(&self, index: usize, change: &str) {
        if let Some(s) = self.lock().systems.last_mut() {
            s.step = (index, change.to_string());
        }
    }

    /// A second of the current system's load is complete.
    pub fn second(&self, e: &TimelineEntry) {
        let mut st = self.lock();
        let Some(s) = st.systems.last_mut() else {
            return;
        };
        s.sent += e.sent;
        s.outcomes[0] += e.completed;
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            s.outcomes[1 + i] += e.errors_by_kind.get(k.name()).copied().unwrap_or(0);
        }
        s.last = Some(Last {
            t: e.t,
            sent: e.sent,
            p50: e.p50,
            p99: e.p99,
            max: e.max,
            lag_max: e.lag_max_ms,
        });
    }

    /// The metrics as text in format `f`, every name prefixed `ingressbench_`.
    pub fn render(&self, f: Format) -> String {
        let st = self.lock();
        let mut out = Out {
            f,
            text: String::new(),
        };
        let current = st.systems.last();

        out.family("run", Kind::Info, "What is measured: the command (load or run), the scenario, the system under test and the URL the load is sent to; always 1.");
        let mut info = vec![("command", st.command)];
        if let Some(s) = &st.scenario {
            info.push(("scenario", s.as_str()));
        }
        if let Some(c) = current {
            info.extend(c.base());
            info.push(("target", c.target.as_str()));
        }
        out.sample("run", Kind::Info, &info, 1);

        out.family(
            "requests_sent",
            Kind::Counter,
            "Requests sent in the measured window (the warm-up is not counted).",
        );
        for s in &st.systems {
            out.sample("requests_sent", Kind::Counter, &s.base(), s.sent);
        }
        out.family("requests", Kind::Counter, "Requests finished in the measured window, by outcome: ok (a response below 400) or the error kind (status: a response of 400 or more; connect, connect_timeout, tls, read, write, timeout, framing; HTTP/2: reset, grpc).");
        for s in &st.systems {
            for (o, n) in outcomes().zip(s.outcomes) {
                let mut l = s.base();
                l.push(("outcome", o));
                out.sample("requests", Kind::Counter, &l, n);
            }
        }
        let Some(c) = current else {
            return out.end();
        };
        let base = c.base();
        if st.command == "run" {
            out.family("step", Kind::Gauge, "Changes of the scenario made so far in the system's measured window (0: none yet); the label change is the last one, as the event log says it (scale 2 -> 4, route v2, reload, restart).");
            let mut l = base.clone();
            l.push(("change", c.step.1.as_str()));
            out.sample("step", Kind::Gauge, &l, c.step.0);
        }
        if let Some(r) = c.rate {
            out.family(
                "target_requests_per_second",
                Kind::Gauge,
                "The rate the load is asked to send (absent for a closed loop).",
            );
            out.sample("target_requests_per_second", Kind::Gauge, &base, r);
        }
        out.family(
            "elapsed_seconds",
            Kind::Gauge,
            "Seconds of the measured window completed so far.",
        );
        let elapsed = c.last.as_ref().map_or(0, |e| e.t + 1);
        out.sample("elapsed_seconds", Kind::Gauge, &base, elapsed);
        let Some(e) = &c.last else {
            return out.end();
        };
        out.family(
            "achieved_requests_per_second",
            Kind::Gauge,
            "Requests sent in the last complete second.",
        );
        out.sample("achieved_requests_per_second", Kind::Gauge, &base, e.sent);
        out.family("latency_seconds", Kind::Gauge, "Corrected latency (from the intended send time) of the requests finished in the last complete second, by percentile: p50, p99, max (0 when none finished).");
        for (p, ms) in [("p50", e.p50), ("p99", e.p99), ("max", e.max)] {
            let mut l = base.clone();
            l.push(("percentile", p));
            out.sample("latency_seconds", Kind::Gauge, &l, ms / 1000.0);
        }
        out.family("generator_lag_max_seconds", Kind::Gauge, "The generator's largest send lag in the last complete second: how far behind its schedule it fell.");
        out.sample(
            "generator_lag_max_seconds",
            Kind::Gauge,
            &base,
            e.lag_max / 1000.0,
        );
        out.end()
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    /// Always 1, its labels the information: OpenMetrics' `info`, a gauge in
    /// Prometheus text.
    Info,
}

/// The text under way.
struct Out {
    f: Format,
    text: String,
}

impl Out {
    /// The family's name as its `# HELP` and `# TYPE` lines name it: OpenMetrics
    /// names the family, Prometheus text the sample.
    fn family_name(&self, name: &str, kind: Kind) -> String {
        match (self.f, kind) {
            (Format::OpenMetrics, _) => format!("ingressbench_{name}"),
            (Format::Prometheus, Kind::Counter) => format!("ingressbench_{name}_total"),
            (Format::Prometheus, Kind::Info) => format!("ingressbench_{name}_info"),
            (Format::Prometheus, Kind::Gauge) => format!("ingressbench_{name}"),
        }
    }

    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let family = self.family_name(name, kind);
        let kind = match (self.f, kind) {
            (_, Kind::Counter) => "counter",
            (Format::OpenMetrics, Kind::Info) => "info",
            _ => "gauge",
        };
        // Static text with nothing to escape: Prometheus text escapes a quote in a
        // label value but not in help, so none is written there.
        debug_assert!(!help.contains(['\\', '"', '\n']), "{help}");
        let _ = writeln!(self.text, "# HELP {family} {help}");
        let _ = writeln!(self.text, "# TYPE {family} {kind}");
    }

    fn sample(
        &mut self,
        name: &str,
        kind: Kind,
        labels: &[(&str, &str)],
        value: impl std::fmt::Display,
    ) {
        let suffix = match kind {
            Kind::Counter => "_total",
            Kind::Info => "_info",
            Kind::Gauge => "",
        };
        let _ = write!(self.text, "ingressbench_{name}{suffix}");
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    fn end(mut self) -> String {
        if self.f == Format::OpenMetrics {
            self.text.push_str("# EOF\n");
        }
        self.text
    }
}

/// A label value as both formats quote it: backslash, double quote
/// and line feed escaped, so a system or URL can hold any text.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
