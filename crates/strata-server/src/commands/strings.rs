//! String commands: GET, SET and its variants, counters, APPEND, ranges, MGET/MSET. Every
//! read-modify-write runs inside one `KvBackend::update` call, so concurrent INCRs or APPENDs on a
//! key never lose an update. Strings overwrite JSON documents where Redis's SET overwrites any
//! type; commands that read a string answer WRONGTYPE when the name holds a document.

use bytes::Bytes;

use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE, WRITE_FAST};
use crate::backend::{BatchOp, Write};
use crate::error::{Error, Result};
use crate::keyspace::Encoding;
use crate::keyspace::{
    doc_expiry, doc_ttl_key, expiry_index_key, lookup, now_ms, read_doc_bytes, string_key, KeyType,
    Record, Space,
};
use crate::ldouble::{LdError, LongDouble};
use crate::notify;
use crate::num::parse_i64;
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "get", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key.", handler: get },
    Spec { name: "set", arity: -3, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Sets the string value of a key (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL).", handler: set },
    Spec { name: "setnx", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Sets the string value of a key only when the key doesn't exist.", handler: setnx },
    Spec { name: "getset", arity: 3, flags: WRITE_FAST, keys: (1, 1, 1), group: "string", summary: "Sets a key and returns its previous value.", handler: getset },
    Spec { name: "getdel", arity: 2, flags: &["write", "fast"], keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key after deleting the key.", handler: getdel },
    Spec { name: "getex", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "string", summary: "Returns the string value of a key after optionally setting its expiration time.", handler: getex },
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
    Spec { name: "setex", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Sets the string value and expiration time (seconds) of a key.", handler: setex },
    Spec { name: "psetex", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "string", summary: "Sets the string value and expiration time (milliseconds) of a key.", handler: psetex },
];

/// An expiry a write asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// No expiry time (a plain SET removes the old one).
    None,
    /// Keep the key's current expiry time (KEEPTTL, and every command that changes a value
    /// in place, such as INCR or APPEND).
    Keep,
    /// Expire at this unix time in milliseconds.
    At(u64),
}

/// Reads the time argument of EX/PX/EXAT/PXAT (or SETEX, EXPIRE...) as an absolute unix time
/// in ms, with Redis's checks: an integer, positive unless `allow_past`, no overflow.
pub(crate) fn expiry_arg(
    arg: &[u8],
    unit_ms: u64,
    absolute: bool,
    command: &str,
    allow_past: bool,
) -> Result<u64> {
    let n = int_arg(arg)?;
    let invalid = || Error::command(format!("invalid expire time in '{command}' command"));
    if n <= 0 && !allow_past {
        return Err(invalid());
    }
    let ms = n.checked_mul(unit_ms as i64).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now_ms() as i64).ok_or_else(invalid)?
    };
    Ok(at.max(0) as u64)
}

