//! A comparison as a person reads it: delta tables formatted once and shown twice,
//! in the terminal and on a self-contained HTML page built on the shared page shell
//! ([`crate::page`]), with the warnings that say when two runs are not comparable.
//! Where both runs were repeated, each row adds the two ranges and the rank test's
//! verdict, and a change that is not significant is not coloured as one.

use super::model::{Comparison, Delta, OptDelta, SystemDelta, LATENCY_METRICS};
use super::thresholds::{evaluate_all_in, Crossing, Threshold};
use crate::fmt::{fmt_count, fmt_pct_change, Units, MISSING};
use crate::markup::escape;
use crate::page::{self, Page};
use crate::plain::Plain;
use results::ErrorKind;
use std::fmt::Write as _;

/// Whether a change is worse, better or neither, for colouring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    Worse,
    Better,
    Same,
}

/// One row of a delta table, formatted: the same rows feed the terminal and the page.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    /// The base value: the median of its repetitions when tested.
    pub base: String,
    pub new: String,
    pub delta: String,
    pub pct: String,
    pub trend: Trend,
    /// With repetitions on both sides: each side's range (`9.80ms–10.50ms`) and the
    /// test's verdict (`p=0.0079`, `not significant, p=0.31`); empty otherwise.
    pub base_range: String,
    pub new_range: String,
    pub test: String,
}

/// A titled group of rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub title: &'static str,
    pub rows: Vec<Row>,
}

impl Table {
    /// The table as the report's table model ([`crate::table::Table`]), its title
    /// heading the column of labels: with `repeated`, each side's range beside its
    /// value and the test's verdict last. The terminal writes it as text
    /// ([`Plain`]).
    pub fn model(&self, repeated: bool) -> crate::table::Table {
        let mut cols = vec![("label", self.title), ("base", "base")];
        if repeated {
            cols.push(("base_range", "range"));
        }
        cols.push(("new", "new"));
        if repeated {
            cols.push(("new_range", "range"));
        }
        cols.extend([("delta", "delta"), ("pct", "%")]);
        if repeated {
            cols.push(("test", "test"));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![r.label.clone(), r.base.clone()];
                if repeated {
                    cells.push(r.base_range.clone());
                }
                cells.push(r.new.clone());
                if repeated {
                    cells.push(r.new_range.clone());
                }
                cells.extend([r.delta.clone(), r.pct.clone()]);
                if repeated {
                    cells.push(r.test.clone());
                }
                crate::table::Row {
                    series: None,
                    cells,
                }
            })
            .collect();
        crate::table::Table {
            id: "table-deltas",
            title: self.title,
            note: String::new(),
            cols: cols
                .into_iter()
                .map(|(k, h)| (k.to_string(), h.to_string()))
                .collect(),
            rows,
        }
    }
}

fn pct_text(v: &Delta) -> String {
    fmt_pct_change(v.pct(), v.new == v.base)
}

/// Which way `v` went. A tested change that is not significant is no change worth
/// a colour: painting noise red is what makes people stop reading the table.
fn trend(v: &Delta, higher_is_worse: bool) -> Trend {
    if v.test.is_some_and(|t| !t.significant()) {
        return Trend::Same;
    }
    match v.new.partial_cmp(&v.base) {
        Some(std::cmp::Ordering::Greater) if higher_is_worse => Trend::Worse,
        Some(std::cmp::Ordering::Greater) => Trend::Better,
        Some(std::cmp::Ordering::Less) if higher_is_worse => Trend::Better,
        Some(std::cmp::Ordering::Less) => Trend::Worse,
        _ => Trend::Same,
    }
}

/// A row of `v` with values written by `fmt`; with repetitions, their ranges and
/// the test's verdict.
fn row(
    label: &str,
    v: Delta,
    higher_is_worse: bool,
    fmt: &dyn Fn(f64) -> String,
    delta: String,
) -> Row {
    let range = |s: &super::significance::Summary| format!("{}–{}", fmt(s.min), fmt(s.max));
    Row {
        label: label.to_string(),
        base: fmt(v.base),
        new: fmt(v.new),
        delta,
        pct: pct_text(&v),
        trend: trend(&v, higher_is_worse),
        base_range: v.test.map(|t| range(&t.base)).unwrap_or_default(),
        new_range: v.test.map(|t| range(&t.new)).unwrap_or_default(),
        test: v.test.map(|t| t.verdict()).unwrap_or_default(),
    }
}

