//! What the sessions' loop counts, and the result it comes to: totals, one entry per
//! second, one per change window. Everything is counted where it happens (an end by
//! its time, an echo by its message's intended time), with no allocation per
//! message: a second's histogram is reset when the next second starts, a window's is
//! made once, for its first echo.

use hdrhistogram::Histogram;
use results::clock::Nanos;
use results::histogram::{encode_base64, latency_histogram, percentiles, MAX_LATENCY_US};
use results::sessions::{Messages, SessionEnd, SessionSecond, SessionWindow, Sessions};
use std::collections::BTreeMap;

/// A latency in ns as the histograms hold it (µs, at least 1).
#[inline]
pub(super) fn us(ns: Nanos) -> u64 {
    (ns / 1000).clamp(1, MAX_LATENCY_US)
}

/// One change window's figures.
#[derive(Default)]
struct Window {
    ends: BTreeMap<SessionEnd, u64>,
    reopened: u64,
    messages: u64,
    lost: u64,
    latency: Option<Histogram<u64>>,
}

/// The run's counts; [`Tally::finish`] makes the result's part of them.
pub(super) struct Tally {
    /// Start of the measured window (the first message's due time).
    pub start: Nanos,
    /// The window's last second: what happens after the window (an echo of its
    /// last messages, the closes at its end) is counted in it, so that the timeline
    /// ends with the window as the load's does.
    pub last_second: usize,
    pub opened: u64,
    pub reopened: u64,
    pub ends: BTreeMap<SessionEnd, u64>,
    /// What came with the first end of each kind: a close frame's reason, a
    /// stream's grpc-message, the GOAWAY a cut followed.
    pub reasons: BTreeMap<SessionEnd, String>,
    pub open_failures: BTreeMap<&'static str, u64>,
    pub first_errors: BTreeMap<&'static str, String>,
    pub messages: Messages,
    pub latency: Histogram<u64>,
    pub open: Histogram<u64>,
    pub reopen: Histogram<u64>,
    pub backends: BTreeMap<String, u64>,
    seconds: Vec<SessionSecond>,
    second: Histogram<u64>,
    windows: Vec<Window>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            start: 0,
            last_second: usize::MAX,
            opened: 0,
            reopened: 0,
            ends: BTreeMap::new(),
            reasons: BTreeMap::new(),
            open_failures: BTreeMap::new(),
            first_errors: BTreeMap::new(),
            messages: Messages::default(),
            latency: latency_histogram(),
            open: latency_histogram(),
            reopen: latency_histogram(),
            backends: BTreeMap::new(),
            seconds: Vec::new(),
            second: latency_histogram(),
            windows: Vec::new(),
        }
    }

    /// The timeline's entry for clock time `t`, the seconds before it closed. Before
    /// the window (while the sessions open) is the first second; after it, the last.
    fn second_at(&mut self, t: Nanos) -> &mut SessionSecond {
        let s = ((t.saturating_sub(self.start) / 1_000_000_000) as usize).min(self.last_second);
        while self.seconds.len() <= s {
            self.close_second();
            let second = self.seconds.len() as u64;
            self.seconds.push(SessionSecond {
                second,
                ..SessionSecond::default()
            });
        }
        &mut self.seconds[s]
    }

    /// Puts the latency of the second that is ending into its entry.
    fn close_second(&mut self) {
        if let Some(last) = self.seconds.last_mut() {
            if !self.second.is_empty() {
                let p = percentiles(&self.second, 1000.0);
                (last.p99_ms, last.max_ms) = (p.p99, p.max);
            }
        }
        self.second.reset();
    }

    /// Marks the sessions open at clock time `t` (called as each second ends).
    pub fn open_now(&mut self, t: Nanos, open: u64) {
        self.second_at(t).open = open;
    }

    fn window(&mut self, w: usize) -> &mut Window {
        if self.windows.len() <= w {
            self.windows.resize_with(w + 1, Window::default);
        }
        &mut self.windows[w]
    }

    pub fn opened(&mut self, now: Nanos, reopen_of: Option<Nanos>, planned: Nanos, w: usize) {
        self.opened += 1;
        self.second_at(now).opened += 1;
        match reopen_of {
            Some(ended) => {
                self.reopened += 1;
                self.reopen.saturating_record(us(now.saturating_sub(ended)));
                self.window(w).reopened += 1;
            }
            None => self.open.saturating_record(us(now.saturating_sub(planned))),
        }
    }

    pub fn open_failed(&mut self, kind: &'static str, message: impl FnOnce() -> String) {
        *self.open_failures.entry(kind).or_default() += 1;
        self.note(kind, message);
    }

    /// The first error of `kind` in words.
    pub fn note(&mut self, kind: &'static str, message: impl FnOnce() -> String) {
        if !self.first_errors.contains_key(kind) {
            self.first_errors.insert(kind, message());
        }
    }

    /// A session ended at `now` (window `w`), losing `lost` messages.
    pub fn ended(&mut self, now: Nanos, end: SessionEnd, lost: u64, w: usize) {
        *self.ends.entry(end).or_default() += 1;
        self.messages.lost += lost;
        let s = self.second_at(now);
        s.ended += 1;
        s.closed += u64::from(end.graceful());
        s.lost += lost;
        let win = self.window(w);
        *win.ends.entry(end).or_default() += 1;
        win.lost += lost;
    }

    /// An echo of a message intended at `intended` (window `w`) came at `now`.
    #[inline]
    pub fn echoed(&mut self, intended: Nanos, now: Nanos, w: usize) {
        let v = us(now.saturating_sub(intended));
        self.messages.echoed += 1;
        self.latency.saturating_record(v);
        self.second_at(now).messages += 1;
        self.second.saturating_record(v);
        let win = self.window(w);
        win.messages += 1;
        win.latency
            .get_or_insert_with(latency_histogram)
            .saturating_record(v);
    }

    pub fn finish(mut self, head: Sessions, held: u64) -> Sessions {
        self.close_second();
        let key = |m: &BTreeMap<SessionEnd, u64>| -> BTreeMap<String, u64> {
            m.iter().map(|(e, n)| (e.key(), *n)).collect()
        };
        let windows = self
            .windows
            .iter()
            .enumerate()
            .map(|(index, w)| {
                let p = w
                    .latency
                    .as_ref()
                    .map(|h| percentiles(h, 1000.0))
                    .unwrap_or_default();
                SessionWindow {
                    index,
                    ends: key(&w.ends),
                    reopened: w.reopened,
                    messages: w.messages,
                    lost: w.lost,
                    p99_ms: p.p99,
                    max_ms: p.max,
                }
            })
            .collect();
        Sessions {
            opened: self.opened,
            reopened: self.reopened,
            held,
            ends: key(&self.ends),
            close_reasons: self
                .reasons
                .iter()
                .map(|(e, r)| (e.key(), r.clone()))
                .collect(),
            open_failures: self
                .open_failures
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect(),
            first_errors: self
                .first_errors
                .iter()
                .map(|(k, m)| (k.to_string(), m.clone()))
                .collect(),
            messages: self.messages.clone(),
            latency_ms: percentiles(&self.latency, 1000.0),
            open_ms: percentiles(&self.open, 1000.0),
            reopen_ms: percentiles(&self.reopen, 1000.0),
            backends: std::mem::take(&mut self.backends),
            histogram: encode_base64(&self.latency),
            timeline: std::mem::take(&mut self.seconds),
            windows,
            ..head
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn what_comes_after_the_window_is_counted_in_its_last_second() {
        let mut t = Tally::new();
        t.start = 10 * S;
        // A two-second window: its seconds are 0 and 1.
        t.last_second = 1;
        t.echoed(11 * S + 900_000_000, 11 * S + 950_000_000, 0);
        t.open_now(11 * S + 999_999_999, 4);
        // The last messages' echoes and the closes, after the window's end.
        t.echoed(11 * S + 990_000_000, 12 * S + 105_000_000, 0);
        t.ended(12 * S + 200_000_000, SessionEnd::Close(1000), 0, 0);
        let r = t.finish(Sessions::default(), 0);
        assert_eq!(r.timeline.len(), 2, "{:?}", r.timeline);
        assert_eq!((r.timeline[1].messages, r.timeline[1].ended), (2, 1));
        assert_eq!(r.timeline[1].open, 4);
        assert!((r.timeline[1].max_ms.unwrap() - 115.0).abs() < 0.2, "{r:?}");
    }

    #[test]
    fn ends_and_echoes_land_in_their_second_and_window() {
        let mut t = Tally::new();
        t.start = 10 * S;
        t.echoed(10 * S, 10 * S + 2_000_000, 0);
        t.echoed(11 * S, 11 * S + 5_000_000, 1);
        t.ended(11 * S + 1, SessionEnd::Eof, 3, 1);
        t.ended(12 * S + 1, SessionEnd::Close(1001), 0, 1);
        t.opened(12 * S + 2, Some(11 * S + 1), 0, 1);
        t.open_now(12 * S + 3, 7);
        let r = t.finish(Sessions::default(), 7);
        assert_eq!(r.timeline.len(), 3);
        assert_eq!(
            (
                r.timeline[1].messages,
                r.timeline[1].ended,
                r.timeline[1].lost
            ),
            (1, 1, 3)
        );
        assert!((r.timeline[1].p99_ms.unwrap() - 5.0).abs() < 0.01, "{r:?}");
        assert_eq!((r.timeline[2].open, r.timeline[2].opened), (7, 1));
        assert_eq!(r.timeline[2].p99_ms, None, "no echo in the last second");
        assert_eq!(r.windows.len(), 2);
        assert_eq!(r.windows[1].cut(), 2);
        assert_eq!(r.windows[1].broken(), 1);
        assert_eq!(r.windows[1].reopened, 1);
        assert_eq!(r.messages.lost, 3);
        assert_eq!(r.reopened, 1);
        assert!((r.reopen_ms.max.unwrap() - 1000.0).abs() < 1.0, "{r:?}");
        assert_eq!(r.ends["eof"], 1);
    }
}
