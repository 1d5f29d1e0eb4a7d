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
    /// The significance level of the rank test between repetitions: where both runs
    /// were repeated (--repeat N), a limit is crossed only when the difference of
    /// the medians is past it and p < ALPHA.
    #[arg(
        long,
        value_name = "ALPHA",
        default_value_t = compare::DEFAULT_ALPHA,
        allow_negative_numbers = true
    )]
    pub alpha: f64,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
}

/// Compares the runs, prints the deltas and any crossed threshold (and, with
/// repetitions, any limit the medians went over without a significant difference).
/// Returns 1 when a threshold is crossed, 0 otherwise.
///
/// # Errors
/// A usage error (exit 2) for a bad spec, an alpha outside (0, 1), a path that is not
/// a run, or runs without a system in common; an I/O error writing the page.
pub fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let thresholds =
        compare::parse_thresholds(&a.max_regression).map_err(|e| usage(e.to_string()))?;
    // Written so that NaN is refused too.
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        return Err(usage(format!(
            "--alpha {}: a significance level is between 0 and 1 (exclusive), e.g. 0.05",
            a.alpha
        )));
    }
    if let Some(out) = &a.out {
        results::fsutil::check_writable(out).map_err(|e| usage(format!("--out: {e}")))?;
    }
    let load = |p: &PathBuf| compare::load_run(p).map_err(|e| usage(results::with_causes(&e)));
    let base = load(&a.base)?;
    let news = a
        .new
        .iter()
        .map(load)
        .collect::<anyhow::Result<Vec<Run>>>()?;
    let comparisons: Vec<Comparison> = news
        .iter()
        .map(|n| compare::compare_at(&base, n, a.alpha))
        .collect();
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
    let mut over = Vec::new();
    for (i, c) in comparisons.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", compare::text(c));
        over.extend(compare::evaluate_all(c, &thresholds));
    }
    // Over the limit but not significant is said (NOT SIGNIFICANT: ...) and held.
    let crossed: Vec<_> = over.iter().filter(|x| x.fails()).collect();
    if !thresholds.is_empty() {
        println!();
        for x in &over {
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
