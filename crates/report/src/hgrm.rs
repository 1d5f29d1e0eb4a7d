//! One `.hgrm` file per series: HdrHistogram's percentile distribution of its
//! corrected latency, so HdrHistogram's own plotters read what ingressbench measured.

use crate::input::Series;
use crate::render::{File, Rendered, Rendering, Report, ReportError};

/// The `.hgrm` files of a report; a series whose histogram cannot be read is left
/// out (and said so), the others still written.
pub struct Hgrm;

impl Report for Hgrm {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        let mut out = Rendered::default();
        for s in &r.input.series {
            match hgrm(s) {
                Ok(text) => out
                    .files
                    .push((File::Hgrm(s.name.clone()), text.into_bytes())),
                Err(e) => out.skipped.push(e.to_string()),
            }
        }
        Ok(out)
    }
}

/// The `.hgrm` text of a series: HdrHistogram's percentile distribution, in ms.
///
/// # Errors
/// [`ReportError::Histogram`] when the stored histogram cannot be decoded.
pub fn hgrm(series: &Series) -> Result<String, ReportError> {
    let h = crate::hdr::decode_base64(&series.result.histogram).map_err(|msg| {
        ReportError::Histogram {
            series: series.name.clone(),
            msg,
        }
    })?;
    Ok(crate::hdr::percentile_distribution(&h, 1000.0))
}
