//! Load plans: an offered rate that changes during the run, in steps
//! (`1000:30s,2000:30s`) or linear ramps (`100..5000:60s`), on the same connections.
//!
//! Restarting a tool at each step opens every connection again, and the handshakes
//! land in the measurement. A plan instead stays one open-loop schedule, decided
//! before the run like a constant rate: request `x` of the run is due when the plan's
//! cumulative count `N(t) = ∫ r` first exceeds `x`. For a constant rate that is
//! `x / r`, the schedule the engine always had; within a ramp `N` is quadratic and is
//! inverted in closed form, so every due time is computed, never accumulated, and
//! nothing drifts however long the plan.
//!
//! Lanes keep their shape: a lane takes every `stride`-th request of the run from
//! `offset` on (one per connection, or one per worker), so the combined schedule is
//! the plan's, evenly spread over the connections at every instant.

use std::fmt;
use std::time::Duration;

/// One part of a plan: a rate held (`from == to`) or a linear ramp, for `secs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub from: f64,
    pub to: f64,
    pub secs: f64,
    /// As written (`2000:30s`), for results.
    pub text: String,
}

impl Segment {
    /// A segment written the way a plan is (`2000:7.5s`, `100..5000:15s`).
    pub fn new(from: f64, to: f64, secs: f64) -> Segment {
        let text = if from == to {
            format!("{from}:{secs}s")
        } else {
            format!("{from}..{to}:{secs}s")
        };
        Segment {
            from,
            to,
            secs,
            text,
        }
    }

    fn slope(&self) -> f64 {
        (self.to - self.from) / self.secs
    }

    /// Requests offered in the first `t` seconds of the segment.
    fn count(&self, t: f64) -> f64 {
        let t = t.clamp(0.0, self.secs);
        self.from * t + self.slope() * t * t / 2.0
    }

    /// When, from the segment's start, its count reaches `n` (`0 <= n <= count(secs)`).
    fn time_of(&self, n: f64) -> f64 {
        if n <= 0.0 {
            return 0.0;
        }
        // The root of slope/2 t² + from t - n, written so that it stays exact for a
        // flat step (slope 0) and a ramp from 0 alike.
        let disc = (self.from * self.from + 2.0 * self.slope() * n).max(0.0);
        (2.0 * n / (self.from + disc.sqrt())).min(self.secs)
    }

    /// The rate `t` seconds into the segment.
    fn rate_at(&self, t: f64) -> f64 {
        self.from + self.slope() * t.clamp(0.0, self.secs)
    }
}

/// A plan travels as its text (`1000:30s,2000:30s`), which [`RateProfile::parse`]
/// reads back into the same plan: the form a user writes is the one form there is.
impl serde::Serialize for RateProfile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl<'de> serde::Deserialize<'de> for RateProfile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RateProfile::parse(&text).map_err(|e| serde::de::Error::custom(format!("the plan {e}")))
    }
}

/// A whole plan, ready to schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct RateProfile {
    segments: Vec<Segment>,
    /// Each segment's start, seconds from the plan's start.
    starts: Vec<f64>,
    /// Requests offered before each segment.
    before: Vec<f64>,
    total: f64,
}

/// Why a plan was refused; the front end names the flag or key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

/// Most segments a plan may have: each is a window of its own, and windows are
/// bounded ([`crate::windows::MAX_MARKS`]).
pub const MAX_SEGMENTS: usize = 200;

/// Longest stretch a ramp is reported as one step: a ramp is cut into steps of this
/// length (the last may be shorter), so its results show latency along the rate.
pub const RAMP_STEP_SECS: f64 = 5.0;

impl RateProfile {
    /// Whether `s` is written as a plan (`RATE:DURATION`, `FROM..TO:DURATION`, or a
    /// comma-separated list of them) rather than a bare rate.
    pub fn looks_like_plan(s: &str) -> bool {
        s.contains(':') || s.contains("..") || s.contains(',')
    }

    /// Parses `1000:30s,2000:30s`, `100..5000:60s`, or a mix.
    ///
    /// # Errors
    /// The first item that is not a step or a ramp, and why.
    pub fn parse(s: &str) -> Result<RateProfile, PlanError> {
        let items: Vec<&str> = s.split(',').collect();
        Self::from_items(&items)
    }

