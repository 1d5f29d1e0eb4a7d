//! The changes a case makes while its load runs, each logged twice on the load's
//! clock: when it was asked for and when it took effect.

use super::system::{Events, System};
use crate::{RestartWhat, Step};
use lab::backends::StopMode;
use lab::endpoint_push::{self, Sync};
use lab::{Driver, Expect, PlatformEvent, SutError};
use results::clock::Nanos;
use results::EventKind;
use std::time::{Duration, Instant};

impl System {
    pub(super) fn change_route_set(&mut self, step: crate::RouteSetStep) {
        let Some(r) = self.routes.as_ref() else {
            self.events.log(
                EventKind::ChangeFailed,
                "route_set: no route set in force",
                None,
            );
            return;
        };
        let (set, addr, bound) = (r.set, r.addr, r.bound);
        let (new, i, watched) = match step {
            // A route changed in place before stays changed.
            crate::RouteSetStep::Add => (
                lab::RouteSet {
                    count: set.count + 1,
                    ..set
                },
                set.count,
                None,
            ),
            crate::RouteSetStep::Remove if set.count > 1 => (
                lab::RouteSet {
                    count: set.count - 1,
                    revised: set.revised.filter(|&r| r < set.count - 1),
                    ..set
                },
                set.count - 1,
                Some(set),
            ),
            crate::RouteSetStep::Remove => {
                self.events.log(
                    EventKind::ChangeFailed,
                    "route_set remove: the set has one route left",
                    None,
                );
                return;
            }
            crate::RouteSetStep::Change => (set.revise(0), 0, None),
        };
        // A removed route is probed as the set before had it, an added or changed
        // one as after (until it answers with its new marker).
        let probe_set = watched.unwrap_or(new);
        let served = step != crate::RouteSetStep::Remove;
        let detail = format!("{} {}", step.name(), new.name(i));
        let writes0 = self.driver.route_status_writes();
        let (t0, since) = (self.events.clock.now(), Instant::now());
        // Whether the driver took the new set, settled or not: it holds it then.
        let mut taken = false;
        let ((shown, probes), applied, asked) = std::thread::scope(|s| {
            let watcher =
                s.spawn(move || lab::routes::watch(addr, &probe_set, i, since, bound, served));
            let before = self.events.list.len();
            self.change(
                Some(EventKind::RouteSetRequested),
                &detail,
                EventKind::RouteSetApplied,
                Some(Expect::Applied),
                |d, _| {
                    let r = d.apply_route_set(&new).map(|_| ());
                    taken = r.is_ok();
                    r
                },
            );
            let applied = self.events.list[before..]
                .iter()
                .find(|e| e.1 == EventKind::RouteSetApplied)
                .and_then(|e| e.3);
            // When the change was asked: later than `t0` when a load elsewhere needs
            // its mark ahead (the log waits for the mark's time before the change).
            let asked = self.events.list.get(before).map_or(t0, |e| e.0.max(t0));
            (watcher.join().unwrap_or((None, 0)), applied, asked)
        });
        // The watch began at `t0`; the change was made at `asked`.
        let lead = Duration::from_nanos(asked - t0);
        let shown = shown.map(|d| d.saturating_sub(lead));
        let at_ms = asked.saturating_sub(self.events.origin) as f64 / 1e6;
        let status_writes = self
            .driver
            .route_status_writes()
            .map(|w| w.saturating_sub(writes0.unwrap_or(0)));
        let Some(r) = self.routes.as_mut() else {
            return;
        };
        if taken {
            r.set = new;
        }
        r.changes.push(results::RouteSetChange {
            change: step.name().to_string(),
            route: new.name(i),
            routes_after: if taken { new.count } else { set.count },
            at_ms,
            applied_ms: applied,
            shown_ms: shown.map(|d| d.as_secs_f64() * 1e3),
            bound_ms: bound.as_secs_f64() * 1e3,
            probes,
            status_writes,
        });
    }

