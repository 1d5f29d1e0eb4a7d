//! Each chart as a PNG (`--png`), for a slide or a chat where an HTML page cannot
//! go: the same charts as the page, drawn on white with their titles.

use crate::render::{File, Rendered, Rendering, Report, ReportError};

/// A PNG per chart of the report.
pub struct Png;

impl Report for Png {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        let mut out = Rendered::default();
        for (c, _) in r.charts()? {
            out.files.push((File::Png(c.id.clone()), c.png()?));
        }
        Ok(out)
    }
}
