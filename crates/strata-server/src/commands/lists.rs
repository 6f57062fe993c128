//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LINSERT LREM
//! LTRIM LPOS LMOVE RPOPLPUSH LMPOP, the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP, with
//! redis-server 7.0's replies and errors.
//!
//! A list is a record (version, count, head position) plus one engine key per element at its
//! position (`collection::list_key`): pushes and pops at either end write one element and the
//! record; LINDEX and LSET touch one element; LRANGE is one scan of the key's partition.
//! LINSERT and LREM rewrite the list as a new incarnation (Kvrocks shifts elements the same
//! way: O(length)); LTRIM deletes what it cuts. Every write is one atomic `update_group`;
//! LMOVE between two lists holds the exec lock exclusively and writes both in one batch.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::strings::json_exists;
use super::{int_arg, is, Ctx, Spec, READ, READ_FAST, WRITE, WRITE_FAST};
use crate::backend::{BatchOp, GroupRead};
use crate::collection::{list_key, list_range, list_visit, ListMeta, LIST_HEAD_START};
use crate::error::{Error, Result};
use crate::keyspace::{now_ms, string_key, DbIndex, Encoding, KeyType, Record};
use crate::notify;
use crate::resp::{EncodedBulks, Reply};

#[rustfmt::skip]
pub(crate) static SPECS: &[Spec] = &[
    Spec { name: "lpush", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "list", summary: "Prepends one or more elements to a list. Creates the key if it doesn't exist.", handler: lpush },
    Spec { name: "rpush", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "list", summary: "Appends one or more elements to a list. Creates the key if it doesn't exist.", handler: rpush },
    Spec { name: "lpushx", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "list", summary: "Prepends one or more elements to a list only when the list exists.", handler: lpushx },
    Spec { name: "rpushx", arity: -3, flags: WRITE_FAST, keys: (1, 1, 1), group: "list", summary: "Appends an element to a list only when the list exists.", handler: rpushx },
    Spec { name: "lpop", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "list", summary: "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", handler: lpop },
    Spec { name: "rpop", arity: -2, flags: &["write", "fast"], keys: (1, 1, 1), group: "list", summary: "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", handler: rpop },
    Spec { name: "llen", arity: 2, flags: READ_FAST, keys: (1, 1, 1), group: "list", summary: "Returns the length of a list.", handler: llen },
    Spec { name: "lrange", arity: 4, flags: READ, keys: (1, 1, 1), group: "list", summary: "Returns a range of elements from a list.", handler: lrange },
    Spec { name: "lindex", arity: 3, flags: READ, keys: (1, 1, 1), group: "list", summary: "Returns an element from a list by its index.", handler: lindex },
    Spec { name: "lset", arity: 4, flags: WRITE, keys: (1, 1, 1), group: "list", summary: "Sets the value of an element in a list by its index.", handler: lset },
    Spec { name: "linsert", arity: 5, flags: WRITE, keys: (1, 1, 1), group: "list", summary: "Inserts an element before or after another element in a list.", handler: linsert },
    Spec { name: "lrem", arity: 4, flags: &["write"], keys: (1, 1, 1), group: "list", summary: "Removes elements from a list. Deletes the list if the last element was removed.", handler: lrem },
    Spec { name: "ltrim", arity: 4, flags: &["write"], keys: (1, 1, 1), group: "list", summary: "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", handler: ltrim },
    Spec { name: "lpos", arity: -3, flags: READ, keys: (1, 1, 1), group: "list", summary: "Returns the index of matching elements in a list.", handler: lpos },
    Spec { name: "lmove", arity: 5, flags: WRITE, keys: (1, 2, 1), group: "list", summary: "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", handler: lmove },
    Spec { name: "blpop", arity: -3, flags: &["write", "noscript", "blocking"], keys: (1, -2, 1), group: "list", summary: "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: blpop },
    Spec { name: "brpop", arity: -3, flags: &["write", "noscript", "blocking"], keys: (1, -2, 1), group: "list", summary: "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: brpop },
    Spec { name: "blmove", arity: 6, flags: &["write", "denyoom", "noscript", "blocking"], keys: (1, 2, 1), group: "list", summary: "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", handler: blmove },
    Spec { name: "brpoplpush", arity: 4, flags: &["write", "denyoom", "noscript", "blocking"], keys: (1, 2, 1), group: "list", summary: "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", handler: brpoplpush },
    Spec { name: "lmpop", arity: -4, flags: &["write"], keys: (0, 0, 0), group: "list", summary: "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", handler: lmpop },
    Spec { name: "blmpop", arity: -5, flags: &["write", "blocking"], keys: (0, 0, 0), group: "list", summary: "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: blmpop },
    Spec { name: "rpoplpush", arity: 3, flags: WRITE, keys: (1, 2, 1), group: "list", summary: "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", handler: rpoplpush },
];

/// Bytes of wire form an LRANGE reserves per element up front: a bulk of up to 7 bytes
/// (`$7\r\n` + 7 + `\r\n`); longer elements grow the buffer as they come.
const LRANGE_BYTES_PER_ELEMENT_GUESS: usize = 16;
/// The most an LRANGE reserves up front, however many elements it asks for.
const LRANGE_BUFFER_BYTES_MAX: usize = 64 * 1024;

/// A list as found: its expiry and metadata.
#[derive(Debug, Clone, Copy)]
struct Found {
    expire_at_ms: Option<u64>,
    meta: ListMeta,
}

/// Interprets a record for a list command: `None` when absent or expired, WRONGTYPE for
/// another kind.
fn found(record: Option<Bytes>, now: u64) -> Result<Option<Found>> {
    let Some(bytes) = record else {
        return Ok(None);
    };
    let r = Record::decode(bytes)?;
    if r.expired(now) {
        return Ok(None);
    }
    if r.kind != KeyType::List {
        return Err(Error::WrongType);
    }
    Ok(Some(Found {
        expire_at_ms: r.expire_at_ms,
        meta: ListMeta::decode(&r.payload)?,
    }))
}

/// The live list `key` of the selected database for a read command.
fn read_list(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Found>> {
    let f = found(ctx.db().get(&string_key(ctx.dbi(), key))?, now_ms())?;
    if f.is_none() && json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    Ok(f)
}

/// A list being changed inside one atomic update: pending element writes by position, the
/// head and count kept as they are made; or, after [`ListEdit::replace`], a whole new
/// incarnation.
struct ListEdit<'r, 'a> {
    ctx: &'r Ctx<'r>,
    read: &'r GroupRead<'a>,
    db: DbIndex,
    name: &'r [u8],
    found: Option<Found>,
    version: u64,
    head: u64,
    count: u64,
    pending: BTreeMap<u64, Option<Bytes>>,
    replaced: Option<Vec<Bytes>>,
}

impl ListEdit<'_, '_> {
    fn exists(&self) -> bool {
        self.found.is_some()
    }

    /// The element at `index` from the head (0-based).
    fn get(&self, index: u64) -> Result<Option<Bytes>> {
        if index >= self.count {
            return Ok(None);
        }
        let at = self.head.wrapping_add(index);
        if let Some(v) = self.pending.get(&at) {
            return Ok(v.clone());
        }
        self.read
            .get(&list_key(self.db, self.name, self.version, at))
    }

    fn push(&mut self, left: bool, value: Bytes) {
        let at = if left {
            self.head = self.head.wrapping_sub(1);
            self.head
        } else {
            self.head.wrapping_add(self.count)
        };
        self.count += 1;
        self.pending.insert(at, Some(value));
    }

    fn pop(&mut self, left: bool) -> Result<Option<Bytes>> {
        if self.count == 0 {
            return Ok(None);
        }
        let index = if left { 0 } else { self.count - 1 };
        let value = self.get(index)?;
        self.remove_end(left);
        Ok(value)
    }

    /// Drops the element at the head (`left`) or the tail of a list that has one.
    fn remove_end(&mut self, left: bool) {
        let index = if left { 0 } else { self.count - 1 };
        let at = self.head.wrapping_add(index);
        self.pending.insert(at, None);
        if left {
            self.head = self.head.wrapping_add(1);
        }
        self.count -= 1;
    }

    /// Pops up to `n` elements from the head (`left`) or the tail, in pop order. Several are
    /// read with one scan of their positions ([`ListEdit::read_end`]) instead of a look-up
    /// each; one is a point read (reading ahead for a pipeline's later pops of the same list
    /// measured no better: `BENCHMARKS.md`).
    fn pop_many(&mut self, left: bool, n: usize) -> Result<Vec<Bytes>> {
        let n = n.min(usize::try_from(self.count).unwrap_or(usize::MAX));
        if n > 1 {
            if let Some(values) = self.read_end(left, n as u64)? {
                for _ in 0..n {
                    self.remove_end(left);
                }
                return Ok(values);
            }
        }
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.pop(left)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(out)
    }

    /// The `n` elements (at most the count) at the head (`left`) or the tail, in pop order,
    /// read with one scan. `None`, for point reads instead: this edit has writes of its own,
    /// or a held run has staged writes (a scan would apply them first), or the positions wrap
    /// around, or the scan did not find one element per position (the point reads tell what
    /// is wrong).
    fn read_end(&self, left: bool, n: u64) -> Result<Option<Vec<Bytes>>> {
        if !self.pending.is_empty() || self.ctx.db().has_staged_writes() {
            return Ok(None);
        }
        let from = if left {
            self.head
        } else {
            self.head.wrapping_add(self.count - n)
        };
        let to = from.wrapping_add(n);
        if from >= to {
            return Ok(None);
        }
        let mut values = list_range(self.ctx.db(), self.db, self.name, self.version, from, to)?;
        if values.len() as u64 != n {
            return Ok(None);
        }
        if !left {
            values.reverse();
        }
        Ok(Some(values))
    }

    fn set(&mut self, index: u64, value: Bytes) {
        self.pending
            .insert(self.head.wrapping_add(index), Some(value));
    }

    /// Every element, in order (pending writes included).
    fn all(&self) -> Result<Vec<Bytes>> {
        let Some(f) = self.found else {
            return Ok(Vec::new());
        };
        let stored = list_range(
            self.ctx.db(),
            self.db,
            self.name,
            f.meta.version,
            f.meta.head,
            f.meta.head.wrapping_add(f.meta.count),
        )?;
        // Only whole-list commands call this, before any other change.
        debug_assert!(self.pending.is_empty());
        Ok(stored)
    }

    /// Drops elements `0..keep_from` and `keep_to..count` (positions from the head).
    fn trim(&mut self, keep_from: u64, keep_to: u64) {
        for index in (0..keep_from).chain(keep_to..self.count) {
            self.pending.insert(self.head.wrapping_add(index), None);
        }
        self.head = self.head.wrapping_add(keep_from);
        self.count = keep_to.saturating_sub(keep_from);
    }

    /// Replaces the whole list (a new incarnation; the old elements are disowned).
    fn replace(&mut self, values: Vec<Bytes>) {
        self.count = values.len() as u64;
        self.replaced = Some(values);
    }

    fn finish(self) -> Vec<BatchOp> {
        let record_key = string_key(self.db, self.name);
        let expiry = self.found.and_then(|f| f.expire_at_ms);
        let record = |meta: ListMeta| {
            BatchOp::Put(
                record_key.clone(),
                Record::encode_collection(
                    KeyType::List,
                    &meta.encode(),
                    expiry,
                    Encoding::ByContent,
                ),
            )
        };
        if let Some(values) = self.replaced {
            if values.is_empty() {
                return if self.found.is_some() {
                    vec![BatchOp::Delete(record_key.clone())]
                } else {
                    Vec::new()
                };
            }
            let meta = ListMeta {
                version: self.ctx.shared.versions.next(),
                count: values.len() as u64,
                head: LIST_HEAD_START,
            };
            let mut ops = vec![record(meta)];
            for (i, v) in values.into_iter().enumerate() {
                let k = list_key(self.db, self.name, meta.version, meta.head + i as u64);
                ops.push(BatchOp::Put(k, v.to_vec()));
            }
            return ops;
        }
        if self.pending.is_empty() {
            return Vec::new();
        }
        if self.count == 0 {
            // The record goes; the popped elements were the last ones.
            return if self.found.is_some() {
                vec![BatchOp::Delete(record_key.clone())]
            } else {
                Vec::new()
            };
        }
        let meta = ListMeta {
            version: self.version,
            count: self.count,
            head: self.head,
        };
        let mut ops = Vec::with_capacity(self.pending.len() + 1);
        if self.found.is_none_or(|f| f.meta != meta) {
            ops.push(record(meta));
        }
        for (at, value) in self.pending {
            let k = list_key(self.db, self.name, self.version, at);
            ops.push(match value {
                Some(v) => BatchOp::Put(k, v.to_vec()),
                None => BatchOp::Delete(k),
            });
        }
        ops
    }
}

fn start<'r, 'a>(
    ctx: &'r Ctx<'r>,
    read: &'r GroupRead<'a>,
    key: &'r [u8],
    record: Option<Bytes>,
) -> Result<ListEdit<'r, 'a>> {
    let found = found(record, now_ms())?;
    let (version, head, count) = match found {
        Some(f) => (f.meta.version, f.meta.head, f.meta.count),
        None => (ctx.shared.versions.next(), LIST_HEAD_START, 0),
    };
    Ok(ListEdit {
        ctx,
        read,
        db: ctx.dbi(),
        name: key,
        found,
        version,
        head,
        count,
        pending: BTreeMap::new(),
        replaced: None,
    })
}

/// Runs `f` on the list `key` as one atomic read-modify-write (WRONGTYPE for another kind).
fn modify<'c, T>(
    ctx: &'c Ctx<'c>,
    key: &'c [u8],
    mut f: impl FnMut(&mut ListEdit<'_, '_>) -> Result<T>,
) -> Result<T> {
    super::collections::update_key(ctx, key, |read, record| {
        let mut edit = start(ctx, read, key, record)?;
        let out = f(&mut edit)?;
        Ok((edit.finish(), out))
    })
}

/// [`modify`] returning the writes instead of applying them (LMOVE: the caller holds the exec
/// lock exclusively and writes both lists in one batch).
fn plan<'c, T>(
    ctx: &'c Ctx<'c>,
    key: &'c [u8],
    f: impl FnOnce(&mut ListEdit<'_, '_>) -> Result<T>,
) -> Result<(T, Vec<BatchOp>)> {
    if json_exists(ctx, key)? {
        return Err(Error::WrongType);
    }
    let get = |k: &[u8]| ctx.db().get(k);
    let read = GroupRead::new(&get);
    let record = ctx.db().get(&string_key(ctx.dbi(), key))?;
    let mut edit = start(ctx, &read, key, record)?;
    let out = f(&mut edit)?;
    Ok((out, edit.finish()))
}

/// The event of a pop from one side.
fn pop_event(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

/// The events of elements popped from `key`: the pop, and `del` when it emptied the list.
fn notify_popped(ctx: &mut Ctx<'_>, key: &Bytes, left: bool, emptied: bool) {
    ctx.notify(notify::LIST, pop_event(left), key);
    if emptied {
        ctx.notify(notify::GENERIC, "del", key);
    }
}

fn push_event(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

fn push(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool, only_existing: bool) -> Result<Reply> {
    let n = modify(ctx, &args[1], |l| {
        if only_existing && !l.exists() {
            return Ok(0);
        }
        for v in &args[2..] {
            l.push(left, v.clone());
        }
        Ok(l.count)
    })?;
    if n > 0 {
        ctx.session.note_key_push(&args[1]);
        ctx.notify(notify::LIST, push_event(left), &args[1]);
    }
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn lpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    push(ctx, args, true, false)
}

fn rpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    push(ctx, args, false, false)
}

fn lpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    push(ctx, args, true, true)
}

fn rpushx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    push(ctx, args, false, true)
}

fn pop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> Result<Reply> {
    let name = if left { "lpop" } else { "rpop" };
    if args.len() > 3 {
        return Err(Error::WrongArity(name.into()));
    }
    let count = match args.get(2) {
        None => None,
        Some(c) => match crate::num::parse_i64(c) {
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(Error::command("value is out of range, must be positive")),
        },
    };
    let want = count.unwrap_or(1);
    // One atomic read-and-pop (an absent list writes nothing).
    let popped = modify(ctx, &args[1], |l| {
        if !l.exists() {
            return Ok(None);
        }
        let out = l.pop_many(left, want)?;
        Ok(Some((out, l.count == 0)))
    })?;
    if let Some((out, emptied)) = &popped {
        if !out.is_empty() {
            notify_popped(ctx, &args[1], left, *emptied);
        }
    }
    let popped = popped.map(|(out, _)| out);
    Ok(match (popped, count) {
        (None, Some(_)) => Reply::NilArray,
        (None, None) => Reply::Nil,
        (Some(v), None) => Reply::bulk_or_nil(v.into_iter().next()),
        (Some(v), Some(_)) => Reply::Array(v.into_iter().map(Reply::Bulk).collect()),
    })
}

fn lpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    pop(ctx, args, true)
}

