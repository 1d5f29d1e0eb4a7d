//! Behaviour probes as a result holds them: what each probe got from one system
//! (its answer, and what the backend received), and where a system differs from
//! the run's baseline. The corpus and the comparison are the scenario's.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one probe got from one system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub probe: String,
    /// The answer's status; `None` when none came (the error says what happened).
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// A hash of the body when no backend answered (a proxy's own page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_hash: Option<String>,
    /// What the backend received, when a backend answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<Received>,
    /// How long the answer took, in milliseconds.
    pub ms: f64,
    /// For a probe sent several times in a row: whether one of them reached a
    /// backend on an upstream connection an earlier one had used (keep-alive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// The response headers that carry a behaviour (`Access-Control-*`,
    /// `Set-Cookie` with its value left out, `Strict-Transport-Security`, `Vary`,
    /// `Content-Type`, and ours `x-snippet`), names in lower case; several of one
    /// name joined by `, `.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// For a probe of the annotation corpus sent many times: what its answers
    /// added up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tally: Option<Tally>,
}

/// What many answers to one probe added up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// `canary` (answers from the canary pod), `backends` (distinct backends that
    /// answered), `sticky` (distinct backends that answered requests carrying the
    /// cookie the first answer set) or `refused` (answers not 2xx from a backend).
    pub kind: String,
    /// Requests sent.
    pub of: u32,
    /// What `kind` counts.
    pub count: u32,
}

impl Tally {
    /// In words: `canary 21 of 200 (10.5 %)`, `2 backends of 20 answers`.
    pub fn describe(&self) -> String {
        let share = if self.of == 0 {
            0.0
        } else {
            f64::from(self.count) * 100.0 / f64::from(self.of)
        };
        match self.kind.as_str() {
            "backends" | "sticky" => format!(
                "{} backend{} over {} answers",
                self.count,
                if self.count == 1 { "" } else { "s" },
                self.of
            ),
            k => format!("{k} {} of {} ({share:.1} %)", self.count, self.of),
        }
    }

    /// Whether two tallies of one probe say the same: backend counts equal (or
    /// both more than one), shares within what chance explains (three standard
    /// deviations of the difference of two shares over these many requests, at
    /// least 5 points): 10 % and 20 % over 600 requests each are told apart (the
    /// bound is 6.9 points), two samples of 20 % are not (measured with 200 each:
    /// 17 % and 25.5 %, told apart by a bound that counted one sample's chance).
    pub fn same(&self, other: &Tally) -> bool {
        if self.kind != other.kind {
            return false;
        }
        match self.kind.as_str() {
            "backends" | "sticky" => self.count.min(2) == other.count.min(2),
            _ => {
                let p = |t: &Tally| {
                    if t.of == 0 {
                        0.0
                    } else {
                        f64::from(t.count) / f64::from(t.of)
                    }
                };
                let (a, b) = (p(self), p(other));
                let (n, m) = (f64::from(self.of.max(1)), f64::from(other.of.max(1)));
                let sd = (a * (1.0 - a) / n + b * (1.0 - b) / m).sqrt();
                (a - b).abs() <= (3.0 * sd).max(0.05)
            }
        }
    }
}

/// One behaviour of the annotation corpus on one system: its cell of the
/// compatibility matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusCell {
    pub behaviour: String,
    /// `baseline` (the system the others are read against), `same` (as the
    /// baseline), `differs`, `ignored` (answered as a plain route would, where the
    /// baseline did not: the annotation had no effect and nothing said so), `not
    /// expressible` (the system has no way to say it), `not run` (it could, but was
    /// not given it), `refused` (the API refused its object).
    pub verdict: String,
    /// One line: what differs (the first difference and how many more), why it
    /// could not be expressed, or what the baseline answered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The baseline's own answer cannot be taken as ingress-nginx's image's here
    /// (a part of the test environment's is ours): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

/// What the backend said it received.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Received {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: BTreeMap<String, String>,
    pub body_len: u64,
    pub attempt: u32,
    /// Which backend answered, and which of its connections (numbered from 1 in
    /// its life) the request came on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backend: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conn: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One field of a probe where a system differs from the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub probe: String,
    pub field: String,
    pub baseline: String,
    pub system: String,
}

/// The probes of one system: what each got, and where it differs from the
/// baseline system (none for the baseline itself).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRun {
    pub baseline: String,
    /// Before the load.
    pub observed: Vec<Observed>,
    /// Where the answers before the load differ from the baseline system's.
    #[serde(default)]
    pub differences: Vec<Difference>,
    /// The probes again after each change step and at the end of the load, each
    /// round compared with this system's own answers before the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<ProbeRound>,
    /// Expectations (`expect:`) an answer did not meet, in any round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmet: Vec<Unmet>,
    /// The annotation corpus (`probes.corpus`): a cell per behaviour, against the
    /// baseline's answers before the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corpus: Vec<CorpusCell>,
}

impl ProbeRun {
    /// What `--fail-on probe_diffs` counts: differences from the baseline, changes
    /// under the load's changes, and expectations not met.
    pub fn diffs(&self) -> usize {
        self.differences.len()
            + self.rounds.iter().map(|r| r.changed.len()).sum::<usize>()
            + self.unmet.len()
    }
}

/// One round of probes during the load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRound {
    /// The change it followed (`scale 2 -> 3`), or `end`.
    pub after: String,
    /// When the round started, from the start of the measured window.
    pub at_ms: f64,
    pub observed: Vec<Observed>,
    /// Where this round differs from the system's answers before the load
    /// (`baseline`: before, `system`: this round).
    #[serde(default)]
    pub changed: Vec<Difference>,
}

/// An answer that did not show what the scenario expected of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unmet {
    pub probe: String,
    /// `before` or the round's `after`.
    pub round: String,
    pub field: String,
    pub expected: String,
    pub got: String,
}