    /// A plan from its items, each `RATE:DURATION` or `FROM..TO:DURATION` (a
    /// scenario's `load.rate` list).
    ///
    /// # Errors
    /// As [`RateProfile::parse`].
    pub fn from_items<S: AsRef<str>>(items: &[S]) -> Result<RateProfile, PlanError> {
        let mut segments = Vec::new();
        for item in items {
            let item = item.as_ref().trim();
            segments.push(parse_item(item)?);
        }
        Self::new(segments)
    }

    /// # Errors
    /// No segment, too many, or a plan that offers no request at all.
    pub fn new(segments: Vec<Segment>) -> Result<RateProfile, PlanError> {
        if segments.is_empty() {
            return Err(PlanError(
                "is an empty plan: give steps such as 1000:30s,2000:30s or a ramp such as 100..5000:60s".into(),
            ));
        }
        if segments.len() > MAX_SEGMENTS {
            return Err(PlanError(format!(
                "has {} steps: a plan has at most {MAX_SEGMENTS}",
                segments.len()
            )));
        }
        let (mut starts, mut before) = (Vec::new(), Vec::new());
        let (mut t, mut n) = (0.0, 0.0);
        for s in &segments {
            starts.push(t);
            before.push(n);
            t += s.secs;
            n += s.count(s.secs);
        }
        if n < 1.0 {
            return Err(PlanError(
                "offers no request: give a rate above 0 in some step".into(),
            ));
        }
        let p = RateProfile {
            segments,
            starts,
            before,
            total: n,
        };
        if p.report_steps().len() > MAX_SEGMENTS {
            return Err(PlanError(format!(
                "is too long: its ramps make more than {MAX_SEGMENTS} steps of {RAMP_STEP_SECS}s"
            )));
        }
        Ok(p)
    }

    /// The same plan with a warm-up in front at its first rate: the schedule's time 0
    /// is the start of the warm-up, and the measured plan follows it.
    pub fn with_warmup(&self, warmup: Duration) -> RateProfile {
        if warmup.is_zero() {
            return self.clone();
        }
        let first = self.segments[0].from;
        let mut segs = vec![Segment {
            from: first,
            to: first,
            secs: warmup.as_secs_f64(),
            text: "warmup".into(),
        }];
        segs.extend(self.segments.iter().cloned());
        // A plan that was valid stays valid with a segment in front.
        RateProfile::new(segs).unwrap_or_else(|_| self.clone())
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The plan's length.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.starts.last().copied().unwrap_or(0.0) + self.seg_last().secs)
    }

    fn seg_last(&self) -> &Segment {
        &self.segments[self.segments.len() - 1]
    }

    /// Requests offered over the whole plan.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// The plan's mean rate.
    pub fn mean(&self) -> f64 {
        self.total / self.duration().as_secs_f64()
    }

    /// The highest rate the plan reaches.
    pub fn peak(&self) -> f64 {
        self.segments
            .iter()
            .map(|s| s.from.max(s.to))
            .fold(0.0, f64::max)
    }

    /// Index of the segment holding time `t` (seconds from the start).
    fn segment_at(&self, t: f64) -> usize {
        self.starts.partition_point(|s| *s <= t).saturating_sub(1)
    }

    /// Requests offered in the first `t` seconds.
    pub fn count_at(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let i = self.segment_at(t);
        (self.before[i] + self.segments[i].count(t - self.starts[i])).min(self.total)
    }

    /// The rate at `t` seconds from the start (0 after the end).
    pub fn rate_at(&self, t: f64) -> f64 {
        if t < 0.0 || t >= self.duration().as_secs_f64() {
            return 0.0;
        }
        let i = self.segment_at(t);
        self.segments[i].rate_at(t - self.starts[i])
    }

