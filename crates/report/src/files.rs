//! Everything a report writes, and where: the page, `report.md`, `timeline.csv`,
//! `samples.csv`, an HdrHistogram `.hgrm` per series and, with `--png`, each chart
//! as a PNG. The renderers ([`crate::render::Report`]) make the files; this module
//! names them and writes them. The files go beside the page; their names follow its
//! name, so two reports in one folder do not overwrite each other (see
//! [`Outputs::beside`]).

use crate::input::ReportInput;
use crate::render::{File, Rendering, Report};
use std::path::{Path, PathBuf};

pub use crate::render::ReportError;

/// The paths of a report's files.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub html: PathBuf,
    pub markdown: PathBuf,
    pub timeline_csv: PathBuf,
    pub samples_csv: PathBuf,
    /// `summary.txt` (`<stem>-summary.txt` beside another page name).
    pub summary: PathBuf,
    dir: PathBuf,
    /// "" for a page named `report.html`; else the page's stem and a dash.
    prefix: String,
}

impl Outputs {
    /// The files beside the page `html`: `report.html` gives `report.md`,
    /// `timeline.csv`, `samples.csv`, `<series>.hgrm`, `<chart id>.png`; any other
    /// name, e.g. `cmp.html`, gives `cmp.md`, `cmp-timeline.csv`, `cmp-<series>.hgrm`.
    pub fn beside(html: &Path) -> Outputs {
        let dir = html
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let stem = html
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        let prefix = if stem == "report" {
            String::new()
        } else {
            format!("{stem}-")
        };
        Outputs {
            html: html.to_path_buf(),
            markdown: dir.join(format!("{stem}.md")),
            timeline_csv: dir.join(format!("{prefix}timeline.csv")),
            samples_csv: dir.join(format!("{prefix}samples.csv")),
            summary: dir.join(format!("{prefix}{}", results::folder::SUMMARY)),
            dir,
            prefix,
        }
    }

    /// The `.hgrm` of a series (corrected latency).
    pub fn hgrm(&self, series: &str) -> PathBuf {
        self.dir
            .join(format!("{}{}.hgrm", self.prefix, file_safe(series)))
    }

    /// Where a renderer's file goes.
    pub fn path(&self, file: &File) -> PathBuf {
        match file {
            File::Page => self.html.clone(),
            File::Markdown => self.markdown.clone(),
            File::TimelineCsv => self.timeline_csv.clone(),
            File::SamplesCsv => self.samples_csv.clone(),
            File::Hgrm(series) => self.hgrm(series),
            File::Png(chart) => self.png(chart),
            File::Summary => self.summary.clone(),
        }
    }

    /// The PNG of a chart.
    pub fn png(&self, chart_id: &str) -> PathBuf {
        self.dir.join(format!("{}{chart_id}.png", self.prefix))
    }
}

/// A series name as a file name: `run/nginx-reload` becomes `run_nginx-reload`.
pub fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// What [`write`] wrote.
#[derive(Clone, Debug, Default)]
pub struct Written {
    pub files: Vec<PathBuf>,
    /// Charts or files left out, and why (e.g. an unreadable histogram).
    pub skipped: Vec<String>,
}

/// The renderers of a report, in the order their files are written: the page,
/// `report.md`, the CSVs, the `.hgrm` files, and the PNGs with `png`.
pub fn renderers(png: bool) -> Vec<&'static dyn Report> {
    let mut v: Vec<&'static dyn Report> = vec![
        &crate::html::HtmlPage,
        &crate::markdown::Markdown,
        &crate::csv::Csv,
        &crate::hgrm::Hgrm,
    ];
    if png {
        v.push(&crate::png::Png);
    }
    v
}

/// Draws and writes the whole report for `input` with its page at `html`.
///
/// # Errors
/// [`ReportError`] when a chart cannot be drawn or a file cannot be written; files
/// already written stay.
pub fn write_all(input: &ReportInput, html: &Path, png: bool) -> Result<Written, ReportError> {
    write(input, html, &renderers(png))
}

/// Draws `input` with each renderer in turn and writes its files beside the page
/// at `html`, each as soon as its renderer made it.
///
/// # Errors
/// [`ReportError`] from the first renderer that fails or the first file that cannot
/// be written; files already written stay.
pub fn write(
    input: &ReportInput,
    html: &Path,
    renderers: &[&dyn Report],
) -> Result<Written, ReportError> {
    let out = Outputs::beside(html);
    let generated = results::time::rfc3339(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let rendering = Rendering::new(input, generated);
    let mut written = Written::default();
    for r in renderers {
        let made = r.render(&rendering)?;
        for (file, bytes) in made.files {
            let path = out.path(&file);
            results::fsutil::write_atomic(&path, &bytes).map_err(|source| ReportError::Write {
                path: path.display().to_string(),
                source,
            })?;
            written.files.push(path);
        }
        written.skipped.extend(made.skipped);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_page() {
        let o = Outputs::beside(Path::new("results/r1/report.html"));
        assert_eq!(o.markdown, Path::new("results/r1/report.md"));
        assert_eq!(o.timeline_csv, Path::new("results/r1/timeline.csv"));
        assert_eq!(
            o.hgrm("nginx-reload"),
            Path::new("results/r1/nginx-reload.hgrm")
        );
        assert_eq!(
            o.png("chart-percentiles"),
            Path::new("results/r1/chart-percentiles.png")
        );
        let o = Outputs::beside(Path::new("cmp.html"));
        assert_eq!(o.markdown, Path::new("./cmp.md"));
        assert_eq!(o.samples_csv, Path::new("./cmp-samples.csv"));
        assert_eq!(o.hgrm("a/caddy-api"), Path::new("./cmp-a_caddy-api.hgrm"));
    }

    #[test]
    fn every_renderer_writes_beside_the_page() {
        let t = tempfile::tempdir().unwrap();
        let input = ReportInput::single("load", results::RunResult::default());
        let page = t.path().join("l.html");
        let w = write_all(&input, &page, false).unwrap();
        let names: Vec<String> = w
            .files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["l.html", "l.md", "l-timeline.csv"]);
        assert_eq!(w.skipped.len(), 1, "no histogram: no .hgrm");
        let w = write(&input, &page, &[&crate::summary::Summary]).unwrap();
        assert_eq!(w.files, [t.path().join("l-summary.txt")]);
        let text = std::fs::read_to_string(&w.files[0]).unwrap();
        assert!(text.starts_with("Scenario : 1 systems"), "{text}");
    }
}
