//! What a run's figures say about its changes, computed from its event log and the
//! engine's per-window counts alone (no I/O): the windows, how long endpoint, route
//! and certificate changes took to show in traffic.

use super::system::System;
use engine::windows::Tally;
use results::clock::Nanos;
use results::{
    Event, EventKind, EventWindow, Propagation, PropagationEntry, RouteChange, RoutePropagation,
    RunResult, Spread,
};
use std::collections::BTreeMap;

/// The load's figures before the first change and between each change and the next
/// (until the end of the measured window), from the engine's per-request counts:
/// `opened` names the event that started each window the engine counted by.
/// Windows that start after the measured window (an interrupted run) hold no
/// request and are left out.
pub(super) fn windows(
    events: &[Event],
    opened: &[usize],
    tally: &Tally,
    end_ms: f64,
    sessions: Option<&results::sessions::Sessions>,
) -> (EventWindow, Vec<EventWindow>) {
    let figures = |i: usize, w: &mut EventWindow| {
        // The sessions' figures of the window, by the same marks (an empty entry
        // where nothing happened to them).
        w.sessions = sessions.map(|s| {
            s.windows
                .get(i)
                .cloned()
                .unwrap_or(results::sessions::SessionWindow {
                    index: i,
                    ..Default::default()
                })
        });
        let Some(c) = tally.windows.get(i) else {
            return;
        };
        w.completed = c.completed;
        w.reconnects_after_server_close = c.reconnects;
        w.retried_after_goaway = c.retried;
        for k in results::ErrorKind::ALL {
            let n = c.errors[k.index()];
            if n > 0 {
                w.errors.insert(k.name().to_string(), n);
            }
        }
        if !c.latency.is_empty() {
            w.p99_ms = c.latency.value_at_quantile(0.99) as f64 / 1000.0;
            w.max_ms = c.max_us as f64 / 1000.0;
        }
    };
    let start = |i: usize| {
        opened
            .get(i)
            .map_or(end_ms, |&e| events[e].t_ms.min(end_ms))
    };
    let mut before = EventWindow {
        change: "before changes".into(),
        from_ms: 0.0,
        until_ms: start(0),
        ..Default::default()
    };
    figures(0, &mut before);
    let mut out = Vec::new();
    for (i, &ev) in opened.iter().enumerate() {
        let e = &events[ev];
        if e.t_ms >= end_ms {
            continue;
        }
        let mut w = EventWindow {
            change: format!("{} {}", e.kind.change().unwrap_or_default(), e.detail)
                .trim()
                .to_string(),
            from_ms: e.t_ms,
            until_ms: start(i + 1),
            ..Default::default()
        };
        figures(i + 1, &mut w);
        out.push(w);
    }
    (before, out)
}

/// Each route change as traffic saw it: from the engine's per-window marker counts,
/// the first response showing the new route and the last one not showing it yet,
/// beside when the driver said it was applied. A change's responses are those of the
/// windows from its request until the next route change, so a scale step in between
/// does not cut it short. `None` when the run changed no route.
pub(super) fn route_propagation(
    events: &[Event],
    opened: &[usize],
    tally: &Tally,
    origin: Nanos,
) -> Option<RoutePropagation> {
    let routes: Vec<(usize, usize)> = opened
        .iter()
        .enumerate()
        .filter(|(_, &e)| events[e].kind == EventKind::RouteRequested)
        .map(|(i, &e)| (i + 1, e))
        .collect();
    if routes.is_empty() {
        return None;
    }
    let mut changes = Vec::new();
    for (k, &(w, e)) in routes.iter().enumerate() {
        let asked = &events[e];
        let Some(route) = lab::Route::parse(&asked.detail) else {
            continue;
        };
        let until = routes.get(k + 1).map_or(usize::MAX, |r| r.0);
        let mut seen = [engine::windows::Seen::default(); engine::windows::PATTERNS];
        let mut errors = 0;
        for c in tally.windows.iter().take(until).skip(w) {
            for (a, b) in seen.iter_mut().zip(c.markers.iter()) {
                a.merge(b);
            }
            errors += c.failed();
        }
        let expected = usize::from(route.shows());
        let mut old = engine::windows::Seen::default();
        for (p, s) in seen.iter().enumerate() {
            if p != expected {
                old.merge(s);
            }
        }
        let new = seen[expected];
        let since = |t: Nanos| ((t.saturating_sub(origin)) as f64 / 1e6 - asked.t_ms).max(0.0);
        // The first outcome logged after the request for this change.
        let applied = took_to(events, e, EventKind::RouteApplied);
        changes.push(RouteChange {
            route: route.name().to_string(),
            at_ms: asked.t_ms,
            applied_ms: applied,
            seen_ms: (new.responses > 0).then(|| since(new.first)),
            last_old_ms: (old.responses > 0).then(|| since(old.last)),
            responses_new: new.responses,
            responses_old: old.responses,
            errors,
        });
    }
    Some(RoutePropagation::of(changes))
}