fn ms_row(label: &str, v: Delta, u: Units) -> Row {
    row(label, v, true, &|x| u.ms(x), u.signed_ms(v.abs()))
}

fn count_row(label: &str, v: Delta) -> Row {
    row(label, v, true, &fmt_count, format!("{:+.0}", v.abs()))
}

fn opt_row(label: &str, v: OptDelta, u: Units) -> Row {
    match v.both() {
        Some(both) => ms_row(label, both, u),
        None => missing_row(label, Some(u.opt_ms(v.base)), Some(u.opt_ms(v.new))),
    }
}

/// A row whose figure one side lacks: its values as written (`None`: missing), no
/// change.
fn missing_row(label: &str, base: Option<String>, new: Option<String>) -> Row {
    let or_missing = |v: Option<String>| v.unwrap_or_else(|| MISSING.to_string());
    Row {
        label: label.to_string(),
        base: or_missing(base),
        new: or_missing(new),
        delta: MISSING.to_string(),
        pct: MISSING.to_string(),
        trend: Trend::Same,
        base_range: String::new(),
        new_range: String::new(),
        test: String::new(),
    }
}

/// A latency row. A new run that failed ([`results::RunResult::failure`]) is never
/// better than its base, whatever its few (or absent) latencies say: its rows read
/// worse, and a base that failed leaves nothing to be better or worse than.
fn latency_row(label: &str, v: OptDelta, s: &SystemDelta, u: Units) -> Row {
    let mut row = opt_row(label, v, u);
    if s.new_failed.is_some() {
        if s.base_failed.is_none() {
            row.trend = Trend::Worse;
        }
        if v.new.is_none() {
            row.new = "no response".to_string();
        }
    } else if s.base_failed.is_some() {
        row.trend = Trend::Same;
    }
    if s.base_failed.is_some() && v.base.is_none() {
        row.base = "no response".to_string();
    }
    row
}

/// The delta tables of one system, in the terminal's units (see [`tables_in`]).
pub fn tables(s: &SystemDelta) -> Vec<Table> {
    tables_in(s, Units::Terminal)
}

/// The delta tables of one system: latency, errors (the kinds seen in either run, and
/// the total), propagation (lab runs), rate; latencies written in `u`.
pub fn tables_in(s: &SystemDelta, u: Units) -> Vec<Table> {
    let latency = LATENCY_METRICS
        .iter()
        .zip(s.latency)
        .map(|(m, v)| latency_row(m, v, s, u))
        .collect();
    // Kinds with no error on either side are left out: the total still counts them.
    let mut errors: Vec<Row> = ErrorKind::ALL
        .iter()
        .zip(s.errors)
        .filter(|(_, v)| v.base != 0.0 || v.new != 0.0)
        .map(|(k, v)| count_row(k.name(), v))
        .collect();
    for (code, v) in &s.status_codes {
        errors.push(count_row(&format!("  status {code}"), *v));
    }
    errors.push(count_row("total", s.errors_total));
    let mut out = vec![
        Table {
            title: "latency (corrected)",
            rows: latency,
        },
        Table {
            title: "errors",
            rows: errors,
        },
    ];
    let props = [
        ("added median", s.added_median),
        ("added max", s.added_max),
        ("removed median", s.removed_median),
        ("removed max", s.removed_max),
    ];
    if props
        .iter()
        .any(|(_, v)| v.base.is_some() || v.new.is_some())
    {
        out.push(Table {
            title: "propagation",
            rows: props.iter().map(|(l, v)| opt_row(l, *v, u)).collect(),
        });
    }
    let counts = [
        ("cut", s.sessions_cut),
        ("  without a close or status", s.sessions_broken),
        ("messages lost", s.sessions_lost),
    ];
    if counts
        .iter()
        .any(|(_, v)| v.base.is_some() || v.new.is_some())
    {
        let mut rows: Vec<Row> = counts
            .iter()
            .map(|(l, v)| match v.both() {
                Some(both) => count_row(l, both),
                None => missing_row(l, v.base.map(fmt_count), v.new.map(fmt_count)),
            })
            .collect();
        rows.push(opt_row("message p99", s.message_p99, u));
        rows.push(opt_row("message max", s.message_max, u));
        out.push(Table {
            title: "long-lived sessions",
            rows,
        });
    }
    out.push(Table {
        title: "rate (req/s)",
        rows: vec![row(
            "achieved",
            s.rate,
            false,
            &|x| format!("{x:.1}"),
            format!("{:+.1}", s.rate.abs()),
        )],
    });
    out
}

