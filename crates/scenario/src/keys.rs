//! Where a refused key is in the file: a refusal ([`Bad`]) names its key, and is
//! placed on that key's line (or its nearest parent's) when it is reported.

use crate::*;

/// A refused value: the key it is at (`load.timeout`), to find its line, and why.
#[derive(Debug)]
pub(crate) struct Bad {
    key: &'static str,
    /// Another key the message names, placed when `key` is not in the file.
    other: Option<&'static str>,
    /// Text on the line the error is about, at or after the key's line (an entry
    /// of a list: `id: mine`).
    near: Option<String>,
    pub(crate) msg: String,
}

impl Bad {
    pub(crate) fn new(key: &'static str, msg: impl Into<String>) -> Self {
        Bad {
            key,
            other: None,
            near: None,
            msg: msg.into(),
        }
    }

    /// The error placed at the first line from the key's on that holds `text` (an
    /// entry of a list under the key).
    pub(crate) fn near(mut self, text: impl Into<String>) -> Self {
        self.near = Some(text.into());
        self
    }

    /// The error naming `file` and, when the key (or a section of it) is written in
    /// `text`, its line.
    pub(crate) fn located(self, text: &str, file: &str) -> ScenarioError {
        match self.line(text) {
            Some(line) => ScenarioError::Invalid {
                file: file.to_string(),
                line,
                msg: self.msg,
            },
            None => ScenarioError::Other {
                file: file.to_string(),
                msg: self.msg,
            },
        }
    }

    /// The line of the key, or of the other key the message names when the first is
    /// not written (a default), or of the nearest section present.
    pub(crate) fn line(&self, text: &str) -> Option<usize> {
        let exact = |k: &str| key_line(text, k).filter(|(_, exact)| *exact);
        let line = exact(self.key)
            .or_else(|| self.other.and_then(exact))
            .or_else(|| key_line(text, self.key))
            .map(|(line, _)| line)?;
        let near = self.near.as_deref().and_then(|n| {
            text.lines()
                .enumerate()
                .skip(line - 1)
                .find(|(_, l)| {
                    // The entry's own line: `- id: x`, `{id: x, ...}` or `x: ...`,
                    // not one whose value only begins the same.
                    let l = l
                        .trim_start()
                        .trim_start_matches("- ")
                        .trim_start_matches('{');
                    l.strip_prefix(n).is_some_and(|rest| {
                        rest.is_empty() || rest.starts_with([',', '}', ' ', ':', '#'])
                    })
                })
                .map(|(i, _)| i + 1)
        });
        Some(near.unwrap_or(line))
    }

    /// The engine's verdict on a setting, with the key names `name` gives. When the
    /// setting is not in the file (a default), the line is that of the other
    /// setting it names, if any, or of its section.
    pub(crate) fn spec(e: &engine::spec::SpecError, name: fn(Setting) -> &'static str) -> Self {
        Bad {
            key: name(e.setting),
            other: e.other.as_ref().map(|(o, _)| name(*o)),
            near: None,
            // The mix's messages name the entry themselves (`requests entry 2: ...`).
            msg: if e.setting == Setting::Targets {
                e.scenario()
            } else {
                e.named(name)
            },
        }
    }
}

use engine::spec::Setting;

/// The scenario key of an engine setting (the URL, the request and TLS are the
/// runner's, so they are placed at `load`).
pub(crate) fn spec_key(s: Setting) -> &'static str {
    if s == Setting::Targets {
        return "requests";
    }
    match s.key() {
        "" => "load",
        k => k,
    }
}

/// The key of a setting in the `--quick` form: `quick` replaces these three.
pub(crate) fn quick_key(s: Setting) -> &'static str {
    match s {
        Setting::Rate => "quick.rate",
        Setting::Connections => "quick.connections",
        Setting::Duration => "quick.duration",
        s => spec_key(s),
    }
}

/// The line (1-based) of a dotted key such as `load.timeout` in block-style YAML,
/// and `true`; when the key itself is absent (a default) or written in flow style,
/// the line of its nearest parent that is present, and `false`.
pub(crate) fn key_line(text: &str, path: &str) -> Option<(usize, bool)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = None;
    let mut from = 0;
    // Indentation of the mapping the key is looked for in (None: the top level).
    let mut parent: Option<usize> = None;
    for seg in path.split('.') {
        let mut level = None;
        let mut hit = None;
        for (i, l) in lines.iter().enumerate().skip(from) {
            let body = l.trim_start();
            if body.is_empty() || body.starts_with('#') || body.starts_with("---") {
                continue;
            }
            let indent = l.len() - body.len();
            if parent.is_some_and(|p| indent <= p) {
                break;
            }
            if indent == *level.get_or_insert(indent) && is_key(body, seg) {
                hit = Some((i, indent));
                break;
            }
        }
        let Some((i, indent)) = hit else {
            return found.map(|l| (l, false));
        };
        found = Some(i + 1);
        from = i + 1;
        parent = Some(indent);
    }
    found.map(|l| (l, true))
}

/// Whether a line's text (indentation removed) is `key:` (the key possibly quoted).
pub(crate) fn is_key(body: &str, key: &str) -> bool {
    let rest = [("", ""), ("\"", "\""), ("'", "'")]
        .iter()
        .find_map(|(q0, q1)| body.strip_prefix(q0)?.strip_prefix(key)?.strip_prefix(q1));
    rest.is_some_and(|r| {
        let r = r.trim_start();
        r.strip_prefix(':')
            .is_some_and(|v| v.is_empty() || v.starts_with([' ', '\t']))
    })
}
