//! What a report is drawn from: one or more saved runs, read back from disk. A run is
//! a lab run folder (`scenario.yaml` and one `<system>/result.json` per system) or a
//! single `result.json` written by `ingressbench load --json`. Every system of every
//! run becomes one *series*; the order of the series is the order of the report's
//! colours, so it is fixed here once.

use results::folder::{ReadError, RunFolder, RESULT, SEARCH, SIZING};
use results::RunResult;
use std::path::{Path, PathBuf};

/// Why runs could not be read. Each message is one line naming the path; reading a
/// result document fails as [`ReadError`] says (the run folder's own errors).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: not a run: no result.json found (give a folder written by ingressbench run, or a result.json)")]
    NotARun { path: String },
    #[error(transparent)]
    Result(#[from] ReadError),
    #[error("no run given")]
    Empty,
}

/// One run as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// The folder or file given.
    pub path: PathBuf,
    /// Its name in series names and headers: the folder's (or file's) name.
    pub name: String,
    /// The scenario's name and description, from `scenario.effective.json` or the
    /// results' `lab.scenario`.
    pub scenario: Option<String>,
    pub description: Option<String>,
}

/// One system of one run: a line on every chart and a row in every table.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// `<system>`, or `<run>/<system>` when the report has several runs.
    pub name: String,
    /// The system alone (the lab profile, or the run's name for a plain load).
    pub system: String,
    /// Index into [`ReportInput::runs`].
    pub run: usize,
    pub result: RunResult,
}

/// One system's search for its maximum (`load.rates`): the latency-versus-rate curve
/// and the maximum-throughput table are drawn from these.
#[derive(Clone, Debug, Default)]
pub struct Searched {
    /// As [`Series::name`]: `<system>`, or `<run>/<system>` with several runs.
    pub name: String,
    /// Index into [`ReportInput::runs`].
    pub run: usize,
    pub search: results::search::SearchResult,
}

/// One system's sizing scan (study S4): the sizing table and charts are drawn from
/// these.
#[derive(Clone, Debug, Default)]
pub struct Sized {
    /// As [`Series::name`]: `<system>`, or `<run>/<system>` with several runs.
    pub name: String,
    /// Index into [`ReportInput::runs`].
    pub run: usize,
    pub sizing: results::sizing::SizingResult,
}

/// A stored file of a run that is there but cannot be read (a search, a sizing
/// scan): the report names it, and why, where its rows would be.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unreadable {
    /// As [`Series::name`]: the system whose file it is.
    pub name: String,
    /// Index into [`ReportInput::runs`].
    pub run: usize,
    /// [`SEARCH`] or [`SIZING`]: which table its rows belong to.
    pub file: &'static str,
    /// The file and why it cannot be read, with its causes.
    pub why: String,
}

/// Everything a report shows, in series order.
#[derive(Clone, Debug, Default)]
pub struct ReportInput {
    pub runs: Vec<Run>,
    pub series: Vec<Series>,
    /// Searches of the runs' systems, in the scenario's order (empty unless a run
    /// used `load.rates`).
    pub searches: Vec<Searched>,
    /// Sizing scans of the runs' systems (empty unless a run had a `sizing` section).
    pub sizings: Vec<Sized>,
    /// Searches and sizing scans that are stored but cannot be read.
    pub unreadable: Vec<Unreadable>,
}

impl ReportInput {
    /// A report of one result held in memory (`ingressbench load --report`).
    pub fn single(name: &str, result: RunResult) -> ReportInput {
        ReportInput {
            runs: vec![Run {
                name: name.to_string(),
                scenario: result.lab.as_ref().map(|l| l.scenario.clone()),
                ..Default::default()
            }],
            series: vec![Series {
                name: name.to_string(),
                system: name.to_string(),
                run: 0,
                result,
            }],
            ..ReportInput::default()
        }
    }

