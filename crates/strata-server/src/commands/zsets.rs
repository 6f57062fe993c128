//! Sorted set commands: ZADD (NX XX GT LT CH INCR), ZINCRBY, ZSCORE, ZMSCORE, ZCARD, ZCOUNT,
//! ZLEXCOUNT, ZRANK, ZREVRANK, ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES), ZRANGEBYSCORE,
//! ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZREVRANGE, ZREM, ZREMRANGEBYRANK,
//! ZREMRANGEBYSCORE, ZREMRANGEBYLEX, ZPOPMIN, ZPOPMAX, ZRANDMEMBER, ZSCAN, ZUNION, ZINTER,
//! ZDIFF (and their STORE forms), ZINTERCARD, ZRANGESTORE, ZMPOP, and the blocking BZPOPMIN,
//! BZPOPMAX, BZMPOP, with redis-server 7.0's replies.
//!
//! A sorted set is a record plus, per member, a member entry (member -> score) and a score
//! entry (score, member in byte order: ZRANGE order) (`collection.rs`). Writes are one atomic
//! `update_group` each. Ranges by rank or score, ZCOUNT, ZRANK, ZPOPMIN/ZPOPMAX and
//! ZREMRANGEBYRANK/BYSCORE read only the score entries they answer and skip, in one scan of the
//! key's partition: from the set's floor or the range's low score upwards, or (REV ranges,
//! ZPOPMAX, ranks nearer the top) from the top or the range's high score downwards. Ranks are
//! counted (ZRANK O(rank), ZREVRANK O(reverse rank): there is no rank index). Lex ranges of a
//! set whose members share one score read from the range's near end (others walk the set from
//! its first member, as Redis walks a small one).

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use super::strings::json_exists;
use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE, WRITE_FAST};
use crate::backend::{BatchOp, GroupRead, KvBackend};
use crate::collection::{
    self, visit_zset_between, visit_zset_from, visit_zset_rev_from, zset_count_beside,
    zset_entries, zset_first_entries, zset_member_key, zset_put_ops, zset_score_key,
    zset_score_suffix, Ceiling, Floor, Live, Meta, PopWindow, POP_WINDOW_FILL,
};
use crate::config::EncodingLimits;
use crate::error::{Error, Result};
use crate::keyspace::{now_ms, string_key, DbIndex, Encoding, KeyType, Record};
use crate::notify;
use crate::resp::{Protocol, Reply};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "zadd", arity: -4, flags: WRITE_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", handler: zadd },
    Spec { name: "zincrby", arity: 4, flags: WRITE_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Increments the score of a member in a sorted set.", handler: zincrby },
    Spec { name: "zscore", arity: 3, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the score of a member in a sorted set.", handler: zscore },
    Spec { name: "zmscore", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the score of one or more members in a sorted set.", handler: zmscore },
    Spec { name: "zcard", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the number of members in a sorted set.", handler: zcard },
    Spec { name: "zcount", arity: 4, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the count of members in a sorted set that have scores within a range.", handler: zcount },
    Spec { name: "zlexcount", arity: 4, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the number of members in a sorted set within a lexicographical range.", handler: zlexcount },
    Spec { name: "zrank", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the index of a member in a sorted set ordered by ascending scores.", handler: zrank },
    Spec { name: "zrevrank", arity: -3, flags: READ_FAST, keys: (1, 1, 1), group: "sorted_set", summary: "Returns the index of a member in a sorted set ordered by descending scores.", handler: zrevrank },
    Spec { name: "zrange", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a range of indexes, scores or lexicographical order.", handler: zrange },
    Spec { name: "zrangebyscore", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a range of scores.", handler: zrangebyscore },
    Spec { name: "zrevrangebyscore", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a range of scores in reverse order.", handler: zrevrangebyscore },
    Spec { name: "zrangebylex", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a lexicographical range.", handler: zrangebylex },
    Spec { name: "zrevrangebylex", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a lexicographical range in reverse order.", handler: zrevrangebylex },
    Spec { name: "zrevrange", arity: -4, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns members in a sorted set within a range of indexes in reverse order.", handler: zrevrange },
    Spec { name: "zrem", arity: -3, flags: &["write", "fast"], keys: (1, 1, 1), group: "sorted_set", summary: "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", handler: zrem },
    Spec { name: "zremrangebyrank", arity: 4, flags: &["write"], keys: (1, 1, 1), group: "sorted_set", summary: "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", handler: zremrangebyrank },
    Spec { name: "zremrangebyscore", arity: 4, flags: &["write"], keys: (1, 1, 1), group: "sorted_set", summary: "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", handler: zremrangebyscore },
    Spec { name: "zremrangebylex", arity: 4, flags: &["write"], keys: (1, 1, 1), group: "sorted_set", summary: "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", handler: zremrangebylex },
    Spec { name: "zpopmin", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "sorted_set", summary: "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", handler: zpopmin },
    Spec { name: "zrandmember", arity: -2, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Returns one or more random members from a sorted set.", handler: zrandmember },
    Spec { name: "zscan", arity: -3, flags: READ, keys: (1, 1, 1), group: "sorted_set", summary: "Iterates over members and scores of a sorted set.", handler: zscan },
    Spec { name: "zunionstore", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "sorted_set", summary: "Stores the union of multiple sorted sets in a key.", handler: zunionstore },
    Spec { name: "zinterstore", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "sorted_set", summary: "Stores the intersect of multiple sorted sets in a key.", handler: zinterstore },
    Spec { name: "zdiffstore", arity: -4, flags: WRITE, keys: (1, 1, 1), group: "sorted_set", summary: "Stores the difference of multiple sorted sets in a key.", handler: zdiffstore },
    Spec { name: "zunion", arity: -3, flags: READ, keys: (0, 0, 0), group: "sorted_set", summary: "Returns the union of multiple sorted sets.", handler: zunion },
    Spec { name: "zinter", arity: -3, flags: READ, keys: (0, 0, 0), group: "sorted_set", summary: "Returns the intersect of multiple sorted sets.", handler: zinter },
    Spec { name: "zdiff", arity: -3, flags: READ, keys: (0, 0, 0), group: "sorted_set", summary: "Returns the difference between multiple sorted sets.", handler: zdiff },
    Spec { name: "zintercard", arity: -3, flags: READ, keys: (0, 0, 0), group: "sorted_set", summary: "Returns the number of members of the intersect of multiple sorted sets.", handler: zintercard },
    Spec { name: "zrangestore", arity: -5, flags: WRITE, keys: (1, 2, 1), group: "sorted_set", summary: "Stores a range of members from sorted set in a key.", handler: zrangestore },
    Spec { name: "zmpop", arity: -4, flags: &["write"], keys: (0, 0, 0), group: "sorted_set", summary: "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", handler: zmpop },
    Spec { name: "bzmpop", arity: -5, flags: &["write", "blocking"], keys: (0, 0, 0), group: "sorted_set", summary: "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", handler: bzmpop },
    Spec { name: "bzpopmin", arity: -3, flags: &["write", "noscript", "blocking", "fast"], keys: (1, -2, 1), group: "sorted_set", summary: "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", handler: bzpopmin },
    Spec { name: "bzpopmax", arity: -3, flags: &["write", "noscript", "blocking", "fast"], keys: (1, -2, 1), group: "sorted_set", summary: "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", handler: bzpopmax },
    Spec { name: "zpopmax", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "sorted_set", summary: "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", handler: zpopmax },
];

/// Whether a sorted set of `count` members is within `zset-max-listpack-entries` and each of
/// `members` within `zset-max-listpack-value` (a `listpack`; past either a `skiplist` for good).
fn fits_listpack<'m>(
    limits: &EncodingLimits,
    count: u64,
    mut members: impl Iterator<Item = &'m Bytes>,
) -> bool {
    count <= limits.zset_max_listpack_entries
        && members.all(|m| m.len() as u64 <= limits.zset_max_listpack_value_bytes)
}

/// A sorted set being changed inside one atomic update.
struct ZEdit<'r, 'a> {
    read: &'r GroupRead<'a>,
    db: DbIndex,
    name: &'r [u8],
    found: Option<Live>,
    version: u64,
    count: u64,
    big: bool,
    floor: Floor,
    ceiling: Ceiling,
    /// Member -> (old score as stored, new score or `None` for removed).
    pending: BTreeMap<Bytes, (Option<f64>, Option<f64>)>,
    limits: EncodingLimits,
}

impl ZEdit<'_, '_> {
    fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        if let Some((_, new)) = self.pending.get(member) {
            return Ok(*new);
        }
        self.stored_score(member)
    }

    fn stored_score(&self, member: &[u8]) -> Result<Option<f64>> {
        if self.found.is_none() {
            return Ok(None);
        }
        match self
            .read
            .get(&zset_member_key(self.db, self.name, self.version, member))?
        {
            Some(v) => Ok(Some(decode_score(&v)?)),
            None => Ok(None),
        }
    }

    fn set(&mut self, member: &Bytes, score: f64) -> Result<()> {
        let old = self.stored_score(member)?;
        let entry = self.pending.entry(member.clone()).or_insert((old, old));
        if entry.1.is_none() {
            self.count += 1;
        }
        self.big |=
            super::collections::outgrows(&self.limits, KeyType::Zset, self.count, member, &[]);
        // A listpack keeps an integral score as an integer, so Redis turns -0 into 0 there (a
        // skiplist keeps it).
        let score = if score == 0.0 && !self.big {
            0.0
        } else {
            score
        };
        // An equal score (0 and -0 too) changes nothing, as in Redis.
        if entry.1 != Some(score) {
            let suffix = zset_score_suffix(score, member);
            self.floor.lower_to(&suffix);
            self.ceiling.raise_to(&suffix);
            entry.1 = Some(score);
        }
        Ok(())
    }

    fn remove(&mut self, member: &Bytes) -> Result<bool> {
        let old = self.stored_score(member)?;
        let entry = self.pending.entry(member.clone()).or_insert((old, old));
        let existed = entry.1.is_some();
        if existed {
            self.count -= 1;
            entry.1 = None;
        }
        Ok(existed)
    }

    /// Removes a member this update just read with its score from the score entries (under the
    /// same lock, so it is there): no second read of its member entry.
    fn remove_scanned(&mut self, member: &Bytes, score: f64) {
        let entry = self
            .pending
            .entry(member.clone())
            .or_insert((Some(score), Some(score)));
        if entry.1.take().is_some() {
            self.count -= 1;
        }
    }

    fn finish(self) -> Vec<BatchOp> {
        let changed: Vec<_> = self
            .pending
            .into_iter()
            .filter(|(_, (old, new))| old != new)
            .collect();
        if changed.is_empty() {
            return Vec::new();
        }
        let record_key = string_key(self.db, self.name);
        if self.count == 0 {
            return if self.found.is_some() {
                vec![BatchOp::Delete(record_key)]
            } else {
                Vec::new()
            };
        }
        let mut ops = Vec::with_capacity(2 * changed.len() + 1);
        let meta = Meta {
            version: self.version,
            count: self.count,
            floor: self.floor,
            ceiling: self.ceiling,
        };
        let unchanged_record = self
            .found
            .as_ref()
            .is_some_and(|f| f.meta == meta && f.big == self.big);
        if !unchanged_record {
            let encoding = if self.big {
                Encoding::Raw
            } else {
                Encoding::ByContent
            };
            let expiry = self.found.as_ref().and_then(|f| f.expire_at_ms);
            ops.push(BatchOp::Put(
                record_key,
                Record::encode_collection(KeyType::Zset, &meta.encode(), expiry, encoding),
            ));
        }
        for (member, (old, new)) in changed {
            if let Some(old) = old {
                ops.push(BatchOp::Delete(zset_score_key(
                    self.db,
                    self.name,
                    self.version,
                    old,
                    &member,
                )));
            }
            match new {
                Some(score) => ops.extend(zset_put_ops(
                    self.db,
                    self.name,
                    self.version,
                    &member,
                    score,
                )),
                None => ops.push(BatchOp::Delete(zset_member_key(
                    self.db,
                    self.name,
                    self.version,
                    &member,
                ))),
            }
        }
        ops
    }
}

fn decode_score(v: &[u8]) -> Result<f64> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| Error::command("stored data is damaged: a sorted set score"))?;
    Ok(f64::from_le_bytes(b))
}

/// Runs `f` on the sorted set `key` as one atomic read-modify-write (WRONGTYPE for another
/// kind).
/// `f` gets the context too (its own borrow: the caller's is taken here).
fn modify<T>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    mut f: impl FnMut(&Ctx<'_>, &mut ZEdit<'_, '_>) -> Result<T>,
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
        let found = crate::collection::live(read.get(&record_key)?, now, KeyType::Zset)?;
        let (meta, big) = match &found {
            Some(z) => (z.meta, z.big),
            None => (Meta::new(ctx.shared.versions.next(), 0), false),
        };
        let mut edit = ZEdit {
            read,
            db,
            name: key,
            found,
            version: meta.version,
            count: meta.count,
            big,
            floor: meta.floor,
            ceiling: meta.ceiling,
            pending: BTreeMap::new(),
            limits: ctx.shared.encodings(),
        };
        out = Some(f(ctx, &mut edit)?);
        let ops = edit.finish();
        wrote = !ops.is_empty();
        Ok(ops)
    })?;
    if wrote {
        ctx.shared.note_writes(1);
        // Clients blocked in BZPOPMIN/BZMPOP on it look again.
        ctx.session.note_key_push(key);
    }
    out.ok_or_else(|| Error::command("internal error: the sorted set update did not run"))
}

fn read_live(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Live>> {
    super::collections::read_live(ctx, key, KeyType::Zset)
}

/// Every (member, score) of the live sorted set `key`, in order (empty when absent).
fn entries(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<(Bytes, f64)>> {
    match read_live(ctx, key)? {
        Some(z) => zset_entries(ctx.db(), ctx.dbi(), key, &z.meta),
        None => Ok(Vec::new()),
    }
}

/// A score argument as ZADD reads it (`getDoubleFromObject`: strtod, no spaces, no NaN, and
/// no overflow or underflow of a finite number).
pub(crate) fn score_arg(arg: &[u8]) -> Result<f64> {
    match crate::num::parse_f64(arg) {
        Some(v) if !crate::num::out_of_range(arg, v) => Ok(v),
        _ => Err(Error::NotFloat),
    }
}

/// The flags ZADD reads before its score-member pairs.
const ZADD_FLAGS: [&str; 6] = ["NX", "XX", "GT", "LT", "CH", "INCR"];

pub(crate) fn zadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "NX") {
            nx = true;
        } else if is(a, "XX") {
            xx = true;
        } else if is(a, "GT") {
            gt = true;
        } else if is(a, "LT") {
            lt = true;
        } else if is(a, "CH") {
            ch = true;
        } else if is(a, "INCR") {
            incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return Err(Error::Syntax);
    }
    if nx && xx {
        return Err(Error::command(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(Error::command(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(Error::command(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut items = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks_exact(2) {
        items.push((score_arg(&p[0])?, p[1].clone()));
    }
    let mut touched = false;
    let outcome = modify(ctx, &args[1], |_, z| {
        touched = false;
        if z.found.is_none() && xx {
            return Ok((0, None));
        }
        let mut changed = 0i64;
        let mut last = None;
        for (score, member) in &items {
            let current = z.score(member)?;
            let mut new = *score;
            match current {
                Some(cur) => {
                    if nx {
                        last = None;
                        continue;
                    }
                    if incr {
                        new += cur;
                        if new.is_nan() {
                            return Err(Error::command("resulting score is not a number (NaN)"));
                        }
                    }
                    if (gt && new <= cur) || (lt && new >= cur) {
                        last = None;
                        continue;
                    }
                    if new != cur {
                        z.set(member, new)?;
                        touched = true;
                        if ch {
                            changed += 1;
                        }
                    }
                    last = Some(new);
                }
                None => {
                    if xx {
                        last = None;
                        continue;
                    }
                    z.set(member, new)?;
                    touched = true;
                    changed += 1;
                    last = Some(new);
                }
            }
        }
        Ok((changed, last))
    })?;
    if touched {
        let event = if incr { "zincr" } else { "zadd" };
        ctx.notify(notify::ZSET, event, &args[1]);
    }
    Ok(if incr {
        outcome.1.map_or(Reply::Nil, Reply::Double)
    } else {
        Reply::Int(outcome.0)
    })
}

fn zincrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis runs ZINCRBY through ZADD's parser, which takes a ZADD flag in the increment's
    // place and then finds one argument left where it wants pairs.
    if ZADD_FLAGS.iter().any(|f| is(&args[2], f)) {
        return Err(Error::Syntax);
    }
    let delta = score_arg(&args[2])?;
    let member = args[3].clone();
    let (score, changed) = modify(ctx, &args[1], |_, z| {
        // A new member takes the increment itself (-0 stays -0, as in Redis).
        let current = z.score(&member)?;
        let new = current.map_or(delta, |s| s + delta);
        if new.is_nan() {
            return Err(Error::command("resulting score is not a number (NaN)"));
        }
        z.set(&member, new)?;
        Ok((new, current != Some(new)))
    })?;
    // As ZADD INCR in Redis: a score left as it was is no change to report.
    if changed {
        ctx.notify(notify::ZSET, "zincr", &args[1]);
    }
    Ok(Reply::Double(score))
}

pub(crate) fn scores(ctx: &Ctx<'_>, key: &[u8], members: &[Bytes]) -> Result<Vec<Option<f64>>> {
    let Some(z) = read_live(ctx, key)? else {
        return Ok(vec![None; members.len()]);
    };
    let keys: Vec<Vec<u8>> = members
        .iter()
        .map(|m| zset_member_key(ctx.dbi(), key, z.meta.version, m))
        .collect();
    ctx.db()
        .multi_get(&keys)?
        .into_iter()
        .map(|v| v.map(|v| decode_score(&v)).transpose())
        .collect()
}

fn zscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let s = scores(ctx, &args[1], &args[2..3])?;
    Ok(s.into_iter()
        .next()
        .flatten()
        .map_or(Reply::Nil, Reply::Double))
}

fn zmscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let s = scores(ctx, &args[1], &args[2..])?;
    Ok(Reply::Array(
        s.into_iter()
            .map(|s| s.map_or(Reply::Nil, Reply::Double))
            .collect(),
    ))
}

fn zcard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_live(ctx, &args[1])?.map_or(0, |z| z.meta.count);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// One end of a score range (`zslParseRange`): `(x` exclusive, `-inf`/`+inf`. Redis reads it
/// with a bare `strtod` that must reach the end of the C string: leading spaces, hexadecimal
/// floats and an empty string (0) pass, NaN does not.
fn score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let (text, exclusive) = match arg.strip_prefix(b"(") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    crate::num::strtod_whole(text).map(|v| (v, exclusive))
}

/// A score range: `min`, `max` (value, exclusive).
#[derive(Clone, Copy)]
struct ScoreRange {
    min: (f64, bool),
    max: (f64, bool),
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<Self> {
        match (score_bound(min), score_bound(max)) {
            (Some(min), Some(max)) => Ok(ScoreRange { min, max }),
            _ => Err(Error::command("min or max is not a float")),
        }
    }

    fn contains(&self, s: f64) -> bool {
        let above = if self.min.1 {
            s > self.min.0
        } else {
            s >= self.min.0
        };
        let below = if self.max.1 {
            s < self.max.0
        } else {
            s <= self.max.0
        };
        above && below
    }
}

/// One end of a lex range (`zslParseLexRangeItem`): `-`, `+`, `[x`, `(x`.
#[derive(Clone, Debug)]
enum LexBound {
    MinusInf,
    PlusInf,
    Incl(Bytes),
    Excl(Bytes),
}

fn lex_bound(arg: &Bytes) -> Option<LexBound> {
    match arg.first() {
        Some(b'-') if arg.len() == 1 => Some(LexBound::MinusInf),
        Some(b'+') if arg.len() == 1 => Some(LexBound::PlusInf),
        Some(b'[') => Some(LexBound::Incl(arg.slice(1..))),
        Some(b'(') => Some(LexBound::Excl(arg.slice(1..))),
        _ => None,
    }
}

#[derive(Clone)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &Bytes, max: &Bytes) -> Result<Self> {
        match (lex_bound(min), lex_bound(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(Error::command("min or max not valid string range item")),
        }
    }

    /// Whether `m` is at or past the minimum (`zslLexValueGteMin`).
    fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::MinusInf => true,
            LexBound::PlusInf => false,
            LexBound::Incl(b) => m >= &b[..],
            LexBound::Excl(b) => m > &b[..],
        }
    }

    /// Whether `m` is at or before the maximum (`zslLexValueLteMax`).
    fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::MinusInf => false,
            LexBound::PlusInf => true,
            LexBound::Incl(b) => m <= &b[..],
            LexBound::Excl(b) => m < &b[..],
        }
    }

    /// Whether no member can be in the range (`zzlIsInLexRange`'s first test: the minimum
    /// past the maximum, or equal with either end exclusive; `-` and `+` count as exclusive).
    fn always_empty(&self) -> bool {
        let rank = |b: &LexBound| match b {
            LexBound::MinusInf => (0u8, None, true),
            LexBound::Incl(m) => (1, Some(m.clone()), false),
            LexBound::Excl(m) => (1, Some(m.clone()), true),
            LexBound::PlusInf => (2, None, true),
        };
        let (min, max) = (rank(&self.min), rank(&self.max));
        match (min.0, &min.1).cmp(&(max.0, &max.1)) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => min.2 || max.2,
            std::cmp::Ordering::Less => false,
        }
    }
}

/// The lowest and highest entries (member, score) of a sorted set: one short scan from each
/// end.
fn zset_ends(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    meta: &Meta,
) -> Result<Option<[(Bytes, f64); 2]>> {
    let mut ends = [None, None];
    for (end, from_top) in ends.iter_mut().zip([false, true]) {
        let mut first = |m: &[u8], s: f64| {
            *end = Some((Bytes::copy_from_slice(m), s));
            false
        };
        if from_top {
            visit_zset_rev_from(b, db, key, meta, None, &mut first)?;
        } else {
            visit_zset_from(b, db, key, meta, None, &mut first)?;
        }
    }
    Ok(match ends {
        [Some(low), Some(high)] => Some([low, high]),
        _ => None,
    })
}

/// The members of `key` that lex range `range` selects, in score order (`rev`: descending),
/// with LIMIT (`offset` skipped, at most `count`: negative for all): Redis's walk
/// (`zzlFirstInLexRange` / `zzlLastInLexRange`, then `genericZrangebylexCommand`'s loop): no
/// member when the range is always empty, the highest member is below its minimum or the
/// lowest above its maximum; otherwise from the first member (in the order asked) within its
/// near end, if that one is within the far end, `offset` members skipped unchecked, then
/// members while they are within the far end. Lex ranges are meant for sets whose members
/// share one score, which are in member order: the first member is then found by starting
/// the scan at the near end (one scan of what is answered). Other sets are walked from their
/// first member, as Redis walks a small set (a large one it searches by its skiplist, which
/// assumes the order).
fn lex_slice(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    meta: &Meta,
    range: &LexRange,
    rev: bool,
    (offset, count): (i64, i64),
) -> Result<Vec<(Bytes, f64)>> {
    let mut out = Vec::new();
    if offset < 0 || count == 0 || range.always_empty() {
        return Ok(out);
    }
    let Some([(low, low_score), (high, high_score)]) = zset_ends(b, db, key, meta)? else {
        return Ok(out);
    };
    if !range.above_min(&high) || !range.below_max(&low) {
        return Ok(out);
    }
    let near = |m: &[u8]| {
        if rev {
            range.below_max(m)
        } else {
            range.above_min(m)
        }
    };
    let far = |m: &[u8]| {
        if rev {
            range.above_min(m)
        } else {
            range.below_max(m)
        }
    };
    let (mut found, mut skipped) = (false, 0i64);
    let mut walk = |m: &[u8], s: f64| {
        if !found {
            if !near(m) {
                return true;
            }
            if !far(m) {
                return false;
            }
            found = true;
        }
        if skipped < offset {
            skipped += 1;
            return true;
        }
        if !far(m) {
            return false;
        }
        out.push((Bytes::copy_from_slice(m), s));
        count < 0 || (out.len() as i64) < count
    };
    let shared =
        collection::score_order_bytes(low_score) == collection::score_order_bytes(high_score);
    if !shared {
        if rev {
            visit_zset_rev_from(b, db, key, meta, None, &mut walk)?;
        } else {
            visit_zset_from(b, db, key, meta, None, &mut walk)?;
        }
        return Ok(out);
    }
    // One score: member order. The scan starts at the near end's member.
    fn at(bound: &LexBound, score: f64) -> Bound<(f64, &[u8])> {
        match bound {
            LexBound::Incl(m) => Bound::Included((score, &m[..])),
            LexBound::Excl(m) => Bound::Excluded((score, &m[..])),
            LexBound::MinusInf | LexBound::PlusInf => Bound::Unbounded,
        }
    }
    let bounds = if rev {
        (Bound::Unbounded, at(&range.max, low_score))
    } else {
        (at(&range.min, low_score), Bound::Unbounded)
    };
    visit_zset_between(b, db, key, meta, bounds, rev, &mut walk)?;
    Ok(out)
}

/// ZCOUNT: the members in the score range, counted in one scan from its low end that stops
/// past its high end (nothing copied).
fn zcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let range = ScoreRange::parse(&args[2], &args[3])?;
    let Some(z) = read_live(ctx, &args[1])? else {
        return Ok(Reply::Int(0));
    };
    let mut n = 0i64;
    visit_zset_from(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        &z.meta,
        Some(range.min.0),
        &mut |_, s| {
            if s > range.max.0 {
                return false;
            }
            n += i64::from(range.contains(s));
            true
        },
    )?;
    Ok(Reply::Int(n))
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let range = LexRange::parse(&args[2], &args[3])?;
    let Some(z) = read_live(ctx, &args[1])? else {
        return Ok(Reply::Int(0));
    };
    let n = lex_slice(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        &z.meta,
        &range,
        false,
        (0, -1),
    )?
    .len();
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// Members ZRANK and ZREVRANK count on each side of the asked one before they choose a side
/// by its score.
const RANK_NEAR: u64 = 128;

/// ZRANK / ZREVRANK, with Redis 7.2's WITHSCORE (`zrankGenericCommand`: more than one option
/// is an arity error, another word a syntax error, both before the key is looked at; a member
/// that is not there is a null array when the score was asked for).
fn rank(ctx: &Ctx<'_>, args: &[Bytes], rev: bool) -> Result<Reply> {
    if args.len() > 4 {
        let name = if rev { "zrevrank" } else { "zrank" };
        return Err(Error::WrongArity(name.into()));
    }
    let withscore = match args.get(3) {
        Some(a) if is(a, "WITHSCORE") => true,
        Some(_) => return Err(Error::Syntax),
        None => false,
    };
    let absent = if withscore {
        Reply::NilArray
    } else {
        Reply::Nil
    };
    let Some(z) = read_live(ctx, &args[1])? else {
        return Ok(absent);
    };
    // The member's score (one point read), then the members on the asked side of it counted.
    let member_key = zset_member_key(ctx.dbi(), &args[1], z.meta.version, &args[2]);
    let Some(score) = ctx
        .db()
        .get(&member_key)?
        .map(|v| decode_score(&v))
        .transpose()?
    else {
        return Ok(absent);
    };
    // Members near either end are placed by counting both sides up to a few; the others by
    // counting the side that the member's score, between the set's lowest and highest,
    // suggests is shorter (the count of one side is the set's count less the other side and
    // the member).
    let entry = (score, &args[2][..]);
    let (b, dbi, name, meta) = (ctx.db(), ctx.dbi(), &args[1], &z.meta);
    let counted = if let Some(n) = zset_count_beside(b, dbi, name, meta, entry, !rev, RANK_NEAR)? {
        n
    } else if let Some(n) = zset_count_beside(b, dbi, name, meta, entry, rev, RANK_NEAR)? {
        meta.count.saturating_sub(n + 1)
    } else {
        let above_middle = match zset_ends(b, dbi, name, meta)? {
            Some([(_, low), (_, high)]) if high > low => score - low > high - score,
            _ => false,
        };
        // The side below the member when `before` is true.
        let before = !above_middle;
        let n = zset_count_beside(b, dbi, name, meta, entry, before, u64::MAX)?.unwrap_or(0);
        if before != rev {
            n
        } else {
            meta.count.saturating_sub(n + 1)
        }
    };
    let rank = Reply::Int(i64::try_from(counted).unwrap_or(i64::MAX));
    Ok(if withscore {
        Reply::Array(vec![rank, Reply::Double(score)])
    } else {
        rank
    })
}

fn zrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    rank(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    rank(ctx, args, true)
}

/// What a range selects.
enum By {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Redis's `zrangeGenericCommand`: options after the two range arguments, then the range, then
/// the key. `fixed`: the command names the kind of range (ZRANGEBYSCORE...), so BYSCORE,
/// BYLEX and REV are not options.
fn range_command(ctx: &Ctx<'_>, args: &[Bytes], kind: Option<&str>, rev: bool) -> Result<Reply> {
    let (selected, withscores) = select_range(ctx, args, kind, rev, false)?;
    Ok(entries_reply(ctx, selected, withscores))
}

/// What a ZRANGE-family command selects, and whether it asked for scores. `store`: ZRANGESTORE
/// (its arguments without the destination), where WITHSCORES is no option.
fn select_range(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    mut kind: Option<&str>,
    mut rev: bool,
    store: bool,
) -> Result<(Vec<(Bytes, f64)>, bool)> {
    let fixed = kind.is_some() || rev;
    let (mut withscores, mut limit): (bool, Option<(i64, i64)>) = (false, None);
    let mut j = 4;
    while j < args.len() {
        let left = args.len() - j - 1;
        if !store && is(&args[j], "WITHSCORES") {
            withscores = true;
        } else if is(&args[j], "LIMIT") && left >= 2 {
            limit = Some((int_arg(&args[j + 1])?, int_arg(&args[j + 2])?));
            j += 2;
        } else if !fixed && kind.is_none() && is(&args[j], "BYSCORE") {
            kind = Some("score");
        } else if !fixed && kind.is_none() && is(&args[j], "BYLEX") {
            kind = Some("lex");
        } else if !fixed && !rev && is(&args[j], "REV") {
            rev = true;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    // Redis refuses LIMIT with a rank range only when its count limits anything (not -1); the
    // offset is then ignored.
    if limit.is_some_and(|(_, count)| count != -1) && kind.is_none() {
        return Err(Error::command(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    let limit = limit.filter(|_| kind.is_some());
    if withscores && kind == Some("lex") {
        return Err(Error::command(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (lo, hi) = if rev && kind.is_some() {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let by = match kind {
        None => By::Rank(int_arg(lo)?, int_arg(hi)?),
        Some("score") => By::Score(ScoreRange::parse(lo, hi)?),
        _ => By::Lex(LexRange::parse(lo, hi)?),
    };
    let mut limit = limit;
    let selected: Vec<(Bytes, f64)> = match by {
        By::Rank(start, stop) => rank_range(ctx, &args[1], start, stop, rev)?,
        By::Score(r) => {
            let (selected, limited) = score_range(ctx, &args[1], &r, rev, limit)?;
            if limited {
                limit = None;
            }
            selected
        }
        By::Lex(r) => {
            let window = limit.take().unwrap_or((0, -1));
            match read_live(ctx, &args[1])? {
                Some(z) => lex_slice(ctx.db(), ctx.dbi(), &args[1], &z.meta, &r, rev, window)?,
                None => Vec::new(),
            }
        }
    };
    let selected = match limit {
        Some((offset, _)) if offset < 0 => Vec::new(),
        Some((offset, count)) => {
            let it = selected
                .into_iter()
                .skip(usize::try_from(offset).unwrap_or(usize::MAX));
            if count < 0 {
                it.collect()
            } else {
                it.take(usize::try_from(count).unwrap_or(usize::MAX))
                    .collect()
            }
        }
        None => selected,
    };
    Ok((selected, withscores))
}

/// The members of ranks `start..=stop` (Redis's negative ranks from the end; `rev`: ranks from
/// the highest score), in the order asked: one scan from whichever end of the set is nearer
/// (the floor upwards, or the top down), which skips what comes before them and stops after
/// the last (ranks are placed with the set's count).
fn rank_range(
    ctx: &Ctx<'_>,
    key: &[u8],
    start: i64,
    stop: i64,
    rev: bool,
) -> Result<Vec<(Bytes, f64)>> {
    match read_live(ctx, key)? {
        Some(z) => rank_slice(ctx.db(), ctx.dbi(), key, &z.meta, start, stop, rev),
        None => Ok(Vec::new()),
    }
}

/// [`rank_range`] of the sorted set `key` of database `db` with metadata `meta`, read through
/// `b` (ZREMRANGEBYRANK reads it under its update's lock).
fn rank_slice(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    meta: &Meta,
    start: i64,
    stop: i64,
    rev: bool,
) -> Result<Vec<(Bytes, f64)>> {
    let len = i64::try_from(meta.count).unwrap_or(i64::MAX);
    let start = if start < 0 { start + len } else { start }.max(0);
    let stop = if stop < 0 { stop + len } else { stop };
    if start > stop || start >= len {
        return Ok(Vec::new());
    }
    let stop = stop.min(len - 1);
    // In ascending order: skip `first` members, then take `wanted`.
    let first = if rev { len - 1 - stop } else { start };
    let wanted = stop - start + 1;
    // The same members counted from the top: skip `from_top`, then take `wanted`.
    let from_top = len - first - wanted;
    let mut seen = 0i64;
    let skip = first.min(from_top);
    let mut out: Vec<(Bytes, f64)> =
        Vec::with_capacity(usize::try_from(wanted.min(1024)).unwrap_or(1024));
    let mut take = |m: &[u8], s: f64| {
        if seen >= skip {
            out.push((Bytes::copy_from_slice(m), s));
        }
        seen += 1;
        (out.len() as i64) < wanted
    };
    let descending = from_top < first;
    if descending {
        visit_zset_rev_from(b, db, key, meta, None, &mut take)?;
    } else {
        visit_zset_from(b, db, key, meta, None, &mut take)?;
    }
    if descending != rev {
        out.reverse();
    }
    Ok(out)
}

/// The members whose scores `range` holds, in the order asked: one scan from the range's low
/// end upwards (`rev`: its high end downwards) that stops past its other end, with LIMIT
/// applied during the scan (it stops after `count`; the second value says LIMIT was applied).
fn score_range(
    ctx: &Ctx<'_>,
    key: &[u8],
    range: &ScoreRange,
    rev: bool,
    limit: Option<(i64, i64)>,
) -> Result<(Vec<(Bytes, f64)>, bool)> {
    match read_live(ctx, key)? {
        Some(z) => score_slice(ctx.db(), ctx.dbi(), key, &z.meta, range, rev, limit),
        None => Ok((Vec::new(), false)),
    }
}

/// [`score_range`] of the sorted set `key` of database `db` with metadata `meta`, read through
/// `b` (ZREMRANGEBYSCORE reads it under its update's lock).
fn score_slice(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    meta: &Meta,
    range: &ScoreRange,
    rev: bool,
    limit: Option<(i64, i64)>,
) -> Result<(Vec<(Bytes, f64)>, bool)> {
    let mut out: Vec<(Bytes, f64)> = Vec::new();
    let (offset, count) = match limit {
        Some((offset, count)) => {
            if offset < 0 || count == 0 {
                return Ok((Vec::new(), true));
            }
            (offset, count)
        }
        None => (0, -1),
    };
    let mut skipped = 0i64;
    let mut take = |m: &[u8], s: f64| {
        if skipped < offset {
            skipped += 1;
            return true;
        }
        out.push((Bytes::copy_from_slice(m), s));
        count < 0 || (out.len() as i64) < count
    };
    if rev {
        visit_zset_rev_from(b, db, key, meta, Some(range.max.0), &mut |m, s| {
            if s < range.min.0 {
                return false;
            }
            !range.contains(s) || take(m, s)
        })?;
    } else {
        visit_zset_from(b, db, key, meta, Some(range.min.0), &mut |m, s| {
            if s > range.max.0 {
                return false;
            }
            !range.contains(s) || take(m, s)
        })?;
    }
    Ok((out, limit.is_some()))
}

/// Members, with their scores when asked: RESP2 one flat array, RESP3 an array of pairs.
fn entries_reply(ctx: &Ctx<'_>, entries: Vec<(Bytes, f64)>, withscores: bool) -> Reply {
    let resp3 = ctx.session.protocol == Protocol::Resp3;
    let mut out = Vec::with_capacity(entries.len() * if withscores { 2 } else { 1 });
    for (m, s) in entries {
        match (withscores, resp3) {
            (false, _) => out.push(Reply::Bulk(m)),
            (true, true) => out.push(Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])),
            (true, false) => {
                out.push(Reply::Bulk(m));
                out.push(Reply::Double(s));
            }
        }
    }
    Reply::Array(out)
}

fn zrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range_command(ctx, args, None, false)
}

fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range_command(ctx, args, Some("score"), false)
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range_command(ctx, args, Some("score"), true)
}

fn zrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range_command(ctx, args, Some("lex"), false)
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    range_command(ctx, args, Some("lex"), true)
}

fn zrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Ranks, reversed, through ZRANGE's option loop as in Redis: WITHSCORES, and LIMIT (its
    // numbers read first, then refused for a rank range unless the count is -1).
    range_command(ctx, args, None, true)
}

fn zrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (n, emptied) = modify(ctx, &args[1], |_, z| {
        let mut n = 0;
        if z.found.is_none() {
            return Ok((0, false));
        }
        for m in &args[2..] {
            n += i64::from(z.remove(m)?);
        }
        Ok((n, z.count == 0))
    })?;
    notify_removed(ctx, &args[1], "zrem", n > 0, emptied);
    Ok(Reply::Int(n))
}

/// The events of a removal from sorted set `key`: `event` when something went, and `del`
/// when the set went with it.
fn notify_removed(ctx: &mut Ctx<'_>, key: &Bytes, event: &'static str, any: bool, emptied: bool) {
    if any {
        ctx.notify(notify::ZSET, event, key);
        if emptied {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
}

/// Removes the members `pick` selects from the live sorted set (in order), atomically;
/// reports `event`.
fn remove_where(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    event: &'static str,
    select: impl Fn(&dyn KvBackend, DbIndex, &[u8], &Meta) -> Result<Vec<(Bytes, f64)>>,
) -> Result<i64> {
    let (n, emptied) = modify(ctx, key, |ctx, z| {
        let Some(found) = z.found.clone() else {
            return Ok((0, false));
        };
        let picked = select(ctx.db(), z.db, z.name, &found.meta)?;
        for (m, score) in &picked {
            z.remove_scanned(m, *score);
        }
        Ok((picked.len() as i64, z.count == 0))
    })?;
    notify_removed(ctx, key, event, n > 0, emptied);
    Ok(n)
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let n = remove_where(ctx, &args[1], "zremrangebyrank", |b, db, key, meta| {
        rank_slice(b, db, key, meta, start, stop, false)
    })?;
    Ok(Reply::Int(n))
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let range = ScoreRange::parse(&args[2], &args[3])?;
    let n = remove_where(ctx, &args[1], "zremrangebyscore", |b, db, key, meta| {
        Ok(score_slice(b, db, key, meta, &range, false, None)?.0)
    })?;
    Ok(Reply::Int(n))
}

fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let range = LexRange::parse(&args[2], &args[3])?;
    let n = remove_where(ctx, &args[1], "zremrangebylex", |b, db, key, meta| {
        lex_slice(b, db, key, meta, &range, false, (0, -1))
    })?;
    Ok(Reply::Int(n))
}

fn zpop(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> Result<Reply> {
    if args.len() > 3 {
        return Err(Error::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(c) => match crate::num::parse_i64(c) {
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(Error::command("value is out of range, must be positive")),
        },
    };
    // In a held run ZPOPMIN reads ahead and leaves the rest for the run's next pop of this
    // set (`PopWindow`).
    let mut window = if ctx.session.in_held_run && !max {
        Some(ctx.session.pop_window.take())
    } else {
        None
    };
    let popped = pop_entries(ctx, &args[1], max, count.unwrap_or(1), window.as_mut())?;
    if let Some(left) = window {
        ctx.session.pop_window = left;
    }
    let resp3 = ctx.session.protocol == Protocol::Resp3;
    let mut out = Vec::new();
    for (m, s) in popped {
        if count.is_some() && resp3 {
            out.push(Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]));
        } else {
            out.push(Reply::Bulk(m));
            out.push(Reply::Double(s));
        }
    }
    Ok(Reply::Array(out))
}

/// Removes and returns up to `want` members of the sorted set `key` from its low (`max`: high)
/// end, in that order, as one atomic update (empty when absent). `window` (ZPOPMIN in a held
/// run): the window the run's previous pop left, replaced by what this pop leaves.
fn pop_entries(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    max: bool,
    want: usize,
    window: Option<&mut Option<PopWindow>>,
) -> Result<Vec<(Bytes, f64)>> {
    let held = window.is_some() && !max;
    let (mut cached, slot) = match window {
        Some(slot) => (slot.take(), Some(slot)),
        None => (None, None),
    };
    let (popped, left, emptied) = modify(ctx, key, |ctx, z| {
        let Some(found) = z.found.clone() else {
            return Ok((Vec::new(), None, false));
        };
        let meta = &found.meta;
        // The lowest scores are a bounded scan from the floor up, the highest one from the
        // top down, copying only what is popped.
        let (mut all, complete) = if max {
            let top = if want == 0 {
                Vec::new()
            } else {
                let last = i64::try_from(want).unwrap_or(i64::MAX) - 1;
                rank_slice(ctx.db(), z.db, z.name, meta, 0, last, true)?
            };
            (top, true)
        } else {
            let from_window = cached
                .take()
                .and_then(|w| w.into_first(z.db, z.name, meta.version, KeyType::Zset, want));
            match from_window {
                Some((elements, complete)) => (elements, complete),
                None => {
                    let fill = if held {
                        want.max(POP_WINDOW_FILL)
                    } else {
                        want
                    };
                    let all = zset_first_entries(ctx.db(), z.db, z.name, meta, fill)?;
                    let complete = all.len() < fill;
                    (all, complete)
                }
            }
        };
        let rest = all.split_off(want.min(all.len()));
        for (m, score) in &all {
            z.remove_scanned(m, *score);
        }
        // Everything beyond the last popped entry is gone: later pops start at it.
        if let Some((m, s)) = all.last() {
            let suffix = zset_score_suffix(*s, m);
            if max {
                z.ceiling.set_to(&suffix);
            } else {
                z.floor.raise_to(&suffix);
            }
        }
        let left =
            held.then(|| PopWindow::new(z.db, z.name, meta.version, KeyType::Zset, rest, complete));
        Ok((all, left, z.count == 0))
    })?;
    if let Some(slot) = slot {
        *slot = left;
    }
    let event = if max { "zpopmax" } else { "zpopmin" };
    notify_removed(ctx, key, event, !popped.is_empty(), emptied);
    Ok(popped)
}

/// The first of `keys` that exists, if it is a sorted set whose turn it is (blocking: no
/// client blocked on it before this one); WRONGTYPE when the first that exists holds another
/// kind, as Redis's `genericZpopCommand` (later keys are not looked at).
fn first_zset<'k>(
    ctx: &Ctx<'_>,
    keys: &'k [Bytes],
    look: Option<&super::lists::Look>,
) -> Result<Option<&'k Bytes>> {
    let again = look.is_some_and(|l| l.again);
    for key in keys {
        if super::lists::unless_other_kind(again, read_live(ctx, key))?.is_some() {
            if look.is_some_and(|l| !super::lists::my_turn(ctx, key, l)) {
                continue;
            }
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// ZMPOP's and BZMPOP's reply: `[key, [[member, score], ...]]`.
fn mpop_reply(key: &Bytes, popped: Vec<(Bytes, f64)>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(key.clone()),
        Reply::Array(
            popped
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        ),
    ])
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count].
fn zmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (keys, max, count) = super::lists::mpop_args(args, 1, ["MIN", "MAX"])?;
    let Some(key) = first_zset(ctx, keys, None)? else {
        return Ok(Reply::NilArray);
    };
    let popped = pop_entries(ctx, key, max, count, None)?;
    Ok(mpop_reply(key, popped))
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP that waits.
fn bzmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (keys, max, count) = super::lists::mpop_args(args, 2, ["MIN", "MAX"])?;
    blocking_pop(ctx, keys, &args[1], max, count, true)
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout: `[key, member, score]`.
fn bzpop(ctx: &mut Ctx<'_>, args: &[Bytes], max: bool) -> Result<Reply> {
    let keys = &args[1..args.len() - 1];
    blocking_pop(ctx, keys, &args[args.len() - 1], max, 1, false)
}

/// The blocking sorted-set pops: pop from the first sorted set of `keys` that has members
/// (and no client blocked on it first), or block as BLPOP does (`lists::block_or_time_out`).
fn blocking_pop(
    ctx: &mut Ctx<'_>,
    keys: &[Bytes],
    timeout: &[u8],
    max: bool,
    count: usize,
    nested: bool,
) -> Result<Reply> {
    let look = super::lists::look(ctx, timeout, KeyType::Zset)?;
    if let Some(key) = first_zset(ctx, keys, Some(&look))? {
        let popped = pop_entries(ctx, key, max, count, None)?;
        if !popped.is_empty() {
            ctx.session.wait_ticket = None;
            if nested {
                return Ok(mpop_reply(key, popped));
            }
            let mut out = vec![Reply::Bulk(key.clone())];
            for (m, s) in popped {
                out.push(Reply::Bulk(m));
                out.push(Reply::Double(s));
            }
            return Ok(Reply::Array(out));
        }
    }
    super::lists::block_or_time_out(ctx, keys, &look, Reply::NilArray)
}

fn bzpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bzpop(ctx, args, false)
}

fn bzpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bzpop(ctx, args, true)
}

fn zpopmin(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    zpop(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    zpop(ctx, args, true)
}

fn zrandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    use rand::seq::SliceRandom;
    use rand::Rng;
    let key = &args[1];
    let mut rng = rand::thread_rng();
    let Some(count_arg) = args.get(2) else {
        let all = entries(ctx, key)?;
        return Ok(Reply::bulk_or_nil(
            all.choose(&mut rng).map(|(m, _)| m.clone()),
        ));
    };
    let count = int_arg(count_arg)?;
    if count == i64::MIN {
        return Err(Error::command(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match args.get(3) {
        None => false,
        Some(w) if args.len() == 4 && is(w, "WITHSCORES") => true,
        Some(_) => return Err(Error::Syntax),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Error::command("value is out of range"));
    }
    let Some(live) = read_live(ctx, key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    // Every member is read (O(n)); a large set would want the sampling hashes and sets use.
    let mut all = entries(ctx, key)?;
    let want = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let picked: Vec<(Bytes, f64)> = if count < 0 {
        (0..want.min(REPLY_ELEMENTS_MAX))
            .filter_map(|_| all.get(rng.gen_range(0..all.len().max(1))).cloned())
            .collect()
    } else if want >= all.len() {
        // The whole set, as Redis answers it: highest rank first.
        all.reverse();
        all
    } else if !live.big {
        // Distinct members of a listpack come in its order (`lpRandomPairsUnique`): a
        // random choice of ranks, lowest first.
        let mut ranks = rand::seq::index::sample(&mut rng, all.len(), want).into_vec();
        ranks.sort_unstable();
        ranks.into_iter().map(|i| all[i].clone()).collect()
    } else {
        all.shuffle(&mut rng);
        all.truncate(want);
        all
    };
    Ok(entries_reply(ctx, picked, withscores))
}

/// ZUNION, ZINTER and ZDIFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

/// How ZUNION and ZINTER combine a member's scores (AGGREGATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: a sum of +inf and -inf is 0.
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// An input of ZUNION / ZINTER / ZDIFF: a sorted set's members and scores, or a set's members
/// with score 1 (Redis takes both), absent keys empty; WRONGTYPE for any other kind.
fn source(ctx: &Ctx<'_>, key: &[u8]) -> Result<Vec<(Bytes, f64)>> {
    let db = ctx.dbi();
    if let Some(bytes) = ctx.db().get(&string_key(db, key))? {
        let r = Record::decode(bytes)?;
        if !r.expired(now_ms()) {
            return match r.kind {
                KeyType::Zset => zset_entries(ctx.db(), db, key, &Meta::decode(&r.payload)?),
                KeyType::Set => Ok(crate::collection::read_elements(
                    ctx.db(),
                    db,
                    key,
                    &Meta::decode(&r.payload)?,
                )?
                .into_iter()
                .map(|(m, _)| (m, 1.0))
                .collect()),
                _ => Err(Error::WrongType),
            };
        }
    }
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(Vec::new())
}

/// What a ZUNION-family command computed.
enum Combined {
    /// Members and scores in ZRANGE order, and whether WITHSCORES was asked.
    Entries(Vec<(Bytes, f64)>, bool),
    /// ZINTERCARD's count.
    Count(usize),
}

/// Redis's `zunionInterDiffGenericCommand`: `args[numkeys_at]` is numkeys, the keys follow,
/// then the options (WEIGHTS and AGGREGATE but for ZDIFF, WITHSCORES without a destination,
/// LIMIT for ZINTERCARD). Checks in Redis's order: numkeys, every key's type, the options.
fn combine(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    numkeys_at: usize,
    op: SetOp,
    store: bool,
    count_only: bool,
) -> Result<Combined> {
    let numkeys = int_arg(&args[numkeys_at])?;
    if numkeys < 1 {
        return Err(Error::command(format!(
            "at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )));
    }
    let first = numkeys_at + 1;
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len() - first {
        return Err(Error::Syntax);
    }
    let mut sources = Vec::with_capacity(numkeys);
    for key in &args[first..first + numkeys] {
        sources.push((source(ctx, key)?, 1.0f64));
    }
    let (mut aggregate, mut withscores, mut limit) = (Aggregate::Sum, false, 0usize);
    let mut j = first + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        let combining = op != SetOp::Diff && !count_only;
        if combining && remaining > numkeys && is(&args[j], "WEIGHTS") {
            for (i, (_, weight)) in sources.iter_mut().enumerate() {
                *weight = score_arg(&args[j + 1 + i])
                    .map_err(|_| Error::command("weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if combining && remaining >= 2 && is(&args[j], "AGGREGATE") {
            let a = &args[j + 1];
            aggregate = if is(a, "SUM") {
                Aggregate::Sum
            } else if is(a, "MIN") {
                Aggregate::Min
            } else if is(a, "MAX") {
                Aggregate::Max
            } else {
                return Err(Error::Syntax);
            };
            j += 2;
        } else if !store && !count_only && is(&args[j], "WITHSCORES") {
            withscores = true;
            j += 1;
        } else if count_only && remaining >= 2 && is(&args[j], "LIMIT") {
            limit = match crate::num::parse_i64(&args[j + 1]) {
                Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Error::command("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let weighted = |score: f64, weight: f64| {
        let s = score * weight;
        if s.is_nan() {
            0.0
        } else {
            s
        }
    };
    let mut out: Vec<(Bytes, f64)> = match op {
        SetOp::Inter | SetOp::Union => {
            // Smallest input first, as Redis (a stable sort, as glibc's qsort): the order in
            // which a member's scores are summed (+inf plus -inf is 0, so it can matter).
            sources.sort_by_key(|(entries, _)| entries.len());
            let lookups: Vec<std::collections::HashMap<&Bytes, f64>> = sources
                .iter()
                .map(|(entries, _)| entries.iter().map(|(m, s)| (m, *s)).collect())
                .collect();
            let mut acc: BTreeMap<Bytes, f64> = BTreeMap::new();
            if op == SetOp::Inter {
                let Some(((smallest, w0), rest)) = sources.split_first() else {
                    return Ok(Combined::Count(0));
                };
                let mut found = 0usize;
                'members: for (m, s) in smallest {
                    let mut score = weighted(*s, *w0);
                    for (i, (_, w)) in rest.iter().enumerate() {
                        match lookups[i + 1].get(m) {
                            Some(v) => aggregate.apply(&mut score, *v * *w),
                            None => continue 'members,
                        }
                    }
                    found += 1;
                    if count_only {
                        if limit > 0 && found >= limit {
                            break;
                        }
                        continue;
                    }
                    acc.insert(m.clone(), score);
                }
                if count_only {
                    return Ok(Combined::Count(found));
                }
            } else {
                for (entries, w) in &sources {
                    for (m, s) in entries {
                        let score = weighted(*s, *w);
                        match acc.get_mut(m) {
                            Some(target) => aggregate.apply(target, score),
                            None => {
                                acc.insert(m.clone(), score);
                            }
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Diff => {
            let Some(((base, _), rest)) = sources.split_first() else {
                return Ok(Combined::Entries(Vec::new(), withscores));
            };
            let others: std::collections::HashSet<&Bytes> = rest
                .iter()
                .flat_map(|(e, _)| e.iter().map(|(m, _)| m))
                .collect();
            base.iter()
                .filter(|(m, _)| !others.contains(m))
                .cloned()
                .collect()
        }
    };
    // ZRANGE order: by score, ties by member.
    out.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    Ok(Combined::Entries(out, withscores))
}

/// Replaces `dst` (whatever it held, its expiry too) by a sorted set of `entries`, or deletes
/// it when there are none: one batch. The dispatcher holds the exec lock exclusively. The first
/// `listpack_entries` entries went into a listpack in Redis, which keeps -0 as 0 (`ZEdit::set`).
/// Replaces `dst` with a sorted set of `entries` (or deletes it when there are none), and
/// reports `event` (or `del`).
pub(crate) fn store_entries(
    ctx: &mut Ctx<'_>,
    dst: &Bytes,
    entries: &[(Bytes, f64)],
    listpack_entries: usize,
    event: &'static str,
) -> Result<Reply> {
    let db = ctx.dbi();
    let mut ops = Vec::with_capacity(2 * entries.len() + 3);
    let existed = super::keys::ops_removing(ctx, db, dst, &mut ops)?;
    if !entries.is_empty() {
        let meta = Meta::new(ctx.shared.versions.next(), entries.len() as u64);
        let big = !fits_listpack(
            &ctx.shared.encodings(),
            meta.count,
            entries.iter().map(|(m, _)| m),
        );
        let encoding = if big {
            Encoding::Raw
        } else {
            Encoding::ByContent
        };
        ops.push(BatchOp::Put(
            string_key(db, dst),
            Record::encode_collection(KeyType::Zset, &meta.encode(), None, encoding),
        ));
        for (i, (m, score)) in entries.iter().enumerate() {
            let score = if *score == 0.0 && i < listpack_entries {
                0.0
            } else {
                *score
            };
            ops.extend(zset_put_ops(db, dst, meta.version, m, score));
        }
    }
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    ctx.session.note_key_push(dst);
    if !entries.is_empty() {
        ctx.notify(notify::ZSET, event, dst);
    } else if existed {
        ctx.notify(notify::GENERIC, "del", dst);
    }
    Ok(Reply::Int(entries.len() as i64))
}

fn combine_reply(ctx: &Ctx<'_>, args: &[Bytes], op: SetOp) -> Result<Reply> {
    match combine(ctx, args, 1, op, false, false)? {
        Combined::Entries(entries, withscores) => Ok(entries_reply(ctx, entries, withscores)),
        Combined::Count(n) => Ok(Reply::Int(n as i64)),
    }
}

fn combine_store(ctx: &mut Ctx<'_>, args: &[Bytes], op: SetOp) -> Result<Reply> {
    match combine(ctx, args, 2, op, true, false)? {
        Combined::Entries(entries, _) => {
            // Redis builds the result as a skiplist, then makes it a listpack if small enough.
            let small = fits_listpack(
                &ctx.shared.encodings(),
                entries.len() as u64,
                entries.iter().map(|(m, _)| m),
            );
            let listpack_entries = if small { entries.len() } else { 0 };
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_entries(ctx, &args[1], &entries, listpack_entries, event)
        }
        Combined::Count(n) => Ok(Reply::Int(n as i64)),
    }
}

fn zunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_reply(ctx, args, SetOp::Union)
}

fn zinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_reply(ctx, args, SetOp::Inter)
}

fn zdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_reply(ctx, args, SetOp::Diff)
}

fn zunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_store(ctx, args, SetOp::Union)
}

fn zinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_store(ctx, args, SetOp::Inter)
}

fn zdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    combine_store(ctx, args, SetOp::Diff)
}

fn zintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    match combine(ctx, args, 1, SetOp::Inter, false, true)? {
        Combined::Count(n) => Ok(Reply::Int(n as i64)),
        Combined::Entries(entries, _) => Ok(Reply::Int(entries.len() as i64)),
    }
}

/// ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]: ZRANGE's
/// selection, stored.
fn zrangestore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut range_args = Vec::with_capacity(args.len() - 1);
    range_args.push(args[0].clone());
    range_args.extend_from_slice(&args[2..]);
    let (selected, _) = select_range(ctx, &range_args, None, false, true)?;
    // Redis starts the destination as a listpack unless a rank range is known to be longer,
    // and adds the members in order, converting before the first that does not fit.
    let by_rank = !args[5..].iter().any(|a| is(a, "BYSCORE") || is(a, "BYLEX"));
    let limits = ctx.shared.encodings();
    let listpack_entries = if by_rank && selected.len() as u64 > limits.zset_max_listpack_entries {
        0
    } else {
        selected
            .iter()
            .enumerate()
            .position(|(i, (m, _))| !fits_listpack(&limits, i as u64 + 1, std::iter::once(m)))
            .unwrap_or(selected.len())
    };
    store_entries(ctx, &args[1], &selected, listpack_entries, "zrangestore")
}

/// Most members ZRANDMEMBER with a negative count returns.
const REPLY_ELEMENTS_MAX: usize = 1 << 24;

fn zscan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    super::collections::scan_elements(ctx, args, KeyType::Zset)
}
