//! C's number parsing as Slurm's parsers use it (`strtol`), for the places where Slurm's
//! behaviour depends on how C reads a number: leading blanks, a sign, the leading digits, and
//! whatever follows left for the caller.

/// C's `strtol(s, &end, 10)`: skips leading blanks, takes a sign and the leading decimal
/// digits, saturated at `LONG_MIN`/`LONG_MAX` on overflow. Returns the value and the rest of
/// `s` after the digits; with no digits, `(0, s)` (C's `end == s`).
pub fn strtol(s: &str) -> (i64, &str) {
    let t = s.trim_start();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = body.find(|c: char| !c.is_ascii_digit()).unwrap_or(body.len());
    if end == 0 {
        return (0, s);
    }
    let v = match body[..end].parse::<i64>() {
        Ok(v) if neg => -v,
        Ok(v) => v,
        Err(_) if neg => i64::MIN,
        Err(_) => i64::MAX,
    };
    (v, &body[end..])
}

#[cfg(test)]
mod tests {
    use super::strtol;

    #[test]
    fn reads_as_c_does() {
        assert_eq!(strtol("  42abc"), (42, "abc"));
        assert_eq!(strtol("-7_1"), (-7, "_1"));
        assert_eq!(strtol("+3"), (3, ""));
        assert_eq!(strtol("x1"), (0, "x1"));
        assert_eq!(strtol("-"), (0, "-"));
        assert_eq!(strtol("99999999999999999999]"), (i64::MAX, "]"));
        assert_eq!(strtol("-99999999999999999999"), (i64::MIN, ""));
    }
}
