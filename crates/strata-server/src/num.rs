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

/// Parses a float the way Redis's `string2d` reads one (ZADD's scores, weights, timeouts): C's
/// `strtod` over the whole argument (hexadecimal floats such as `0x1p3` included), no leading
/// space, no NaN. Infinity parses, and so does a literal past the range of a double, as an
/// infinity (callers that refuse those check, as Redis does).
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    // string2d compares the bytes read with the argument's length: a NUL byte stops it short.
    if s.first().is_none_or(|c| is_c_space(*c)) || s.contains(&0) {
        return None;
    }
    strtod_whole(s)
}

/// Parses an unsigned 64-bit number the way Redis's `string2ull` does (stream IDs): a
/// `string2ll` number if not negative, else C's `strtoull` over the whole string, which also
/// takes leading spaces, a `+`, and a `-` that negates modulo 2^64.
pub fn parse_u64_c(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let (i, negative) = spaces_and_sign(s);
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        // Past 2^64 - 1: strtoull's ERANGE.
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// C's `strtod` over a whole C string (up to its first NUL byte), where Redis asks only that
/// the number reach the end (score ranges, SORT's weights): leading spaces, hexadecimal floats
/// and an empty string (0) pass; `None` when it stops early or reads NaN.
pub fn strtod_whole(s: &[u8]) -> Option<f64> {
    let c_string = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    match strtod(c_string) {
        (v, used) if used == c_string.len() && !v.is_nan() => Some(v),
        _ => None,
    }
}

/// Whether C's `strtod` reports `ERANGE` for `text`, read as `v`: digits past a double's
/// range (read as an infinity, where the text does not say `inf`) or a non-zero number below
/// it (read as zero).
pub fn out_of_range(text: &[u8], v: f64) -> bool {
    // Every score a ZADD reads goes through here: only an infinity or a zero needs the text.
    if v.is_finite() && v != 0.0 {
        return false;
    }
    let lower = String::from_utf8_lossy(text).trim().to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if v.is_infinite() {
        return !unsigned.starts_with("inf");
    }
    // The digits before the exponent (`e`, or `p` after `0x`).
    let mantissa = match unsigned.strip_prefix("0x") {
        Some(hex) => hex.split('p').next().unwrap_or(""),
        None => unsigned.split('e').next().unwrap_or(""),
    };
    v == 0.0 && mantissa.chars().any(|c| c.is_ascii_hexdigit() && c != '0')
}

/// Where the number starts after C's leading spaces and an optional sign, and whether the sign
/// was `-` (what `strtod` and `strtoull` both skip first).
fn spaces_and_sign(s: &[u8]) -> (usize, bool) {
    let i = s.iter().take_while(|c| is_c_space(**c)).count();
    match s.get(i) {
        Some(b'-') => (i + 1, true),
        Some(b'+') => (i + 1, false),
        _ => (i, false),
    }
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C's `strtod` (glibc, C locale) on `s`: the value and how many bytes it read, 0 when it read
/// no number (then the value is 0, and C's end pointer is the start of the string, before any
/// spaces). Reads leading spaces, a sign, `inf`/`infinity`/`nan` in any case, decimal and
/// hexadecimal (`0x1.8p1`) forms; stops where the number stops (a NUL byte too, as a C string
/// would end there).
pub fn strtod(s: &[u8]) -> (f64, usize) {
    let (i, negative) = spaces_and_sign(s);
    let signed = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"infinity") {
        return (signed(f64::INFINITY), i + 8);
    }
    if starts(b"inf") {
        return (signed(f64::INFINITY), i + 3);
    }
    if starts(b"nan") {
        let mut end = i + 3;
        // `nan(chars)`: the parenthesised part is read only when it closes.
        if s.get(end) == Some(&b'(') {
            let inner = s[end + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if s.get(end + 1 + inner) == Some(&b')') {
                end += inner + 2;
            }
        }
        return (f64::NAN, end);
    }
    let hex_digit = |c: Option<&u8>| c.is_some_and(u8::is_ascii_hexdigit);
    if (starts(b"0x"))
        && (hex_digit(rest.get(2)) || (rest.get(2) == Some(&b'.') && hex_digit(rest.get(3))))
    {
        let (v, used) = hex_float(&rest[2..]);
        return (signed(v), i + 2 + used);
    }
    // Decimal: digits, an optional point and digits (one digit at least), an optional
    // exponent read only when digits follow it.
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let whole = digits(i);
    let mut end = i + whole;
    let mut fraction = 0;
    if s.get(end) == Some(&b'.') {
        fraction = digits(end + 1);
        if whole + fraction > 0 {
            end += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return (0.0, 0);
    }
    if matches!(s.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(s.get(end + 1), Some(b'+' | b'-')));
        let exponent = digits(end + 1 + sign);
        if exponent > 0 {
            end += 1 + sign + exponent;
        }
    }
    // The text is ASCII digits, point, sign and exponent: Rust reads it with C's rounding.
    let v = std::str::from_utf8(&s[i..end])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(0.0);
    (signed(v), end)
}

/// The digits after `0x` of a hexadecimal float: the value and the bytes read.
fn hex_float(s: &[u8]) -> (f64, usize) {
    let mut mantissa = 0f64;
    let mut scale = 0i32;
    let mut i = 0;
    let mut seen_point = false;
    while let Some(&c) = s.get(i) {
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            mantissa = mantissa * 16.0 + f64::from(d);
            if seen_point {
                scale -= 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let sign = usize::from(matches!(s.get(i + 1), Some(b'+' | b'-')));
        let digits = s[i + 1 + sign..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            let text = &s[i + 1 + sign..i + 1 + sign + digits];
            // Past any double's range either way: clamp, the result saturates the same.
            let e = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<i32>().ok())
                .unwrap_or(i32::MAX / 2)
                .min(100_000);
            scale = scale.saturating_add(if s[i + 1] == b'-' { -e } else { e });
            i += 1 + sign + digits;
        }
    }
    (ldexp(mantissa, scale), i)
}

/// `m` times two to the `e`, through steps that stay inside a double's exponent range (a
/// single `powi(-1074)` would underflow before the multiplication).
fn ldexp(mut m: f64, mut e: i32) -> f64 {
    const STEP: i32 = 1000;
    while e > STEP && m.is_finite() && m != 0.0 {
        m *= 2f64.powi(STEP);
        e -= STEP;
    }
    while e < -STEP && m != 0.0 {
        m *= 2f64.powi(-STEP);
        e += STEP;
    }
    m * 2f64.powi(e)
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

    /// `strtod` against glibc's own: the value and the bytes read of each text, as glibc 2.36's
    /// `strtod` gave them (called through Python's ctypes when this table was written).
    #[test]
    fn strtod_reads_what_the_c_library_reads() {
        let glibc: &[(&str, f64, usize)] = &[
            ("", 0.0, 0),
            (" ", 0.0, 0),
            ("  1", 1.0, 3),
            ("1 ", 1.0, 1),
            ("+1.5", 1.5, 4),
            ("-.5", -0.5, 3),
            (".", 0.0, 0),
            ("1.", 1.0, 2),
            ("1e", 1.0, 1),
            ("1e+", 1.0, 1),
            ("1e-3", 0.001, 4),
            ("1E400", f64::INFINITY, 5),
            ("1e-400", 0.0, 6),
            ("0x", 0.0, 1),
            ("0x.", 0.0, 1),
            ("0x.8", 0.5, 4),
            ("0X1P-2", 0.25, 6),
            ("0x1p", 1.0, 3),
            ("0x1.8p1", 3.0, 7),
            ("-0x10", -16.0, 5),
            ("0xg", 0.0, 1),
            ("inf", f64::INFINITY, 3),
            ("-INFINITY", f64::NEG_INFINITY, 9),
            ("infin", f64::INFINITY, 3),
            ("nan", f64::NAN, 3),
            ("NaN(abc)", f64::NAN, 8),
            ("nan(", f64::NAN, 3),
            ("in", 0.0, 0),
            ("-", 0.0, 0),
            ("+", 0.0, 0),
            ("0012", 12.0, 4),
            ("1_0", 1.0, 1),
            ("\t\n3", 3.0, 3),
            ("5x", 5.0, 1),
            ("0x1fffffffffffff", 9007199254740991.0, 16),
            ("123456789012345678901234567890", 1.2345678901234568e+29, 30),
            ("0.1", 0.1, 3),
            ("4.9e-324", 5e-324, 8),
            ("2.2250738585072014e-308", 2.2250738585072014e-308, 23),
            ("1.7976931348623157e308", 1.7976931348623157e+308, 22),
            ("-0", -0.0, 2),
            ("0x1p-1074", 5e-324, 9),
            ("0x1p1024", f64::INFINITY, 8),
        ];
        for &(text, want, read) in glibc {
            let (got, used) = super::strtod(text.as_bytes());
            assert_eq!(used, read, "{text:?}: bytes read");
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{text:?}: {got} against {want}"
            );
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
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_u64_c(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64_c(b"18446744073709551616"), None);
        assert_eq!(parse_u64_c(b"  +7"), Some(7));
        assert_eq!(parse_u64_c(b" -1"), Some(u64::MAX));
        assert_eq!(parse_u64_c(b"-1"), None);
        assert_eq!(parse_u64_c(b"7 "), None);
        assert_eq!(parse_u64_c(b""), None);
        assert_eq!(parse_f64(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(parse_f64(b"0x"), None);
        assert_eq!(parse_f64(b"1e"), None);
        assert_eq!(parse_f64(b"1\x002"), None);
        assert_eq!(parse_f64(b""), None);
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
