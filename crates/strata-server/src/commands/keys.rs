//! Keyspace commands over both kinds (strings and documents) in the selected database: DEL,
//! UNLINK, DELETE (seed 004's word for DEL), EXISTS, TOUCH, TYPE, KEYS, SCAN, RANDOMKEY, DBSIZE,
//! FLUSHDB/FLUSHALL, RENAME/RENAMENX, COPY, MOVE, OBJECT, and the expiry family (EXPIRE,
//! PEXPIRE, EXPIREAT, PEXPIREAT with NX/XX/GT/LT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST).
//!
//! KEYS, SCAN and DBSIZE walk the engine in key order; a pattern's literal prefix narrows the
//! walk. SCAN's cursor names a remembered position (namespace + last key) in `state::CursorTable`,
//! so a scan sees every key that exists for its whole duration exactly once.

use std::ops::Bound;

use bytes::Bytes;
use rand::Rng;

use super::strings::expiry_arg;
use super::{int_arg, is, text, Ctx, Spec, READ, READ_FAST, WRITE};
use crate::backend::{prefix_end, BatchOp, Write};
use crate::collection::{
    element_key, list_key, list_range, order_tag, read_elements, zset_entries, zset_put_ops,
    FieldOrder, ListMeta, Meta, LIST_HEAD_START, ORDER_FIELDS_MAX,
};
use crate::error::{Error, Result};
use crate::glob;
use crate::keyspace::{
    self, doc_expiry, doc_ttl_key, expiry_index_key, now_ms, read_doc_bytes, string_key, DbIndex,
    Encoding, KeyType, Record, Space,
};
use crate::notify;
use crate::resp::Reply;
use crate::state::{lock, ScanPosition};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "del", arity: -2, flags: &["write"], keys: (1, -1, 1), group: "generic", summary: "Deletes one or more keys.", handler: del },
    Spec { name: "unlink", arity: -2, flags: &["write", "fast"], keys: (1, -1, 1), group: "generic", summary: "Deletes one or more keys.", handler: del },
    Spec { name: "delete", arity: -2, flags: &["write"], keys: (1, -1, 1), group: "generic", summary: "Deletes one or more keys (seed 004's name for DEL).", handler: del },
    Spec { name: "exists", arity: -2, flags: READ_FAST, keys: (1, -1, 1), group: "generic", summary: "Counts how many of the given keys exist.", handler: exists },
    Spec { name: "touch", arity: -2, flags: READ_FAST, keys: (1, -1, 1), group: "generic", summary: "Counts how many of the given keys exist (access times are not tracked).", handler: exists },
    Spec { name: "type", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the type of value stored at a key.", handler: type_cmd },
    Spec { name: "keys", arity: 2, flags: READ, keys: (0, 0, 0), group: "generic", summary: "Returns all key names that match a pattern.", handler: keys },
    Spec { name: "scan", arity: -2, flags: READ, keys: (0, 0, 0), group: "generic", summary: "Iterates over the key names in the database.", handler: scan },
    Spec { name: "randomkey", arity: 1, flags: READ, keys: (0, 0, 0), group: "generic", summary: "Returns a random key name from the database.", handler: randomkey },
    Spec { name: "dbsize", arity: 1, flags: READ, keys: (0, 0, 0), group: "server", summary: "Returns the number of keys in the database.", handler: dbsize },
    Spec { name: "flushdb", arity: -1, flags: &["write"], keys: (0, 0, 0), group: "server", summary: "Removes all keys from the current database.", handler: flushdb },
    Spec { name: "flushall", arity: -1, flags: &["write"], keys: (0, 0, 0), group: "server", summary: "Removes all keys from all databases.", handler: flushall },
    Spec { name: "rename", arity: 3, flags: &["write"], keys: (1, 2, 1), group: "generic", summary: "Renames a key and overwrites the destination.", handler: rename },
    Spec { name: "renamenx", arity: 3, flags: &["write", "fast"], keys: (1, 2, 1), group: "generic", summary: "Renames a key only when the target key name doesn't exist.", handler: renamenx },
    Spec { name: "copy", arity: -3, flags: WRITE, keys: (1, 2, 1), group: "generic", summary: "Copies the value of a key to a new key.", handler: copy },
    Spec { name: "swapdb", arity: 3, flags: &["write", "fast"], keys: (0, 0, 0), group: "server", summary: "Swaps two Redis databases.", handler: swapdb },
    Spec { name: "move", arity: 3, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Moves a key to another database.", handler: move_cmd },
    Spec { name: "object", arity: -2, flags: READ, keys: (2, 2, 1), group: "generic", summary: "OBJECT ENCODING, FREQ, IDLETIME, REFCOUNT, HELP.", handler: object },
    Spec { name: "dump", arity: 2, flags: READ, keys: (1, 1, 1), group: "generic", summary: "Returns a serialized representation of the value stored at a key.", handler: dump },
    Spec { name: "restore", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Creates a key from the serialized representation of a value.", handler: restore },
    Spec { name: "wait", arity: 3, flags: &["noscript"], keys: (0, 0, 0), group: "generic", summary: "Waits for replicas (there are none: answers 0 at once).", handler: wait },
    Spec { name: "waitaof", arity: 4, flags: &["noscript"], keys: (0, 0, 0), group: "generic", summary: "Forces the write-ahead log to disk so that this client's writes so far survive a power cut (replicas: none, answered at once).", handler: waitaof },
    Spec { name: "ttl", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the expiration time in seconds of a key.", handler: ttl },
    Spec { name: "pttl", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the expiration time in milliseconds of a key.", handler: pttl },
    Spec { name: "expiretime", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the expiration time of a key as a Unix timestamp (seconds).", handler: expiretime },
    Spec { name: "pexpiretime", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "generic", summary: "Returns the expiration time of a key as a Unix timestamp (milliseconds).", handler: pexpiretime },
    Spec { name: "persist", arity: 2, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Removes the expiration time of a key.", handler: persist },
    Spec { name: "expire", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Sets the expiration time of a key in seconds.", handler: expire },
    Spec { name: "pexpire", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Sets the expiration time of a key in milliseconds.", handler: pexpire },
    Spec { name: "expireat", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Sets the expiration time of a key to a Unix timestamp.", handler: expireat },
    Spec { name: "pexpireat", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "generic", summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", handler: pexpireat },
];

fn docs(ctx: &Ctx<'_>) -> bool {
    ctx.shared.docs_may_exist()
}

fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let now = now_ms();
    let removed = if args.len() == 2 {
        // (A document and its expiry record go together: `Shared::doc_locks`.)
        let doc_guard = docs(ctx).then(|| ctx.shared.doc_lock(ctx.dbi(), &args[1]));
        let removed = keyspace::remove(ctx.db(), ctx.dbi(), &args[1], now, docs(ctx))?;
        drop(doc_guard);
        if removed {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
        i64::from(removed)
    } else {
        // Several keys: the dispatcher holds the exec lock exclusively, so the keys found here
        // are the ones the single batch below removes.
        let mut ops = Vec::new();
        let mut removed = 0;
        let mut seen = std::collections::HashSet::new();
        let mut gone = Vec::new();
        for key in &args[1..] {
            // A key named twice is deleted (and counted) once.
            // Only live keys are written: a removal of nothing is no change, which WATCH and
            // CLIENT TRACKING would otherwise see (a key stored past its time is left to
            // active expiry).
            let mut key_ops = Vec::new();
            if seen.insert(key) && ops_removing(ctx, ctx.dbi(), key, &mut key_ops)? {
                removed += 1;
                gone.push(key);
                ops.append(&mut key_ops);
            }
        }
        if !ops.is_empty() {
            ctx.db().write(ops)?;
        }
        for key in gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
        removed
    };
    ctx.shared.note_writes(removed as u64);
    Ok(Reply::Int(removed))
}

/// Appends the writes that remove `key` from `db` whatever it holds; true if it was live.
pub(crate) fn ops_removing(
    ctx: &Ctx<'_>,
    db: DbIndex,
    key: &[u8],
    ops: &mut Vec<BatchOp>,
) -> Result<bool> {
    let live = keyspace::lookup(ctx.db(), db, key, now_ms(), docs(ctx))?.is_some();
    ops.push(BatchOp::Delete(string_key(db, key)));
    if docs(ctx) {
        ops.extend(Space::Docs.key(db, key).map(BatchOp::Delete));
        ops.push(BatchOp::Delete(doc_ttl_key(db, key)));
    }
    Ok(live)
}

fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // A key named twice counts twice, as in Redis.
    let now = now_ms();
    let mut n = 0;
    for key in &args[1..] {
        if keyspace::lookup(ctx.db(), ctx.dbi(), key, now, docs(ctx))?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn type_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let found = keyspace::lookup(ctx.db(), ctx.dbi(), &args[1], now_ms(), docs(ctx))?;
    Ok(Reply::simple(found.map_or("none", |(t, _)| t.name())))
}

/// The key's expiry: `None` absent, `Some(None)` no expiry, `Some(Some(ms))`.
fn expiry_of(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Option<u64>>> {
    Ok(keyspace::lookup(ctx.db(), ctx.dbi(), key, now_ms(), docs(ctx))?.map(|(_, e)| e))
}

fn ttl_reply(ctx: &Ctx<'_>, key: &[u8], ms: bool, absolute: bool) -> Result<Reply> {
    Ok(Reply::Int(match expiry_of(ctx, key)? {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            let left = if absolute {
                at
            } else {
                at.saturating_sub(now_ms())
            };
            let left = i64::try_from(left).unwrap_or(i64::MAX);
            if ms {
                left
            } else {
                left.saturating_add(500) / 1000
            }
        }
    }))
}

fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    ttl_reply(ctx, &args[1], false, false)
}

fn pttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    ttl_reply(ctx, &args[1], true, false)
}

fn expiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    ttl_reply(ctx, &args[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    ttl_reply(ctx, &args[1], true, true)
}

/// Changes the expiry time of the live key `key` in the selected database to `when` (`None`:
/// no expiry) if `allowed` accepts its current one; a time not in the future deletes the key.
/// `None` when the key does not exist, else whether it changed.
fn change_expiry(
    ctx: &Ctx<'_>,
    key: &[u8],
    when: Option<u64>,
    allowed: &dyn Fn(Option<u64>) -> bool,
) -> Result<Option<bool>> {
    let now = now_ms();
    let db = ctx.dbi();
    let past = when.is_some_and(|at| at <= now);
    if let Some(at) = when.filter(|_| !past) {
        ctx.db().put(&expiry_index_key(db, at, key), &[])?;
    }
    let mut outcome = None;
    ctx.db().update(&string_key(db, key), &mut |old| {
        let Some(old) = old else {
            return Ok(Write::Keep);
        };
        let r = Record::decode(Bytes::copy_from_slice(old))?;
        if r.expired(now) {
            return Ok(Write::Keep);
        }
        if !allowed(r.expire_at_ms) {
            outcome = Some(false);
            return Ok(Write::Keep);
        }
        outcome = Some(true);
        // The same time again is still a change, as in Redis (WATCH and CLIENT TRACKING see
        // it).
        Ok(if past {
            Write::Delete
        } else {
            Write::Put(r.with_expiry(when))
        })
    })?;
    if outcome.is_some() || !docs(ctx) {
        if outcome == Some(true) {
            ctx.shared.note_writes(1);
        }
        return Ok(outcome);
    }
    // The document and its expiry record change together (`Shared::doc_locks`).
    let _doc_guard = ctx.shared.doc_lock(db, key);
    if read_doc_bytes(ctx.db(), db, key, now)?.is_none() {
        return Ok(None);
    }
    let current = doc_expiry(ctx.db(), db, key)?;
    if !allowed(current) {
        return Ok(Some(false));
    }
    match when {
        _ if past => {
            let mut ops = vec![BatchOp::Delete(doc_ttl_key(db, key))];
            ops.extend(Space::Docs.key(db, key).map(BatchOp::Delete));
            ctx.db().write(ops)?;
        }
        Some(at) => ctx.db().put(&doc_ttl_key(db, key), &at.to_le_bytes())?,
        None if current.is_some() => ctx.db().delete(&doc_ttl_key(db, key))?,
        None => {}
    }
    ctx.shared.note_writes(1);
    Ok(Some(true))
}

fn persist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let changed = change_expiry(ctx, &args[1], None, &|current| current.is_some())?;
    if changed == Some(true) {
        ctx.notify(notify::GENERIC, "persist", &args[1]);
    }
    Ok(Reply::Int(i64::from(changed == Some(true))))
}

fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    unit_ms: u64,
    absolute: bool,
) -> Result<Reply> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if is(opt, "NX") {
            nx = true;
        } else if is(opt, "XX") {
            xx = true;
        } else if is(opt, "GT") {
            gt = true;
        } else if is(opt, "LT") {
            lt = true;
        } else {
            return Err(Error::command(format!(
                "Unsupported option {}",
                crate::error::shown_arg(opt, usize::MAX)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Error::command(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Error::command(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let name = args[0].to_ascii_lowercase();
    let when = expiry_arg(&args[2], unit_ms, absolute, &text(&name), true)?;
    let allowed = move |current: Option<u64>| {
        !(nx && current.is_some()
            || xx && current.is_none()
            || gt && current.is_none_or(|c| when <= c)
            || lt && current.is_some_and(|c| when >= c))
    };
    let changed = change_expiry(ctx, &args[1], Some(when), &allowed)?;
    if changed == Some(true) {
        // A time already past deletes the key (as Redis does).
        let event = if when <= now_ms() { "del" } else { "expire" };
        ctx.notify(notify::GENERIC, event, &args[1]);
    }
    Ok(Reply::Int(i64::from(changed == Some(true))))
}

fn expire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    expire_generic(ctx, args, 1000, false)
}

fn pexpire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    expire_generic(ctx, args, 1, false)
}

fn expireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    expire_generic(ctx, args, 1000, true)
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    expire_generic(ctx, args, 1, true)
}

/// A live key's stored form, to copy elsewhere (a stream's fields: its engine keys after
/// the incarnation's prefix, and their values).
struct Stored {
    kind: KeyType,
    /// The engine value (a string record, a hash's record, or the document's encoding).
    bytes: Bytes,
    expire_at_ms: Option<u64>,
    /// A collection's elements: a hash's fields and values, a set's members (empty values), a
    /// list's elements in order (empty values).
    fields: Vec<(Bytes, Bytes)>,
}

fn read_stored(ctx: &Ctx<'_>, db: DbIndex, key: &[u8]) -> Result<Option<Stored>> {
    let now = now_ms();
    if let Some(v) = ctx.db().get(&string_key(db, key))? {
        let r = Record::decode(v.clone())?;
        if !r.expired(now) {
            let fields = match r.kind {
                KeyType::Hash | KeyType::Set => {
                    let meta = Meta::decode(&r.payload)?;
                    let mut fields = read_elements(ctx.db(), db, key, &meta)?;
                    // A hash's fields as added (COPY, RENAME and DUMP keep that order).
                    if let Some(order) = FieldOrder::of_payload(&r.payload)? {
                        order.arrange(&mut fields, |(f, _)| f);
                    }
                    fields
                }
                KeyType::Zset => {
                    let meta = Meta::decode(&r.payload)?;
                    zset_entries(ctx.db(), db, key, &meta)?
                        .into_iter()
                        .map(|(m, score)| (m, Bytes::copy_from_slice(&score.to_le_bytes())))
                        .collect()
                }
                KeyType::List => {
                    let m = ListMeta::decode(&r.payload)?;
                    let end = m.head.saturating_add(m.count);
                    list_range(ctx.db(), db, key, m.version, m.head, end)?
                        .into_iter()
                        .map(|v| (v, Bytes::new()))
                        .collect()
                }
                KeyType::Stream => {
                    // Every engine key of the incarnation as it is (what follows its prefix).
                    let m = crate::stream::StreamMeta::decode(&r.payload)?;
                    let prefix = crate::collection::element_prefix(db, key, m.version);
                    let mut fields = Vec::new();
                    ctx.db().scan_group(
                        &string_key(db, key),
                        Bound::Included(prefix.clone()),
                        prefix_end(&prefix),
                        &mut |k, v| {
                            fields.push((
                                Bytes::copy_from_slice(&k[prefix.len()..]),
                                Bytes::copy_from_slice(v),
                            ));
                            true
                        },
                    )?;
                    fields
                }
                _ => Vec::new(),
            };
            return Ok(Some(Stored {
                kind: r.kind,
                bytes: v,
                expire_at_ms: r.expire_at_ms,
                fields,
            }));
        }
    }
    if !docs(ctx) {
        return Ok(None);
    }
    match read_doc_bytes(ctx.db(), db, key, now)? {
        Some(bytes) => Ok(Some(Stored {
            kind: KeyType::Json,
            bytes,
            expire_at_ms: doc_expiry(ctx.db(), db, key)?,
            fields: Vec::new(),
        })),
        None => Ok(None),
    }
}

/// The writes storing `stored` as `key` in `db` (after the writes removing what it held).
fn ops_storing(
    ctx: &Ctx<'_>,
    db: DbIndex,
    key: &[u8],
    stored: &Stored,
    ops: &mut Vec<BatchOp>,
) -> Result<()> {
    if let Some(at) = stored.expire_at_ms {
        ops.push(BatchOp::Put(expiry_index_key(db, at, key), Vec::new()));
    }
    match stored.kind {
        KeyType::String => ops.push(BatchOp::Put(string_key(db, key), stored.bytes.to_vec())),
        KeyType::Hash | KeyType::Set | KeyType::List | KeyType::Zset => {
            // A new incarnation under the new name: its own version, its own elements.
            let r = Record::decode(stored.bytes.clone())?;
            let version = ctx.shared.versions.next();
            let count = stored.fields.len() as u64;
            let meta = match r.kind {
                KeyType::List => ListMeta {
                    version,
                    count,
                    head: LIST_HEAD_START,
                }
                .encode()
                .to_vec(),
                // A compact hash lists its fields in the order stored (as read, or as the
                // payload gave them: Redis's listpack keeps that order too).
                KeyType::Hash
                    if r.encoding != Encoding::Raw && stored.fields.len() <= ORDER_FIELDS_MAX =>
                {
                    let order: Vec<u32> = stored.fields.iter().map(|(f, _)| order_tag(f)).collect();
                    Meta::new(version, count).encode_ordered(&order)
                }
                _ => Meta::new(version, count).encode(),
            };
            ops.push(BatchOp::Put(
                string_key(db, key),
                Record::encode_collection(r.kind, &meta, r.expire_at_ms, r.encoding),
            ));
            for (i, (e, v)) in stored.fields.iter().enumerate() {
                match r.kind {
                    KeyType::List => ops.push(BatchOp::Put(
                        list_key(db, key, version, LIST_HEAD_START + i as u64),
                        e.to_vec(),
                    )),
                    KeyType::Zset => {
                        let score = f64::from_le_bytes(v[..].try_into().map_err(|_| {
                            Error::command("stored data is damaged: a sorted set score")
                        })?);
                        ops.extend(zset_put_ops(db, key, version, e, score));
                    }
                    _ => ops.push(BatchOp::Put(element_key(db, key, version, e), v.to_vec())),
                }
            }
        }
        KeyType::Stream => {
            let r = Record::decode(stored.bytes.clone())?;
            let mut meta = crate::stream::StreamMeta::decode(&r.payload)?;
            meta.version = ctx.shared.versions.next();
            ops.push(BatchOp::Put(
                string_key(db, key),
                Record::encode_collection(r.kind, &meta.encode(), r.expire_at_ms, r.encoding),
            ));
            let prefix = crate::collection::element_prefix(db, key, meta.version);
            for (sub, v) in &stored.fields {
                let mut k = prefix.clone();
                k.extend_from_slice(sub);
                ops.push(BatchOp::Put(k, v.to_vec()));
            }
        }
        KeyType::Json => {
            let k = Space::Docs
                .key(db, key)
                .ok_or_else(|| Error::command("JSON keys must be valid UTF-8"))?;
            ops.push(BatchOp::Put(k, stored.bytes.to_vec()));
            if let Some(at) = stored.expire_at_ms {
                ops.push(BatchOp::Put(
                    doc_ttl_key(db, key),
                    at.to_le_bytes().to_vec(),
                ));
            }
        }
    }
    Ok(())
}

/// Removal writes first, then the stores: a later write of the same key in one batch wins.
pub(crate) fn write_ops(ctx: &mut Ctx<'_>, ops: Vec<BatchOp>) -> Result<()> {
    // Deduplicate by key keeping the last write, so the batch's meaning does not depend on
    // how the engine orders writes of one key within a batch.
    let mut last: std::collections::BTreeMap<Vec<u8>, BatchOp> = Default::default();
    for op in ops {
        let k = match &op {
            BatchOp::Put(k, _) | BatchOp::Delete(k) => k.clone(),
        };
        last.insert(k, op);
    }
    ctx.db().write(last.into_values().collect())?;
    ctx.shared.note_writes(1);
    // RENAME, COPY, MOVE, RESTORE may have put a list under a name a client waits on.
    ctx.session.note_list_push();
    Ok(())
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &[Bytes], nx: bool) -> Result<Reply> {
    let (src, dst) = (&args[1], &args[2]);
    let db = ctx.dbi();
    let Some(stored) = read_stored(ctx, db, src)? else {
        return Err(Error::command("no such key"));
    };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    if nx && keyspace::lookup(ctx.db(), db, dst, now_ms(), docs(ctx))?.is_some() {
        return Ok(Reply::Int(0));
    }
    if stored.kind == KeyType::Json && std::str::from_utf8(dst).is_err() {
        return Err(Error::command("JSON keys must be valid UTF-8"));
    }
    let mut ops = Vec::new();
    ops_removing(ctx, db, dst, &mut ops)?;
    ops_removing(ctx, db, src, &mut ops)?;
    ops_storing(ctx, db, dst, &stored, &mut ops)?;
    write_ops(ctx, ops)?;
    // Redis deletes the destination and adds it anew: always a `new` key.
    ctx.notify(notify::NEW, "new", dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

fn rename(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    rename_generic(ctx, args, true)
}

fn swapdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if ctx.session.cluster {
        return Err(Error::command("SWAPDB is not allowed in cluster mode"));
    }
    let a = db_arg(ctx, &args[1], Some("invalid first DB index"))?;
    let b = db_arg(ctx, &args[2], Some("invalid second DB index"))?;
    if a != b {
        // The dispatcher holds the exec lock exclusively. Clients see the swap at once, as in
        // Redis, and every WATCH is invalidated (Redis invalidates those on keys of the two
        // databases). Inside EXEC or a script the map goes to the store with the rest of its
        // batch (`ctx.db()` is the overlay).
        ctx.shared.swap_databases(a, b, ctx.db())?;
        ctx.session.note_list_push();
        ctx.shared.watches.touch_all();
        ctx.shared.note_writes(1);
    }
    Ok(Reply::ok())
}

/// A logical database number argument, with Redis's errors (`getIntFromObjectOrReply`): not
/// an integer, or outside a C `int`, is `message` when the command gives one (SWAPDB), else
/// Redis's two generic errors; a number that names no database is "DB index is out of range".
pub(crate) fn db_arg(ctx: &Ctx<'_>, arg: &[u8], message: Option<&str>) -> Result<DbIndex> {
    let refused = |generic: Error| message.map_or(generic, Error::command);
    let n = int_arg(arg).map_err(refused)?;
    if i32::try_from(n).is_err() {
        return Err(refused(Error::command(
            "value is out of range, value must between -2147483648 and 2147483647",
        )));
    }
    match usize::try_from(n) {
        Ok(n) if n < ctx.shared.config().databases => {
            DbIndex::try_from(n).map_err(|_| Error::command("DB index is out of range"))
        }
        _ => Err(Error::command("DB index is out of range")),
    }
}

fn copy(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (src, dst) = (&args[1], &args[2]);
    let mut to_db = ctx.dbi();
    let mut to_logical = ctx.session.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "DB") && i + 1 < args.len() {
            to_logical = db_arg(ctx, &args[i + 1], None)?;
            to_db = ctx.shared.physical_db(to_logical);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if ctx.session.cluster && to_db != ctx.dbi() {
        return Err(Error::command(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    if src == dst && to_db == ctx.dbi() {
        return Err(Error::command(
            "source and destination objects are the same",
        ));
    }
    let Some(stored) = read_stored(ctx, ctx.dbi(), src)? else {
        return Ok(Reply::Int(0));
    };
    let mut ops = Vec::new();
    if keyspace::lookup(ctx.db(), to_db, dst, now_ms(), true)?.is_some() && !replace {
        return Ok(Reply::Int(0));
    }
    ops_removing(ctx, to_db, dst, &mut ops)?;
    ops_storing(ctx, to_db, dst, &stored, &mut ops)?;
    write_ops(ctx, ops)?;
    ctx.notify_in(notify::NEW, "new", to_logical, dst);
    ctx.notify_in(notify::GENERIC, "copy_to", to_logical, dst);
    Ok(Reply::Int(1))
}

fn move_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    if ctx.session.cluster {
        return Err(Error::command("MOVE is not allowed in cluster mode"));
    }
    let key = &args[1];
    let to_logical = db_arg(ctx, &args[2], None)?;
    let to_db = ctx.shared.physical_db(to_logical);
    if to_db == ctx.dbi() {
        return Err(Error::command(
            "source and destination objects are the same",
        ));
    }
    let Some(stored) = read_stored(ctx, ctx.dbi(), key)? else {
        return Ok(Reply::Int(0));
    };
    if keyspace::lookup(ctx.db(), to_db, key, now_ms(), true)?.is_some() {
        return Ok(Reply::Int(0));
    }
    let mut ops = Vec::new();
    ops_removing(ctx, to_db, key, &mut ops)?;
    ops_removing(ctx, ctx.dbi(), key, &mut ops)?;
    ops_storing(ctx, to_db, key, &stored, &mut ops)?;
    write_ops(ctx, ops)?;
    ctx.notify_in(notify::NEW, "new", to_logical, key);
    ctx.notify(notify::GENERIC, "move_from", key);
    ctx.notify_in(notify::GENERIC, "move_to", to_logical, key);
    Ok(Reply::Int(1))
}

fn object(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = &args[1];
    if is(sub, "HELP") && args.len() > 2 {
        return Err(Error::WrongArity("object|help".into()));
    }
    if is(sub, "HELP") {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ];
        return Ok(Reply::Array(
            lines.iter().map(|l| Reply::Simple((*l).into())).collect(),
        ));
    }
    let known = ["ENCODING", "FREQ", "IDLETIME", "REFCOUNT"];
    if !known.iter().any(|w| is(sub, w)) {
        return Err(Error::UnknownSubcommand {
            container: "OBJECT",
            sub: text(sub),
        });
    }
    if args.len() != 3 {
        return Err(Error::WrongArity(format!(
            "object|{}",
            text(sub).to_ascii_lowercase()
        )));
    }
    let Some(stored) = read_stored(ctx, ctx.dbi(), &args[2])? else {
        return Ok(Reply::Nil);
    };
    if is(sub, "FREQ") {
        return Err(Error::command(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    if is(sub, "IDLETIME") {
        let idle = ctx.shared.access.idle_secs(&args[2]);
        return Ok(Reply::Int(i64::try_from(idle).unwrap_or(i64::MAX)));
    }
    if is(sub, "REFCOUNT") {
        // Redis keeps the integers 0..=9999 as shared objects, whose count is INT_MAX; every
        // other value is its key's alone.
        if stored.kind == KeyType::String {
            let r = Record::decode(stored.bytes)?;
            let shared = string_encoding(&r.payload, r.encoding) == "int"
                && crate::num::parse_i64(&r.payload)
                    .is_some_and(|n| (0..SHARED_INTEGERS).contains(&n));
            if shared {
                return Ok(Reply::Int(i64::from(i32::MAX)));
            }
        }
        return Ok(Reply::Int(1));
    }
    Ok(Reply::text(match stored.kind {
        KeyType::Json => "raw",
        KeyType::Stream => "stream",
        KeyType::List => "quicklist",
        KeyType::Zset => {
            if Record::decode(stored.bytes)?.encoding == keyspace::Encoding::Raw {
                "skiplist"
            } else {
                "listpack"
            }
        }
        KeyType::Hash | KeyType::Set => {
            let big = Record::decode(stored.bytes)?.encoding == keyspace::Encoding::Raw;
            match (stored.kind, big) {
                (_, true) => "hashtable",
                (KeyType::Hash, false) => "listpack",
                _ => "intset",
            }
        }
        KeyType::String => {
            let r = Record::decode(stored.bytes)?;
            string_encoding(&r.payload, r.encoding)
        }
    }))
}

/// Redis's `OBJ_SHARED_INTEGERS`: string values 0 to 9999 are shared objects.
const SHARED_INTEGERS: i64 = 10_000;

/// What Redis reports for a string: written whole (SET...), `int` for a canonical 64-bit
/// integer of at most 20 bytes, `embstr` up to 44 bytes, `raw` beyond; grown in place (APPEND
/// to a key, SETRANGE) `raw`; made from a float (INCRBYFLOAT) `embstr` or `raw` by length.
fn string_encoding(v: &[u8], made: keyspace::Encoding) -> &'static str {
    let canonical_int =
        v.len() <= 20 && crate::num::parse_i64(v).is_some_and(|n| n.to_string().as_bytes() == v);
    match made {
        keyspace::Encoding::Raw => "raw",
        keyspace::Encoding::ByContent if canonical_int => "int",
        _ if v.len() <= 44 => "embstr",
        _ => "raw",
    }
}

fn dump(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(match dump_payload(ctx, &args[1])? {
        Some((payload, _)) => Reply::Bulk(Bytes::from(payload)),
        None => Reply::Nil,
    })
}

/// DUMP's payload of the live key `key` in the selected database, with its expiry time.
pub(crate) fn dump_payload(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<(Vec<u8>, Option<u64>)>> {
    let Some(stored) = read_stored(ctx, ctx.dbi(), key)? else {
        return Ok(None);
    };
    let payload = match stored.kind {
        KeyType::String => crate::dump::dump_string(&Record::decode(stored.bytes)?.payload),
        KeyType::Hash => crate::dump::dump_hash(&stored.fields),
        KeyType::Set => crate::dump::dump_set(&stored.fields),
        KeyType::List => crate::dump::dump_list(&stored.fields),
        KeyType::Zset => crate::dump::dump_zset(&stored.fields),
        KeyType::Stream => {
            // Redis's stream payload is its listpacks and radix tree, not written here yet.
            return Err(Error::command("DUMP of a stream is not offered yet"));
        }
        KeyType::Json => {
            let doc = strata_doc::decode_stored(&stored.bytes, &ctx.shared.names)?;
            crate::dump::dump_json(strata_doc::to_json_string(&doc)?.as_bytes())
        }
    };
    Ok(Some((payload, stored.expire_at_ms)))
}

pub(crate) fn restore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (key, ttl_arg, payload) = (&args[1], &args[2], &args[3]);
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, false);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "ABSTTL") {
            absttl = true;
        } else if is(&args[i], "IDLETIME") && more && !freq {
            let secs = u64::try_from(int_arg(&args[i + 1])?)
                .map_err(|_| Error::command("Invalid IDLETIME value, must be >= 0"))?;
            idle = Some(secs);
            i += 1;
        } else if is(&args[i], "FREQ") && more && idle.is_none() {
            if !(0..=255).contains(&int_arg(&args[i + 1])?) {
                return Err(Error::command(
                    "Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = true;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    let db = ctx.dbi();
    // The dispatcher holds the exec lock exclusively: the check and the batch are one step.
    if !replace && keyspace::lookup(ctx.db(), db, key, now_ms(), docs(ctx))?.is_some() {
        return Err(Error::Coded(
            "BUSYKEY Target key name already exists.".into(),
        ));
    }
    let ttl = int_arg(ttl_arg)?;
    if ttl < 0 {
        return Err(Error::command("Invalid TTL value, must be >= 0"));
    }
    let value = crate::dump::restore(payload)?;
    let expire_at_ms = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some((t as u64).saturating_add(now_ms())),
    };
    let mut ops = Vec::new();
    let replaced = replace && ops_removing(ctx, db, key, &mut ops)?;
    if expire_at_ms.is_some_and(|at| at <= now_ms()) {
        // Already expired: only the removal (REPLACE) happens, as in Redis.
        if !ops.is_empty() {
            write_ops(ctx, ops)?;
        }
        if replaced {
            ctx.notify(notify::GENERIC, "del", key);
        }
        return Ok(Reply::ok());
    }
    let stored = match value {
        crate::dump::Restored::String(v) => Stored {
            kind: KeyType::String,
            bytes: Bytes::from(Record::encode(&v, expire_at_ms)),
            expire_at_ms,
            fields: Vec::new(),
        },
        crate::dump::Restored::Hash(fields) => {
            let limits = ctx.shared.encodings();
            let big = fields.iter().any(|(f, v)| {
                super::collections::outgrows(&limits, KeyType::Hash, fields.len() as u64, f, v)
            });
            let encoding = if big {
                keyspace::Encoding::Raw
            } else {
                keyspace::Encoding::ByContent
            };
            Stored {
                kind: KeyType::Hash,
                bytes: Bytes::from(Record::encode_collection(
                    KeyType::Hash,
                    &[],
                    expire_at_ms,
                    encoding,
                )),
                expire_at_ms,
                fields,
            }
        }
        crate::dump::Restored::Zset(entries) => {
            let limits = ctx.shared.encodings();
            let big = entries.iter().any(|(m, _)| {
                super::collections::outgrows(&limits, KeyType::Zset, entries.len() as u64, m, &[])
            });
            let encoding = if big {
                keyspace::Encoding::Raw
            } else {
                keyspace::Encoding::ByContent
            };
            Stored {
                kind: KeyType::Zset,
                bytes: Bytes::from(Record::encode_collection(
                    KeyType::Zset,
                    &[],
                    expire_at_ms,
                    encoding,
                )),
                expire_at_ms,
                fields: entries
                    .into_iter()
                    .map(|(m, s)| (m, Bytes::copy_from_slice(&s.to_le_bytes())))
                    .collect(),
            }
        }
        crate::dump::Restored::List(elements) => Stored {
            kind: KeyType::List,
            bytes: Bytes::from(Record::encode_collection(
                KeyType::List,
                &[],
                expire_at_ms,
                keyspace::Encoding::ByContent,
            )),
            expire_at_ms,
            fields: elements.into_iter().map(|e| (e, Bytes::new())).collect(),
        },
        crate::dump::Restored::Set(members) => {
            let limits = ctx.shared.encodings();
            let big = members.iter().any(|m| {
                super::collections::outgrows(&limits, KeyType::Set, members.len() as u64, m, &[])
            });
            let encoding = if big {
                keyspace::Encoding::Raw
            } else {
                keyspace::Encoding::ByContent
            };
            Stored {
                kind: KeyType::Set,
                bytes: Bytes::from(Record::encode_collection(
                    KeyType::Set,
                    &[],
                    expire_at_ms,
                    encoding,
                )),
                expire_at_ms,
                fields: members.into_iter().map(|m| (m, Bytes::new())).collect(),
            }
        }
        crate::dump::Restored::Json(text) => {
            let doc = strata_doc::from_json_slice(&text)
                .map_err(|_| Error::command("Bad data format"))?;
            ctx.shared.note_document();
            ctx.shared.names.intern_pending()?;
            Stored {
                kind: KeyType::Json,
                bytes: Bytes::from(strata_doc::encode_stored(&doc, &ctx.shared.names)?),
                expire_at_ms,
                fields: Vec::new(),
            }
        }
    };
    ops_storing(ctx, db, key, &stored, &mut ops)?;
    write_ops(ctx, ops)?;
    if let Some(secs) = idle {
        // The payload's key was last used that long ago (DUMP's counterpart in MIGRATE).
        ctx.shared.access.set_idle(key, secs);
    }
    ctx.notify(notify::NEW, "new", key);
    ctx.notify(notify::GENERIC, "restore", key);
    Ok(Reply::ok())
}

fn wait(_: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // No replicas: as a Redis primary without replicas, after checking the arguments.
    int_arg(&args[1])?;
    if int_arg(&args[2])? < 0 {
        return Err(Error::command("timeout is negative"));
    }
    Ok(Reply::Int(0))
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): with `numlocal` 1, forces every
/// partition's write-ahead log to disk, so that every write this client was answered for (and
/// every other before it) survives a power cut, and answers `[1, 0]`; with 0, answers `[0, 0]`
/// without forcing anything. The log is always on (`appendonly yes`). There are no replicas:
/// like WAIT, it does not wait for them. Inside MULTI (where Redis does not block either) it
/// forces nothing, and answers 0 for the log: the transaction's own writes are not committed
/// until EXEC ends.
fn waitaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let numlocal = int_arg(&args[1])?;
    if !(0..=1).contains(&numlocal) {
        return Err(Error::command(
            "value is out of range, value must between 0 and 1",
        ));
    }
    if int_arg(&args[2])? < 0 {
        return Err(Error::command("value is out of range, must be positive"));
    }
    let timeout = crate::num::parse_i64(&args[3])
        .ok_or_else(|| Error::command("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Error::command("timeout is negative"));
    }
    let local = if numlocal == 1 && !ctx.session.in_exec {
        ctx.db().sync()?;
        1
    } else {
        0
    };
    Ok(Reply::Array(vec![Reply::Int(local), Reply::Int(0)]))
}

fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let pattern = &args[1];
    let prefix = glob::literal_prefix(pattern);
    let now = now_ms();
    let mut out = Vec::new();
    for t in Space::ALL {
        keyspace::visit_keys(ctx.db(), ctx.dbi(), t, prefix, None, now, &mut |k, _, _| {
            if glob::matches(pattern, k, false) {
                out.push(Reply::Bulk(Bytes::copy_from_slice(k)));
            }
            true
        })?;
    }
    Ok(Reply::Array(out))
}

fn dbsize(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    // The engine counts every database's keys as they are written (`keyspace::KeysByDb`),
    // expired keys not yet removed included: those are removed first. Inside EXEC or a script
    // the counts lack the pending writes: a walk of the transaction's view then.
    if ctx.db().key_counts_known() {
        // A store that refuses writes (a failed log) still answers, counting expired keys
        // not yet removed, as Redis does.
        if let Err(e) = crate::expire::sweep_for_count(ctx.shared, ctx.dbi()) {
            tracing::debug!(error = %e, "DBSIZE could not remove expired keys first");
        }
        if let Some(n) = ctx.db().key_count(ctx.dbi()) {
            return Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)));
        }
    }
    Ok(Reply::Int(
        keyspace::count(ctx.db(), ctx.dbi(), now_ms())?.0 as i64,
    ))
}

/// Keys RANDOMKEY chooses among: the ones that follow a random point of the key order.
const RANDOMKEY_WINDOW_KEYS: usize = 64;

fn randomkey(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Result<Reply> {
    // One of the (up to) 64 live keys that follow a random point of the key order, wrapping
    // around, chosen uniformly: exactly uniform in a database of at most 64 keys (the nearest
    // key after a random point alone was almost always the same one when names share a long
    // prefix: `user:1` came up, `user:2` never). In a larger database a key's chance still
    // depends on where it sits in the key order; a uniform draw needs a count the engine does
    // not keep.
    let now = now_ms();
    let db = ctx.dbi();
    let mut rng = rand::thread_rng();
    let point: [u8; 8] = rng.gen();
    let mut window: Vec<Bytes> = Vec::with_capacity(RANDOMKEY_WINDOW_KEYS);
    for t in Space::ALL {
        if window.len() >= RANDOMKEY_WINDOW_KEYS {
            break;
        }
        keyspace::visit_keys(ctx.db(), db, t, b"", Some(&point), now, &mut |k, _, _| {
            window.push(Bytes::copy_from_slice(k));
            window.len() < RANDOMKEY_WINDOW_KEYS
        })?;
    }
    // Wrap around: the keys before the point, from the start.
    for t in Space::ALL {
        if window.len() >= RANDOMKEY_WINDOW_KEYS {
            break;
        }
        keyspace::visit_keys(ctx.db(), db, t, b"", None, now, &mut |k, _, _| {
            if k >= &point[..] {
                return false;
            }
            window.push(Bytes::copy_from_slice(k));
            window.len() < RANDOMKEY_WINDOW_KEYS
        })?;
    }
    if window.is_empty() {
        return Ok(Reply::Nil);
    }
    let pick = rng.gen_range(0..window.len());
    Ok(Reply::bulk_or_nil(window.into_iter().nth(pick)))
}

/// SCAN's default COUNT: keys examined per call.
const SCAN_COUNT_DEFAULT: usize = 10;

fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::command("invalid cursor"))?;
    let mut pattern: Option<&[u8]> = None;
    let mut count = SCAN_COUNT_DEFAULT;
    let mut only: Option<Option<KeyType>> = None;
    let mut i = 2;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(Error::Syntax)?;
        if is(&args[i], "MATCH") {
            pattern = Some(value);
        } else if is(&args[i], "COUNT") {
            count = match super::int_arg(value)? {
                n if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::Syntax),
            };
        } else if is(&args[i], "TYPE") {
            only = Some(KeyType::ALL.into_iter().find(|t| is(value, t.name())));
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    let start = lock(&ctx.shared.cursors).resume(cursor);
    let prefix = pattern.map_or(&b""[..], glob::literal_prefix);
    let now = now_ms();
    let db = ctx.dbi();
    let mut budget = count;
    let mut found = Vec::new();
    let mut next: Option<ScanPosition> = None;
    let mut namespace = start.namespace;
    let mut after = start.after_key;
    while namespace < Space::ALL.len() {
        let t = Space::ALL[namespace];
        if only.is_some_and(|o| o.is_none_or(|o| o.space() != t)) {
            namespace += 1;
            after = None;
            continue;
        }
        let mut last: Option<Vec<u8>> = None;
        let mut more = false;
        keyspace::visit_keys(
            ctx.db(),
            db,
            t,
            prefix,
            after.as_deref(),
            now,
            &mut |k, kind, _| {
                if budget == 0 {
                    more = true;
                    return false;
                }
                budget -= 1;
                last = Some(k.to_vec());
                let wanted = only.is_none_or(|o| o == Some(kind));
                if wanted && pattern.is_none_or(|p| glob::matches(p, k, false)) {
                    found.push(Reply::Bulk(Bytes::copy_from_slice(k)));
                }
                true
            },
        )?;
        if more {
            next = Some(ScanPosition {
                namespace,
                after_key: last,
            });
            break;
        }
        namespace += 1;
        after = None;
        if budget == 0 && namespace < Space::ALL.len() {
            next = Some(ScanPosition {
                namespace,
                after_key: None,
            });
            break;
        }
    }
    let cursor = match next {
        Some(pos) => lock(&ctx.shared.cursors).insert(pos),
        None => 0,
    };
    Ok(Reply::Array(vec![
        Reply::text(cursor.to_string()),
        Reply::Array(found),
    ]))
}

/// Keys deleted per engine batch by FLUSHDB: bounds the batch's memory.
const FLUSH_BATCH_KEYS: usize = 1024;

fn flush_mode(args: &[Bytes]) -> Result<()> {
    match args.get(1..) {
        Some([]) | None => Ok(()),
        Some([mode]) if is(mode, "SYNC") || is(mode, "ASYNC") => Ok(()),
        Some(_) => Err(Error::Syntax),
    }
}

/// Deletes every key in `[start, end)` but the internal ones, in batches; returns how many.
fn delete_range(ctx: &Ctx<'_>, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Result<u64> {
    let mut start = start;
    let mut deleted = 0u64;
    loop {
        let mut batch = Vec::new();
        let mut last = None;
        let mut seen = 0usize;
        ctx.db().scan(start.clone(), end.clone(), &mut |k, _| {
            seen += 1;
            last = Some(k.to_vec());
            if !keyspace::is_internal(k) {
                batch.push(k.to_vec());
            }
            seen < FLUSH_BATCH_KEYS
        })?;
        let Some(last) = last else {
            break;
        };
        deleted += batch.len() as u64;
        if !batch.is_empty() {
            ctx.db()
                .write(batch.into_iter().map(BatchOp::Delete).collect())?;
        }
        start = Bound::Excluded(last);
    }
    Ok(deleted)
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    flush_mode(args)?;
    // Tracking clients hear "everything changed" once, not each key (Redis's
    // `trackingInvalidateKeysOnFlush`).
    ctx.shared.watches.tracking.invalidate_all();
    let mut deleted = 0;
    for prefix in keyspace::db_prefixes(ctx.dbi()) {
        deleted += crate::tracking::quietly(|| {
            delete_range(ctx, Bound::Included(prefix.clone()), prefix_end(&prefix))
        })?;
    }
    ctx.shared.note_writes(deleted);
    // Blocked readers of streams that went answer so (`Ctx::notify_in`).
    ctx.session.note_list_push();
    tracing::info!(deleted, db = ctx.dbi(), "FLUSHDB");
    Ok(Reply::ok())
}

fn flushall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    flush_mode(args)?;
    // Every database, and keys written outside the server's layout (raw engine keys), except
    // the internal records (key names, keyspace format).
    ctx.shared.watches.tracking.invalidate_all();
    let deleted =
        crate::tracking::quietly(|| delete_range(ctx, Bound::Unbounded, Bound::Unbounded))?;
    ctx.shared.note_writes(deleted);
    ctx.session.note_list_push();
    tracing::info!(deleted, "FLUSHALL");
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::testing::*;
    use crate::resp::Reply;

    #[test]
    fn del_exists_type_ttl() {
        let mut h = Harness::new();
        h.run(&["MSET", "a", "1", "b", "2"]);
        assert_eq!(h.run(&["EXISTS", "a", "a", "zz"]), Reply::Int(2));
        assert_eq!(h.run(&["TYPE", "a"]), Reply::simple("string"));
        assert_eq!(h.run(&["TYPE", "zz"]), Reply::simple("none"));
        assert_eq!(h.run(&["TTL", "a"]), Reply::Int(-1));
        assert_eq!(h.run(&["PTTL", "zz"]), Reply::Int(-2));
        assert_eq!(h.run(&["DEL", "a", "b", "zz"]), Reply::Int(2));
        assert_eq!(h.run(&["UNLINK", "a"]), Reply::Int(0));
        assert_eq!(h.run(&["EXPIRE", "a", "10"]), Reply::Int(0));
    }

    /// Every key of a small database comes up, names sharing a long prefix included (the key
    /// after a random point alone was `user:1` every time, never `user:2`).
    #[test]
    fn randomkey_returns_every_key_of_a_small_database() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RANDOMKEY"]), Reply::Nil);
        h.run(&["MSET", "user:1", "a", "user:2", "b", "foo", "c"]);
        h.run(&["HSET", "user:3", "f", "v"]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            match h.run(&["RANDOMKEY"]) {
                Reply::Bulk(k) => {
                    seen.insert(String::from_utf8(k.to_vec()).unwrap());
                }
                other => panic!("RANDOMKEY answered {other:?}"),
            }
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            vec!["foo", "user:1", "user:2", "user:3"]
        );
    }

    fn scan_all(h: &mut Harness, extra: &[&str]) -> Vec<Reply> {
        let mut cursor = "0".to_string();
        let mut all = Vec::new();
        let mut calls = 0;
        loop {
            let mut cmd = vec!["SCAN", cursor.as_str()];
            cmd.extend_from_slice(extra);
            let Reply::Array(parts) = h.run(&cmd) else {
                panic!("bad SCAN reply")
            };
            let (Reply::Bulk(c), Reply::Array(keys)) = (&parts[0], &parts[1]) else {
                panic!("bad SCAN reply")
            };
            all.extend(keys.iter().cloned());
            cursor = String::from_utf8(c.to_vec()).unwrap();
            calls += 1;
            if cursor == "0" {
                return all;
            }
            assert!(calls < 1000);
        }
    }

    #[test]
    fn keys_and_scan_cover_every_key_once() {
        let mut h = Harness::new();
        for i in 0..57 {
            h.run(&["SET", &format!("user:{i:03}"), "x"]);
        }
        h.run(&["SET", "other", "y"]);
        let Reply::Array(keys) = h.run(&["KEYS", "user:*"]) else {
            panic!()
        };
        assert_eq!(keys.len(), 57);
        assert_eq!(h.run(&["KEYS", "oth?r"]), Reply::Array(vec![bulk("other")]));
        assert_eq!(scan_all(&mut h, &[]).len(), 58);
        assert_eq!(scan_all(&mut h, &["COUNT", "7"]).len(), 58);
        assert_eq!(
            scan_all(&mut h, &["MATCH", "user:01*", "COUNT", "3"]).len(),
            10
        );
        assert_eq!(scan_all(&mut h, &["TYPE", "ReJSON-RL"]).len(), 0);
        assert_eq!(h.run(&["DBSIZE"]), Reply::Int(58));
        // A cursor the server does not know starts over (Redis errs on no numeric cursor).
        let keys_of = |r: Reply| match r {
            Reply::Array(parts) => parts.into_iter().nth(1),
            other => panic!("bad SCAN reply {other:?}"),
        };
        let unknown = keys_of(h.run(&["SCAN", "12345"]));
        assert_eq!(unknown, keys_of(h.run(&["SCAN", "0"])));
        assert_eq!(h.run(&["SCAN", "x"]), err("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
        assert_eq!(h.run(&["FLUSHDB"]), Reply::ok());
        assert_eq!(h.run(&["DBSIZE"]), Reply::Int(0));
    }
}
