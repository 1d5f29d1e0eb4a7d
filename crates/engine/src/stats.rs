//! What a worker counts, and how workers' counts are merged.
//!
//! Each worker owns one [`Recorder`]: its histograms and counters are touched by that
//! thread only, with no lock or atomic per request. Once a second it hands the
//! collector an [`Interval`] (the second's histogram and counts) and at the end its
//! totals. Latency is kept in microseconds from 1 µs to 1 hour with 3 significant
//! digits; the generator's lag in nanoseconds, because it is meant to be tiny.

use hdrhistogram::Histogram;
use http1::response::MAX_BACKEND_ID;
use results::clock::Nanos;
use results::ErrorKind;

/// The stored format's bounds and constructors: the engine records into exactly the
/// histograms that result files decode.
pub use results::histogram::{lag_histogram, latency_histogram, MAX_LAG_NS, MAX_LATENCY_US};
/// Distinct backend ids a worker tracks; later ones are counted under "other".
const MAX_BACKENDS: usize = 1024;

/// Responses from one backend id: how many, and the first and last time one arrived.
#[derive(Debug, Clone)]
pub struct BackendCount {
    pub id: Box<[u8]>,
    pub count: u64,
    /// Run clock time of the first and last response from this id.
    pub first: Nanos,
    pub last: Nanos,
}

/// Tally of responses per backend id, small and allocation-free once an id is known.
/// First and last arrival times are what endpoint propagation is computed from.
#[derive(Debug, Default, Clone)]
pub struct BackendTally {
    pub ids: Vec<BackendCount>,
    pub other: u64,
}

impl BackendTally {
    /// Counts `n` responses from `id` at time `t`. Allocates only the first time an
    /// id is seen.
    /// Returns the id's index in `ids` (`None`: counted under "other").
    #[inline]
    pub fn add(&mut self, id: &[u8], n: u64, t: Nanos) -> Option<usize> {
        self.add_span(id, n, t, t)
    }

    fn add_span(&mut self, id: &[u8], n: u64, first: Nanos, last: Nanos) -> Option<usize> {
        if let Some(i) = self.ids.iter().position(|e| &e.id[..] == id) {
            let e = &mut self.ids[i];
            e.count += n;
            e.first = e.first.min(first);
            e.last = e.last.max(last);
            Some(i)
        } else if self.ids.len() < MAX_BACKENDS {
            let id = &id[..id.len().min(MAX_BACKEND_ID)];
            self.ids.push(BackendCount {
                id: id.into(),
                count: n,
                first,
                last,
            });
            Some(self.ids.len() - 1)
        } else {
            self.other += n;
            None
        }
    }

    /// Adds another tally into this one.
    pub fn merge(&mut self, other: &BackendTally) {
        for e in &other.ids {
            self.add_span(&e.id, e.count, e.first, e.last);
        }
        self.other += other.other;
    }

    /// As (id, count) pairs with non-zero counts, ids as text.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, u64> {
        let mut m: std::collections::BTreeMap<String, u64> = self
            .ids
            .iter()
            .filter(|e| e.count > 0)
            .map(|e| (String::from_utf8_lossy(&e.id).into_owned(), e.count))
            .collect();
        if self.other > 0 {
            *m.entry("other".into()).or_default() += self.other;
        }
        m
    }
}

/// One second of one worker's measurements (by completion time).
#[derive(Debug, Clone)]
pub struct Interval {
    /// Second index since the start of the measured window.
    pub second: u64,
    pub corrected: Histogram<u64>,
    pub sent: u64,
    pub completed: u64,
    pub errors: [u64; results::ErrorKind::COUNT],
    pub backends: BackendTally,
    /// The largest send lag of the second, ns: a max, not a histogram, so the live
    /// view gets the second's lag for one compare per request.
    pub lag_max_ns: u64,
}

