//! Unsigned LEB128 varints: the one implementation every format of the workspace uses (the
//! engine's log records, tables, manifest and hints, and the document codec of `strata-doc`).
//!
//! Seven bits per byte, least significant group first, high bit set on every byte but the last.
//! The decoder accepts only the shortest encoding of each value, so every number has exactly one
//! encoding (the document codec relies on that for byte-wise equality), and never reads past
//! [`BYTES_MAX`] bytes.

/// Longest encoding of a `u64`.
pub const BYTES_MAX: usize = 10;

/// Why bytes are not a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended before the last byte (one without the high bit).
    Truncated,
    /// The value does not fit in a `u64` (or the encoding is longer than [`BYTES_MAX`]).
    Overflow,
    /// A longer encoding than the value needs (a trailing zero group).
    NonMinimal,
}

impl VarintError {
    /// What was wrong, in words.
    pub fn reason(self) -> &'static str {
        match self {
            VarintError::Truncated => "unexpected end of input inside a varint",
            VarintError::Overflow => "varint overflows u64",
            VarintError::NonMinimal => "non-minimal varint",
        }
    }
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for VarintError {}

/// Appends `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put`] writes for `v`.
pub fn len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decodes the varint at the start of `bytes`: the value and the bytes it took.
pub fn decode(bytes: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut v: u64 = 0;
    for i in 0..BYTES_MAX {
        let b = *bytes.get(i).ok_or(VarintError::Truncated)?;
        // The tenth byte holds bit 63 only, and must be the last.
        if i == BYTES_MAX - 1 && b > 1 {
            return Err(VarintError::Overflow);
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(VarintError::NonMinimal);
            }
            return Ok((v, i + 1));
        }
    }
    Err(VarintError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges_with_the_length_it_reports() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v), "{v}");
            b.push(0xAA); // what follows is not read
            assert_eq!(decode(&b), Ok((v, len(v))), "{v}");
        }
    }

    #[test]
    fn known_vectors() {
        // From the LEB128 definition (DWARF spec, figure 22).
        let cases: [(u64, &[u8]); 5] = [
            (2, &[0x02]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (129, &[0x81, 0x01]),
            (12_857, &[0xb9, 0x64]),
        ];
        for (v, bytes) in cases {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b, bytes);
            assert_eq!(decode(bytes), Ok((v, bytes.len())));
        }
    }

    #[test]
    fn rejects_truncation_overflow_and_padding() {
        assert_eq!(decode(&[]), Err(VarintError::Truncated));
        assert_eq!(decode(&[0x80, 0x80]), Err(VarintError::Truncated));
        assert_eq!(decode(&[0xff; 11]), Err(VarintError::Overflow));
        let mut max = Vec::new();
        put(&mut max, u64::MAX);
        *max.last_mut().unwrap_or(&mut 0) = 0x02;
        assert_eq!(decode(&max), Err(VarintError::Overflow));
        assert_eq!(decode(&[0x80, 0x00]), Err(VarintError::NonMinimal));
        assert_eq!(decode(&[0x81, 0x80, 0x00]), Err(VarintError::NonMinimal));
    }
}
