//! Why a load's settings were refused, named the way each front end names them.
//!
//! The same checks serve `ingressbench load` (flags such as `-R/--rate`) and scenario
//! files (keys such as `load.rate`): the engine says *which setting* is wrong and
//! why, and each front end renders the setting's name its own way, instead of one
//! patching the other's text.

/// A load setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Url,
    Request,
    Duration,
    Timeout,
    ConnectTimeout,
    SendWindow,
    Rate,
    Connections,
    Threads,
    Schedule,
    Tls,
    BackendHeader,
    Sample,
    Header,
    Insecure,
    CaCert,
    TlsVersion,
    TlsResume,
    /// Response markers (set by the scenario runner, not by a user).
    Markers,
    /// The request mix (`--targets FILE`, `requests:`): its messages name the file
    /// and line or the entry.
    Targets,
    /// `--http2` (a scenario's `protocol: h2`).
    Http2,
    /// `--h2c`.
    H2c,
    Streams,
    Grpc,
    H2Window,
}

impl Setting {
    /// The flag of `ingressbench load` (empty: the message names it already).
    pub fn flag(self) -> &'static str {
        match self {
            Setting::Url
            | Setting::Request
            | Setting::Tls
            | Setting::Markers
            | Setting::Targets => "",
            Setting::Duration => "--duration",
            Setting::Timeout => "--timeout",
            Setting::ConnectTimeout => "--connect-timeout",
            Setting::SendWindow => "--send-window",
            Setting::Rate => "-R/--rate",
            Setting::Connections => "-c/--connections",
            Setting::Threads => "-t/--threads",
            Setting::Schedule => "--schedule",
            Setting::BackendHeader => "--backend-header",
            Setting::Sample => "--sample",
            Setting::Header => "-H/--header",
            Setting::Insecure => "-k/--insecure",
            Setting::CaCert => "--cacert",
            Setting::TlsVersion => "--tls-version",
            Setting::TlsResume => "--tls-resume",
            Setting::Http2 => "--http2",
            Setting::H2c => "--h2c",
            Setting::Streams => "--streams",
            Setting::H2Window => "--h2-window",
            Setting::Grpc => "--grpc",
        }
    }

    /// The key of a scenario file (empty: the message names it already). Settings a
    /// scenario cannot set (the runner fills them) keep their flag.
    pub fn key(self) -> &'static str {
        match self {
            Setting::Url
            | Setting::Request
            | Setting::Tls
            | Setting::Markers
            | Setting::Targets => "",
            Setting::Duration => "load.duration",
            Setting::Timeout => "load.timeout",
            Setting::ConnectTimeout => "load.connect_timeout",
            Setting::SendWindow => "load.send_window",
            Setting::Rate => "load.rate",
            Setting::Connections => "load.connections",
            Setting::Threads => "load.threads",
            Setting::Schedule => "load.schedule",
            Setting::BackendHeader => "load.backend_header",
            Setting::Sample => "load.sample",
            Setting::TlsVersion => "tls.version",
            Setting::Http2 | Setting::H2c => "protocol",
            Setting::Streams => "load.streams",
            Setting::H2Window => "load.h2_window",
            Setting::Grpc => "protocol",
            Setting::Header | Setting::Insecure | Setting::CaCert | Setting::TlsResume => {
                self.flag()
            }
        }
    }
}

/// A refused setting. `Display` renders it with CLI flags; [`SpecError::scenario`]
/// with scenario keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub setting: Setting,
    /// The value given, as shown after the name (e.g. `0`, `'x'`, `(5)`).
    pub value: Option<String>,
    /// What is wrong, starting with its separator (`" must be ..."`, `": give ..."`).
    pub problem: String,
    /// Another setting the problem names, shown as `{other}` in `problem`.
    pub other: Option<(Setting, String)>,
    /// A CLI example of a good value (`-d 30s`), shown only with flags.
    pub example: Option<&'static str>,
}

impl SpecError {
    /// A problem of `setting` with no value shown.
    pub fn new(setting: Setting, problem: impl Into<String>) -> Self {
        SpecError {
            setting,
            value: None,
            problem: problem.into(),
            other: None,
            example: None,
        }
    }

    /// The same, showing the value given.
    pub fn value(mut self, v: impl Into<String>) -> Self {
        self.value = Some(v.into());
        self
    }

    /// The same, with a CLI example.
    pub fn example(mut self, e: &'static str) -> Self {
        self.example = Some(e);
        self
    }

    /// The same, naming another setting (and its value) where `problem` says `{other}`.
    pub fn other(mut self, s: Setting, value: impl Into<String>) -> Self {
        self.other = Some((s, value.into()));
        self
    }

    fn render(&self, name: fn(Setting) -> &'static str, example: bool) -> String {
        let mut out = name(self.setting).to_string();
        if let Some(v) = &self.value {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(v);
        }
        let mut problem = self.problem.clone();
        if let Some((s, v)) = &self.other {
            problem = problem.replace("{other}", &format!("{} ({v})", name(*s)));
        }
        if out.is_empty() {
            problem = problem.trim_start_matches([' ', ':']).to_string();
        }
        out.push_str(&problem);
        if let (true, Some(e)) = (example, self.example) {
            out.push_str(&format!(" (e.g. {e})"));
        }
        out
    }

    /// The message with scenario keys (`load.rate 0 is not a rate: ...`).
    pub fn scenario(&self) -> String {
        self.render(Setting::key, false)
    }

    /// The message with the names `name` gives, without a CLI example: for a front
    /// end whose names depend on where a value came from (a scenario's `quick`
    /// section replaces some `load` keys).
    pub fn named(&self, name: fn(Setting) -> &'static str) -> String {
        self.render(name, false)
    }
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(Setting::flag, true))
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_problem_two_names() {
        let e = SpecError::new(
            Setting::Rate,
            " is not a rate: give requests per second above 0",
        )
        .value("0")
        .example("-R 1000");
        assert_eq!(
            e.to_string(),
            "-R/--rate 0 is not a rate: give requests per second above 0 (e.g. -R 1000)"
        );
        assert_eq!(
            e.scenario(),
            "load.rate 0 is not a rate: give requests per second above 0"
        );
        let e = SpecError::new(
            Setting::Connections,
            " must be at least {other}: each thread needs a connection",
        )
        .value("(1)")
        .other(Setting::Threads, "2");
        assert_eq!(
            e.to_string(),
            "-c/--connections (1) must be at least -t/--threads (2): each thread needs a connection"
        );
        assert!(e
            .scenario()
            .starts_with("load.connections (1) must be at least load.threads (2)"));
        let e = SpecError::new(Setting::Url, ": bad URL 'x'");
        assert_eq!(e.to_string(), "bad URL 'x'");
    }
}
