//! Everything a report writes, and where: the page, `report.md`, `timeline.csv`,
//! `samples.csv`, an HdrHistogram `.hgrm` per series and, with `--png`, each chart
//! as a PNG. The files go beside the page; their names follow its name, so two
//! reports in one folder do not overwrite each other (see [`Outputs::beside`]).

use super::charts::{self, Chart, ChartError};
use super::input::{ReportInput, Series};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Chart(#[from] ChartError),
    #[error("write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{series}: {msg}")]
    Histogram { series: String, msg: String },
}

/// The paths of a report's files.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub html: PathBuf,
    pub markdown: PathBuf,
    pub timeline_csv: PathBuf,
    pub samples_csv: PathBuf,
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
            dir,
            prefix,
        }
    }

    /// The `.hgrm` of a series (corrected latency).
    pub fn hgrm(&self, series: &str) -> PathBuf {
        self.dir
            .join(format!("{}{}.hgrm", self.prefix, file_safe(series)))
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

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `timeline.csv`: one row per series and second: `series,t,sent,completed,errors,
/// p50_ms,p99_ms,max_ms`, then one column per error kind seen in the report.
pub fn timeline_csv(input: &ReportInput) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for k in results::ErrorKind::ALL {
        let name = k.name().to_string();
        if input.series.iter().any(|s| {
            s.result
                .timeline
                .iter()
                .any(|e| e.errors_by_kind.contains_key(&name))
        }) {
            kinds.push(name);
        }
    }
    let mut s = String::from("series,t,sent,completed,errors,p50_ms,p99_ms,max_ms");
    for k in &kinds {
        let _ = write!(s, ",{k}");
    }
    s.push('\n');
    for series in &input.series {
        for e in &series.result.timeline {
            let _ = write!(
                s,
                "{},{},{},{},{},{},{},{}",
                csv_field(&series.name),
                e.t,
                e.sent,
                e.completed,
                e.errors,
                e.p50,
                e.p99,
                e.max
            );
            for k in &kinds {
                let _ = write!(s, ",{}", e.errors_by_kind.get(k).copied().unwrap_or(0));
            }
            s.push('\n');
        }
    }
    s
}

/// `samples.csv`: one row per sampled request: `series,t_ms,latency_ms,status,error,
/// backend` (error and backend empty when there is none); `None` when no series has
/// samples.
pub fn samples_csv(input: &ReportInput) -> Option<String> {
    if input.series.iter().all(|s| s.result.samples.is_none()) {
        return None;
    }
    let mut s = String::from("series,t_ms,latency_ms,status,error,backend\n");
    for series in &input.series {
        let Some(sm) = &series.result.samples else {
            continue;
        };
        let name = csv_field(&series.name);
        for i in 0..sm.len() {
            let backend = sm
                .backend
                .get(i)
                .and_then(|b| usize::try_from(*b).ok())
                .and_then(|b| sm.backend_ids.get(b))
                .map(|b| csv_field(b))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{name},{},{},{},{},{backend}",
                sm.t_ms[i],
                sm.latency_ms.get(i).copied().unwrap_or(0.0),
                sm.status.get(i).copied().unwrap_or(0),
                sm.error_kind(i).unwrap_or(""),
            );
        }
    }
    Some(s)
}

/// The `.hgrm` text of a series: HdrHistogram's percentile distribution, in ms.
///
/// # Errors
/// [`ReportError::Histogram`] when the stored histogram cannot be decoded.
pub fn hgrm(series: &Series) -> Result<String, ReportError> {
    let h = super::hdr::decode_base64(&series.result.histogram).map_err(|msg| {
        ReportError::Histogram {
            series: series.name.clone(),
            msg,
        }
    })?;
    Ok(super::hdr::percentile_distribution(&h, 1000.0))
}

/// What [`write_all`] wrote.
#[derive(Clone, Debug, Default)]
pub struct Written {
    pub files: Vec<PathBuf>,
    /// Charts or files left out, and why (e.g. an unreadable histogram).
    pub skipped: Vec<String>,
}

/// Draws and writes the whole report for `input` with its page at `html`.
///
/// # Errors
/// [`ReportError`] when a chart cannot be drawn or a file cannot be written; files
/// already written stay.
pub fn write_all(input: &ReportInput, html: &Path, png: bool) -> Result<Written, ReportError> {
    let out = Outputs::beside(html);
    let mut written = Written::default();
    let charts: Vec<Chart> = charts::build(input);
    let mut drawn = Vec::with_capacity(charts.len());
    for c in charts {
        let svg = c.svg()?;
        drawn.push((c, svg));
    }
    let mut put = |path: &Path, bytes: &[u8]| -> Result<(), ReportError> {
        results::fsutil::write_atomic(path, bytes).map_err(|source| ReportError::Write {
            path: path.display().to_string(),
            source,
        })?;
        written.files.push(path.to_path_buf());
        Ok(())
    };
    let generated = results::time::rfc3339(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    put(
        &out.html,
        super::html::render(input, &drawn, &generated).as_bytes(),
    )?;
    put(&out.markdown, super::markdown::render(input).as_bytes())?;
    put(&out.timeline_csv, timeline_csv(input).as_bytes())?;
    if let Some(s) = samples_csv(input) {
        put(&out.samples_csv, s.as_bytes())?;
    }
    let mut skipped = Vec::new();
    for s in &input.series {
        match hgrm(s) {
            Ok(text) => put(&out.hgrm(&s.name), text.as_bytes())?,
            Err(e) => skipped.push(e.to_string()),
        }
    }
    if png {
        for (c, _) in &drawn {
            put(&out.png(&c.id), &c.png()?)?;
        }
    }
    written.skipped = skipped;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{RunResult, Samples, TimelineEntry};

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

    fn input() -> ReportInput {
        let mut r = RunResult::default();
        let mut e = TimelineEntry {
            t: 0,
            sent: 10,
            completed: 9,
            errors: 1,
            p50: 0.3,
            p99: 1.5,
            max: 2.0,
            ..Default::default()
        };
        e.errors_by_kind.insert("read".into(), 1);
        r.timeline.push(e);
        r.samples = Some(Samples {
            fraction: 1.0,
            t_ms: vec![1.5, 2.5],
            latency_ms: vec![0.3, 4.0],
            status: vec![200, 0],
            error: vec![0, 1],
            error_kinds: vec!["read".into()],
            backend: vec![0, -1],
            backend_ids: vec!["b1".into()],
        });
        ReportInput {
            runs: vec![Default::default()],
            series: vec![
                crate::input::Series {
                    name: "a,b".into(),
                    result: r,
                    ..Default::default()
                },
                crate::input::Series {
                    name: "plain".into(),
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn csv_rows() {
        let i = input();
        assert_eq!(
            timeline_csv(&i),
            "series,t,sent,completed,errors,p50_ms,p99_ms,max_ms,read\n\"a,b\",0,10,9,1,0.3,1.5,2,1\n"
        );
        assert_eq!(
            samples_csv(&i).unwrap(),
            "series,t_ms,latency_ms,status,error,backend\n\"a,b\",1.5,0.3,200,,b1\n\"a,b\",2.5,4,0,read,\n"
        );
        let mut none = i.clone();
        none.series[0].result.samples = None;
        assert!(samples_csv(&none).is_none());
    }
}
