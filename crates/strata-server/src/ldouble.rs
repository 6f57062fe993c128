//! INCRBYFLOAT's arithmetic as Redis does it: Redis parses both numbers with `strtold`, adds
//! them as x86 80-bit `long double`s (64-bit significand) and stores `%.17Lf` with trailing
//! zeros removed, so `1000 + 0.1` is `1000.09999999999999998` and `i64::MAX + 1000` is exact.
//! 64-bit floats give other digits, so this module computes in that format exactly, in
//! software: decimal -> nearest extended value (round half to even, as glibc's `strtold`),
//! exact sum rounded once, and the exact binary value printed to 17 decimals (glibc's
//! `printf` is exact too). Hexadecimal input (`0x1p3`, which `strtold` also reads) is refused.

use num_bigint::BigUint;
use num_traits::{One, ToPrimitive, Zero};

/// Bits of the significand.
const MANT_BITS: u64 = 64;
/// Exponent (of the significand's lowest bit) of the smallest subnormal: 2^-16445.
const EXP_MIN: i64 = -16445;
/// Largest exponent of the lowest significand bit: values stay below 2^16384.
const EXP_MAX: i64 = 16384 - MANT_BITS as i64;
/// Longest number text Redis parses (`MAX_LONG_DOUBLE_CHARS`).
const TEXT_BYTES_MAX: usize = 5 * 1024;
/// Decimal exponents beyond this overflow or underflow whatever the digits (the format spans
/// about 10^-4951 to 10^4932).
const DECIMAL_EXP_LIMIT: i64 = 5100;

/// The exponent after `e` or `p`: an optional sign and digits, to the end of the text
/// (saturated far past any range the format has).
fn exponent(text: &[u8]) -> Result<i64, LdError> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(LdError::NotFloat);
    }
    let mut e: i64 = 0;
    for &d in digits {
        e = (e * 10 + i64::from(d - b'0')).min(1 << 40);
    }
    Ok(if negative { -e } else { e })
}

/// A finite extended-precision value: `(-1)^neg * mant * 2^exp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// Why a number cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdError {
    /// Not a number `strtold` would read completely (or out of its range).
    NotFloat,
    /// The result is infinite or not a number.
    NanOrInfinity,
}

impl LongDouble {
    fn zero(neg: bool) -> Self {
        LongDouble {
            neg,
            mant: 0,
            exp: 0,
        }
    }

    /// Rounds `n * 2^exp` (plus a sticky bit for nonzero bits below `n`) to the format.
    fn round(neg: bool, n: BigUint, exp: i64, sticky: bool) -> Result<Self, LdError> {
        if n.is_zero() {
            return Ok(Self::zero(neg));
        }
        let bits = n.bits() as i64;
        let shift = (bits - MANT_BITS as i64).max(EXP_MIN - exp);
        let (mut mant, mut e) = if shift > 0 {
            let kept = &n >> (shift as usize);
            let half = BigUint::one() << ((shift - 1) as usize);
            let dropped = &n - (&kept << (shift as usize));
            let mut kept = kept;
            let above_half = dropped > half || (dropped == half && sticky);
            let tie = dropped == half && !sticky;
            let odd = (&kept & BigUint::one()) == BigUint::one();
            if above_half || (tie && odd) {
                kept += 1u32;
            }
            (kept, exp + shift)
        } else {
            // Exact: normalise to the top bit where the exponent allows.
            let left = -shift;
            (n << (left as usize), exp - left)
        };
        if mant.bits() > MANT_BITS {
            mant >>= 1usize;
            e += 1;
        }
        if e > EXP_MAX {
            return Err(LdError::NanOrInfinity);
        }
        let mant = mant.to_u64().ok_or(LdError::NanOrInfinity)?;
        Ok(LongDouble { neg, mant, exp: e })
    }

