//! `ingressbench search`: the highest constant rate a server sustains within a
//! latency and an error bound (study S2's maximum, which its runs at 30-50 % are
//! fractions of). A closed-loop probe gives the ceiling, then a bisection over short
//! open-loop runs (`engine::search` decides, this file runs the steps and prints).

use super::request::RequestArgs;
use super::{duration, load, usage};
use anyhow::Context;
use clap::Args;
use engine::search::{run_search, SearchError, SearchPlan};
use engine::LoadSpec;
use results::search::{Miss, SearchBounds, SearchResult, SearchStep};
use std::path::PathBuf;
use std::time::Duration;

/// Flags of `ingressbench search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// The URL, the connections (the ceiling depends on them) and the request's
    /// headers, timeouts and TLS, as in `load`.
    #[command(flatten)]
    pub request: RequestArgs,
    /// The corrected p99 a rate must keep, e.g. 5ms.
    #[arg(long, value_name = "DURATION")]
    pub p99: String,
    /// The share of failed requests a rate may have, e.g. 0.1% (or 0.001).
    #[arg(long, default_value = "0.1%", value_name = "PERCENT")]
    pub errors: String,
    /// Length of each step's measured window.
    #[arg(short = 'd', long, default_value = "5s")]
    pub duration: String,
    /// Warm-up before each step's window (not measured).
    #[arg(long, default_value = "1s")]
    pub warmup: String,
    /// Length of the closed-loop probe that finds the ceiling.
    #[arg(long, default_value = "3s")]
    pub probe: String,
    /// Runs of each rate; it passes when more than half pass.
    #[arg(long, default_value_t = 1)]
    pub trials: usize,
    /// Stop when the highest pass and the lowest failure are this close, as a share
    /// of the ceiling.
    #[arg(long, default_value = "2%", value_name = "PERCENT")]
    pub precision: String,
    /// Write the search (every step) as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print only the result.
    #[arg(long)]
    pub quiet: bool,
}

/// `0.1%` or `0.001` as a ratio in 0..=1 (the same reading as a scenario's
/// `search.errors`).
fn ratio(flag: &str, s: &str) -> anyhow::Result<f64> {
    scenario::share(s)
        .ok_or_else(|| usage(format!("--{flag} {s}: give a share such as 0.1% or 0.001")))
}

fn plan(a: &SearchArgs) -> anyhow::Result<SearchPlan> {
    let dur = |flag: &str, v: &str| duration::parse(v).map_err(|e| usage(format!("--{flag}: {e}")));
    let p99 = dur("p99", &a.p99)?;
    if p99.is_zero() {
        return Err(usage("--p99 0s: give a bound above zero, e.g. 5ms"));
    }
    let probe = dur("probe", &a.probe)?;
    if probe < Duration::from_millis(500) {
        return Err(usage(format!(
            "--probe {}: give at least 500ms, enough for a ceiling to show",
            a.probe
        )));
    }
    if a.trials == 0 || a.trials > 9 {
        return Err(usage(format!("--trials {}: give 1 to 9", a.trials)));
    }
    let precision = ratio("precision", &a.precision)?;
    if !(0.001..=0.5).contains(&precision) {
        return Err(usage(format!(
            "--precision {}: give 0.1% to 50%",
            a.precision
        )));
    }
    let spec = LoadSpec {
        rate: Some(1.0),
        duration: dur("duration", &a.duration)?,
        warmup: dur("warmup", &a.warmup)?,
        ..a.request.spec()?
    };
    // Every step is this load at another rate: one that resolves, all do.
    spec.resolve().map_err(|e| usage(e.to_string()))?;
    Ok(SearchPlan {
        spec,
        probe,
        trials: a.trials,
        netns: None,
        bounds: SearchBounds {
            p99_ms: p99.as_secs_f64() * 1e3,
            error_ratio: ratio("errors", &a.errors)?,
            min_achieved: 0.99,
        },
        precision,
    })
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2} ms"))
}

