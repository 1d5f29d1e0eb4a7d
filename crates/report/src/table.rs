//! The shape every report table has (a stable id, columns, rows of text cells), apart
//! from the tables themselves, so that a part adding a table of its own (the failover
//! table) and the list of all tables both use it without importing each other.

/// One table: a stable id for the page, its columns and rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Element id on the page (`table-errors`, ...).
    pub id: &'static str,
    pub title: &'static str,
    /// What the table shows and in which units; empty when the headers say it.
    pub note: String,
    /// (key, header): the key is the `data-col` of every cell of the column.
    pub cols: Vec<(String, String)>,
    pub rows: Vec<Row>,
}

/// A row: the series it belongs to (its colour) and one text per column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub series: Option<usize>,
    pub cells: Vec<String>,
}

impl Table {
    /// The cell of `col` in `row`, for tests and readers of the table.
    pub fn cell(&self, row: usize, col: &str) -> Option<&str> {
        let c = self.cols.iter().position(|(k, _)| k == col)?;
        self.rows.get(row)?.cells.get(c).map(String::as_str)
    }
}
