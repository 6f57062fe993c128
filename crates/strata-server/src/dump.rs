//! DUMP/RESTORE payloads: Redis's own format, so that values move between Redis and Strata
//! with DUMP, RESTORE and tools built on them (`redis-cli --rdb` excepted).
//!
//! A payload is `type byte | value | RDB version (u16 LE) | CRC-64 (Jones, LE) of all before`.
//! - Strings use RDB's encoding (type 0): an integer that fits 32 bits as `0xC0|0xC1|0xC2` + 1,
//!   2 or 4 bytes, otherwise a length (6-bit, 14-bit, 32-bit or 64-bit form) and the bytes.
//!   RESTORE also reads LZF-compressed strings (`0xC3`), which Redis writes for compressible
//!   strings over 20 bytes; DUMP here never compresses, so its payload for such a string differs
//!   from Redis's byte for byte while meaning the same thing to both.
//! - JSON documents use type [`TYPE_STRATA_JSON`] (outside RDB's types, so Redis refuses it with
//!   "Bad data format"): the document as JSON text, length-prefixed like a string.
//!
//! The version written is 10 (Redis 7.0's RDB version); RESTORE accepts up to it and checks
//! the checksum, as Redis does.

use crate::error::{Error, Result};

/// Most elements reserved up front from a payload's stated count: the count is checked only
/// against the payload's length, and a stated million-element set of empty members would
/// otherwise reserve tens of bytes a member before the first one is read.
const PREALLOCATED_ITEMS_MAX: usize = 4096;

/// RDB type of a string.
pub(crate) const TYPE_STRING: u8 = 0;
/// RDB type of a list as element strings (what DUMP writes here for every list; Redis 7.0
/// reads it).
pub(crate) const TYPE_LIST: u8 = 1;
/// RDB type of a list as quicklist nodes (what Redis 7.0 DUMPs; RESTORE reads it): the node
/// count, then per node its container (1: one plain element, 2: a listpack of elements) and
/// the node as a string.
pub(crate) const TYPE_LIST_QUICKLIST_2: u8 = 18;
/// RDB type of a sorted set as member strings and binary scores (what DUMP writes here).
pub(crate) const TYPE_ZSET_2: u8 = 5;
/// RDB type of a sorted set as one listpack of member, score pairs (what Redis 7.0 DUMPs for
/// small sorted sets; RESTORE reads it).
pub(crate) const TYPE_ZSET_LISTPACK: u8 = 17;
/// RDB type of a set as member strings (what DUMP writes here for every set).
pub(crate) const TYPE_SET: u8 = 2;
/// RDB type of a set of integers as one intset (what Redis 7.0 DUMPs for small integer sets;
/// RESTORE reads it).
pub(crate) const TYPE_SET_INTSET: u8 = 11;
/// RDB type of a hash as field/value strings (what DUMP writes here for every hash).
pub(crate) const TYPE_HASH: u8 = 4;
/// RDB type of a hash as one listpack (what Redis 7 DUMPs for small hashes; RESTORE reads it).
pub(crate) const TYPE_HASH_LISTPACK: u8 = 16;
/// This server's type for a JSON document (JSON text).
pub(crate) const TYPE_STRATA_JSON: u8 = 0xE0;
/// RDB version written in payloads (Redis 7.0's), and the newest accepted.
pub(crate) const RDB_VERSION: u16 = 10;
/// Largest value a RESTORE payload may declare (bounds the allocation before any byte is read).
const VALUE_BYTES_MAX: usize = 512 << 20;

/// The Jones CRC-64 Redis uses (reflected, polynomial 0xad93d23594c935a9, no final xor).
pub(crate) fn crc64(bytes: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
            *slot = crc;
        }
        t
    });
    bytes.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

fn push_length(out: &mut Vec<u8>, n: usize) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
}

