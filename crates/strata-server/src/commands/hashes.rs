//! Hash commands: HSET HSETNX HMSET HGET HMGET HGETALL HDEL HEXISTS HLEN HKEYS HVALS HSTRLEN
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, with redis-server 7's replies and errors.
//!
//! A hash is a record plus one engine key per field (`collection.rs`). Every write is one
//! [`crate::backend::KvBackend::update_group`] on the key's partition: the record and the fields
//! it touches are read and written atomically, so a command is all-or-nothing and concurrent
//! writers of one hash take turns. Reads take no lock: the fields of one version are read at
//! one engine snapshot (MGET's `multi_get`, a scan).
//!
//! Fields come back as Redis answers them where its order is fixed: a hash in the compact
//! encoding (a listpack: at most `hash-max-listpack-entries` fields, none longer than
//! `hash-max-listpack-value`) in the order its fields were added (its record keeps that order,
//! `collection::FieldOrder`), for HGETALL, HKEYS, HVALS, HSCAN and HRANDFIELD; a larger one
//! (a hash table in Redis, whose order no client can rely on) in position order.

use bytes::Bytes;

use super::collections::{modify, Edit};
use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE_FAST};
use crate::collection::{element_key, random_elements, read_fields_in_order, Live};
use crate::error::{Error, Result};
use crate::keyspace::KeyType;
use crate::ldouble::{LdError, LongDouble};
use crate::notify;
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "hset", arity: -4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Creates or modifies the value of a field in a hash.", handler: hset },
    Spec { name: "hmset", arity: -4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Sets the values of multiple fields.", handler: hmset },
    Spec { name: "hsetnx", arity: 4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Sets the value of a field in a hash only when the field doesn't exist.", handler: hsetnx },
    Spec { name: "hget", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the value of a field in a hash.", handler: hget },
    Spec { name: "hmget", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the values of all fields in a hash.", handler: hmget },
    Spec { name: "hgetall", arity: 2, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Returns all fields and values in a hash.", handler: hgetall },
    Spec { name: "hdel", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "hash", summary: "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", handler: hdel },
    Spec { name: "hexists", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Determines whether a field exists in a hash.", handler: hexists },
    Spec { name: "hlen", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the number of fields in a hash.", handler: hlen },
    Spec { name: "hkeys", arity: 2, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Returns all fields in a hash.", handler: hkeys },
    Spec { name: "hvals", arity: 2, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Returns all values in a hash.", handler: hvals },
    Spec { name: "hstrlen", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the length of the value of a field.", handler: hstrlen },
    Spec { name: "hincrby", arity: 4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Increments the integer value of a field in a hash by a number.", handler: hincrby },
    Spec { name: "hincrbyfloat", arity: 4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Increments the floating point value of a field by a number.", handler: hincrbyfloat },
    Spec { name: "hrandfield", arity: -2, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Returns one or more random fields from a hash.", handler: hrandfield },
    Spec { name: "hscan", arity: -3, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Iterates over fields and values of a hash.", handler: hscan },
];

/// The hash `key` of the selected database as one atomic read-modify-write.
fn modify_hash<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    f: impl FnMut(&mut Edit<'_, '_>) -> Result<T>,
) -> Result<T> {
    modify(ctx, key, KeyType::Hash, f)
}

/// The live hash `key` of the selected database for a read command.
fn read_live(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Live>> {
    super::collections::read_live(ctx, key, KeyType::Hash)
}

fn field_pairs(args: &[Bytes], name: &str) -> Result<Vec<(Bytes, Bytes)>> {
    if args.len() % 2 != 0 {
        return Err(Error::WrongArity(name.into()));
    }
    Ok(args[2..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect())
}

fn set_fields(ctx: &Ctx<'_>, key: &[u8], pairs: &[(Bytes, Bytes)]) -> Result<i64> {
    modify_hash(ctx, key, |h| {
        let mut added = 0;
        for (f, v) in pairs {
            added += i64::from(h.set(f, v.clone())?);
        }
        Ok(added)
    })
}

fn hset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = field_pairs(args, "hset")?;
    let added = set_fields(ctx, &args[1], &pairs)?;
    ctx.notify(notify::HASH, "hset", &args[1]);
    Ok(Reply::Int(added))
}

fn hmset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = field_pairs(args, "hmset")?;
    set_fields(ctx, &args[1], &pairs)?;
    ctx.notify(notify::HASH, "hset", &args[1]);
    Ok(Reply::ok())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let set = modify_hash(ctx, &args[1], |h| {
        if h.contains(&args[2])? {
            return Ok(false);
        }
        h.set(&args[2], args[3].clone())
    })?;
    if set {
        ctx.notify(notify::HASH, "hset", &args[1]);
    }
    Ok(Reply::Int(i64::from(set)))
}

fn hdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (removed, emptied) = modify_hash(ctx, &args[1], |h| {
        if h.found.is_none() {
            return Ok((0, false));
        }
        let mut removed = 0;
        for f in &args[2..] {
            removed += i64::from(h.remove(f)?);
        }
        Ok((removed, h.count() == 0))
    })?;
    if removed > 0 {
        ctx.notify(notify::HASH, "hdel", &args[1]);
        if emptied {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
    }
    Ok(Reply::Int(removed))
}

/// Reads fields of the live hash `key` at one snapshot: `None` when the hash is absent.
fn read_some(ctx: &Ctx<'_>, key: &[u8], fields: &[Bytes]) -> Result<Option<Vec<Option<Bytes>>>> {
    let Some(h) = read_live(ctx, key)? else {
        return Ok(None);
    };
    let keys: Vec<Vec<u8>> = fields
        .iter()
        .map(|f| element_key(ctx.dbi(), key, h.meta.version, f))
        .collect();
    ctx.db().multi_get(&keys).map(Some)
}

fn hget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let v = read_some(ctx, &args[1], &args[2..3])?.and_then(|mut v| v.pop().flatten());
    Ok(Reply::bulk_or_nil(v))
}

fn hmget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let values =
        read_some(ctx, &args[1], &args[2..])?.unwrap_or_else(|| vec![None; args.len() - 2]);
    Ok(Reply::Array(
        values.into_iter().map(Reply::bulk_or_nil).collect(),
    ))
}

fn hexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let v = read_some(ctx, &args[1], &args[2..3])?.and_then(|mut v| v.pop().flatten());
    Ok(Reply::Int(i64::from(v.is_some())))
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let v = read_some(ctx, &args[1], &args[2..3])?.and_then(|mut v| v.pop().flatten());
    Ok(Reply::Int(v.map_or(0, |v| v.len() as i64)))
}

fn hlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_live(ctx, &args[1])?.map_or(0, |h| h.meta.count);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// Every field and value of the live hash `key` (empty when absent).
fn all_fields(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
    match read_live(ctx, key)? {
        Some(h) => read_fields_in_order(ctx.db(), ctx.dbi(), key, &h),
        None => Ok(Vec::new()),
    }
}

fn hgetall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let fields = all_fields(ctx, &args[1])?;
    Ok(Reply::Map(
        fields
            .into_iter()
            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
            .collect(),
    ))
}

fn hkeys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let fields = all_fields(ctx, &args[1])?;
    Ok(Reply::Array(
        fields.into_iter().map(|(f, _)| Reply::Bulk(f)).collect(),
    ))
}

fn hvals(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let fields = all_fields(ctx, &args[1])?;
    Ok(Reply::Array(
        fields.into_iter().map(|(_, v)| Reply::Bulk(v)).collect(),
    ))
}

fn hincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let delta = int_arg(&args[3])?;
    let n = modify_hash(ctx, &args[1], |h| {
        let current = match h.get(&args[2])? {
            Some(v) => crate::num::parse_i64(&v)
                .ok_or_else(|| Error::command("hash value is not an integer"))?,
            None => 0,
        };
        let next = current.checked_add(delta).ok_or(Error::Overflow)?;
        h.set(&args[2], Bytes::from(next.to_string()))?;
        Ok(next)
    })?;
    ctx.notify(notify::HASH, "hincrby", &args[1]);
    Ok(Reply::Int(n))
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis's order: the increment is parsed (and refused if infinite) before the key is
    // looked up; then the stored value; then the sum is checked.
    let delta = match LongDouble::parse(&args[3]) {
        Ok(v) => v,
        Err(LdError::NotFloat) => return Err(Error::NotFloat),
        Err(LdError::NanOrInfinity) => return Err(Error::command("value is NaN or Infinity")),
    };
    let text = modify_hash(ctx, &args[1], |h| {
        let current = match h.get(&args[2])? {
            Some(v) => {
                LongDouble::parse(&v).map_err(|_| Error::command("hash value is not a float"))?
            }
            None => LongDouble::parse(b"0").map_err(|_| Error::NotFloat)?,
        };
        let next = current
            .add(&delta)
            .map_err(|_| Error::command("increment would produce NaN or Infinity"))?;
        let text = next.to_redis_string();
        h.set(&args[2], Bytes::from(text.clone()))?;
        Ok(text)
    })?;
    ctx.notify(notify::HASH, "hincrbyfloat", &args[1]);
    Ok(Reply::text(text))
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    let Some(count_arg) = args.get(2) else {
        let Some(h) = read_live(ctx, key)? else {
            return Ok(Reply::Nil);
        };
        let pick = random_elements(ctx.db(), ctx.dbi(), key, &h, 1)?;
        return Ok(Reply::bulk_or_nil(pick.into_iter().next().map(|(f, _)| f)));
    };
    let count = int_arg(count_arg)?;
    if count == i64::MIN {
        return Err(Error::command(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let with_values = match args.get(3) {
        None => false,
        Some(w) if args.len() == 4 && is(w, "WITHVALUES") => true,
        Some(_) => return Err(Error::Syntax),
    };
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Error::command("value is out of range"));
    }
    let Some(h) = read_live(ctx, key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    // Negative: repetition allowed, drawn across the hash (`draw_with_repetition`), bounded
    // by what a reply may hold, as Redis is by memory.
    let fields = if count < 0 {
        let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        crate::collection::draw_with_repetition(
            ctx.db(),
            ctx.dbi(),
            key,
            &h,
            n.min(REPLY_ELEMENTS_MAX),
        )?
    } else {
        random_elements(ctx.db(), ctx.dbi(), key, &h, count.unsigned_abs())?
    };
    let picked: Vec<&(Bytes, Bytes)> = if count < 0 {
        fields.iter().collect()
    } else {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        let mut picked: Vec<&(Bytes, Bytes)> = fields.iter().take(n).collect();
        // Redis picks distinct fields of a listpack in its order (`lpRandomPairsUnique`).
        if let Some(order) = &h.order {
            order.arrange(&mut picked, |(f, _)| f);
        }
        picked
    };
    Ok(Reply::Array(if with_values {
        picked
            .into_iter()
            .map(|(f, v)| pair_reply(ctx, f, v))
            .collect::<Vec<_>>()
            .concat()
    } else {
        picked
            .into_iter()
            .map(|(f, _)| Reply::Bulk(f.clone()))
            .collect()
    }))
}

/// Most elements HRANDFIELD with a negative count returns.
const REPLY_ELEMENTS_MAX: usize = 1 << 24;

/// A field and its value in a WITHVALUES reply: a pair array in RESP3, two elements in RESP2.
fn pair_reply(ctx: &Ctx<'_>, f: &Bytes, v: &Bytes) -> Vec<Reply> {
    let pair = vec![Reply::Bulk(f.clone()), Reply::Bulk(v.clone())];
    if ctx.session.protocol == crate::resp::Protocol::Resp3 {
        vec![Reply::Array(pair)]
    } else {
        pair
    }
}

fn hscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    super::collections::scan_elements(ctx, args, KeyType::Hash)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::testing::*;
    use crate::resp::Reply;

    #[test]
    fn fields_count_and_the_key_goes_with_its_last_field() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["HSET", "h", "a", "1", "b", "2", "a", "3"]),
            Reply::Int(2)
        );
        assert_eq!(h.run(&["HGET", "h", "a"]), bulk("3"));
        assert_eq!(h.run(&["HLEN", "h"]), Reply::Int(2));
        assert_eq!(h.run(&["TYPE", "h"]), Reply::simple("hash"));
        assert_eq!(
            h.run(&["GET", "h"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        assert_eq!(h.run(&["HDEL", "h", "a", "a", "zz"]), Reply::Int(1));
        assert_eq!(h.run(&["HDEL", "h", "b"]), Reply::Int(1));
        assert_eq!(h.run(&["EXISTS", "h"]), Reply::Int(0));
        // A new incarnation sees none of the old fields.
        assert_eq!(h.run(&["HSET", "h", "c", "1"]), Reply::Int(1));
        assert_eq!(
            h.run(&["HGETALL", "h"]),
            Reply::Map(vec![(bulk("c"), bulk("1"))])
        );
        h.run(&["SET", "h", "s"]);
        assert_eq!(
            h.run(&["HGET", "h", "c"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        assert_eq!(h.run(&["DEL", "h"]), Reply::Int(1));
        assert_eq!(
            h.run(&["HSET", "h", "x"]),
            err("ERR wrong number of arguments for 'hset' command")
        );
        assert_eq!(h.run(&["HINCRBY", "n", "f", "5"]), Reply::Int(5));
        assert_eq!(h.run(&["HINCRBYFLOAT", "n", "f", "0.5"]), bulk("5.5"));
        assert_eq!(
            h.run(&["HINCRBY", "n", "f", "1"]),
            err("ERR hash value is not an integer")
        );
    }
}
