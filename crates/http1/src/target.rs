//! The request side of the wire for the engine: the target URL and the one request
//! every connection sends, encoded once before the run (the hot path then only
//! writes bytes).

use std::fmt::Write as _;

/// The `User-Agent` sent unless the caller gives one.
pub const USER_AGENT: &str = concat!("ingressbench/", env!("CARGO_PKG_VERSION"));

/// A parsed `http://` or `https://` target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    /// Host as written (without brackets for IPv6).
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Target {
    /// Parses a URL of the form `scheme://host[:port][/path][?query]`.
    ///
    /// # Errors
    /// A message saying what is wrong when the URL is not an http(s) URL.
    pub fn parse(url: &str) -> Result<Target, String> {
        let bad = |why: &str| format!("url '{url}': {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("not a URL: expected http://host[:port]/path or https://..."))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            other => {
                return Err(bad(&format!(
                    "scheme '{other}' is not supported: use http or https"
                )))
            }
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let path = path.split('#').next().unwrap_or("/").to_string();
        if authority.contains('@') {
            return Err(bad(
                "user names in URLs are not supported: use -H 'Authorization: ...'",
            ));
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' in host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p
                    .parse()
                    .map_err(|_| bad("port is not a number from 1 to 65535"))?,
                None if after.is_empty() => default_port,
                None => return Err(bad("unexpected text after ']'")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse()
                        .map_err(|_| bad("port is not a number from 1 to 65535"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace()) {
            return Err(bad("the host is empty or contains spaces"));
        }
        if port == 0 {
            return Err(bad("port 0 is not a port you can connect to"));
        }
        if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad(
                "the path contains spaces or control characters: percent-encode them",
            ));
        }
        Ok(Target {
            tls,
            host,
            port,
            path,
        })
    }

    /// The `Host` header value: the port is left out when it is the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Encodes the one request every connection sends, once, before the run.
///
/// `headers` are `Name: value` strings; a `Host` among them replaces the default.
/// With `close`, the request asks the server to close the connection after answering
/// (used when every request opens its own connection, so TIME_WAIT lands on the
/// server as it does for real clients).
///
/// # Errors
/// A message naming a header that is not of the form `Name: value`.
pub fn encode_request(
    method: &str,
    target: &Target,
    headers: &[String],
    body: &[u8],
    close: bool,
) -> Result<Vec<u8>, String> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "method '{method}' is not an HTTP method (e.g. GET, POST)"
        ));
    }
    let mut head = String::with_capacity(256);
    let _ = write!(
        head,
        "{} {} HTTP/1.1\r\n",
        method.to_ascii_uppercase(),
        target.path
    );
    let mut has_host = false;
    let mut has_ua = false;
    let mut has_len = false;
    let mut lines = Vec::new();
    for h in headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("header '{h}' is not of the form 'Name: value'"))?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("header '{h}' has an invalid name"));
        }
        if value.contains(['\r', '\n']) {
            return Err(format!("header '{h}' contains a line break"));
        }
        match name.to_ascii_lowercase().as_str() {
            "host" => has_host = true,
            "user-agent" => has_ua = true,
            "content-length" => has_len = true,
            _ => {}
        }
        lines.push(format!("{name}: {}\r\n", value.trim()));
    }
    if !has_host {
        let _ = write!(head, "Host: {}\r\n", target.host_header());
    }
    if !has_ua {
        let _ = write!(head, "User-Agent: {USER_AGENT}\r\n");
    }
    for l in lines {
        head.push_str(&l);
    }
    if !body.is_empty() && !has_len {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let t = Target::parse("https://127.0.0.1:8443/a?b=1").unwrap();
        assert_eq!(
            t,
            Target {
                tls: true,
                host: "127.0.0.1".into(),
                port: 8443,
                path: "/a?b=1".into()
            }
        );
        assert_eq!(t.host_header(), "127.0.0.1:8443");
        let t = Target::parse("http://[::1]/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 80));
        assert_eq!(t.host_header(), "[::1]");
        assert_eq!(Target::parse("http://h?q").unwrap().path, "/?q");
        assert_eq!(Target::parse("https://h").unwrap().port, 443);
        for bad in [
            "not a url",
            "ftp://x/",
            "http://",
            "http://h:70000/",
            "http://h:0/",
            "http://u@h/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_is_encoded_once_with_host_and_length() {
        let t = Target::parse("http://127.0.0.1:8080/p").unwrap();
        let r = encode_request("post", &t, &["X-A: 1".into()], b"body", false).unwrap();
        let s = String::from_utf8(r).unwrap();
        assert!(
            s.starts_with("POST /p HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
            "{s}"
        );
        assert!(s.contains("X-A: 1\r\n"));
        assert!(s.ends_with("Content-Length: 4\r\n\r\nbody"));
        let r = encode_request("GET", &t, &["Host: example.com".into()], b"", true).unwrap();
        let s = String::from_utf8(r).unwrap();
        assert!(s.contains("Host: example.com\r\n") && !s.contains("127.0.0.1"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(encode_request("GET", &t, &["nocolon".into()], b"", false).is_err());
        assert!(encode_request("G T", &t, &[], b"", false).is_err());
    }
}