    /// Parses a number the way Redis's `string2ld` does (`strtold`, nothing before or after).
    pub fn parse(text: &[u8]) -> Result<Self, LdError> {
        if text.is_empty() || text.len() >= TEXT_BYTES_MAX {
            return Err(LdError::NotFloat);
        }
        let (neg, body) = match text[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            // strtold reads it; the sum is then infinite, which INCRBYFLOAT refuses.
            return Err(LdError::NanOrInfinity);
        }
        if let Some(hex) = lower.strip_prefix(b"0x") {
            if hex.first().is_some_and(u8::is_ascii_hexdigit)
                || (hex.first() == Some(&b'.') && hex.get(1).is_some_and(u8::is_ascii_hexdigit))
            {
                return Self::parse_hex(neg, hex);
            }
        }
        let mut digits = BigUint::zero();
        let mut any_digit = false;
        let mut exp10: i64 = 0;
        let mut i = 0;
        let mut seen_point = false;
        while i < body.len() {
            match body[i] {
                d @ b'0'..=b'9' => {
                    any_digit = true;
                    digits = digits * 10u32 + u32::from(d - b'0');
                    if seen_point {
                        exp10 -= 1;
                    }
                }
                b'.' if !seen_point => seen_point = true,
                _ => break,
            }
            i += 1;
        }
        if !any_digit {
            return Err(LdError::NotFloat);
        }
        if i < body.len() {
            if body[i] != b'e' && body[i] != b'E' {
                return Err(LdError::NotFloat);
            }
            exp10 += exponent(&body[i + 1..])?;
        }
        if digits.is_zero() {
            return Ok(Self::zero(neg));
        }
        let magnitude = exp10 + digits.to_string().len() as i64;
        if !(-DECIMAL_EXP_LIMIT..=DECIMAL_EXP_LIMIT).contains(&magnitude) {
            // ERANGE with an infinite or zero result: string2ld refuses it.
            return Err(LdError::NotFloat);
        }
        let value = if exp10 >= 0 {
            Self::round(
                neg,
                digits * BigUint::from(10u32).pow(exp10 as u32),
                0,
                false,
            )
        } else {
            let den = BigUint::from(10u32).pow((-exp10) as u32);
            let s = (MANT_BITS as i64 + 2 + den.bits() as i64 - digits.bits() as i64).max(0);
            let num = digits << (s as usize);
            let q = &num / &den;
            let r = &num - &q * &den;
            Self::round(neg, q, -s, !r.is_zero())
        };
        match value {
            // Overflow, or underflow to zero: ERANGE, refused like string2ld does.
            Err(_) => Err(LdError::NotFloat),
            Ok(v) if v.mant == 0 => Err(LdError::NotFloat),
            Ok(v) => Ok(v),
        }
    }

    /// The digits after `0x` of a hexadecimal float (strtold reads `0x1.8p1` as 3), lowercase,
    /// all of which must be read.
    fn parse_hex(neg: bool, hex: &[u8]) -> Result<Self, LdError> {
        let mut mant = BigUint::zero();
        let mut exp2: i64 = 0;
        let mut seen_point = false;
        let mut i = 0;
        while let Some(&c) = hex.get(i) {
            if c == b'.' && !seen_point {
                seen_point = true;
            } else if let Some(d) = (c as char).to_digit(16) {
                mant = (mant << 4usize) + d;
                if seen_point {
                    exp2 -= 4;
                }
            } else {
                break;
            }
            i += 1;
        }
        if i < hex.len() {
            // Only a binary exponent may follow, with digits, up to the end.
            let rest = hex[i..].strip_prefix(b"p").ok_or(LdError::NotFloat)?;
            exp2 += exponent(rest)?;
        }
        if mant.is_zero() {
            return Ok(Self::zero(neg));
        }
        let magnitude = exp2 + mant.bits() as i64;
        if !(EXP_MIN - MANT_BITS as i64..=EXP_MAX + MANT_BITS as i64).contains(&magnitude) {
            return Err(LdError::NotFloat);
        }
        match Self::round(neg, mant, exp2, false) {
            // Overflow, or underflow to zero: ERANGE, refused like string2ld does.
            Err(_) => Err(LdError::NotFloat),
            Ok(v) if v.mant == 0 => Err(LdError::NotFloat),
            Ok(v) => Ok(v),
        }
    }

    /// The exact sum, rounded once.
    pub fn add(&self, other: &Self) -> Result<Self, LdError> {
        if self.mant == 0 && other.mant == 0 {
            return Ok(Self::zero(self.neg && other.neg));
        }
        let e = self.exp.min(other.exp);
        let a = BigUint::from(self.mant) << ((self.exp - e) as usize);
        let b = BigUint::from(other.mant) << ((other.exp - e) as usize);
        let (neg, n) = if self.neg == other.neg {
            (self.neg, a + b)
        } else if a >= b {
            (self.neg, a - b)
        } else {
            (other.neg, b - a)
        };
        if n.is_zero() {
            return Ok(Self::zero(false));
        }
        Self::round(neg, n, e, false)
    }

