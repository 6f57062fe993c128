//! HyperLogLog: PFADD PFCOUNT PFMERGE, with redis-server 7.0's replies and estimates. A
//! HyperLogLog is a string in Redis's format (`HYLL`, an encoding byte, three unused bytes, an
//! 8-byte cached count, then the registers): 16384 registers of 6 bits, an element's register
//! and run length from MurmurHash64A (seed 0xadc83b19) as Redis computes them, and the count
//! from Ertl's estimator as Redis's `hllCount`, so PFCOUNT answers what Redis answers.
//!
//! The bytes are Redis's too, so GET, STRLEN, DUMP and APPEND see what they see in Redis: a new
//! HyperLogLog is *sparse* (run-length opcodes, 18 bytes when empty), changed in place by
//! Redis's own steps (`hllSparseSet`: the covering opcode split, then adjacent equal values
//! merged within five opcodes), and promoted to the 12 304-byte *dense* encoding when a register
//! would exceed 32 or the string would pass `hll-sparse-max-bytes` (3000); PFMERGE makes its
//! destination dense when any input is; the header (magic, encoding, unused bytes, cached count)
//! is carried through every change. PFCOUNT of one key answers from the cached count when it
//! is valid, and stores the count it computed when it is not (a write, seen by WATCH), as Redis
//! does.

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

/// Sparse opcodes (Redis's `HLL_SPARSE_*`): ZERO `00xxxxxx` (1-64 zero registers), XZERO
/// `01xxxxxx xxxxxxxx` (1-16384 zero registers), VAL `1vvvvvxx` (1-4 registers of value 1-32).
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// Redis's default `hll-sparse-max-bytes`: a sparse string that would grow past this (header
/// included) becomes dense. CONFIG SET changes it (`config::EncodingLimits`).
const SPARSE_MAX_BYTES: usize = 3000;
/// Opcodes Redis's step 4 looks at, from the one before a change, to merge equal values.
const SPARSE_MERGE_SCAN_OPCODES: usize = 5;

fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}
fn is_xzero(op: u8) -> bool {
    op & 0xc0 == 0x40
}
fn zero_len(op: u8) -> usize {
    usize::from(op & 0x3f) + 1
}
fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}
fn val_len(op: u8) -> usize {
    usize::from(op & 0x3) + 1
}
/// A VAL opcode; `value` 1-32, `len` 1-4.
fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | ((len - 1) as u8)
}
/// The ZERO or XZERO opcode(s) for `len` zero registers, as Redis chooses.
fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        seq.extend([0x40 | (l >> 8) as u8, (l & 0xff) as u8]);
    } else {
        seq.push((len - 1) as u8);
    }
}

/// A HyperLogLog string changed in place the way Redis changes its own (`hyperloglog.c`), so
/// the bytes stay Redis's.
struct Hll {
    bytes: Vec<u8>,
    /// `hll-sparse-max-bytes`: past it a sparse string becomes dense.
    sparse_max_bytes: usize,
}

impl Hll {
    /// An empty sparse HyperLogLog (`createHLLObject`): one XZERO of every register.
    fn new_sparse() -> Hll {
        let mut bytes = vec![0u8; HEADER_BYTES];
        bytes[..4].copy_from_slice(b"HYLL");
        bytes[4] = ENCODING_SPARSE;
        let mut left = REGISTERS;
        while left > 0 {
            let run = left.min(SPARSE_XZERO_MAX_LEN);
            push_zeros(&mut bytes, run);
            left -= run;
        }
        Hll {
            bytes,
            sparse_max_bytes: SPARSE_MAX_BYTES,
        }
    }

    /// The same, promoted to dense past `sparse_max_bytes` (`hll-sparse-max-bytes`).
    fn sparse_max(mut self, sparse_max_bytes: u64) -> Hll {
        self.sparse_max_bytes = usize::try_from(sparse_max_bytes).unwrap_or(usize::MAX);
        self
    }

    /// A stored HyperLogLog (`isHLLObjectOrReply`'s checks; WRONGTYPE otherwise).
    fn parse(value: &[u8]) -> Result<Hll> {
        let valid = value.len() >= HEADER_BYTES
            && &value[..4] == b"HYLL"
            && (value[4] == ENCODING_SPARSE
                || (value[4] == ENCODING_DENSE && value.len() == DENSE_BYTES));
        if !valid {
            return Err(not_hll());
        }
        Ok(Hll {
            bytes: value.to_vec(),
            sparse_max_bytes: SPARSE_MAX_BYTES,
        })
    }

    fn is_dense(&self) -> bool {
        self.bytes[4] == ENCODING_DENSE
    }

    /// `HLL_INVALIDATE_CACHE`: the count's top bit set, its other bits kept.
    fn invalidate_cache(&mut self) {
        self.bytes[15] |= 0x80;
    }

