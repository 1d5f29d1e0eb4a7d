//! Markers: what a response may carry that tells which configuration of the proxy
//! served it (a CORS header, a custom header, a rewritten path echoed in the body).
//!
//! A route change is only done for users when *responses* show it, and a proxy that
//! reloads serves old and new configurations side by side for a while. So the
//! engine notes, for every response, which of a few markers it carried, as a bit set
//! ([`MarkerScan::seen`]); whoever knows what each change should look like turns
//! those bits into propagation times. The scan is set up once per connection and
//! allocates nothing per response: header markers are a name comparison on the
//! parsed head, body markers a streaming substring match (Knuth-Morris-Pratt, so a
//! marker split across reads or chunks is still found).

/// Most markers one parser looks for; their presence fits in a `u8`, and four bits
/// keep a per-pattern table small (16 entries).
pub const MAX_MARKERS: usize = 4;

/// Longest body marker, so its match table stays small.
pub const MAX_BODY_MARKER: usize = 64;

/// Something a response may carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A response header of this name, whatever its value (case-insensitive).
    Header(String),
    /// These bytes anywhere in the decoded body.
    Body(Vec<u8>),
}

impl Marker {
    /// Checks a marker: a header name must be a token, a body marker non-empty and
    /// at most [`MAX_BODY_MARKER`] bytes.
    ///
    /// # Errors
    /// A message saying what is wrong with it.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Marker::Header(n) if n.is_empty() || !n.bytes().all(is_token) => {
                Err(format!("'{n}' is not a header name"))
            }
            Marker::Body(b) if b.is_empty() || b.len() > MAX_BODY_MARKER => Err(format!(
                "a body marker needs 1 to {MAX_BODY_MARKER} bytes, not {}",
                b.len()
            )),
            _ => Ok(()),
        }
    }
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// One body marker's streaming matcher.
#[derive(Clone, Debug)]
struct BodyMatch {
    bit: u8,
    needle: Box<[u8]>,
    /// KMP failure function: longest proper border of `needle[..=i]`.
    fail: Box<[u8]>,
    /// Bytes of `needle` matched so far in this body.
    at: usize,
}

impl BodyMatch {
    fn new(bit: u8, needle: &[u8]) -> Self {
        let mut fail = vec![0u8; needle.len()];
        let mut k = 0usize;
        for i in 1..needle.len() {
            while k > 0 && needle[i] != needle[k] {
                k = usize::from(fail[k - 1]);
            }
            if needle[i] == needle[k] {
                k += 1;
            }
            fail[i] = k as u8;
        }
        BodyMatch {
            bit,
            needle: needle.into(),
            fail: fail.into(),
            at: 0,
        }
    }

    /// Feeds body bytes; true once the needle was found.
    fn feed(&mut self, data: &[u8]) -> bool {
        let n = &self.needle;
        for &b in data {
            while self.at > 0 && b != n[self.at] {
                self.at = usize::from(self.fail[self.at - 1]);
            }
            if b == n[self.at] {
                self.at += 1;
                if self.at == n.len() {
                    self.at = 0;
                    return true;
                }
            }
        }
        false
    }
}

/// The markers a parser looks for, and which the response under way carried.
#[derive(Clone, Debug, Default)]
pub struct MarkerScan {
    /// Lower-case header names, with their bit.
    headers: Box<[(Box<str>, u8)]>,
    bodies: Box<[BodyMatch]>,
    /// Bits of the response under way.
    current: u8,
    /// Bits of the last complete response.
    seen: u8,
}

impl MarkerScan {
    /// A scan for `markers`, bit `i` for `markers[i]`; at most [`MAX_MARKERS`]
    /// (later ones are ignored: the caller checks the count and each marker).
    pub fn new(markers: &[Marker]) -> Self {
        let mut headers = Vec::new();
        let mut bodies = Vec::new();
        for (i, m) in markers.iter().take(MAX_MARKERS).enumerate() {
            let bit = 1u8 << i;
            match m {
                Marker::Header(n) => headers.push((n.to_ascii_lowercase().into_boxed_str(), bit)),
                Marker::Body(b) if !b.is_empty() && b.len() <= MAX_BODY_MARKER => {
                    bodies.push(BodyMatch::new(bit, b));
                }
                Marker::Body(_) => {}
            }
        }
        MarkerScan {
            headers: headers.into(),
            bodies: bodies.into(),
            current: 0,
            seen: 0,
        }
    }