/// RDB's string encoding of `v`.
fn push_string(out: &mut Vec<u8>, v: &[u8]) {
    // Integer form for canonical decimal integers of at most 11 bytes that fit 32 bits.
    if v.len() <= 11 {
        if let Some(n) = crate::num::parse_i64(v) {
            if let Ok(n) = i8::try_from(n) {
                out.extend_from_slice(&[0xC0, n as u8]);
                return;
            }
            if let Ok(n) = i16::try_from(n) {
                out.push(0xC1);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i32::try_from(n) {
                out.push(0xC2);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
        }
    }
    push_length(out, v.len());
    out.extend_from_slice(v);
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The payload of a string.
pub(crate) fn dump_string(v: &[u8]) -> Vec<u8> {
    let mut out = vec![TYPE_STRING];
    push_string(&mut out, v);
    finish(out)
}

/// The payload of a JSON document given as JSON text.
pub(crate) fn dump_json(text: &[u8]) -> Vec<u8> {
    let mut out = vec![TYPE_STRATA_JSON];
    push_length(&mut out, text.len());
    out.extend_from_slice(text);
    finish(out)
}

/// The payload of a hash (RDB type 4: the count, then each field and value as strings).
/// Redis writes small hashes as one listpack (type 16) instead; both read the other's.
pub(crate) fn dump_hash(fields: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<u8> {
    let mut out = vec![TYPE_HASH];
    push_length(&mut out, fields.len());
    for (f, v) in fields {
        push_string(&mut out, f);
        push_string(&mut out, v);
    }
    finish(out)
}

/// The payload of a list (RDB type 1: the count, then each element as a string; the pairs'
/// second halves are ignored).
pub(crate) fn dump_list(elements: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<u8> {
    let mut out = vec![TYPE_LIST];
    push_length(&mut out, elements.len());
    for (e, _) in elements {
        push_string(&mut out, e);
    }
    finish(out)
}

/// The payload of a sorted set (RDB type 5: the count, then each member as a string and its
/// score as a little-endian f64); `entries` hold the scores' LE bytes.
pub(crate) fn dump_zset(entries: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<u8> {
    let mut out = vec![TYPE_ZSET_2];
    push_length(&mut out, entries.len());
    for (m, score) in entries {
        push_string(&mut out, m);
        out.extend_from_slice(score);
    }
    finish(out)
}

/// The payload of a set (RDB type 2: the count, then each member as a string; the element
/// pairs' values are ignored). Redis writes sets of integers as one intset (type 11) instead.
pub(crate) fn dump_set(members: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<u8> {
    let mut out = vec![TYPE_SET];
    push_length(&mut out, members.len());
    for (m, _) in members {
        push_string(&mut out, m);
    }
    finish(out)
}

/// A value read from a payload.
#[derive(Debug, PartialEq)]
pub(crate) enum Restored {
    String(Vec<u8>),
    /// Fields and values, duplicates refused.
    Hash(Vec<(bytes::Bytes, bytes::Bytes)>),
    /// Members, duplicates refused.
    Set(Vec<bytes::Bytes>),
    /// Elements in order.
    List(Vec<bytes::Bytes>),
    /// Members and scores, duplicates refused.
    Zset(Vec<(bytes::Bytes, f64)>),
    /// JSON text.
    Json(Vec<u8>),
}

/// Checks the footer: `Err` with Redis's message when the version is newer or the checksum
/// does not match.
pub(crate) fn verify(payload: &[u8]) -> Result<&[u8]> {
    let wrong = || Error::command("DUMP payload version or checksum are wrong");
    if payload.len() < 10 {
        return Err(wrong());
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    if version > RDB_VERSION {
        return Err(wrong());
    }
    let crc = u64::from_le_bytes(footer.try_into().map_err(|_| wrong())?);
    if crc64(body) != crc {
        return Err(wrong());
    }
    Ok(&body[..body.len() - 2])
}

/// RDB's opcode before each function library in a FUNCTION DUMP payload
/// (`RDB_OPCODE_FUNCTION2`).
const OPCODE_FUNCTION2: u8 = 245;

/// FUNCTION DUMP's payload: each library's code after the opcode, then the version and
/// checksum, as Redis 7.0 writes it.
pub(crate) fn dump_functions<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        push_string(&mut out, code);
    }
    finish(out)
}

/// The library codes of a FUNCTION DUMP payload, with Redis's errors.
pub(crate) fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>> {
    let body = verify(payload)?;
    let mut r = Reader { bytes: body };
    let mut codes = Vec::new();
    while let Some(opcode) = r.byte() {
        if opcode != OPCODE_FUNCTION2 {
            return Err(Error::command("given type is not a function"));
        }
        codes.push(
            r.string()
                .ok_or_else(|| Error::command("failed loading the given functions payload"))?,
        );
    }
    Ok(codes)
}

/// A bounds-checked reader over a payload's value.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A length, or the special encoding byte (`Err(low 6 bits)`) of an encoded string.
    fn length(&mut self) -> Option<Result<usize, u8>> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Ok(usize::from(first & 0x3f)),
            1 => Ok((usize::from(first & 0x3f) << 8) | usize::from(self.byte()?)),
            2 if first == 0x80 => Ok(u32::from_be_bytes(self.take(4)?.try_into().ok()?) as usize),
            2 if first == 0x81 => {
                usize::try_from(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
                    .ok()
                    .map(Ok)?
            }
            3 => Err(first & 0x3f),
            _ => return None,
        })
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        match self.length()? {
            Ok(n) if n <= VALUE_BYTES_MAX => self.take(n).map(<[u8]>::to_vec),
            Ok(_) => None,
            Err(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Some(
                i16::from_le_bytes(self.take(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(2) => Some(
                i32::from_le_bytes(self.take(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(3) => {
                let compressed = self.length()?.ok()?;
                let len = self.length()?.ok()?;
                if len > VALUE_BYTES_MAX {
                    return None;
                }
                lzf_decompress(self.take(compressed)?, len)
            }
            Err(_) => None,
        }
    }
}

/// LZF decompression (the format of liblzf, which Redis uses for long strings).
fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    // The declared length is not trusted for the allocation: LZF expands at most 264 bytes per
    // 2 input bytes, so a length beyond that is a lie found once the input runs out.
    let mut out = Vec::with_capacity(len.min(input.len().saturating_mul(132)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(input.get(i..i + run)?);
            i += run;
        } else {
            let mut run = ctrl >> 5;
            if run == 7 {
                run += usize::from(*input.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..run + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// Reads a verified payload's value: `Err` with Redis's "Bad data format" for a type this
/// server does not hold or bytes that do not parse.
pub(crate) fn restore(payload: &[u8]) -> Result<Restored> {
    let bad = || Error::command("Bad data format");
    let body = verify(payload)?;
    let mut r = Reader { bytes: body };
    let value = match r.byte().ok_or_else(bad)? {
        TYPE_STRING => Restored::String(r.string().ok_or_else(bad)?),
        TYPE_STRATA_JSON => {
            let n = r.length().and_then(Result::ok).ok_or_else(bad)?;
            Restored::Json(r.take(n).ok_or_else(bad)?.to_vec())
        }
        TYPE_HASH => {
            let n = r.length().and_then(Result::ok).ok_or_else(bad)?;
            // Each pair takes at least 2 bytes: a count the payload cannot hold is refused
            // before anything is allocated for it.
            if n > r.bytes.len() / 2 {
                return Err(bad());
            }
            let mut pairs = Vec::with_capacity(n.min(PREALLOCATED_ITEMS_MAX));
            for _ in 0..n {
                let f = r.string().ok_or_else(bad)?;
                let v = r.string().ok_or_else(bad)?;
                pairs.push((bytes::Bytes::from(f), bytes::Bytes::from(v)));
            }
            Restored::Hash(unique_fields(pairs).ok_or_else(bad)?)
        }
        TYPE_ZSET_2 => {
            let n = r.length().and_then(Result::ok).ok_or_else(bad)?;
            if n == 0 || n > r.bytes.len() / 9 {
                return Err(bad());
            }
            let mut entries = Vec::with_capacity(n.min(PREALLOCATED_ITEMS_MAX));
            for _ in 0..n {
                let m = bytes::Bytes::from(r.string().ok_or_else(bad)?);
                let score: [u8; 8] = r.take(8).and_then(|b| b.try_into().ok()).ok_or_else(bad)?;
                let score = f64::from_le_bytes(score);
                if score.is_nan() {
                    return Err(bad());
                }
                entries.push((m, bytes::Bytes::copy_from_slice(&score.to_le_bytes())));
            }
            zset_restored(entries).ok_or_else(bad)?
        }
        TYPE_ZSET_LISTPACK => {
            let lp = r.string().ok_or_else(bad)?;
            let items = listpack_entries(&lp).ok_or_else(bad)?;
            if items.len() % 2 != 0 {
                return Err(bad());
            }
            let mut entries = Vec::with_capacity(items.len() / 2);
            for pair in items.chunks_exact(2) {
                let score = crate::num::parse_f64(&pair[1]).ok_or_else(bad)?;
                entries.push((
                    bytes::Bytes::from(pair[0].clone()),
                    bytes::Bytes::copy_from_slice(&score.to_le_bytes()),
                ));
            }
            zset_restored(entries).ok_or_else(bad)?
        }
        TYPE_LIST => {
            let n = r.length().and_then(Result::ok).ok_or_else(bad)?;
            if n == 0 || n > r.bytes.len() {
                return Err(bad());
            }
            let mut elements = Vec::with_capacity(n.min(PREALLOCATED_ITEMS_MAX));
            for _ in 0..n {
                elements.push(bytes::Bytes::from(r.string().ok_or_else(bad)?));
            }
            Restored::List(elements)
        }
        TYPE_LIST_QUICKLIST_2 => {
            let nodes = r.length().and_then(Result::ok).ok_or_else(bad)?;
            if nodes == 0 || nodes > r.bytes.len() {
                return Err(bad());
            }
            let mut elements = Vec::new();
            for _ in 0..nodes {
                let container = r.length().and_then(Result::ok).ok_or_else(bad)?;
                let node = r.string().ok_or_else(bad)?;
                match container {
                    1 => elements.push(bytes::Bytes::from(node)),
                    2 => {
                        let items = listpack_entries(&node).ok_or_else(bad)?;
                        if items.is_empty() {
                            return Err(bad());
                        }
                        elements.extend(items.into_iter().map(bytes::Bytes::from));
                    }
                    _ => return Err(bad()),
                }
            }
            Restored::List(elements)
        }
        TYPE_SET => {
            let n = r.length().and_then(Result::ok).ok_or_else(bad)?;
            if n > r.bytes.len() {
                return Err(bad());
            }
            let mut members = Vec::with_capacity(n.min(PREALLOCATED_ITEMS_MAX));
            for _ in 0..n {
                members.push((
                    bytes::Bytes::from(r.string().ok_or_else(bad)?),
                    bytes::Bytes::new(),
                ));
            }
            let members = unique_fields(members).ok_or_else(bad)?;
            Restored::Set(members.into_iter().map(|(m, _)| m).collect())
        }
        TYPE_SET_INTSET => {
            let blob = r.string().ok_or_else(bad)?;
            let members = intset_members(&blob).ok_or_else(bad)?;
            let members: Vec<_> = members
                .into_iter()
                .map(|m| (m, bytes::Bytes::new()))
                .collect();
            let members = unique_fields(members).ok_or_else(bad)?;
            Restored::Set(members.into_iter().map(|(m, _)| m).collect())
        }
        TYPE_HASH_LISTPACK => {
            let lp = r.string().ok_or_else(bad)?;
            let items = listpack_entries(&lp).ok_or_else(bad)?;
            if items.len() % 2 != 0 {
                return Err(bad());
            }
            let pairs = items
                .chunks_exact(2)
                .map(|p| {
                    (
                        bytes::Bytes::from(p[0].clone()),
                        bytes::Bytes::from(p[1].clone()),
                    )
                })
                .collect();
            Restored::Hash(unique_fields(pairs).ok_or_else(bad)?)
        }
        _ => return Err(bad()),
    };
    if !r.bytes.is_empty() {
        return Err(bad());
    }
    Ok(value)
}

/// A sorted set's restored members (score bytes as little-endian f64), each once.
fn zset_restored(entries: Vec<(bytes::Bytes, bytes::Bytes)>) -> Option<Restored> {
    Some(Restored::Zset(
        unique_fields(entries)?
            .into_iter()
            .map(|(m, s)| (m, f64::from_le_bytes(s[..].try_into().unwrap_or_default())))
            .collect(),
    ))
}

/// `pairs` if no field repeats (Redis refuses a payload with a duplicate field), and not empty.
fn unique_fields(
    pairs: Vec<(bytes::Bytes, bytes::Bytes)>,
) -> Option<Vec<(bytes::Bytes, bytes::Bytes)>> {
    let mut seen = std::collections::HashSet::new();
    let unique = pairs.iter().all(|(f, _)| seen.insert(f.clone()));
    (unique && !pairs.is_empty()).then_some(pairs)
}

/// The members of an intset (Redis's sorted integer array): encoding u32 LE (bytes per
/// integer: 2, 4 or 8), count u32 LE, then the integers little-endian, as decimal text.
fn intset_members(blob: &[u8]) -> Option<Vec<bytes::Bytes>> {
    let width = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + width.checked_mul(count)? {
        return None;
    }
    Some(
        blob[8..]
            .chunks_exact(width)
            .map(|c| {
                let n = match width {
                    2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
                    4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                    _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
                };
                bytes::Bytes::from(n.to_string())
            })
            .collect(),
    )
}

/// The entries of a listpack (Redis's compact list encoding, `listpack.md` in Redis): total
/// bytes u32 LE, entry count u16 LE, entries, `0xFF`. Each entry is an encoding byte (small
/// integers and string lengths), its data, and a back-length of 1-5 bytes. Integers come back
/// as their decimal text, as Redis's commands see them. `None` when anything does not add up.
fn listpack_entries(lp: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = u32::from_le_bytes(lp.get(..4)?.try_into().ok()?) as usize;
    if total != lp.len() || *lp.last()? != 0xFF {
        return None;
    }
    let mut i = 6;
    let mut out = Vec::new();
    let sign_extend = |v: u64, bits: u32| -> i64 {
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    };
    while *lp.get(i)? != 0xFF {
        let b = lp[i];
        let (entry, len) = if b & 0x80 == 0 {
            (i64::from(b & 0x7f).to_string().into_bytes(), 1)
        } else if b & 0xC0 == 0x80 {
            let n = usize::from(b & 0x3f);
            (lp.get(i + 1..i + 1 + n)?.to_vec(), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let v = (u64::from(b & 0x1f) << 8) | u64::from(*lp.get(i + 1)?);
            (sign_extend(v, 13).to_string().into_bytes(), 2)
        } else if b & 0xF0 == 0xE0 {
            let n = (usize::from(b & 0x0f) << 8) | usize::from(*lp.get(i + 1)?);
            (lp.get(i + 2..i + 2 + n)?.to_vec(), 2 + n)
        } else {
            let int = |n: usize| -> Option<Vec<u8>> {
                let mut le = [0u8; 8];
                le[..n].copy_from_slice(lp.get(i + 1..i + 1 + n)?);
                let v = sign_extend(u64::from_le_bytes(le), 8 * n as u32);
                Some(v.to_string().into_bytes())
            };
            match b {
                0xF0 => {
                    let n = u32::from_le_bytes(lp.get(i + 1..i + 5)?.try_into().ok()?) as usize;
                    (lp.get(i + 5..i + 5 + n)?.to_vec(), 5 + n)
                }
                0xF1 => (int(2)?, 3),
                0xF2 => (int(3)?, 4),
                0xF3 => (int(4)?, 5),
                0xF4 => (int(8)?, 9),
                _ => return None,
            }
        };
        // The back-length: `len` in 7-bit groups, 1 to 5 bytes.
        let back = match len {
            0..=127 => 1,
            128..=16_383 => 2,
            16_384..=2_097_151 => 3,
            2_097_152..=268_435_455 => 4,
            _ => 5,
        };
        i = i.checked_add(len + back)?;
        out.push(entry);
    }
    let count = u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?);
    (i + 1 == lp.len() && (count == u16::MAX || usize::from(count) == out.len())).then_some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn crc64_is_redis_jones_crc() {
        // The check value in Redis's crc64.c.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    /// Payloads read off redis-server 7.0 with `DUMP`.
    #[test]
    fn payloads_match_redis_dump() {
        let hex = |s: &str| {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect::<Vec<u8>>()
        };
        for (value, payload) in [
            (&b"hello"[..], "000568656c6c6f0a006372df766534200a"),
            (b"7", "00c0070a0074cd48a283abce92"),
        ] {
            assert_eq!(dump_string(value), hex(payload), "{value:?}");
            assert_eq!(
                restore(&hex(payload)).unwrap(),
                Restored::String(value.to_vec())
            );
        }
    }

    #[test]
    fn round_trips_and_damage() {
        for v in [
            &b""[..],
            b"0",
            b"-1",
            b"127",
            b"-128",
            b"128",
            b"32767",
            b"-32769",
            b"2147483647",
            b"2147483648",
            b"007",
            b"+1",
            &[7u8; 70],
            &[9u8; 20_000],
        ] {
            let p = dump_string(v);
            assert_eq!(restore(&p).unwrap(), Restored::String(v.to_vec()), "{v:?}");
            for i in 0..p.len() {
                let mut bad = p.clone();
                bad[i] ^= 0x20;
                assert!(restore(&bad).is_err(), "flipped byte {i} of {v:?} accepted");
            }
        }
        let fields: Vec<(bytes::Bytes, bytes::Bytes)> = (0..50)
            .map(|i| (format!("f{i}").into(), i.to_string().repeat(i % 4).into()))
            .collect();
        let p = dump_hash(&fields);
        assert_eq!(restore(&p).unwrap(), Restored::Hash(fields));
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0x08;
            assert!(
                restore(&bad).is_err(),
                "flipped byte {i} of a hash accepted"
            );
        }
        // A repeated field, and an empty hash, are bad data (Redis refuses both).
        let dup = vec![("a".into(), "1".into()), ("a".into(), "2".into())];
        assert!(restore(&dump_hash(&dup)).is_err());
        assert!(restore(&dump_hash(&[])).is_err());
        let j = dump_json(br#"{"a":1}"#);
        assert_eq!(restore(&j).unwrap(), Restored::Json(br#"{"a":1}"#.to_vec()));
        assert!(restore(b"short").is_err());
    }

    #[test]
    fn a_declared_length_the_data_cannot_fill_is_bad_data() {
        // 0xC3, compressed length 2, declared length 500 MB, a 2-byte literal run.
        let mut body = vec![TYPE_STRING, 0xC3, 2, 0x80];
        body.extend_from_slice(&500_000_000u32.to_be_bytes());
        body.extend_from_slice(&[0x00, b'a']);
        assert!(restore(&finish(body)).is_err());
    }

    #[test]
    fn lzf_strings_from_redis_restore() {
        // 30 times "a" as redis-server 7.0 DUMPs it: LZF-compressed (0xC3).
        let p = "00c3091e016161e011000161610a0045737cbb2b647bbb";
        let p: Vec<u8> = (0..p.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&p[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(restore(&p).unwrap(), Restored::String(vec![b'a'; 30]));
    }
}
