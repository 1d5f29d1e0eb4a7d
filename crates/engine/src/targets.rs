//! A request mix read from a targets file in Vegeta's `http` format (what
//! `vegeta attack -format=http` reads), so that a mix written for Vegeta runs here
//! unchanged:
//!
//! ```text
//! # comments start with '#'
//! GET http://127.0.0.1:8080/items weight=3
//! Accept: application/json
//!
//! POST https://127.0.0.1:8443/items
//! Content-Type: application/json
//! @bodies/item.json
//! ```
//!
//! A target is a request line `METHOD URL`, then its headers (`Name: value`) and at
//! most one body (`@path`, relative to the targets file's folder). A blank line or
//! the next request line ends it. One extension: `weight=N` after the URL, how many
//! shares of the mix the target gets (Vegeta repeats a line for that). Vegeta's JSON
//! format is refused by name rather than misread as headers.
//!
//! The file is checked whole before a run: every error names its line and says how
//! to fix it, so a mistake never costs a run.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One request of the mix as the file gives it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetSpec {
    pub method: String,
    pub url: String,
    /// "Name: value", in file order.
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    pub weight: u32,
    /// 1-based line of its request line, for later error messages.
    pub line: usize,
}

/// The most targets one file may hold: each one's request is encoded and kept for the run.
pub const MAX_TARGETS: usize = 100_000;

/// The largest `weight=N`: a million shares to one is finer than any run resolves,
/// and the sum of [`MAX_TARGETS`] weights stays far below `u64` limits.
const MAX_WEIGHT: u32 = 1_000_000;

/// What a targets file's line shows of itself in an error, at most: a long line
/// (a URL with a huge query, say) would otherwise make the message unreadable.
const QUOTE_CHARS: usize = 80;

/// What is wrong with a targets file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetsError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based; 0 when the problem is the file as a whole (unreadable, empty).
    pub line: usize,
    pub problem: String,
}

impl fmt::Display for TargetsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.problem)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.problem)
        }
    }
}

impl std::error::Error for TargetsError {}

/// Reads and parses the file at `path` (an unreadable file is a TargetsError with line 0).
///
/// `@body` paths are resolved against the file's own folder, so a mix and its
/// bodies move together.
///
/// # Errors
/// The file cannot be read, is not UTF-8, or [`parse`] refuses it.
pub fn read(path: &Path) -> Result<Vec<TargetSpec>, TargetsError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TargetsError {
        file: file.clone(),
        line: 0,
        problem: format!("cannot read the targets file: {e}"),
    })?;
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text,
        Err(e) => {
            let before = &bytes[..e.valid_up_to()];
            return Err(TargetsError {
                file,
                line: before.iter().filter(|&&b| b == b'\n').count() + 1,
                problem: "not UTF-8 text: save the targets file as UTF-8".into(),
            });
        }
    };
    parse(text, &file, path.parent().unwrap_or(Path::new("")))
}

/// Parses `text`, naming `file` in errors and resolving `@body` paths against `dir`.
///
/// # Errors
/// The first line that breaks the grammar (see the module's documentation), the
/// JSON format, no targets at all, or more than [`MAX_TARGETS`].
pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Vec<TargetSpec>, TargetsError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut p = Parser {
        dir,
        targets: Vec::new(),
        open: false,
        has_body: false,
        bodies: HashMap::new(),
    };
    let mut first = true;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            // A blank line ends the target, as in Vegeta.
            p.open = false;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        // Vegeta's JSON targets are one object a line: read as http, the first
        // would be a confusing "not a request line".
        if first && line.starts_with('{') {
            return Err(TargetsError {
                file: file.into(),
                line: i + 1,
                problem: "the file looks like Vegeta's JSON format; only the http format is read (METHOD URL, headers, @body)".into(),
            });
        }
        first = false;
        p.line(line, i + 1).map_err(|problem| TargetsError {
            file: file.into(),
            line: i + 1,
            problem,
        })?;
    }
    if p.targets.is_empty() {
        return Err(TargetsError {
            file: file.into(),
            line: 0,
            problem: format!("no targets: write one per line as METHOD URL, e.g. {EXAMPLE}"),
        });
    }
    Ok(p.targets)
}

/// A request line to show in messages.
const EXAMPLE: &str = "GET http://127.0.0.1:8080/path";

/// What the lines read so far have built.
struct Parser<'a> {
    dir: &'a Path,
    targets: Vec<TargetSpec>,
    /// Whether the last target still takes headers and a body: no blank line since
    /// its request line.
    open: bool,
    /// Whether the open target has its body already (an empty file is a body too).
    has_body: bool,
    /// Body files read so far: a mix often sends one body from many targets.
    bodies: HashMap<PathBuf, Vec<u8>>,
}