fn rpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    pop(ctx, args, false)
}

fn llen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let n = read_list(ctx, &args[1])?.map_or(0, |f| f.meta.count);
    Ok(Reply::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// Redis's index arithmetic: a negative index counts from the end.
fn absolute(index: i64, len: u64) -> i64 {
    if index < 0 {
        index.saturating_add(i64::try_from(len).unwrap_or(i64::MAX))
    } else {
        index
    }
}

/// `start..=stop` (Redis's inclusive, negative-from-the-end range) as `from..to` positions
/// from the head, clamped to the list; empty when nothing is in range.
fn span(start: i64, stop: i64, len: u64) -> (u64, u64) {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let start = absolute(start, len).max(0);
    let stop = absolute(stop, len);
    if start > stop || start >= len_i {
        return (0, 0);
    }
    let stop = stop.min(len_i - 1);
    (start as u64, stop as u64 + 1)
}

fn lrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let Some(f) = read_list(ctx, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let (from, to) = span(start, stop, f.meta.count);
    // The elements go straight into the reply's wire form: no reply per element. Its buffer
    // starts at room for that many short elements (growing it from empty, reallocation by
    // reallocation, was a tenth of a pipelined LRANGE_100's CPU).
    let elements = usize::try_from(to.saturating_sub(from)).unwrap_or(usize::MAX);
    let mut out = EncodedBulks::with_capacity(
        elements
            .saturating_mul(LRANGE_BYTES_PER_ELEMENT_GUESS)
            .min(LRANGE_BUFFER_BYTES_MAX),
    );
    list_visit(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        f.meta.version,
        f.meta.head.wrapping_add(from),
        f.meta.head.wrapping_add(to),
        &mut |v| out.push(v),
    )?;
    Ok(Reply::Bulks(out))
}

fn lindex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis's order: the key (absent: nil, another kind: WRONGTYPE), then the index.
    let Some(f) = read_list(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let index = int_arg(&args[2])?;
    let i = absolute(index, f.meta.count);
    if i < 0 || i as u64 >= f.meta.count {
        return Ok(Reply::Nil);
    }
    let k = list_key(
        ctx.dbi(),
        &args[1],
        f.meta.version,
        f.meta.head.wrapping_add(i as u64),
    );
    Ok(Reply::bulk_or_nil(ctx.db().get(&k)?))
}

fn lset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    // Redis's order: the key (absent: "no such key"), its type, then the index.
    modify(ctx, &args[1], |l| {
        if !l.exists() {
            return Err(Error::command("no such key"));
        }
        let index = int_arg(&args[2])?;
        let i = absolute(index, l.count);
        if i < 0 || i as u64 >= l.count {
            return Err(Error::command("index out of range"));
        }
        l.set(i as u64, args[3].clone());
        Ok(())
    })?;
    ctx.notify(notify::LIST, "lset", &args[1]);
    Ok(Reply::ok())
}

