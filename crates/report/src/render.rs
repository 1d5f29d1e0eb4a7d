//! The one shape every output of a report has: a [`Report`] draws its files from the
//! loaded runs (a [`Rendering`]), and the `files` module writes whatever the renderers
//! made. The page, `report.md`, the CSVs, the `.hgrm` files, the PNGs and the text
//! summary are each one implementation, so adding an output is adding a renderer,
//! and every output is drawn from result documents, never from live state. (The model is
//! criterion.rs's `src/report.rs`: one trait, one implementation per output.)

use crate::charts::{self, Chart, ChartError};
use crate::input::ReportInput;
use std::cell::OnceCell;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Chart(#[from] ChartError),
    #[error("write {path}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{series}: {msg}")]
    Histogram { series: String, msg: String },
}

/// A file of a report, named by what it holds; `files::Outputs` says where
/// it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum File {
    Page,
    Markdown,
    TimelineCsv,
    SamplesCsv,
    /// The `.hgrm` of a series (by its name).
    Hgrm(String),
    /// The PNG of a chart (by its id).
    Png(String),
    /// `summary.txt`: the systems of a run side by side.
    Summary,
}

/// What a renderer made: files with their bytes, and what it left out and why.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub files: Vec<(File, Vec<u8>)>,
    /// Files left out, and why (e.g. an unreadable histogram); the others still go.
    pub skipped: Vec<String>,
}

impl Rendered {
    /// One file.
    pub fn one(file: File, bytes: impl Into<Vec<u8>>) -> Rendered {
        Rendered {
            files: vec![(file, bytes.into())],
            skipped: Vec::new(),
        }
    }
}

/// One output of a report.
pub trait Report {
    /// Draws this output from the loaded runs.
    ///
    /// # Errors
    /// [`ReportError`] when the output cannot be drawn at all; a file that can be
    /// left out is listed in [`Rendered::skipped`] instead.
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError>;
}

/// What the renderers draw from: the loaded runs, when the report is made, and the
/// charts, drawn once on first use and shared by the page and the PNGs.
pub struct Rendering<'a> {
    pub input: &'a ReportInput,
    /// When the report was made (RFC 3339), as the page's footer shows it.
    pub generated: String,
    charts: OnceCell<Vec<(Chart, String)>>,
}

impl<'a> Rendering<'a> {
    pub fn new(input: &'a ReportInput, generated: impl Into<String>) -> Rendering<'a> {
        Rendering {
            input,
            generated: generated.into(),
            charts: OnceCell::new(),
        }
    }

    /// Every chart of the report with its SVG, drawn on the first call.
    ///
    /// # Errors
    /// [`ChartError`] when a chart cannot be drawn (nothing is kept then).
    pub fn charts(&self) -> Result<&[(Chart, String)], ChartError> {
        if let Some(c) = self.charts.get() {
            return Ok(c);
        }
        let charts = charts::build(self.input);
        let mut drawn = Vec::with_capacity(charts.len());
        for c in charts {
            let svg = c.svg()?;
            drawn.push((c, svg));
        }
        Ok(self.charts.get_or_init(|| drawn))
    }
}