    /// When request `x` (from 0) of the run is due, in seconds from the start: the
    /// first moment the count exceeds `x`. Infinite for requests past the plan.
    pub fn time_of(&self, x: f64) -> f64 {
        if x >= self.total {
            return f64::INFINITY;
        }
        // The segment that offers request x: the last one starting at or below x
        // (a segment at rate 0 offers nothing, and is skipped).
        let i = self.before.partition_point(|b| *b <= x).saturating_sub(1);
        self.starts[i] + self.segments[i].time_of(x - self.before[i])
    }

    /// The steps results are reported by: each held rate is one, each ramp is cut
    /// into [`RAMP_STEP_SECS`] pieces. `(start, secs, from, to, text)`, start in
    /// seconds from the plan's start.
    pub fn report_steps(&self) -> Vec<ReportStep> {
        let mut out = Vec::new();
        for (s, start) in self.segments.iter().zip(&self.starts) {
            if s.from == s.to {
                out.push(ReportStep {
                    start: *start,
                    secs: s.secs,
                    from: s.from,
                    to: s.to,
                    text: s.text.clone(),
                });
                continue;
            }
            let pieces = (s.secs / RAMP_STEP_SECS).ceil().max(1.0) as usize;
            for p in 0..pieces {
                let a = p as f64 * RAMP_STEP_SECS;
                let b = (a + RAMP_STEP_SECS).min(s.secs);
                out.push(ReportStep {
                    start: start + a,
                    secs: b - a,
                    from: s.rate_at(a),
                    to: s.rate_at(b),
                    text: if pieces == 1 {
                        s.text.clone()
                    } else {
                        format!("{} [{}/{pieces}]", s.text, p + 1)
                    },
                });
            }
        }
        out
    }

