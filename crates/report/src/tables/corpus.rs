//! The annotation corpus's compatibility matrix (issue 54): a row per behaviour of
//! ingress-nginx, a column per system, each cell what the system did against the
//! baseline (`same`, `differs: ...`, `ignored: ...`, `not expressible: ...`, `not
//! run: ...`, `refused: ...`). One table for the page, `report.md`, `summary.txt`
//! and `ingressbench probe`'s own print.

use super::{cols, Row, Table};
use crate::input::ReportInput;
use results::probes::{CorpusCell, ProbeRun};

/// A cell in words: the verdict, then its line.
pub fn cell_text(c: &CorpusCell) -> String {
    let mut s = if c.detail.is_empty() {
        c.verdict.clone()
    } else {
        format!("{}: {}", c.verdict, c.detail)
    };
    if c.verdict == "baseline" {
        if let Some(why) = &c.caveat {
            s.push_str(&format!(" [not as ingress-nginx's image: {why}]"));
        }
    }
    s
}

/// The matrix of `systems` (each with its probes), the baseline's column first;
/// no rows when none probed the corpus.
pub fn matrix(systems: &[(&str, &ProbeRun)]) -> Table {
    let mut ordered: Vec<&(&str, &ProbeRun)> =
        systems.iter().filter(|(n, p)| *n == p.baseline).collect();
    ordered.extend(systems.iter().filter(|(n, p)| *n != p.baseline));
    let ordered: Vec<_> = ordered
        .into_iter()
        .filter(|(_, p)| !p.corpus.is_empty())
        .collect();
    let mut behaviours: Vec<&str> = Vec::new();
    for (_, p) in &ordered {
        for c in &p.corpus {
            if !behaviours.contains(&c.behaviour.as_str()) {
                behaviours.push(&c.behaviour);
            }
        }
    }
    let rows = behaviours
        .iter()
        .map(|b| {
            let mut cells = vec![(*b).to_string()];
            cells.extend(ordered.iter().map(|(_, p)| {
                p.corpus
                    .iter()
                    .find(|c| c.behaviour == *b)
                    .map_or_else(|| "-".to_string(), cell_text)
            }));
            Row {
                series: None,
                cells,
            }
        })
        .collect();
    let mut columns: Vec<(String, String)> = cols(&[("behaviour", "behaviour")]);
    columns.extend(ordered.iter().map(|(n, p)| {
        let head = if *n == p.baseline {
            format!("{n} (baseline)")
        } else {
            (*n).to_string()
        };
        ((*n).to_string(), head)
    }));
    let tally = |v: &str| {
        ordered
            .iter()
            .map(|(n, p)| format!("{n} {}", p.corpus.iter().filter(|c| c.verdict == v).count()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Table {
        id: "table-corpus",
        title: "ingress-nginx's annotations: what each system did with them",
        note: format!(
            "The annotation corpus (docs/migration.md): each behaviour an Ingress of ingress-nginx's annotations on a host of its own (or its translation), the same requests sent to every system before its load and compared with the baseline's answers: same, differs (the first difference), ignored (answered as a plain route would: the annotation had no effect and nothing said so), not expressible (the system has no way to say it), not run, refused (the API refused the object). Same: {}.",
            tally("same")
        ),
        cols: columns,
        rows,
    }
}

/// The matrix of a report's series.
pub fn corpus(input: &ReportInput) -> Table {
    let systems: Vec<(&str, &ProbeRun)> = input
        .series
        .iter()
        .filter_map(|s| {
            let p = s.result.lab.as_ref()?.probes.as_ref()?;
            Some((s.name.as_str(), p))
        })
        .collect();
    matrix(&systems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(baseline: &str, cells: &[(&str, &str, &str)]) -> ProbeRun {
        ProbeRun {
            baseline: baseline.into(),
            corpus: cells
                .iter()
                .map(|(b, v, d)| CorpusCell {
                    behaviour: (*b).into(),
                    verdict: (*v).into(),
                    detail: (*d).into(),
                    caveat: None,
                })
                .collect(),
            ..ProbeRun::default()
        }
    }

    #[test]
    fn a_row_per_behaviour_the_baseline_first_and_each_cell_with_its_line() {
        let base = run(
            "ingress-nginx",
            &[
                ("cors", "baseline", "preflight 204"),
                ("canary", "baseline", ""),
            ],
        );
        let t = run(
            "ingress-nginx",
            &[
                ("cors", "differs", "preflight: status 204 -> 200"),
                ("canary", "same", ""),
            ],
        );
        let t = matrix(&[("traefik-nginx", &t), ("ingress-nginx", &base)]);
        assert_eq!(t.cols[1].1, "ingress-nginx (baseline)");
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.cell(0, "behaviour"), Some("cors"));
        assert_eq!(
            t.cell(0, "traefik-nginx"),
            Some("differs: preflight: status 204 -> 200")
        );
        assert_eq!(t.cell(1, "traefik-nginx"), Some("same"));
        assert!(t.note.contains("traefik-nginx 1"), "{}", t.note);
        // Without the corpus, no rows.
        let none = ProbeRun::default();
        assert!(matrix(&[("x", &none)]).rows.is_empty());
    }
}
