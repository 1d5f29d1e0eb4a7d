//! `ingressbench compare`: saved runs side by side, and a regression gate for CI.

use super::usage;
use ::report::compare::{self, Comparison, Run};
use clap::Args;
use std::path::PathBuf;

/// Flags of `ingressbench compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a lab run folder, a result.json, or a folder holding one.
    pub base: PathBuf,
    /// The runs to compare with the baseline (each against BASE), in the same forms.
    #[arg(required = true, value_name = "NEW")]
    pub new: Vec<PathBuf>,
    /// How much worse NEW may be than BASE; exit 1 when a limit is crossed.
    /// Repeatable or comma-separated: p99=10%, p99.99=50ms, max=1s, errors=0,
    /// errors.timeout=5, propagation=200ms. Every limit is an increase over BASE.
    #[arg(long = "max-regression", value_name = "SPEC", value_delimiter = ',')]
    pub max_regression: Vec<String>,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
}

/// Compares the runs, prints the deltas and any crossed threshold.
/// Returns 1 when a threshold is crossed, 0 otherwise.
///
/// # Errors
/// A usage error (exit 2) for a bad spec, a path that is not a run, or runs without a
/// system in common; an I/O error writing the page.
pub fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let thresholds =
        compare::parse_thresholds(&a.max_regression).map_err(|e| usage(e.to_string()))?;
    if let Some(out) = &a.out {
        results::fsutil::check_writable(out).map_err(|e| usage(format!("--out: {e}")))?;
    }
    let load = |p: &PathBuf| compare::load_run(p).map_err(|e| usage(e.to_string()));
    let base = load(&a.base)?;
    let news = a
        .new
        .iter()
        .map(load)
        .collect::<anyhow::Result<Vec<Run>>>()?;
    let comparisons: Vec<Comparison> = news.iter().map(|n| compare::compare(&base, n)).collect();
    for c in &comparisons {
        if c.systems.is_empty() {
            return Err(usage(format!(
                "{} and {} have no system in common ({} vs {})",
                c.base,
                c.new,
                c.only_in_base.join(", "),
                c.only_in_new.join(", ")
            )));
        }
    }
    let mut crossed = Vec::new();
    for (i, c) in comparisons.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", compare::text(c));
        crossed.extend(compare::evaluate(c, &thresholds));
    }
    if !thresholds.is_empty() {
        println!();
        for x in &crossed {
            if comparisons.len() > 1 {
                println!("{}: {}", x.run, x.line());
            } else {
                println!("{}", x.line());
            }
        }
        if crossed.is_empty() {
            println!(
                "every threshold holds ({})",
                thresholds
                    .iter()
                    .map(|t| t.spec.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            println!("{} threshold(s) crossed", crossed.len());
        }
    }
    if let Some(out) = &a.out {
        let page = compare::html(&comparisons, &thresholds);
        results::fsutil::write_atomic(out, page.as_bytes())?;
        println!("comparison written to {}", out.display());
    }
    Ok(if crossed.is_empty() { 0 } else { 1 })
}
