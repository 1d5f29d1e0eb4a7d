//! Change windows: the load's figures between one change of the system under test
//! and the next, counted per request, so that each request is in exactly one window
//! and the windows add up to the run.
//!
//! Whoever changes the system (the scenario runner) marks the start of each window on
//! the load's clock while the load runs ([`Marks::mark`]). When a measured request
//! ends (a response or an error), its worker puts it in the window that contains its
//! *intended* send time, like every latency the engine reports. Window 0 holds the
//! requests intended before the first mark.
//!
//! The marks are a fixed array of atomics written by one thread and read by the
//! workers with no lock; a worker's counts are its own ([`Tally`], part of its
//! totals) and are merged at the end like the rest. Nothing is allocated per request:
//! a worker allocates a window's histogram once, for the first request it puts in it.

use hdrhistogram::Histogram;
use results::clock::Nanos;
use results::histogram::MAX_LATENCY_US;
use results::ErrorKind;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Most windows a run marks; later marks are refused, so the last window runs on to
/// the end of the load (a few hundred changes is already more than a chart can show).
pub const MAX_MARKS: usize = 256;

/// Window starts on the load's clock, published while the load runs.
pub struct Marks {
    starts: Box<[AtomicU64]>,
    len: AtomicUsize,
}

impl Marks {
    pub fn new() -> Self {
        Marks {
            starts: (0..MAX_MARKS).map(|_| AtomicU64::new(u64::MAX)).collect(),
            len: AtomicUsize::new(0),
        }
    }

    /// Starts a window at clock time `t` and returns its index (from 1); `None` once
    /// [`MAX_MARKS`] windows exist. One thread marks, in time order.
    ///
    /// A request intended at or after `t` is put in the new window if its worker
    /// sees the mark by the time the request ends: it is published right after the
    /// clock is read, well within the shortest round trip of a request.
    pub fn mark(&self, t: Nanos) -> Option<usize> {
        let n = self.len.load(Ordering::Relaxed);
        if n == MAX_MARKS {
            return None;
        }
        debug_assert!(n == 0 || self.starts[n - 1].load(Ordering::Relaxed) <= t);
        self.starts[n].store(t, Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Release);
        Some(n + 1)
    }

    /// How many windows have been marked.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The window of a request intended at `t`: how many marks are at or before it.
    /// Most requests are in the latest window, so the search starts there.
    #[inline]
    pub fn window_of(&self, t: Nanos) -> usize {
        let n = self.len.load(Ordering::Acquire);
        (1..=n)
            .rev()
            .find(|&i| self.starts[i - 1].load(Ordering::Relaxed) <= t)
            .unwrap_or(0)
    }
}

impl Default for Marks {
    fn default() -> Self {
        Self::new()
    }
}

/// Marker patterns a window tells apart: every bit set of [`http1::marker::MAX_MARKERS`].
pub const PATTERNS: usize = 1 << http1::marker::MAX_MARKERS;

/// The successful responses of a window that carried one marker pattern exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub responses: u64,
    /// Clock time the first and last of them arrived (`first` is `Nanos::MAX` and
    /// `last` 0 while there is none).
    pub first: Nanos,
    pub last: Nanos,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            responses: 0,
            first: Nanos::MAX,
            last: 0,
        }
    }
}

impl Seen {
    fn note(&mut self, at: Nanos) {
        self.responses += 1;
        self.first = self.first.min(at);
        self.last = self.last.max(at);
    }

