//! Helpers of the report's end-to-end tests: real runs of the built binary
//! ([`runs`]), headless Chromium reading the page ([`chromium`]), what the page must
//! show according to `result.json` ([`expect`]), and the processes they start, each
//! stopped on drop ([`proc`]).
//!
//! Each test keeps what it looked at under `target/e2e-artifacts/<test>/`: the page,
//! its screenshots (light and dark) and the summary read from it.

pub mod chromium;
pub mod expect;
pub mod proc;
pub mod runs;

use chromium::{Page, Scheme};
use std::path::{Path, PathBuf};

/// `target/e2e-artifacts/<test>/`, emptied first.
pub fn artifacts(test: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir");
    let dir = target.join("e2e-artifacts").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

/// Opens the report in Chromium (light scheme), keeps a copy of it, its full-page
/// screenshot and the summary under `artifacts`, and returns what the page showed.
pub fn open(report: &Path, work: &Path, artifacts: &Path) -> Page {
    let _ = std::fs::copy(report, artifacts.join("report.html"));
    let page = chromium::inspect(report, work, Scheme::Light);
    let _ = std::fs::write(artifacts.join("page.txt"), format!("{page:#?}"));
    chromium::screenshot(
        report,
        &artifacts.join("light.png"),
        screenshot_height(&page),
        work,
        Scheme::Light,
    );
    page
}

/// The whole page, within what a PNG viewer opens comfortably.
pub fn screenshot_height(page: &Page) -> u32 {
    (page.scroll_height.ceil() as u32).clamp(800, 16_000)
}