    /// Stops the proxy and tears the platform down; returns what went wrong on the
    /// Asks for a change (`ask`, logged as `requested`), then waits until `expect`
    /// holds (none: `ask` itself waited for its end), logged as `done` with the time
    /// from the request, or logs the failure. `ask` is handed a callback for each
    /// pod or process it replaces, logged as `pod_replaced` as it happens. Returns
    /// whether it succeeded.
    pub(super) fn change<F>(
        &mut self,
        requested: Option<EventKind>,
        detail: &str,
        done: EventKind,
        expect: Option<Expect>,
        ask: F,
    ) -> bool
    where
        F: FnOnce(&mut dyn Driver, &mut dyn FnMut(String)) -> Result<(), SutError>,
    {
        // Timed from when the change is made: a load elsewhere has the request
        // logged (and the change made) only after its mark's lead.
        if let Some(kind) = requested {
            self.events.log(kind, detail, None);
        }
        let t0 = Instant::now();
        let timeout = self.settle_timeout;
        let (driver, events) = (&mut self.driver, &mut self.events);
        let res = ask(driver.as_mut(), &mut |pod: String| {
            events.log(EventKind::PodReplaced, pod, Some(t0.elapsed()));
        })
        .and_then(|_| match &expect {
            Some(e) => self.driver.settle(e, timeout),
            None => Ok(()),
        });
        match res {
            Ok(()) => {
                self.events.log(done, detail, Some(t0.elapsed()));
                true
            }
            Err(e) => {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("{detail}: {}", results::Causes(&e)),
                    Some(t0.elapsed()),
                );
                false
            }
        }
    }

    /// `restart: proxy`: the driver restarts its proxy its own way, and the
    /// endpoints in force are given to the new process. A proxy that does not come
    /// back is stopped for good (nothing of it left running), the failure logged,
    /// and the rest of the run measures what that does to the traffic.
    pub(super) fn restart_proxy(&mut self) {
        let eps = self.platform.endpoints();
        let kind = self.driver.restart_kind();
        let detail = format!(
            "proxy ({}{})",
            kind.how,
            if kind.seamless { ", seamless" } else { "" }
        );
        let timeout = self.settle_timeout;
        let ok = self.change(
            Some(EventKind::RestartRequested),
            &detail,
            EventKind::RestartDone,
            None,
            |d, replaced| {
                d.restart_proxy(replaced)?;
                // The endpoints given again, and in force, before the restart is done.
                endpoint_push::endpoints_changed(d, &eps)?;
                d.settle(&Expect::endpoints(&eps), timeout)
            },
        );
        if !ok && !self.driver.alive() {
            if let Err(e) = self.driver.stop() {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!(
                        "stopping what the failed restart left: {}",
                        results::Causes(&e)
                    ),
                    None,
                );
            }
        }
    }

    /// `rotate: certificate`: a new certificate from the platform (same names, new
    /// key and serial), given to the proxy the way its controller does. The event
    /// names both serials, which the result's rotation figures are read by.
    pub(super) fn rotate_certificate(&mut self) {
        let issued = self
            .platform
            .new_certificate()
            .and_then(|(cert, key)| Ok((lab::certs::serial(&cert)?, cert, key)));
        let (serial, cert, key) = match issued {
            Ok(v) => v,
            Err(e) => {
                // Still a rotation asked for: its window, and its failure.
                self.events
                    .log(EventKind::RotateRequested, "certificate", None);
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("certificate: {}", results::Causes(&e)),
                    None,
                );
                return;
            }
        };
        let old = self.serial.replace(serial.clone()).unwrap_or_default();
        // The event names the serials by their first 8 digits (enough to tell a
        // run's apart, short enough for a chart's marker); the result has them whole.
        let short = |s: &str| s.chars().take(8).collect::<String>();
        self.rotated.push((old.clone(), serial.clone()));
        let ok = self.change(
            Some(EventKind::RotateRequested),
            &format!("certificate {} -> {}", short(&old), short(&serial)),
            EventKind::RotateDone,
            Some(Expect::Applied),
            |d, _| d.rotate_certificate(&cert, &key),
        );
        if !ok {
            // Still the old one in force, as far as anyone knows.
            self.serial = Some(old);
        }
    }

    /// `drain: node`: the platform cordons the node and evicts its backends; each
    /// eviction and each replacement is logged as it happens, then the proxy is
    /// settled on the endpoints left.
    pub(super) fn drain(&mut self, node: Option<&str>) {
        self.events
            .log(EventKind::DrainRequested, node.unwrap_or("node"), None);
        let t0 = Instant::now();
        let res = {
            let mut on = on_platform(
                &mut self.events,
                &mut self.added,
                &mut self.removed,
                EventKind::PodEvicted,
            );
            self.platform.drain(node, &mut on)
        };
        match res {
            Ok(name) => {
                self.events
                    .log(EventKind::DrainDone, name, Some(t0.elapsed()));
            }
            Err(e) => {
                self.events.log(
                    EventKind::ChangeFailed,
                    format!("drain: {}", results::Causes(&e)),
                    Some(t0.elapsed()),
                );
            }
        }
        self.endpoints_changed();
    }

    pub(super) fn scale(&mut self, to: u32, mode: StopMode) {
        let have = self.platform.replicas();
        if to == have {
            return;
        }
        self.events
            .log(EventKind::ScaleRequested, format!("{have} -> {to}"), None);
        {
            let mut on = on_platform(
                &mut self.events,
                &mut self.added,
                &mut self.removed,
                EventKind::BackendStopping,
            );
            self.platform.scale(to, mode, &mut on);
        }
        self.endpoints_changed();
    }

    /// The endpoint set changed: `endpoint_push` pushes it to drivers that take
    /// it; either way the driver settles on the new set.
    pub(super) fn endpoints_changed(&mut self) {
        let eps = self.platform.endpoints();
        let detail = eps
            .iter()
            .map(|e| e.id.as_str())
            .collect::<Vec<_>>()
            .join(",");
        // A driver that takes endpoints is asked (and the request logged); one that
        // discovers them is only waited for.
        let pushed = self.driver.capabilities().push_endpoints;
        self.change(
            pushed.then_some(EventKind::EndpointsRequested),
            &detail,
            EventKind::EndpointsApplied,
            Some(Expect::endpoints(&eps)),
            |d, _| endpoint_push::endpoints_changed(d, &eps).map(|_: Sync| ()),
        );
    }
}