    /// True when there is nothing to look for (the common case: one branch).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.bodies.is_empty()
    }

    /// A new response's head: notes its header markers and restarts body matching.
    pub(crate) fn head(&mut self, headers: &[httparse::Header<'_>]) {
        self.current = 0;
        for (name, bit) in self.headers.iter() {
            if headers.iter().any(|h| h.name.eq_ignore_ascii_case(name)) {
                self.current |= bit;
            }
        }
        for b in self.bodies.iter_mut() {
            b.at = 0;
        }
    }

    /// A new response whose fields come one by one (HTTP/2): nothing noted yet.
    pub fn start(&mut self) {
        self.current = 0;
        for b in self.bodies.iter_mut() {
            b.at = 0;
        }
    }

    /// One field name of the response under way (HTTP/2 names are lower case).
    #[inline]
    pub fn field(&mut self, name: &[u8]) {
        for (n, bit) in self.headers.iter() {
            if name.eq_ignore_ascii_case(n.as_bytes()) {
                self.current |= bit;
            }
        }
    }

    /// Decoded body bytes of the response under way.
    #[inline]
    pub fn body(&mut self, data: &[u8]) {
        for b in self.bodies.iter_mut() {
            if self.current & b.bit == 0 && b.feed(data) {
                self.current |= b.bit;
            }
        }
    }

    /// The response under way is complete.
    pub fn done(&mut self) {
        self.seen = self.current;
    }

    /// A fresh connection: nothing seen.
    pub(crate) fn reset(&mut self) {
        self.current = 0;
        self.seen = 0;
    }

    /// The markers of the last complete response, bit `i` for marker `i`.
    #[inline]
    pub fn seen(&self) -> u8 {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_hits(needle: &[u8], parts: &[&[u8]]) -> bool {
        let mut s = MarkerScan::new(&[Marker::Body(needle.to_vec())]);
        s.head(&[]);
        for p in parts {
            s.body(p);
        }
        s.done();
        s.seen() == 1
    }

    #[test]
    fn a_body_marker_is_found_across_reads_and_after_false_starts() {
        assert!(body_hits(b"/rewritten/", &[b"uri: /rewritten/x\n"]));
        assert!(body_hits(b"/rewritten/", &[b"uri: /rewr", b"itten/x"]));
        for i in 0..18 {
            let all = b"uri: /rewritten/x\n";
            assert!(
                body_hits(b"/rewritten/", &[&all[..i], &all[i..]]),
                "split at {i}"
            );
        }
        // A border of the needle: "abab" after "aba" must restart at "ab".
        assert!(body_hits(b"ababc", &[b"abababc"]));
        assert!(body_hits(b"aab", &[b"aaab"]));
        assert!(!body_hits(b"/rewritten/", &[b"uri: /rewritte/x\n"]));
        assert!(!body_hits(b"/rewritten/", &[b"uri: /", b"x/rewritten"]));
    }

    #[test]
    fn header_markers_are_case_insensitive_and_bits_follow_the_order() {
        let mut s = MarkerScan::new(&[
            Marker::Header("Access-Control-Allow-Origin".into()),
            Marker::Header("x-custom".into()),
            Marker::Body(b"/rewritten/".to_vec()),
        ]);
        let h = [httparse::Header {
            name: "X-Custom",
            value: b"1",
        }];
        s.head(&h);
        s.body(b"uri: /x");
        s.done();
        assert_eq!(s.seen(), 0b010);
        s.head(&[]);
        s.body(b"uri: /rewritten/x");
        assert_eq!(
            s.seen(),
            0b010,
            "the last complete response until this one ends"
        );
        s.done();
        assert_eq!(s.seen(), 0b100);
        s.reset();
        assert_eq!(s.seen(), 0);
        // Field by field, as HTTP/2 gives them.
        s.start();
        s.field(b"x-custom");
        s.field(b"x-other");
        s.body(b"/rewritten/");
        s.done();
        assert_eq!(s.seen(), 0b110);
        s.start();
        s.done();
        assert_eq!(s.seen(), 0);
    }

    #[test]
    fn bad_markers_are_named() {
        assert!(Marker::Header("x custom".into()).check().is_err());
        assert!(Marker::Header(String::new()).check().is_err());
        assert!(Marker::Body(Vec::new()).check().is_err());
        assert!(Marker::Body(vec![b'a'; 65]).check().is_err());
        assert!(Marker::Header("x-custom".into()).check().is_ok());
    }
}