    /// The results of a lab run held in memory, as `ingressbench run` ends (for its
    /// summary, which is written even when no system finished). `path` is the run's
    /// folder, `scenario` its name.
    pub fn lab_run(path: &Path, scenario: &str, results: Vec<RunResult>) -> ReportInput {
        let mut input = ReportInput {
            runs: vec![Run {
                path: path.to_path_buf(),
                name: run_name(path),
                scenario: Some(scenario.to_string()),
                description: None,
            }],
            series: results
                .into_iter()
                .map(|result| {
                    let system = result
                        .lab
                        .as_ref()
                        .map(|l| l.system.clone())
                        .unwrap_or_else(|| result.target.clone());
                    Series {
                        name: system.clone(),
                        system,
                        run: 0,
                        result,
                    }
                })
                .collect(),
            ..ReportInput::default()
        };
        input.add_stored(&RunFolder::new(path), 0, &|system| system);
        input
    }

    /// The sizing scans and searches stored in `folder`, run `run` of the input, each
    /// system named by `named`; those that cannot be read, as [`Unreadable`].
    fn add_stored(&mut self, folder: &RunFolder, run: usize, named: &dyn Fn(String) -> String) {
        for (system, sizing) in folder.sizings() {
            match sizing {
                Ok(sizing) => self.sizings.push(Sized {
                    name: named(system),
                    run,
                    sizing,
                }),
                Err(e) => self.unreadable.push(Unreadable {
                    name: named(system),
                    run,
                    file: SIZING,
                    why: results::with_causes(&e),
                }),
            }
        }
        for (system, search) in folder.searches() {
            match search {
                Ok(search) => self.searches.push(Searched {
                    name: named(system),
                    run,
                    search,
                }),
                Err(e) => self.unreadable.push(Unreadable {
                    name: named(system),
                    run,
                    file: SEARCH,
                    why: results::with_causes(&e),
                }),
            }
        }
    }

    /// The stored files of kind `file` ([`SEARCH`], [`SIZING`]) that cannot be read.
    pub fn unreadable(&self, file: &'static str) -> impl Iterator<Item = &Unreadable> {
        self.unreadable.iter().filter(move |u| u.file == file)
    }

    /// Whether the report has a maximum-throughput table: searches, read or not.
    pub fn has_searches(&self) -> bool {
        !self.searches.is_empty() || self.unreadable(SEARCH).next().is_some()
    }

    /// Whether the report has a sizing table: sizing scans, read or not.
    pub fn has_sizings(&self) -> bool {
        !self.sizings.is_empty() || self.unreadable(SIZING).next().is_some()
    }

    /// The first series run at a fraction of `searched`'s maximum (`host@30` for the
    /// search of `host`), whose colour the search's row and line take.
    pub fn series_of(&self, searched: &Searched) -> Option<usize> {
        self.series.iter().position(|x| {
            x.run == searched.run && x.name.split('@').next() == Some(searched.name.as_str())
        })
    }

    /// The scenario names of the runs, deduplicated, in order.
    pub fn scenarios(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.runs {
            if let Some(s) = &r.scenario {
                if !v.contains(s) {
                    v.push(s.clone());
                }
            }
        }
        v
    }
}

/// Reads the runs at `paths` (folders or `result.json` files).
///
/// # Errors
/// [`InputError`] for the first path that is not a run or holds a document this
/// version cannot read.
pub fn load(paths: &[PathBuf]) -> Result<ReportInput, InputError> {
    if paths.is_empty() {
        return Err(InputError::Empty);
    }
    let several = paths.len() > 1;
    let mut input = ReportInput::default();
    for path in paths {
        let (run, systems) = load_run(path)?;
        let run_index = input.runs.len();
        if path.is_dir() {
            // As series are named: `<run>/<system>` when several runs are compared.
            let named = |system: String| {
                if several {
                    format!("{}/{system}", run.name)
                } else {
                    system
                }
            };
            input.add_stored(&RunFolder::new(path), run_index, &named);
        }
        let single_file = systems.len() == 1 && systems[0].0.is_none();
        for (system, result) in systems {
            let system = system.unwrap_or_else(|| run.name.clone());
            let name = if several && !single_file {
                format!("{}/{system}", run.name)
            } else {
                system.clone()
            };
            input.series.push(Series {
                name,
                system,
                run: run_index,
                result,
            });
        }
        input.runs.push(run);
    }
    dedupe_names(&mut input.series);
    Ok(input)
}