impl Parser<'_> {
    /// Takes one trimmed, non-blank, non-comment line (`n`: its 1-based number).
    fn line(&mut self, line: &str, n: usize) -> Result<(), String> {
        if let Some(path) = line.strip_prefix('@') {
            return self.body(path.trim());
        }
        if let Some(request) = request_line(line) {
            let (method, url, weight) = request?;
            if self.targets.len() == MAX_TARGETS {
                return Err(format!(
                    "more than {MAX_TARGETS} targets: write a request that repeats once, with weight=N"
                ));
            }
            self.targets.push(TargetSpec {
                method: method.into(),
                url: url.into(),
                headers: Vec::new(),
                body: Vec::new(),
                weight,
                line: n,
            });
            self.open = true;
            self.has_body = false;
            return Ok(());
        }
        if let Some(upper) = lower_case_method(line) {
            return Err(format!(
                "'{}' is not a method: methods are upper case: {upper}",
                line.split_whitespace().next().unwrap_or_default()
            ));
        }
        match header(line) {
            Some(h) => {
                self.target("a header")?.headers.push(h);
                Ok(())
            }
            None if self.open => Err(format!(
                "'{}' is not a header: write Name: value",
                quote(line)
            )),
            None => Err(format!(
                "'{}' is not a request line: start each target with METHOD URL, e.g. {EXAMPLE}",
                quote(line)
            )),
        }
    }

    /// The target a header or body line belongs to; `what` names the line in the
    /// error when there is none.
    fn target(&mut self, what: &str) -> Result<&mut TargetSpec, String> {
        match self.targets.last_mut() {
            Some(t) if self.open => Ok(t),
            Some(_) => Err(format!(
                "{what} after a blank line: a blank line ends a target, so remove it or start a new target with METHOD URL"
            )),
            None => Err(format!(
                "{what} before any request line: start each target with METHOD URL"
            )),
        }
    }

    /// `@path`: the open target's body, the file read whole.
    fn body(&mut self, path: &str) -> Result<(), String> {
        self.target("a body")?;
        if path.is_empty() {
            return Err("'@' names no file: write @path/to/body".into());
        }
        if self.has_body {
            return Err(format!(
                "a second body (@{path}) for one target: give each target at most one @file"
            ));
        }
        let full = self.dir.join(path);
        let body = match self.bodies.get(&full) {
            Some(b) => b.clone(),
            None => {
                let b = std::fs::read(&full).map_err(|e| {
                    if Path::new(path).is_absolute() {
                        format!("body file '{path}': {e}")
                    } else {
                        format!(
                            "body file '{path}': {e}; looked for {}: relative paths start at the targets file's folder",
                            full.display()
                        )
                    }
                })?;
                self.bodies.insert(full, b.clone());
                b
            }
        };
        self.has_body = true;
        if let Some(t) = self.targets.last_mut() {
            t.body = body;
        }
        Ok(())
    }
}

/// `METHOD URL [weight=N]`, checked; `None` when the line does not start with an
/// upper-case word, so it is not meant as a request line.
fn request_line(line: &str) -> Option<Result<(&str, &str, u32), String>> {
    let mut words = line.split_whitespace();
    let method = words.next()?;
    if !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let Some(url) = words.next() else {
        return Some(Err(format!(
            "'{method}' has no URL: write METHOD URL, e.g. {EXAMPLE}"
        )));
    };
    let extra: Vec<&str> = words.collect();
    Some(check_url(url).and_then(|()| {
        let weight = match extra.as_slice() {
            [] => 1,
            [w] if w.starts_with("weight=") => weight(w)?,
            _ => {
                return Err(format!(
                    "'{}' after the URL: only weight=N may follow it, e.g. {method} {} weight=2",
                    quote(&extra.join(" ")),
                    quote(url)
                ))
            }
        };
        Ok((method, url, weight))
    }))
}

