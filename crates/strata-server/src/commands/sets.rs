//! Set commands: SADD SREM SISMEMBER SMISMEMBER SCARD SMEMBERS SRANDMEMBER SPOP SMOVE SUNION
//! SINTER SDIFF SUNIONSTORE SINTERSTORE SDIFFSTORE SINTERCARD SSCAN, with redis-server 7.0's
//! replies and errors.
//!
//! A set is a record plus one engine key per member with an empty value (`collection.rs`).
//! Single-key writes are one atomic `update_group`; SMOVE and the STORE commands hold the exec
//! lock exclusively and write every key they change in one batch. Members come back as Redis
//! 7.0 answers them where its order is fixed: a set of integers in the compact encoding (an
//! intset), and a result Redis builds as one, in ascending numeric order
//! (`collections::in_intset_order`); any other set (a hash table in Redis, whose order no
//! client can rely on) in position order, results in byte order.

use std::collections::BTreeSet;

use bytes::Bytes;
use rand::seq::SliceRandom;

use super::collections::{in_intset_order, modify, plan, read_live};
use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE, WRITE_FAST};
use crate::collection::{
    element_key, random_elements, read_elements, visit_elements, Meta, PopWindow, POP_WINDOW_FILL,
};
use crate::error::{Error, Result};
use crate::keyspace::KeyType;
use crate::notify;
use crate::resp::Reply;

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "sadd", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "set", summary: "Adds one or more members to a set.", handler: sadd },
    Spec { name: "srem", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "set", summary: "Removes one or more members from a set. Deletes the set if the last member was removed.", handler: srem },
    Spec { name: "sismember", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "set", summary: "Determines whether a member belongs to a set.", handler: sismember },
    Spec { name: "smismember", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "set", summary: "Determines whether multiple members belong to a set.", handler: smismember },
    Spec { name: "scard", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "set", summary: "Returns the number of members in a set.", handler: scard },
    Spec { name: "smembers", arity: 2, flags: READ, keys: (1, 1, 1), group: "set", summary: "Returns all members of a set.", handler: smembers },
    Spec { name: "srandmember", arity: -2, flags: READ, keys: (1, 1, 1), group: "set", summary: "Get one or multiple random members from a set.", handler: srandmember },
    Spec { name: "spop", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "set", summary: "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", handler: spop },
    Spec { name: "smove", arity: 4, flags: &["write", "fast"], keys: (1, 2, 1), group: "set", summary: "Moves a member from one set to another.", handler: smove },
    Spec { name: "sunion", arity: -2, flags: READ, keys: (1, -1, 1), group: "set", summary: "Returns the union of multiple sets.", handler: sunion },
    Spec { name: "sinter", arity: -2, flags: READ, keys: (1, -1, 1), group: "set", summary: "Returns the intersect of multiple sets.", handler: sinter },
    Spec { name: "sdiff", arity: -2, flags: READ, keys: (1, -1, 1), group: "set", summary: "Returns the difference of multiple sets.", handler: sdiff },
    Spec { name: "sunionstore", arity: -3, flags: WRITE, keys: (1, -1, 1), group: "set", summary: "Stores the union of multiple sets in a key.", handler: sunionstore },
    Spec { name: "sinterstore", arity: -3, flags: WRITE, keys: (1, -1, 1), group: "set", summary: "Stores the intersect of multiple sets in a key.", handler: sinterstore },
    Spec { name: "sdiffstore", arity: -3, flags: WRITE, keys: (1, -1, 1), group: "set", summary: "Stores the difference of multiple sets in a key.", handler: sdiffstore },
    Spec { name: "sintercard", arity: -3, flags: READ, keys: (0, 0, 0), group: "set", summary: "Returns the number of members of the intersect of multiple sets.", handler: sintercard },
    Spec { name: "sscan", arity: -3, flags: READ, keys: (1, 1, 1), group: "set", summary: "Iterates over members of a set.", handler: sscan },
];