/// A system of a run: its folder's name (`None` for a lone result) and its result.
type System = (Option<String>, RunResult);

/// One path: a run folder, a folder with just a result.json, or a result file. The
/// system name is `None` for a result that is not part of a lab run folder.
fn load_run(path: &Path) -> Result<(Run, Vec<System>), InputError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| ReadError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut run = Run {
        path: path.to_path_buf(),
        name: run_name(path),
        ..Default::default()
    };
    if meta.is_file() {
        let loaded = read_result(path)?;
        run.scenario = loaded.lab.as_ref().map(|l| l.scenario.clone());
        let system = loaded.lab.as_ref().map(|l| l.system.clone());
        return Ok((run, vec![(system, loaded)]));
    }
    let own = path.join(RESULT);
    if own.is_file() {
        let loaded = read_result(&own)?;
        run.scenario = loaded.lab.as_ref().map(|l| l.scenario.clone());
        let system = loaded.lab.as_ref().map(|l| l.system.clone());
        return Ok((run, vec![(system, loaded)]));
    }
    let folder = RunFolder::new(path);
    let dirs = folder.systems().map_err(|source| ReadError::Io {
        path: shown.clone(),
        source,
    })?;
    // A sizing scan's systems have only `sizing.json`.
    if dirs.is_empty() && folder.sizings().is_empty() {
        return Err(InputError::NotARun { path: shown });
    }
    let mut systems = Vec::new();
    for d in dirs {
        let loaded = folder.read_result(&d)?;
        if run.scenario.is_none() {
            run.scenario = loaded.lab.as_ref().map(|l| l.scenario.clone());
        }
        systems.push((Some(d), loaded));
    }
    let effective = folder.effective();
    if effective.name.is_some() {
        run.scenario = effective.name;
    }
    run.description = effective.description;
    Ok((run, systems))
}

/// A run's name: its folder's name; for a file, the file's stem unless it is the
/// generic `result`, then its folder's name.
fn run_name(path: &Path) -> String {
    let file = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if abs.is_file() {
        let stem = abs
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if stem != "result" && !stem.is_empty() {
            return stem;
        }
        return abs.parent().map(file).unwrap_or(stem);
    }
    let n = file(&abs);
    if n.is_empty() {
        "run".to_string()
    } else {
        n
    }
}

/// Reads one result document (see [`results::folder::read_result`]).
fn read_result(path: &Path) -> Result<RunResult, InputError> {
    Ok(results::folder::read_result(path)?)
}

/// Parses a result document's text; `shown` names it in errors.
///
/// # Errors
/// [`InputError::Parse`] for text that is not a result object,
/// [`InputError::Schema`] for another schema version.
pub fn parse_result(shown: &str, text: &str) -> Result<RunResult, InputError> {
    Ok(results::folder::parse_result(shown, text)?)
}

