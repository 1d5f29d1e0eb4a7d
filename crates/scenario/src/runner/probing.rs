//! A deployed system's behaviour probes (`probes:`): each probe sent once, on a
//! connection of its own, through the URL the load uses: before the load (compared
//! with the baseline system's answers), then after each change step and at the end
//! (compared with the system's own answers before the load), so that a behaviour a
//! reload, a restart or a rotation changes shows when it did.

use super::deploy::Deployed;
use super::{served, RunError};
use crate::plan::{Case, ProbesPlan};
use crate::probes::{self, Observed, Spec};
use results::clock::{Clock, Nanos};
use results::probes::{Difference, ProbeRound, ProbeRun, Unmet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Sends a system's probes, a round at a time.
pub(crate) struct Prober {
    addr: std::net::SocketAddr,
    tls: Option<served::Tls>,
    /// The load's virtual host.
    host: String,
    probes: Vec<Spec>,
    /// Marks each probe's id on the wire, so that the backend counts the attempts
    /// of each round (and each system) apart: `ID~SYSTEM~ROUND`.
    system: String,
    round: u32,
    /// Set when the run is interrupted or the rounds are abandoned: a round in
    /// progress ends at its next probe.
    stop: Vec<Arc<AtomicBool>>,
    /// The annotation corpus's behaviours the system was not given, and why
    /// (`None`: it renders no corpus): their probes are not sent.
    left_out: Option<Vec<(String, String)>>,
}

/// Whether probe `p` has its backend reset the connection or answer late: what a
/// proxy's passive health check counts against the pod.
fn upsets_the_backend(p: &Spec) -> bool {
    p.behaviour.starts_with("reset") || p.behaviour.starts_with("delay-ms")
}

impl Prober {
    /// A prober of `plan`'s probes for the system deployed as `d`.
    pub(crate) fn new(d: &Deployed, case: &Case, plan: &ProbesPlan) -> Result<Prober, String> {
        let target = d.sys.platform.target();
        let spec = case.load.at(&target.url, target.cacert.clone());
        let to = http1::Target::parse(&spec.url)?;
        // The load's virtual host: its first request's, else the URL's.
        let host_of = match spec.targets.first() {
            Some(t) if case.deploy.routes.is_none() => http1::Target::parse(&t.url)?,
            _ => to.clone(),
        };
        // The URL's address; TLS when the URL speaks it, named for the virtual host.
        let named = http1::Target {
            tls: to.tls,
            ..host_of.clone()
        };
        let (addr, tls) = served::endpoint(&spec, &named)?;
        // The probes whose backend breaks its connection or answers late go last,
        // in their order: a proxy with passive health checks (nginx's max_fails 1,
        // fail_timeout 10 s, which NGINX Gateway Fabric leaves as they are) takes a
        // pod that reset a connection out of its upstream for seconds, and every
        // probe after it would read that as a 502 of its own.
        let mut probes = plan.probes.clone();
        probes.sort_by_key(upsets_the_backend);
        Ok(Prober {
            addr,
            tls,
            host: host_of.host_header(),
            probes,
            system: case.system.clone(),
            round: 0,
            stop: Vec::new(),
            left_out: if plan.corpus {
                d.sys.driver.corpus_left_out()
            } else {
                Some(Vec::new())
            },
        })
    }

    /// With the corpus: waits (10 s at most) until a plain route of it, the
    /// round-robin fixture's, answers from a backend three times in a row. The
    /// corpus is applied before the run's route, but a controller may take its
    /// objects in more than one sync, and its Ingresses carry no condition to wait
    /// on: a round that started before they were in force would read their 404s
    /// as behaviours. A corpus that never serves is the cells' to say, not a
    /// failure of the run.
    fn wait_corpus(&self) {
        let id = "load-balance-round-robin.";
        let Some(spec) = self
            .probes
            .iter()
            .find(|p| p.id.starts_with(id) && self.sent(p))
        else {
            return;
        };
        let t = Instant::now();
        let mut in_a_row = 0;
        while t.elapsed() < Duration::from_secs(10) && in_a_row < 3 {
            if self.stop.iter().any(|s| s.load(Ordering::Relaxed)) {
                return;
            }
            let wire = format!("{}~{}~wait", spec.id, self.system);
            let got = self.send(spec, &wire);
            if got.received.is_some() {
                in_a_row += 1;
            } else {
                in_a_row = 0;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether `p` is sent to this system: a probe of the corpus only when the
    /// system was given its behaviour.
    fn sent(&self, p: &Spec) -> bool {
        let Some(b) = probes::behaviour_of(&p.id) else {
            return true;
        };
        self.left_out
            .as_ref()
            .is_some_and(|l| !l.iter().any(|(id, _)| id == b.id))
    }

    /// Every probe once (a repeated one its times in a row), in order.
    pub(crate) fn round(&mut self) -> Vec<Observed> {
        let mut observed = Vec::with_capacity(self.probes.len());
        for p in &self.probes {
            if self.stop.iter().any(|s| s.load(Ordering::Relaxed)) {
                break;
            }
            if !self.sent(p) {
                continue;
            }
            observed.push(if let Some(t) = p.tally {
                self.tallied(p, t)
            } else if p.repeat > 1 {
                self.repeated(p)
            } else {
                let wire = format!("{}~{}~{}", p.id, self.system, self.round);
                self.send(p, &wire)
            });
        }
        self.round += 1;
        observed
    }

    /// `p` sent once, marked `wire`.
    fn send(&self, p: &Spec, wire: &str) -> Observed {
        self.exchange(p, wire).0
    }

    /// `p` sent once, marked `wire`: what it got, and the answer's bytes.
    fn exchange(&self, p: &Spec, wire: &str) -> (Observed, Vec<u8>) {
        let t = Instant::now();
        let got = served::fetch(
            self.addr,
            &p.bytes(&self.host, wire),
            self.tls.as_ref(),
            p.timeout(),
        );
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match got {
            Ok(raw) => (probes::observe(&p.id, wire, &raw, ms), raw),
            Err(why) => (
                Observed {
                    probe: p.id.clone(),
                    error: Some(why),
                    ms,
                    ..Observed::default()
                },
                Vec::new(),
            ),
        }
    }

    /// A probe of the corpus sent `p.repeat` times in a row, each on a connection
    /// of its own, its answers counted as `tally` says: the last answer, with the
    /// count. A sticky tally first sends one request without a cookie, then the
    /// others with the cookies its answer set.
    fn tallied(&self, p: &Spec, tally: probes::Tally) -> Observed {
        use probes::Tally;
        let mut spec = p.clone();
        if tally == Tally::Sticky {
            let wire = format!("{}~{}~{}~c", p.id, self.system, self.round);
            let (_, raw) = self.exchange(p, &wire);
            let cookies = probes::cookies_set(&raw);
            if !cookies.is_empty() {
                spec.headers.push(format!("Cookie: {}", cookies.join("; ")));
            }
        }
        let (mut hits, mut backends) = (0u32, std::collections::BTreeSet::new());
        let mut last = Observed::default();
        for k in 0..p.repeat {
            if self.stop.iter().any(|s| s.load(Ordering::Relaxed)) {
                break;
            }
            let wire = format!("{}~{}~{}~{k}", p.id, self.system, self.round);
            last = self.send(&spec, &wire);
            let by = last.received.as_ref().map(|r| r.backend.clone());
            let ok =
                last.received.is_some() && last.status.is_some_and(|s| (200..300).contains(&s));
            match tally {
                Tally::Canary => {
                    hits += u32::from(
                        by.as_deref()
                            .is_some_and(|b| b.starts_with(kubernetes::corpus::CANARY)),
                    );
                }
                Tally::Refused => hits += u32::from(!ok),
                Tally::Sticky | Tally::Backends | Tally::One => {
                    if let Some(b) = by {
                        backends.insert(b);
                    }
                }
            }
        }
        let (kind, count) = match tally {
            Tally::Canary => ("canary", hits),
            Tally::Refused => ("refused", hits),
            Tally::Sticky => ("sticky", backends.len() as u32),
            Tally::Backends | Tally::One => ("backends", backends.len() as u32),
        };
        last.probe = p.id.clone();
        last.tally = Some(results::probes::Tally {
            kind: kind.into(),
            of: p.repeat,
            count,
        });
        last
    }

    /// `p` sent `p.repeat` times in a row, each on a client connection of its own:
    /// the last answer, with whether a request reached a backend on an upstream
    /// connection an earlier one had used (`None` when none reached a backend).
    fn repeated(&self, p: &Spec) -> Observed {
        let mut seen: Vec<(String, u64)> = Vec::new();
        let mut reused = None;
        let mut last = Observed::default();
        for k in 0..p.repeat {
            let wire = format!("{}~{}~{}~{k}", p.id, self.system, self.round);
            last = self.send(p, &wire);
            if let Some(r) = &last.received {
                let at = (r.backend.clone(), r.conn);
                reused = Some(reused.unwrap_or(false) || seen.contains(&at));
                seen.push(at);
            }
        }
        last.reused = reused;
        last
    }

    /// What `observed` (a round named `round`) did not show as expected.
    fn unmet(&self, round: &str, observed: &[Observed]) -> Vec<Unmet> {
        self.probes
            .iter()
            .filter_map(|p| Some((p, p.expect.as_ref()?)))
            .filter_map(|(p, e)| Some((p, e, observed.iter().find(|o| o.probe == p.id)?)))
            .flat_map(|(p, e, o)| {
                e.unmet(o)
                    .into_iter()
                    .map(move |(field, expected, got)| Unmet {
                        probe: p.id.clone(),
                        round: round.to_string(),
                        field,
                        expected,
                        got,
                    })
            })
            .collect()
    }
}

/// Where `got` differs from `base`, probe by probe, a difference every probe that
/// reached a backend shows alike said once.
fn differences(base: &[Observed], got: &[Observed]) -> Vec<Difference> {
    let pairs: Vec<_> = got
        .iter()
        .filter_map(|o| base.iter().find(|b| b.probe == o.probe).map(|b| (b, o)))
        .collect();
    let both = pairs
        .iter()
        .filter(|(b, o)| b.received.is_some() && o.received.is_some())
        .count();
    probes::collapse(
        pairs
            .iter()
            .flat_map(|(b, o)| probes::compare(b, o))
            .collect(),
        both,
    )
}

/// The round before the load: compared with `baseline`'s (when this system is not
/// the baseline itself), and, with the annotation corpus, a matrix cell per
/// behaviour.
pub(crate) fn before(
    prober: &mut Prober,
    case: &Case,
    plan: &ProbesPlan,
    baseline: Option<&ProbeRun>,
) -> ProbeRun {
    if plan.corpus {
        prober.wait_corpus();
    }
    let observed = prober.round();
    let base = baseline.filter(|_| case.system != plan.baseline);
    let differences = match base {
        Some(base) => differences(&base.observed, &observed),
        None => Vec::new(),
    };
    let corpus = if plan.corpus {
        probes::corpus_cells(base, &observed, &prober.probes, prober.left_out.as_deref())
    } else {
        Vec::new()
    };
    ProbeRun {
        baseline: plan.baseline.clone(),
        unmet: prober.unmet("before", &observed),
        observed,
        differences,
        rounds: Vec::new(),
        corpus,
    }
}

/// The rounds during the load, on a thread of their own: the steps go on while a
/// round runs (its slowest probe waits 2 s). Changes made while a round runs are
/// probed together once it ends, in one round named after all of them, so rounds
/// never queue up behind fast steps. Dropped (a run that failed), the thread stops
/// at its next probe and is joined.
pub(crate) struct During {
    tx: Option<mpsc::Sender<(String, Nanos)>>,
    handle: Option<std::thread::JoinHandle<(Vec<ProbeRound>, Vec<Unmet>)>>,
    quit: Arc<AtomicBool>,
}

impl During {
    /// Starts the thread; `before` is what each round is compared with, `clock`
    /// what each round's start is read on, `stop` the run's interrupt.
    pub(crate) fn start(
        mut prober: Prober,
        before: Vec<Observed>,
        clock: Clock,
        stop: Arc<AtomicBool>,
    ) -> Result<During, RunError> {
        let (tx, rx) = mpsc::channel::<(String, Nanos)>();
        let quit = Arc::new(AtomicBool::new(false));
        prober.stop = vec![stop.clone(), quit.clone()];
        let handle = std::thread::Builder::new()
            .name("ib-probes".into())
            .spawn(move || {
                let (mut rounds, mut unmet) = (Vec::new(), Vec::new());
                while let Ok((first, origin)) = rx.recv() {
                    let mut after = vec![first];
                    after.extend(rx.try_iter().map(|(a, _)| a));
                    if prober.stop.iter().any(|s| s.load(Ordering::Relaxed)) {
                        break;
                    }
                    let after = after.join(" + ");
                    let at_ms = (clock.now() as f64 - origin as f64) / 1e6;
                    let observed = prober.round();
                    unmet.extend(prober.unmet(&after, &observed));
                    rounds.push(ProbeRound {
                        changed: differences(&before, &observed),
                        after,
                        at_ms,
                        observed,
                    });
                }
                (rounds, unmet)
            })
            .map_err(|source| RunError::Io {
                what: "start the probes".into(),
                source,
            })?;
        Ok(During {
            tx: Some(tx),
            handle: Some(handle),
            quit,
        })
    }

    /// A round after `after` (a change's name, or `end`); `origin` is the clock
    /// time the measured window starts at.
    pub(crate) fn after(&self, after: String, origin: Nanos) {
        if let Some(tx) = &self.tx {
            let _ = tx.send((after, origin));
        }
    }

    /// Waits for the rounds asked for (none more once the run is interrupted):
    /// what they saw.
    pub(crate) fn finish(mut self) -> (Vec<ProbeRound>, Vec<Unmet>) {
        self.tx = None;
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for During {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    #[test]
    fn probes_that_break_a_backend_connection_are_not_followed_by_others() {
        let mut specs = probes::corpus_specs(&[]);
        assert!(
            specs.iter().any(|p| p.behaviour == "reset-once"),
            "the corpus has one"
        );
        assert!(specs.iter().any(|p| !upsets_the_backend(p)));
        specs.sort_by_key(upsets_the_backend);
        let first_upset = specs.iter().position(upsets_the_backend).unwrap();
        assert!(
            specs[first_upset..].iter().all(upsets_the_backend),
            "{:?}",
            specs
                .iter()
                .map(|p| (&p.id, &p.behaviour))
                .collect::<Vec<_>>()
        );
    }
}
