//! A [`Table`] as aligned plain text, for the terminal and `summary.txt`: the third
//! rendering of the report's tables beside the page's HTML and `report.md`'s
//! Markdown, so that a figure shown in the terminal is the figure the page shows,
//! formatted once where the table is built.
//!
//! Columns are as wide as their widest cell; the first column and columns of text are
//! aligned left, columns of figures right. A text reader has no colours and no note
//! under the table, so two things a page shows by other means are options here: a
//! column dropped where it says nothing (the series of a single run) and a column
//! written after the row as a remark in parentheses (a step's "below the offered
//! rate"), left out where the row has none.

use crate::fmt::MISSING;
use crate::table::Table;
use std::fmt::Write as _;

/// How one table is written as text; [`Plain::render`] writes it.
#[derive(Clone, Debug)]
pub struct Plain<'a> {
    table: &'a Table,
    indent: usize,
    title: Option<String>,
    hidden: Vec<&'a str>,
    remark: Option<&'a str>,
    right: Vec<&'a str>,
    nest: usize,
    min: Vec<(&'a str, usize)>,
    note: bool,
}

impl<'a> Plain<'a> {
    /// `table` under its title, indented by two spaces.
    pub fn new(table: &'a Table) -> Plain<'a> {
        Plain {
            table,
            indent: 2,
            title: Some(table.title.to_string()),
            hidden: Vec::new(),
            remark: None,
            right: Vec::new(),
            nest: 0,
            min: Vec::new(),
            note: false,
        }
    }

    /// Indents every line after the title by `n` spaces.
    pub fn indent(mut self, n: usize) -> Self {
        self.indent = n;
        self
    }

    /// Writes `title` above the table instead of the table's own (a run's summary
    /// names its plan there); `None` writes the header line first.
    pub fn title(mut self, title: Option<String>) -> Self {
        self.title = title;
        self
    }

    /// Leaves out the column `key`.
    pub fn hide(mut self, key: &'a str) -> Self {
        self.hidden.push(key);
        self
    }

    /// Writes the column `key` after each row, in parentheses, and nothing where its
    /// cell is empty or [`MISSING`]; it has no header.
    pub fn remark(mut self, key: &'a str) -> Self {
        self.remark = Some(key);
        self
    }

    /// Aligns the column `key` right whatever its cells hold (a change that reads
    /// `new` among `+25.0%`s).
    pub fn right(mut self, key: &'a str) -> Self {
        self.right.push(key);
        self
    }

    /// Indents the rows' first cells by `n` more spaces than the header's, for a
    /// header that names what the rows are (a comparison's "latency (corrected)").
    pub fn nest(mut self, n: usize) -> Self {
        self.nest = n;
        self
    }

    /// Makes the column `key` at least `width` characters wide, so that tables
    /// written one under another line up.
    pub fn min_width(mut self, key: &'a str, width: usize) -> Self {
        self.min.push((key, width));
        self
    }

    /// Writes the table's note (what it shows, in which units) under its title, for
    /// a table whose headers do not say the unit.
    pub fn with_note(mut self) -> Self {
        self.note = true;
        self
    }

    /// The table as text, one line per row, each ending in a newline; lines carry
    /// no trailing spaces.
    pub fn render(&self) -> String {
        let t = self.table;
        let shown: Vec<usize> = (0..t.cols.len())
            .filter(|&c| {
                let key = t.cols[c].0.as_str();
                !self.hidden.contains(&key) && self.remark != Some(key)
            })
            .collect();
        let remark = self
            .remark
            .and_then(|k| t.cols.iter().position(|(key, _)| key == k));
        let first = shown.first().copied();
        let cell = |r: &crate::table::Row, c: usize| -> String {
            let v = r.cells.get(c).cloned().unwrap_or_default();
            if Some(c) == first {
                format!("{}{v}", " ".repeat(self.nest))
            } else {
                v
            }
        };
        let widths: Vec<usize> = shown
            .iter()
            .map(|&c| {
                t.rows
                    .iter()
                    .map(|r| cell(r, c).chars().count())
                    .chain([t.cols[c].1.chars().count()])
                    .chain(
                        self.min
                            .iter()
                            .filter(|(k, _)| *k == t.cols[c].0)
                            .map(|(_, w)| *w),
                    )
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let right: Vec<bool> = shown
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                i > 0
                    && (self.right.contains(&t.cols[c].0.as_str())
                        || t.rows.iter().all(|r| is_figure(&cell(r, c))))
            })
            .collect();
        let line = |cells: Vec<String>, tail: &str| -> String {
            let mut l = " ".repeat(self.indent);
            for (i, c) in cells.iter().enumerate() {
                let w = widths[i];
                if i > 0 {
                    l.push(' ');
                }
                if right[i] {
                    let _ = write!(l, "{c:>w$}");
                } else {
                    let _ = write!(l, "{c:<w$}");
                }
            }
            let mut l = l.trim_end().to_string();
            l.push_str(tail);
            l.push('\n');
            l
        };
        let mut s = String::new();
        if let Some(title) = &self.title {
            let _ = writeln!(s, "{title}");
        }
        if self.note && !t.note.is_empty() {
            let _ = writeln!(s, "{}{}", " ".repeat(self.indent), t.note);
        }
        s.push_str(&line(
            shown.iter().map(|&c| t.cols[c].1.clone()).collect(),
            "",
        ));
        for r in &t.rows {
            let tail = remark
                .map(|c| cell(r, c))
                .filter(|x| !x.is_empty() && x != MISSING)
                .map_or(String::new(), |x| format!("  ({x})"));
            s.push_str(&line(shown.iter().map(|&c| cell(r, c)).collect(), &tail));
        }
        s
    }
}

/// Whether a cell reads as a figure (`12`, `-3.5`, `+2.50ms`, `120 %`) or shows
/// that there is none: such columns align right.
fn is_figure(cell: &str) -> bool {
    let digits = cell.strip_prefix(['+', '-']).unwrap_or(cell);
    cell.is_empty() || cell == MISSING || digits.starts_with(|c: char| c.is_ascii_digit())
}

/// `table` under its title, indented by two spaces: [`Plain::new`] as it is.
pub fn table(table: &Table) -> String {
    Plain::new(table).render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Row;

    fn sample() -> Table {
        Table {
            id: "table-x",
            title: "Sample",
            note: "not shown".into(),
            cols: ["series", "p99", "state", "note"]
                .iter()
                .map(|k| (k.to_string(), format!("{k} head")))
                .collect(),
            rows: vec![
                Row {
                    series: Some(0),
                    cells: vec!["nginx".into(), "1.250".into(), "up".into(), MISSING.into()],
                },
                Row {
                    series: Some(1),
                    cells: vec![
                        "caddy-api".into(),
                        MISSING.into(),
                        "draining".into(),
                        "late".into(),
                    ],
                },
            ],
        }
    }

    #[test]
    fn columns_align_figures_right_and_text_left() {
        let s = table(&sample());
        assert_eq!(
            s,
            "Sample\n  series head p99 head state head note head\n  nginx          1.250 up         –\n  caddy-api          – draining   late\n"
        );
        assert!(!s.contains("not shown"), "the note only when asked");
    }

    #[test]
    fn a_column_can_be_hidden_made_a_remark_or_forced_right() {
        let t = sample();
        let s = Plain::new(&t)
            .indent(4)
            .nest(1)
            .min_width("state", 11)
            .title(Some("Heading:".into()))
            .hide("series")
            .remark("note")
            .right("state")
            .render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Heading:");
        assert_eq!(lines[1], "    p99 head  state head");
        // The first column shown is aligned left, as a label, its cells nested.
        assert_eq!(lines[2], "     1.250            up");
        assert_eq!(lines[3], "     –          draining  (late)");
        let untitled = Plain::new(&t).title(None).render();
        assert!(untitled.starts_with("  series head"), "{untitled}");
        let noted = Plain::new(&t).with_note().render();
        assert!(
            noted.starts_with("Sample\n  not shown\n  series head"),
            "{noted}"
        );
    }

    #[test]
    fn figures_are_told_from_text() {
        for f in ["12", "-3.5", "+2.50ms", "120 %", MISSING, ""] {
            assert!(is_figure(f), "{f}");
        }
        for t in ["new", "no response", "yes", "p=0.69"] {
            assert!(!is_figure(t), "{t}");
        }
    }
}
