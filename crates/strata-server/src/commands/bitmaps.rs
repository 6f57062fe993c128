//! Bit commands on strings: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO, with
//! redis-server 7.0's replies and errors. A bitmap is a string record; bit `n` is bit `7 - n % 8` of byte `n / 8`
//! (the most significant bit first), and a string is zero-padded to the right as far as any
//! command reads or writes.

use bytes::Bytes;

use super::strings::{modify_string, read_string, Expiry, StrWrite};
use super::{is, Ctx, Spec, READ, WRITE};
use crate::backend::BatchOp;
use crate::error::{Error, Result};
use crate::keyspace::{string_key, Encoding, Record};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "setbit", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "bitmap", summary: "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", handler: setbit },
    Spec { name: "getbit", arity: 3, flags: &["readonly", "fast"], keys: (1, 1, 1), group: "bitmap", summary: "Returns a bit value by offset.", handler: getbit },
    Spec { name: "bitcount", arity: -2, flags: READ, keys: (1, 1, 1), group: "bitmap", summary: "Counts the number of set bits (population counting) in a string.", handler: bitcount },
    Spec { name: "bitpos", arity: -3, flags: READ, keys: (1, 1, 1), group: "bitmap", summary: "Finds the first set (1) or clear (0) bit in a string.", handler: bitpos },
    Spec { name: "bitfield", arity: -2, flags: WRITE, keys: (1, 1, 1), group: "bitmap", summary: "Performs arbitrary bitfield integer operations on strings.", handler: bitfield },
    Spec { name: "bitfield_ro", arity: -2, flags: &["readonly", "fast"], keys: (1, 1, 1), group: "bitmap", summary: "Performs arbitrary read-only bitfield integer operations on strings.", handler: bitfield_ro },
    Spec { name: "bitop", arity: -4, flags: WRITE, keys: (2, -1, 1), group: "bitmap", summary: "Performs bitwise operations on multiple strings, and stores the result.", handler: bitop },
];

/// A bit offset argument, with Redis's check (`getBitOffsetFromArgument`): a non-negative
/// integer whose byte lies within `proto-max-bulk-len`.
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8]) -> Result<u64> {
    let max_bytes = ctx.shared.config().proto_max_bulk_len_bytes as u64;
    crate::num::parse_i64(arg)
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| n >> 3 < max_bytes)
        .ok_or_else(|| Error::command("bit offset is not an integer or out of range"))
}

/// Bit `n` of `bytes` (0 past the end).
fn bit_at(bytes: &[u8], n: u64) -> bool {
    usize::try_from(n >> 3)
        .ok()
        .and_then(|i| bytes.get(i))
        .is_some_and(|b| b & (0x80 >> (n & 7)) != 0)
}

fn setbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let offset = bit_offset(ctx, &args[2])?;
    let on = match crate::num::parse_i64(&args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(Error::command("bit is not an integer or out of range")),
    };
    let byte = usize::try_from(offset >> 3)
        .map_err(|_| Error::command("bit offset is not an integer or out of range"))?;
    let mut wrote = false;
    let old = modify_string(ctx, &args[1], None, |old| {
        wrote = false;
        let existed = old.is_some();
        let mut v = old.map(|(v, _)| v.to_vec()).unwrap_or_default();
        let grown = v.len() <= byte;
        if grown {
            v.resize(byte + 1, 0);
        }
        let mask = 0x80u8 >> (offset & 7);
        let was = v[byte] & mask != 0;
        if existed && !grown && was == on {
            // No bit changes: no write, and WATCH sees none (Redis's setbitCommand).
            return Ok((StrWrite::Unchanged(v), was));
        }
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        wrote = true;
        Ok((StrWrite::PutAs(v, Expiry::Keep, Encoding::Raw), was))
    })?;
    if wrote {
        ctx.notify(crate::notify::STRING, "setbit", &args[1]);
    }
    Ok(Reply::Int(i64::from(old)))
}

fn getbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let offset = bit_offset(ctx, &args[2])?;
    let value = read_string(ctx, &args[1])?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(&value, offset))))
}