fn max_string_error() -> Error {
    Error::command("string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// Reads a string key; WRONGTYPE if the name holds a document.
pub(crate) fn read_string(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Bytes>> {
    if let Some(v) = ctx.db().get(&string_key(ctx.dbi(), key))? {
        let r = Record::decode(v)?;
        if !r.expired_now() {
            if r.kind != KeyType::String {
                return Err(Error::WrongType);
            }
            return Ok(Some(r.payload));
        }
    }
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(None)
}

/// Whether `key` names a live JSON document (no lookup, and no clock read, while the store has
/// none).
pub(crate) fn json_exists(ctx: &Ctx<'_>, key: &[u8]) -> Result<bool> {
    Ok(
        ctx.shared.docs_may_exist()
            && read_doc_bytes(ctx.db(), ctx.dbi(), key, now_ms())?.is_some(),
    )
}

/// Engine writes that remove the document named `key` (live or expired) with its expiry record,
/// if there is one (see [`json_exists`]).
fn doc_removal(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<BatchOp>> {
    if !ctx.shared.docs_may_exist() {
        return Ok(Vec::new());
    }
    let mut ops = Vec::new();
    if let Some(doc) = Space::Docs.key(ctx.dbi(), key) {
        if ctx.db().get(&doc)?.is_some() {
            ops.push(BatchOp::Delete(doc));
            if doc_expiry(ctx.db(), ctx.dbi(), key)?.is_some() {
                ops.push(BatchOp::Delete(doc_ttl_key(ctx.dbi(), key)));
            }
        }
    }
    Ok(ops)
}

/// What a string read-modify-write decides.
pub(crate) enum StrWrite {
    /// Leave the key as it is.
    Keep,
    /// Store this value with this expiry (written whole: OBJECT ENCODING by content).
    Put(Vec<u8>, Expiry),
    /// Store this value with this expiry, made as `Encoding` says (APPEND, SETRANGE,
    /// INCRBYFLOAT).
    PutAs(Vec<u8>, Expiry, Encoding),
    /// Keep the value (and how it was made), change its expiry (GETEX).
    Retime(Expiry),
    /// A bit patch (SETBIT, BITFIELD) that changed no bit: stored as [`Encoding::Raw`] like
    /// any patch, unless the key already is a raw string with these bytes, which is then left
    /// alone (no write), as Redis does. (Redis makes an `int` or `embstr` string `raw` even
    /// when no bit changes; either way WATCH and tracking are not told.)
    Unchanged(Vec<u8>),
    /// Remove the key.
    Delete,
}

/// Atomically reads and rewrites a string key with `f`, which sees the live value and its
/// expiry time and returns the write and the command's result. WRONGTYPE if the name holds a
/// document or a collection. A new expiry time gets its index entry first (a stale entry is
/// harmless).
pub(crate) fn modify_string<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    new_expiry: Option<u64>,
    f: impl FnMut(Option<(&[u8], Option<u64>)>) -> Result<(StrWrite, T)>,
) -> Result<T> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    modify_record(ctx, key, new_expiry, false, f)
}

/// [`modify_string`] for SET without GET and SETNX, which look only at whether the name holds
/// a live key (and its expiry time, for KEEPTTL) and replace whatever it holds: a collection is
/// shown to `f` as an empty value, and a write replaces its record (its elements are disowned
/// with it, `collection.rs`). The caller deals with documents.
fn modify_any_record<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    new_expiry: Option<u64>,
    f: impl FnMut(Option<(&[u8], Option<u64>)>) -> Result<(StrWrite, T)>,
) -> Result<T> {
    modify_record(ctx, key, new_expiry, true, f)
}

fn modify_record<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    new_expiry: Option<u64>,
    any_kind: bool,
    mut f: impl FnMut(Option<(&[u8], Option<u64>)>) -> Result<(StrWrite, T)>,
) -> Result<T> {
    if let Some(at) = new_expiry {
        ctx.db().put(&expiry_index_key(ctx.dbi(), at, key), &[])?;
    }
    let mut out = None;
    let mut wrote = false;
    ctx.db().update(&string_key(ctx.dbi(), key), &mut |old| {
        let old = match old {
            Some(bytes) => {
                let r = Record::decode(Bytes::copy_from_slice(bytes))?;
                if r.expired_now() {
                    None
                } else if r.kind == KeyType::String {
                    Some(r)
                } else if any_kind {
                    Some(Record {
                        payload: Bytes::new(),
                        ..r
                    })
                } else {
                    return Err(Error::WrongType);
                }
            }
            None => None,
        };
        let (write, result) = f(old.as_ref().map(|r| (&r.payload[..], r.expire_at_ms)))?;
        out = Some(result);
        Ok(match write {
            StrWrite::Keep => Write::Keep,
            StrWrite::Delete => {
                wrote = true;
                Write::Delete
            }
            write => {
                let at_of = |expiry: Expiry| match expiry {
                    Expiry::None => None,
                    Expiry::Keep => old.as_ref().and_then(|r| r.expire_at_ms),
                    Expiry::At(at) => Some(at),
                };
                let (value, at, encoding) = match write {
                    StrWrite::Put(v, e) => (v, at_of(e), Encoding::ByContent),
                    StrWrite::PutAs(v, e, enc) => (v, at_of(e), enc),
                    StrWrite::Retime(e) => match &old {
                        Some(r) => (r.payload.to_vec(), at_of(e), r.encoding),
                        None => return Ok(Write::Keep),
                    },
                    StrWrite::Unchanged(v) => match &old {
                        Some(r) if r.encoding == Encoding::Raw && r.payload[..] == v[..] => {
                            return Ok(Write::Keep)
                        }
                        _ => {
                            // Redis makes the string raw without telling WATCH or tracking.
                            crate::txn::leave_unsignalled();
                            (v, at_of(Expiry::Keep), Encoding::Raw)
                        }
                    },
                    StrWrite::Keep | StrWrite::Delete => return Ok(Write::Keep),
                };
                wrote = true;
                Write::Put(Record::encode_as(&value, at, encoding))
            }
        })
    })?;
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: update callback did not run"))
}