impl Interval {
    /// An interval for `second` with nothing in it.
    pub fn empty(second: u64) -> Self {
        Interval {
            second,
            corrected: latency_histogram(),
            sent: 0,
            completed: 0,
            errors: [0; results::ErrorKind::COUNT],
            backends: BackendTally::default(),
            lag_max_ns: 0,
        }
    }

    /// Adds another worker's interval of the same second.
    pub fn merge(&mut self, o: &Interval) {
        let _ = self.corrected.add(&o.corrected);
        self.sent += o.sent;
        self.completed += o.completed;
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        self.backends.merge(&o.backends);
        self.lag_max_ns = self.lag_max_ns.max(o.lag_max_ns);
    }

    pub fn is_empty(&self) -> bool {
        self.sent == 0 && self.completed == 0 && self.errors.iter().all(|e| *e == 0)
    }

    /// Empties this interval for reuse by a worker: the collector does it, off the
    /// workers' cores, so a worker starting a second takes a ready histogram instead
    /// of allocating and zeroing 188 KB in its loop.
    pub fn clear(&mut self) {
        self.second = 0;
        self.corrected.reset();
        self.sent = 0;
        self.completed = 0;
        self.errors = [0; results::ErrorKind::COUNT];
        self.backends.ids.clear();
        self.backends.other = 0;
        self.lag_max_ns = 0;
    }
}

/// A worker's totals over the measured window.
#[derive(Debug, Clone)]
pub struct Totals {
    pub corrected: Histogram<u64>,
    pub uncorrected: Histogram<u64>,
    pub lag: Histogram<u64>,
    pub intended: u64,
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub not_sent: u64,
    pub unfinished: u64,
    /// Of `failed`: requests still waiting for a connection when the drain ended.
    pub timed_out_unsent: u64,
    /// Measured requests started before the window ended (`sent` also counts those
    /// started in the drain after it).
    pub sent_in_window: u64,
    /// Why the requests due in the window but not started by its end were behind.
    pub shortfall: results::Shortfall,
    /// An interrupt cut the run short (during the window or the drain after it).
    pub interrupted: bool,
    pub errors: [u64; results::ErrorKind::COUNT],
    /// Responses by status code (index = code), for codes >= 400.
    pub status: Box<[u64; 600]>,
    pub backends: BackendTally,
    pub bytes_read: u64,
    pub handshakes: u64,
    pub resumed: u64,
    pub tls_version: Option<&'static str>,
    /// Handshakes by the serial number (hex) of the certificate the server
    /// presented, with when the first and last completed: what a rotation is
    /// timed from. A tally like the backends', so a known serial costs a compare.
    pub certificates: BackendTally,
    /// Sampled requests (`--sample`), in completion order.
    pub samples: Vec<RawSample>,
    /// Requests by change window, when the run is marked (see [`crate::windows`]).
    pub windows: crate::windows::Tally,
    /// Requests by step of a load plan, the same way (see [`crate::profile`]).
    pub steps: crate::windows::Tally,
    /// Requests each step of a load plan called for (what was due in it).
    pub steps_intended: Vec<u64>,
    /// The message of the first error of each kind.
    pub first_errors: crate::failure::FirstErrors,
    /// Measured requests sent on a new connection because the server had closed the
    /// kept-alive one they would have used (see `worker::Worker::idle_event`).
    pub reconnects_after_server_close: u64,
    /// Responses framed both by `Content-Length` and `Transfer-Encoding`.
    pub framing_warnings: FramingWarnings,
    /// How late each of the worker's timed waits before the run woke, ns over the
    /// time asked (see `worker::measure_wakeup`).
    pub wakeup_ns: Vec<u32>,
    /// The thread's voluntary context switches in the window (see
    /// `results::Generator::sleeps`); `None` where unknown.
    pub sleeps: Option<u64>,
    /// Outcomes by group of a reported request mix (empty otherwise).
    pub mix: crate::mix::MixTally,
    /// HTTP/2 connections' events (`None`: HTTP/1.1).
    pub h2: Option<results::Http2Stats>,
    /// gRPC calls that failed, by `grpc-status` (index: the code; the last: a
    /// code above 16, or none at all).
    pub grpc_codes: [u64; GRPC_CODES],
}