fn ltrim(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let trimmed = modify(ctx, &args[1], |l| {
        if l.exists() {
            let (from, to) = span(start, stop, l.count);
            l.trim(from, to);
            return Ok(Some(l.count == 0));
        }
        Ok(None)
    })?;
    if let Some(emptied) = trimmed {
        // Redis reports the trim, to the events and to WATCH, whether or not it removed
        // anything (a trim that removed something has told WATCH already).
        ctx.signal_modified(&args[1]);
        ctx.notify(notify::LIST, "ltrim", &args[1]);
        if emptied {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
    }
    Ok(Reply::ok())
}

fn lrem(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let count = int_arg(&args[2])?;
    let target = &args[3];
    let (removed, emptied) = modify(ctx, &args[1], |l| {
        if !l.exists() {
            return Ok((0, false));
        }
        let all = l.all()?;
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0usize;
        let mut keep = vec![true; all.len()];
        let indexes: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..all.len()).rev())
        } else {
            Box::new(0..all.len())
        };
        for i in indexes {
            if removed == limit {
                break;
            }
            if all[i] == *target {
                keep[i] = false;
                removed += 1;
            }
        }
        if removed > 0 {
            let rest = all
                .into_iter()
                .zip(keep)
                .filter_map(|(v, k)| k.then_some(v))
                .collect();
            l.replace(rest);
        }
        Ok((removed, l.count == 0))
    })?;
    if removed > 0 {
        ctx.notify(notify::LIST, "lrem", &args[1]);
        if emptied {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
    }
    Ok(Reply::Int(removed as i64))
}

