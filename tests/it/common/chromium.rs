//! Headless Chromium as the report's reader, without a DevTools client: a wrapper
//! page loads the report in an iframe (same origin with
//! `--allow-file-access-from-files`), a script in the wrapper reads the frame's DOM
//! once it has loaded (sizes of the charts, text of the table cells, errors), and
//! `--dump-dom` hands back a JSON summary it wrote into the wrapper. Chromium's own
//! console log (`--enable-logging=stderr`) is read as well: it has the script errors
//! raised while the page was still being parsed, before any listener could exist.
//!
//! Chromium is CPU-hungry: each run holds [`exclusive`](super::exclusive), so it never
//! runs beside a measured load (never call these while holding it).
//!
//! Each test keeps what it looked at under `target/e2e-artifacts/<test>/`: the page,
//! its screenshots (light and dark) and the summary read from it.
//!
//! Chromium never reaches the network: background services are off and every host
//! name resolves to nothing, so a page that asked for a CDN would show it as a failed
//! resource rather than quietly working.

use super::proc::{tail, Proc};
use super::shared;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The longest a single Chromium run may take (it takes ~2 s here).
const LIMIT: Duration = Duration::from_secs(60);

/// The wrapper's element that receives the summary.
const RESULT_ID: &str = "e2e-result";

/// Light or dark: the reader's setting the page must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Light,
    Dark,
}

/// What the page showed, as read from the page by the wrapper's script.
#[derive(Debug, Deserialize)]
pub struct Page {
    pub title: String,
    /// Every element id in the page, in document order.
    pub ids: Vec<String>,
    /// Every element whose id starts with `chart-`, as first shown.
    pub charts: Vec<ChartBox>,
    /// The same after every checkbox of the page was ticked (hidden charts shown).
    pub charts_toggled: Vec<ChartBox>,
    /// How many checkboxes were ticked.
    pub toggled: usize,
    pub tables: Vec<Table>,
    /// The series legend: name and the computed colour of its swatch.
    pub legend: Vec<LegendEntry>,
    /// The text of `#banner`, when the page has one and it is displayed.
    pub banner: Option<String>,
    /// `innerText` of the body.
    pub text: String,
    /// Errors seen by listeners in the frame: script errors, failed resources,
    /// unhandled rejections, `console.error`.
    pub errors: Vec<String>,
    /// URLs the page loaded (Resource Timing): a self-contained page has none.
    pub resources: Vec<String>,
    /// Computed background colour of the root element.
    pub background: String,
    /// Height of the whole document in CSS pixels, for a full-page screenshot.
    pub scroll_height: f64,
    /// Chromium's console messages (from its log), whatever frame logged them.
    #[serde(skip)]
    pub console: Vec<String>,
}

/// A chart's box and what it is drawn with.
#[derive(Clone, Debug, Deserialize)]
pub struct ChartBox {
    pub id: String,
    pub tag: String,
    pub w: f64,
    pub h: f64,
    /// Computed stroke colours (`rgb(r, g, b)`) of its lines with a visible length.
    pub strokes: Vec<String>,
    /// Computed fill colours of its shapes.
    pub fills: Vec<String>,
    /// Its `<text>` labels.
    pub texts: Vec<String>,
    /// Number of elements inside it.
    pub elements: usize,
    /// Elements inside it by tag (`circle`, `polyline`, ...).
    pub shapes: BTreeMap<String, usize>,
    /// Each stroked line (`polyline`, `path`) with a visible length: its colour and
    /// where it is drawn, so lines drawn exactly over each other can be told apart.
    pub lines: Vec<Stroke>,
}

/// A stroked line of a chart: computed colour and bounding box in CSS pixels.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Stroke {
    pub color: String,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// A table by its `data-col` keys.
#[derive(Clone, Debug, Deserialize)]
pub struct Table {
    pub id: String,
    /// `(data-col, header text)` of each column.
    pub cols: Vec<(String, String)>,
    pub rows: Vec<Row>,
    /// Whether the table is wider than the box it scrolls in (its `.scroll`
    /// wrapper, or the page): a reader has to scroll sideways to see it.
    pub overflows: bool,
    /// The text of every cell drawn on more than one line.
    pub wrapped: Vec<String>,
}