/// Slots of [`Totals::grpc_codes`]: the 17 codes gRPC defines and one for the rest.
pub const GRPC_CODES: usize = 18;

/// Responses that completed but were framed two ways (`Content-Length` and
/// `Transfer-Encoding`): decoded by the chunked coding as RFC 9112 says, so not
/// errors, but a proxy that forwards both is where request smuggling starts, so the
/// result counts them and keeps the first one's status as an example.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FramingWarnings {
    pub count: u64,
    /// Status of the first such response (0: none yet).
    pub first_status: u16,
}

impl FramingWarnings {
    #[inline]
    pub fn note(&mut self, status: u16) {
        if self.count == 0 {
            self.first_status = status;
        }
        self.count += 1;
    }

    pub fn merge(&mut self, o: &FramingWarnings) {
        if self.count == 0 {
            self.first_status = o.first_status;
        }
        self.count += o.count;
    }
}

/// One sampled request, as a worker keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawSample {
    /// Intended send time (run clock).
    pub intended: Nanos,
    /// Corrected latency to the response or the error, ns.
    pub latency_ns: u64,
    /// HTTP status; 0 without a response.
    pub status: u16,
    /// 0: none; 1 + `ErrorKind::index()` otherwise.
    pub error: u8,
    /// Index into the owning tally's `ids`; -1 when no backend said.
    pub backend: i32,
}

impl Totals {
    pub fn new() -> Self {
        Totals {
            corrected: latency_histogram(),
            uncorrected: latency_histogram(),
            lag: lag_histogram(),
            intended: 0,
            sent: 0,
            completed: 0,
            failed: 0,
            not_sent: 0,
            unfinished: 0,
            timed_out_unsent: 0,
            sent_in_window: 0,
            shortfall: results::Shortfall::default(),
            interrupted: false,
            errors: [0; results::ErrorKind::COUNT],
            status: Box::new([0; 600]),
            backends: BackendTally::default(),
            bytes_read: 0,
            handshakes: 0,
            resumed: 0,
            tls_version: None,
            certificates: BackendTally::default(),
            samples: Vec::new(),
            windows: crate::windows::Tally::default(),
            steps: crate::windows::Tally::default(),
            steps_intended: Vec::new(),
            first_errors: Default::default(),
            reconnects_after_server_close: 0,
            framing_warnings: FramingWarnings::default(),
            wakeup_ns: Vec::new(),
            sleeps: Some(0),
            mix: crate::mix::MixTally::default(),
            h2: None,
            grpc_codes: [0; GRPC_CODES],
        }
    }