/// Logs each platform event as it happens and notes each backend added and removed
/// (for propagation); a stop is logged as `stopping` (a scale's `backend_stopping`, a
/// drain's `pod_evicted`).
pub(super) fn on_platform<'a>(
    events: &'a mut Events,
    added: &'a mut Vec<(String, Nanos)>,
    removed: &'a mut Vec<(String, Nanos)>,
    stopping: EventKind,
) -> impl FnMut(PlatformEvent) + 'a {
    move |ev| match ev {
        PlatformEvent::Ready { endpoint, took } => {
            let at = events.log(EventKind::BackendReady, &endpoint.id, Some(took));
            added.push((endpoint.id, at));
        }
        PlatformEvent::Stopping { id, mode } => {
            let at = events.log(stopping, format!("{id} ({})", mode.name()), None);
            removed.push((id, at));
        }
        PlatformEvent::Failed { detail } => {
            events.log(EventKind::ChangeFailed, detail, None);
        }
    }
}

/// Runs steps until they end or the load does. `depth` bounds nested repeats.
pub(super) fn run_steps(sys: &mut System, steps: &[Step], depth: usize) {
    for st in steps {
        if sys.done() {
            return;
        }
        match st {
            Step::Wait(d) => {
                let until = sys.events.clock.now() + d.0.as_nanos() as Nanos;
                sys.sleep_until(until.min(sys.end));
                continue;
            }
            Step::Scale(s) => {
                let mode = s.stop.map(StopMode::from).unwrap_or(sys.stop_mode);
                sys.scale(s.to, mode);
            }
            Step::Route(r) => {
                let route = r.route();
                sys.change(
                    Some(EventKind::RouteRequested),
                    route.name(),
                    EventKind::RouteApplied,
                    Some(Expect::Route(route)),
                    |d, _| d.apply_route(route),
                );
            }
            Step::RouteSet(step) => sys.change_route_set(*step),
            Step::Reload(true) => {
                sys.change(
                    Some(EventKind::ReloadRequested),
                    "",
                    EventKind::ReloadDone,
                    Some(Expect::Reloaded),
                    |d, _| d.reload(),
                );
            }
            Step::Restart(RestartWhat::Proxy) => sys.restart_proxy(),
            Step::Restart(RestartWhat::Controller) => {
                // Done once a new controller runs: what the next step asks for is
                // made while it resyncs, and timed by the traffic.
                sys.change(
                    Some(EventKind::RestartRequested),
                    "controller",
                    EventKind::RestartDone,
                    None,
                    |d, replaced| d.restart_controller(replaced),
                );
            }
            Step::Rotate(_) => sys.rotate_certificate(),
            Step::Drain(n) => sys.drain(n.node.as_deref()),
            Step::Reload(false) | Step::Restart(RestartWhat::Nothing) => {}
            Step::Repeat(r) => {
                let mut n = 0;
                while !sys.done() && r.times.is_none_or(|t| n < t) && depth < 4 {
                    run_steps(sys, &r.steps, depth + 1);
                    n += 1;
                }
                continue;
            }
        }
        sys.probe_after_change();
    }
}