/// Engine writes that store a string whatever the name held before (SET's semantics): the
/// record, the expiry index entry, and the removal of a document of that name.
fn overwrite_ops(ctx: &Ctx<'_>, key: &[u8], value: &[u8], at: Option<u64>) -> Result<Vec<BatchOp>> {
    let mut ops = doc_removal(ctx, key)?;
    if let Some(at) = at {
        ops.push(BatchOp::Put(
            expiry_index_key(ctx.dbi(), at, key),
            Vec::new(),
        ));
    }
    ops.push(BatchOp::Put(
        string_key(ctx.dbi(), key),
        Record::encode(value, at),
    ));
    Ok(ops)
}

/// Stores a string whatever the name held before (SET's semantics).
fn overwrite_string(ctx: &Ctx<'_>, key: &[u8], value: &[u8], at: Option<u64>) -> Result<()> {
    let mut ops = overwrite_ops(ctx, key, value, at)?;
    if ops.len() == 1 {
        if let Some(BatchOp::Put(k, v)) = ops.pop() {
            ctx.db().put(&k, &v)?;
        }
    } else {
        ctx.db().write(ops)?;
    }
    ctx.shared.note_writes(1);
    Ok(())
}

fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(Reply::bulk_or_nil(read_string(ctx, &args[1])?))
}

/// Parses an expiry option pair at `opts[i]` (EX, PX, EXAT, PXAT): `None` if `opts[i]` is not
/// one.
fn expiry_option(opts: &[Bytes], i: usize, command: &str) -> Result<Option<u64>> {
    let a = &opts[i];
    let (unit, absolute) = if is(a, "EX") {
        (1000, false)
    } else if is(a, "PX") {
        (1, false)
    } else if is(a, "EXAT") {
        (1000, true)
    } else if is(a, "PXAT") {
        (1, true)
    } else {
        return Ok(None);
    };
    let value = opts.get(i + 1).ok_or(Error::Syntax)?;
    expiry_arg(value, unit, absolute, command, false).map(Some)
}

/// GET for a write command (GETEX without a time), which reports its own `keymiss`.
fn get_noting_miss(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let reply = get(ctx, args)?;
    if reply == Reply::Nil {
        notify_key_miss(ctx, &args[1]);
    }
    Ok(reply)
}

fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let opts = &args[2..];
    // As SET: one kind of option, which may repeat (the last time wins); times checked after
    // the syntax.
    let mut word: Option<&'static str> = None;
    let mut time_at = None;
    let mut i = 0;
    while i < opts.len() {
        let time_word = ["EX", "PX", "EXAT", "PXAT"]
            .into_iter()
            .find(|w| is(&opts[i], w));
        if is(&opts[i], "PERSIST") && word.is_none_or(|w| w == "PERSIST") {
            word = Some("PERSIST");
            i += 1;
            continue;
        }
        if let Some(w) = time_word.filter(|w| word.is_none_or(|given| given == *w)) {
            if i + 1 < opts.len() {
                word = Some(w);
                time_at = Some(i);
                i += 2;
                continue;
            }
        }
        return Err(Error::Syntax);
    }
    if word.is_none() {
        return get_noting_miss(ctx, args);
    }
    // Redis answers nil for a missing key (and WRONGTYPE for another type) before it looks at
    // the time.
    if read_string(ctx, &args[1])?.is_none() {
        notify_key_miss(ctx, &args[1]);
        return Ok(Reply::Nil);
    }
    let change: Option<Option<u64>> = match (word, time_at) {
        (None, _) => None,
        (Some("PERSIST"), _) => Some(None),
        (Some(_), Some(at)) => Some(expiry_option(opts, at, "getex")?),
        (Some(_), None) => None,
    };
    let Some(change) = change else {
        return get_noting_miss(ctx, args);
    };
    let now = now_ms();
    if change.is_some_and(|at| at <= now) {
        // A time in the past deletes the key (and returns its value), as in Redis.
        let old = modify_string(ctx, &args[1], None, |old| {
            Ok(match old {
                Some((v, _)) => (StrWrite::Delete, Some(Bytes::copy_from_slice(v))),
                None => (StrWrite::Keep, None),
            })
        })?;
        if old.is_some() {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
        return Ok(Reply::bulk_or_nil(old));
    }
    let mut had_time = false;
    let old = modify_string(ctx, &args[1], change, |old| {
        Ok(match old {
            Some((v, at)) if at == change => {
                had_time = at.is_some();
                (StrWrite::Keep, Some(Bytes::copy_from_slice(v)))
            }
            Some((v, at)) => {
                had_time = at.is_some();
                (
                    StrWrite::Retime(change.map_or(Expiry::None, Expiry::At)),
                    Some(Bytes::copy_from_slice(v)),
                )
            }
            None => (StrWrite::Keep, None),
        })
    })?;
    match change {
        // Redis sets the time (and reports it) even when it is the one the key had.
        Some(_) if old.is_some() => ctx.notify(notify::GENERIC, "expire", &args[1]),
        None if had_time => ctx.notify(notify::GENERIC, "persist", &args[1]),
        _ => {}
    }
    Ok(Reply::bulk_or_nil(old))
}

struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    expiry: Expiry,
}