/// An absolute http(s) URL with a host, as [`http1::Target::parse`] will take it
/// for the run: a URL it refuses is refused here, where the line is known.
fn check_url(url: &str) -> Result<(), String> {
    let scheme_end = url.find("://").map(|i| i + 3);
    let rest = match scheme_end {
        Some(i)
            if matches!(
                url[..i].to_ascii_lowercase().as_str(),
                "http://" | "https://"
            ) =>
        {
            &url[i..]
        }
        _ => {
            return Err(format!(
                "'{}' is not an http:// or https:// URL: write e.g. http://127.0.0.1:8080/path",
                quote(url)
            ))
        }
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.starts_with(':') {
        return Err(format!(
            "'{}' has no host: write e.g. http://127.0.0.1:8080/path",
            quote(url)
        ));
    }
    http1::Target::parse(url).map(drop)
}

/// `weight=N`, N from 1 to [`MAX_WEIGHT`].
fn weight(word: &str) -> Result<u32, String> {
    let n = &word["weight=".len()..];
    let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| n.parse::<u32>().ok())
        .flatten()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or_else(|| {
            format!(
                "{}: give a whole number from 1 to {MAX_WEIGHT}",
                quote(word)
            )
        })
}

/// The method, upper-cased, when the line is a request line written in lower or
/// mixed case (`get http://...`): HTTP methods are case-sensitive, and such a line
/// would otherwise read as a bad header.
fn lower_case_method(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    let method = words.next()?;
    let url = words.next()?;
    (method.bytes().all(|b| b.is_ascii_alphabetic()) && url.contains("://"))
        .then(|| method.to_ascii_uppercase())
}

/// `Name: value` with `Name` an HTTP token; written back with one space after the
/// colon and the value trimmed, the form the request encoder takes.
fn header(line: &str) -> Option<String> {
    let (name, value) = line.split_once(':')?;
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    (!name.is_empty() && name.bytes().all(token)).then(|| format!("{name}: {}", value.trim()))
}

