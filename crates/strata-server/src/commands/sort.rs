//! SORT and SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
//! [STORE destination], with redis-server 7.0's replies and errors: the elements of a list,
//! set or sorted set, ordered by their own value or by the keys `pattern` names (`*` replaced by
//! the element, `->field` for a hash field), as numbers unless ALPHA (ties by the element's
//! bytes, so the order is deterministic, as in Redis); GET returns other keys' values per
//! element (`#`: the element itself); STORE writes the result as a list.

use bytes::Bytes;

use super::{int_arg, is, Ctx, Spec, READ, WRITE};
use crate::backend::BatchOp;
use crate::collection::{
    element_key, list_key, list_range, read_elements, zset_entries, ListMeta, Meta, LIST_HEAD_START,
};
use crate::error::{Error, Result};
use crate::keyspace::{now_ms, string_key, Encoding, KeyType, Record};
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "sort", arity: -2, flags: WRITE, keys: (1, 1, 1), group: "generic", summary: "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", handler: sort },
    Spec { name: "sort_ro", arity: -2, flags: READ, keys: (1, 1, 1), group: "generic", summary: "Returns the sorted elements of a list, a set, or a sorted set.", handler: sort_ro },
];

/// The live record of `key` in the selected database, if any.
fn record(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Record>> {
    Ok(ctx
        .db()
        .get(&string_key(ctx.dbi(), key))?
        .map(Record::decode)
        .transpose()?
        .filter(|r| !r.expired(now_ms())))
}

/// The elements to sort (a list in order, a set's members, a sorted set's members in score
/// order; none for an absent key; WRONGTYPE for anything else, documents included), and
/// whether they are a set's.
fn elements(ctx: &Ctx<'_>, key: &[u8]) -> Result<(Vec<Bytes>, bool)> {
    let db = ctx.dbi();
    let Some(r) = record(ctx, key)? else {
        if super::strings::json_exists(ctx, key)? {
            return Err(Error::WrongType);
        }
        return Ok((Vec::new(), false));
    };
    let is_set = r.kind == KeyType::Set;
    let items = match r.kind {
        KeyType::List => {
            let m = ListMeta::decode(&r.payload)?;
            list_range(
                ctx.db(),
                db,
                key,
                m.version,
                m.head,
                m.head.wrapping_add(m.count),
            )
        }
        KeyType::Set => {
            let mut members: Vec<Bytes> =
                read_elements(ctx.db(), db, key, &Meta::decode(&r.payload)?)?
                    .into_iter()
                    .map(|(m, _)| m)
                    .collect();
            // Unsorted (BY nosort), a set comes in its own order: an intset's, numbers up.
            if r.encoding != crate::keyspace::Encoding::Raw {
                let limits = ctx.shared.encodings();
                super::collections::in_intset_order(&limits, &mut members, |m| m);
            }
            Ok(members)
        }
        KeyType::Zset => Ok(zset_entries(ctx.db(), db, key, &Meta::decode(&r.payload)?)?
            .into_iter()
            .map(|(m, _)| m)
            .collect()),
        _ => Err(Error::WrongType),
    }?;
    Ok((items, is_set))
}

/// Redis's `lookupKeyByPattern`: the value `pattern` names for `element` (`#`: the element;
/// `key->field`: a hash field; otherwise a string), `None` when absent or of another kind.
fn lookup(ctx: &Ctx<'_>, pattern: &[u8], element: &Bytes) -> Result<Option<Bytes>> {
    if pattern == b"#" {
        return Ok(Some(element.clone()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    // `->` after the `*` (and not at the very end) names a hash field.
    let arrow = pattern[star..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + i)
        .filter(|&i| i + 2 < pattern.len());
    let (key_pattern, field) = match arrow {
        Some(i) => (&pattern[..i], Some(&pattern[i + 2..])),
        None => (pattern, None),
    };
    let key = [&key_pattern[..star], &element[..], &key_pattern[star + 1..]].concat();
    let Some(r) = record(ctx, &key)? else {
        return Ok(None);
    };
    match (field, r.kind) {
        (None, KeyType::String) => Ok(Some(r.payload)),
        (Some(field), KeyType::Hash) => {
            let meta = Meta::decode(&r.payload)?;
            ctx.db()
                .get(&element_key(ctx.dbi(), &key, meta.version, field))
        }
        _ => Ok(None),
    }
}

fn sort(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    sort_command(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    sort_command(ctx, args, true)
}

fn sort_command(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> Result<Reply> {
    let (mut desc, mut alpha) = (false, false);
    let (mut limit, mut by, mut store): (Option<(i64, i64)>, Option<&Bytes>, Option<&Bytes>) =
        (None, None, None);
    let mut gets: Vec<&Bytes> = Vec::new();
    let mut no_sort = false;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        if is(&args[j], "ASC") {
            desc = false;
        } else if is(&args[j], "DESC") {
            desc = true;
        } else if is(&args[j], "ALPHA") {
            alpha = true;
        } else if is(&args[j], "LIMIT") && left >= 2 {
            limit = Some((int_arg(&args[j + 1])?, int_arg(&args[j + 2])?));
            j += 2;
        } else if !read_only && is(&args[j], "STORE") && left >= 1 {
            store = Some(&args[j + 1]);
            j += 1;
        } else if is(&args[j], "BY") && left >= 1 {
            by = Some(&args[j + 1]);
            // A pattern without `*` means "do not sort", for good (a later BY does not undo it).
            let pattern = args[j + 1].contains(&b'*');
            no_sort |= !pattern;
            // Pattern keys may live on any node: Redis Cluster refuses them.
            if pattern && ctx.session.cluster {
                return Err(Error::command("BY option of SORT denied in Cluster mode."));
            }
            j += 1;
        } else if is(&args[j], "GET") && left >= 1 {
            if ctx.session.cluster {
                return Err(Error::command("GET option of SORT denied in Cluster mode."));
            }
            gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    let (mut items, is_set) = elements(ctx, &args[1])?;
    if !read_only && items.is_empty() && record(ctx, &args[1])?.is_none() {
        // SORT writes (the dispatcher reports misses of read commands, SORT_RO's); Redis's
        // read of its source reports the miss. (Misses of BY and GET patterns are not.)
        ctx.notify(crate::notify::KEY_MISS, "keymiss", &args[1]);
    }
    // Not sorting keeps a list's or sorted set's own order; a set's (hash order) is not one
    // worth storing or giving a script, so a set stored or sorted in a script unsorted is
    // sorted by its members' bytes, as Redis does.
    if no_sort && is_set && (store.is_some() || ctx.session.in_script) {
        no_sort = false;
        alpha = true;
        by = None;
    }
    if !no_sort {
        let mut keyed: Vec<(Bytes, Option<Bytes>)> = Vec::with_capacity(items.len());
        for e in items {
            let k = match by {
                Some(p) => lookup(ctx, p, &e)?,
                None => Some(e.clone()),
            };
            keyed.push((e, k));
        }
        let mut scored: Vec<(Bytes, Option<Bytes>, f64)> = Vec::with_capacity(keyed.len());
        for (e, k) in keyed {
            let score = if alpha {
                0.0
            } else {
                match &k {
                    // An absent BY key sorts as 0.
                    None => 0.0,
                    // Redis's bare strtod: leading spaces pass, an empty string is 0, a
                    // number past a double's range fails.
                    Some(v) => crate::num::strtod_whole(v)
                        .filter(|x| !crate::num::out_of_range(v, *x))
                        .ok_or_else(|| {
                            Error::command("One or more scores can't be converted into double")
                        })?,
                }
            };
            scored.push((e, k, score));
        }
        scored.sort_by(|a, b| {
            let order = if alpha {
                // Absent BY values sort first.
                match (&a.1, &b.1) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.2.partial_cmp(&b.2).unwrap_or(std::cmp::Ordering::Equal)
            };
            let order = order.then_with(|| a.0.cmp(&b.0));
            if desc {
                order.reverse()
            } else {
                order
            }
        });
        items = scored.into_iter().map(|(e, _, _)| e).collect();
    } else if desc {
        items.reverse();
    }
    if let Some((offset, count)) = limit {
        let len = items.len() as i64;
        let start = offset.clamp(0, len) as usize;
        let n = if count < 0 { len } else { count.min(len) } as usize;
        items = items.into_iter().skip(start).take(n).collect();
    }
    let mut out: Vec<Option<Bytes>> = Vec::new();
    if gets.is_empty() {
        out.extend(items.into_iter().map(Some));
    } else {
        for e in &items {
            for g in &gets {
                out.push(lookup(ctx, g, e)?);
            }
        }
    }
    let Some(dst) = store else {
        return Ok(Reply::Array(
            out.into_iter().map(Reply::bulk_or_nil).collect(),
        ));
    };
    // STORE: the destination becomes a list of the result (absent values as empty strings), or
    // is deleted when the result is empty. The dispatcher holds the exec lock exclusively.
    let db = ctx.dbi();
    let mut ops = Vec::new();
    let existed = super::keys::ops_removing(ctx, db, dst, &mut ops)?;
    if !out.is_empty() {
        let meta = ListMeta {
            version: ctx.shared.versions.next(),
            count: out.len() as u64,
            head: LIST_HEAD_START,
        };
        ops.push(BatchOp::Put(
            string_key(db, dst),
            Record::encode_collection(KeyType::List, &meta.encode(), None, Encoding::ByContent),
        ));
        for (i, v) in out.iter().enumerate() {
            ops.push(BatchOp::Put(
                list_key(db, dst, meta.version, LIST_HEAD_START + i as u64),
                v.as_deref().unwrap_or_default().to_vec(),
            ));
        }
    }
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    ctx.session.note_list_push();
    if !out.is_empty() {
        ctx.notify(crate::notify::LIST, "sortstore", dst);
    } else if existed {
        ctx.notify(crate::notify::GENERIC, "del", dst);
    }
    Ok(Reply::Int(out.len() as i64))
}