/// What the figures of a repeated system are, as one line: `medians of 5 (base) and
/// 5 (new) repetitions, their range, and a rank test at alpha 0.05`.
pub fn repetitions_line(s: &SystemDelta, alpha: f64) -> Option<String> {
    let (b, n) = s.repetitions?;
    Some(format!(
        "medians of {b} (base) and {n} (new) repetitions, their range, and a rank test at alpha {alpha}"
    ))
}

/// The lines flagging what is wrong with the comparison itself: `WARNING: ...`.
pub fn flags(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    if !c.not_comparable.is_empty() {
        out.push(format!(
            "WARNING: not comparable: {}",
            c.not_comparable.join("; ")
        ));
    }
    for s in &c.only_in_base {
        out.push(format!(
            "WARNING: missing: {s} is in {} but not in {}",
            c.base, c.new
        ));
    }
    for s in &c.only_in_new {
        out.push(format!(
            "WARNING: missing: {s} is in {} but not in {}",
            c.new, c.base
        ));
    }
    for w in &c.warnings {
        out.push(format!("WARNING: {w}"));
    }
    out
}

/// The comparison as terminal text.
pub fn text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Comparing {} (base) with {} (new)", c.base, c.new);
    let _ = writeln!(s, "  {}", c.setup);
    if !c.notes.is_empty() {
        let _ = writeln!(s, "  versions: {}", c.notes.join("; "));
    }
    if let Some(u) = &c.untested {
        let _ = writeln!(s, "  {u}");
    }
    for f in flags(c) {
        let _ = writeln!(s, "{f}");
    }
    for sys in &c.systems {
        let _ = writeln!(s, "\n{}", sys.system);
        let reps = repetitions_line(sys, c.alpha);
        if let Some(line) = &reps {
            let _ = writeln!(s, "  {line}");
        }
        // Fixed widths, so that the tables of a system line up under each other.
        let widths = [
            ("label", 22),
            ("base", 11),
            ("base_range", 17),
            ("new", 11),
            ("new_range", 17),
            ("delta", 11),
            ("pct", 9),
        ];
        for t in tables(sys) {
            let model = t.model(reps.is_some());
            let plain = widths
                .iter()
                .fold(Plain::new(&model).title(None).nest(2), |p, (key, width)| {
                    p.min_width(key, *width).right(key)
                });
            s.push_str(&plain.render());
        }
    }
    s
}