fn parse_set_options(opts: &[Bytes]) -> Result<SetOptions> {
    let mut o = SetOptions {
        nx: false,
        xx: false,
        get: false,
        expiry: Expiry::None,
    };
    // The expiry option given so far: the same one may repeat (the last value wins, as in
    // Redis), a different one is a syntax error.
    let mut expiry_word: Option<&'static str> = None;
    let mut i = 0;
    // Syntax first, then the time (Redis reports a malformed command as a syntax error even
    // when its time is also bad).
    let mut time_at: Option<usize> = None;
    while i < opts.len() {
        let a = &opts[i];
        let time_word = ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|w| is(a, w));
        if is(a, "NX") && !o.xx {
            o.nx = true;
        } else if is(a, "XX") && !o.nx {
            o.xx = true;
        } else if is(a, "GET") {
            o.get = true;
        } else if is(a, "KEEPTTL") && expiry_word.is_none_or(|w| w == "KEEPTTL") {
            expiry_word = Some("KEEPTTL");
            o.expiry = Expiry::Keep;
        } else if let Some(w) =
            time_word.filter(|w| expiry_word.is_none_or(|given| given == *w) && i + 1 < opts.len())
        {
            expiry_word = Some(w);
            time_at = Some(i);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if let Some(at) = time_at {
        if let Some(ms) = expiry_option(opts, at, "set")? {
            o.expiry = Expiry::At(ms);
        }
    }
    Ok(o)
}

fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, value) = (&args[1], &args[2]);
    let o = parse_set_options(&args[3..])?;
    let at = match o.expiry {
        Expiry::At(at) => Some(at),
        _ => None,
    };
    if !o.nx && !o.xx && !o.get && o.expiry != Expiry::Keep {
        overwrite_string(ctx, key, value, at)?;
        notify_set(ctx, key, at);
        return Ok(Reply::ok());
    }
    if json_exists(ctx, key)? {
        if o.get {
            return Err(Error::WrongType);
        }
        if o.nx {
            return Ok(Reply::Nil);
        }
        // SET replaces a document (KEEPTTL keeps the document's expiry time).
        let at = match o.expiry {
            Expiry::Keep => doc_expiry(ctx.db(), ctx.dbi(), key)?,
            _ => at,
        };
        overwrite_string(ctx, key, value, at)?;
        notify_set(ctx, key, at);
        return Ok(Reply::ok());
    }
    // Only SET ... GET reads the old value: without it SET replaces a key of any type.
    let modify = if o.get {
        modify_string
    } else {
        modify_any_record
    };
    let (stored, old) = modify(ctx, key, at, &mut |old: Option<(&[u8], Option<u64>)>| {
        let exists = old.is_some();
        let old = if o.get {
            old.map(|(v, _)| Bytes::copy_from_slice(v))
        } else {
            None
        };
        if (o.nx && exists) || (o.xx && !exists) {
            Ok((StrWrite::Keep, (false, old)))
        } else {
            Ok((StrWrite::Put(value.to_vec(), o.expiry), (true, old)))
        }
    })?;
    if o.get && old.is_none() {
        notify_key_miss(ctx, key);
    }
    if stored {
        notify_set(ctx, key, at);
    }
    Ok(match (o.get, stored) {
        (true, _) => Reply::bulk_or_nil(old),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

/// A command that reads a string first (SET ... GET, GETSET, GETDEL, GETEX) found no key: its
/// `keymiss` event, as Redis's read lookup reports it.
fn notify_key_miss(ctx: &mut Ctx<'_>, key: &Bytes) {
    ctx.notify(notify::KEY_MISS, "keymiss", key);
}

/// The events of a SET that stored its value: `set`, and `expire` when it gave a time.
fn notify_set(ctx: &mut Ctx<'_>, key: &Bytes, at: Option<u64>) {
    ctx.notify(notify::STRING, "set", key);
    if at.is_some() {
        ctx.notify(notify::GENERIC, "expire", key);
    }
}

fn setex_with(ctx: &mut Ctx<'_>, args: &[Bytes], unit_ms: u64, name: &str) -> Result<Reply> {
    let at = expiry_arg(&args[2], unit_ms, false, name, false)?;
    overwrite_string(ctx, &args[1], &args[3], Some(at))?;
    notify_set(ctx, &args[1], Some(at));
    Ok(Reply::ok())
}

fn setex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    setex_with(ctx, args, 1000, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    setex_with(ctx, args, 1, "psetex")
}

fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if json_exists(ctx, &args[1])? {
        return Ok(Reply::Int(0));
    }
    let set = modify_any_record(ctx, &args[1], None, |old| {
        Ok(match old {
            Some(_) => (StrWrite::Keep, false),
            None => (StrWrite::Put(args[2].to_vec(), Expiry::None), true),
        })
    })?;
    if set {
        ctx.notify(notify::STRING, "set", &args[1]);
    }
    Ok(Reply::Int(i64::from(set)))
}

fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let old = modify_string(ctx, &args[1], None, |old| {
        Ok((
            StrWrite::Put(args[2].to_vec(), Expiry::None),
            old.map(|(v, _)| Bytes::copy_from_slice(v)),
        ))
    })?;
    if old.is_none() {
        notify_key_miss(ctx, &args[1]);
    }
    ctx.notify(notify::STRING, "set", &args[1]);
    Ok(Reply::bulk_or_nil(old))
}

fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let old = modify_string(ctx, &args[1], None, |old| {
        Ok(match old {
            Some((v, _)) => (StrWrite::Delete, Some(Bytes::copy_from_slice(v))),
            None => (StrWrite::Keep, None),
        })
    })?;
    match old {
        Some(_) => ctx.notify(notify::GENERIC, "del", &args[1]),
        None => notify_key_miss(ctx, &args[1]),
    }
    Ok(Reply::bulk_or_nil(old))
}

fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Like Redis, a key of another type reads as nil here instead of failing the whole call.
    // The keys are read at one snapshot, so an MSET or EXEC is seen whole or not at all.
    let keys: Vec<Vec<u8>> = args[1..].iter().map(|k| string_key(ctx.dbi(), k)).collect();
    let mut out = Vec::with_capacity(keys.len());
    for v in ctx.db().multi_get(&keys)? {
        let live = match v {
            Some(v) => {
                Some(Record::decode(v)?).filter(|r| r.kind == KeyType::String && !r.expired_now())
            }
            None => None,
        };
        out.push(Reply::bulk_or_nil(live.map(|r| r.payload)));
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
        ops.extend(overwrite_ops(ctx, k, v, None)?);
    }
    ctx.db().write(ops)?;
    ctx.shared.note_writes(pairs.len() as u64);
    Ok(())
}

/// Runs consecutive pipelined `SET key value` commands (no options) as one engine write: one log
/// record per partition, so under `appendfsync always` one fsync per partition instead of one
/// per command. Replies are what running them one by one gives: `+OK` for each, or the error for
/// each. The caller checked that every command is exactly `SET key value`, that the session
/// is authenticated and not in MULTI, and holds the exec lock's shared side.
pub(crate) fn set_run(ctx: &Ctx<'_>, run: &[Vec<Bytes>]) -> Reply {
    let pairs: Vec<(&Bytes, &Bytes)> = run.iter().map(|c| (&c[1], &c[2])).collect();
    if !ctx.session.no_touch {
        for (k, _) in &pairs {
            ctx.shared.access.touch(k);
        }
    }
    ctx.shared
        .counters
        .total_commands
        .fetch_add(run.len() as u64, std::sync::atomic::Ordering::Relaxed);
    match write_pairs(ctx, &pairs) {
        Ok(()) => {
            // A merged run reports no events (it runs only while none are wanted), so it
            // wakes the clients blocked on keys it overwrote itself (`Ctx::notify_in`).
            let waiters = &ctx.shared.list_waiters;
            if waiters.any_waiting() {
                for (k, _) in &pairs {
                    waiters.note_key_if_waited(ctx.session.db, k);
                }
            }
            Reply::ok()
        }
        Err(e) => Reply::from(e),
    }
}

fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = pairs(args, "mset")?;
    write_pairs(ctx, &pairs)?;
    notify_pairs(ctx, &pairs);
    Ok(Reply::ok())
}

