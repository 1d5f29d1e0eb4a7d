//! `report.md`: the banner and the tables of the page in Markdown, for a pull request
//! comment or a wiki page, where no HTML file can be attached.

use crate::fmt::MISSING;
use crate::input::ReportInput;
use crate::render::{File, Rendered, Rendering, Report, ReportError};
use crate::tables::{self, Table};
use std::fmt::Write as _;

/// Escapes a cell: pipes would end it, newlines would end the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A table in GitHub-flavoured Markdown; numbers right-aligned.
pub fn table(t: &Table) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### {}\n", t.title);
    if !t.note.is_empty() {
        let _ = writeln!(s, "{}\n", t.note);
    }
    if t.rows.is_empty() {
        s.push_str("None in these results.\n");
        return s;
    }
    let heads: Vec<String> = t.cols.iter().map(|(_, h)| cell(h)).collect();
    let _ = writeln!(s, "| {} |", heads.join(" | "));
    let numeric: Vec<bool> = (0..t.cols.len())
        .map(|c| {
            c > 0
                && t.rows.iter().all(|r| {
                    r.cells
                        .get(c)
                        .is_some_and(|x| x == MISSING || x.parse::<f64>().is_ok())
                })
        })
        .collect();
    let rule: Vec<&str> = numeric
        .iter()
        .map(|n| if *n { "---:" } else { "---" })
        .collect();
    let _ = writeln!(s, "| {} |", rule.join(" | "));
    for r in &t.rows {
        let cells: Vec<String> = r.cells.iter().map(|c| cell(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

/// `report.md`, as a renderer.
pub struct Markdown;

impl Report for Markdown {
    fn render(&self, r: &Rendering<'_>) -> Result<Rendered, ReportError> {
        Ok(Rendered::one(File::Markdown, render(r.input)))
    }
}

/// The whole `report.md`.
pub fn render(input: &ReportInput) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## {}\n", crate::html::page_title(input));
    let systems: Vec<&str> = input.series.iter().map(|x| x.name.as_str()).collect();
    let _ = writeln!(
        s,
        "{} series: {}. Latency is corrected (from the intended send time), in ms.\n",
        systems.len(),
        systems.join(", ")
    );
    let w = tables::warnings(input);
    if !w.is_empty() {
        s.push_str("> [!WARNING]\n> **Not to be trusted as is:**\n");
        for (i, line) in w {
            let _ = writeln!(s, "> - **{}**: {}", cell(&input.series[i].name), line);
        }
        s.push('\n');
    }
    let w = tables::run_warnings(input);
    if !w.is_empty() {
        s.push_str("> [!WARNING]\n> **Warnings from the run:**\n");
        for (i, line) in w {
            let _ = writeln!(s, "> - **{}**: {}", cell(&input.series[i].name), line);
        }
        s.push('\n');
    }
    for t in tables::all(input) {
        if matches!(t.id, "table-routes" | "table-resources" | "table-failover")
            && t.rows.is_empty()
        {
            continue;
        }
        s.push_str(&table(&t));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Series;
    use results::RunResult;

    #[test]
    fn tables_and_banner_in_markdown() {
        let mut r = RunResult {
            partial: true,
            ..Default::default()
        };
        r.errors.timeout = 8809;
        let input = ReportInput {
            runs: vec![Default::default()],
            series: vec![Series {
                name: "nginx|lua".into(),
                result: r,
                ..Default::default()
            }],
            ..ReportInput::default()
        };
        let md = render(&input);
        assert!(md.contains("> [!WARNING]"));
        assert!(md.contains("**nginx\\|lua**: the run was interrupted"));
        let errors = md
            .lines()
            .find(|l| l.starts_with("| nginx\\|lua | 0 | 0 | 0 | 0 | 0 | 8809 |"));
        assert!(errors.is_some(), "{md}");
        assert!(md.contains("### Impact of each change\n"));
        assert!(md.contains("| series | responses | p50 |"));
        assert!(md.contains("| --- | ---: |"));
    }
}