/// From the change asked for by `events[asked]` until its `done` event, in ms;
/// `None` when the first outcome logged for it was a failure (or none was).
pub(super) fn took_to(events: &[Event], asked: usize, done: EventKind) -> Option<f64> {
    let a = &events[asked];
    events[asked + 1..]
        .iter()
        .find(|x| {
            (x.kind == done && x.detail == a.detail)
                || (x.kind == EventKind::ChangeFailed && x.detail.starts_with(&a.detail))
        })
        .filter(|x| x.kind == done)
        .map(|x| (x.t_ms - a.t_ms).max(0.0))
}

/// Each certificate rotation as the load's handshakes saw it: the serials its event
/// names, looked up in what the engine counted per serial, and its window's errors.
pub(super) fn rotations(
    events: &[Event],
    rotated: &[(String, String)],
    windows: &[EventWindow],
    seen: &BTreeMap<String, results::CertificateSeen>,
) -> Vec<results::Rotation> {
    let mut out = Vec::new();
    // A rotation whose certificate could not be made names no serials: it has no
    // entry in `rotated`.
    let asked = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventKind::RotateRequested && e.detail.contains(" -> "));
    for ((i, e), (old, new)) in asked.zip(rotated) {
        let (old, new) = (old.as_str(), new.as_str());
        let applied = took_to(events, i, EventKind::RotateDone);
        let new_seen = seen.get(new);
        let last_old = seen
            .get(old)
            .filter(|c| c.last_ms >= e.t_ms)
            .map(|c| c.last_ms - e.t_ms);
        let w = windows
            .iter()
            .find(|w| w.kind() == "rotate" && (w.from_ms - e.t_ms).abs() < 1e-6);
        out.push(results::Rotation {
            at_ms: e.t_ms,
            serial_old: old.to_string(),
            serial_new: new.to_string(),
            applied_ms: applied,
            new_seen_ms: new_seen.map(|c| (c.first_ms - e.t_ms).max(0.0)),
            last_old_ms: last_old,
            handshakes_new: new_seen.map_or(0, |c| c.handshakes),
            tls_errors: w.and_then(|w| w.errors.get("tls").copied()).unwrap_or(0),
            errors: w.map_or(0, |w| w.errors.values().sum()),
            reconnects: w.map_or(0, |w| w.reconnects_after_server_close),
        });
    }
    out
}

/// Propagation of added and removed backends, from when each response arrived.
pub(super) fn propagation(sys: &System, r: &RunResult) -> Propagation {
    let rel = |t: Nanos| (t as f64 - sys.events.origin as f64) / 1e6;
    let mut p = Propagation::default();
    for (id, at) in &sys.added {
        let at_ms = rel(*at);
        let seen = r.backends_seen.get(id).map(|s| s[0] - at_ms);
        p.added.push(PropagationEntry {
            backend: id.clone(),
            at_ms,
            propagation_ms: seen.map(|v| v.max(0.0)),
            errors_between: 0,
        });
    }
    for (id, at) in &sys.removed {
        let at_ms = rel(*at);
        let last = r.backends_seen.get(id).map(|s| s[1] - at_ms);
        let errors_between = match last {
            Some(d) if d > 0.0 => {
                let (s0, s1) = (
                    (at_ms / 1000.0).floor() as u64,
                    ((at_ms + d) / 1000.0).ceil() as u64,
                );
                r.timeline
                    .iter()
                    .filter(|s| s.t >= s0 && s.t < s1.max(s0 + 1))
                    .map(|s| s.errors)
                    .sum()
            }
            _ => 0,
        };
        p.removed.push(PropagationEntry {
            backend: id.clone(),
            at_ms,
            propagation_ms: last.map(|v| v.max(0.0)),
            errors_between,
        });
    }
    let vals = |v: &[PropagationEntry]| -> Vec<f64> {
        v.iter().filter_map(|e| e.propagation_ms).collect()
    };
    p.added_ms = Spread::of(&vals(&p.added));
    p.removed_ms = Spread::of(&vals(&p.removed));
    p
}
