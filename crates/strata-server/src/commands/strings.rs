//! String commands: GET, SET and its variants, counters, APPEND, ranges, MGET/MSET. Every
//! read-modify-write runs inside one `KvBackend::update` call, so concurrent INCRs or APPENDs on a
//! key never lose an update. Strings overwrite JSON documents where Redis's SET overwrites any
//! type; commands that read a string answer WRONGTYPE when the name holds a document.

use bytes::Bytes;

use super::{float_arg, int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE, WRITE_FAST};
use crate::backend::{BatchOp, Write};
use crate::error::{Error, Result};
use crate::keyspace::{exists_as, string_key, type_of, KeyType};
use crate::num::{format_f64, parse_f64, parse_i64};
use crate::resp::Reply;
use crate::state::lock;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "get", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key.", handler: get },
    Spec { name: "set", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Sets the string value of a key (NX, XX, GET).", handler: set },
    Spec { name: "setnx", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Sets the string value of a key only when the key doesn't exist.", handler: setnx },
    Spec { name: "getset", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Sets a key and returns its previous value.", handler: getset },
    Spec { name: "getdel", arity: 2, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key after deleting the key.", handler: getdel },
    Spec { name: "getex", arity: -2, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key (expiry options are not supported).", handler: getex },
    Spec { name: "mget", arity: -2, flags: READ_FAST, keys: (1, -1, 1), group: "string", summary: "Returns the string values of one or more keys.", handler: mget },
    Spec { name: "mset", arity: -3, flags: WRITE, keys: (1, -1, 2), group: "string", summary: "Sets the string values of one or more keys.", handler: mset },
    Spec { name: "msetnx", arity: -3, flags: WRITE, keys: (1, -1, 2), group: "string", summary: "Sets the string values of keys only when none of them exists.", handler: msetnx },
    Spec { name: "incr", arity: 2, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Increments the integer value of a key by one.", handler: incr },
    Spec { name: "incrby", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Increments the integer value of a key by a number.", handler: incrby },
    Spec { name: "decr", arity: 2, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Decrements the integer value of a key by one.", handler: decr },
    Spec { name: "decrby", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Decrements the integer value of a key by a number.", handler: decrby },
    Spec { name: "incrbyfloat", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Increments the floating point value of a key by a number.", handler: incrbyfloat },
    Spec { name: "append", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Appends a string to the value of a key.", handler: append },
    Spec { name: "strlen", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "string", summary: "Returns the length of a string value.", handler: strlen },
    Spec { name: "getrange", arity: 4, flags: READ, keys: (1, 1, 1), group: "string", summary: "Returns a substring of the string stored at a key.", handler: getrange },
    Spec { name: "substr", arity: 4, flags: READ, keys: (1, 1, 1), group: "string", summary: "Returns a substring of the string stored at a key (old name of GETRANGE).", handler: getrange },
    Spec { name: "setrange", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Overwrites part of a string value from an offset.", handler: setrange },
    Spec { name: "setex", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Not supported: keys never expire.", handler: no_expiry },
    Spec { name: "psetex", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Not supported: keys never expire.", handler: no_expiry },
];

/// The reply to every expiry option or command: this server stores keys until they are deleted.
pub(crate) const NO_EXPIRY: &str =
    "keys never expire on this server: EX, PX, EXAT, PXAT, KEEPTTL and expiry commands are not supported";

pub(crate) fn no_expiry(_: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    Err(Error::command(NO_EXPIRY))
}

fn max_string_error() -> Error {
    Error::command("string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// Reads a string key; WRONGTYPE if the name holds a document.
pub(crate) fn read_string(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>> {
    if let Some(v) = ctx.db().get(&string_key(key))? {
        return Ok(Some(v));
    }
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(None)
}

/// Whether `key` names a JSON document (no lookup while the store has none).
fn json_exists(ctx: &Ctx<'_>, key: &[u8]) -> Result<bool> {
    Ok(ctx.shared.docs_may_exist() && exists_as(ctx.db(), KeyType::Json, key)?)
}

/// The engine key of the JSON document named `key`, if one exists (see [`json_exists`]).
fn existing_doc_key(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
    if !ctx.shared.docs_may_exist() {
        return Ok(None);
    }
    match KeyType::Json.key(key) {
        Some(doc) if ctx.db().get(&doc)?.is_some() => Ok(Some(doc)),
        _ => Ok(None),
    }
}

/// Atomically reads and rewrites a string key with `f`, which returns the write and the
/// command's result. WRONGTYPE if the name holds a document.
fn modify_string<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<&[u8]>) -> Result<(Write, T)>,
) -> Result<T> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let mut out = None;
    let mut wrote = false;
    ctx.db().update(&string_key(key), &mut |old| {
        let (write, result) = f(old)?;
        wrote = write != Write::Keep;
        out = Some(result);
        Ok(write)
    })?;
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: update callback did not run"))
}

/// Stores a string whatever the name held before (SET's semantics). The document, if any, is
/// removed in the same batch.
fn overwrite_string(ctx: &Ctx<'_>, key: &[u8], value: &[u8]) -> Result<()> {
    if let Some(doc) = existing_doc_key(ctx, key)? {
        ctx.db().write(vec![
            BatchOp::Put(string_key(key), value.to_vec()),
            BatchOp::Delete(doc),
        ])?;
    } else {
        ctx.db().put(&string_key(key), value)?;
    }
    ctx.shared.note_writes(1);
    Ok(())
}

fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::bulk_or_nil(read_string(ctx, &args[1])?))
}

fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if args.len() > 2 {
        return Err(Error::command(NO_EXPIRY));
    }
    get(ctx, args)
}

#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
}

fn parse_set_options(opts: &[Bytes]) -> Result<SetOptions> {
    let mut o = SetOptions::default();
    let mut expiry = false;
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        if is(a, "NX") && !o.xx {
            o.nx = true;
        } else if is(a, "XX") && !o.nx {
            o.xx = true;
        } else if is(a, "GET") {
            o.get = true;
        } else if is(a, "KEEPTTL") {
            expiry = true;
        } else if ["EX", "PX", "EXAT", "PXAT"].iter().any(|w| is(a, w)) && i + 1 < opts.len() {
            expiry = true;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    // Syntax is checked first so that a malformed command gets Redis's syntax error.
    if expiry {
        return Err(Error::command(NO_EXPIRY));
    }
    Ok(o)
}

fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, value) = (&args[1], &args[2]);
    let o = parse_set_options(&args[3..])?;
    if !o.nx && !o.xx && !o.get {
        overwrite_string(ctx, key, value)?;
        return Ok(Reply::ok());
    }
    if json_exists(ctx, key)? {
        if o.get {
            return Err(Error::WrongType);
        }
        if o.nx {
            return Ok(Reply::Nil);
        }
        overwrite_string(ctx, key, value)?;
        return Ok(Reply::ok());
    }
    let (stored, old) = modify_string(ctx, key, |old| {
        let exists = old.is_some();
        let old = if o.get {
            old.map(Bytes::copy_from_slice)
        } else {
            None
        };
        if (o.nx && exists) || (o.xx && !exists) {
            Ok((Write::Keep, (false, old)))
        } else {
            Ok((Write::Put(value.to_vec()), (true, old)))
        }
    })?;
    Ok(match (o.get, stored) {
        (true, _) => Reply::bulk_or_nil(old),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if json_exists(ctx, &args[1])? {
        return Ok(Reply::Int(0));
    }
    let set = modify_string(ctx, &args[1], |old| {
        Ok(match old {
            Some(_) => (Write::Keep, false),
            None => (Write::Put(args[2].to_vec()), true),
        })
    })?;
    Ok(Reply::Int(i64::from(set)))
}

fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let old = modify_string(ctx, &args[1], |old| {
        Ok((
            Write::Put(args[2].to_vec()),
            old.map(Bytes::copy_from_slice),
        ))
    })?;
    Ok(Reply::bulk_or_nil(old))
}

fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let old = modify_string(ctx, &args[1], |old| {
        Ok(match old {
            Some(v) => (Write::Delete, Some(Bytes::copy_from_slice(v))),
            None => (Write::Keep, None),
        })
    })?;
    Ok(Reply::bulk_or_nil(old))
}

fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Like Redis, a key of another type reads as nil here instead of failing the whole call.
    let mut out = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        out.push(Reply::bulk_or_nil(ctx.db().get(&string_key(key))?));
    }
    Ok(Reply::Array(out))
}

fn pairs<'a>(args: &'a [Bytes], name: &str) -> Result<Vec<(&'a Bytes, &'a Bytes)>> {
    if args.len() < 3 || (args.len() - 1) % 2 != 0 {
        return Err(Error::WrongArity(name.into()));
    }
    Ok(args[1..].chunks(2).map(|c| (&c[0], &c[1])).collect())
}

fn write_pairs(ctx: &Ctx<'_>, pairs: &[(&Bytes, &Bytes)]) -> Result<()> {
    let mut ops = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        ops.push(BatchOp::Put(string_key(k), v.to_vec()));
        if let Some(doc) = existing_doc_key(ctx, k)? {
            ops.push(BatchOp::Delete(doc));
        }
    }
    ctx.db().write(ops)?;
    ctx.shared.note_writes(pairs.len() as u64);
    Ok(())
}

/// Runs consecutive pipelined `SET key value` commands (no options) as one engine write: one log
/// record per partition, so under `appendfsync always` one fsync per partition instead of one
/// per command. Replies are what running them one by one gives: `+OK` for each, or the error for
/// each. The caller checked that every command is exactly `SET key value` and that the session
/// is authenticated.
pub(crate) fn set_run(ctx: &Ctx<'_>, run: &[Vec<Bytes>]) -> Reply {
    let pairs: Vec<(&Bytes, &Bytes)> = run.iter().map(|c| (&c[1], &c[2])).collect();
    ctx.shared
        .counters
        .total_commands
        .fetch_add(run.len() as u64, std::sync::atomic::Ordering::Relaxed);
    match write_pairs(ctx, &pairs) {
        Ok(()) => Reply::ok(),
        Err(e) => Reply::from(e),
    }
}

fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = pairs(args, "mset")?;
    write_pairs(ctx, &pairs)?;
    Ok(Reply::ok())
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = pairs(args, "msetnx")?;
    // Serializing MSETNX calls makes them atomic with respect to each other; against plain SETs
    // of the same keys it is check-then-write (the engine has no multi-key transactions).
    let _guard = lock(&ctx.shared.msetnx_lock);
    for (k, _) in &pairs {
        if type_of(ctx.db(), k)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    write_pairs(ctx, &pairs)?;
    Ok(Reply::Int(1))
}

fn incr_by(ctx: &Ctx<'_>, key: &[u8], delta: i64) -> Result<Reply> {
    let n = modify_string(ctx, key, |old| {
        let current = match old {
            None => 0,
            Some(v) => parse_i64(v).ok_or(Error::NotInteger)?,
        };
        let next = current.checked_add(delta).ok_or(Error::Overflow)?;
        Ok((Write::Put(next.to_string().into_bytes()), next))
    })?;
    Ok(Reply::Int(n))
}

fn incr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    incr_by(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    incr_by(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    incr_by(ctx, &args[1], int_arg(&args[2])?)
}

fn decrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let delta = int_arg(&args[2])?
        .checked_neg()
        .ok_or_else(|| Error::command("decrement would overflow"))?;
    incr_by(ctx, &args[1], delta)
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let delta = float_arg(&args[2])?;
    let text = modify_string(ctx, &args[1], |old| {
        let current = match old {
            None => 0.0,
            Some(v) => parse_f64(v).ok_or(Error::NotFloat)?,
        };
        let next = current + delta;
        if !next.is_finite() {
            return Err(Error::command("increment would produce NaN or Infinity"));
        }
        let text = format_f64(next);
        Ok((Write::Put(text.clone().into_bytes()), text))
    })?;
    Ok(Reply::text(text))
}

fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let max = ctx.shared.config().proto_max_bulk_len_bytes;
    let suffix = &args[2];
    let len = modify_string(ctx, &args[1], |old| {
        let old = old.unwrap_or_default();
        if old.len() + suffix.len() > max {
            return Err(max_string_error());
        }
        let mut v = Vec::with_capacity(old.len() + suffix.len());
        v.extend_from_slice(old);
        v.extend_from_slice(suffix);
        let len = v.len();
        Ok((Write::Put(v), len))
    })?;
    Ok(Reply::Int(len as i64))
}

fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::Int(
        read_string(ctx, &args[1])?.map_or(0, |v| v.len() as i64),
    ))
}

/// The byte range GETRANGE returns for `len` bytes, with Redis's clamping of negative and
/// out-of-range indices; `None` for an empty result.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (start <= end).then_some((start as usize, end as usize))
}