fn linsert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return Err(Error::Syntax);
    };
    let n = modify(ctx, &args[1], |l| {
        if !l.exists() {
            return Ok(0);
        }
        let mut all = l.all()?;
        let Some(i) = all.iter().position(|v| *v == args[3]) else {
            return Ok(-1);
        };
        all.insert(if after { i + 1 } else { i }, args[4].clone());
        let n = all.len() as i64;
        l.replace(all);
        Ok(n)
    })?;
    if n > 0 {
        ctx.session.note_key_push(&args[1]);
        ctx.notify(notify::LIST, "linsert", &args[1]);
    }
    Ok(Reply::Int(n))
}

fn lpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let mut rank: i64 = 1;
    let mut count: Option<u64> = None;
    let mut maxlen: u64 = 0;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let positive = |arg: &[u8], what: &str| -> Result<u64> {
            match crate::num::parse_i64(arg) {
                Some(n) if n >= 0 => Ok(n as u64),
                _ => Err(Error::command(format!("{what} can't be negative"))),
            }
        };
        if is(&args[j], "RANK") && more {
            rank = int_arg(&args[j + 1])?;
            if rank == i64::MIN {
                return Err(Error::command(
                    "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ));
            }
            if rank == 0 {
                return Err(Error::command(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&args[j], "COUNT") && more {
            count = Some(positive(&args[j + 1], "COUNT")?);
        } else if is(&args[j], "MAXLEN") && more {
            maxlen = positive(&args[j + 1], "MAXLEN")?;
        } else {
            return Err(Error::Syntax);
        }
        j += 2;
    }
    let Some(f) = read_list(ctx, &args[1])? else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let all = list_range(
        ctx.db(),
        ctx.dbi(),
        &args[1],
        f.meta.version,
        f.meta.head,
        f.meta.head.wrapping_add(f.meta.count),
    )?;
    let len = all.len();
    let order: Box<dyn Iterator<Item = usize>> = if rank < 0 {
        Box::new((0..len).rev())
    } else {
        Box::new(0..len)
    };
    let skip = rank.unsigned_abs() - 1;
    let mut matches = 0u64;
    let mut found = Vec::new();
    for (examined, i) in order.enumerate() {
        if maxlen != 0 && examined as u64 >= maxlen {
            break;
        }
        if all[i] != args[2] {
            continue;
        }
        matches += 1;
        if matches > skip {
            found.push(Reply::Int(i as i64));
            let wanted = count.unwrap_or(1);
            if wanted != 0 && found.len() as u64 >= wanted {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Nil),
    })
}

fn side(arg: &[u8]) -> Result<bool> {
    if is(arg, "LEFT") {
        Ok(true)
    } else if is(arg, "RIGHT") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

fn lmove_generic(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
) -> Result<Reply> {
    // The dispatcher holds the exec lock exclusively: the reads below stay true until the one
    // batch that changes both lists is written.
    let Some(_) = read_list(ctx, src)? else {
        return Ok(Reply::Nil);
    };
    if src == dst {
        let v = modify(ctx, src, |l| {
            let v = l.pop(from_left)?;
            if let Some(v) = &v {
                l.push(to_left, v.clone());
            }
            Ok(v)
        })?;
        if v.is_some() {
            ctx.session.note_key_push(src);
            // Redis pushes onto the destination first, then reports the pop.
            ctx.notify(notify::LIST, push_event(to_left), src);
            ctx.notify(notify::LIST, pop_event(from_left), src);
        }
        return Ok(Reply::bulk_or_nil(v));
    }
    read_list(ctx, dst)?;
    lmove_pop_push(ctx, src, dst, from_left, to_left).map(Reply::bulk_or_nil)
}

/// Moves one element from `src` to `dst` (two lists) in one batch; `None` when `src` is empty.
fn lmove_pop_push(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
) -> Result<Option<Bytes>> {
    let ((value, emptied), mut ops) = plan(ctx, src, |l| Ok((l.pop(from_left)?, l.count == 0)))?;
    let Some(value) = value else {
        return Ok(None);
    };
    let (_, pushed) = plan(ctx, dst, |l| {
        l.push(to_left, value.clone());
        Ok(())
    })?;
    ops.extend(pushed);
    ctx.db().write(ops)?;
    ctx.shared.note_writes(1);
    ctx.session.note_key_push(dst);
    ctx.notify(notify::LIST, push_event(to_left), dst);
    notify_popped(ctx, src, from_left, emptied);
    Ok(Some(value))
}

fn lmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (from_left, to_left) = (side(&args[3])?, side(&args[4])?);
    lmove_generic(ctx, &args[1], &args[2], from_left, to_left)
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    lmove_generic(ctx, &args[1], &args[2], false, true)
}

/// A blocking command's timeout: seconds as a float, 0 for none; Redis's errors. Returns the
/// deadline (`None`: wait for ever).
fn timeout_arg(arg: &[u8]) -> Result<Option<std::time::Instant>> {
    let secs = crate::num::parse_f64(arg)
        .filter(|s| !s.is_nan())
        .ok_or_else(|| Error::command("timeout is not a float or out of range"))?;
    // Redis 7.0 turns the seconds into milliseconds in a signed 64-bit integer: past its range
    // (infinities included) the value wraps negative, and that is the error it gives.
    if secs < 0.0 || secs * 1000.0 >= i64::MAX as f64 {
        return Err(Error::command("timeout is negative"));
    }
    if secs == 0.0 {
        return Ok(None);
    }
    let wait = std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::command("timeout is out of range"))?;
    // A deadline beyond what the clock can represent (about 9e15 s and more) is never reached:
    // wait for ever, as Redis does in effect.
    Ok(std::time::Instant::now().checked_add(wait))
}

/// What a blocking command does when there is nothing to take: inside EXEC (Redis does not
/// block there) answer `in_exec`; once its time is up, a null array (Redis's timeout reply);
/// otherwise mark the session blocked (the connection waits for a push or the deadline, then
/// runs the command again; `conn.rs`) and answer nothing yet.
pub(super) fn block_or_time_out(
    ctx: &mut Ctx<'_>,
    lists: &[Bytes],
    look: &Look,
    in_exec: Reply,
) -> Result<Reply> {
    let (seen_pushes, deadline) = (look.seen, look.deadline);
    if ctx.locking == super::Locking::Held {
        return Ok(in_exec);
    }
    if deadline.is_some_and(|d| d <= std::time::Instant::now()) {
        ctx.session.wait_ticket = None;
        return Ok(Reply::NilArray);
    }
    match &ctx.session.wait_ticket {
        Some(ticket) => ctx.shared.list_waiters.looked(ticket, seen_pushes),
        None => {
            // Queued by the logical database, which a waiting client keeps across SWAPDB (as
            // a client blocked in Redis stays on its database number).
            let db = ctx.session.db;
            let lists = lists.iter().map(|k| (db, k.clone())).collect();
            ctx.session.wait_ticket = Some(ctx.shared.list_waiters.enqueue(
                lists,
                (look.kind, look.group),
                seen_pushes,
            ));
        }
    }
    ctx.session.blocked = Some(crate::state::Blocked {
        seen_pushes,
        deadline,
    });
    Ok(Reply::Nil)
}

/// Whether a blocking command may take from `list` now: only when no client blocked on it
/// before this one is still waiting (if this one is not waiting yet, when none is), so the
/// clients blocked on a list get its elements in the order they blocked, as in Redis (each
/// one served leaves the queue and wakes the next). Inside EXEC (which never blocks) it takes
/// what is there.
pub(super) fn my_turn(ctx: &Ctx<'_>, list: &Bytes, look: &Look) -> bool {
    ctx.locking == super::Locking::Held
        || ctx.shared.list_waiters.ahead(
            &(ctx.session.db, list.clone()),
            (look.kind, look.group),
            ctx.session.wait_ticket.as_ref(),
        ) == 0
}

/// The deadline a blocked command keeps across its retries: the first run computes it from the
/// timeout argument; a retry reuses it (`Session::blocked` survives until the command answers).
pub(super) fn deadline_of(ctx: &Ctx<'_>, arg: &[u8]) -> Result<Option<std::time::Instant>> {
    match ctx.session.blocked {
        Some(b) => Ok(b.deadline),
        None => timeout_arg(arg),
    }
}

/// One look of a blocking command at its keys.
pub(super) struct Look {
    /// When it gives up (kept across looks; `None`: never).
    pub deadline: Option<std::time::Instant>,
    /// The list-change count before it looked (`ListWaiters::changes`).
    pub seen: u64,
    /// It waited already: this is a look again after a change.
    pub again: bool,
    /// What it takes from: lists or sorted sets.
    pub kind: KeyType,
    /// A stream consumer-group reader's group (`state::WaitKind`); 0 for the others.
    pub group: u64,
}

/// Starts a blocking command's look at its keys of `kind` (`timeout`: its timeout argument).
pub(super) fn look(ctx: &mut Ctx<'_>, timeout: &[u8], kind: KeyType) -> Result<Look> {
    let again = ctx.session.blocked.is_some();
    let deadline = deadline_of(ctx, timeout)?;
    ctx.session.blocked = None;
    let seen = ctx.shared.list_waiters.generation();
    Ok(Look {
        deadline,
        seen,
        again,
        kind,
        group: 0,
    })
}

/// A blocking command's read of a key it may take from: its first look answers WRONGTYPE for a
/// key of another kind; a client already waiting passes over such a key as empty and waits on,
/// as Redis serves a waiter only from a key of the kind it waits for (a list that became a
/// string and then a list again serves it).
pub(super) fn unless_other_kind<T>(again: bool, read: Result<Option<T>>) -> Result<Option<T>> {
    match read {
        Err(Error::WrongType) if again => Ok(None),
        other => other,
    }
}

fn bpop(ctx: &mut Ctx<'_>, args: &[Bytes], left: bool) -> Result<Reply> {
    let keys = &args[1..args.len() - 1];
    let look = look(ctx, &args[args.len() - 1], KeyType::List)?;
    // Redis's order: every key is looked at (WRONGTYPE for another kind) until one has an
    // element (for this client, after those blocked before it), which is popped.
    for key in keys {
        if unless_other_kind(look.again, read_list(ctx, key))?.is_none()
            || !my_turn(ctx, key, &look)
        {
            continue;
        }
        let (popped, emptied) = modify(ctx, key, |l| Ok((l.pop(left)?, l.count == 0)))?;
        if let Some(v) = popped {
            notify_popped(ctx, key, left, emptied);
            ctx.session.wait_ticket = None;
            return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(v)]));
        }
    }
    block_or_time_out(ctx, keys, &look, Reply::NilArray)
}

