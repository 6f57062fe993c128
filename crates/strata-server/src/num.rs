//! Number parsing and formatting with Redis's exact rules, shared by the protocol parser (length
//! prefixes) and the commands (INCR, INCRBYFLOAT, GETRANGE, ...). Redis is strict: no sign `+`,
//! no leading zeros, no surrounding spaces; a value that Redis would reject must be rejected here
//! too, or clients would see a different error than they expect.

/// Parses a decimal i64 the way Redis's `string2ll` does: `0`, or an optional `-` followed by a
/// non-zero digit and more digits, no overflow. Anything else is `None`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    // 20 bytes hold "-9223372036854775808"; longer input cannot be a valid i64.
    const DIGITS_MAX: usize = 20;
    if s.is_empty() || s.len() > DIGITS_MAX {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    // Accumulate as a negative number so that i64::MIN parses without overflow.
    let mut acc: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        acc = acc.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// Parses a float the way Redis's `string2ld` does for INCRBYFLOAT: no surrounding spaces, no
/// NaN. Infinity parses (Redis then refuses to store a non-finite result).
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let v: f64 = text.parse().ok()?;
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Formats a finite float the way INCRBYFLOAT stores it: plain decimal (never exponent
/// notation), shortest digits that read back to the same value, no trailing `.0`.
pub fn format_f64(v: f64) -> String {
    // Rust's `Display` for f64 is the shortest round-trip form and never uses an exponent,
    // matching Redis's "human friendly" long-double output without its binary-to-decimal noise.
    let s = format!("{v}");
    if s == "-0" {
        "0".to_string()
    } else {
        s
    }
}

/// Formats a double as Redis 7.0's replies do (`addReplyDouble`: C's `%.17g`): 17 significant
/// digits, trailing zeros dropped, exponent form below 1e-4 and from 1e17 (`1e+20`), `inf`,
/// `-inf`.
pub fn format_g17(v: f64) -> String {
    format_g(v, 17)
}

/// C's `%.<precision>g` (precision 1 to 17): Lua's `cjson` writes numbers with 14.
pub fn format_g(v: f64, precision: usize) -> String {
    let precision = precision.clamp(1, 17);
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // `{:.N$e}`: one digit, the point, N digits, `e`, the exponent: N + 1 significant digits,
    // rounded as printf rounds them.
    let sci = format!("{:.*e}", precision - 1, v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if v < 0.0 { "-" } else { "" };
    if !(-4..precision as i32).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let rest = rest.trim_end_matches('0');
        let point = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}{rest}e{esign}{:02}", exp.abs());
    }
    let text = if exp >= 0 {
        let (int, frac) = digits.split_at(exp as usize + 1);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        }
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("0.{zeros}{}", digits.trim_end_matches('0'))
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values C's `printf("%.14g")` prints for these doubles (taken from Python's `%` formatting,
    /// which formats doubles as C does; a shell's printf reads them as long doubles).
    #[test]
    fn g14_matches_printf() {
        for (v, want) in [
            (1.23456789012345, "1.2345678901235"),
            (9.87654321098765, "9.8765432109877"),
            (1e20, "1e+20"),
            (0.1, "0.1"),
            (100000000000000.0, "1e+14"),
            (12345678901234.0, "12345678901234"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(format_g(v, 14), want, "{v}");
        }
    }

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"123456789012345678901",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_reject_nan_and_spaces() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(format_f64(10.6), "10.6");
        assert_eq!(format_f64(3.0), "3");
        assert_eq!(format_f64(5000.0), "5000");
        assert_eq!(format_f64(-0.0), "0");
    }

    /// Outputs of C's `printf("%.17g")` (glibc, a C program printing these values).
    #[test]
    fn g17_matches_printf() {
        for (v, want) in [
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (2.0, "2"),
            (1e20, "1e+20"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (123456.789, "123456.789"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
            (1.5e-10, "1.5e-10"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (0.0, "0"),
            (3.0e300, "3.0000000000000002e+300"),
        ] {
            assert_eq!(format_g17(v), want, "{v}");
        }
    }
}
