//! The report's look, decided once: the series and error colours every chart,
//! legend and table shares, and the one style sheet of every page ingressbench
//! writes (the report and the comparison), light and dark and for print. Colours
//! are plain RGB here, so the page and the charts' drawing library both take them
//! from the same table. It depends on nothing else in the report.

use results::ErrorKind;

/// An RGB colour.
pub type Rgb = (u8, u8, u8);

/// Series colours, by series index (Tableau 10 without its red, which marks errors):
/// mid-tones that read on a white and on a dark page alike.
pub const PALETTE: [Rgb; 9] = [
    (0x4E, 0x79, 0xA7),
    (0xF2, 0x8E, 0x2B),
    (0x59, 0xA1, 0x4F),
    (0xB0, 0x7A, 0xA1),
    (0x76, 0xB7, 0xB2),
    (0xED, 0xC9, 0x48),
    (0x9C, 0x75, 0x5F),
    (0xFF, 0x9D, 0xA7),
    (0x79, 0x70, 0x6E),
];

/// The colour of failed requests and of a dying proxy.
pub const ERROR_RGB: Rgb = (0xE1, 0x57, 0x59);

/// Colours of the error kinds, in the order of [`ErrorKind::ALL`].
pub const KIND_PALETTE: [Rgb; results::ErrorKind::COUNT] = [
    (0xE1, 0x57, 0x59),
    (0x8C, 0x1D, 0x40),
    (0xB0, 0x7A, 0xA1),
    (0xF2, 0x8E, 0x2B),
    (0x9C, 0x75, 0x5F),
    (0x4E, 0x79, 0xA7),
    (0xED, 0xC9, 0x48),
    (0x59, 0xA1, 0x4F),
    (0x76, 0xB7, 0xB2),
    (0xFF, 0x9D, 0xA7),
];

/// The colour of an error kind no palette entry is for.
const OTHER_KIND: Rgb = (0x79, 0x70, 0x6E);

/// Colours of backends in the "which backend answered" chart (cycled).
pub const BACKEND_PALETTE: [Rgb; 12] = [
    (0x4E, 0x79, 0xA7),
    (0xA0, 0xCB, 0xE8),
    (0xF2, 0x8E, 0x2B),
    (0xFF, 0xBE, 0x7D),
    (0x59, 0xA1, 0x4F),
    (0x8C, 0xD1, 0x7D),
    (0xB6, 0x99, 0x2D),
    (0xF1, 0xCE, 0x63),
    (0x49, 0x98, 0x94),
    (0x86, 0xBC, 0xB6),
    (0xB0, 0x7A, 0xA1),
    (0xD4, 0xA6, 0xC8),
];

/// The page background as the charts draw it (a legend's box): near-white, which
/// [`CSS`] maps to the page's own background.
pub const BG_SENTINEL: &str = "#FEFEFE";
/// [`BG_SENTINEL`] as RGB, for drawing.
pub const BG_RGB: Rgb = (0xFE, 0xFE, 0xFE);

/// The colour of series `i`: fixed for the whole report.
pub fn series_rgb(i: usize) -> Rgb {
    PALETTE[i % PALETTE.len()]
}

/// The colour of the `k`-th backend of a series.
pub fn backend_rgb(k: usize) -> Rgb {
    BACKEND_PALETTE[k % BACKEND_PALETTE.len()]
}

/// The colour of an error kind (by its name in results).
pub fn kind_rgb(kind: &str) -> Rgb {
    ErrorKind::ALL
        .iter()
        .position(|k| k.name() == kind)
        .map(|i| KIND_PALETTE[i])
        .unwrap_or(OTHER_KIND)
}

/// A colour as CSS: `#4E79A7`.
pub fn css((r, g, b): Rgb) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// The colour of series `i` as CSS, for the page's legend and tables.
pub fn series_css(i: usize) -> String {
    css(series_rgb(i))
}

/// The colour of an error kind as CSS.
pub fn kind_css(kind: &str) -> String {
    css(kind_rgb(kind))
}