/// What LMPOP, BLMPOP, ZMPOP and BZMPOP take after `numkeys` (at `numkeys_at`): the keys, the
/// side (`sides`: LEFT/RIGHT or MIN/MAX; true for the second) and COUNT (default 1), with
/// Redis's errors in Redis's order.
pub(super) fn mpop_args<'a>(
    args: &'a [Bytes],
    numkeys_at: usize,
    sides: [&str; 2],
) -> Result<(&'a [Bytes], bool, usize)> {
    let numkeys = crate::num::parse_i64(&args[numkeys_at])
        .filter(|&n| n >= 1)
        .ok_or_else(|| Error::command("numkeys should be greater than 0"))?;
    let first = numkeys_at + 1;
    let side_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&i| i < args.len())
        .ok_or(Error::Syntax)?;
    let second = if is(&args[side_at], sides[0]) {
        false
    } else if is(&args[side_at], sides[1]) {
        true
    } else {
        return Err(Error::Syntax);
    };
    let mut count = None;
    let mut j = side_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "COUNT") && j + 1 < args.len() {
            let n = crate::num::parse_i64(&args[j + 1])
                .filter(|&n| n >= 1)
                .ok_or_else(|| Error::command("count should be greater than 0"))?;
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok((&args[first..side_at], second, count.unwrap_or(1)))
}

