//! Values read out of a run's JSON (`result.json`, `search.json`): a count or a number
//! where the test needs one, with a panic that names what was there instead.

use serde_json::Value;

/// `v` as a count.
///
/// # Panics
/// When it is not an unsigned integer.
pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `v` as a number.
///
/// # Panics
/// When it is not a number.
pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The count at the JSON pointer `ptr` of `v` (`/requests/completed`).
///
/// # Panics
/// When there is none, or it is not an unsigned integer.
pub fn u_at(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} is not a count in {v}"))
}

/// The number at the JSON pointer `ptr` of `v` (`/latency_ms/corrected/p99`).
///
/// # Panics
/// When there is none, or it is not a number.
pub fn f_at(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} is not a number in {v}"))
}