    /// The cached count, when valid.
    fn cached_count(&self) -> Option<u64> {
        let mut card = [0u8; 8];
        card.copy_from_slice(&self.bytes[8..16]);
        (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
    }

    fn store_count(&mut self, count: u64) {
        self.bytes[8..16].copy_from_slice(&count.to_le_bytes());
    }

    /// Raises register `index` to `count` if it is lower; whether it changed
    /// (`hllDenseSet` / `hllSparseSet`).
    fn set(&mut self, index: usize, count: u8) -> Result<bool> {
        if self.is_dense() {
            return Ok(dense_set(&mut self.bytes[HEADER_BYTES..], index, count));
        }
        if count > SPARSE_VAL_MAX_VALUE {
            return self.promote_and_set(index, count);
        }
        // Step 1: the opcode covering `index`, the one before it, and the first register it
        // covers.
        let b = &self.bytes;
        let end = b.len();
        let mut p = HEADER_BYTES;
        let mut first = 0usize;
        let mut prev = None;
        let mut span = 0usize;
        let mut oplen = 1;
        while p < end {
            let op = b[p];
            oplen = 1;
            span = if is_zero(op) {
                zero_len(op)
            } else if is_xzero(op) {
                oplen = 2;
                let low = *b.get(p + 1).ok_or_else(corrupted)?;
                (usize::from(op & 0x3f) << 8 | usize::from(low)) + 1
            } else {
                val_len(op)
            };
            if index < first + span {
                break;
            }
            prev = Some(p);
            p += oplen;
            first += span;
        }
        if span == 0 || p >= end {
            return Err(corrupted());
        }
        let op = b[p];
        let last = first + span - 1;
        // Step 2: the cases Redis changes in place.
        if !is_zero(op) && !is_xzero(op) {
            if val_value(op) >= count {
                return Ok(false);
            }
            if span == 1 {
                self.bytes[p] = val_op(count, 1);
                self.merge_values_after(prev);
                return Ok(true);
            }
        }
        if is_zero(op) && span == 1 {
            self.bytes[p] = val_op(count, 1);
            self.merge_values_after(prev);
            return Ok(true);
        }
        // Step 3: the opcode split in up to three.
        let mut seq = Vec::with_capacity(5);
        if is_zero(op) || is_xzero(op) {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        } else {
            let current = val_value(op);
            if index != first {
                seq.push(val_op(current, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(current, last - index));
            }
        }
        if seq.len() > oplen && end + seq.len() - oplen > self.sparse_max_bytes {
            return self.promote_and_set(index, count);
        }
        self.bytes.splice(p..p + oplen, seq);
        self.merge_values_after(prev);
        Ok(true)
    }

    /// Step 4 of Redis's `hllSparseSet`: from the opcode before the change (or the first),
    /// looking at most five opcodes, merges adjacent VALs of one value that fit one opcode.
    fn merge_values_after(&mut self, prev: Option<usize>) {
        let mut p = prev.unwrap_or(HEADER_BYTES);
        let mut scan = SPARSE_MERGE_SCAN_OPCODES;
        while p < self.bytes.len() && scan > 0 {
            scan -= 1;
            let op = self.bytes[p];
            if is_xzero(op) {
                p += 2;
                continue;
            }
            if is_zero(op) {
                p += 1;
                continue;
            }
            if let Some(&next) = self.bytes.get(p + 1) {
                if !is_zero(next) && !is_xzero(next) && val_value(op) == val_value(next) {
                    let len = val_len(op) + val_len(next);
                    if len <= SPARSE_VAL_MAX_LEN {
                        self.bytes[p + 1] = val_op(val_value(op), len);
                        self.bytes.remove(p);
                        continue;
                    }
                }
            }
            p += 1;
        }
    }

    /// The dense encoding of the same registers, the header kept (`hllSparseToDense`).
    fn make_dense(&mut self) -> Result<()> {
        if self.is_dense() {
            return Ok(());
        }
        let regs = registers(&self.bytes)?;
        let mut out = vec![0u8; DENSE_BYTES];
        out[..HEADER_BYTES].copy_from_slice(&self.bytes[..HEADER_BYTES]);
        out[4] = ENCODING_DENSE;
        for (r, &v) in regs.iter().enumerate() {
            dense_set(&mut out[HEADER_BYTES..], r, v);
        }
        self.bytes = out;
        Ok(())
    }

    fn promote_and_set(&mut self, index: usize, count: u8) -> Result<bool> {
        self.make_dense()?;
        Ok(dense_set(&mut self.bytes[HEADER_BYTES..], index, count))
    }
}

/// Raises dense register `index` to `count` if it is lower (`hllDenseSet`).
fn dense_set(body: &mut [u8], index: usize, count: u8) -> bool {
    let bit = index * REGISTER_BITS;
    let (byte, shift) = (bit / 8, bit % 8);
    let b0 = u16::from(body[byte]);
    let b1 = u16::from(body.get(byte + 1).copied().unwrap_or(0));
    let old = (((b0 >> shift) | (b1 << (8 - shift))) as u8) & REGISTER_MAX;
    if count <= old {
        return false;
    }
    let v = u16::from(count & REGISTER_MAX) << shift;
    let mask = u16::from(REGISTER_MAX) << shift;
    body[byte] = (body[byte] & !(mask as u8)) | v as u8;
    if let Some(next) = body.get_mut(byte + 1) {
        *next = (*next & !((mask >> 8) as u8)) | (v >> 8) as u8;
    }
    true
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
    let sparse_max = ctx.shared.encodings().hll_sparse_max_bytes;
    let changed = modify_string(ctx, &args[1], None, |old| {
        let (hll, created) = match old {
            Some((v, _)) => (Hll::parse(v)?, false),
            None => (Hll::new_sparse(), true),
        };
        let mut hll = hll.sparse_max(sparse_max);
        let mut changed = created;
        for e in &args[2..] {
            let (r, run) = register_and_run(e);
            changed |= hll.set(r, run)?;
        }
        if !changed {
            return Ok((StrWrite::Keep, false));
        }
        hll.invalidate_cache();
        Ok((
            StrWrite::PutAs(hll.bytes, Expiry::Keep, Encoding::Raw),
            true,
        ))
    })?;
    if changed {
        ctx.notify(crate::notify::STRING, "pfadd", &args[1]);
    }
    Ok(Reply::Int(i64::from(changed)))
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if let [_, key] = args {
        // One key: the cached count when valid; otherwise computed and stored in the key as
        // Redis does (the dispatcher holds the exec lock's shared side, as for writes), if the
        // key is still what was counted. The store is a cache: a store that refuses writes
        // still gets its answer.
        let Some(v) = read_string(ctx, key)? else {
            return Ok(Reply::Int(0));
        };
        let hll = Hll::parse(&v)?;
        if let Some(n) = hll.cached_count() {
            return Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)));
        }
        let n = estimate(&registers(&v)?);
        let stored = modify_string(ctx, key, None, |old| match old {
            Some((current, _)) if current == &v[..] => {
                let mut hll = Hll::parse(current)?;
                hll.store_count(n);
                Ok((StrWrite::PutAs(hll.bytes, Expiry::Keep, Encoding::Raw), ()))
            }
            _ => Ok((StrWrite::Keep, ())),
        });
        match stored {
            // On the network thread: run again where waiting is allowed.
            Err(Error::WouldWait) => return Err(Error::WouldWait),
            Err(e) => tracing::debug!(error = %e, "PFCOUNT could not store the count"),
            Ok(()) => {}
        }
        return Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)));
    }
    let mut merged: Option<Vec<u8>> = None;
    for key in &args[1..] {
        let Some(v) = read_string(ctx, key)? else {
            continue;
        };
        Hll::parse(&v)?;
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
    // destination's registers are raised in place, in register order, as Redis does (dense
    // first if any input is dense), keeping its expiry. The dispatcher holds the exec lock
    // exclusively.
    let dst = &args[1];
    let mut regs = vec![0u8; REGISTERS];
    let mut any_dense = false;
    let mut existing: Option<(Hll, Option<u64>)> = None;
    for (i, key) in std::iter::once(dst).chain(&args[2..]).enumerate() {
        let record = ctx
            .db()
            .get(&string_key(ctx.dbi(), key))?
            .map(Record::decode)
            .transpose()?
            .filter(|r| !r.expired_now());
        let value = match record {
            Some(r) if r.kind == crate::keyspace::KeyType::String => {
                let hll = Hll::parse(&r.payload)?;
                any_dense |= hll.is_dense();
                if i == 0 {
                    existing = Some((hll, r.expire_at_ms));
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
    let (hll, expiry) = existing.unwrap_or_else(|| (Hll::new_sparse(), None));
    let mut hll = hll.sparse_max(ctx.shared.encodings().hll_sparse_max_bytes);
    if any_dense {
        hll.make_dense()?;
    }
    for (r, &v) in regs.iter().enumerate() {
        if v != 0 {
            hll.set(r, v)?;
        }
    }
    hll.invalidate_cache();
    ctx.db().write(vec![BatchOp::Put(
        string_key(ctx.dbi(), dst),
        Record::encode_as(&hll.bytes, expiry, Encoding::Raw),
    )])?;
    ctx.shared.note_writes(1);
    // Redis reports a merge as a PFADD.
    ctx.notify(crate::notify::STRING, "pfadd", dst);
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

    /// Registers read back what was set: sparse (until promoted), then dense, at every bit
    /// offset.
    #[test]
    fn registers_round_trip_sparse_and_dense() -> Result<()> {
        let mut hll = Hll::new_sparse();
        assert_eq!(hll.bytes.len(), HEADER_BYTES + 2);
        let mut regs = vec![0u8; REGISTERS];
        for i in (0..REGISTERS).step_by(97) {
            let v = (i * 7 % 32) as u8 + 1;
            assert!(hll.set(i, v)?);
            assert!(!hll.set(i, v)?, "not raised again");
            regs[i] = v;
        }
        assert!(!hll.is_dense());
        assert_eq!(registers(&hll.bytes)?, regs);
        hll.make_dense()?;
        assert_eq!(registers(&hll.bytes)?, regs);
        for (i, r) in regs.iter_mut().enumerate() {
            let v = (i * 7 % 64) as u8;
            hll.set(i, v)?;
            *r = (*r).max(v);
        }
        assert_eq!(registers(&hll.bytes)?, regs);
        assert_eq!(hll.bytes.len(), DENSE_BYTES);
        Ok(())
    }
}