/// The bits of byte `i` that lie in `[first, last]`.
fn range_mask(i: u64, first: u64, last: u64) -> u8 {
    let mut mask = 0xFFu8;
    if i == first >> 3 {
        mask &= 0xFF >> (first & 7);
    }
    if i == last >> 3 {
        mask &= 0xFF << (7 - (last & 7));
    }
    mask
}

/// Byte `i` of `bytes` (0 past the end: the string is zero-padded).
fn byte_at(bytes: &[u8], i: u64) -> u8 {
    usize::try_from(i)
        .ok()
        .and_then(|i| bytes.get(i))
        .copied()
        .unwrap_or(0)
}

/// Set bits in `[first, last]`, a byte at a time.
fn count_bits(bytes: &[u8], first: u64, last: u64) -> u64 {
    (first >> 3..=last >> 3)
        .map(|i| u64::from((byte_at(bytes, i) & range_mask(i, first, last)).count_ones()))
        .sum()
}

/// The first bit in `[first, last]` equal to `bit`, a byte at a time.
fn find_bit(bytes: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    (first >> 3..=last >> 3).find_map(|i| {
        let b = byte_at(bytes, i);
        let candidates = if bit { b } else { !b } & range_mask(i, first, last);
        (candidates != 0).then(|| (i << 3) + u64::from(candidates.leading_zeros()))
    })
}

/// The bits `[first, last]` a BITCOUNT / BITPOS range selects in a string of `len` bytes
/// (`start`, `end` in bytes, or in bits with `bits`), negative indexes from the end, clamped to
/// the string; `None` when it selects nothing.
fn bit_span(start: i64, end: i64, bits: bool, len: usize) -> Option<(u64, u64)> {
    let total = if bits { (len as i64) << 3 } else { len as i64 };
    let norm = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (norm(start), norm(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if bits {
        (start, end)
    } else {
        (start << 3, (end << 3) + 7)
    })
}

/// BYTE or BIT (true for BIT), else a syntax error.
fn unit_arg(arg: &[u8]) -> Result<bool> {
    if is(arg, "BIT") {
        Ok(true)
    } else if is(arg, "BYTE") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

fn bitcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis 7.0 looks the key up first: an absent key counts 0 whatever the arguments.
    let Some(value) = read_string(ctx, &args[1])? else {
        return Ok(Reply::Int(0));
    };
    let span = match args.len() {
        2 => bit_span(0, -1, false, value.len()),
        4 | 5 => {
            let (start, end) = (super::int_arg(&args[2])?, super::int_arg(&args[3])?);
            // Redis answers a reversed negative range before it reads the unit.
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let bits = match args.get(4) {
                Some(u) => unit_arg(u)?,
                None => false,
            };
            bit_span(start, end, bits, value.len())
        }
        _ => return Err(Error::Syntax),
    };
    let Some((first, last)) = span else {
        return Ok(Reply::Int(0));
    };
    Ok(Reply::Int(count_bits(&value, first, last) as i64))
}

fn bitpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let bit = match super::int_arg(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(Error::command("The bit argument must be 1 or 0.")),
    };
    // An absent key is an endless run of 0 bits.
    let Some(value) = read_string(ctx, &args[1])? else {
        return Ok(Reply::Int(if bit { -1 } else { 0 }));
    };
    let (span, end_given) = match args.len() {
        3 => (bit_span(0, -1, false, value.len()), false),
        4..=6 => {
            let start = super::int_arg(&args[3])?;
            let bits = match args.get(5) {
                Some(u) => unit_arg(u)?,
                None => false,
            };
            let (end, given) = match args.get(4) {
                Some(e) => (super::int_arg(e)?, true),
                None => (-1, false),
            };
            (bit_span(start, end, bits, value.len()), given)
        }
        _ => return Err(Error::Syntax),
    };
    let Some((first, last)) = span else {
        return Ok(Reply::Int(-1));
    };
    if let Some(n) = find_bit(&value, bit, first, last) {
        return Ok(Reply::Int(n as i64));
    }
    // No clear bit in range: without an explicit end the string counts as padded with zeros,
    // so the answer is the first bit after the bytes looked at.
    Ok(Reply::Int(if bit || end_given {
        -1
    } else {
        ((last | 7) + 1) as i64
    }))
}

