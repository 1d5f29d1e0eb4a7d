//! The run folder: what `ingressbench run` writes and every reader reads back.
//!
//! The runner writes it and the reports, `compare` and the tests read it, so its names
//! and its documents are defined once, here, as typed reads and writes rather than
//! paths and untyped JSON spread over both sides.
//!
//! ```text
//! <run>/scenario.yaml            the scenario as given
//! <run>/scenario.effective.json  the scenario as run (after --quick): Effective
//! <run>/summary.txt              the systems side by side
//! <run>/report.html              the page (and its charts and CSVs beside it)
//! <run>/<system>/result.json     RunResult, one per system under test
//! <run>/<system>/events.json     the system's event log (also inside result.json)
//! ```

use crate::fsutil::write_atomic;
use crate::{RunResult, RESULT_SCHEMA};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The scenario file as given.
pub const SCENARIO: &str = "scenario.yaml";
/// The scenario as run.
pub const EFFECTIVE: &str = "scenario.effective.json";
/// The plain-text comparison.
pub const SUMMARY: &str = "summary.txt";
/// The report page.
pub const REPORT: &str = "report.html";
/// A system's result document.
pub const RESULT: &str = "result.json";
/// A system's event log.
pub const EVENTS: &str = "events.json";
/// In a system's folder: the search for its maximum (`load.rates`), whose fractions
/// are the folders `<system>@<percent>` beside it.
pub const SEARCH: &str = "search.json";
/// In a system's folder: its sizing scan (`sizing:`), every allocation and measure.
pub const SIZING: &str = "sizing.json";

/// The lock file that says a run is writing into the folder.
pub const LOCK: &str = ".ingressbench.lock";

/// Why a run folder cannot be written into.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("results folder {path} is in use by another ingressbench run: give another --out, or wait for it to end")]
    Busy { path: String },
    #[error("results folder {path} already holds results: give another --out, or --force to replace them")]
    NotEmpty { path: String },
    #[error("results folder {path}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A run's hold on its folder: an exclusive `flock` on [`LOCK`], released when this
/// is dropped or when the process dies however it dies (the kernel drops the lock).
#[derive(Debug)]
pub struct FolderLock {
    file: std::fs::File,
    path: PathBuf,
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

/// Why a result document could not be read. Each message names the path once (and,
/// as every error of the workspace, not its cause: see [`crate::causes`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a result document: {msg}")]
    Parse { path: String, msg: String },
    #[error(
        "{path}: schema \"{found}\" is not supported (this ingressbench reads \"{RESULT_SCHEMA}\")"
    )]
    Schema { path: String, found: String },
    /// A stored document other than a result (`search.json`, `sizing.json`) that is
    /// not what its name says.
    #[error("{path}: not a {what}")]
    Document {
        path: String,
        /// What the file should hold: `search`, `sizing scan`.
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// What readers need of the scenario as run: the order of its systems, its name and
/// its description. The file holds the whole scenario; other keys are ignored here.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Effective {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub systems: Vec<String>,
}

/// A run folder on disk.
#[derive(Clone, Debug)]
pub struct RunFolder {
    root: PathBuf,
}

