//! The shell every HTML page of ingressbench is poured into: the report page and the
//! comparison page share one head, one style sheet (from [`crate::theme`]), the same
//! header, warning banner and footer, so the two look alike and a fix to one (print
//! rules, the dark scheme) is a fix to both. Pages are self-contained: inline CSS,
//! no script, nothing loaded from anywhere.

use crate::markup::escape;
use crate::theme::CSS;
use std::fmt::Write as _;

/// A page's parts, in page order. Every part but `title` is HTML, already escaped
/// by whoever built it; empty parts are left out.
#[derive(Clone, Debug, Default)]
pub struct Page<'a> {
    /// Text: the `<title>` and the `<h1>`.
    pub title: &'a str,
    /// Under the `<h1>`, inside `<header>`: what the page is drawn from.
    pub header: &'a str,
    /// The warning banner (see [`banner`]).
    pub banner: &'a str,
    pub body: &'a str,
    /// Inside `<footer>`.
    pub footer: &'a str,
}

/// The whole page.
pub fn render(p: &Page<'_>) -> String {
    let mut h = String::new();
    let title = escape(p.title);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"generator\" content=\"ingressbench {}\">\n<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
    );
    let _ = writeln!(h, "<header>\n<h1>{title}</h1>");
    h.push_str(p.header);
    h.push_str("</header>\n");
    h.push_str(p.banner);
    h.push_str(p.body);
    if !p.footer.is_empty() {
        let _ = writeln!(h, "<footer>{}</footer>", p.footer);
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// A warning banner: `title` (text) over a list of `items` (HTML); `id` names the
/// page's main banner. Nothing when there is nothing to warn of.
pub fn banner(id: Option<&str>, title: &str, items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut h = String::new();
    let id = id.map(|i| format!(" id=\"{i}\"")).unwrap_or_default();
    let _ = write!(
        h,
        "<div class=\"banner\"{id} role=\"alert\">\n<strong>{}</strong>\n<ul>\n",
        escape(title)
    );
    for i in items {
        let _ = writeln!(h, "<li>{i}</li>");
    }
    h.push_str("</ul>\n</div>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shell_for_every_page() {
        let b = banner(Some("banner"), "Look:", &["<b>x</b>: y".to_string()]);
        let h = render(&Page {
            title: "a<b",
            header: "<p>h</p>\n",
            banner: &b,
            body: "<p>body</p>\n",
            footer: "",
        });
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<title>a&lt;b</title>"));
        assert!(h.contains("<header>\n<h1>a&lt;b</h1>\n<p>h</p>\n</header>\n<div class=\"banner\" id=\"banner\" role=\"alert\">\n<strong>Look:</strong>\n<ul>\n<li><b>x</b>: y</li>\n</ul>\n</div>\n<p>body</p>\n</body>"));
        assert!(h.contains(CSS));
        assert!(!h.contains("<footer>"));
        assert!(banner(None, "Look:", &[]).is_empty());
    }
}