fn bitop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = if is(&args[1], "AND") {
        Op::And
    } else if is(&args[1], "OR") {
        Op::Or
    } else if is(&args[1], "XOR") {
        Op::Xor
    } else if is(&args[1], "NOT") {
        Op::Not
    } else {
        return Err(Error::Syntax);
    };
    if op == Op::Not && args.len() != 4 {
        return Err(Error::command(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    // Absent keys are empty strings; another kind is WRONGTYPE.
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        sources.push(read_string(ctx, key)?.unwrap_or_default());
    }
    let len = sources.iter().map(Bytes::len).max().unwrap_or(0);
    let byte = |s: &Bytes, i: usize| s.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| match op {
            Op::Not => !byte(&sources[0], i),
            _ => sources[1..].iter().fold(byte(&sources[0], i), |acc, s| {
                let b = byte(s, i);
                match op {
                    Op::And => acc & b,
                    Op::Or => acc | b,
                    _ => acc ^ b,
                }
            }),
        })
        .collect();
    // The destination is replaced whatever it held (its expiry too), or deleted when the
    // result is empty: one batch. The dispatcher holds the exec lock exclusively.
    let dst = &args[2];
    let mut ops = Vec::new();
    let existed = super::keys::ops_removing(ctx, ctx.dbi(), dst, &mut ops)?;
    if !result.is_empty() {
        ops.push(BatchOp::Put(
            string_key(ctx.dbi(), dst),
            Record::encode_as(&result, None, Encoding::Raw),
        ));
    }
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    if !result.is_empty() {
        ctx.notify(crate::notify::STRING, "set", dst);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", dst);
    }
    Ok(Reply::Int(len as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit spans by hand: bytes and bits, negative indexes, clamping, empty ranges.
    #[test]
    fn spans_follow_redis_index_rules() {
        assert_eq!(bit_span(0, -1, false, 3), Some((0, 23)));
        assert_eq!(bit_span(1, 1, false, 3), Some((8, 15)));
        assert_eq!(bit_span(-2, -1, false, 3), Some((8, 23)));
        assert_eq!(bit_span(5, 100, true, 1), Some((5, 7)));
        assert_eq!(bit_span(-100, 0, false, 3), Some((0, 7)));
        assert_eq!(bit_span(2, 1, false, 3), None);
        assert_eq!(bit_span(0, -1, false, 0), None);
        assert!(bit_at(&[0b0100_0000], 1) && !bit_at(&[0b0100_0000], 0) && !bit_at(&[], 9));
    }

    /// The byte-at-a-time count and search against a bit-by-bit walk (the model).
    #[test]
    fn bytewise_count_and_search_agree_with_a_bit_walk() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        for _ in 0..3000 {
            let bytes: Vec<u8> = (0..rng.gen_range(0..6))
                .map(|_| [0u8, 0xFF, rng.gen()][rng.gen_range(0..3)])
                .collect();
            let first = rng.gen_range(0..50u64);
            let last = rng.gen_range(first..first + 40);
            let walk_count = (first..=last).filter(|&n| bit_at(&bytes, n)).count() as u64;
            assert_eq!(count_bits(&bytes, first, last), walk_count);
            for bit in [false, true] {
                let walk = (first..=last).find(|&n| bit_at(&bytes, n) == bit);
                assert_eq!(
                    find_bit(&bytes, bit, first, last),
                    walk,
                    "{bytes:?} {first} {last} {bit}"
                );
            }
        }
    }
}

/// What a BITFIELD INCRBY or SET does when the result does not fit the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// Modulo the field's range (the default).
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Write nothing; the reply is nil.
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation: an integer field of `bits` bits at bit `offset`.
#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// A field type argument: `i1`..`i64` or `u1`..`u63` (Redis's `getBitfieldTypeFromArgument`).
fn field_type(arg: &[u8]) -> Result<(bool, u32)> {
    let invalid = || {
        Error::command(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, rest) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(invalid()),
    };
    let bits = crate::num::parse_i64(rest).ok_or_else(invalid)?;
    let max = if signed { 64 } else { 63 };
    match u32::try_from(bits) {
        Ok(b) if (1..=max).contains(&b) => Ok((signed, b)),
        _ => Err(invalid()),
    }
}

/// A field offset argument: bits, or `#n` for the `n`-th field of this width.
fn field_offset(ctx: &Ctx<'_>, arg: &[u8], bits: u32) -> Result<u64> {
    let invalid = || Error::command("bit offset is not an integer or out of range");
    let (times, digits) = match arg.split_first() {
        Some((b'#', rest)) => (i64::from(bits), rest),
        _ => (1, arg),
    };
    let n = crate::num::parse_i64(digits)
        .and_then(|n| n.checked_mul(times))
        .ok_or_else(invalid)?;
    let max_bytes = ctx.shared.config().proto_max_bulk_len_bytes as u64;
    u64::try_from(n)
        .ok()
        .filter(|n| n >> 3 < max_bytes)
        .ok_or_else(invalid)
}

/// Parses BITFIELD's operations in order; the first bad one is the error (Redis checks a
/// field's type, then its offset, then its value).
fn parse_fields(ctx: &Ctx<'_>, args: &[Bytes]) -> Result<Vec<Field>> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let sub = &args[i];
        let takes_value = if is(sub, "GET") && left >= 2 {
            false
        } else if (is(sub, "SET") || is(sub, "INCRBY")) && left >= 3 {
            true
        } else if is(sub, "OVERFLOW") && left >= 1 {
            let kind = &args[i + 1];
            overflow = if is(kind, "WRAP") {
                Overflow::Wrap
            } else if is(kind, "SAT") {
                Overflow::Sat
            } else if is(kind, "FAIL") {
                Overflow::Fail
            } else {
                return Err(Error::command("Invalid OVERFLOW type specified"));
            };
            i += 2;
            continue;
        } else {
            return Err(Error::Syntax);
        };
        let (signed, bits) = field_type(&args[i + 1])?;
        let offset = field_offset(ctx, &args[i + 2], bits)?;
        let op = if takes_value {
            let v = crate::num::parse_i64(&args[i + 3]).ok_or(Error::NotInteger)?;
            if is(sub, "SET") {
                FieldOp::Set(v)
            } else {
                FieldOp::IncrBy(v)
            }
        } else {
            FieldOp::Get
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        i += if takes_value { 4 } else { 3 };
    }
    Ok(fields)
}

/// The `bits`-bit unsigned integer at bit `offset` of `bytes`, most significant bit first
/// (zero past the end).
fn get_field(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |v, j| (v << 1) | u64::from(bit_at(bytes, offset + j)))
}

