//! HPACK decoding (RFC 7541) for responses, without a header list: each field is
//! handed to a callback as two slices, borrowed from the header block, the table or
//! one of two scratch buffers the decoder keeps. What allocates is what HPACK needs:
//! an entry the server adds to the dynamic table.
//!
//! Written here because the crates at hand did not fit a load generator's loop:
//! `loona-hpack` builds its Huffman tables (nested hash maps) again for every
//! Huffman-coded string, which cost 75 µs of CPU per response against nginx
//! (docs/http2.md); `httlib-hpack` copies every field into new vectors; the `h2`
//! crate's decoder is private. Huffman decoding itself is `httlib-huffman`'s, whose
//! tables are static.

use std::collections::VecDeque;

/// Why a header block does not decode: a COMPRESSION_ERROR of the connection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HpackError {
    #[error("the block ends inside a field")]
    Truncated,
    #[error("an integer too large")]
    Integer,
    #[error("index {0} is in neither table")]
    Index(usize),
    #[error("a Huffman-coded string does not decode")]
    Huffman,
    #[error("a table size update after a field, or above the size allowed")]
    SizeUpdate,
}

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// An entry's size as the table counts it (RFC 7541 §4.1).
fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// The dynamic table: (name, value) entries, the newest first.
type Table = VecDeque<(Box<[u8]>, Box<[u8]>)>;

/// A response decoder: the server's dynamic table and the scratch buffers.
pub struct Decoder {
    table: Table,
    size: usize,
    max_size: usize,
    /// SETTINGS_HEADER_TABLE_SIZE as this side sent it (the default, 4,096).
    limit: usize,
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

/// Where a decoded string is.
#[derive(Clone, Copy)]
enum Str {
    /// A range of the block.
    Block(usize, usize),
    /// The scratch buffer it was Huffman-decoded into.
    Buf,
}

impl Decoder {
    /// A decoder whose table may hold `limit` bytes (RFC 7541 §4.2).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
            name_buf: Vec::with_capacity(64),
            value_buf: Vec::with_capacity(256),
        }
    }

    /// Decodes a whole header block, calling `f(name, value)` for each field in
    /// order.
    ///
    /// # Errors
    /// [`HpackError`]: the block is malformed; the table may then be part updated
    /// and the connection must end.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut at = 0;
        let mut fields = false;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                let (index, n) = integer(&block[at..], 7)?;
                at += n;
                let (name, value) = lookup(&self.table, index)?;
                f(name, value);
                fields = true;
            } else if b & 0xe0 == 0x20 {
                if fields {
                    return Err(HpackError::SizeUpdate);
                }
                let (size, n) = integer(&block[at..], 5)?;
                at += n;
                if size > self.limit {
                    return Err(HpackError::SizeUpdate);
                }
                self.max_size = size;
                self.evict(0);
            } else {
                // A literal: with incremental indexing (01, 6-bit index), without
                // indexing (0000) or never indexed (0001) (4-bit index).
                let indexing = b & 0x40 != 0;
                let (index, n) = integer(&block[at..], if indexing { 6 } else { 4 })?;
                at += n;
                let name = if index == 0 {
                    let (s, n) = string(block, at, &mut self.name_buf)?;
                    at += n;
                    Some(s)
                } else {
                    // Checked now, read below (after the value is decoded).
                    lookup(&self.table, index)?;
                    None
                };
                let (value, n) = string(block, at, &mut self.value_buf)?;
                at += n;
                let v: &[u8] = match value {
                    Str::Block(a, z) => &block[a..z],
                    Str::Buf => &self.value_buf,
                };
                let nm: &[u8] = match name {
                    Some(Str::Block(a, z)) => &block[a..z],
                    Some(Str::Buf) => &self.name_buf,
                    None => lookup(&self.table, index)?.0,
                };
                f(nm, v);
                fields = true;
                if indexing {
                    let entry = (Box::<[u8]>::from(nm), Box::<[u8]>::from(v));
                    self.insert(entry);
                }
            }
        }
        Ok(())
    }

    /// Adds an entry at the front, evicting from the back to make room; an entry
    /// larger than the table empties it and is not added (RFC 7541 §4.4).
    fn insert(&mut self, entry: (Box<[u8]>, Box<[u8]>)) {
        let size = entry_size(&entry.0, &entry.1);
        if size > self.max_size {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(entry);
    }

    /// Evicts until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((n, v)) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= entry_size(&n, &v);
        }
    }
}

/// The entry at `index` (1-based: the static table, then the dynamic one).
fn lookup(table: &Table, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match index {
        0 => Err(HpackError::Index(0)),
        1..=61 => {
            let (n, v) = STATIC[index - 1];
            Ok((n.as_bytes(), v.as_bytes()))
        }
        _ => table
            .get(index - 62)
            .map(|(n, v)| (&n[..], &v[..]))
            .ok_or(HpackError::Index(index)),
    }
}

