//! HyperLogLog: PFADD PFCOUNT PFMERGE, with redis-server 7.0's replies and estimates. A
//! HyperLogLog is a string in Redis's format (`HYLL`, an encoding byte, three unused bytes, an
//! 8-byte cached count, then the registers): 16384 registers of 6 bits, an element's register
//! and run length from MurmurHash64A (seed 0xadc83b19) as Redis computes them, and the count
//! from Ertl's estimator as Redis's `hllCount`, so PFCOUNT answers what Redis answers.
//!
//! This server writes the dense encoding only (12 304 bytes per key; Redis starts small ones
//! sparse, so GET, STRLEN and DUMP of a HyperLogLog differ from Redis's), and reads both, so
//! payloads restored from Redis work. PFCOUNT does not store its result in the cached count.

use bytes::Bytes;

use super::strings::{modify_string, read_string, Expiry, StrWrite};
use super::{Ctx, Spec, WRITE, WRITE_FAST};
use crate::backend::BatchOp;
use crate::error::{Error, Result};
use crate::keyspace::{string_key, Encoding, Record};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "pfadd", arity: -2, flags: WRITE_FAST, keys: (1, 1, 1), group: "hyperloglog", summary: "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", handler: pfadd },
    Spec { name: "pfcount", arity: -2, flags: &["readonly"], keys: (1, -1, 1), group: "hyperloglog", summary: "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", handler: pfcount },
    Spec { name: "pfmerge", arity: -2, flags: WRITE, keys: (1, -1, 1), group: "hyperloglog", summary: "Merges one or more HyperLogLog values into a single key.", handler: pfmerge },
];

/// Register index bits.
const P: u32 = 14;
/// Registers.
const REGISTERS: usize = 1 << P;
/// Bits of the hash left for the run length.
const Q: u32 = 64 - P;
/// Bits per dense register.
const REGISTER_BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
/// Header: magic, encoding, 3 unused bytes, 8-byte cached count.
const HEADER_BYTES: usize = 16;
const DENSE_BYTES: usize = HEADER_BYTES + (REGISTERS * REGISTER_BITS).div_ceil(8);
const ENCODING_DENSE: u8 = 0;
const ENCODING_SPARSE: u8 = 1;
/// Redis's `HLL_ALPHA_INF`.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn not_hll() -> Error {
    Error::Coded("WRONGTYPE Key is not a valid HyperLogLog string value.".to_string())
}

fn corrupted() -> Error {
    Error::Coded("INVALIDOBJ Corrupted HLL object detected".to_string())
}