    /// The finite double `v` exactly (a long double holds every double); `None` for infinities
    /// and NaN.
    pub fn from_f64(v: f64) -> Option<Self> {
        if !v.is_finite() {
            return None;
        }
        let bits = v.to_bits();
        let neg = bits >> 63 == 1;
        let biased = ((bits >> 52) & 0x7ff) as i64;
        let fraction = bits & ((1 << 52) - 1);
        if biased == 0 && fraction == 0 {
            return Some(Self::zero(neg));
        }
        Some(if biased == 0 {
            // Subnormal: no implicit bit.
            LongDouble {
                neg,
                mant: fraction,
                exp: -1074,
            }
        } else {
            LongDouble {
                neg,
                mant: fraction | (1 << 52),
                exp: biased - 1075,
            }
        })
    }

    /// `%.17Lf` with trailing zeros (and a bare point) removed, and `-0` as `0`: what Redis
    /// stores.
    pub fn to_redis_string(&self) -> String {
        let scale = BigUint::from(10u32).pow(17);
        let n = if self.exp >= 0 {
            (BigUint::from(self.mant) * scale) << (self.exp as usize)
        } else {
            let num = BigUint::from(self.mant) * scale;
            let den = BigUint::one() << ((-self.exp) as usize);
            let q = &num / &den;
            let r2 = (&num - &q * &den) << 1usize;
            let odd = (&q & BigUint::one()) == BigUint::one();
            if r2 > den || (r2 == den && odd) {
                q + 1u32
            } else {
                q
            }
        };
        let mut digits = n.to_string();
        if digits.len() < 18 {
            digits = format!("{}{digits}", "0".repeat(18 - digits.len()));
        }
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let body = if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        };
        if self.neg && body != "0" {
            format!("-{body}")
        } else {
            body
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let a = LongDouble::parse(a.as_bytes()).unwrap();
        let b = LongDouble::parse(b.as_bytes()).unwrap();
        a.add(&b).unwrap().to_redis_string()
    }

    /// Vectors read off redis-server 7.0 (x86-64): `SET k a`, `INCRBYFLOAT k b`.
    #[test]
    fn sums_match_redis_on_x86_64() {
        assert_eq!(incr("1000", "0.1"), "1000.09999999999999998");
        assert_eq!(incr("10.5", "0.1"), "10.6");
        assert_eq!(incr("3", "1.5"), "4.5");
        assert_eq!(incr("-20", "-0.25"), "-20.25");
        assert_eq!(incr("123456", "0.3"), "123456.29999999999999716");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("1e3", "1.1"), "1001.09999999999999998");
        assert_eq!(incr("99", "1e3"), "1099");
        assert_eq!(incr("9223372036854775807", "1e3"), "9223372036854776807");
        assert_eq!(incr("-9223372036854775808", "1e3"), "-9223372036854774808");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("1", "-1"), "0");
        assert_eq!(incr("-0.0", "0"), "0");
    }

    #[test]
    fn bad_numbers_are_refused() {
        for bad in [
            "",
            " 1",
            "1 ",
            "1e",
            "e5",
            ".",
            "-",
            "1.2.3",
            "0x",
            "0x1p",
            "0x1g",
            "nan",
            "1e99999",
            "1e-99999",
            "0x1p99999",
            "0x1p-99999",
        ] {
            assert_eq!(
                LongDouble::parse(bad.as_bytes()),
                Err(LdError::NotFloat),
                "{bad:?}"
            );
        }
        assert_eq!(LongDouble::parse(b"inf"), Err(LdError::NanOrInfinity));
        // strtold reads hexadecimal floats too (glibc: 0x10 = 16, 0x1.8p1 = 3, -0x.8 = -0.5).
        for (hex, decimal) in [("0x10", "16"), ("0X1.8P1", "3"), ("-0x.8", "-0.5")] {
            assert_eq!(
                LongDouble::parse(hex.as_bytes()).map(|v| v.to_redis_string()),
                LongDouble::parse(decimal.as_bytes()).map(|v| v.to_redis_string()),
                "{hex}"
            );
        }
        let big = LongDouble::parse(b"1e4932").unwrap();
        assert_eq!(big.add(&big), Err(LdError::NanOrInfinity));
        assert!(LongDouble::parse(b".5").is_ok());
        assert!(LongDouble::parse(b"5.").is_ok());
    }
}
