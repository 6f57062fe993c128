//! Stream commands (XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XREAD [BLOCK], XSETID, XINFO
//! STREAM) with redis-server 7.0's replies and errors, on the layout of `stream.rs`. Every
//! write is one atomic update of the stream's partition (the record and its entries). XREAD
//! BLOCK waits as BLPOP does (`lists::block_or_time_out`); XADD wakes it. Consumer groups
//! (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM) are not offered yet.
//!
//! Trimming with `~` trims exactly (Redis trims whole nodes of its radix tree only, so it may
//! keep more); XINFO STREAM's `radix-tree-keys` and `radix-tree-nodes` describe Redis's
//! memory layout and are estimates here (one key per 100 entries).

use bytes::Bytes;

use super::strings::json_exists;
use super::{is, Ctx, Spec};
use crate::backend::BatchOp;
use crate::error::{Error, Result};
use crate::keyspace::{now_ms, string_key, Encoding, KeyType, Record};
use crate::notify;
use crate::resp::{Protocol, Reply};
use crate::stream::{
    decode_fields, encode_fields, entries, entry_key, Entry, StreamId, StreamMeta,
};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "xadd", arity: -5, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), group: "stream", summary: "Appends a new message to a stream. Creates the key if it doesn't exist.", handler: xadd },
    Spec { name: "xlen", arity: 2, flags: &["readonly", "fast"], keys: (1, 1, 1), group: "stream", summary: "Return the number of messages in a stream.", handler: xlen },
    Spec { name: "xrange", arity: -4, flags: &["readonly"], keys: (1, 1, 1), group: "stream", summary: "Returns the messages from a stream within a range of IDs.", handler: xrange },
    Spec { name: "xrevrange", arity: -4, flags: &["readonly"], keys: (1, 1, 1), group: "stream", summary: "Returns the messages from a stream within a range of IDs in reverse order.", handler: xrevrange },
    Spec { name: "xdel", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "stream", summary: "Returns the number of messages after removing them from a stream.", handler: xdel },
    Spec { name: "xtrim", arity: -4, flags: &["write"], keys: (1, 1, 1), group: "stream", summary: "Deletes messages from the beginning of a stream.", handler: xtrim },
    Spec { name: "xread", arity: -4, flags: &["readonly", "blocking"], keys: (0, 0, 0), group: "stream", summary: "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", handler: xread },
    Spec { name: "xsetid", arity: -3, flags: &["write", "denyoom", "fast"], keys: (1, 1, 1), group: "stream", summary: "An internal command for replicating stream values.", handler: xsetid },
    Spec { name: "xinfo", arity: -2, flags: &["readonly"], keys: (2, 2, 1), group: "stream", summary: "A container for stream introspection commands (STREAM, HELP).", handler: xinfo },
];

/// Entries a blocked XREAD without COUNT returns per stream (Redis's default).
const XREAD_BLOCKED_DEFAULT_COUNT: usize = 1000;

fn invalid_id() -> Error {
    Error::command("Invalid stream ID specified as stream command argument")
}