/// The style sheet of every page: the report's sections, tables, charts and banner,
/// and the comparison's deltas (`td.n` numbers, `worse` and `better`). Tables never
/// make the page scroll sideways at a laptop's width: the settings table, whose
/// columns grow with the series, is laid out to the page's width and breaks a long
/// value (a URL, a version string) rather than overflow; the comparison's cells are
/// short figures and names, never wrapped. Inline SVG
/// charts draw in `currentColor` and [`BG_SENTINEL`], both mapped here, so they
/// follow the reader's light or dark scheme.
pub const CSS: &str = r##"
:root{--bg:#ffffff;--fg:#1d2026;--muted:#5d6470;--rule:#d8dbe0;--head:#f3f4f6;
--warn-bg:#fdecec;--warn-fg:#8a1414;--warn-edge:#e15759;--worse:#b3261e;--better:#1b7f3b;
color-scheme:light dark}
@media (prefers-color-scheme: dark){:root{--bg:#15171b;--fg:#e4e6ea;--muted:#a1a8b3;
--rule:#353a43;--head:#1f232a;--warn-bg:#3a1518;--warn-fg:#ffc2c2;--warn-edge:#e15759;
--worse:#ff6b60;--better:#4cd27a}}
*{box-sizing:border-box}
html{background:var(--bg);color:var(--fg)}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;
max-width:1120px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:1.6em;margin:0 0 4px}
h2{font-size:1.25em;margin:36px 0 8px;padding-top:8px;border-top:1px solid var(--rule)}
h3{font-size:1.05em;margin:18px 0 4px}
p,li,dd{max-width:80ch}
.sub,.note,.muted,figcaption{color:var(--muted)}
.note,figcaption{font-size:.9em}
dl.info{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0}
dl.info dt{color:var(--muted)}
dl.info dd{margin:0}
.banner{background:var(--warn-bg);color:var(--warn-fg);border:2px solid var(--warn-edge);
border-radius:6px;padding:10px 16px;margin:16px 0}
.banner strong{display:block;font-size:1.1em}
.banner ul{margin:6px 0 0;padding-left:20px}
#legend{list-style:none;padding:0;margin:12px 0;display:flex;flex-wrap:wrap;gap:6px 18px}
.sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:6px;
vertical-align:-1px}
figure{margin:12px 0 20px;break-inside:avoid}
svg.chart{display:block;width:100%;height:auto;color:var(--fg)}
svg.chart [fill="#FEFEFE"]{fill:var(--bg)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.92em;margin:6px 0 4px}
th,td{padding:3px 9px;border-bottom:1px solid var(--rule);text-align:right;white-space:nowrap}
th{background:var(--head);font-weight:600;white-space:normal;vertical-align:bottom}
th:first-child,td:first-child,th.text{text-align:left}
td.text{text-align:left;white-space:normal}
td.worse{color:var(--worse);font-weight:600}
#table-settings{table-layout:fixed;width:100%}
#table-settings th:first-child{width:11em}
#table-settings td{white-space:normal;overflow-wrap:anywhere}
table.deltas th,table.deltas td{white-space:nowrap;text-align:left}
table.deltas th.n,table.deltas td.n{text-align:right}
table.deltas td.why{white-space:normal;min-width:24em}
td.better,.ok{color:var(--better)}
.toggle{display:inline-flex;align-items:center;gap:6px;cursor:pointer;margin:4px 0;
color:var(--muted)}
.uncorrected{display:none}
#toggle-uncorrected:checked~.uncorrected{display:block}
footer{margin-top:40px;color:var(--muted);font-size:.85em}
@media print{
:root{--bg:#fff;--fg:#000;--muted:#333;--rule:#bbb;--head:#eee;--warn-bg:#fff;--warn-fg:#900;
--worse:#900;--better:#060}
body{max-width:none;padding:0;font-size:11pt}
h2,h3,.note{break-after:avoid}
table,figure,.banner{break-inside:avoid}
.toggle,#toggle-uncorrected{display:none}
.scroll{overflow:visible}
}
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_background_is_mapped_by_the_page() {
        assert_eq!(css(BG_RGB), BG_SENTINEL);
        assert!(CSS.contains(&format!("[fill=\"{BG_SENTINEL}\"]")));
        assert_eq!(series_css(0), "#4E79A7");
        assert_eq!(series_css(PALETTE.len()), series_css(0));
        assert_eq!(kind_css("connect"), "#E15759");
    }
}