fn line(s: &SearchStep) -> String {
    let what = match s.target {
        None => "probe (closed loop)".to_string(),
        Some(t) => format!("{t:>8.0} req/s #{}", s.trial),
    };
    let judged = if s.target.is_none() {
        String::new()
    } else if s.passed() {
        "  pass".into()
    } else {
        let why: Vec<&str> = s
            .missed
            .iter()
            .map(|m| match m {
                Miss::P99 => "p99",
                Miss::Errors => "errors",
                Miss::Rate => "rate not held",
                Miss::Generator => "generator late",
            })
            .collect();
        format!("  FAIL ({})", why.join(", "))
    };
    format!(
        "  {what}: {:>9.1}/s  p50 {:>10}  p99 {:>10}  errors {:.3}%  lag p99 {:.3} ms{judged}",
        s.achieved,
        ms(s.p50_ms),
        ms(s.p99_ms),
        s.error_ratio * 100.0,
        s.lag_p99_ms
    )
}

/// Runs the search, prints every step and the maximum, writes `--json`.
///
/// # Errors
/// A usage error (exit 2) for bad flags, before any load; an error when a step cannot
/// run or the probe gets no response.
pub fn run(a: SearchArgs) -> anyhow::Result<i32> {
    let p = plan(&a)?;
    if let Some(j) = &a.json {
        results::fsutil::check_writable(j).map_err(|e| usage(format!("--json {e}")))?;
    }
    let stop = load::stop_on_signals()?;
    if !a.quiet {
        println!(
            "search {}: {} connections, p99 <= {:.2} ms, errors <= {:.3}%, {} per step",
            a.request.url,
            a.request.connections,
            p.bounds.p99_ms,
            p.bounds.error_ratio * 100.0,
            a.duration
        );
    }
    let out = match run_search(&p, &stop, |s| {
        if !a.quiet {
            println!("{}", line(s));
        }
    }) {
        Ok(out) => out,
        Err(SearchError::NoCeiling {
            rate,
            url,
            why,
            result,
        }) => {
            // The probe is on record even when nothing can be searched below it.
            write(&a, &result)?;
            anyhow::bail!(
                "the closed-loop probe completed {rate:.1} requests/s against {url}: {why}"
            );
        }
        Err(e) => return Err(e.into()),
    };
    write(&a, &out)?;
    for w in &out.warnings {
        eprintln!("ingressbench: warning: {w}");
    }
    let best = |rate: f64| {
        out.steps
            .iter()
            .filter(|s| s.target == Some(rate) && s.passed())
            .max_by(|x, y| x.achieved.total_cmp(&y.achieved))
    };
    if out.partial {
        println!("interrupted: the steps so far are written, no maximum is claimed");
        return Ok(130);
    }
    match out.max_rate {
        Some(m) => {
            let s = best(m);
            println!(
                "maximum: {m:.0} req/s with p99 {} and {:.3}% errors over {} connections (closed-loop ceiling {:.0} req/s)",
                ms(s.and_then(|s| s.p99_ms)),
                s.map_or(0.0, |s| s.error_ratio * 100.0),
                a.request.connections,
                out.ceiling
            );
            if let Some(g) = out.generator_limit {
                println!(
                    "WARNING: the generator could not hold {g:.0} req/s: the server's maximum may be higher than the generator's (use more threads or cores)"
                );
            }
            Ok(0)
        }
        None => {
            println!(
                "no rate held p99 <= {:.2} ms and errors <= {:.3}% (the lowest tried: {:.0} req/s)",
                p.bounds.p99_ms,
                p.bounds.error_ratio * 100.0,
                out.steps
                    .iter()
                    .filter_map(|s| s.target)
                    .fold(f64::INFINITY, f64::min)
            );
            Ok(1)
        }
    }
}

fn write(a: &SearchArgs, out: &SearchResult) -> anyhow::Result<()> {
    if let Some(j) = &a.json {
        let mut bytes = serde_json::to_vec_pretty(out)?;
        bytes.push(b'\n');
        results::fsutil::write_atomic(j, &bytes)
            .with_context(|| format!("--json {}", j.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_as_percent_or_ratio_and_bad_ones_say_how() {
        assert_eq!(ratio("errors", "0.1%").unwrap(), 0.001);
        assert_eq!(ratio("errors", "0.02").unwrap(), 0.02);
        assert_eq!(ratio("errors", "0%").unwrap(), 0.0);
        for bad in ["x", "150%", "-1", "2"] {
            let e = ratio("errors", bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--errors {bad}: give a share")),
                "{e}"
            );
        }
    }
}
