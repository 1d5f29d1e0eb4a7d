//! Writing files so that a reader never sees half of one.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, synced,
/// then renamed over the target.
///
/// # Errors
/// The I/O error, with the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Checks, before a run, that `path` can be written later: its folder exists and
/// accepts files. A run must not measure for an hour and then fail to save.
///
/// # Errors
/// A message naming the folder.
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path.is_dir() || path.as_os_str().to_string_lossy().ends_with('/') {
        return Err(format!(
            "{} is a folder: give a file name in it (e.g. {})",
            path.display(),
            path.join("result.json").display()
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "{}: folder {} does not exist: create it first",
            path.display(),
            dir.display()
        ));
    }
    let probe = dir.join(format!(".ingressbench-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "{}: cannot write in {}: {e}",
            path.display(),
            dir.display()
        )),
    }
}

/// Checks that no two outputs are the same file (one would silently overwrite the
/// other). `outputs` are (flag, path) pairs; paths are compared after resolving the
/// folder, so `./r.json` and `r.json` are the same file.
///
/// # Errors
/// A message naming both flags.
pub fn check_distinct(outputs: &[(&str, &Path)]) -> Result<(), String> {
    let key = |p: &Path| -> std::path::PathBuf {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        dir.join(p.file_name().unwrap_or_default())
    };
    for (i, (fa, pa)) in outputs.iter().enumerate() {
        for (fb, pb) in &outputs[..i] {
            if key(pa) == key(pb) {
                return Err(format!(
                    "{fb} and {fa} are the same file ({}): give each output its own path",
                    pa.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        assert!(check_writable(&p).is_ok());
        assert!(check_writable(&d.path().join("no/such/r.json")).is_err());
        let e = check_writable(d.path()).unwrap_err();
        assert!(e.contains("is a folder"), "{e}");
    }

    #[test]
    fn two_outputs_on_one_file_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("r.json");
        let b = d.path().join(".").join("r.json");
        let e = check_distinct(&[("--json", &a), ("--hdr-log", &b)]).unwrap_err();
        assert!(e.contains("--json and --hdr-log are the same file"), "{e}");
        assert!(check_distinct(&[("--json", &a), ("--hdr-log", &d.path().join("r.hlog"))]).is_ok());
    }
}