/// Writes the low `bits` bits of `value` at bit `offset` of `bytes` (long enough).
fn set_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let bit = offset + j;
        let Some(b) = usize::try_from(bit >> 3)
            .ok()
            .and_then(|i| bytes.get_mut(i))
        else {
            return;
        };
        let mask = 0x80u8 >> (bit & 7);
        if (value >> (u64::from(bits) - 1 - j)) & 1 == 1 {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
}

/// The field's stored bits read as its type.
fn field_value(raw: u64, signed: bool, bits: u32) -> i128 {
    if signed && bits < 64 && raw & (1 << (bits - 1)) != 0 {
        i128::from(raw | (u64::MAX << bits)) - (1i128 << 64)
    } else if signed {
        i128::from(raw as i64)
    } else {
        i128::from(raw)
    }
}

/// `sum` brought into the field's range by `overflow`, or `None` when it does not fit and the
/// policy is FAIL. A SET of a negative value to an unsigned field is its two's complement, as in
/// Redis (so it overflows upwards).
fn fit(sum: i128, signed: bool, bits: u32, overflow: Overflow) -> Option<i128> {
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if (min..=max).contains(&sum) {
        return Some(sum);
    }
    match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if sum > max { max } else { min }),
        Overflow::Wrap => {
            let modulus = 1i128 << bits;
            let low = sum.rem_euclid(modulus);
            Some(if signed && low > max {
                low - modulus
            } else {
                low
            })
        }
    }
}