/// Redis's MurmurHash64A (little-endian words).
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mut k = u64::from_le_bytes(word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the run length it offers (`hllPatLen`).
fn register_and_run(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// The registers of a HyperLogLog string (dense or sparse); WRONGTYPE for another string,
/// INVALIDOBJ for a sparse one whose runs do not cover the registers exactly.
fn registers(value: &[u8]) -> Result<Vec<u8>> {
    if value.len() < HEADER_BYTES || &value[..4] != b"HYLL" {
        return Err(not_hll());
    }
    let body = &value[HEADER_BYTES..];
    match value[4] {
        ENCODING_DENSE if value.len() == DENSE_BYTES => Ok((0..REGISTERS)
            .map(|r| {
                let bit = r * REGISTER_BITS;
                let (byte, shift) = (bit / 8, bit % 8);
                let b0 = u16::from(body[byte]);
                let b1 = u16::from(body.get(byte + 1).copied().unwrap_or(0));
                (((b0 >> shift) | (b1 << (8 - shift))) as u8) & REGISTER_MAX
            })
            .collect()),
        ENCODING_SPARSE => {
            let mut regs = Vec::with_capacity(REGISTERS);
            let mut i = 0;
            while i < body.len() {
                let op = body[i];
                let (run, value) = if op & 0xC0 == 0 {
                    i += 1;
                    (usize::from(op & 0x3F) + 1, 0)
                } else if op & 0xC0 == 0x40 {
                    let next = *body.get(i + 1).ok_or_else(corrupted)?;
                    i += 2;
                    ((usize::from(op & 0x3F) << 8 | usize::from(next)) + 1, 0)
                } else {
                    i += 1;
                    (usize::from(op & 0x3) + 1, ((op >> 2) & 0x1F) + 1)
                };
                if regs.len() + run > REGISTERS {
                    return Err(corrupted());
                }
                regs.extend(std::iter::repeat_n(value, run));
            }
            if regs.len() != REGISTERS {
                return Err(corrupted());
            }
            Ok(regs)
        }
        _ => Err(not_hll()),
    }
}

/// A dense HyperLogLog string of `regs` (the cached count marked invalid).
fn dense(regs: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; DENSE_BYTES];
    out[..4].copy_from_slice(b"HYLL");
    out[4] = ENCODING_DENSE;
    out[15] = 0x80;
    let body = &mut out[HEADER_BYTES..];
    for (r, &v) in regs.iter().enumerate() {
        let bit = r * REGISTER_BITS;
        let (byte, shift) = (bit / 8, bit % 8);
        let v = u16::from(v & REGISTER_MAX) << shift;
        body[byte] |= v as u8;
        if let Some(next) = body.get_mut(byte + 1) {
            *next |= (v >> 8) as u8;
        }
    }
    out
}

/// Redis's `hllSigma`.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

/// Redis's `hllTau`.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// Redis's `hllCount`: Ertl's estimator over the registers' histogram.
fn estimate(regs: &[u8]) -> u64 {
    let m = REGISTERS as f64;
    let mut histogram = [0u32; 64];
    for &r in regs {
        histogram[usize::from(r & REGISTER_MAX)] += 1;
    }
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histogram[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

fn pfadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let changed = modify_string(ctx, &args[1], None, |old| {
        let (mut regs, created) = match old {
            Some((v, _)) => (registers(v)?, false),
            None => (vec![0u8; REGISTERS], true),
        };
        let mut changed = created;
        for e in &args[2..] {
            let (r, run) = register_and_run(e);
            if run > regs[r] {
                regs[r] = run;
                changed = true;
            }
        }
        if !changed {
            return Ok((StrWrite::Keep, false));
        }
        Ok((
            StrWrite::PutAs(dense(&regs), Expiry::Keep, Encoding::Raw),
            true,
        ))
    })?;
    Ok(Reply::Int(i64::from(changed)))
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut merged: Option<Vec<u8>> = None;
    for key in &args[1..] {
        let Some(v) = read_string(ctx, key)? else {
            continue;
        };
        let regs = registers(&v)?;
        match &mut merged {
            None => merged = Some(regs),
            Some(m) => m.iter_mut().zip(&regs).for_each(|(a, &b)| *a = (*a).max(b)),
        }
    }
    Ok(Reply::Int(merged.map_or(0, |regs| estimate(&regs)) as i64))
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Every source (the destination too, if it exists) is read and checked first; then the
    // destination is written whole, keeping its expiry. The dispatcher holds the exec lock
    // exclusively.
    let dst = &args[1];
    let mut regs = vec![0u8; REGISTERS];
    let mut expiry = None;
    for key in std::iter::once(dst).chain(&args[2..]) {
        let record = ctx
            .db()
            .get(&string_key(ctx.dbi(), key))?
            .map(Record::decode)
            .transpose()?
            .filter(|r| !r.expired_now());
        let value = match record {
            Some(r) if r.kind == crate::keyspace::KeyType::String => {
                if key == dst {
                    expiry = r.expire_at_ms;
                }
                r.payload
            }
            Some(_) => return Err(Error::WrongType),
            // Absent, or a document (WRONGTYPE).
            None => {
                read_string(ctx, key)?;
                continue;
            }
        };
        for (a, b) in regs.iter_mut().zip(registers(&value)?) {
            *a = (*a).max(b);
        }
    }
    ctx.db().write(vec![BatchOp::Put(
        string_key(ctx.dbi(), dst),
        Record::encode_as(&dense(&regs), expiry, Encoding::Raw),
    )])?;
    ctx.shared.note_writes(1);
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MurmurHash64A against Redis's C function (compiled from its source, seed 0xadc83b19):
    /// every tail length path, a word and more.
    #[test]
    fn murmur_matches_redis() {
        for (key, want) in [
            (&b""[..], 0xd8df_ea65_85bc_9732u64),
            (b"a", 0x53d2_470a_9b43_b1a7),
            (b"abcdefgh", 0xf3a6_5df5_5991_4567),
            (b"abcdefghi", 0x834f_ba4d_9152_daf7),
            (b"hello world, this is a longer key", 0xe326_d150_91d5_99d8),
        ] {
            assert_eq!(murmur64a(key, 0xadc8_3b19), want, "{key:?}");
        }
    }

    /// Dense registers read back what was written, at every bit offset.
    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; REGISTERS];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = (i * 7 % 64) as u8;
        }
        assert_eq!(registers(&dense(&regs)).unwrap_or_default(), regs);
        assert_eq!(dense(&regs).len(), DENSE_BYTES);
    }
}