    /// Adds another count of the same pattern.
    pub fn merge(&mut self, o: &Seen) {
        self.responses += o.responses;
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// The requests of one window that ended.
#[derive(Debug, Clone)]
pub struct WindowCounts {
    /// Requests sent, and the generator's lag sending them (µs, 2 digits): counted
    /// only for a load plan's steps ([`Tally::sent`]), whose rate each is judged by.
    pub sent: u64,
    pub lag: Option<Histogram<u64>>,
    /// Full responses with status < 400.
    pub completed: u64,
    /// Errors by [`ErrorKind::index`] (status >= 400 included).
    pub errors: [u64; results::ErrorKind::COUNT],
    /// Corrected latency of every response (status >= 400 included) and of every
    /// request the drain's deadline cut short (at its lower bound), µs, to 2
    /// significant digits: a window ranks changes, and 26 KB per window and worker
    /// keeps hundreds of windows cheap (3 digits would take 188 KB each).
    pub latency: Histogram<u64>,
    /// The exact highest corrected latency, µs.
    pub max_us: u64,
    /// Successful responses by the markers they carried (index: the bit set), when
    /// the run looks for markers: how a route change shows in traffic.
    pub markers: [Seen; PATTERNS],
    /// Requests of the window sent on a new connection because the server closed
    /// the kept-alive one (a reload closing its idle connections shows here).
    pub reconnects: u64,
    /// HTTP/2: requests of the window the server refused in a GOAWAY (or with
    /// REFUSED_STREAM) and that were sent again: a reload draining its connections.
    pub retried: u64,
}

impl WindowCounts {
    fn new() -> Self {
        WindowCounts {
            sent: 0,
            lag: None,
            completed: 0,
            errors: [0; results::ErrorKind::COUNT],
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_US, 2)
                .expect("static bounds are valid"),
            max_us: 0,
            markers: [Seen::default(); PATTERNS],
            reconnects: 0,
            retried: 0,
        }
    }

    /// Adds another count of the same window (another worker's, or generator's).
    fn add(&mut self, o: &WindowCounts) {
        self.sent += o.sent;
        if let Some(ol) = &o.lag {
            match &mut self.lag {
                Some(l) => {
                    let _ = l.add(ol);
                }
                None => self.lag = Some(ol.clone()),
            }
        }
        self.completed += o.completed;
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        let _ = self.latency.add(&o.latency);
        self.max_us = self.max_us.max(o.max_us);
        for (a, b) in self.markers.iter_mut().zip(o.markers.iter()) {
            a.merge(b);
        }
        self.reconnects += o.reconnects;
        self.retried += o.retried;
    }

    /// Errors of every kind.
    pub fn failed(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// Counts per window, indexed by [`Marks::window_of`].
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub windows: Vec<WindowCounts>,
}

impl Tally {
    #[inline]
    fn at(&mut self, w: usize) -> &mut WindowCounts {
        if w >= self.windows.len() {
            // Once per window and worker, not per request.
            self.windows.resize_with(w + 1, WindowCounts::new);
        }
        &mut self.windows[w]
    }

    /// A request of window `w` sent `lag_ns` after it was due (`None`: closed loop,
    /// never late). The lag histogram is allocated once per window and worker.
    #[inline]
    pub fn sent(&mut self, w: usize, lag_ns: Option<u64>) {
        let c = self.at(w);
        c.sent += 1;
        if let Some(lag) = lag_ns {
            c.lag
                .get_or_insert_with(|| {
                    Histogram::new_with_bounds(1, MAX_LATENCY_US, 2)
                        .expect("static bounds are valid")
                })
                .saturating_record((lag / 1000).clamp(1, MAX_LATENCY_US));
        }
    }

    /// A full response in window `w`, `corrected_ns` after its intended send time.
    #[inline]
    pub fn response(&mut self, w: usize, corrected_ns: u64, status: u16) {
        let c = self.at(w);
        let us = (corrected_ns / 1000).clamp(1, MAX_LATENCY_US);
        c.latency.saturating_record(us);
        c.max_us = c.max_us.max(us);
        if status >= 400 {
            c.errors[ErrorKind::Status.index()] += 1;
        } else {
            c.completed += 1;
        }
    }

    /// A successful response of window `w` that carried the markers `bits`, arrived
    /// at clock time `at`.
    #[inline]
    pub fn marked(&mut self, w: usize, bits: u8, at: Nanos) {
        self.at(w).markers[usize::from(bits) % PATTERNS].note(at);
    }

    /// A request of window `w` that failed.
    #[inline]
    pub fn error(&mut self, w: usize, kind: ErrorKind) {
        self.at(w).errors[kind.index()] += 1;
    }

    /// A request of window `w` went out on a new connection because the server
    /// closed its kept-alive one.
    #[inline]
    pub fn retried(&mut self, w: usize) {
        self.at(w).retried += 1;
    }

    pub fn reconnect(&mut self, w: usize) {
        self.at(w).reconnects += 1;
    }

    /// A response of window `w` turned out to be followed by stray bytes: it becomes
    /// a `framing` error, from a success or (`was_status_error`) from a `status`
    /// error (see [`crate::stats::Recorder::desync`]).
    pub fn desync(&mut self, w: usize, was_status_error: bool) {
        let c = self.at(w);
        if was_status_error {
            let s = &mut c.errors[ErrorKind::Status.index()];
            *s = s.saturating_sub(1);
        } else {
            c.completed = c.completed.saturating_sub(1);
        }
        c.errors[ErrorKind::Framing.index()] += 1;
    }

    /// A request of window `w` cut short by the drain's deadline: a `timeout` whose
    /// latency, at least `corrected_ns`, is recorded at that bound as in the run's
    /// histogram ([`crate::stats::Recorder::censored`]).
    pub fn censored(&mut self, w: usize, corrected_ns: u64) {
        let c = self.at(w);
        let us = (corrected_ns / 1000).clamp(1, MAX_LATENCY_US);
        c.latency.saturating_record(us);
        c.max_us = c.max_us.max(us);
        c.errors[ErrorKind::Timeout.index()] += 1;
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &Tally) {
        for (w, oc) in o.windows.iter().enumerate() {
            self.at(w).add(oc);
        }
    }
}

impl Tally {
    /// This generator's windows as they cross a process: marker times in ms from
    /// `measure_start`, the clock time its measured window started.
    pub fn to_parts(&self, measure_start: Nanos) -> Vec<results::WindowPart> {
        let ms = |t: Nanos| (t as f64 - measure_start as f64) / 1e6;
        self.windows
            .iter()
            .map(|c| results::WindowPart {
                completed: c.completed,
                errors: ErrorKind::ALL
                    .iter()
                    .filter(|k| c.errors[k.index()] > 0)
                    .map(|k| (k.name().to_string(), c.errors[k.index()]))
                    .collect(),
                latency: results::histogram::encode_base64(&c.latency),
                max_us: c.max_us,
                reconnects_after_server_close: c.reconnects,
                retried_after_goaway: c.retried,
                markers: c
                    .markers
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.responses > 0)
                    .map(|(p, m)| results::MarkerPart {
                        pattern: p as u8,
                        responses: m.responses,
                        first_ms: ms(m.first),
                        last_ms: ms(m.last),
                    })
                    .collect(),
            })
            .collect()
    }

    /// Adds one generator's windows ([`Tally::to_parts`]), placing its marker times on
    /// this clock, whose measured window started at `measure_start`.
    ///
    /// # Errors
    /// A window's latency histogram that cannot be decoded, or an unknown error kind.
    pub fn add_parts(
        &mut self,
        parts: &[results::WindowPart],
        measure_start: Nanos,
    ) -> Result<(), String> {
        let at = |ms: f64| (measure_start as f64 + ms * 1e6).max(0.0) as Nanos;
        for (w, p) in parts.iter().enumerate() {
            // The part as a window of this process, added like another worker's.
            let mut c = WindowCounts::new();
            c.latency = results::histogram::decode_base64(&p.latency)
                .map_err(|e| format!("window {w}: {e}"))?;
            c.completed = p.completed;
            c.max_us = p.max_us;
            c.reconnects = p.reconnects_after_server_close;
            c.retried = p.retried_after_goaway;
            for (name, n) in &p.errors {
                let k = ErrorKind::ALL
                    .iter()
                    .find(|k| k.name() == name)
                    .ok_or_else(|| format!("window {w}: unknown error kind {name}"))?;
                c.errors[k.index()] += n;
            }
            for m in &p.markers {
                c.markers[usize::from(m.pattern) % PATTERNS] = Seen {
                    responses: m.responses,
                    first: at(m.first_ms),
                    last: at(m.last_ms),
                };
            }
            self.at(w).add(&c);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    /// The run: 200 req/s for 4 s, changes at 1.0, 2.0 and 3.2 s, a read
    /// error on a request intended exactly at the 2.0 s change. Each request is in
    /// one window, by its intended time; the windows add up to the run.
    #[test]
    fn each_request_is_in_exactly_one_window() {
        let origin = 7 * S;
        let marks = Marks::new();
        let mut workers = [Tally::default(), Tally::default()];
        let (mut completed, mut failed) = (0, 0);
        for i in 0..800u64 {
            let intended = origin + i * 5_000_000;
            // The runner marks while the load runs: a mark is seen by requests
            // intended after it.
            for (k, at) in [S, 2 * S, 3 * S + S / 5].iter().enumerate() {
                if intended == origin + at {
                    assert_eq!(marks.mark(origin + at), Some(k + 1));
                }
            }
            let w = marks.window_of(intended);
            let t = &mut workers[(i % 2) as usize];
            if intended == origin + 2 * S {
                t.error(w, ErrorKind::Read);
                failed += 1;
            } else {
                // Latencies longer than the gap to the next change still count
                // where the request was meant to start.
                t.response(w, 30_000_000, 200);
                completed += 1;
            }
        }
        let mut all = Tally::default();
        for t in &workers {
            all.merge(t);
        }
        let per: Vec<(u64, u64)> = all
            .windows
            .iter()
            .map(|c| (c.completed, c.failed()))
            .collect();
        assert_eq!(per, [(200, 0), (200, 0), (239, 1), (160, 0)]);
        assert_eq!(per.iter().map(|p| p.0).sum::<u64>(), completed);
        assert_eq!(per.iter().map(|p| p.1).sum::<u64>(), failed);
        assert_eq!(all.windows[2].errors[ErrorKind::Read.index()], 1);
        let latency_counts: u64 = all.windows.iter().map(|c| c.latency.len()).sum();
        assert_eq!(
            latency_counts, completed,
            "errors without a response have no latency"
        );
        assert_eq!(all.windows[3].max_us, 30_000);
    }

    #[test]
    fn marker_patterns_keep_their_count_and_first_and_last_arrival_across_workers() {
        let (mut a, mut b) = (Tally::default(), Tally::default());
        a.marked(1, 0b10, 500);
        a.marked(1, 0b00, 400);
        b.marked(1, 0b10, 300);
        b.marked(1, 0b10, 900);
        b.marked(2, 0b01, 1_000);
        a.merge(&b);
        let w1 = &a.windows[1].markers;
        assert_eq!(
            w1[0b10],
            Seen {
                responses: 3,
                first: 300,
                last: 900
            }
        );
        assert_eq!(w1[0].responses, 1);
        assert_eq!(w1[0b01], Seen::default(), "nothing seen keeps no time");
        assert_eq!(a.windows[2].markers[0b01].first, 1_000);
        assert_eq!(a.windows[0].markers, [Seen::default(); PATTERNS]);
    }

    /// Two generators' windows cross a process and add up to what one tally of both
    /// would hold, marker times placed on the coordinator's clock.
    #[test]
    fn windows_cross_a_process_and_add_up() {
        let (mut a, mut b, mut both) = (Tally::default(), Tally::default(), Tally::default());
        for t in [&mut a, &mut both] {
            t.response(1, 3_000_000, 200);
            t.marked(1, 0b01, 5_000_000_000);
            t.error(2, ErrorKind::Timeout);
        }
        for t in [&mut b, &mut both] {
            t.response(1, 9_000_000, 503);
            t.marked(1, 0b01, 5_500_000_000);
            t.response(0, 1_000_000, 200);
        }
        // Generator clocks started at 1 s and 2 s; the coordinator's at 7 s.
        let mut merged = Tally::default();
        merged
            .add_parts(&a.to_parts(1_000_000_000), 7_000_000_000)
            .unwrap();
        merged
            .add_parts(&b.to_parts(2_000_000_000), 7_000_000_000)
            .unwrap();
        assert_eq!(merged.windows.len(), 3);
        for (m, o) in merged.windows.iter().zip(&both.windows) {
            assert_eq!(
                (m.completed, m.errors, m.max_us),
                (o.completed, o.errors, o.max_us)
            );
            assert_eq!(m.latency.len(), o.latency.len());
        }
        assert_eq!(
            merged.windows[1].markers[0b01],
            Seen {
                responses: 2,
                first: 10_500_000_000,
                last: 11_000_000_000
            }
        );
        let bad = [results::WindowPart {
            latency: "x".into(),
            ..Default::default()
        }];
        assert!(merged.add_parts(&bad, 0).is_err());
    }

    #[test]
    fn a_status_error_is_an_error_with_a_latency() {
        let mut t = Tally::default();
        t.response(2, 5_000_000, 503);
        assert_eq!(t.windows.len(), 3, "windows before are there, empty");
        let c = &t.windows[2];
        assert_eq!((c.completed, c.errors[ErrorKind::Status.index()]), (0, 1));
        assert_eq!((c.latency.len(), c.max_us), (1, 5_000));
    }

    #[test]
    fn marks_before_any_and_beyond_the_last() {
        let m = Marks::new();
        assert_eq!(m.window_of(0), 0);
        assert_eq!(m.window_of(u64::MAX - 1), 0);
        for i in 0..MAX_MARKS as u64 {
            assert!(m.mark(10 + i).is_some());
        }
        assert_eq!(
            m.mark(1_000),
            None,
            "later changes fold into the last window"
        );
        assert_eq!(m.len(), MAX_MARKS);
        assert_eq!(m.window_of(9), 0);
        assert_eq!(m.window_of(10), 1);
        assert_eq!(m.window_of(10 + 100), 101);
        assert_eq!(m.window_of(5_000), MAX_MARKS);
    }
}