/// One table row: the series it belongs to (`data-series`) and its cells by column.
#[derive(Clone, Debug, Deserialize)]
pub struct Row {
    pub series: Option<String>,
    pub cells: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LegendEntry {
    pub name: String,
    pub color: String,
}

impl Page {
    pub fn chart(&self, id: &str) -> Option<&ChartBox> {
        self.charts.iter().find(|c| c.id == id)
    }

    pub fn chart_toggled(&self, id: &str) -> Option<&ChartBox> {
        self.charts_toggled.iter().find(|c| c.id == id)
    }

    /// The table with this id.
    ///
    /// # Panics
    /// When the page has none, listing the tables it has.
    pub fn table(&self, id: &str) -> &Table {
        self.tables.iter().find(|t| t.id == id).unwrap_or_else(|| {
            let ids: Vec<&str> = self.tables.iter().map(|t| t.id.as_str()).collect();
            panic!("no table #{id} on the page; tables: {ids:?}")
        })
    }
}

impl Table {
    /// The row of `series`.
    ///
    /// # Panics
    /// When there is not exactly one.
    pub fn row(&self, series: &str) -> &Row {
        let rows: Vec<&Row> = self.rows_of(series);
        assert_eq!(
            rows.len(),
            1,
            "#{}: rows of series {series:?}: {rows:?}",
            self.id
        );
        rows[0]
    }

    /// All rows of `series`, in page order.
    pub fn rows_of(&self, series: &str) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.series.as_deref() == Some(series))
            .collect()
    }
}

impl Row {
    /// The text of the cell in column `col`.
    ///
    /// # Panics
    /// When the row has no such column.
    pub fn cell(&self, col: &str) -> &str {
        self.cells
            .get(col)
            .unwrap_or_else(|| panic!("no cell {col:?} in row {:?}", self.cells))
    }
}

/// The Chromium binary: `chromium` on the PATH (Debian's package).
///
/// # Panics
/// When it is missing, saying how to install it.
pub fn binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .expect("chromium not found: install it (apt-get install -y chromium, or make setup)")
}

fn command(work: &Path, scheme: Scheme) -> Command {
    let profile = tempfile::tempdir_in(work).expect("chromium profile dir");
    let mut c = Command::new(binary());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--metrics-recording-only",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--allow-file-access-from-files",
        "--enable-logging=stderr",
        "--v=0",
    ]);
    if scheme == Scheme::Dark {
        c.arg("--force-dark-mode");
    }
    // The profile outlives this function as a folder under `work`, which the test's
    // temp dir removes; a fresh one per run, so no state carries over.
    c.arg(format!("--user-data-dir={}", profile.keep().display()));
    c
}

fn file_url(p: &Path) -> String {
    let abs = std::path::absolute(p).expect("absolute path");
    format!("file://{}", abs.display())
}

/// Opens `report` in headless Chromium and reads it back from the page.
///
/// `work` holds the wrapper page, Chromium's profile and logs.
///
/// # Panics
/// When Chromium fails or the wrapper's script did not write its summary.
pub fn inspect(report: &Path, work: &Path, scheme: Scheme) -> Page {
    let name = match scheme {
        Scheme::Light => "inspect-light",
        Scheme::Dark => "inspect-dark",
    };
    let wrapper = work.join(format!("{name}.html"));
    std::fs::write(&wrapper, wrapper_html(&file_url(report))).expect("write wrapper");
    let mut cmd = command(work, scheme);
    cmd.args([
        "--window-size=1280,4000",
        "--virtual-time-budget=5000",
        "--dump-dom",
    ])
    .arg(file_url(&wrapper));
    let out = {
        let _turn = shared();
        Proc::spawn_group(name, &mut cmd, work).finish(LIMIT)
    };
    let json = extract_result(&out.stdout).unwrap_or_else(|| {
        panic!(
            "chromium: no summary in the dumped page (exit {:?}); stderr:\n{}\nstdout:\n{}",
            out.code,
            tail(&out.stderr, 30),
            tail(&out.stdout, 30)
        )
    });
    let mut page: Page = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("chromium: summary is not a page: {e}: {json}"));
    page.console = console_lines(&out.stderr);
    page
}

