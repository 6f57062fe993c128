//! Exact numbers: the [`Decimal`] type and the normalized numeric view shared by integers and
//! decimals.
//!
//! A `Decimal` keeps the JSON text it was made from (`99.34901097702962` stays exactly those
//! bytes), validated against the JSON number grammar. Comparison, equality and hashing never go
//! through `f64`: both integers and decimals are viewed as a [`Num`] — sign, significant digits with
//! no leading or trailing zeros, and the position of the decimal point — and compared digit by
//! digit. So `1`, `1.0` and `1e0` are numerically equal, and `0.1 + tiny` differences are never
//! rounded away. This module may not call any other module of the crate except `error`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};

/// Bound on a decimal's magnitude: written normalized as `0.d1d2... x 10^p` (d1 != 0), a nonzero
/// decimal must have `|p| <=` this. Bounding the normalized point (not the exponent as written)
/// keeps every canonical form of an accepted value acceptable too.
pub const DECIMAL_POINT_ABS_MAX: i64 = 1_000_000_000_000_000;

/// Written exponents beyond this are refused before any arithmetic (keeps sums inside `i64`).
const EXPONENT_WRITTEN_ABS_MAX: i64 = 100 * DECIMAL_POINT_ABS_MAX;

/// An exact decimal number, stored as its (valid JSON number) text.
#[derive(Clone)]
pub struct Decimal {
    text: Box<str>,
}

impl Decimal {
    /// Validates `text` as a JSON number (`-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`) within
    /// the magnitude bound [`DECIMAL_POINT_ABS_MAX`], and keeps it verbatim.
    pub fn parse(text: &str) -> Result<Self> {
        validate(text.as_bytes()).map_err(|reason| Error::InvalidDecimal {
            text: text.chars().take(64).collect(),
            reason,
        })?;
        Ok(Decimal { text: text.into() })
    }

    /// The number's text, exactly as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value as an `i64` when it is a whole number in range (`2.50e1` gives 25).
    pub fn to_i64_exact(&self) -> Option<i64> {
        self.num().to_i64()
    }

    /// The normalized view used for comparison.
    pub(crate) fn num(&self) -> Num<'_> {
        Num::from_text(self.text.as_bytes())
    }
}

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Decimal({})", self.text)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Self) -> bool {
        self.num().cmp_num(&other.num()) == Ordering::Equal
    }
}
impl Eq for Decimal {}
impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        self.num().cmp_num(&other.num())
    }
}
impl Hash for Decimal {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.num().hash_num(state);
    }
}

/// Checks the JSON number grammar and the exponent bound.
fn validate(b: &[u8]) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    if b.first() == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return Err("expected a digit"),
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err("expected a digit after '.'");
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err("expected a digit in the exponent");
        }
        if parse_exponent_digits(&b[start..i]).is_none() {
            return Err("exponent out of range");
        }
    }
    if i != b.len() {
        return Err("unexpected character");
    }
    let n = Num::from_text(b);
    if n.point.abs() > DECIMAL_POINT_ABS_MAX {
        return Err("magnitude out of range");
    }
    Ok(())
}

/// Parses exponent digits, `None` when beyond `EXPONENT_WRITTEN_ABS_MAX`.
fn parse_exponent_digits(digits: &[u8]) -> Option<i64> {
    let mut v: i64 = 0;
    for &c in digits {
        v = v
            .checked_mul(10)?
            .checked_add(i64::from(c.wrapping_sub(b'0')))?;
        if v > EXPONENT_WRITTEN_ABS_MAX {
            return None;
        }
    }
    Some(v)
}

/// Significant digits as two ASCII slices read one after the other (the integer and fraction
/// parts of a text), with no leading zero on the first digit and no trailing zero on the last.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Digits<'a> {
    a: &'a [u8],
    b: &'a [u8],
}

impl<'a> Digits<'a> {
    pub(crate) fn len(&self) -> usize {
        self.a.len() + self.b.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Digit values 0-9, most significant first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u8> + 'a {
        self.a
            .iter()
            .chain(self.b.iter())
            .map(|c| c.wrapping_sub(b'0'))
    }
}

/// A number in normalized form: value = (-1 if `neg`) * 0.d1d2...dn * 10^`point`. Zero has no
/// digits, `neg == false` and `point == 0`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Num<'a> {
    pub(crate) neg: bool,
    pub(crate) digits: Digits<'a>,
    pub(crate) point: i64,
}

