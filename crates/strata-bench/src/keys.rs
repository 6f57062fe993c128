//! The keys and values the benchmarks write, generated rather than stored so that any number of
//! them costs no memory: the mixed workloads' decimal keys ([`key_of`]), the random-looking keys
//! of the read-only and startup benchmarks ([`key_from_hash`] of [`mix`]), and values cut from
//! one buffer of random bytes ([`ValuePool`]).

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// Window offsets available for values (values are windows of one random buffer).
pub const VALUE_WINDOWS: usize = 4096;

/// SplitMix64's finaliser: a bijection on `u64`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Writes the key whose first eight bytes are `h` (big-endian, so keys sort like `h`) into `out`.
pub fn key_from_hash(h: u64, out: &mut [u8]) {
    let (head, tail) = out.split_at_mut(8.min(out.len()));
    head.copy_from_slice(&h.to_be_bytes()[..head.len()]);
    let mut x = h;
    for chunk in tail.chunks_mut(8) {
        x = mix(x);
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// The 16-byte key of key number `n`: its decimal digits, zero-padded (sorts like `n`).
pub fn key_of(n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    let mut v = n % 10_000_000_000_000_000;
    for slot in k.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    k
}

/// Values of one size, each a window of one buffer of random bytes: incompressible, and no
/// allocation per write.
#[derive(Debug, Clone)]
pub struct ValuePool {
    bytes: Vec<u8>,
    value_bytes: usize,
}

impl ValuePool {
    /// A pool of `value_bytes`-byte values filled from `rng`.
    pub fn new(value_bytes: usize, rng: &mut impl RngCore) -> Self {
        let mut bytes = vec![0u8; value_bytes + VALUE_WINDOWS];
        rng.fill_bytes(&mut bytes);
        ValuePool { bytes, value_bytes }
    }

    /// A pool filled from a generator seeded with `seed`.
    pub fn seeded(value_bytes: usize, seed: u64) -> Self {
        Self::new(value_bytes, &mut SmallRng::seed_from_u64(seed))
    }

    /// The value in window `n % VALUE_WINDOWS`.
    pub fn value(&self, n: u64) -> &[u8] {
        let off = (n % VALUE_WINDOWS as u64) as usize;
        &self.bytes[off..off + self.value_bytes]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_numbers() {
        assert_eq!(&key_of(42), b"0000000000000042");
        assert!(key_of(9) < key_of(10));
        assert_eq!(&key_of(99_999_999), b"0000000099999999");
    }

    #[test]
    fn keys_sort_like_their_hashes_and_never_collide() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        key_from_hash(5, &mut a);
        key_from_hash(6, &mut b);
        assert!(a < b);
        let mut short = [0u8; 4];
        key_from_hash(u64::MAX, &mut short);
        assert_eq!(short, [0xff; 4]);
    }

    #[test]
    fn values_are_windows_of_one_buffer() {
        let pool = ValuePool::seeded(100, 7);
        assert_eq!(pool.value(3).len(), 100);
        assert_eq!(pool.value(3), pool.value(3 + VALUE_WINDOWS as u64));
        assert_eq!(pool.value(3)[1..], pool.value(4)[..99]);
    }
}
