//! `ingressbench report`: re-draws the report of saved runs, one or several side by
//! side, from their result files only.

use super::usage;
use ::report::{files, input};
use clap::Args;
use std::path::{Path, PathBuf};

/// Flags of `ingressbench report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Runs: folders written by `ingressbench run`, or `result.json` files.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// The page to write (default with one run folder: report.html inside it).
    /// report.md, the CSVs and the .hgrm files go beside it.
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
    /// Also write each chart as a PNG beside the page.
    #[arg(long)]
    pub png: bool,
}

/// Where the page goes: `--out` (a folder gets `report.html` inside it); with one run
/// and no `--out`, into the run's folder (`report.html`) or beside a result file
/// (`l.json` gives `l.html`).
fn page_path(a: &ReportArgs) -> anyhow::Result<PathBuf> {
    if let Some(out) = &a.out {
        if out.is_dir() {
            return Ok(out.join("report.html"));
        }
        return Ok(out.clone());
    }
    match a.runs.as_slice() {
        [one] => Ok(default_page(one)),
        _ => Err(usage(
            "report: several runs: give --out FILE.html for the page that puts them side by side",
        )),
    }
}

/// The default page of one run.
pub fn default_page(run: &Path) -> PathBuf {
    if run.is_dir() {
        return run.join("report.html");
    }
    let dir = run.parent().unwrap_or(Path::new(""));
    match run.file_stem().and_then(|s| s.to_str()) {
        Some("result") | None => dir.join("report.html"),
        Some(stem) => dir.join(format!("{stem}.html")),
    }
}

/// Reads the runs, writes the report, prints where.
pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    let input =
        input::load(&a.runs).map_err(|e| usage(format!("report: {}", results::Causes(&e))))?;
    let page = page_path(&a)?;
    results::fsutil::check_writable(&page).map_err(|e| usage(format!("report: --out {e}")))?;
    let written = files::write_all(&input, &page, a.png)?;
    for s in &written.skipped {
        eprintln!("ingressbench: report: left out: {s}");
    }
    println!("report written to {}", page.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(runs: &[&str], out: Option<&str>) -> ReportArgs {
        ReportArgs {
            runs: runs.iter().map(PathBuf::from).collect(),
            out: out.map(PathBuf::from),
            png: false,
        }
    }

    #[test]
    fn the_page_goes_beside_its_run() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().to_str().unwrap();
        assert_eq!(
            page_path(&args(&[d], None)).unwrap(),
            t.path().join("report.html")
        );
        assert_eq!(
            page_path(&args(&["/x/l.json"], None)).unwrap(),
            Path::new("/x/l.html")
        );
        assert_eq!(
            page_path(&args(&["/x/result.json"], None)).unwrap(),
            Path::new("/x/report.html")
        );
        assert_eq!(
            page_path(&args(&["a", "b"], Some("cmp.html"))).unwrap(),
            Path::new("cmp.html")
        );
        assert_eq!(
            page_path(&args(&["a"], Some(d))).unwrap(),
            t.path().join("report.html")
        );
        let e = page_path(&args(&["a", "b"], None)).unwrap_err();
        assert!(e.downcast_ref::<crate::cli::UsageError>().is_some());
    }
}