/// Takes a screenshot of `report`, `height` CSS pixels tall, into `png`.
///
/// # Panics
/// When Chromium fails or writes no image.
pub fn screenshot(report: &Path, png: &Path, height: u32, work: &Path, scheme: Scheme) {
    let _ = std::fs::remove_file(png);
    let mut cmd = command(work, scheme);
    cmd.arg(format!("--window-size=1280,{height}"))
        .arg("--virtual-time-budget=2000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(file_url(report));
    let out = {
        let _turn = shared();
        Proc::spawn_group("screenshot", &mut cmd, work).finish(LIMIT)
    };
    let size = std::fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 1000,
        "chromium wrote no screenshot at {} (exit {:?}):\n{}",
        png.display(),
        out.code,
        tail(&out.stderr, 20)
    );
}

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
    let page = inspect(report, work, Scheme::Light);
    let _ = std::fs::write(artifacts.join("page.txt"), format!("{page:#?}"));
    screenshot(
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

/// The summary the wrapper wrote: `<pre id="e2e-result" data-done="1">JSON</pre>`.
/// The script escapes `<`, `>` and `&` in the JSON, so the text needs no unescaping.
fn extract_result(dom: &str) -> Option<String> {
    let open = format!("<pre id=\"{RESULT_ID}\" data-done=\"1\">");
    let start = dom.find(&open)? + open.len();
    let len = dom[start..].find("</pre>")?;
    Some(dom[start..start + len].to_string())
}

/// Console messages from Chromium's log:
/// `[..:INFO:CONSOLE:1] "message", source: file:///... (1)`.
fn console_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .filter_map(|l| l.split_once("] ").map(|(_, m)| m.to_string()))
        .collect()
}

/// The wrapper page: the report in an iframe the width of a laptop's window (1280
/// CSS pixels), and the script that reads it.
fn wrapper_html(report_url: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>e2e wrapper</title>
<style>body{{margin:0}} iframe{{border:0;width:1280px;height:4000px;display:block}}</style>
</head><body>
<pre id="{RESULT_ID}">pending</pre>
<iframe id="report" src="{report_url}"></iframe>
<script>
{SCRIPT}
</script>
</body></html>
"#
    )
}