/// Up to `count` elements of the first of `keys` that holds a list (WRONGTYPE for another kind
/// found first), as `[key, [elements]]`; `None` when every list is empty (or, for a blocking
/// command's `look`, when other clients wait on them first).
fn mpop_first(
    ctx: &mut Ctx<'_>,
    keys: &[Bytes],
    left: bool,
    count: usize,
    look: Option<&Look>,
) -> Result<Option<Reply>> {
    let again = look.is_some_and(|l| l.again);
    for key in keys {
        if unless_other_kind(again, read_list(ctx, key))?.is_none()
            || look.is_some_and(|l| !my_turn(ctx, key, l))
        {
            continue;
        }
        let (popped, emptied) = modify(ctx, key, |l| {
            let out = l.pop_many(left, count)?;
            let out: Vec<Reply> = out.into_iter().map(Reply::Bulk).collect();
            Ok((out, l.count == 0))
        })?;
        if !popped.is_empty() {
            notify_popped(ctx, key, left, emptied);
            return Ok(Some(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                Reply::Array(popped),
            ])));
        }
    }
    Ok(None)
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
fn lmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (keys, right, count) = mpop_args(args, 1, ["LEFT", "RIGHT"])?;
    Ok(mpop_first(ctx, keys, !right, count, None)?.unwrap_or(Reply::NilArray))
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]: LMPOP that waits.
fn blmpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (keys, right, count) = mpop_args(args, 2, ["LEFT", "RIGHT"])?;
    let left = !right;
    let look = look(ctx, &args[1], KeyType::List)?;
    if let Some(reply) = mpop_first(ctx, keys, left, count, Some(&look))? {
        ctx.session.wait_ticket = None;
        return Ok(reply);
    }
    block_or_time_out(ctx, keys, &look, Reply::NilArray)
}

fn blpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bpop(ctx, args, true)
}

fn brpop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bpop(ctx, args, false)
}

fn bmove(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
    timeout: &[u8],
) -> Result<Reply> {
    let look = look(ctx, timeout, KeyType::List)?;
    if unless_other_kind(look.again, read_list(ctx, src))?.is_some() && my_turn(ctx, src, &look) {
        let reply = lmove_generic(ctx, src, dst, from_left, to_left)?;
        if reply != Reply::Nil {
            ctx.session.wait_ticket = None;
            return Ok(reply);
        }
    }
    block_or_time_out(ctx, std::slice::from_ref(src), &look, Reply::Nil)
}

fn blmove(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    let (from_left, to_left) = (side(&args[3])?, side(&args[4])?);
    bmove(ctx, &args[1], &args[2], from_left, to_left, &args[5])
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Result<Reply> {
    bmove(ctx, &args[1], &args[2], false, true, &args[3])
}