/// MSET's and MSETNX's `set` events, one per pair (a key given twice is reported twice).
fn notify_pairs(ctx: &mut Ctx<'_>, pairs: &[(&Bytes, &Bytes)]) {
    for (k, _) in pairs {
        ctx.notify(notify::STRING, "set", k);
    }
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pairs = pairs(args, "msetnx")?;
    // Runs with the exec lock held exclusively (see `commands::EXCLUSIVE`): no write can come
    // between the check and the batch.
    let now = now_ms();
    for (k, _) in &pairs {
        if lookup(ctx.db(), ctx.dbi(), k, now, ctx.shared.docs_may_exist())?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    write_pairs(ctx, &pairs)?;
    notify_pairs(ctx, &pairs);
    Ok(Reply::Int(1))
}

fn incr_by(ctx: &mut Ctx<'_>, key: &Bytes, delta: i64) -> Result<Reply> {
    let n = modify_string(ctx, key, None, |old| {
        let current = match old {
            None => 0,
            Some((v, _)) => parse_i64(v).ok_or(Error::NotInteger)?,
        };
        let next = current.checked_add(delta).ok_or(Error::Overflow)?;
        Ok((
            StrWrite::Put(next.to_string().into_bytes(), Expiry::Keep),
            next,
        ))
    })?;
    ctx.notify(notify::STRING, "incrby", key);
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
    // Redis's order: the stored value is parsed first, then the increment; an infinite
    // operand or result is refused after both parsed (`ldouble.rs`).
    let text = modify_string(ctx, &args[1], None, |old| {
        let parse = |text: &[u8]| match LongDouble::parse(text) {
            Ok(v) => Ok(Some(v)),
            Err(LdError::NanOrInfinity) => Ok(None),
            Err(LdError::NotFloat) => Err(Error::NotFloat),
        };
        let current = parse(old.map_or(&b"0"[..], |(v, _)| v))?;
        let delta = parse(&args[2])?;
        let nan_or_inf = || Error::command("increment would produce NaN or Infinity");
        let (Some(current), Some(delta)) = (current, delta) else {
            return Err(nan_or_inf());
        };
        let next = current.add(&delta).map_err(|_| nan_or_inf())?;
        let text = next.to_redis_string();
        Ok((
            StrWrite::PutAs(text.clone().into_bytes(), Expiry::Keep, Encoding::NotInt),
            text,
        ))
    })?;
    ctx.notify(notify::STRING, "incrbyfloat", &args[1]);
    Ok(Reply::text(text))
}

fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let max = ctx.shared.config().proto_max_bulk_len_bytes;
    let suffix = &args[2];
    let len = modify_string(ctx, &args[1], None, |old| {
        // Appending to a key makes Redis's string `raw`; a new key is written whole.
        let encoding = if old.is_some() {
            Encoding::Raw
        } else {
            Encoding::ByContent
        };
        let old = old.map_or(&[][..], |(v, _)| v);
        if old.len() + suffix.len() > max {
            return Err(max_string_error());
        }
        let mut v = Vec::with_capacity(old.len() + suffix.len());
        v.extend_from_slice(old);
        v.extend_from_slice(suffix);
        let len = v.len();
        Ok((StrWrite::PutAs(v, Expiry::Keep, encoding), len))
    })?;
    ctx.notify(notify::STRING, "append", &args[1]);
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
    // Checked in Redis's order: the key's type, then an empty patch, then the size.
    let len = modify_string(ctx, &args[1], None, |old| {
        let old = old.map(|(v, _)| v);
        if patch.is_empty() {
            return Ok((StrWrite::Keep, old.map_or(0, <[u8]>::len)));
        }
        if offset.saturating_add(patch.len()) > max {
            return Err(max_string_error());
        }
        let mut v = old.unwrap_or_default().to_vec();
        let end = offset + patch.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset..end].copy_from_slice(patch);
        let len = v.len();
        Ok((StrWrite::PutAs(v, Expiry::Keep, Encoding::Raw), len))
    })?;
    if !patch.is_empty() {
        ctx.notify(notify::STRING, "setrange", &args[1]);
    }
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
        assert_eq!(h.run(&["SET", "k", "v", "EX", "10"]), Reply::ok());
        assert_eq!(h.run(&["TTL", "k"]), Reply::Int(10));
        assert_eq!(h.run(&["SET", "k", "v2", "KEEPTTL"]), Reply::ok());
        assert_eq!(h.run(&["TTL", "k"]), Reply::Int(10));
        assert_eq!(h.run(&["SET", "k", "v3"]), Reply::ok());
        assert_eq!(h.run(&["TTL", "k"]), Reply::Int(-1));
        assert_eq!(
            h.run(&["SET", "k", "v", "EX", "0"]),
            err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(
            h.run(&["SET", "k", "v", "EX", "1", "PX", "5"]),
            err("ERR syntax error")
        );
        assert_eq!(h.run(&["SET", "k", "v", "PX", "1"]), Reply::ok());
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(h.run(&["GET", "k"]), Reply::Nil);
        assert_eq!(h.run(&["SET", "k", "w", "XX"]), Reply::Nil);
        assert_eq!(h.run(&["SET", "k", "v"]), Reply::ok());
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
        // What redis-server 7.0 answers (80-bit long double arithmetic, `ldouble.rs`).
        assert_eq!(
            h.run(&["INCRBYFLOAT", "f", "-5.0e3"]),
            bulk("-4989.39999999999999991")
        );
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