/// Reads the report's frame. Listeners go onto the frame's window as soon as it
/// exists (polled from the start: the frame's window is replaced when the report
/// commits, and an inline script of the report may run before `load`).
const SCRIPT: &str = r#"
(function () {
  const out = document.getElementById('e2e-result');
  const frame = document.getElementById('report');
  const errors = [];
  function hook(w) {
    if (!w || w.__e2eHooked) return;
    try {
      w.__e2eHooked = true;
      w.addEventListener('error', function (e) {
        const t = e.target;
        if (t && t !== w && t.outerHTML) {
          errors.push('resource failed: ' + t.outerHTML.slice(0, 200));
        } else {
          errors.push('script error: ' + e.message + ' at ' + e.filename + ':' + e.lineno);
        }
      }, true);
      w.addEventListener('unhandledrejection', function (e) {
        errors.push('unhandled rejection: ' + String(e.reason));
      });
      const ce = w.console.error;
      w.console.error = function () {
        errors.push('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
        return ce.apply(w.console, arguments);
      };
    } catch (e) {
      errors.push('could not watch the page: ' + e);
    }
  }
  const poll = setInterval(function () {
    try {
      const d = frame.contentDocument;
      if (d && d.URL !== 'about:blank') hook(frame.contentWindow);
    } catch (e) { /* not yet */ }
  }, 1);

  function charts(w, d) {
    return Array.prototype.map.call(d.querySelectorAll('[id^="chart-"]'), function (el) {
      const r = el.getBoundingClientRect();
      const strokes = new Set(), fills = new Set(), shapes = {};
      el.querySelectorAll('*').forEach(function (s) {
        const t = s.tagName.toLowerCase();
        shapes[t] = (shapes[t] || 0) + 1;
      });
      const lines = [];
      el.querySelectorAll('polyline,path,line,polygon,rect,circle').forEach(function (s) {
        const cs = w.getComputedStyle(s);
        let len = 1;
        try { if (s.getTotalLength) len = s.getTotalLength(); } catch (e) { len = 1; }
        if (cs.stroke && cs.stroke !== 'none' && len > 0) {
          strokes.add(cs.stroke);
          const t = s.tagName.toLowerCase();
          if (t === 'polyline' || t === 'path') {
            const b = s.getBoundingClientRect();
            lines.push({ color: cs.stroke, x: Math.round(b.x), y: Math.round(b.y),
                         w: Math.round(b.width), h: Math.round(b.height) });
          }
        }
        if (cs.fill && cs.fill !== 'none') fills.add(cs.fill);
      });
      return {
        id: el.id,
        tag: el.tagName.toLowerCase(),
        w: r.width,
        h: r.height,
        strokes: Array.from(strokes),
        fills: Array.from(fills),
        texts: Array.prototype.map.call(el.querySelectorAll('text'), function (t) {
          return t.textContent.trim();
        }).filter(function (t) { return t.length > 0; }),
        elements: el.querySelectorAll('*').length,
        shapes: shapes,
        lines: lines,
      };
    });
  }

  function tables(d) {
    return Array.prototype.map.call(d.querySelectorAll('table'), function (t, i) {
      const cols = Array.prototype.map.call(t.querySelectorAll('thead th'), function (th) {
        return [th.getAttribute('data-col') || th.textContent.trim(), th.textContent.trim()];
      });
      const rows = Array.prototype.map.call(t.querySelectorAll('tbody tr'), function (tr) {
        const cells = {};
        tr.querySelectorAll('td').forEach(function (td, j) {
          const key = td.getAttribute('data-col') || (cols[j] ? cols[j][0] : String(j));
          cells[key] = td.textContent.trim();
        });
        return { series: tr.getAttribute('data-series'), cells: cells };
      });
      const box = t.closest('.scroll') || d.documentElement;
      const wrapped = [];
      t.querySelectorAll('td').forEach(function (td) {
        const r = d.createRange();
        r.selectNodeContents(td);
        // Lines are rects whose tops differ by more than half a line (a swatch sits
        // a pixel off its text's line).
        const tops = Array.prototype.filter.call(r.getClientRects(), function (q) {
          return q.width > 0;
        }).map(function (q) { return q.top; }).sort(function (a, b) { return a - b; });
        let lines = tops.length > 0 ? 1 : 0;
        for (let k = 1; k < tops.length; k++) if (tops[k] - tops[k - 1] > 8) lines++;
        if (lines > 1) wrapped.push(td.textContent.trim());
      });
      return { id: t.id || ('table#' + i), cols: cols, rows: rows,
               overflows: box.scrollWidth > box.clientWidth, wrapped: wrapped };
    });
  }

  function read(w, d) {
    const banner = d.getElementById('banner');
    const shown = banner && banner.getBoundingClientRect().height > 0;
    let resources = [];
    try {
      resources = w.performance.getEntriesByType('resource').map(function (e) { return e.name; });
    } catch (e) { errors.push('resource timing: ' + e); }
    return {
      title: d.title,
      ids: Array.prototype.map.call(d.querySelectorAll('[id]'), function (e) { return e.id; }),
      charts: charts(w, d),
      legend: Array.prototype.map.call(d.querySelectorAll('#legend li'), function (li) {
        const sw = li.querySelector('.sw');
        return {
          name: li.getAttribute('data-series') || li.textContent.trim(),
          color: sw ? w.getComputedStyle(sw).backgroundColor : '',
        };
      }),
      banner: shown ? banner.innerText.trim() : null,
      text: d.body ? d.body.innerText : '',
      tables: tables(d),
      resources: resources,
      background: w.getComputedStyle(d.documentElement).backgroundColor,
      scroll_height: d.documentElement.scrollHeight,
    };
  }

  function finish(summary) {
    summary.errors = errors;
    const json = JSON.stringify(summary).replace(/[<>&]/g, function (c) {
      return '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
    });
    out.textContent = json;
    out.setAttribute('data-done', '1');
  }

  frame.addEventListener('load', function () {
    clearInterval(poll);
    const w = frame.contentWindow;
    hook(w);
    // Give anything the page schedules after load a moment to run.
    setTimeout(function () {
      let summary;
      try {
        const d = frame.contentDocument;
        summary = read(w, d);
        // What a reader can switch on (the uncorrected latency) must draw too.
        const boxes = d.querySelectorAll('input[type=checkbox]');
        boxes.forEach(function (b) { if (!b.checked) b.click(); });
        summary.toggled = boxes.length;
      } catch (e) {
        errors.push('reading the page failed: ' + e);
        finish({ title: '', ids: [], charts: [], charts_toggled: [], toggled: 0, tables: [],
                 legend: [], banner: null, text: '', resources: [], background: '',
                 scroll_height: 0 });
        return;
      }
      setTimeout(function () {
        try {
          summary.charts_toggled = charts(w, frame.contentDocument);
        } catch (e) {
          errors.push('reading the page failed: ' + e);
          summary.charts_toggled = [];
        }
        finish(summary);
      }, 200);
    }, 300);
  });
})();
"#;
