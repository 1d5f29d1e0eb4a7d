//! The stored histogram format, writer and reader in one place.
//!
//! The engine records into these histograms and the reports decode them from result
//! files; both sides must agree on the bounds, the precision and HdrHistogram's V2
//! deflate encoding, so neither owns the format: it lives here, below both.

use crate::Percentiles;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Highest latency recorded: one hour, in µs.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Highest lag: one hour, in ns.
pub const MAX_LAG_NS: u64 = 3_600_000_000_000;

/// A latency histogram in µs, 1 µs to 1 hour, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static bounds are valid")
}

/// A lag histogram in ns, 1 ns to 1 hour, 3 significant digits.
pub fn lag_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LAG_NS, 3).expect("static bounds are valid")
}

/// Serializes a histogram in HdrHistogram's V2 deflate format.
pub fn serialize_v2(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = V2DeflateSerializer::new().serialize(h, &mut out);
    out
}

/// The V2 deflate encoding as base64, as result documents store it.
pub fn encode_base64(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(serialize_v2(h))
}

/// Decodes a base64 V2 histogram as stored in a result document.
///
/// # Errors
/// A message when the text is not a base64 HdrHistogram.
pub fn decode_base64(b64: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    decode_v2(&bytes)
}

/// Decodes V2 (plain or deflate) histogram bytes.
///
/// # Errors
/// A message when the bytes are not an HdrHistogram.
pub fn decode_v2(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("not an HdrHistogram: {e:?}"))
}

/// Percentiles of a histogram whose values are `unit_ns` nanoseconds each, in ms.
///
/// An empty histogram has no percentiles: every field is `None` and `count` is 0.
pub fn percentiles(h: &Histogram<u64>, unit_ns: f64) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let ms = |v: f64| Some(v * unit_ns / 1e6);
    let q = |p: f64| ms(h.value_at_quantile(p) as f64);
    Percentiles {
        max: ms(h.max() as f64),
        mean: ms(h.mean()),
        stdev: ms(h.stdev()),
        count: h.len(),
        ..Percentiles::from_quantiles(|i| q(Percentiles::QUANTILES[i].0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip_keeps_every_value() {
        let mut h = latency_histogram();
        for v in [1u64, 17, 950_000, 3_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_base64(&encode_base64(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
        assert_eq!(back, h);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_base64("not base64!").is_err());
        assert!(decode_v2(b"\x00\x01\x02").is_err());
    }

    #[test]
    fn percentiles_scale_to_ms() {
        let mut h = latency_histogram();
        h.record(2000).unwrap(); // 2 ms in µs
        let p = percentiles(&h, 1000.0);
        assert!((p.p50.unwrap() - 2.0).abs() < 0.01, "{:?}", p.p50);
        assert_eq!(p.count, 1);
    }

    #[test]
    fn an_empty_histogram_has_no_percentiles() {
        let p = percentiles(&latency_histogram(), 1000.0);
        assert!(p.is_empty());
        assert_eq!(p.values(), [None; 8]);
        assert_eq!((p.mean, p.stdev, p.count), (None, None, 0));
    }
}