    /// Adds another worker's totals.
    pub fn merge(&mut self, o: &Totals) {
        let _ = self.corrected.add(&o.corrected);
        let _ = self.uncorrected.add(&o.uncorrected);
        let _ = self.lag.add(&o.lag);
        self.intended += o.intended;
        self.sent += o.sent;
        self.completed += o.completed;
        self.failed += o.failed;
        self.not_sent += o.not_sent;
        self.unfinished += o.unfinished;
        self.timed_out_unsent += o.timed_out_unsent;
        self.sent_in_window += o.sent_in_window;
        self.shortfall.add(&o.shortfall);
        self.interrupted |= o.interrupted;
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(o.status.iter()) {
            *a += b;
        }
        self.backends.merge(&o.backends);
        // Sample backend indices refer to the other tally: map them by id.
        let map: Vec<i32> = o
            .backends
            .ids
            .iter()
            .map(|e| {
                self.backends
                    .ids
                    .iter()
                    .position(|m| m.id == e.id)
                    .map_or(-1, |i| i as i32)
            })
            .collect();
        self.samples.extend(o.samples.iter().map(|s| RawSample {
            backend: if s.backend >= 0 {
                map.get(s.backend as usize).copied().unwrap_or(-1)
            } else {
                -1
            },
            ..*s
        }));
        self.bytes_read += o.bytes_read;
        self.handshakes += o.handshakes;
        self.resumed += o.resumed;
        self.tls_version = self.tls_version.or(o.tls_version);
        self.certificates.merge(&o.certificates);
        self.windows.merge(&o.windows);
        self.steps.merge(&o.steps);
        self.mix.merge(&o.mix);
        if self.steps_intended.len() < o.steps_intended.len() {
            self.steps_intended.resize(o.steps_intended.len(), 0);
        }
        for (a, b) in self.steps_intended.iter_mut().zip(&o.steps_intended) {
            *a += b;
        }
        self.first_errors.merge(&o.first_errors);
        self.reconnects_after_server_close += o.reconnects_after_server_close;
        match (&mut self.h2, &o.h2) {
            (Some(a), Some(b)) => a.add(b),
            (None, Some(b)) => self.h2 = Some(b.clone()),
            _ => {}
        }
        for (a, b) in self.grpc_codes.iter_mut().zip(o.grpc_codes.iter()) {
            *a += b;
        }
        self.framing_warnings.merge(&o.framing_warnings);
        self.wakeup_ns.extend_from_slice(&o.wakeup_ns);
        self.sleeps = match (self.sleeps, o.sleeps) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
}

impl Default for Totals {
    fn default() -> Self {
        Self::new()
    }
}

/// A worker's recorder: totals plus the interval under way.
#[derive(Debug)]
pub struct Recorder {
    pub totals: Totals,
    pub interval: Box<Interval>,
    /// Cleared intervals the collector sent back ([`Interval::clear`]), taken before
    /// a new one is allocated. Boxed: each goes on to `interval` and the channel as
    /// the same allocation, moved by pointer.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Interval>>,
    /// Start of the measured window.
    measure_start: Nanos,
    /// The last second of the window: what completes after it (the drain after the
    /// end or an interrupt) is counted in it, so an N-second run has N intervals.
    last_second: u64,
}

impl Recorder {
    pub fn new(measure_start: Nanos) -> Self {
        Recorder {
            totals: Totals::new(),
            interval: Box::new(Interval::empty(0)),
            spare: Vec::new(),
            measure_start,
            last_second: u64::MAX,
        }
    }

    /// Ends the window at `end` (the planned end, or when sending stopped): later
    /// intervals are not started. A window that never started keeps second 0.
    pub fn end_window(&mut self, end: Nanos) {
        let last = self.second_of(end.saturating_sub(1));
        self.last_second = self.last_second.min(last.max(self.interval.second));
    }

    /// Whether any of the window had passed at `t` (an interrupt during start-up or
    /// warm-up leaves nothing to report).
    pub fn window_started(&self, t: Nanos) -> bool {
        t > self.measure_start
    }

    /// The interval under way, at the end of the run.
    pub fn take_interval(&mut self) -> Box<Interval> {
        let next = self.fresh(self.interval.second + 1);
        std::mem::replace(&mut self.interval, next)
    }

    /// An interval the collector cleared, for a later second.
    pub fn give_back(&mut self, iv: Box<Interval>) {
        self.spare.push(iv);
    }

    /// An empty interval for `second`: a spare one if there is one.
    fn fresh(&mut self, second: u64) -> Box<Interval> {
        match self.spare.pop() {
            Some(mut iv) => {
                debug_assert!(iv.is_empty() && iv.corrected.is_empty());
                iv.second = second;
                iv
            }
            None => Box::new(Interval::empty(second)),
        }
    }

    /// Second index of time `t` in the measured window.
    #[inline]
    pub fn second_of(&self, t: Nanos) -> u64 {
        t.saturating_sub(self.measure_start) / 1_000_000_000
    }

