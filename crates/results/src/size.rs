//! Sizes as users type them on the command line and in scenario files: `100`,
//! `100B`, `4KiB`, `1MiB`, `2KB`, `1MB`.

/// Parses `100`, `100B`, `4KiB`, `1MiB`, `2KB`, `1MB`: a size in bytes.
///
/// # Errors
/// What is wrong, to follow the text as given (`'4XB' has an unknown unit ...`).
pub fn parse(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| "is not a size: give bytes, e.g. 100B or 4KiB".to_string())?;
    let mult = match unit.trim() {
        "" | "B" | "b" => 1,
        "KB" | "kB" | "K" | "k" => 1000,
        "KiB" => 1024,
        "MB" | "M" => 1_000_000,
        "MiB" => 1 << 20,
        u => {
            return Err(format!(
                "has an unknown unit '{u}': use B, KB, KiB, MB or MiB"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| "is too large".to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_in_each_unit() {
        assert_eq!(super::parse("100"), Ok(100));
        assert_eq!(super::parse("4KiB"), Ok(4096));
        assert_eq!(super::parse("2KB"), Ok(2000));
        assert_eq!(super::parse("1MiB"), Ok(1 << 20));
        assert!(super::parse("4XB")
            .unwrap_err()
            .contains("unknown unit 'XB'"));
        assert!(super::parse("big").unwrap_err().contains("is not a size"));
    }
}