impl RunFolder {
    /// The folder at `root` (nothing is created until something is written).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunFolder { root: root.into() }
    }

    /// Takes the folder for one run: creates it, locks it against a second run, and
    /// refuses one that already holds anything unless `replace`, in which case its
    /// old contents are removed first (so no log of an old run is appended to).
    ///
    /// # Errors
    /// [`LockError`] naming the folder.
    pub fn lock(&self, replace: bool) -> Result<FolderLock, LockError> {
        let shown = self.root.display().to_string();
        let io = |source| LockError::Io {
            path: shown.clone(),
            source,
        };
        std::fs::create_dir_all(&self.root).map_err(io)?;
        let path = self.file(LOCK);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        use rustix::fs::{flock, FlockOperation};
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            return Err(LockError::Busy { path: shown });
        }
        let lock = FolderLock { file, path };
        let others: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name() != LOCK)
            .map(|e| e.path())
            .collect();
        if !others.is_empty() {
            if !replace {
                return Err(LockError::NotEmpty { path: shown });
            }
            for p in others {
                let res = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                res.map_err(io)?;
            }
        }
        Ok(lock)
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A file directly in the folder (one of the names above).
    pub fn file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The folder of one system under test.
    pub fn system_dir(&self, system: &str) -> PathBuf {
        self.root.join(system)
    }

    /// Writes the scenario as given and as run (`effective` is the whole scenario
    /// serialized; readers take only [`Effective`]'s keys from it).
    ///
    /// # Errors
    /// The I/O error of the first file that could not be written.
    pub fn write_scenario(&self, text: &str, effective: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        write_atomic(&self.file(SCENARIO), text.as_bytes())?;
        write_atomic(&self.file(EFFECTIVE), effective)
    }

    /// Writes one system's `result.json` and, for a lab run, its `events.json`.
    ///
    /// # Errors
    /// The I/O error, naming nothing (the caller knows which system it wrote).
    pub fn write_result(&self, system: &str, r: &RunResult) -> std::io::Result<()> {
        let dir = self.system_dir(system);
        std::fs::create_dir_all(&dir)?;
        let mut bytes = serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&dir.join(RESULT), &bytes)?;
        if let Some(lab) = &r.lab {
            let ev = serde_json::to_vec_pretty(&lab.events).map_err(std::io::Error::other)?;
            write_atomic(&dir.join(EVENTS), &ev)?;
        }
        Ok(())
    }

    /// Writes one system's search for its maximum (`search.json`).
    ///
    /// # Errors
    /// The I/O error.
    pub fn write_search(
        &self,
        system: &str,
        s: &crate::search::SearchResult,
    ) -> std::io::Result<()> {
        let dir = self.system_dir(system);
        std::fs::create_dir_all(&dir)?;
        let mut bytes = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&dir.join(SEARCH), &bytes)
    }

    /// Writes one system's sizing scan (`sizing.json`), replacing the last version:
    /// it is written after every row, so an interrupted scan keeps the rows it made.
    ///
    /// # Errors
    /// The I/O error.
    pub fn write_sizing(&self, s: &crate::sizing::SizingResult) -> std::io::Result<()> {
        let dir = self.system_dir(&s.system);
        std::fs::create_dir_all(&dir)?;
        let mut bytes = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&dir.join(SIZING), &bytes)
    }

    /// Every system's sizing scan, in the scenario's order; one that is there but
    /// cannot be read is its error, for the report to name where its rows would be.
    pub fn sizings(&self) -> Vec<(String, Result<crate::sizing::SizingResult, ReadError>)> {
        self.per_system(SIZING, "sizing scan")
    }

    /// Every system's search (`load.rates` runs), in the scenario's order; systems
    /// without one are left out, and one that cannot be read is its error.
    pub fn searches(&self) -> Vec<(String, Result<crate::search::SearchResult, ReadError>)> {
        self.per_system(SEARCH, "search")
    }

    /// The file `file` (holding a `what`) of every system folder that has one, in the
    /// scenario's order (folders it does not name, such as `host@30`, by name after).
    /// A file that is there but cannot be read or parsed is kept as its error: a
    /// reader that left it out would show a report without its table and no word
    /// of why.
    fn per_system<T: serde::de::DeserializeOwned>(
        &self,
        file: &str,
        what: &'static str,
    ) -> Vec<(String, Result<T, ReadError>)> {
        let order = self.effective().systems;
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<(String, Result<T, ReadError>)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let path = e.path().join(file);
                let shown = path.display().to_string();
                let read = match std::fs::read_to_string(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                    Err(source) => Err(ReadError::Io {
                        path: shown,
                        source,
                    }),
                    Ok(text) => serde_json::from_str(&text).map_err(|source| ReadError::Document {
                        path: shown,
                        what,
                        source,
                    }),
                };
                Some((name, read))
            })
            .collect();
        out.sort_by_key(|(d, _)| {
            (
                order.iter().position(|o| o == d).unwrap_or(usize::MAX),
                d.clone(),
            )
        });
        out
    }

    /// Writes the plain-text comparison.
    ///
    /// # Errors
    /// The I/O error.
    pub fn write_summary(&self, text: &str) -> std::io::Result<()> {
        write_atomic(&self.file(SUMMARY), text.as_bytes())
    }

    /// The scenario as run; empty when the file is absent or unreadable (a folder of
    /// results copied by hand is still a run).
    pub fn effective(&self) -> Effective {
        std::fs::read_to_string(self.file(EFFECTIVE))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The systems that have a result, in the scenario's order, then any others by
    /// name.
    ///
    /// # Errors
    /// The I/O error of listing the folder.
    pub fn systems(&self) -> std::io::Result<Vec<String>> {
        let order = self.effective().systems;
        let mut dirs: Vec<String> = std::fs::read_dir(&self.root)?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join(RESULT).is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        // A run at a fraction of a maximum (`host@30`) sorts with its system.
        dirs.sort_by_key(|d| {
            let system = d.split('@').next().unwrap_or(d);
            (
                order.iter().position(|o| o == system).unwrap_or(usize::MAX),
                d.split('@')
                    .nth(1)
                    .and_then(|p| p.parse::<u32>().ok())
                    .unwrap_or(0),
                d.clone(),
            )
        });
        Ok(dirs)
    }

    /// Reads one system's result.
    ///
    /// # Errors
    /// [`ReadError`] naming the file.
    pub fn read_result(&self, system: &str) -> Result<RunResult, ReadError> {
        read_result(&self.system_dir(system).join(RESULT))
    }
}

/// Reads one result document, checking its schema before its fields: a document of
/// another version may not parse as this one, and its version is the useful message.
///
/// # Errors
/// [`ReadError`] naming the path.
pub fn read_result(path: &Path) -> Result<RunResult, ReadError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: shown.clone(),
        source,
    })?;
    parse_result(&shown, &text)
}