    /// If `now` is past the current interval, returns it and starts the one `now`
    /// falls in. Called once per loop turn, so intervals are cut on time even when
    /// nothing completes.
    pub fn roll(&mut self, now: Nanos) -> Option<Box<Interval>> {
        let s = self.second_of(now).min(self.last_second);
        if s <= self.interval.second || now < self.measure_start {
            return None;
        }
        let fresh = self.fresh(s);
        Some(std::mem::replace(&mut self.interval, fresh))
    }

    /// The start time of the next interval, for the loop's timer.
    /// `Nanos::MAX` in the window's last second: nothing rolls after it.
    pub fn next_roll(&self) -> Nanos {
        if self.interval.second >= self.last_second {
            return Nanos::MAX;
        }
        self.measure_start + (self.interval.second + 1) * 1_000_000_000
    }

    #[inline]
    pub fn sent(&mut self, lag_ns: Option<u64>) {
        self.totals.sent += 1;
        self.interval.sent += 1;
        if let Some(l) = lag_ns {
            self.totals.lag.saturating_record(l.clamp(1, MAX_LAG_NS));
            self.interval.lag_max_ns = self.interval.lag_max_ns.max(l);
        }
    }

    /// A full response: latency from the due time and from the actual send.
    #[inline]
    pub fn response(
        &mut self,
        now: Nanos,
        corrected_ns: u64,
        uncorrected_ns: u64,
        status: u16,
        backend: Option<&[u8]>,
    ) -> i32 {
        let c = (corrected_ns / 1000).clamp(1, MAX_LATENCY_US);
        let u = (uncorrected_ns / 1000).clamp(1, MAX_LATENCY_US);
        self.totals.corrected.saturating_record(c);
        self.totals.uncorrected.saturating_record(u);
        self.interval.corrected.saturating_record(c);
        let mut index = -1;
        if let Some(b) = backend {
            index = self.totals.backends.add(b, 1, now).map_or(-1, |i| i as i32);
            self.interval.backends.add(b, 1, now);
        }
        if status >= 400 {
            self.totals.status[(status as usize).min(599)] += 1;
            self.error(ErrorKind::Status);
        } else {
            self.totals.completed += 1;
            self.interval.completed += 1;
        }
        index
    }

    /// A request the drain's deadline cut short: a `timeout` whose latency is known
    /// only to be at least `corrected_ns` from its intended time (and `uncorrected_ns`
    /// from its start, when it had been started). It is recorded at that lower bound,
    /// so the tail the end of the run caused stays in the percentiles.
    pub fn censored(&mut self, corrected_ns: u64, uncorrected_ns: Option<u64>) {
        let c = (corrected_ns / 1000).clamp(1, MAX_LATENCY_US);
        self.totals.corrected.saturating_record(c);
        self.interval.corrected.saturating_record(c);
        if let Some(u) = uncorrected_ns {
            let u = (u / 1000).clamp(1, MAX_LATENCY_US);
            self.totals.uncorrected.saturating_record(u);
        }
        self.error(ErrorKind::Timeout);
    }

    /// A framing desync found after the fact: the last response of a connection,
    /// counted as a success, was followed by bytes while the connection was idle. It
    /// becomes a `framing` error; its latency stays recorded (the response did
    /// arrive). The current second takes the change even if the response was counted
    /// in an earlier one, so the seconds still add up to the totals.
    ///
    /// A response counted as a `status` error (`status` >= 400) moves from there to
    /// `framing` the same way: one request, one outcome, and the desync is the
    /// graver fault (bytes the next request would have been answered with).
    pub fn desync(&mut self, status: u16) {
        if status >= 400 {
            let i = ErrorKind::Status.index();
            let code = &mut self.totals.status[usize::from(status).min(599)];
            *code = code.saturating_sub(1);
            self.totals.errors[i] = self.totals.errors[i].saturating_sub(1);
            self.interval.errors[i] = self.interval.errors[i].saturating_sub(1);
            self.totals.failed = self.totals.failed.saturating_sub(1);
            // The first `status` error's message goes with the last of them: a
            // result names an example only of a kind it counts.
            if self.totals.errors[i] == 0 {
                self.totals.first_errors.0[i] = None;
            }
        } else {
            self.totals.completed = self.totals.completed.saturating_sub(1);
            self.interval.completed = self.interval.completed.saturating_sub(1);
        }
        self.error(ErrorKind::Framing);
    }