/// An ID argument: `-` and `+` as the ends when `strict` is false.
fn id_arg(arg: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId> {
    match arg {
        b"-" if !strict => Ok(StreamId::MIN),
        b"+" if !strict => Ok(StreamId::MAX),
        _ => StreamId::parse(arg, missing_seq).ok_or_else(invalid_id),
    }
}

/// A range end of XRANGE: `(` makes it exclusive (then `-` and `+` are refused).
fn interval_arg(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool)> {
    match arg.strip_prefix(b"(") {
        Some(rest) if !rest.is_empty() => Ok((id_arg(rest, missing_seq, true)?, true)),
        _ => Ok((id_arg(arg, missing_seq, false)?, false)),
    }
}

/// A stream as found: its metadata and expiry.
#[derive(Debug, Clone, Copy)]
struct Found {
    meta: StreamMeta,
    expire_at_ms: Option<u64>,
}

/// Interprets a record for a stream command: `None` when absent or expired, WRONGTYPE for
/// another kind.
fn found(record: Option<Bytes>) -> Result<Option<Found>> {
    let Some(bytes) = record else {
        return Ok(None);
    };
    let r = Record::decode(bytes)?;
    if r.expired(now_ms()) {
        return Ok(None);
    }
    if r.kind != KeyType::Stream {
        return Err(Error::WrongType);
    }
    Ok(Some(Found {
        meta: StreamMeta::decode(&r.payload)?,
        expire_at_ms: r.expire_at_ms,
    }))
}

/// The live stream `key` of the selected database for a read.
fn read_stream(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Found>> {
    let f = found(ctx.db().get(&string_key(ctx.dbi(), key))?)?;
    if f.is_none() && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(f)
}

/// What an update of a stream decided: its new metadata (`None`: leave the record alone),
/// the entry writes, and the command's answer.
struct Change<T> {
    meta: Option<StreamMeta>,
    ops: Vec<BatchOp>,
    out: T,
}

impl<T> Change<T> {
    fn none(out: T) -> Self {
        Change {
            meta: None,
            ops: Vec::new(),
            out,
        }
    }
}

/// Runs `f` on the stream `key` (absent: `None`) as one atomic update of its partition; the
/// record is rewritten with the metadata `f` returns, keeping the stream's expiry.
fn modify<T>(
    ctx: &Ctx<'_>,
    key: &[u8],
    mut f: impl FnMut(Option<Found>) -> Result<Change<T>>,
) -> Result<T> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let record_key = string_key(ctx.dbi(), key);
    let mut out = None;
    let mut wrote = false;
    ctx.db().update_group(&record_key, &mut |read| {
        let current = found(read.get(&record_key)?)?;
        let change = f(current)?;
        let mut ops = change.ops;
        if let Some(meta) = change.meta {
            let expiry = current.and_then(|c| c.expire_at_ms);
            ops.push(BatchOp::Put(
                record_key.clone(),
                Record::encode_collection(
                    KeyType::Stream,
                    &meta.encode(),
                    expiry,
                    Encoding::ByContent,
                ),
            ));
        }
        wrote = !ops.is_empty();
        out = Some(change.out);
        Ok(ops)
    })?;
    if wrote {
        ctx.shared.note_writes(1);
    }
    out.ok_or_else(|| Error::command("internal error: the stream update did not run"))
}

/// An entry as Redis replies it: `[id, [field, value, ...]]`.
fn entry_reply((id, fields): &Entry) -> Result<Reply> {
    Ok(Reply::Array(vec![
        Reply::Bulk(id.to_bytes()),
        Reply::Array(
            decode_fields(fields)?
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        ),
    ]))
}

fn entries_reply(list: &[Entry]) -> Result<Reply> {
    Ok(Reply::Array(
        list.iter().map(entry_reply).collect::<Result<Vec<_>>>()?,
    ))
}

/// How to trim (XADD's and XTRIM's options).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Trim {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// XADD's and XTRIM's options (Redis's `streamParseAddOrTrimArgsOrReply`): the trim, its
/// LIMIT (0: none), NOMKSTREAM, and for XADD the ID's position and value (`None`: `*`;
/// `Some((id, false))`: `ms-*`).
struct AddArgs {
    trim: Trim,
    limit: u64,
    no_mkstream: bool,
    id_at: usize,
    id: Option<(StreamId, bool)>,
}

fn parse_add_or_trim(args: &[Bytes], xadd: bool) -> Result<AddArgs> {
    let mut parsed = AddArgs {
        trim: Trim::None,
        limit: 0,
        no_mkstream: false,
        id_at: args.len(),
        id: None,
    };
    let mut approx = false;
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && opt.as_ref() == b"*" {
            parsed.id_at = i;
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more > 0 {
            if parsed.trim != Trim::None {
                return Err(Error::command(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            if more >= 2 && args[i + 1].as_ref() == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && args[i + 1].as_ref() == b"=" {
                i += 1;
            }
            if is(opt, "MAXLEN") {
                let n = super::int_arg(&args[i + 1])?;
                let n = u64::try_from(n)
                    .map_err(|_| Error::command("The MAXLEN argument must be >= 0."))?;
                parsed.trim = Trim::MaxLen(n);
            } else {
                parsed.trim = Trim::MinId(id_arg(&args[i + 1], 0, true)?);
            }
            i += 2;
        } else if is(opt, "LIMIT") && more > 0 {
            let n = super::int_arg(&args[i + 1])?;
            parsed.limit =
                u64::try_from(n).map_err(|_| Error::command("The LIMIT argument must be >= 0."))?;
            limit_given = true;
            i += 2;
        } else if xadd && is(opt, "NOMKSTREAM") {
            parsed.no_mkstream = true;
            i += 1;
        } else if xadd {
            // The ID: `ms-*` leaves the sequence to the stream.
            let id = match opt.strip_suffix(b"-*") {
                Some(ms) if !ms.is_empty() && !ms.contains(&b'-') => (id_arg(ms, 0, true)?, false),
                _ => (id_arg(opt, 0, true)?, true),
            };
            parsed.id = Some(id);
            parsed.id_at = i;
            break;
        } else {
            return Err(Error::Syntax);
        }
    }
    if parsed.limit > 0 && parsed.trim == Trim::None {
        return Err(Error::command(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && parsed.trim == Trim::None {
        return Err(Error::command(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given && !approx {
        return Err(Error::command(
            "syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    if approx && !limit_given {
        // Redis's default bound of an approximate trim: 100 nodes of 100 entries.
        parsed.limit = 10_000;
    }
    Ok(parsed)
}

/// Trims `meta`'s stream of `name` as `trim` says (at most `limit` entries when not 0):
/// appends the deletes, updates the metadata; returns how many entries went. `pending`: an
/// entry XADD is adding in the same batch (the last one, counted in `meta` but not stored
/// yet), which the trim may remove too.
fn trim(
    ctx: &Ctx<'_>,
    name: &[u8],
    meta: &mut StreamMeta,
    (trim, limit): (Trim, u64),
    pending: Option<StreamId>,
    ops: &mut Vec<BatchOp>,
) -> Result<u64> {
    let db = ctx.dbi();
    let wanted = match trim {
        Trim::None => 0,
        Trim::MaxLen(max) => meta.length.saturating_sub(max),
        // Every entry below the ID (counted while reading).
        Trim::MinId(_) => u64::MAX,
    };
    let wanted = if limit > 0 { wanted.min(limit) } else { wanted };
    if wanted == 0 || meta.length == 0 {
        return Ok(0);
    }
    let upper = match trim {
        Trim::MinId(min) => match min.prev() {
            Some(p) => p,
            None => return Ok(0),
        },
        _ => StreamId::MAX,
    };
    let mut removed = 0u64;
    let mut next_first = None;
    let mut stopped = false;
    crate::stream::visit_entries(
        ctx.db(),
        db,
        name,
        meta,
        (StreamId::MIN, StreamId::MAX),
        &mut |id, _| {
            if removed < wanted && id <= upper {
                ops.push(BatchOp::Delete(entry_key(db, name, meta.version, id)));
                removed += 1;
                true
            } else {
                next_first = Some(id);
                stopped = true;
                false
            }
        },
    )?;
    if let Some(id) = pending.filter(|_| !stopped) {
        if removed < wanted && id <= upper {
            // Written later in the same batch than the entry's put: the delete wins.
            ops.push(BatchOp::Delete(entry_key(db, name, meta.version, id)));
            removed += 1;
        } else {
            next_first = Some(id);
        }
    }
    meta.length -= removed;
    meta.first_id = next_first.unwrap_or(StreamId::MIN);
    if meta.length == 0 {
        meta.first_id = StreamId::MIN;
    }
    Ok(removed)
}

fn xadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let parsed = parse_add_or_trim(args, true)?;
    let fields_at = parsed.id_at + 1;
    if args.len() < fields_at + 2 || (args.len() - fields_at) % 2 == 1 {
        return Err(Error::WrongArity("xadd".into()));
    }
    if parsed.id == Some((StreamId::MIN, true)) {
        return Err(Error::command(
            "The ID specified in XADD must be greater than 0-0",
        ));
    }
    let key = &args[1];
    let db = ctx.dbi();
    let value = encode_fields(&args[fields_at..]);
    let versions = &ctx.shared.versions;
    let outcome = modify(ctx, key, |current| {
        let mut meta = match current {
            Some(f) => f.meta,
            None if parsed.no_mkstream => return Ok(Change::none(None)),
            None => StreamMeta::new(versions.next()),
        };
        if meta.last_id == StreamId::MAX {
            return Err(Error::command(
                "The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let id = match parsed.id {
            Some((id, true)) => id,
            Some((given, false)) if given.ms == meta.last_id.ms => {
                if meta.last_id.seq == u64::MAX {
                    return Err(too_small());
                }
                StreamId::new(given.ms, meta.last_id.seq + 1)
            }
            Some((given, false)) => StreamId::new(given.ms, 0),
            None => {
                let ms = now_ms();
                if ms > meta.last_id.ms {
                    StreamId::new(ms, 0)
                } else {
                    meta.last_id.next().ok_or_else(too_small)?
                }
            }
        };
        if id <= meta.last_id {
            return Err(too_small());
        }
        let mut ops = vec![BatchOp::Put(
            entry_key(db, key, meta.version, id),
            value.clone(),
        )];
        meta.last_id = id;
        meta.length += 1;
        meta.entries_added += 1;
        if meta.length == 1 {
            meta.first_id = id;
        }
        let trimmed = trim(
            ctx,
            key,
            &mut meta,
            (parsed.trim, parsed.limit),
            Some(id),
            &mut ops,
        )?;
        Ok(Change {
            meta: Some(meta),
            ops,
            out: Some((id, trimmed)),
        })
    })?;
    let Some((id, trimmed)) = outcome else {
        return Ok(Reply::Nil);
    };
    ctx.notify(notify::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    ctx.shared.note_key_push(ctx.session.db, key);
    Ok(Reply::Bulk(id.to_bytes()))
}

fn too_small() -> Error {
    Error::command("The ID specified in XADD is equal or smaller than the target stream top item")
}

fn xlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_stream(ctx, &args[1])?.map_or(0, |f| f.meta.length);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn range(ctx: &mut Ctx<'_>, args: &[Bytes], rev: bool) -> Result<Reply> {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let (mut start, start_ex) = interval_arg(start_arg, 0)?;
    if start_ex {
        start = start
            .next()
            .ok_or_else(|| Error::command("invalid start ID for the interval"))?;
    }
    let (mut end, end_ex) = interval_arg(end_arg, u64::MAX)?;
    if end_ex {
        end = end
            .prev()
            .ok_or_else(|| Error::command("invalid end ID for the interval"))?;
    }
    let mut count: Option<u64> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            count = Some(u64::try_from(super::int_arg(&args[j + 1])?).unwrap_or(0));
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let Some(f) = read_stream(ctx, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let limit = match count {
        Some(0) => return Ok(Reply::NilArray),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    let found = entries(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        &f.meta,
        (start, end),
        rev,
        limit,
    )?;
    entries_reply(&found)
}

fn xrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range(ctx, args, true)
}

fn xdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    // Every ID is checked before anything is deleted (Redis's order: the key, then the IDs).
    if read_stream(ctx, key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let ids = args[2..]
        .iter()
        .map(|a| id_arg(a, 0, true))
        .collect::<Result<Vec<_>>>()?;
    let db = ctx.dbi();
    let deleted = modify(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(0u64));
        };
        let mut meta = f.meta;
        let mut ops = Vec::new();
        let mut gone = std::collections::BTreeSet::new();
        let mut first_gone = false;
        for &id in &ids {
            if gone.contains(&id) || id < meta.first_id {
                continue;
            }
            let k = entry_key(db, key, meta.version, id);
            let mut exists = false;
            crate::stream::visit_entries(ctx.db(), db, key, &meta, (id, id), &mut |_, _| {
                exists = true;
                false
            })?;
            if exists {
                ops.push(BatchOp::Delete(k));
                gone.insert(id);
                first_gone |= id == meta.first_id;
                meta.max_deleted_id = meta.max_deleted_id.max(id);
            }
        }
        if gone.is_empty() {
            return Ok(Change::none(0));
        }
        meta.length -= gone.len() as u64;
        if meta.length == 0 {
            meta.first_id = StreamId::MIN;
        } else if first_gone {
            let mut next = None;
            crate::stream::visit_entries(
                ctx.db(),
                db,
                key,
                &meta,
                (meta.first_id, StreamId::MAX),
                &mut |id, _| {
                    if gone.contains(&id) {
                        return true;
                    }
                    next = Some(id);
                    false
                },
            )?;
            meta.first_id = next.unwrap_or(StreamId::MIN);
        }
        Ok(Change {
            meta: Some(meta),
            ops,
            out: gone.len() as u64,
        })
    })?;
    if deleted > 0 {
        ctx.notify(notify::STREAM, "xdel", key);
    }
    Ok(Reply::Int(i64::try_from(deleted).unwrap_or(i64::MAX)))
}

fn xtrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let parsed = parse_add_or_trim(args, false)?;
    let key = &args[1];
    let trimmed = modify(ctx, key, |current| {
        let Some(f) = current else {
            return Ok(Change::none(0));
        };
        let mut meta = f.meta;
        let mut ops = Vec::new();
        let n = trim(
            ctx,
            key,
            &mut meta,
            (parsed.trim, parsed.limit),
            None,
            &mut ops,
        )?;
        if n == 0 {
            return Ok(Change::none(0));
        }
        Ok(Change {
            meta: Some(meta),
            ops,
            out: n,
        })
    })?;
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    Ok(Reply::Int(i64::try_from(trimmed).unwrap_or(i64::MAX)))
}

fn xsetid(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let id = id_arg(&args[2], 0, true)?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "ENTRIESADDED") && more {
            let n = super::int_arg(&args[i + 1])?;
            entries_added = Some(
                u64::try_from(n).map_err(|_| Error::command("entries_added must be positive"))?,
            );
            i += 2;
        } else if is(&args[i], "MAXDELETEDID") && more {
            max_deleted = id_arg(&args[i + 1], 0, true)?;
            if id < max_deleted {
                return Err(Error::command(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let key = &args[1];
    let db = ctx.dbi();
    modify(ctx, key, |current| {
        let Some(f) = current else {
            return Err(Error::command("no such key"));
        };
        let mut meta = f.meta;
        if meta.length > 0 {
            let top = entries(
                ctx.db(),
                db,
                key,
                &meta,
                (StreamId::MIN, StreamId::MAX),
                true,
                1,
            )?;
            if top.first().is_some_and(|(top, _)| id < *top) {
                return Err(Error::command(
                    "The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added.is_some_and(|n| meta.length > n) {
                return Err(Error::command(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        meta.last_id = id;
        if let Some(n) = entries_added {
            meta.entries_added = n;
        }
        if max_deleted != StreamId::MIN {
            meta.max_deleted_id = max_deleted;
        }
        Ok(Change {
            meta: Some(meta),
            ops: Vec::new(),
            out: (),
        })
    })?;
    ctx.notify(notify::STREAM, "xsetid", key);
    Ok(Reply::ok())
}

/// The time XREAD BLOCK waits: milliseconds, 0 for ever; Redis's errors.
fn block_deadline(arg: &[u8]) -> Result<Option<std::time::Instant>> {
    let ms = crate::num::parse_i64(arg)
        .ok_or_else(|| Error::command("timeout is not an integer or out of range"))?;
    let ms = u64::try_from(ms).map_err(|_| Error::command("timeout is negative"))?;
    if ms == 0 {
        return Ok(None);
    }
    Ok(Some(
        std::time::Instant::now() + std::time::Duration::from_millis(ms),
    ))
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...].
fn xread(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut block: Option<&Bytes> = None;
    let mut count: usize = 0;
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = &args[i];
        if is(o, "BLOCK") && more > 0 {
            if ctx.session.in_script {
                return Err(Error::command(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            block = Some(&args[i + 1]);
            i += 2;
        } else if is(o, "COUNT") && more > 0 {
            count = usize::try_from(super::int_arg(&args[i + 1])?).unwrap_or(0);
            i += 2;
        } else if is(o, "STREAMS") && more > 0 {
            streams_at = i + 1;
            if (args.len() - streams_at) % 2 != 0 {
                return Err(Error::command(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if is(o, "GROUP") && more >= 2 {
            return Err(Error::command(
                "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
            ));
        } else if is(o, "NOACK") {
            return Err(Error::command(
                "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
            ));
        } else {
            return Err(Error::Syntax);
        }
    }
    if streams_at == 0 {
        return Err(Error::Syntax);
    }
    let n = (args.len() - streams_at) / 2;
    let keys = &args[streams_at..streams_at + n];
    // A blocked XREAD looking again keeps the IDs its first look resolved (`$`).
    let again = ctx.session.blocked.is_some();
    let deadline = match (block, ctx.session.blocked) {
        (Some(_), Some(b)) => b.deadline,
        (Some(arg), None) => block_deadline(arg)?,
        (None, _) => None,
    };
    let mut ids = Vec::with_capacity(n);
    let remembered = ctx
        .session
        .stream_from
        .take()
        .filter(|r| again && r.len() == n);
    for (j, key) in keys.iter().enumerate() {
        let f = read_stream(ctx, key)?;
        let arg = &args[streams_at + n + j];
        let id = match &remembered {
            Some(r) => r[j],
            None if arg.as_ref() == b"$" => f.map_or(StreamId::MIN, |f| f.meta.last_id),
            None if arg.as_ref() == b">" => {
                return Err(Error::command(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ))
            }
            None => id_arg(arg, 0, true)?,
        };
        ids.push(id);
    }
    let look = super::lists::Look {
        deadline,
        seen: ctx.shared.list_waiters.generation(),
        again,
        kind: KeyType::Stream,
    };
    ctx.session.blocked = None;
    let limit = match (count, block.is_some()) {
        (0, true) => XREAD_BLOCKED_DEFAULT_COUNT,
        (0, false) => usize::MAX,
        (n, _) => n,
    };
    let mut found = Vec::new();
    for (key, after) in keys.iter().zip(&ids) {
        let Some(f) = read_stream(ctx, key)? else {
            continue;
        };
        let Some(from) = after.next() else {
            continue;
        };
        let list = entries(
            ctx.db(),
            ctx.dbi(),
            key,
            &f.meta,
            (from, StreamId::MAX),
            false,
            limit,
        )?;
        if !list.is_empty() {
            found.push((key.clone(), entries_reply(&list)?));
        }
    }
    if !found.is_empty() {
        ctx.session.wait_ticket = None;
        return Ok(match ctx.session.protocol {
            Protocol::Resp3 => Reply::Map(
                found
                    .into_iter()
                    .map(|(k, v)| (Reply::Bulk(k), v))
                    .collect(),
            ),
            Protocol::Resp2 => Reply::Array(
                found
                    .into_iter()
                    .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                    .collect(),
            ),
        });
    }
    if block.is_none() {
        return Ok(Reply::NilArray);
    }
    let reply = super::lists::block_or_time_out(ctx, keys, &look, Reply::NilArray)?;
    if ctx.session.blocked.is_some() {
        ctx.session.stream_from = Some(ids);
    }
    Ok(reply)
}

fn xinfo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    // Each subcommand's arity first, as Redis 7's command table checks it.
    let arity_ok = match sub.as_str() {
        "help" => args.len() == 2,
        "groups" => args.len() == 3,
        "consumers" => args.len() == 4,
        "stream" => args.len() >= 3,
        _ => {
            return Err(Error::UnknownSubcommand {
                container: "XINFO",
                sub: String::from_utf8_lossy(&args[1]).into_owned(),
            })
        }
    };
    if !arity_ok {
        return Err(Error::WrongArity(format!("xinfo|{sub}")));
    }
    if sub == "help" {
        return Ok(Reply::Array(
            [
                "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Reply::Simple((*l).into()))
            .collect(),
        ));
    }
    let key = &args[2];
    let Some(f) = read_stream(ctx, key)? else {
        return Err(Error::command("no such key"));
    };
    let m = f.meta;
    match sub.as_str() {
        // No consumer groups exist here (XGROUP is not offered yet).
        "groups" => return Ok(Reply::Array(Vec::new())),
        "consumers" => {
            return Err(Error::Coded(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(&args[3]),
                String::from_utf8_lossy(key)
            )))
        }
        _ => {}
    }
    // STREAM key [FULL [COUNT count]].
    let syntax = || {
        Error::command(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
            String::from_utf8_lossy(&args[1])
        ))
    };
    let full = match &args[3..] {
        [] => None,
        [f] if is(f, "FULL") => Some(10),
        [f, c, n] if is(f, "FULL") && is(c, "COUNT") => {
            let n = super::int_arg(n)?;
            Some(if n < 0 { 10 } else { n })
        }
        _ => return Err(syntax()),
    };
    let (db, all) = (ctx.dbi(), (StreamId::MIN, StreamId::MAX));
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    // Redis's radix tree: one key per node of up to 100 entries, and its inner nodes.
    let keys = m.length.div_ceil(100);
    let mut out = vec![
        (Reply::text("length"), int(m.length)),
        (Reply::text("radix-tree-keys"), int(keys)),
        (Reply::text("radix-tree-nodes"), int(keys + 1)),
        (
            Reply::text("last-generated-id"),
            Reply::Bulk(m.last_id.to_bytes()),
        ),
        (
            Reply::text("max-deleted-entry-id"),
            Reply::Bulk(m.max_deleted_id.to_bytes()),
        ),
        (Reply::text("entries-added"), int(m.entries_added)),
        (
            Reply::text("recorded-first-entry-id"),
            Reply::Bulk(m.first_id.to_bytes()),
        ),
    ];
    match full {
        None => {
            let edge = |rev: bool| -> Result<Reply> {
                match entries(ctx.db(), db, key, &m, all, rev, 1)?.first() {
                    Some(entry) => entry_reply(entry),
                    None => Ok(Reply::Nil),
                }
            };
            out.push((Reply::text("groups"), Reply::Int(0)));
            out.push((Reply::text("first-entry"), edge(false)?));
            out.push((Reply::text("last-entry"), edge(true)?));
        }
        Some(count) => {
            let limit = match count {
                0 => usize::MAX,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            };
            let list = entries(ctx.db(), db, key, &m, all, false, limit)?;
            out.push((Reply::text("entries"), entries_reply(&list)?));
            out.push((Reply::text("groups"), Reply::Array(Vec::new())));
        }
    }
    Ok(Reply::Map(out))
}