/// The replies of `fields` run on `value` (padded as needed for writes), how many writes
/// changed a field, and how many writes were made (an overflow under FAIL makes none).
fn run_fields(value: &mut [u8], fields: &[Field]) -> (Vec<Reply>, usize, usize) {
    let mut changes = 0;
    let mut writes = 0;
    let replies = fields
        .iter()
        .map(|f| {
            let old = field_value(get_field(value, f.offset, f.bits), f.signed, f.bits);
            let (sum, reply_new) = match f.op {
                FieldOp::Get => return Reply::Int(old as i64),
                // An unsigned field takes the value's two's complement (Redis's cast).
                FieldOp::Set(v) if !f.signed => (i128::from(v as u64), false),
                FieldOp::Set(v) => (i128::from(v), false),
                FieldOp::IncrBy(by) => (old + i128::from(by), true),
            };
            match fit(sum, f.signed, f.bits, f.overflow) {
                None => Reply::Nil,
                Some(new) => {
                    changes += usize::from(new != old);
                    writes += 1;
                    set_field(value, f.offset, f.bits, new as u64);
                    Reply::Int(if reply_new { new } else { old } as i64)
                }
            }
        })
        .collect();
    (replies, changes, writes)
}

/// BITFIELD: GET, SET, INCRBY of integer fields of 1-64 bits at any bit offset, OVERFLOW
/// WRAP|SAT|FAIL for what follows. Only GETs: a read (no key is made). Any write: one atomic
/// rewrite of the string, first padded with zeros to the farthest bit written (even when every
/// write fails), as Redis does.
fn bitfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO: BITFIELD's GETs only.
fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bitfield_generic(ctx, args, true)
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> Result<Reply> {
    let fields = parse_fields(ctx, args)?;
    let farthest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max();
    let Some(farthest) = farthest else {
        let value = read_string(ctx, &args[1])?.unwrap_or_default();
        let mut copy = value.to_vec();
        return Ok(Reply::Array(run_fields(&mut copy, &fields).0));
    };
    if read_only {
        return Err(Error::command(
            "BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let len = usize::try_from(farthest >> 3)
        .ok()
        .and_then(|b| b.checked_add(1))
        .ok_or_else(max_bit_error)?;
    let mut wrote = false;
    let (replies, changes) = modify_string(ctx, &args[1], None, |old| {
        let existed = old.is_some();
        let mut v = old.map(|(v, _)| v.to_vec()).unwrap_or_default();
        let grown = v.len() < len;
        if grown {
            v.resize(len, 0);
        }
        let (replies, changes, writes) = run_fields(&mut v, &fields);
        // Redis counts every write to a new or grown string as a change, and reports the
        // command when anything changed.
        wrote = if existed && !grown { changes } else { writes } > 0;
        if existed && !grown && changes == 0 {
            // Every write left its field as it was: no write, and WATCH sees none (Redis
            // counts changed fields, not changed bytes).
            return Ok((StrWrite::Unchanged(v), (replies, 0)));
        }
        Ok((
            StrWrite::PutAs(v, Expiry::Keep, Encoding::Raw),
            (replies, changes),
        ))
    })?;
    // Redis counts each changed field as a change since the last save; the write counted one.
    ctx.shared
        .note_writes(u64::try_from(changes.saturating_sub(1)).unwrap_or(u64::MAX));
    if wrote {
        ctx.notify(crate::notify::STRING, "setbit", &args[1]);
    }
    Ok(Reply::Array(replies))
}

fn max_bit_error() -> Error {
    Error::command("bit offset is not an integer or out of range")
}