    /// The plan written back as a flag value.
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A step results are reported by ([`RateProfile::report_steps`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReportStep {
    pub start: f64,
    pub secs: f64,
    pub from: f64,
    pub to: f64,
    pub text: String,
}

fn parse_item(item: &str) -> Result<Segment, PlanError> {
    let bad = |why: &str| PlanError(format!("'{item}' {why}"));
    let Some((rates, dur)) = item.rsplit_once(':') else {
        return Err(bad(
            "is not a step: write RATE:DURATION (1000:30s) or FROM..TO:DURATION (100..5000:60s)",
        ));
    };
    let secs = results::duration::parse(dur)
        .map_err(|e| PlanError(format!("'{item}': {e}")))?
        .as_secs_f64();
    if secs <= 0.0 {
        return Err(bad("lasts 0s: give each step a duration above 0"));
    }
    let rate = |r: &str| -> Result<f64, PlanError> {
        let v: f64 = r
            .trim()
            .parse()
            .map_err(|_| bad("has a rate that is not a number of requests per second"))?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad("has a rate below 0"));
        }
        Ok(v)
    };
    let (from, to) = match rates.split_once("..") {
        Some((a, b)) => (rate(a)?, rate(b)?),
        None => {
            let r = rate(rates)?;
            (r, r)
        }
    };
    Ok(Segment {
        from,
        to,
        secs,
        text: item.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(s: &str) -> RateProfile {
        RateProfile::parse(s).unwrap()
    }

    /// Due times of requests 0.., as the lanes compute them.
    fn due_times(p: &RateProfile) -> Vec<f64> {
        (0..)
            .map(|k| p.time_of(k as f64))
            .take_while(|t| t.is_finite())
            .collect()
    }

    fn count_in(due: &[f64], a: f64, b: f64) -> usize {
        due.iter().filter(|t| **t >= a && **t < b).count()
    }

    #[test]
    fn steps_offer_each_rate_for_its_duration() {
        let p = plan("1000:3s,2000:2s,500:1s");
        assert_eq!(p.duration(), Duration::from_secs(6));
        assert_eq!(p.total(), 7500.0);
        let due = due_times(&p);
        assert_eq!(due.len(), 7500);
        for (s, want) in [(0, 1000), (2, 1000), (3, 2000), (4, 2000), (5, 500)] {
            assert_eq!(count_in(&due, s as f64, s as f64 + 1.0), want, "second {s}");
        }
        // Evenly spaced within a step, the spacing changing at the boundary.
        assert!((due[1] - due[0] - 1e-3).abs() < 1e-9);
        assert!((due[3001] - due[3000] - 5e-4).abs() < 1e-9);
        assert!((due[3000] - 3.0).abs() < 1e-9);
        assert_eq!(p.mean(), 1250.0);
        assert_eq!(p.peak(), 2000.0);
    }

    /// The check: the count per second follows the plan within 1 %.
    #[test]
    fn a_ramp_counts_per_second_follow_the_rate_within_one_percent() {
        let p = plan("100..5000:60s");
        let due = due_times(&p);
        for s in 0..60 {
            let want = p.count_at(s as f64 + 1.0) - p.count_at(s as f64);
            let got = count_in(&due, s as f64, s as f64 + 1.0) as f64;
            assert!(
                (got - want).abs() <= (want * 0.01).max(1.0),
                "second {s}: {got} vs {want}"
            );
        }
        assert!((p.total() - (100.0 + 5000.0) / 2.0 * 60.0).abs() < 1e-6);
        // Intervals shrink along the ramp.
        assert!(due[1] - due[0] > due[due.len() - 1] - due[due.len() - 2]);
    }

    #[test]
    fn ramps_down_from_zero_and_pauses() {
        let p = plan("0..1000:2s,0:1s,1000..0:2s");
        let due = due_times(&p);
        assert_eq!(due.len(), 2000);
        assert_eq!(due[0], 0.0, "the first request opens the ramp");
        assert_eq!(count_in(&due, 2.0, 3.0), 0, "nothing during the pause");
        assert!(
            (due[1000] - 3.0).abs() < 1e-9,
            "after the pause: {}",
            due[1000]
        );
        assert_eq!(count_in(&due, 3.0, 4.0), 750);
        assert_eq!(count_in(&due, 4.0, 5.0), 250);
        // Monotonic throughout.
        assert!(due.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn count_and_time_are_inverse() {
        let p = plan("10..700:7s,300:3s");
        for k in [0.0, 1.0, 17.5, 1000.0, 2500.0, 3300.0] {
            let t = p.time_of(k);
            assert!((p.count_at(t) - k).abs() < 1e-6, "{k}: {t}");
        }
        assert!(p.time_of(p.total()).is_infinite());
    }

    #[test]
    fn warmup_runs_at_the_first_rate_before_the_plan() {
        let p = plan("100..200:10s").with_warmup(Duration::from_secs(2));
        assert_eq!(p.duration(), Duration::from_secs(12));
        assert_eq!(p.rate_at(1.0), 100.0);
        assert_eq!(p.rate_at(7.0), 150.0);
        assert_eq!(p.segments()[0].text, "warmup");
    }

    #[test]
    fn ramps_are_reported_in_pieces() {
        let p = plan("1000:10s,100..1200:12s");
        let steps = p.report_steps();
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[0].text, "1000:10s");
        assert_eq!(
            (steps[1].start, steps[1].secs, steps[1].from, steps[1].to),
            (10.0, 5.0, 100.0, 558.3333333333334)
        );
        assert_eq!((steps[3].start, steps[3].secs), (20.0, 2.0));
        assert_eq!(steps[3].text, "100..1200:12s [3/3]");
        assert_eq!(steps[3].to, 1200.0);
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        for (s, says) in [
            (
                "1000:30s,abc:10s",
                "'abc:10s' has a rate that is not a number",
            ),
            ("1000", "'1000' is not a step"),
            ("1000:0s", "lasts 0s"),
            ("1000:3x", "'1000:3x': '3x' is not a duration"),
            ("-5..10:3s", "below 0"),
            ("0:10s", "offers no request"),
            ("1000:30s,", "'' is not a step"),
        ] {
            let e = RateProfile::parse(s).unwrap_err().to_string();
            assert!(e.contains(says), "{s}: {e}");
        }
        let long = vec!["10:1s"; MAX_SEGMENTS + 1].join(",");
        assert!(RateProfile::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most"));
        assert!(RateProfile::looks_like_plan("1000:30s"));
        assert!(RateProfile::looks_like_plan("1..2:3s"));
        assert!(!RateProfile::looks_like_plan("1000"));
    }
}
