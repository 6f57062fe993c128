//! Hash commands: HSET HSETNX HMSET HGET HMGET HGETALL HDEL HEXISTS HLEN HKEYS HVALS HSTRLEN
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, with redis-server 7's replies and errors.
//!
//! A hash is a record plus one engine key per field (`collection.rs`). Every write is one
//! [`crate::backend::KvBackend::update_group`] on the key's partition: the record and the fields
//! it touches are read and written atomically, so a command is all-or-nothing and concurrent
//! writers of one hash take turns. Reads take no lock: the fields of one version are read at
//! one engine snapshot (MGET's `multi_get`, a scan).
//!
//! Fields come back in byte order (HGETALL, HKEYS, HVALS, HSCAN), where Redis answers in
//! insertion order for small hashes and hash order for large ones; Redis promises no order.

use std::collections::BTreeMap;

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;

use super::strings::json_exists;
use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE_FAST};
use crate::backend::{BatchOp, GroupRead};
use crate::collection::{element_key, read_fields, read_hash, visit_fields, HashMeta, LiveHash};
use crate::error::{Error, Result};
use crate::glob;
use crate::keyspace::{now_ms, string_key, DbIndex, Encoding, Record};
use crate::ldouble::{LdError, LongDouble};
use crate::resp::Reply;
use crate::state::{lock, ScanPosition};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "hset", arity: -4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Creates or modifies the value of a field in a hash.", handler: hset },
    Spec { name: "hmset", arity: -4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Sets the values of multiple fields.", handler: hmset },
    Spec { name: "hsetnx", arity: 4, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Sets the value of a field in a hash only when the field doesn't exist.", handler: hsetnx },
    Spec { name: "hget", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the value of a field in a hash.", handler: hget },
    Spec { name: "hmget", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "hash", summary: "Returns the values of all fields in a hash.", handler: hmget },
    Spec { name: "hgetall", arity: 2, flags: READ, keys: (1, 1, 1), group: "hash", summary: "Returns all fields and values in a hash.", handler: hgetall },
    Spec { name: "hdel", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "hash", summary: "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", handler: hdel },
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

/// `hash-max-listpack-entries` and `hash-max-listpack-value` as the reference redis-server 7.0
/// reports them (512 and 64): a hash within
/// both reports OBJECT ENCODING `listpack`; one that ever outgrew them `hashtable` (Redis never
/// converts back).
pub(crate) const LISTPACK_ENTRIES_MAX: u64 = 512;
pub(crate) const LISTPACK_VALUE_BYTES_MAX: usize = 64;

/// A hash being changed inside one `update_group`: pending field writes over what the store
/// holds, the field count kept as they are made.
struct HashEdit<'r, 'a> {
    read: &'r GroupRead<'a>,
    db: DbIndex,
    name: &'r [u8],
    /// The hash as found (`None`: absent or expired).
    found: Option<LiveHash>,
    /// Whether the found record said `hashtable`.
    found_big: bool,
    version: u64,
    count: u64,
    big: bool,
    /// Field -> new value (`None`: removed).
    pending: BTreeMap<Vec<u8>, Option<Bytes>>,
}

impl HashEdit<'_, '_> {
    fn get(&self, field: &[u8]) -> Result<Option<Bytes>> {
        if let Some(v) = self.pending.get(field) {
            return Ok(v.clone());
        }
        if self.found.is_none() {
            return Ok(None);
        }
        (self.read)(&element_key(self.db, self.name, self.version, field))
    }

    /// Sets a field; true when it is new.
    fn set(&mut self, field: &[u8], value: Bytes) -> Result<bool> {
        let new = self.get(field)?.is_none();
        if new {
            self.count += 1;
        }
        self.big |= self.count > LISTPACK_ENTRIES_MAX
            || field.len() > LISTPACK_VALUE_BYTES_MAX
            || value.len() > LISTPACK_VALUE_BYTES_MAX;
        self.pending.insert(field.to_vec(), Some(value));
        Ok(new)
    }

    /// Removes a field; true when it existed.
    fn remove(&mut self, field: &[u8]) -> Result<bool> {
        let existed = self.get(field)?.is_some();
        if existed {
            self.count -= 1;
            self.pending.insert(field.to_vec(), None);
        }
        Ok(existed)
    }

    /// The engine writes that make the edit.
    fn finish(self) -> Vec<BatchOp> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let record_key = string_key(self.db, self.name);
        if self.count == 0 {
            // The record goes; the fields of this version are disowned with it (compaction
            // drops them), so no per-field delete is written.
            return if self.found.is_some() {
                vec![BatchOp::Delete(record_key)]
            } else {
                Vec::new()
            };
        }
        let mut ops = Vec::with_capacity(self.pending.len() + 1);
        let unchanged = self
            .found
            .is_some_and(|f| f.meta.count == self.count && f.meta.version == self.version)
            && self.found_big == self.big;
        if !unchanged {
            let meta = HashMeta {
                version: self.version,
                count: self.count,
            };
            let expiry = self.found.and_then(|f| f.expire_at_ms);
            let encoding = if self.big {
                Encoding::Raw
            } else {
                Encoding::ByContent
            };
            ops.push(BatchOp::Put(
                record_key,
                Record::encode_hash(&meta.encode(), expiry, encoding),
            ));
        }
        for (field, value) in self.pending {
            let k = element_key(self.db, self.name, self.version, &field);
            ops.push(match value {
                Some(v) => BatchOp::Put(k, v.to_vec()),
                None => BatchOp::Delete(k),
            });
        }
        ops
    }
}

/// Runs `f` on the hash `key` of the selected database as one atomic read-modify-write.
/// WRONGTYPE when the name holds a string or a document. `create` false: `f` sees an absent
/// hash only if it exists (commands that never create one return early on `None` anyway).
fn modify_hash<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(&mut HashEdit<'_, '_>) -> Result<T>,
) -> Result<T> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let db = ctx.dbi();
    let record_key = string_key(db, key);
    let now = now_ms();
    let mut out = None;
    let mut wrote = false;
    ctx.db().update_group(&record_key, &mut |read| {
        let record = read(&record_key)?;
        let found_big = record
            .as_ref()
            .and_then(|r| Record::decode(r.clone()).ok())
            .is_some_and(|r| r.encoding == Encoding::Raw);
        let found = crate::collection::live_hash(record, now)?;
        let (version, count) = match found {
            Some(h) => (h.meta.version, h.meta.count),
            None => (ctx.shared.versions.next(), 0),
        };
        let mut edit = HashEdit {
            read,
            db,
            name: key,
            found,
            found_big: found.is_some() && found_big,
            version,
            count,
            big: found.is_some() && found_big,
            pending: BTreeMap::new(),
        };
        out = Some(f(&mut edit)?);
        let ops = edit.finish();
        wrote = !ops.is_empty();
        Ok(ops)
    })?;
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: hash update did not run"))
}