fn sadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let added = modify(ctx, &args[1], KeyType::Set, |s| {
        let mut added = 0;
        for m in &args[2..] {
            added += i64::from(s.add(m)?);
        }
        Ok(added)
    })?;
    if added > 0 {
        ctx.notify(notify::SET, "sadd", &args[1]);
    }
    Ok(Reply::Int(added))
}

fn srem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (removed, emptied) = modify(ctx, &args[1], KeyType::Set, |s| {
        if s.found.is_none() {
            return Ok((0, false));
        }
        let mut removed = 0;
        for m in &args[2..] {
            removed += i64::from(s.remove(m)?);
        }
        Ok((removed, s.count() == 0))
    })?;
    if removed > 0 {
        ctx.notify(notify::SET, "srem", &args[1]);
        if emptied {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
    }
    Ok(Reply::Int(removed))
}

/// Which of `members` the live set `key` holds (all false when absent), read at one snapshot.
fn contains(ctx: &Ctx<'_>, key: &[u8], members: &[Bytes]) -> Result<Vec<bool>> {
    let Some(s) = read_live(ctx, key, KeyType::Set)? else {
        return Ok(vec![false; members.len()]);
    };
    let keys: Vec<Vec<u8>> = members
        .iter()
        .map(|m| element_key(ctx.dbi(), key, s.meta.version, m))
        .collect();
    Ok(ctx
        .db()
        .multi_get(&keys)?
        .into_iter()
        .map(|v| v.is_some())
        .collect())
}

fn sismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let found = contains(ctx, &args[1], &args[2..3])?;
    Ok(Reply::Int(i64::from(found.first() == Some(&true))))
}

fn smismember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let found = contains(ctx, &args[1], &args[2..])?;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| Reply::Int(i64::from(f)))
            .collect(),
    ))
}