fn getrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (start, end) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let value = read_string(ctx, &args[1])?.unwrap_or_default();
    Ok(Reply::Bulk(match clamp_range(start, end, value.len()) {
        Some((s, e)) => value.slice(s..=e),
        None => Bytes::new(),
    }))
}

fn setrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let offset = int_arg(&args[2])?;
    let offset = usize::try_from(offset).map_err(|_| Error::command("offset is out of range"))?;
    let patch = &args[3];
    let max = ctx.shared.config().proto_max_bulk_len_bytes;
    if !patch.is_empty() && offset.saturating_add(patch.len()) > max {
        return Err(max_string_error());
    }
    let len = modify_string(ctx, &args[1], |old| {
        if patch.is_empty() {
            return Ok((Write::Keep, old.map_or(0, <[u8]>::len)));
        }
        let mut v = old.unwrap_or_default().to_vec();
        let end = offset + patch.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset..end].copy_from_slice(patch);
        let len = v.len();
        Ok((Write::Put(v), len))
    })?;
    Ok(Reply::Int(len as i64))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::resp::Reply;

    #[test]
    fn set_and_get_with_flags() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SET", "k", "v"]), Reply::ok());
        assert_eq!(h.run(&["GET", "k"]), bulk("v"));
        assert_eq!(h.run(&["SET", "k", "w", "NX"]), Reply::Nil);
        assert_eq!(h.run(&["SET", "k", "w", "XX", "GET"]), bulk("v"));
        assert_eq!(h.run(&["GET", "k"]), bulk("w"));
        assert_eq!(h.run(&["SET", "new", "1", "XX"]), Reply::Nil);
        assert_eq!(h.run(&["SET", "new", "1", "NX", "GET"]), Reply::Nil);
        assert_eq!(h.run(&["GET", "new"]), bulk("1"));
        assert_eq!(
            h.run(&["SET", "k", "v", "NX", "XX"]),
            err("ERR syntax error")
        );
        assert_eq!(h.run(&["SET", "k", "v", "EX"]), err("ERR syntax error"));
        let expiry = h.run(&["SET", "k", "v", "EX", "10"]);
        assert!(
            matches!(&expiry, Reply::Error(e) if e.starts_with("ERR keys never expire")),
            "{expiry:?}"
        );
        assert!(h.run(&["SET", "k", "v", "KEEPTTL"]).is_error());
        assert_eq!(h.run(&["SETNX", "k", "x"]), Reply::Int(0));
        assert_eq!(h.run(&["SETNX", "k2", "x"]), Reply::Int(1));
        assert_eq!(h.run(&["GETSET", "k2", "y"]), bulk("x"));
        assert_eq!(h.run(&["GETDEL", "k2"]), bulk("y"));
        assert_eq!(h.run(&["GETDEL", "k2"]), Reply::Nil);
    }

    #[test]
    fn counters_follow_redis_rules() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["INCR", "n"]), Reply::Int(1));
        assert_eq!(h.run(&["INCRBY", "n", "41"]), Reply::Int(42));
        assert_eq!(h.run(&["DECR", "n"]), Reply::Int(41));
        assert_eq!(h.run(&["DECRBY", "n", "-9"]), Reply::Int(50));
        assert_eq!(
            h.run(&["INCRBY", "n", "x"]),
            err("ERR value is not an integer or out of range")
        );
        h.run(&["SET", "s", "abc"]);
        assert_eq!(
            h.run(&["INCR", "s"]),
            err("ERR value is not an integer or out of range")
        );
        h.run(&["SET", "big", &i64::MAX.to_string()]);
        assert_eq!(
            h.run(&["INCR", "big"]),
            err("ERR increment or decrement would overflow")
        );
        assert_eq!(
            h.run(&["DECRBY", "n", &i64::MIN.to_string()]),
            err("ERR decrement would overflow")
        );
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "10.5"]), bulk("10.5"));
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "-5.0e3"]), bulk("-4989.4"));
        assert_eq!(
            h.run(&["INCRBYFLOAT", "s", "1"]),
            err("ERR value is not a valid float")
        );
        assert_eq!(
            h.run(&["INCRBYFLOAT", "f", "inf"]),
            err("ERR increment would produce NaN or Infinity")
        );
    }

    #[test]
    fn append_ranges_and_lengths() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["APPEND", "a", "Hello"]), Reply::Int(5));
        assert_eq!(h.run(&["APPEND", "a", " World"]), Reply::Int(11));
        assert_eq!(h.run(&["STRLEN", "a"]), Reply::Int(11));
        assert_eq!(h.run(&["STRLEN", "none"]), Reply::Int(0));
        assert_eq!(h.run(&["GETRANGE", "a", "0", "4"]), bulk("Hello"));
        assert_eq!(h.run(&["GETRANGE", "a", "-5", "-1"]), bulk("World"));
        assert_eq!(h.run(&["GETRANGE", "a", "0", "-1"]), bulk("Hello World"));
        assert_eq!(h.run(&["GETRANGE", "a", "5", "2"]), bulk(""));
        assert_eq!(h.run(&["GETRANGE", "a", "-1", "-5"]), bulk(""));
        assert_eq!(h.run(&["GETRANGE", "a", "6", "100"]), bulk("World"));
        assert_eq!(h.run(&["GETRANGE", "none", "0", "1"]), bulk(""));
        assert_eq!(h.run(&["SETRANGE", "a", "6", "Redis"]), Reply::Int(11));
        assert_eq!(h.run(&["GET", "a"]), bulk("Hello Redis"));
        assert_eq!(h.run(&["SETRANGE", "pad", "3", "x"]), Reply::Int(4));
        assert_eq!(h.run(&["GET", "pad"]), bulk("\0\0\0x"));
        assert_eq!(h.run(&["SETRANGE", "empty", "3", ""]), Reply::Int(0));
        assert_eq!(h.run(&["EXISTS", "empty"]), Reply::Int(0));
        assert_eq!(
            h.run(&["SETRANGE", "a", "-1", "x"]),
            err("ERR offset is out of range")
        );
        assert_eq!(
            h.run(&["SETRANGE", "a", "536870911", "xx"]),
            err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        );
    }

    #[test]
    fn multi_key_commands() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["MSET", "a", "1", "b", "2"]), Reply::ok());
        assert_eq!(
            h.run(&["MGET", "a", "b", "c"]),
            Reply::Array(vec![bulk("1"), bulk("2"), Reply::Nil])
        );
        assert_eq!(
            h.run(&["MSET", "a", "1", "b"]),
            err("ERR wrong number of arguments for 'mset' command")
        );
        assert_eq!(h.run(&["MSETNX", "c", "3", "a", "9"]), Reply::Int(0));
        assert_eq!(h.run(&["GET", "c"]), Reply::Nil);
        assert_eq!(h.run(&["MSETNX", "c", "3", "d", "4"]), Reply::Int(1));
        assert_eq!(
            h.run(&["MGET", "c", "d"]),
            Reply::Array(vec![bulk("3"), bulk("4")])
        );
    }
}