/// Parses a result document's text; `shown` names it in errors.
///
/// # Errors
/// [`ReadError::Parse`] for text that is not a result object, [`ReadError::Schema`]
/// for another schema version.
pub fn parse_result(shown: &str, text: &str) -> Result<RunResult, ReadError> {
    let raw: serde_json::Value = serde_json::from_str(text).map_err(|e| ReadError::Parse {
        path: shown.to_string(),
        msg: e.to_string(),
    })?;
    match raw.get("schema").and_then(|s| s.as_str()) {
        Some(RESULT_SCHEMA) => {}
        Some(other) => {
            return Err(ReadError::Schema {
                path: shown.to_string(),
                found: other.to_string(),
            })
        }
        None => {
            return Err(ReadError::Parse {
                path: shown.to_string(),
                msg: "no \"schema\" field".to_string(),
            })
        }
    }
    serde_json::from_value(raw).map_err(|e| ReadError::Parse {
        path: shown.to_string(),
        msg: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LabInfo;

    fn lab_result(system: &str) -> RunResult {
        RunResult {
            schema: RESULT_SCHEMA.to_string(),
            lab: Some(LabInfo {
                system: system.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn written_results_read_back_in_the_scenario_order() {
        let t = tempfile::tempdir().unwrap();
        let f = RunFolder::new(t.path().join("run"));
        f.write_scenario("name: x\n", br#"{"name":"x","systems":["b-sys","a-sys"]}"#)
            .unwrap();
        for s in ["a-sys", "b-sys", "c-sys"] {
            f.write_result(s, &lab_result(s)).unwrap();
        }
        assert_eq!(f.systems().unwrap(), ["b-sys", "a-sys", "c-sys"]);
        assert_eq!(f.effective().name.as_deref(), Some("x"));
        let back = f.read_result("a-sys").unwrap();
        assert_eq!(back.lab.unwrap().system, "a-sys");
        assert!(f.system_dir("a-sys").join(EVENTS).is_file());
    }

    #[test]
    fn a_folder_is_one_runs_at_a_time_and_is_not_overwritten_unasked() {
        let t = tempfile::tempdir().unwrap();
        let f = RunFolder::new(t.path().join("run"));
        let first = f.lock(false).unwrap();
        let e = f.lock(false).unwrap_err().to_string();
        assert!(e.contains("in use by another ingressbench run"), "{e}");
        f.write_result("a", &lab_result("a")).unwrap();
        drop(first);
        assert!(!f.file(LOCK).exists(), "the lock file goes with the run");
        let e = f.lock(false).unwrap_err().to_string();
        assert!(
            e.contains("already holds results") && e.contains("--force"),
            "{e}"
        );
        let _again = f.lock(true).unwrap();
        assert!(
            f.systems().unwrap().is_empty(),
            "--force starts from an empty folder"
        );
    }

    #[test]
    fn a_stored_search_or_scan_that_cannot_be_read_is_kept_as_why() {
        let t = tempfile::tempdir().unwrap();
        let f = RunFolder::new(t.path().join("run"));
        f.write_search("good", &crate::search::SearchResult::default())
            .unwrap();
        std::fs::create_dir_all(f.system_dir("corrupt")).unwrap();
        std::fs::write(f.system_dir("corrupt").join(SEARCH), "{\"steps\": [").unwrap();
        // A folder where the file should be: there, and unreadable.
        std::fs::create_dir_all(f.system_dir("odd").join(SEARCH)).unwrap();
        std::fs::create_dir_all(f.system_dir("none")).unwrap();
        std::fs::write(f.file(SUMMARY), "not a system").unwrap();
        let got = f.searches();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["corrupt", "good", "odd"],
            "a system without one is left out"
        );
        let why = |i: usize| crate::with_causes(got[i].1.as_ref().unwrap_err());
        let corrupt = f.system_dir("corrupt").join(SEARCH);
        assert!(
            why(0).starts_with(&format!(
                "{}: not a search: EOF while parsing a list",
                corrupt.display()
            )),
            "{}",
            why(0)
        );
        assert!(got[1].1.is_ok());
        assert!(why(2).contains("Is a directory"), "{}", why(2));
        std::fs::create_dir_all(f.system_dir("scan")).unwrap();
        std::fs::write(f.system_dir("scan").join(SIZING), "[]").unwrap();
        let scans = f.sizings();
        assert_eq!(scans.len(), 1);
        assert!(
            crate::with_causes(scans[0].1.as_ref().unwrap_err()).contains(": not a sizing scan: "),
            "{:?}",
            scans[0].1
        );
    }

    #[test]
    fn another_schema_is_named_before_its_fields_are_read() {
        let e = parse_result("r.json", r#"{"schema":"ingressbench/result/v9","x":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ingressbench/result/v9"), "{e}");
        let e = parse_result("r.json", "{}").unwrap_err().to_string();
        assert!(e.contains("no \"schema\""), "{e}");
    }
}