fn scard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_live(ctx, &args[1], KeyType::Set)?.map_or(0, |s| s.meta.count);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// The members of the live set `key` (empty when absent; WRONGTYPE for another kind).
fn members(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<Bytes>> {
    match read_live(ctx, key, KeyType::Set)? {
        Some(s) => {
            let mut members: Vec<Bytes> = read_elements(ctx.db(), ctx.dbi(), key, &s.meta)?
                .into_iter()
                .map(|(m, _)| m)
                .collect();
            if !s.big {
                in_intset_order(&ctx.shared.encodings(), &mut members, |m| m);
            }
            Ok(members)
        }
        None => Ok(Vec::new()),
    }
}

fn set_reply(members: impl IntoIterator<Item = Bytes>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

fn smembers(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    Ok(set_reply(members(ctx, &args[1])?))
}

/// A count argument in `-i64::MAX..=i64::MAX`, with Redis's messages.
fn signed_count(arg: &[u8]) -> Result<i64> {
    let n = int_arg(arg)?;
    if n == i64::MIN {
        return Err(Error::command(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// Fewest members SPOP chooses among. The floor stays at the first live member until that one
/// is popped, so the pops of the others leave tombstones that every later pop steps over: with
/// a window of W the scan passes about 2, 3, 8, 22, 54 positions per pop for W = 1, 2, 4, 8, 16
/// (simulated draining 100 k of 200 k members). 4 keeps a choice among several members (a
/// member added back is not at once the next one popped) at a sixth of 16's scan.
const SPOP_WINDOW_MIN: usize = 4;

/// Most members SRANDMEMBER with a negative count returns.
const REPLY_ELEMENTS_MAX: usize = 1 << 24;

fn srandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    let Some(count_arg) = args.get(2) else {
        let Some(s) = read_live(ctx, key, KeyType::Set)? else {
            return Ok(Reply::Nil);
        };
        let pick = random_elements(ctx.db(), ctx.dbi(), key, &s, 1)?;
        return Ok(Reply::bulk_or_nil(pick.into_iter().next().map(|(m, _)| m)));
    };
    if args.len() > 3 {
        return Err(Error::Syntax);
    }
    let count = signed_count(count_arg)?;
    let Some(s) = read_live(ctx, key, KeyType::Set)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    if count < 0 {
        // Repetition allowed: draws spread over the set (`draw_with_repetition`).
        let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        let drawn = crate::collection::draw_with_repetition(
            ctx.db(),
            ctx.dbi(),
            key,
            &s,
            n.min(REPLY_ELEMENTS_MAX),
        )?;
        return Ok(Reply::Array(
            drawn.into_iter().map(|(m, _)| Reply::Bulk(m)).collect(),
        ));
    }
    let all: Vec<Bytes> = random_elements(ctx.db(), ctx.dbi(), key, &s, count.unsigned_abs())?
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    let mut picked: Vec<Bytes> = all;
    picked.truncate(n);
    // The whole set comes as SMEMBERS's (Redis: a union of the one set); a part from a
    // hash table (Redis: one built for the reply) in any order, so an intset's too.
    if !s.big {
        in_intset_order(&ctx.shared.encodings(), &mut picked, |m| m);
    }
    Ok(Reply::Array(picked.into_iter().map(Reply::Bulk).collect()))
}

fn spop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let key = &args[1];
    let count = match args.get(2) {
        None => None,
        Some(_) if args.len() > 3 => return Err(Error::Syntax),
        Some(c) => match crate::num::parse_i64(c) {
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(Error::command("value is out of range, must be positive")),
        },
    };
    let Some(before) = read_live(ctx, key, KeyType::Set)? else {
        return Ok(match count {
            None => Reply::Nil,
            Some(_) => Reply::Set(Vec::new()),
        });
    };
    if count == Some(0) {
        return Ok(Reply::Set(Vec::new()));
    }
    let want = count.unwrap_or(1);
    // In a held run the pop reads more than its window and leaves the rest for the run's next
    // pop of this set (`PopWindow`).
    let held = ctx.session.in_held_run;
    let mut cached = ctx.session.pop_window.take().filter(|_| held);
    let db = ctx.dbi();
    let (popped, left, emptied) = modify(ctx, key, KeyType::Set, |e| {
        let mut popped = Vec::new();
        if e.found.is_none() {
            return Ok((popped, None, false));
        }
        // Candidates: the members from the set's floor on (its first in position order, which
        // is hash order: random with respect to the members), one more than wanted and at
        // least `SPOP_WINDOW_MIN`, a random choice of them popped. The floor then rises to the
        // first member left: no later pop reads the tombstones below it (a random start
        // would step over ever more of them as the set drains). The read runs under the
        // update's lock, so every candidate is live.
        let window = want.saturating_add(1).max(SPOP_WINDOW_MIN);
        let meta = e.meta();
        let from_window = cached
            .take()
            .and_then(|w| w.into_first(db, key, meta.version, KeyType::Set, window));
        let (seen, complete): (Vec<Bytes>, bool) = match from_window {
            Some((elements, complete)) => {
                (elements.into_iter().map(|(m, _)| m).collect(), complete)
            }
            None => {
                let fill = if held {
                    window.max(POP_WINDOW_FILL)
                } else {
                    window
                };
                let mut seen: Vec<Bytes> = Vec::new();
                visit_elements(ctx.db(), db, key, &meta, &mut |m, _| {
                    seen.push(Bytes::copy_from_slice(m));
                    seen.len() < fill
                })?;
                let complete = seen.len() < fill;
                (seen, complete)
            }
        };
        let mut order: Vec<usize> = (0..seen.len().min(window)).collect();
        order.shuffle(&mut rand::thread_rng());
        order.truncate(want);
        let mut taken = vec![false; seen.len()];
        for &i in &order {
            e.remove_scanned(&seen[i]);
            taken[i] = true;
        }
        let first_left = seen.iter().zip(&taken).find(|(_, t)| !**t).map(|(m, _)| m);
        if let Some(m) = first_left.or(seen.last()) {
            e.raise_floor(m);
        }
        // The members move out: the popped ones in the shuffled order, the rest to the window.
        let mut seen: Vec<Option<Bytes>> = seen.into_iter().map(Some).collect();
        popped.extend(order.iter().filter_map(|&i| seen[i].take()));
        let left = held.then(|| {
            let rest = seen.into_iter().flatten().map(|m| (m, 0.0)).collect();
            PopWindow::new(db, key, meta.version, KeyType::Set, rest, complete)
        });
        Ok((popped, left, e.count() == 0))
    })?;
    ctx.session.pop_window = left;
    if !popped.is_empty() {
        ctx.notify(notify::SET, "spop", key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    Ok(match count {
        None => Reply::bulk_or_nil(popped.into_iter().next()),
        Some(n) => {
            // Redis returns the whole set (n >= size), or what is left of it after popping the
            // members that stay (n close to size, its `SPOP_MOVE_STRATEGY_MUL`), in the set's
            // own order: an intset's ascending numbers. Fewer come in the order drawn.
            let size = usize::try_from(before.meta.count).unwrap_or(usize::MAX);
            let rest_popped = n >= size || size.saturating_sub(n).saturating_mul(5) <= n;
            let mut popped = popped;
            if !before.big && rest_popped {
                in_intset_order(&ctx.shared.encodings(), &mut popped, |m| m);
            }
            set_reply(popped)
        }
    })
}

fn smove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // The dispatcher holds the exec lock exclusively: the reads below stay true until the one
    // batch that changes both sets is written.
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let Some(_) = read_live(ctx, src, KeyType::Set)? else {
        return Ok(Reply::Int(0));
    };
    read_live(ctx, dst, KeyType::Set)?;
    if src == dst {
        return Ok(Reply::Int(i64::from(contains(ctx, src, &args[3..4])?[0])));
    }
    let ((removed, emptied), mut ops) = plan(ctx, src, KeyType::Set, false, |e| {
        Ok((e.remove(member)?, e.count() == 0))
    })?;
    if !removed {
        return Ok(Reply::Int(0));
    }
    // A member the destination holds already leaves it unwritten (WATCH on it stays clean,
    // as in Redis).
    let (new_in_dst, added) = plan(ctx, dst, KeyType::Set, false, |e| e.add(member))?;
    ops.extend(added);
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    ctx.notify(notify::SET, "srem", src);
    if emptied {
        ctx.notify(notify::GENERIC, "del", src);
    }
    if new_in_dst {
        ctx.notify(notify::SET, "sadd", dst);
    }
    Ok(Reply::Int(1))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// The result of `op` over the sets `keys` (absent keys are empty sets). Every key is
/// type-checked before any result, as in Redis.
fn combine(ctx: &Ctx<'_>, keys: &[Bytes], op: Op) -> Result<BTreeSet<Bytes>> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(read_live(ctx, k, KeyType::Set)?.map(|s| (k, s)));
    }
    let read = |k: &[u8], meta: &Meta| -> Result<BTreeSet<Bytes>> {
        Ok(read_elements(ctx.db(), ctx.dbi(), k, meta)?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    };
    let mut out: BTreeSet<Bytes> = BTreeSet::new();
    match op {
        Op::Union => {
            for (k, s) in sets.iter().flatten() {
                out.extend(read(k, &s.meta)?);
            }
        }
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Ok(out);
            }
            // Smallest first: the result only shrinks.
            let mut present: Vec<_> = sets.iter().flatten().collect();
            present.sort_by_key(|(_, s)| s.meta.count);
            for (i, (k, s)) in present.iter().enumerate() {
                let members = read(k, &s.meta)?;
                out = if i == 0 {
                    members
                } else {
                    out.intersection(&members).cloned().collect()
                };
                if out.is_empty() {
                    break;
                }
            }
        }
        Op::Diff => {
            if let Some(Some((k, s))) = sets.first() {
                out = read(k, &s.meta)?;
                for (k, s) in sets[1..].iter().flatten() {
                    if out.is_empty() {
                        break;
                    }
                    for m in read(k, &s.meta)? {
                        out.remove(&m);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A result set as Redis answers it: an intset's order where Redis holds the result as one
/// (SUNION and SDIFF build a new set; SINTER walks its smallest set, whose order is an intset's
/// or a hash table's), else byte order.
fn result_reply(ctx: &Ctx<'_>, result: BTreeSet<Bytes>) -> Reply {
    let mut members: Vec<Bytes> = result.into_iter().collect();
    in_intset_order(&ctx.shared.encodings(), &mut members, |m| m);
    set_reply(members)
}

fn sunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let result = combine(ctx, &args[1..], Op::Union)?;
    Ok(result_reply(ctx, result))
}

fn sinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let result = combine(ctx, &args[1..], Op::Inter)?;
    Ok(result_reply(ctx, result))
}

fn sdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let result = combine(ctx, &args[1..], Op::Diff)?;
    Ok(result_reply(ctx, result))
}

/// The STORE variants: the destination is replaced by the result (whatever it held), or
/// deleted when the result is empty; one batch. The dispatcher holds the exec lock exclusively.
fn store(ctx: &mut Ctx<'_>, args: &[Bytes], op: Op) -> Result<Reply> {
    let dst = &args[1];
    let result = combine(ctx, &args[2..], op)?;
    let mut ops = Vec::new();
    let existed = super::keys::ops_removing(ctx, ctx.dbi(), dst, &mut ops)?;
    let (n, added) = plan(ctx, dst, KeyType::Set, true, |e| {
        for m in &result {
            e.set(m, Bytes::new())?;
        }
        Ok(e.count())
    })?;
    ops.extend(added);
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    if n > 0 {
        let event = match op {
            Op::Union => "sunionstore",
            Op::Inter => "sinterstore",
            Op::Diff => "sdiffstore",
        };
        ctx.notify(notify::SET, event, dst);
    } else if existed {
        ctx.notify(notify::GENERIC, "del", dst);
    }
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    store(ctx, args, Op::Union)
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    store(ctx, args, Op::Inter)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    store(ctx, args, Op::Diff)
}

fn sintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let numkeys_error = || Error::command("numkeys should be greater than 0");
    let numkeys = crate::num::parse_i64(&args[1]).ok_or_else(numkeys_error)?;
    if numkeys < 1 {
        return Err(numkeys_error());
    }
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len() - 2 {
        return Err(Error::command(
            "Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if is(&args[i], "LIMIT") && i + 1 < args.len() {
            limit = match crate::num::parse_i64(&args[i + 1]) {
                Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::command("LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let n = combine(ctx, &args[2..2 + numkeys], Op::Inter)?.len();
    let n = if limit > 0 { n.min(limit) } else { n };
    Ok(Reply::Int(n as i64))
}

fn sscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    super::collections::scan_elements(ctx, args, KeyType::Set)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::resp::Reply;

    fn distinct(r: Reply, every: usize) -> usize {
        let Reply::Array(items) = r else {
            panic!("not an array: {r:?}")
        };
        let mut seen: Vec<Reply> = items.into_iter().step_by(every).collect();
        seen.sort_by_key(|r| format!("{r:?}"));
        seen.dedup();
        seen.len()
    }

    /// A negative count draws with repetition across the whole collection: 1000 draws from
    /// 1000 members give about 632 distinct ones in Redis (they came from one window of 16).
    #[test]
    fn negative_counts_draw_across_the_collection() {
        let mut h = Harness::new();
        for (members, low) in [(1000usize, 500usize), (5000, 400)] {
            h.run(&["DEL", "s", "h"]);
            let mut sadd = vec!["SADD".to_string(), "s".to_string()];
            let mut hset = vec!["HSET".to_string(), "h".to_string()];
            for i in 0..members {
                sadd.push(format!("m{i}"));
                hset.push(format!("f{i}"));
                hset.push("v".to_string());
            }
            let sadd: Vec<&str> = sadd.iter().map(String::as_str).collect();
            let hset: Vec<&str> = hset.iter().map(String::as_str).collect();
            h.run(&sadd);
            h.run(&hset);
            let s = distinct(h.run(&["SRANDMEMBER", "s", "-1000"]), 1);
            assert!(s > low, "{members} members: {s} distinct of 1000 draws");
            let f = distinct(h.run(&["HRANDFIELD", "h", "-1000", "WITHVALUES"]), 2);
            assert!(f > low, "{members} fields: {f} distinct of 1000 draws");
        }
    }
}