/// `s`, cut to [`QUOTE_CHARS`] characters.
fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text` as `targets.txt` in a folder with no files.
    fn parse_text(text: &str) -> Result<Vec<TargetSpec>, TargetsError> {
        parse(text, "targets.txt", Path::new("/nonexistent-targets-dir"))
    }

    /// The error `text` gives, checked to be at `line` and to contain `fragment`.
    fn refused(text: &str, line: usize, fragment: &str) -> String {
        let e = parse_text(text).expect_err(text);
        let shown = e.to_string();
        assert_eq!(e.line, line, "{shown}");
        assert_eq!(e.file, "targets.txt");
        assert!(shown.contains(fragment), "{shown:?} lacks {fragment:?}");
        assert!(!shown.contains('\n'), "{shown:?} is not one line");
        shown
    }

    fn target(method: &str, url: &str, line: usize) -> TargetSpec {
        TargetSpec {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            weight: 1,
            line,
        }
    }

    #[test]
    fn three_targets_with_headers_a_body_comments_and_weights() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bodies")).unwrap();
        std::fs::write(dir.path().join("bodies/item.json"), b"{\"id\":1}\n").unwrap();
        let text = "\
# the mix
GET http://127.0.0.1:8080/items?page=2 weight=3
Accept: application/json
# a comment inside a target does not end it
X-Trace:abc:def

POST https://example.com:8443/items
Content-Type:\t  application/json \t
@bodies/item.json


DELETE http://[::1]/items/1 weight=1000000
";
        let path = dir.path().join("targets.txt");
        std::fs::write(&path, text).unwrap();
        let got = read(&path).unwrap();
        let want = vec![
            TargetSpec {
                headers: vec!["Accept: application/json".into(), "X-Trace: abc:def".into()],
                weight: 3,
                ..target("GET", "http://127.0.0.1:8080/items?page=2", 2)
            },
            TargetSpec {
                headers: vec!["Content-Type: application/json".into()],
                body: b"{\"id\":1}\n".to_vec(),
                ..target("POST", "https://example.com:8443/items", 7)
            },
            TargetSpec {
                weight: 1_000_000,
                ..target("DELETE", "http://[::1]/items/1", 12)
            },
        ];
        assert_eq!(got, want);
        // `parse` resolves bodies against the folder it is given, not the current one.
        assert_eq!(parse(text, "t", dir.path()).unwrap(), want);
        let e = parse(text, "t", Path::new("/nonexistent-targets-dir")).unwrap_err();
        assert_eq!(e.line, 9, "{e}");
    }

    #[test]
    fn crlf_indentation_and_a_byte_order_mark_are_accepted() {
        let text =
            "\u{feff}  GET http://h/a\r\n\tX-A: 1 \r\n\r\n   \r\nHEAD http://h/b weight=2\r\n";
        let got = parse_text(text).unwrap();
        assert_eq!(
            got,
            vec![
                TargetSpec {
                    headers: vec!["X-A: 1".into()],
                    ..target("GET", "http://h/a", 1)
                },
                TargetSpec {
                    weight: 2,
                    ..target("HEAD", "http://h/b", 5)
                },
            ]
        );
    }

    #[test]
    fn a_request_line_starts_a_target_without_a_blank_line() {
        let got =
            parse_text("GET http://h/1\nX-A: 1\nPOST http://h/2\nX-B: 2\nGET http://h/3").unwrap();
        let lines: Vec<(usize, &str, &[String])> = got
            .iter()
            .map(|t| (t.line, t.method.as_str(), t.headers.as_slice()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (1, "GET", &["X-A: 1".to_string()][..]),
                (3, "POST", &["X-B: 2".to_string()][..]),
                (5, "GET", &[][..]),
            ]
        );
        // Each target has its own body: a body before the next request line is not
        // a second one.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"A").unwrap();
        std::fs::write(dir.path().join("b"), b"B").unwrap();
        let got = parse(
            "POST http://h/\n@a\nPOST http://h/\n@b\nPOST http://h/\n@a",
            "t",
            dir.path(),
        )
        .unwrap();
        let bodies: Vec<&[u8]> = got.iter().map(|t| t.body.as_slice()).collect();
        assert_eq!(bodies, [b"A", b"B", b"A"]);
    }

    #[test]
    fn weights_are_whole_numbers_from_1_to_a_million() {
        assert_eq!(parse_text("GET http://h/").unwrap()[0].weight, 1);
        assert_eq!(parse_text("GET http://h/ weight=007").unwrap()[0].weight, 7);
        for bad in ["0", "1000001", "-1", "+1", "1.5", "", "x", "99999999999"] {
            let text = format!("# one\n\nGET http://h/ weight={bad}\n");
            let shown = refused(&text, 3, "give a whole number from 1 to 1000000");
            assert!(
                shown.starts_with(&format!("targets.txt:3: weight={bad}:")),
                "{shown}"
            );
        }
        assert_eq!(
            refused("GET http://h/ weight=0", 1, ""),
            "targets.txt:1: weight=0: give a whole number from 1 to 1000000"
        );
        refused(
            "GET http://h/ weight=2 weight=3",
            1,
            "'weight=2 weight=3' after the URL: only weight=N may follow it",
        );
        refused("GET http://h/ HTTP/1.1", 1, "'HTTP/1.1' after the URL");
        refused(
            "GET http://h/ WEIGHT=2",
            1,
            "only weight=N may follow it, e.g. GET http://h/ weight=2",
        );
    }

    #[test]
    fn request_line_errors_name_their_line() {
        assert_eq!(
            refused("GET http://h/\nGET\n", 2, ""),
            "targets.txt:2: 'GET' has no URL: write METHOD URL, e.g. GET http://127.0.0.1:8080/path"
        );
        refused(
            "\n\n\nPOST ftp://x/",
            4,
            "'ftp://x/' is not an http:// or https:// URL",
        );
        refused(
            "GET /just/a/path",
            1,
            "'/just/a/path' is not an http:// or https:// URL",
        );
        refused(
            "GET 127.0.0.1:8080/",
            1,
            "is not an http:// or https:// URL",
        );
        refused("GET http:///x", 1, "'http:///x' has no host");
        refused("GET http://:80/x", 1, "has no host");
        // What the request encoder would refuse at run time is refused here, with a line.
        refused(
            "GET http://h/\n\nGET http://h:99999/",
            3,
            "port is not a number from 1 to 65535",
        );
        refused("GET http://u@h/", 1, "user names in URLs are not supported");
        let shown = refused(
            "GET http://h/\nget http://h/x\n",
            2,
            "methods are upper case: GET",
        );
        assert_eq!(
            shown,
            "targets.txt:2: 'get' is not a method: methods are upper case: GET"
        );
        refused("Post https://h/", 1, "methods are upper case: POST");
    }

    #[test]
    fn header_errors_name_their_line() {
        assert_eq!(
            refused(
                "# c\nGET http://h/\nX-A: 1\n\nPOST http://h/\nX-B: 2\nHost example.com\n",
                7,
                ""
            ),
            "targets.txt:7: 'Host example.com' is not a header: write Name: value"
        );
        refused("GET http://h/\nName : v", 2, "'Name : v' is not a header");
        refused("GET http://h/\n: v", 2, "': v' is not a header");
        refused("GET http://h/\nX(A): v", 2, "is not a header");
        refused(
            "# c\n\n\n\nX-A: 1\nGET http://h/",
            5,
            "a header before any request line: start each target with METHOD URL",
        );
        refused(
            "GET http://h/\n\nX-A: 1",
            3,
            "a header after a blank line: a blank line ends a target",
        );
        refused(
            "hello world\n",
            1,
            "'hello world' is not a request line: start each target with METHOD URL",
        );
        // A long line is cut in the message.
        let long = format!("GET http://h/\n{}", "x".repeat(500));
        let shown = refused(
            &long,
            2,
            &format!("'{}...' is not a header", "x".repeat(80)),
        );
        assert!(shown.len() < 200, "{shown}");
    }

    #[test]
    fn body_errors_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.bin"), b"").unwrap();
        std::fs::write(dir.path().join("b.bin"), b"b").unwrap();
        let at = |text: &str| parse(text, "targets.txt", dir.path()).unwrap_err();
        // An empty file is a body too: a second one is still refused.
        let text = "\n\nPOST http://h/\nX-A: 1\n@a.bin\n\n\n\n@b.bin";
        let e = at(text);
        assert_eq!((e.line, e.problem.as_str()), (9, "a body after a blank line: a blank line ends a target, so remove it or start a new target with METHOD URL"));
        let e = at("\n\nPOST http://h/\nX-A: 1\n@a.bin\nX-B: 2\n\n\n@b.bin");
        assert_eq!(e.line, 9);
        let e = at("\n\nPOST http://h/\n@a.bin\nX-B: 2\n\n# c\n\n@ b.bin\n");
        assert_eq!(e.line, 9);
        let e = at("PUT http://h/\n@a.bin\n# c\n#\n#\n#\n#\n#\n@b.bin");
        assert_eq!(e.to_string(), "targets.txt:9: a second body (@b.bin) for one target: give each target at most one @file");
        let e = at("PUT http://h/\n#\n#\n#\n#\n@missing.bin");
        assert_eq!(e.line, 6);
        assert!(
            e.to_string().starts_with("targets.txt:6: body file 'missing.bin': No such file or directory (os error 2); looked for "),
            "{e}"
        );
        assert!(
            e.problem
                .contains(&dir.path().join("missing.bin").display().to_string()),
            "{e}"
        );
        let e = at("PUT http://h/\n@/nonexistent-targets-dir/x.bin");
        assert_eq!(e.to_string(), "targets.txt:2: body file '/nonexistent-targets-dir/x.bin': No such file or directory (os error 2)");
        let e = at("PUT http://h/\n@ ");
        assert_eq!(
            (e.line, e.problem.as_str()),
            (2, "'@' names no file: write @path/to/body")
        );
        let e = at("# c\n@a.bin\nPUT http://h/");
        assert_eq!(
            (e.line, e.problem.as_str()),
            (
                2,
                "a body before any request line: start each target with METHOD URL"
            )
        );
    }

    #[test]
    fn vegetas_json_format_is_refused_by_name() {
        let json = "# exported\n\n  {\"method\": \"GET\", \"url\": \"http://h/\"}\n";
        assert_eq!(
            refused(json, 3, ""),
            "targets.txt:3: the file looks like Vegeta's JSON format; only the http format is read (METHOD URL, headers, @body)"
        );
    }

    #[test]
    fn a_file_without_targets_is_refused_without_a_line() {
        for text in ["", "\n\n", "# only\n  # comments\r\n", "\u{feff}"] {
            let e = parse_text(text).unwrap_err();
            assert_eq!(e.line, 0);
            assert!(
                e.to_string()
                    .starts_with("targets.txt: no targets: write one per line as METHOD URL"),
                "{e}"
            );
        }
    }

    #[test]
    fn at_most_max_targets() {
        let mut text = "GET http://h/\n".repeat(MAX_TARGETS);
        assert_eq!(parse_text(&text).unwrap().len(), MAX_TARGETS);
        text.push_str("\n# one more\nPOST http://h/\n");
        let shown = refused(&text, MAX_TARGETS + 3, "");
        assert!(
            shown.starts_with(&format!(
                "targets.txt:{}: more than 100000 targets",
                MAX_TARGETS + 3
            )),
            "{shown}"
        );
    }

    #[test]
    fn read_names_the_file_as_given() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.txt");
        let e = read(&missing).unwrap_err();
        assert_eq!(e.line, 0);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: cannot read the targets file: No such file or directory (os error 2)",
                missing.display()
            )
        );
        let bad = dir.path().join("latin1.txt");
        std::fs::write(&bad, b"GET http://h/\nX-Name: caf\xe9\n").unwrap();
        let e = read(&bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: not UTF-8 text: save the targets file as UTF-8",
                bad.display()
            )
        );
    }
}