/// An integer with an `prefix`-bit prefix (RFC 7541 §5.1) at the start of `b`, and
/// the bytes it took.
fn integer(b: &[u8], prefix: u32) -> Result<(usize, usize), HpackError> {
    let max = (1usize << prefix) - 1;
    let first = usize::from(*b.first().ok_or(HpackError::Truncated)?) & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut v = max;
    let mut shift = 0;
    for (i, &byte) in b.iter().enumerate().skip(1) {
        if shift > 21 {
            return Err(HpackError::Integer);
        }
        v += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    Err(HpackError::Truncated)
}

/// A string literal (RFC 7541 §5.2) at `at`: where it is, and the bytes it took.
/// A Huffman-coded one is decoded into `buf`.
fn string(block: &[u8], at: usize, buf: &mut Vec<u8>) -> Result<(Str, usize), HpackError> {
    let b = block.get(at..).ok_or(HpackError::Truncated)?;
    let huffman = b.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
    let (len, n) = integer(b, 7)?;
    let end = n.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = b.get(n..end).ok_or(HpackError::Truncated)?;
    if !huffman {
        return Ok((Str::Block(at + n, at + end), end));
    }
    buf.clear();
    httlib_huffman::decode(raw, buf, httlib_huffman::DecoderSpeed::FiveBits)
        .map_err(|_| HpackError::Huffman)?;
    Ok((Str::Buf, end))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn fields(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut v = Vec::new();
        d.decode(block, |n, val| {
            v.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(val).into_owned(),
            ))
        })?;
        Ok(v)
    }

    /// Another implementation's decoding of the same block.
    pub(crate) fn theirs(d: &mut loona_hpack::Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut v = Vec::new();
        d.decode_with_cb(block, |n, val| {
            v.push((
                String::from_utf8_lossy(&n).into_owned(),
                String::from_utf8_lossy(&val).into_owned(),
            ))
        })
        .unwrap();
        v
    }

    #[test]
    fn the_static_table_agrees_with_another_implementation() {
        let mut other = loona_hpack::Decoder::new();
        for i in 1..=61u8 {
            let block = [0x80 | i];
            assert_eq!(
                fields(&mut Decoder::new(4096), &block).unwrap(),
                theirs(&mut other, &block),
                "index {i}"
            );
        }
        assert_eq!(
            fields(&mut Decoder::new(4096), &[0x80 | 62]),
            Err(HpackError::Index(62))
        );
        assert_eq!(
            fields(&mut Decoder::new(4096), &[0x80]),
            Err(HpackError::Index(0))
        );
    }

    #[test]
    fn huffman_strings_and_the_dynamic_table_with_eviction() {
        // A literal with incremental indexing, name and value Huffman-coded.
        let mut block = vec![0x40];
        for s in [&b"x-backend"[..], b"backend-number-one"] {
            let mut h = Vec::new();
            httlib_huffman::encode(s, &mut h).unwrap();
            crate::request::integer(&mut block, 0x80, 7, h.len());
            block.extend_from_slice(&h);
        }
        // Then the entry by its index (62), then a literal with an indexed name.
        block.push(0x80 | 62);
        block.extend_from_slice(&[0x0f, 0x12, 3, b'1', b'2', b'3']); // content-length (28): 0x0f 0x0d
        let mut d = Decoder::new(4096);
        let got = fields(&mut d, &block);
        // 0x0f 0x12 is index 15 + 18 = 33 (date): a 4-bit prefix continued.
        let want = vec![
            ("x-backend".to_string(), "backend-number-one".to_string()),
            ("x-backend".to_string(), "backend-number-one".to_string()),
            ("date".to_string(), "123".to_string()),
        ];
        assert_eq!(got.unwrap(), want);
        assert_eq!(d.size, 9 + 18 + 32);
        // A table of 100 bytes keeps one such entry: the second evicts the first.
        let mut small = Decoder::new(100);
        let add = |name: &str| {
            let mut b = vec![0x40];
            crate::request::integer(&mut b, 0, 7, name.len());
            b.extend_from_slice(name.as_bytes());
            crate::request::integer(&mut b, 0, 7, 30);
            b.extend_from_slice(&[b'v'; 30]);
            b
        };
        fields(&mut small, &add("first")).unwrap();
        fields(&mut small, &add("second")).unwrap();
        assert_eq!(small.table.len(), 1);
        assert_eq!(fields(&mut small, &[0x80 | 62]).unwrap()[0].0, "second");
        assert_eq!(fields(&mut small, &[0x80 | 63]), Err(HpackError::Index(63)));
        // A size update to 0 empties it; one above the limit is an error; one after a
        // field too.
        fields(&mut small, &[0x20]).unwrap();
        assert!(small.table.is_empty());
        assert_eq!(
            fields(&mut small, &[0x3f, 0x62]),
            Err(HpackError::SizeUpdate)
        );
        assert_eq!(
            fields(&mut small, &[0x82, 0x20]),
            Err(HpackError::SizeUpdate)
        );
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(
            fields(&mut d, &[0x40, 0x05, b'a']),
            Err(HpackError::Truncated)
        );
        assert_eq!(fields(&mut d, &[0xff]), Err(HpackError::Truncated));
        assert_eq!(
            fields(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(HpackError::Integer)
        );
        // Huffman padding of more than 7 bits (a whole 0xff byte) is invalid.
        assert_eq!(
            fields(&mut d, &[0x00, 0x81, 0xff, 0x00]),
            Err(HpackError::Huffman)
        );
    }

    proptest::proptest! {
        /// Blocks another encoder writes (with its dynamic table) decode to the
        /// same fields, block after block on one connection.
        #[test]
        fn blocks_of_another_encoder_decode_the_same(
            lists in proptest::collection::vec(
                proptest::collection::vec(("[a-z-]{1,12}", "[ -~]{0,40}"), 1..8), 1..6)
        ) {
            let mut enc = loona_hpack::Encoder::new();
            let mut mine = Decoder::new(4096);
            let mut other = loona_hpack::Decoder::new();
            for list in lists {
                let block = enc.encode(list.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
                let want = theirs(&mut other, &block);
                proptest::prop_assert_eq!(fields(&mut mine, &block).unwrap(), want);
            }
        }

        /// Bytes of any kind are an error or fields, never a panic.
        #[test]
        fn arbitrary_blocks_never_panic(block in proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..200)) {
            let _ = fields(&mut Decoder::new(4096), &block);
        }
    }
}
