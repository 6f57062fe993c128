//! Bloom filter per table, so that a GET of an absent key rarely reads a data block.
//!
//! Layout: `probes: u8`, then the bit array (`bits = bytes * 8`). Probe `i` of a key tests bit
//! `(h1 + i * h2) mod bits` where `h1`/`h2` are the low/high 32 bits of `xxh3_64(key)`.

/// Builds a filter from key hashes.
pub(crate) fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    let bits_per_key = bits_per_key.clamp(1, 32) as usize;
    // ln(2) * bits/key probes minimise the false-positive rate.
    let probes = ((bits_per_key as f64 * 0.69) as u8).clamp(1, 30);
    let bits = (hashes.len() * bits_per_key).max(64);
    let bytes = bits.div_ceil(8);
    let bits = bytes * 8;
    let mut out = vec![0u8; 1 + bytes];
    out[0] = probes;
    for &h in hashes {
        let (mut h1, h2) = (h as u32, (h >> 32) as u32 | 1);
        for _ in 0..probes {
            let bit = h1 as usize % bits;
            out[1 + bit / 8] |= 1 << (bit % 8);
            h1 = h1.wrapping_add(h2);
        }
    }
    out
}

/// The hash the filter is built from.
pub(crate) fn hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// True if the key may be in the table; false means it certainly is not. An empty filter
/// (filters disabled) answers true.
pub(crate) fn may_contain(filter: &[u8], h: u64) -> bool {
    let Some((&probes, bitmap)) = filter.split_first() else {
        return true;
    };
    if bitmap.is_empty() {
        return true;
    }
    let bits = bitmap.len() * 8;
    let (mut h1, h2) = (h as u32, (h >> 32) as u32 | 1);
    for _ in 0..probes {
        let bit = h1 as usize % bits;
        if bitmap[bit / 8] & (1 << (bit % 8)) == 0 {
            return false;
        }
        h1 = h1.wrapping_add(h2);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let keys: Vec<u64> = (0..10_000u32).map(|i| hash(&i.to_be_bytes())).collect();
        let f = build(&keys, 10);
        assert!(keys.iter().all(|&h| may_contain(&f, h)));
        let fp = (10_000..110_000u32)
            .filter(|i| may_contain(&f, hash(&i.to_be_bytes())))
            .count();
        // 10 bits/key gives about 1 %; allow 2 %.
        assert!(fp < 2_000, "false positives: {fp} of 100000");
    }
}