/// Two series of the same name (two runs in folders of the same name) get `#2`, `#3`.
fn dedupe_names(series: &mut [Series]) {
    let mut seen: Vec<String> = Vec::new();
    for s in series.iter_mut() {
        let mut name = s.name.clone();
        let mut n = 2;
        while seen.contains(&name) {
            name = format!("{}#{n}", s.name);
            n += 1;
        }
        seen.push(name.clone());
        s.name = name;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::RESULT_SCHEMA;

    fn write_result(dir: &Path, system: Option<&str>, schema: &str) -> PathBuf {
        let mut r = RunResult {
            schema: schema.to_string(),
            ..Default::default()
        };
        if let Some(s) = system {
            r.lab = Some(results::LabInfo {
                system: s.to_string(),
                scenario: "dyn".to_string(),
                ..Default::default()
            });
        }
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join("result.json");
        std::fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
        p
    }

    #[test]
    fn a_run_folder_gives_its_systems_in_the_scenario_order() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("dyn-1");
        write_result(&run.join("caddy-api"), Some("caddy-api"), RESULT_SCHEMA);
        write_result(
            &run.join("nginx-reload"),
            Some("nginx-reload"),
            RESULT_SCHEMA,
        );
        std::fs::write(
            run.join("scenario.effective.json"),
            r#"{"name":"dyn","description":"d","systems":["nginx-reload","caddy-api"]}"#,
        )
        .unwrap();
        let input = load(std::slice::from_ref(&run)).unwrap();
        let names: Vec<_> = input.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["nginx-reload", "caddy-api"]);
        assert_eq!(input.runs[0].scenario.as_deref(), Some("dyn"));
        assert_eq!(input.runs[0].name, "dyn-1");
        // Two runs: names carry the run.
        let input = load(&[run.clone(), run]).unwrap();
        let names: Vec<_> = input.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "dyn-1/nginx-reload",
                "dyn-1/caddy-api",
                "dyn-1/nginx-reload#2",
                "dyn-1/caddy-api#2"
            ]
        );
    }

    #[test]
    fn a_single_result_is_named_after_its_file() {
        let t = tempfile::tempdir().unwrap();
        let p = write_result(&t.path().join("base"), None, RESULT_SCHEMA);
        let l = t.path().join("l.json");
        std::fs::copy(&p, &l).unwrap();
        let input = load(&[l, p.clone(), t.path().join("base")]).unwrap();
        let names: Vec<_> = input.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["l", "base", "base#2"]);
    }

    #[test]
    fn bad_input_is_one_line_naming_the_path() {
        let t = tempfile::tempdir().unwrap();
        let e = load(&[t.path().to_path_buf()]).unwrap_err().to_string();
        assert!(e.contains("not a run: no result.json found"), "{e}");
        assert!(!e.contains('\n'));
        let p = write_result(&t.path().join("x"), None, "ingressbench/result/v2");
        let e = load(&[p]).unwrap_err().to_string();
        assert!(e.contains("schema \"ingressbench/result/v2\""), "{e}");
        std::fs::write(t.path().join("x/result.json"), "{").unwrap();
        let e = load(&[t.path().join("x")]).unwrap_err().to_string();
        assert!(e.contains("not a result document"), "{e}");
        let e = load(&[t.path().join("missing")]).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }

    /// A search stored but unreadable is named, with why, where its row would be:
    /// in the page, in `report.md` and in the text summary; not left out unsaid.
    #[test]
    fn an_unreadable_search_is_named_where_its_row_would_be() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("rates");
        write_result(&run.join("host@30"), Some("host@30"), RESULT_SCHEMA);
        std::fs::create_dir_all(run.join("host")).unwrap();
        std::fs::write(run.join("host").join(SEARCH), "{\"schema\": ").unwrap();
        let input = load(std::slice::from_ref(&run)).unwrap();
        assert!(input.searches.is_empty());
        let file = run.join("host").join(SEARCH);
        let why = format!(
            "cannot be read: {}: not a search: EOF while parsing",
            file.display()
        );
        assert_eq!(input.unreadable.len(), 1);
        assert_eq!(input.unreadable[0].name, "host");
        let table = crate::tables::maxima(&input);
        assert_eq!(table.cell(0, "system"), Some("host"));
        assert!(
            table.cell(0, "note").unwrap().starts_with(&why),
            "{table:?}"
        );
        let page = crate::html::render(&input, &[], "now");
        assert!(page.contains("<table id=\"table-maxima\""));
        assert!(
            page.contains(&crate::markup::escape(&why)),
            "the page names it"
        );
        assert!(crate::markdown::render(&input).contains(&why));
        let text = crate::summary::Summary::text(&input);
        assert!(text.contains(&why), "{text}");
        // Read in memory as `ingressbench run` ends, the same.
        let done = ReportInput::lab_run(&run, "rates", Vec::new());
        assert_eq!(done.unreadable, input.unreadable);
    }
}