/// A delta table on the page, from the same model the terminal writes
/// ([`Table::model`]): the change's cells coloured by its trend, the ranges muted.
fn delta_table_html(h: &mut String, t: &Table, repeated: bool) {
    let m = t.model(repeated);
    h.push_str("<table class=\"deltas\">\n<tr>");
    for (key, head) in &m.cols {
        match key.as_str() {
            "label" | "test" => {
                let _ = write!(h, "<th>{}</th>", escape(head));
            }
            _ => {
                let _ = write!(h, "<th class=\"n\">{}</th>", escape(head));
            }
        }
    }
    h.push_str("</tr>\n");
    for (r, cells) in t.rows.iter().zip(&m.rows) {
        let trend = match r.trend {
            Trend::Worse => "n worse",
            Trend::Better => "n better",
            Trend::Same => "n",
        };
        h.push_str("<tr>");
        for ((key, _), cell) in m.cols.iter().zip(&cells.cells) {
            let class = match key.as_str() {
                "label" => {
                    let _ = write!(h, "<td>{}</td>", escape(cell));
                    continue;
                }
                "base" | "new" => "n",
                "base_range" | "new_range" => "n muted",
                "delta" | "pct" => trend,
                _ => "text",
            };
            let _ = write!(h, "<td class=\"{class}\">{}</td>", escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

/// One threshold line of the page: a crossing (`new_class` marks the new value as
/// worse) or a move past the limit that is not significant.
fn crossing_row(h: &mut String, c: &Crossing, new_class: &str) {
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"{new_class}\">{}</td><td class=\"n\">{}</td><td><code>{}</code></td><td class=\"text\">{}</td></tr>",
        escape(&c.run),
        escape(&c.system),
        escape(&c.metric),
        escape(&c.base),
        escape(&c.new),
        escape(&c.limit),
        escape(&c.spec),
        escape(&c.test.map(|t| t.verdict()).unwrap_or_default())
    );
}

/// The comparisons (each new run against the base) and the thresholds they cross as
/// one self-contained HTML page: no script, no external resource, light and dark
/// schemes following the reader's setting. Figures are written in the page's units
/// (`µs`, spaced), so the crossings are worked out again here rather than taken from
/// the terminal's.
pub fn html(comparisons: &[Comparison], thresholds: &[Threshold]) -> String {
    let (crossed, noise): (Vec<Crossing>, Vec<Crossing>) = comparisons
        .iter()
        .flat_map(|c| evaluate_all_in(c, thresholds, Units::Page))
        .partition(Crossing::fails);
    let mut head = String::new();
    let mut h = String::new();
    if !thresholds.is_empty() {
        let specs: Vec<String> = thresholds.iter().map(|t| escape(&t.spec)).collect();
        let _ = writeln!(
            head,
            "<p>Thresholds (--max-regression): <code>{}</code></p>",
            specs.join("</code>, <code>")
        );
        if crossed.is_empty() {
            head.push_str("<p class=\"ok\">Every threshold holds.</p>\n");
        } else {
            h.push_str("<h2>Crossed thresholds</h2>\n<table class=\"deltas\" id=\"crossed\">\n<tr><th>run</th><th>system</th><th>metric</th><th class=\"n\">base</th><th class=\"n\">new</th><th class=\"n\">limit</th><th>spec</th><th>test</th></tr>\n");
            for c in &crossed {
                if let Some(why) = &c.why {
                    let _ = writeln!(
                        h,
                        "<tr><td>{}</td><td>{}</td><td class=\"text why worse\" colspan=\"4\">{}</td><td><code>{}</code></td></tr>",
                        escape(&c.run),
                        escape(&c.system),
                        escape(why),
                        escape(&c.spec)
                    );
                    continue;
                }
                crossing_row(&mut h, c, "n worse");
            }
            h.push_str("</table>\n");
        }
        if !noise.is_empty() {
            h.push_str("<h2>Over the limit, not significant</h2>\n<p class=\"muted\">The medians of the repetitions moved past the limit, but the rank test cannot tell the move from run-to-run noise: these do not fail the gate.</p>\n<table class=\"deltas\" id=\"not-significant\">\n<tr><th>run</th><th>system</th><th>metric</th><th class=\"n\">base</th><th class=\"n\">new</th><th class=\"n\">limit</th><th>spec</th><th>test</th></tr>\n");
            for c in &noise {
                crossing_row(&mut h, c, "n");
            }
            h.push_str("</table>\n");
        }
    }
    for c in comparisons {
        let _ = writeln!(
            h,
            "<h2>{} <span class=\"muted\">(base)</span> vs {} <span class=\"muted\">(new)</span></h2>\n<p class=\"muted\">{}</p>",
            escape(&c.base),
            escape(&c.new),
            escape(&c.setup)
        );
        if !c.notes.is_empty() {
            let _ = writeln!(h, "<p>Versions: {}</p>", escape(&c.notes.join("; ")));
        }
        if let Some(u) = &c.untested {
            let _ = writeln!(h, "<p class=\"muted\">{}</p>", escape(u));
        }
        let warnings: Vec<String> = flags(c)
            .iter()
            .map(|f| escape(f.strip_prefix("WARNING: ").unwrap_or(f)))
            .collect();
        h.push_str(&page::banner(None, "Not to be compared as is:", &warnings));
        for sys in &c.systems {
            let _ = writeln!(h, "<h3>{}</h3>", escape(&sys.system));
            let reps = repetitions_line(sys, c.alpha);
            if let Some(line) = &reps {
                let _ = writeln!(h, "<p class=\"muted\">{}</p>", escape(line));
            }
            for t in tables_in(sys, Units::Page) {
                delta_table_html(&mut h, &t, reps.is_some());
            }
        }
    }
    page::render(&Page {
        title: "ingressbench compare",
        header: &head,
        banner: "",
        body: &h,
        footer: "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixtures::{lab, repeated, result, run, th, SAME_A, SAME_B};
    use crate::compare::model::{compare, d, dc, differences, od, system_delta};
    use results::Spread;

    #[test]
    fn deltas_by_system() {
        let mut b = result(10.0, 20.0, 1);
        b.errors.status = 2;
        b.errors.status_codes.insert("503".into(), 2);
        let mut n = result(12.5, 15.0, 4);
        n.errors.status_codes.insert("502".into(), 1);
        n.errors.status = 1;
        n.rate.achieved = 450.0;
        let s = system_delta("load", &b, &n);
        assert_eq!(s.latency[3], od(Some(10.0), Some(12.5)));
        assert_eq!(s.latency[8], od(Some(20.0), Some(15.0)));
        assert_eq!(s.errors[ErrorKind::Timeout.index()], dc(1, 4));
        assert_eq!(s.errors_total, dc(3, 5));
        assert_eq!(s.status_codes["503"], dc(2, 0));
        assert_eq!(s.status_codes["502"], dc(0, 1));
        assert_eq!(s.rate.abs(), -50.0);
        assert_eq!(d(0.0, 1.0).pct(), None);
        let t = tables(&s);
        assert_eq!(
            t.iter().map(|t| t.title).collect::<Vec<_>>(),
            ["latency (corrected)", "errors", "rate (req/s)"]
        );
        let p99 = &t[0].rows[3];
        assert_eq!(
            (p99.base.as_str(), p99.new.as_str(), p99.delta.as_str()),
            ("10.00ms", "12.50ms", "+2.50ms")
        );
        assert_eq!((p99.pct.as_str(), p99.trend), ("+25.0%", Trend::Worse));
        assert_eq!(t[0].rows[8].delta, "-5.00ms");
        assert_eq!(t[0].rows[8].trend, Trend::Better);
        assert_eq!(
            t[1].rows
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>(),
            ["timeout", "status", "  status 502", "  status 503", "total"]
        );
        let e502 = &t[1].rows[2];
        assert_eq!((e502.delta.as_str(), e502.pct.as_str()), ("+1", "new"));
        assert_eq!(t[2].rows[0].trend, Trend::Worse);
    }

    #[test]
    fn long_lived_sessions_are_compared_when_a_side_held_some() {
        use results::sessions::Sessions;
        let sessions = |ends: &[(&str, u64)], lost: u64, p99: f64| Sessions {
            ends: ends.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            messages: results::sessions::Messages {
                lost,
                ..Default::default()
            },
            latency_ms: results::Percentiles {
                p99: Some(p99),
                max: Some(p99 * 2.0),
                ..Default::default()
            },
            ..Sessions::default()
        };
        let mut b = result(10.0, 20.0, 0);
        b.sessions = Some(sessions(&[], 0, 1.0));
        let mut n = result(10.0, 20.0, 0);
        n.sessions = Some(sessions(&[("status 14", 5), ("eof", 15)], 3, 4.0));
        let s = system_delta("load", &b, &n);
        assert_eq!(s.sessions_cut, od(Some(0.0), Some(20.0)));
        assert_eq!(s.sessions_broken, od(Some(0.0), Some(15.0)));
        let t = tables(&s);
        let table = t.iter().find(|t| t.title == "long-lived sessions").unwrap();
        let rows: Vec<(&str, &str, &str, Trend)> = table
            .rows
            .iter()
            .map(|r| (r.label.as_str(), r.base.as_str(), r.new.as_str(), r.trend))
            .collect();
        assert_eq!(
            rows,
            [
                ("cut", "0", "20", Trend::Worse),
                ("  without a close or status", "0", "15", Trend::Worse),
                ("messages lost", "0", "3", Trend::Worse),
                ("message p99", "1.00ms", "4.00ms", Trend::Worse),
                ("message max", "2.00ms", "8.00ms", Trend::Worse),
            ]
        );
        // One side without sessions: its figures are missing, not zero.
        let s = system_delta("load", &result(10.0, 20.0, 0), &n);
        let t = tables(&s);
        let table = t.iter().find(|t| t.title == "long-lived sessions").unwrap();
        assert_eq!(
            (table.rows[0].base.as_str(), table.rows[0].trend),
            (MISSING, Trend::Same)
        );
        // Neither: no such table.
        let s = system_delta("load", &result(10.0, 20.0, 0), &result(10.0, 20.0, 0));
        assert!(tables(&s).iter().all(|t| t.title != "long-lived sessions"));
    }

    #[test]
    fn different_setups_are_flagged() {
        let b = result(10.0, 20.0, 0);
        assert!(differences(&b, &b.clone()).is_empty());
        let mut n = b.clone();
        n.config.rate = Some(1000.0);
        n.config.connections = 50;
        n.config.url = "https://127.0.0.1:1/".to_string();
        n.config.tls_version = Some("1.3".to_string());
        let diffs = differences(&b, &n);
        assert_eq!(
            diffs,
            [
                "rate: 500 req/s vs 1000 req/s",
                "connections: 10 vs 50",
                "tls: plain HTTP vs TLS 1.3"
            ]
        );
        let lb = lab(b.clone(), "nginx", &[]);
        let mut ln = lab(b.clone(), "nginx", &[]);
        ln.lab.as_mut().unwrap().scenario = "other".to_string();
        let on = |host: &str| results::Machine {
            cpu_model: "AMD EPYC".into(),
            cores: 2,
            kernel: "6.1".into(),
            hostname: host.into(),
        };
        let (mut mb, mut mn) = (lb.clone(), ln.clone());
        mb.machine = Some(on("a"));
        mn.machine = Some(on("b"));
        assert!(differences(&mb, &mn)
            .iter()
            .any(|d| d.starts_with("machine: ")));
        mn.machine = Some(on("a"));
        assert!(!differences(&mb, &mn)
            .iter()
            .any(|d| d.starts_with("machine: ")));
        ln.config.duration_s = 30.0;
        assert_eq!(
            differences(&lb, &ln),
            [
                "scenario: scenario dynamic-endpoints vs scenario other",
                "duration: 3s vs 30s"
            ]
        );
        let c = compare(&run("A", vec![lb]), &run("B", vec![ln]));
        let f = flags(&c);
        assert!(
            f[0].starts_with("WARNING: not comparable: scenario:"),
            "{f:?}"
        );
        assert!(text(&c).contains("WARNING: not comparable: "));
    }

    #[test]
    fn missing_systems_are_listed() {
        let b = run(
            "A",
            vec![
                lab(result(1.0, 2.0, 0), "nginx", &[]),
                lab(result(1.0, 2.0, 0), "caddy", &[]),
            ],
        );
        let n = run(
            "B",
            vec![
                lab(result(1.0, 2.0, 0), "nginx", &[]),
                lab(result(1.0, 2.0, 0), "haproxy", &[]),
            ],
        );
        let c = compare(&b, &n);
        assert_eq!(c.systems.len(), 1);
        assert_eq!(c.only_in_base, ["caddy"]);
        assert_eq!(c.only_in_new, ["haproxy"]);
        let f = flags(&c);
        assert!(f.contains(&"WARNING: missing: caddy is in A but not in B".to_string()));
        assert!(f.contains(&"WARNING: missing: haproxy is in B but not in A".to_string()));
    }

    #[test]
    fn page_is_self_contained_and_escaped() {
        let mut b = lab(result(10.0, 20.0, 0), "<nginx>", &[100.0]);
        b.lab.as_mut().unwrap().propagation.removed_ms = Spread::of(&[5.0]);
        let n = lab(result(20.0, 20.0, 0), "<nginx>", &[150.0]);
        let c = compare(&run("A&B", vec![b]), &run("C", vec![n]));
        let ths = [th("p99=10%")];
        let h = html(&[c], &ths);
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("prefers-color-scheme: dark"));
        assert!(h.contains("&lt;nginx&gt;") && h.contains("A&amp;B"));
        assert!(!h.contains("<nginx>"));
        for external in ["http://", "https://", "<script", "<link", "@import", "url("] {
            assert!(!h.contains(external), "{external}");
        }
        assert!(h.contains("Crossed thresholds"));
        assert!(h.contains("<td class=\"n worse\">+10.00 ms</td>"));
        assert!(
            h.contains("<td class=\"n worse\">20.00 ms</td>"),
            "crossings in page units"
        );
        assert!(
            !h.contains("us<") && !h.contains("0ms"),
            "wrk units on the page"
        );
        assert!(h.contains("removed median"));
    }

    #[test]
    fn repeated_systems_show_medians_ranges_and_the_test() {
        let same = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&SAME_B)]),
        );
        let t = tables(&same.systems[0]);
        let p99 = &t[0].rows[3];
        assert_eq!(
            (
                p99.base.as_str(),
                p99.base_range.as_str(),
                p99.new.as_str(),
                p99.new_range.as_str()
            ),
            ("10.10ms", "9.80ms–10.50ms", "10.30ms", "9.70ms–10.60ms")
        );
        assert_eq!(p99.test, "not significant, p=0.69");
        assert_eq!(p99.trend, Trend::Same, "noise is not coloured");
        let out = text(&same);
        assert!(
            out.contains("medians of 5 (base) and 5 (new) repetitions, their range, and a rank test at alpha 0.05"),
            "{out}"
        );
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with("p99 "))
            .unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            [
                "p99",
                "10.10ms",
                "9.80ms–10.50ms",
                "10.30ms",
                "9.70ms–10.60ms",
                "+200.00us",
                "+2.0%",
                "not",
                "significant,",
                "p=0.69"
            ]
        );
        assert!(!out.contains("no repetitions"), "{out}");

        let slow: Vec<f64> = SAME_A.iter().map(|x| x * 2.0).collect();
        let c = compare(
            &run("A", vec![repeated(&SAME_A)]),
            &run("B", vec![repeated(&slow)]),
        );
        let p99 = &tables(&c.systems[0])[0].rows[3];
        assert_eq!((p99.test.as_str(), p99.trend), ("p=0.0079", Trend::Worse));

        // The page: ranges, verdicts, and the limit the noise went over.
        let h = html(&[same], &[th("p99=1%")]);
        assert!(h.contains("<th class=\"n\">range</th>"), "{h}");
        assert!(h.contains("<td class=\"text\">not significant, p=0.69</td>"));
        assert!(h.contains("9.80 ms–10.50 ms"));
        assert!(h.contains("Over the limit, not significant"));
        assert!(h.contains("Every threshold holds."));
        assert!(!h.contains("Crossed thresholds"));
        let h = html(&[c], &[th("p99=10%")]);
        assert!(h.contains("Crossed thresholds"));
        assert!(h.contains("<td class=\"text\">p=0.0079</td>"));
    }

    #[test]
    fn runs_without_repetitions_say_they_were_not_tested() {
        let c = compare(
            &run("A", vec![result(10.0, 20.0, 0)]),
            &run("B", vec![repeated(&SAME_B)]),
        );
        let out = text(&c);
        assert!(
            out.contains("\n  no repetitions: deltas not tested for significance (use --repeat N, 4+ a side)\n"),
            "{out}"
        );
        assert_eq!(out.matches("no repetitions").count(), 1);
        assert!(!out.contains("range"), "{out}");
        assert!(tables(&c.systems[0])
            .iter()
            .flat_map(|t| &t.rows)
            .all(|r| r.test.is_empty()));
        assert!(html(&[c], &[]).contains("no repetitions: deltas not tested"));
    }
}