    /// A request that failed.
    #[inline]
    pub fn error(&mut self, kind: ErrorKind) {
        self.totals.failed += 1;
        self.totals.errors[kind.index()] += 1;
        self.interval.errors[kind.index()] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_roll_on_second_boundaries() {
        let mut r = Recorder::new(5_000_000_000);
        assert!(r.roll(5_500_000_000).is_none());
        r.sent(None);
        let i = r.roll(6_000_000_001).expect("second 0 ends");
        assert_eq!((i.second, i.sent), (0, 1));
        assert_eq!(r.interval.second, 1);
        // A long sleep skips straight to the second we are in.
        let i = r.roll(9_100_000_000).unwrap();
        assert_eq!(i.second, 1);
        assert_eq!(r.interval.second, 4);
        assert_eq!(r.next_roll(), 10_000_000_000);
    }

    #[test]
    fn a_cleared_interval_given_back_is_the_next_seconds_not_a_new_one() {
        let mut r = Recorder::new(0);
        r.sent(None);
        r.interval.corrected.record(250).unwrap();
        let mut spent = r.roll(1_000_000_001).expect("second 0 ends");
        assert_eq!((spent.second, spent.sent, spent.corrected.len()), (0, 1, 1));
        spent.clear();
        let at: *const Interval = &*spent;
        r.give_back(spent);
        let _ = r.roll(2_000_000_001).expect("second 1 ends");
        assert!(std::ptr::eq(&*r.interval, at), "second 2 reuses it");
        assert_eq!((r.interval.second, r.interval.sent), (2, 0));
        assert!(r.interval.corrected.is_empty());
        // With nothing given back, a new one.
        let _ = r.roll(3_000_000_001).unwrap();
        assert!(!std::ptr::eq(&*r.interval, at));
    }

    #[test]
    fn the_last_second_takes_the_drain() {
        // A 3 s window from t=5 s: what completes after 8 s counts in second 2.
        let mut r = Recorder::new(5_000_000_000);
        r.end_window(8_000_000_000);
        assert!(r.roll(6_500_000_000).is_some());
        assert!(r.roll(7_000_000_001).is_some());
        assert_eq!(r.interval.second, 2);
        assert_eq!(r.next_roll(), Nanos::MAX, "no roll after the last second");
        assert!(r.roll(8_000_000_001).is_none());
        assert!(r.roll(9_500_000_000).is_none());
        r.sent(None);
        let last = r.take_interval();
        assert_eq!((last.second, last.sent), (2, 1));
        // An interrupt at 1.5 s ends the window in second 1.
        let mut r = Recorder::new(5_000_000_000);
        r.end_window(6_500_000_000);
        assert!(r.roll(6_000_000_001).is_some());
        assert!(r.roll(7_200_000_000).is_none());
        assert!(r.window_started(6_500_000_000) && !r.window_started(4_000_000_000));
    }

    #[test]
    fn an_interval_keeps_its_largest_lag_and_merges_by_max() {
        let mut r = Recorder::new(0);
        r.sent(Some(3_000));
        r.sent(Some(9_000));
        r.sent(None);
        r.sent(Some(5_000));
        let mut a = r.take_interval();
        assert_eq!((a.sent, a.lag_max_ns), (4, 9_000));
        assert_eq!(r.interval.lag_max_ns, 0, "the next second starts afresh");
        let mut b = Interval::empty(a.second);
        b.lag_max_ns = 12_000;
        a.merge(&b);
        assert_eq!(a.lag_max_ns, 12_000);
    }

    #[test]
    fn responses_and_errors_are_counted_apart() {
        let mut r = Recorder::new(0);
        r.response(10, 2_000_000, 1_000_000, 200, Some(b"a"));
        r.response(20, 3_000_000, 1_000_000, 503, Some(b"b"));
        r.error(ErrorKind::Timeout);
        let t = &r.totals;
        assert_eq!((t.completed, t.failed), (1, 2));
        assert_eq!(t.errors[ErrorKind::Status.index()], 1);
        assert_eq!(t.errors[ErrorKind::Timeout.index()], 1);
        assert_eq!(t.status[503], 1);
        assert_eq!(t.corrected.len(), 2, "status errors still have a latency");
        assert_eq!(t.corrected.max(), t.corrected.highest_equivalent(3000));
        assert_eq!(t.backends.to_map().len(), 2);
    }

    #[test]
    fn a_censored_request_is_a_timeout_with_its_lower_bound_recorded() {
        let mut r = Recorder::new(0);
        // Never sent: only the corrected latency exists.
        r.censored(1_500_000_000, None);
        // Sent 0.2 s after its intended time.
        r.censored(1_200_000_000, Some(1_000_000_000));
        let t = &r.totals;
        assert_eq!((t.completed, t.failed), (0, 2));
        assert_eq!(t.errors[ErrorKind::Timeout.index()], 2);
        assert_eq!(t.corrected.len(), 2);
        assert_eq!(t.uncorrected.len(), 1, "no send, no uncorrected latency");
        assert_eq!(t.corrected.max(), t.corrected.highest_equivalent(1_500_000));
        assert_eq!(
            r.interval.corrected.len(),
            2,
            "and in the second's histogram"
        );
        assert_eq!(r.interval.errors[ErrorKind::Timeout.index()], 2);
    }

    #[test]
    fn tally_merges_and_caps() {
        let mut a = BackendTally::default();
        a.add(b"x", 2, 50);
        let mut b = BackendTally::default();
        b.add(b"y", 4, 20);
        b.add(b"x", 1, 10);
        assert_eq!(b.add(b"x", 1, 90), Some(1));
        a.merge(&b);
        let m = a.to_map();
        assert_eq!((m["x"], m["y"]), (4, 4));
        let x = a.ids.iter().find(|e| &e.id[..] == b"x").unwrap();
        assert_eq!((x.first, x.last), (10, 90), "first/last span all workers");
        let mut c = BackendTally::default();
        for i in 0..MAX_BACKENDS + 5 {
            c.add(format!("b{i}").as_bytes(), 1, 0);
        }
        assert_eq!(c.other, 5);
    }

    #[test]
    fn merged_samples_keep_their_backend() {
        let mut a = Totals::new();
        a.backends.add(b"p", 1, 0);
        let mut b = Totals::new();
        b.backends.add(b"q", 1, 0);
        b.backends.add(b"p", 1, 0);
        b.samples.push(RawSample {
            intended: 1,
            latency_ns: 2,
            status: 200,
            error: 0,
            backend: 1, // "p" in b's tally
        });
        b.samples.push(RawSample {
            intended: 1,
            latency_ns: 2,
            status: 200,
            error: 0,
            backend: 0, // "q"
        });
        a.merge(&b);
        let name = |s: &RawSample| &a.backends.ids[s.backend as usize].id[..];
        assert_eq!(name(&a.samples[0]), b"p");
        assert_eq!(name(&a.samples[1]), b"q");
    }

    #[test]
    fn histogram_range_covers_a_microsecond_to_an_hour() {
        let mut h = latency_histogram();
        h.record(1).unwrap();
        h.record(MAX_LATENCY_US).unwrap();
        assert!(h.max() >= MAX_LATENCY_US * 999 / 1000);
    }
}