/// The live hash `key` of the selected database for a read command (WRONGTYPE for another
/// kind, documents included).
fn read_live(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<LiveHash>> {
    let found = read_hash(ctx.db(), ctx.dbi(), key, now_ms())?;
    if found.is_none() && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(found)
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
    Ok(Reply::Int(set_fields(ctx, &args[1], &pairs)?))
}

fn hmset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = field_pairs(args, "hmset")?;
    set_fields(ctx, &args[1], &pairs)?;
    Ok(Reply::ok())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let set = modify_hash(ctx, &args[1], |h| {
        if h.get(&args[2])?.is_some() {
            return Ok(false);
        }
        h.set(&args[2], args[3].clone())
    })?;
    Ok(Reply::Int(i64::from(set)))
}

fn hdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if read_live(ctx, &args[1])?.is_none() {
        return Ok(Reply::Int(0));
    }
    let removed = modify_hash(ctx, &args[1], |h| {
        if h.found.is_none() {
            return Ok(0);
        }
        let mut removed = 0;
        for f in &args[2..] {
            removed += i64::from(h.remove(f)?);
        }
        Ok(removed)
    })?;
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
        Some(h) => read_fields(ctx.db(), ctx.dbi(), key, h.meta.version),
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
    Ok(Reply::text(text))
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    let Some(count_arg) = args.get(2) else {
        let Some(h) = read_live(ctx, key)? else {
            return Ok(Reply::Nil);
        };
        let fields = read_fields(ctx.db(), ctx.dbi(), key, h.meta.version)?;
        let pick = fields
            .choose(&mut rand::thread_rng())
            .map(|(f, _)| f.clone());
        return Ok(Reply::bulk_or_nil(pick));
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
    let fields = read_fields(ctx.db(), ctx.dbi(), key, h.meta.version)?;
    let mut rng = rand::thread_rng();
    let picked: Vec<&(Bytes, Bytes)> = if count < 0 {
        let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        // Repetition allowed: bounded by what a reply may hold, as Redis is by memory.
        (0..n.min(REPLY_ELEMENTS_MAX))
            .filter_map(|_| fields.get(rng.gen_range(0..fields.len().max(1))))
            .collect()
    } else {
        let n = usize::try_from(count).unwrap_or(usize::MAX);
        if n >= fields.len() {
            fields.iter().collect()
        } else {
            let mut all: Vec<&(Bytes, Bytes)> = fields.iter().collect();
            all.shuffle(&mut rng);
            all.truncate(n);
            all
        }
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

/// HSCAN's default COUNT.
const HSCAN_COUNT_DEFAULT: usize = 10;

fn hscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    let cursor: u64 = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::command("invalid cursor"))?;
    // Redis's order: the cursor, then the key (absent: an empty answer, whatever the options
    // say), then the options.
    let empty = || Reply::Array(vec![Reply::text("0".to_string()), Reply::Array(Vec::new())]);
    let Some(h) = read_live(ctx, key)? else {
        return Ok(empty());
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count = HSCAN_COUNT_DEFAULT;
    let mut i = 3;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(Error::Syntax)?;
        if is(&args[i], "MATCH") {
            pattern = Some(value);
        } else if is(&args[i], "COUNT") {
            count = match int_arg(value)? {
                n if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::Syntax),
            };
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let after = if cursor == 0 {
        None
    } else {
        lock(&ctx.shared.cursors)
            .get(cursor)
            .ok_or_else(|| Error::command("invalid cursor"))?
            .after_key
    };
    // A hash Redis keeps as a listpack is returned whole in one call (cursor 0), whatever
    // COUNT says; larger ones page by COUNT fields.
    let whole = h.meta.count <= LISTPACK_ENTRIES_MAX;
    let mut found = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    let mut more = false;
    let mut examined = 0usize;
    visit_fields(ctx.db(), ctx.dbi(), key, h.meta.version, &mut |f, v| {
        if after.as_deref().is_some_and(|a| f <= a) {
            return true;
        }
        if !whole && examined == count {
            more = true;
            return false;
        }
        examined += 1;
        last = Some(f.to_vec());
        if pattern.is_none_or(|p| glob::matches(p, f, false)) {
            found.push(Reply::Bulk(Bytes::copy_from_slice(f)));
            found.push(Reply::Bulk(Bytes::copy_from_slice(v)));
        }
        true
    })?;
    let cursor = if more {
        lock(&ctx.shared.cursors).insert(ScanPosition {
            namespace: 0,
            after_key: last,
        })
    } else {
        0
    };
    Ok(Reply::Array(vec![
        Reply::text(cursor.to_string()),
        Reply::Array(found),
    ]))
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