impl<'a> Num<'a> {
    /// Views a validated JSON number text. Total on any bytes (never panics); only meaningful
    /// for text that passed `validate`.
    pub(crate) fn from_text(b: &'a [u8]) -> Num<'a> {
        let (neg, rest) = match b.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, b),
        };
        let int_len = rest
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int, mut after) = rest.split_at(int_len);
        let mut frac: &[u8] = &[];
        if let Some((b'.', f)) = after.split_first() {
            let n = f
                .iter()
                .position(|c| !c.is_ascii_digit())
                .unwrap_or(f.len());
            frac = &f[..n];
            after = &f[n..];
        }
        let mut exp: i64 = 0;
        if let Some((b'e' | b'E', e)) = after.split_first() {
            let (exp_neg, e) = match e.split_first() {
                Some((b'-', e)) => (true, e),
                Some((b'+', e)) => (false, e),
                _ => (false, e),
            };
            let v = parse_exponent_digits(e).unwrap_or(EXPONENT_WRITTEN_ABS_MAX);
            exp = if exp_neg { -v } else { v };
        }
        Num::from_parts(neg, int, frac, exp)
    }

    /// Normalizes integer digits `int`, fraction digits `frac` and exponent `exp`.
    fn from_parts(neg: bool, int: &'a [u8], frac: &'a [u8], exp: i64) -> Num<'a> {
        let int_zeros = int.iter().take_while(|&&c| c == b'0').count();
        let (mut a, mut b, point) = if int_zeros < int.len() {
            let a = &int[int_zeros..];
            (a, frac, len_i64(a.len()).saturating_add(exp))
        } else {
            let frac_zeros = frac.iter().take_while(|&&c| c == b'0').count();
            (
                &int[int.len()..],
                &frac[frac_zeros..],
                exp.saturating_sub(len_i64(frac_zeros)),
            )
        };
        let b_keep = b.len() - b.iter().rev().take_while(|&&c| c == b'0').count();
        b = &b[..b_keep];
        if b.is_empty() {
            let a_keep = a.len() - a.iter().rev().take_while(|&&c| c == b'0').count();
            a = &a[..a_keep];
        }
        let digits = Digits { a, b };
        if digits.is_empty() {
            return Num::ZERO;
        }
        Num { neg, digits, point }
    }

    pub(crate) const ZERO: Num<'static> = Num {
        neg: false,
        digits: Digits { a: &[], b: &[] },
        point: 0,
    };

    /// Views an integer; `buf` holds its digits.
    pub(crate) fn from_i64(v: i64, buf: &'a mut [u8; 20]) -> Num<'a> {
        let mut u = v.unsigned_abs();
        let mut start = buf.len();
        loop {
            start -= 1;
            buf[start] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        let digits: &'a [u8] = &buf[start..];
        Num::from_parts(v < 0, digits, &[], 0)
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// -1, 0 or 1.
    fn signum(&self) -> i8 {
        if self.is_zero() {
            0
        } else if self.neg {
            -1
        } else {
            1
        }
    }

    /// Exact numeric comparison.
    pub(crate) fn cmp_num(&self, other: &Num<'_>) -> Ordering {
        match self.signum().cmp(&other.signum()) {
            Ordering::Equal => {}
            o => return o,
        }
        if self.is_zero() {
            return Ordering::Equal;
        }
        let magnitude = self
            .point
            .cmp(&other.point)
            .then_with(|| self.digits.iter().cmp(other.digits.iter()));
        if self.neg {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// Hashes the normalized form, so numerically equal values hash equally.
    pub(crate) fn hash_num<H: Hasher>(&self, state: &mut H) {
        self.signum().hash(state);
        self.point.hash(state);
        self.digits.len().hash(state);
        for d in self.digits.iter() {
            d.hash(state);
        }
    }

    /// The value as `i64` when it is whole and in range.
    pub(crate) fn to_i64(self) -> Option<i64> {
        if self.is_zero() {
            return Some(0);
        }
        if self.point < len_i64(self.digits.len()) || self.point > 19 {
            return None;
        }
        let mut v: i128 = 0;
        let mut n: i64 = 0;
        for d in self.digits.iter() {
            v = v * 10 + i128::from(d);
            n += 1;
        }
        while n < self.point {
            v *= 10;
            n += 1;
        }
        let v = if self.neg { -v } else { v };
        i64::try_from(v).ok()
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Builds the canonical document for a normalized number given as digit values (0-9, no leading
/// or trailing zeros; empty for zero): an `Int` when whole and within `i64`, otherwise a `Decimal`
/// in plain notation when the point is near, scientific notation otherwise.
pub(crate) fn canonical_number(neg: bool, digits: &[u8], point: i64) -> Result<crate::Doc> {
    // `digits` are values here, not ASCII; convert to ASCII text for both paths.
    let ascii: Vec<u8> = digits.iter().map(|d| d + b'0').collect();
    let view = Num {
        neg,
        digits: Digits { a: &ascii, b: &[] },
        point,
    };
    if let Some(v) = view.to_i64() {
        return Ok(crate::Doc::Int(v));
    }
    let mut text = String::with_capacity(ascii.len() + 24);
    if neg {
        text.push('-');
    }
    let n = len_i64(ascii.len());
    let ascii_str = std::str::from_utf8(&ascii).unwrap_or("0");
    if (0..=40).contains(&point) && point >= n {
        // Whole number beyond i64: digits then zeros.
        text.push_str(ascii_str);
        for _ in n..point {
            text.push('0');
        }
    } else if (1..=40).contains(&point) {
        let (i, f) = ascii_str.split_at(usize::try_from(point).unwrap_or(0));
        text.push_str(i);
        text.push('.');
        text.push_str(f);
    } else if (-6..=0).contains(&point) {
        text.push_str("0.");
        for _ in point..0 {
            text.push('0');
        }
        text.push_str(ascii_str);
    } else {
        // d.ddd e(point-1)
        let (first, rest) = ascii_str.split_at(1.min(ascii_str.len()));
        text.push_str(first);
        if !rest.is_empty() {
            text.push('.');
            text.push_str(rest);
        }
        text.push('e');
        text.push_str(&(point - 1).to_string());
    }
    Ok(crate::Doc::Decimal(Decimal::parse(&text)?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn keeps_text_verbatim() {
        assert_eq!(d("99.34901097702962").as_str(), "99.34901097702962");
        assert_eq!(d("-1.50E+03").as_str(), "-1.50E+03");
    }

    #[test]
    fn rejects_non_json_numbers() {
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1 ", "NaN", "inf", "0x10", "1.5.2",
            "--1",
        ] {
            assert!(Decimal::parse(bad).is_err(), "{bad:?} accepted");
        }
        // The bound is on the normalized point: 1e999999999999999 = 0.1 x 10^(10^15).
        assert!(Decimal::parse("1e999999999999999").is_ok());
        assert!(Decimal::parse("0.1e1000000000000000").is_ok());
        assert!(Decimal::parse("1e1000000000000000").is_err());
        assert!(Decimal::parse("0.5e-1000000000000000").is_ok());
        assert!(Decimal::parse("0.05e-1000000000000000").is_err());
        assert!(Decimal::parse("1e99999999999999999999").is_err());
        assert!(Decimal::parse("0e5").is_ok());
    }

    #[test]
    fn compares_exactly_not_through_f64() {
        // These two differ beyond f64 precision.
        assert!(d("0.10000000000000000001") > d("0.1"));
        assert!(d("9007199254740993") > d("9007199254740992.5"));
        assert_eq!(d("1.0"), d("1"));
        assert_eq!(d("1e2"), d("100.000"));
        assert_eq!(d("-0.0"), d("0"));
        assert_eq!(d("0.00120e1"), d("12e-3"));
        assert!(d("-2") < d("-1.5"));
        assert!(d("-1e-9") < d("0"));
        assert!(d("1e-9") > d("0"));
        assert!(d("1e10") > d("9999999999.9999"));
        assert!(d("-1e10") < d("-9999999999.9999"));
    }

    #[test]
    fn to_i64_exact_only_for_whole_in_range() {
        assert_eq!(d("2.50e1").to_i64_exact(), Some(25));
        assert_eq!(d("2.5").to_i64_exact(), None);
        assert_eq!(d("-9223372036854775808").to_i64_exact(), Some(i64::MIN));
        assert_eq!(d("9223372036854775808").to_i64_exact(), None);
        assert_eq!(d("0e5").to_i64_exact(), Some(0));
    }

    #[test]
    fn integer_view_matches_decimal_view() {
        for v in [0i64, 1, -1, 10, 100, 120, i64::MAX, i64::MIN, -500] {
            let mut buf = [0u8; 20];
            let n = Num::from_i64(v, &mut buf);
            assert_eq!(n.cmp_num(&d(&v.to_string()).num()), Ordering::Equal, "{v}");
            assert_eq!(n.to_i64(), Some(v));
        }
    }

    #[test]
    fn canonical_number_texts() {
        let c = |neg, digits: &[u8], point| canonical_number(neg, digits, point).unwrap();
        match c(false, &[1, 5], 1) {
            crate::Doc::Decimal(x) => assert_eq!(x.as_str(), "1.5"),
            other => panic!("{other:?}"),
        }
        match c(true, &[1, 5], -2) {
            crate::Doc::Decimal(x) => assert_eq!(x.as_str(), "-0.0015"),
            other => panic!("{other:?}"),
        }
        match c(
            false,
            &[9, 2, 2, 3, 3, 7, 2, 0, 3, 6, 8, 5, 4, 7, 7, 5, 8, 0, 8],
            19,
        ) {
            crate::Doc::Decimal(x) => assert_eq!(x.as_str(), "9223372036854775808"),
            other => panic!("{other:?}"),
        }
        match c(false, &[1, 2], 100) {
            crate::Doc::Decimal(x) => assert_eq!(x.as_str(), "1.2e99"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c(true, &[4, 2], 2), crate::Doc::Int(-42));
        assert_eq!(c(false, &[], 0), crate::Doc::Int(0));
    }
}
